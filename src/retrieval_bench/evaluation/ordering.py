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
    it. 1 = the same ordering, -1 = reversed; NaN for fewer than 2 systems or when either ordering
    ties every system (as kendall_tau).

    The definition has no ties. Here a tie (equal scores) in the estimated ordering gives the exact
    average of the definition over every order of the tied systems, each order equally likely, so
    the value never depends on the order systems are listed in. Its systems spread over the ranks
    the tie spans, which weigh 1 / (i - 1) unequally: the average is taken in closed form per tie
    group (O(N^2), no enumeration of orders). A pair tied in the true ordering only counts 1/2
    above the other (the average over the two orders of that tie); a pair tied in both orderings
    agrees (counts 1 either way), so an ordering with ties has tau_AP 1 against itself.
    """
    estimated, actual = np.asarray(estimated, dtype=np.float64), np.asarray(actual, dtype=np.float64)
    n = len(estimated)
    if n < 2 or np.all(estimated == estimated[0]) or np.all(actual == actual[0]):
        return math.nan
    # agree[u, v]: u counts above v as the true ordering has it: 1 above, 0 below, 1/2 when it ties them
    # (either way, equally likely), 1 when both orderings tie them (they agree)
    tied_actual = actual[:, None] == actual[None, :]
    agree = (actual[:, None] > actual[None, :]) + np.where(
        estimated[:, None] == estimated[None, :], 1.0, 0.5
    ) * tied_actual
    np.fill_diagonal(agree, 0.0)
    total, above = 0.0, 0  # above: systems in the groups ranked above the current one
    for score in np.unique(estimated)[::-1]:
        group = estimated == score
        size = int(group.sum())
        slots = above + np.arange(size)  # i - 1 at the ranks the group spans; each system's rank is uniform among them
        if above:  # every system of a higher group is above each of this group's, weighed 1 / (i - 1) on average
            total += agree[np.ix_(estimated > score, group)].sum() * np.mean(1 / slots)
        if size > 1:
            # at the j-th of its ranks (j = 0..size-1) a system has a uniform j of the other size - 1
            # above it: each of its pairs inside the group weighs the mean of j / ((size - 1)(above + j))
            within = np.arange(1, size) / ((size - 1) * slots[1:])
            total += agree[np.ix_(group, group)].sum() * float(within.sum()) / size
        above += size
    return float(2 * total / (n - 1) - 1)


def pearson(x, y) -> float:
    """Pearson's correlation of two score vectors: how alike the systems' spacing is, not only their
    order; NaN when either vector is constant or there are fewer than 2 systems."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return math.nan
    return float(np.corrcoef(x, y)[0, 1])


def kendall_tau_rows(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """kendall_tau of each row of `x` against the same row of `y` (draws x systems), vectorised:
    tau-b = sum over pairs of sign(dx) sign(dy) / sqrt(untied pairs of x x untied pairs of y);
    NaN where a row is constant or there are fewer than 2 systems."""
    x, y = np.atleast_2d(np.asarray(x, dtype=np.float64)), np.atleast_2d(np.asarray(y, dtype=np.float64))
    first, second = np.triu_indices(x.shape[1], k=1)
    sx, sy = np.sign(x[:, first] - x[:, second]), np.sign(y[:, first] - y[:, second])
    untied = np.sqrt((sx * sx).sum(axis=1) * (sy * sy).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(untied > 0, (sx * sy).sum(axis=1) / np.where(untied > 0, untied, 1.0), np.nan)
