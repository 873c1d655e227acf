"""Agreement of two orderings of the same systems: Kendall's tau-b and tau_AP (Yilmaz, Aslam and
Robertson 2008, "A new rank correlation coefficient for information retrieval"), which weighs
swaps near the top more. Inputs are the systems' scores (higher is better), aligned by system."""

from __future__ import annotations

import math

import numpy as np
from scipy import stats


def kendall_tau(x, y) -> float:
    """Kendall's tau-b of two score vectors (scipy.stats.kendalltau, ties corrected); NaN when
    either vector is constant or there are fewer than 2 systems."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:  # scipy would warn that the sample is too small, then answer NaN
        return math.nan
    return float(stats.kendalltau(x, y).statistic)


def tau_ap(estimated, actual) -> float:
    """tau_AP of the ordering by `estimated` scores against the true ordering by `actual` scores:
    2 / (N - 1) x sum over ranks i = 2..N of C(i) / (i - 1), minus 1, where C(i) counts the systems
    ranked above the i-th system of the estimated ordering that the true ordering also ranks above
    it. The definition has no ties; here a pair tied in both orderings agrees (counts 1) and a pair
    tied in one only counts 1/2, so the value never depends on the order within a tie and equals
    the definition without ties. 1 = the same ordering, -1 = reversed; NaN for fewer than 2
    systems or when either ordering ties every system (as kendall_tau)."""
    estimated, actual = np.asarray(estimated, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    n = len(estimated)
    if n < 2 or np.all(estimated == estimated[0]) or np.all(actual == actual[0]):
        return math.nan
    order = np.argsort(-estimated, kind="stable")
    ranked_estimated, ranked_actual = estimated[order], actual[order]
    total = 0.0
    for i in range(1, n):
        tied_estimated = ranked_estimated[:i] == ranked_estimated[i]
        above, tied_actual = ranked_actual[:i] > ranked_actual[i], ranked_actual[:i] == ranked_actual[i]
        agree = np.where(tied_estimated, np.where(tied_actual, 1.0, 0.5), np.where(tied_actual, 0.5, above))
        total += agree.sum() / i
    return float(2 * total / (n - 1) - 1)
