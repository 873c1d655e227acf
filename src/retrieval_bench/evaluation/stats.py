"""Paired statistics of per-question differences (B - A): bootstrap confidence interval,
randomization test, minimum detectable difference, wins/ties/losses. Pure functions of arrays.

Why not scipy.stats.bootstrap / permutation_test: the interval here is the expanded percentile
interval (Hesterberg 2015), which scipy does not offer and which corrects the plain percentile
interval's undercoverage at the small n golden sets have (tests/test_compare.py checks its
coverage); the p-value counts flips whose |mean| reaches the observed |mean| (the symmetric
two-sided sign-flip test), where scipy doubles the smaller one-sided p; and both draw their
resamples in memory-bounded batches.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterator

import numpy as np
from scipy import stats

ALPHA = 0.05  # the significance level of every test: leaderboard, certificate, segment regressions, compare
MDD_FACTOR = 2.8  # z(1 - ALPHA/2) + z(0.80) = 1.960 + 0.842
MDD_FORMULA = f"2.8 x sd(paired differences) / sqrt(n)  (80% power, two-sided alpha {ALPHA})"
_BATCH_ELEMENTS = 4_000_000  # resample indices drawn at once: bounds memory at ~32 MB
EPS = 1e-12


def _batches(total: int, n: int) -> list[int]:
    size = max(1, _BATCH_ELEMENTS // max(n, 1))
    return [min(size, total - start) for start in range(0, total, size)]


def paired_bootstrap_ci(
    diffs: np.ndarray, resamples: int = 10_000, seed: int = 0, level: float = 0.95
) -> tuple[float, float]:
    """Bootstrap confidence interval of the mean of paired differences.

    Resamples questions with replacement (`resamples` times, seeded) and takes the mean difference
    of each resample. The interval is the expanded percentile interval (Hesterberg 2015, "What
    teachers should know about the bootstrap", sec. 5.3): the alpha/2 and 1 - alpha/2 quantiles
    of those means, with alpha/2 = Phi(-sqrt(n / (n - 1)) * t(n - 1, 1 - (1 - level)/2)), which
    undoes the plain percentile interval's undercoverage for small n (it is the plain percentile
    interval as n grows).
    """
    diffs = np.asarray(diffs, dtype=np.float64)
    n = len(diffs)
    if n == 0:
        return math.nan, math.nan
    if not np.any(np.abs(diffs) > EPS):
        return 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = np.concatenate(
        [diffs[rng.integers(0, n, size=(batch, n))].mean(axis=1) for batch in _batches(resamples, n)]
    )
    tail = (1 - level) / 2
    if n > 1:
        tail = float(stats.norm.cdf(-math.sqrt(n / (n - 1)) * stats.t.ppf(1 - tail, n - 1)))
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def randomization_p_value(diffs: np.ndarray, permutations: int = 10_000, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of "the mean difference is 0".

    Under the null each question's difference is equally likely to have either sign: flip signs
    at random `permutations` times (seeded) and count the flips whose mean is at least as far from
    0 as the observed mean; p = (count + 1) / (permutations + 1). When every difference is 0 the
    runs are indistinguishable and p = 1 exactly.
    """
    diffs = np.asarray(diffs, dtype=np.float64)
    n = len(diffs)
    if n == 0 or np.isnan(diffs).any():  # a NaN difference would make every flip count as less extreme
        return math.nan
    if not np.any(np.abs(diffs) > EPS):
        return 1.0
    observed = abs(diffs.mean())
    count = 0
    for signs in _sign_batches(n, permutations, seed):
        count += int(np.sum(np.abs(signs @ diffs / n) >= observed - EPS))
    return (count + 1) / (permutations + 1)


def _sign_batches(n: int, permutations: int, seed: int) -> Iterator[np.ndarray]:
    """The random signs (+1/-1) of `permutations` flips of `n` differences, seeded, in batches;
    one that fits in a single batch is drawn once per (n, permutations, seed) and reused: the
    certificate's bootstrap tests thousands of differences of the same length with one seed."""
    if n * permutations <= _BATCH_ELEMENTS:
        yield _single_batch(n, permutations, seed)
        return
    rng = np.random.default_rng(seed)
    for batch in _batches(permutations, n):
        yield rng.integers(0, 2, size=(batch, n), dtype=np.int8) * 2 - 1


@functools.lru_cache(maxsize=8)  # each at most _BATCH_ELEMENTS bytes
def _single_batch(n: int, permutations: int, seed: int) -> np.ndarray:
    signs = np.random.default_rng(seed).integers(0, 2, size=(permutations, n), dtype=np.int8) * 2 - 1
    signs.flags.writeable = False
    return signs


def min_detectable_delta(diffs: np.ndarray) -> float:
    """Smallest true mean difference this many questions detect with 80% power at two-sided alpha
    0.05: (z_0.975 + z_0.80) x sd(paired differences) / sqrt(n) = 2.8 x sd / sqrt(n)
    (normal approximation, sd with n - 1 degrees of freedom). NaN when it cannot be estimated:
    fewer than 2 questions, or differences that do not vary (e.g. identical runs)."""
    diffs = np.asarray(diffs, dtype=np.float64)
    if len(diffs) < 2:
        return math.nan
    sd = float(diffs.std(ddof=1))
    return float(MDD_FACTOR * sd / math.sqrt(len(diffs))) if sd > EPS else math.nan


def win_tie_loss(a: np.ndarray, b: np.ndarray) -> tuple[int, int, int]:
    """Questions where B scored higher, the same (within 1e-12), lower than A."""
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    wins = int(np.sum(diffs > EPS))
    losses = int(np.sum(diffs < -EPS))
    return wins, len(diffs) - wins - losses, losses
