"""The statistics every verdict rests on, pure functions of arrays: paired tests of per-question
differences (B - A: bootstrap confidence interval, randomization test, minimum detectable
difference, wins/ties/losses), multiple-comparison corrections (Holm, Benjamini-Hochberg), the
agreement of two orderings (Kendall's tau-b, tau_AP) and of two raters (Cohen's kappa), and the
segments where a change regressed.

Why not scipy.stats.bootstrap / permutation_test: the interval here is the expanded percentile
interval (Hesterberg 2015), which scipy does not offer and which corrects the plain percentile
interval's undercoverage at the small n golden sets have (tests/evaluation/test_compare.py checks its
coverage); the p-value counts flips whose |mean| reaches the observed |mean| within 1e-12 (the
symmetric two-sided sign-flip test; tests/evaluation/test_exact_statistics.py checks it equals scipy's exact
paired test), enumerates all 2^m flips of up to 20 nonzero differences in milliseconds, and
otherwise draws each test's own flips; both draw their resamples in memory-bounded batches.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd
from scipy import special  # not scipy.stats: about 0.4 CPU-s more to import, in every stage that reports

from retrieval_bench.evaluation.score.segments import SEGMENT_COLUMNS

ALPHA = 0.05  # the significance level of every test: leaderboard, certificate, segment regressions, compare
MDD_FACTOR = 2.8  # z(1 - ALPHA/2) + z(0.80) = 1.960 + 0.842
MDD_FORMULA = f"2.8 x sd(paired differences) / sqrt(n)  (80% power, two-sided alpha {ALPHA})"
_BATCH_ELEMENTS = 4_000_000  # resample indices drawn at once: bounds memory at ~32 MB
EPS = 1e-12
EXACT_MAX_NONZERO = 20  # 2^20 sign flips: enumerated exactly, in milliseconds (meet in the middle)
# Monte-Carlo draws when they cannot all be enumerated: the standard error sqrt(p (1 - p) / draws)
# is <= 0.002 at p = 0.05 from 11,875 draws on
MC_PERMUTATIONS = 12_000
# The most resamples (and Monte-Carlo sign flips) one test may draw: 10x the default. Their time
# grows with draws x questions, so a mistyped 10**9 would run for days; at this many a percentile
# interval's ends and a p-value move between seeds by far less than the sampling error of the
# questions themselves.
MAX_RESAMPLES = 100_000


def tie_level(mean):
    """A mean (or an array of them) as "best" compares it: to 12 digits, so that equal means
    summed in another order (0.15 and 0.15000000000000002) tie, and the tie goes to the earlier
    system (max and argmax keep the first)."""
    return np.round(mean, 12) if isinstance(mean, np.ndarray) else round(mean, 12)


@dataclass(frozen=True)
class Resampling:
    """How a verdict resamples: `resamples` bootstrap draws (and sign-flip permutations), their
    `seed`, and the confidence `level` of the intervals."""

    resamples: int = 10_000
    seed: int = 0
    level: float = 0.95


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
    if n == 0 or np.isnan(diffs).any():  # as randomization_p_value: no interval from an unknown difference
        return math.nan, math.nan
    if not np.any(np.abs(diffs) > EPS):
        return 0.0, 0.0
    means = np.concatenate([diffs[rows].mean(axis=1) for rows in _resampled_rows(n, resamples, seed)])
    tail = expanded_tail(n, level)
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def _resampled_rows(n: int, resamples: int, seed: int):
    """paired_bootstrap_ci's resamples of n questions, a (batch, n) array of indices per batch. A
    panel's metrics and systems draw the same ones (same seed and n): where they fit in one batch
    they are drawn once and kept (the last n, resamples, seed only)."""
    if n * resamples <= _BATCH_ELEMENTS:
        return (_one_batch_of_rows(n, resamples, seed),)
    rng = np.random.default_rng(seed)
    return (rng.integers(0, n, size=(batch, n)) for batch in _batches(resamples, n))


@lru_cache(maxsize=1)
def _one_batch_of_rows(n: int, resamples: int, seed: int) -> np.ndarray:
    rows = np.random.default_rng(seed).integers(0, n, size=(resamples, n))
    rows.flags.writeable = False  # shared by every caller
    return rows


def expanded_tail(n: int, level: float) -> float:
    """The expanded percentile interval's tail for n questions: Phi(-sqrt(n / (n - 1)) t(n - 1, 1 -
    (1 - level)/2)), the plain (1 - level)/2 for n <= 1. (special's ndtr and stdtrit are what
    scipy.stats' norm.cdf and t.ppf call.)"""
    tail = (1 - level) / 2
    if n <= 1:
        return tail
    return float(special.ndtr(-math.sqrt(n / (n - 1)) * special.stdtrit(n - 1, 1 - tail)))


def randomization_p_value(diffs: np.ndarray, permutations: int = MC_PERMUTATIONS, seed: int = 0) -> float:
    """Two-sided paired randomization (sign-flip) test of "the mean difference is 0".

    Under the null each question's difference is equally likely to have either sign; p is the
    share of sign flips whose mean is at least as far from 0 as the observed mean (within 1e-12, so
    flips that tie the observed mean count). Differences within 1e-12 of 0 are ties (as in
    win_tie_loss) and count as 0. With EXACT_MAX_NONZERO (20) or fewer nonzero differences p is
    exact: all 2^m flips of the m nonzero ones. Otherwise it is estimated from max(`permutations`,
    MC_PERMUTATIONS) random flips drawn for this test alone (seeded by `seed` and the differences
    themselves, so two tests never share their errors): p = (count + 1) / (draws + 1). When
    every difference is 0 the runs are indistinguishable and p = 1 exactly.
    """
    return sign_flip_p_value(diffs, max(permutations, MC_PERMUTATIONS), seed)


def sign_flip_p_value(diffs: np.ndarray, draws: int, seed: int) -> float:
    """randomization_p_value with exactly `draws` random flips when it cannot enumerate them all:
    for tests inside a resampling loop, where each p-value only feeds one resampled verdict."""
    diffs = np.asarray(diffs, dtype=np.float64)
    n = len(diffs)
    if n == 0 or np.isnan(diffs).any():  # a NaN difference would make every flip count as less extreme
        return math.nan
    diffs = np.where(np.abs(diffs) > EPS, diffs, 0.0)
    nonzero = diffs[diffs != 0.0]
    # a flip counts when |its sum| >= threshold, i.e. |its mean| >= |observed mean| - EPS
    threshold = n * (abs(diffs.mean()) - EPS)
    if len(nonzero) == 0 or threshold <= 0:
        return 1.0
    if len(nonzero) <= EXACT_MAX_NONZERO:
        return _exact_count(nonzero, threshold) / 2 ** len(nonzero)
    rng = np.random.default_rng(_test_seed(diffs, seed))
    # A flip is a random bit per difference (1 = flipped): its sum is total - 2 x the flipped ones,
    # read 8 differences at a time from a table of each byte's 256 subset sums (byte b of group j
    # at 256 j + b of the raveled table: one take, half the time of indexing by (group, byte)).
    table = _byte_sums(nonzero)
    flat, offsets, total, count = table.ravel(), 256 * np.arange(len(table)), nonzero.sum(), 0
    for batch in _batches(draws, len(table)):
        flipped = flat.take(rng.integers(0, 256, size=(batch, len(table)), dtype=np.uint8) + offsets).sum(axis=1)
        count += int(np.count_nonzero(np.abs(total - 2 * flipped) >= threshold))
    return (count + 1) / (draws + 1)


def _byte_sums(values: np.ndarray) -> np.ndarray:
    """(ceil(m / 8), 256): row j, column b = the sum of values[8j : 8j + 8] whose bit is set in b."""
    padded = np.zeros(-(-len(values) // 8) * 8)
    padded[: len(values)] = values
    bits = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).astype(np.float64)
    return padded.reshape(-1, 8) @ bits.T


def _exact_count(nonzero: np.ndarray, threshold: float) -> int:
    """How many of the 2^m sign flips of `nonzero` have |sum| >= threshold (> 0): meet in the
    middle, every sum of one half against the sorted sums of the other (2 x 2^(m/2) sums, not 2^m)."""
    half = len(nonzero) // 2
    left, right = _signed_sums(nonzero[:half]), np.sort(_signed_sums(nonzero[half:]))
    # |l + r| >= t  <=>  r >= t - l  or  r <= -t - l, never both as t > 0
    above = len(right) - np.searchsorted(right, threshold - left, side="left")
    below = np.searchsorted(right, -threshold - left, side="right")
    return int(above.sum() + below.sum())


def _signed_sums(values: np.ndarray) -> np.ndarray:
    """The 2^len(values) sums of +-values."""
    sums = np.zeros(1)
    for value in values:
        sums = np.concatenate([sums + value, sums - value])
    return sums


def _test_seed(diffs: np.ndarray, seed: int) -> np.random.SeedSequence:
    """A seed of its own for each test: `seed` and a digest of the differences."""
    digest = hashlib.blake2b(diffs.tobytes(), digest_size=16).digest()
    return np.random.SeedSequence([seed, *np.frombuffer(digest, dtype="<u4").tolist()])


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
    """Questions where B scored higher, the same (within 1e-12), lower than A; a NaN score is a
    ValueError (it is neither a win, a tie nor a loss: callers drop unscored questions first)."""
    diffs = np.asarray(b, dtype=np.float64) - np.asarray(a, dtype=np.float64)
    if np.isnan(diffs).any():
        raise ValueError(f"win_tie_loss: {int(np.isnan(diffs).sum())} NaN differences (drop unscored questions first)")
    wins = int(np.sum(diffs > EPS))
    losses = int(np.sum(diffs < -EPS))
    return wins, len(diffs) - wins - losses, losses


# Multiple-comparison corrections of p-values: Holm (family-wise error) and Benjamini-Hochberg
# (false discovery rate). Pure functions; adjusted p-values, so that "adjusted p < alpha" is the
# corrected test at level alpha (as statsmodels' multipletests reports them).
HOLM = "Holm (family-wise error rate)"
BH = "Benjamini-Hochberg (false discovery rate)"


def holm_adjust(p_values) -> np.ndarray:
    """Holm's step-down adjusted p-values: the i-th smallest of m is multiplied by (m - i + 1),
    made non-decreasing in that order, and capped at 1 (Holm 1979)."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(p[order] * (m - np.arange(m)))
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(stepped, 1.0)
    return adjusted


def holm_against_best(
    best: str, names: Sequence[str], p_of_pair: Callable[[str, str], float | None]
) -> dict[str, tuple[float, float]]:
    """Each other system's p against `best`, raw and Holm-adjusted, the family being every pair of
    `names` (p_of_pair(a, b): the test of b - a; None: a pair that cannot be tested, left out).
    Not only the m - 1 pairs with the best: the best is picked from the same data, and Holm over
    those marked one of 8 equal systems worse than the best far more often than alpha
    (tests/evaluation/test_leaderboard.py counts both rules)."""
    others = [name for name in names if name != best]
    pairs = [(best, name) for name in others] + list(itertools.combinations(others, 2))
    raw = {pair: p for pair in pairs if (p := p_of_pair(*pair)) is not None}
    adjusted = dict(zip(raw, holm_adjust(list(raw.values())), strict=True))
    return {name: (raw[(best, name)], float(adjusted[(best, name)])) for name in others if (best, name) in raw}


def bh_adjust(p_values) -> np.ndarray:
    """Benjamini-Hochberg step-up adjusted p-values (Benjamini & Hochberg 1995): the i-th smallest
    of m is multiplied by m / i, made non-increasing from the largest down, and capped at 1 (as
    scipy.stats.false_discovery_control computes them, without importing scipy.stats in every
    leaderboard); none for no p-value. A NaN or a value outside [0, 1] is refused, as scipy does."""
    p = np.asarray(p_values, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p.copy()
    if not np.all((p >= 0) & (p <= 1)):  # a NaN too: it would make every adjusted p NaN
        raise ValueError(f"p-values must be between 0 and 1, got {p.tolist()}")
    order = np.argsort(p)
    stepped = np.minimum.accumulate((p[order] * (m / np.arange(1, m + 1)))[::-1])[::-1]
    adjusted = np.empty(m)
    adjusted[order] = np.clip(stepped, 0.0, 1.0)
    return adjusted


def cohen_kappa(a, b) -> float:
    """Cohen's kappa of two raters' labels of the same items (aligned): (p_o - p_e) / (1 - p_e),
    p_o the share of items they label alike, p_e the share expected by chance from each rater's
    own label frequencies. NaN with no items, or when chance agreement is certain (both raters
    gave every item the same single label)."""
    a, b = np.asarray(a), np.asarray(b)
    if len(a) != len(b):
        raise ValueError(f"kappa of {len(a)} against {len(b)} labels")
    if len(a) == 0:
        return math.nan
    labels = np.union1d(a, b)
    share_a = np.array([np.mean(a == label) for label in labels])
    share_b = np.array([np.mean(b == label) for label in labels])
    observed, chance = float(np.mean(a == b)), float(share_a @ share_b)
    return math.nan if chance >= 1.0 - EPS else (observed - chance) / (1.0 - chance)


# Agreement of two orderings of the same systems: Kendall's tau-b and tau_AP (Yilmaz, Aslam and
# Robertson 2008, "A new rank correlation coefficient for information retrieval"), which weighs
# swaps near the top more. Inputs are the systems' scores (higher is better), aligned by system.
def kendall_tau(x, y) -> float:
    """Kendall's tau-b of two score vectors (scipy.stats.kendalltau, ties corrected); NaN when
    either vector is constant or there are fewer than 2 systems."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if len(x) < 2:  # scipy would warn that the sample is too small, then answer NaN
        return math.nan
    from scipy import stats  # only for a panel compared with another ordering

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


# The segments where a change regressed: a paired randomization test within every segment
# (question set, document, folder, length), Benjamini-Hochberg over every segment tested.
def segment_groups(frame: pd.DataFrame, min_questions: int = 2) -> list[tuple[str, str, np.ndarray]]:
    """(segment column, value, row positions) of every segment value with `min_questions` or more
    questions, for the SEGMENT_COLUMNS present in `frame`; a value every question shares (one
    folder, one question set) is the whole comparison, not a segment, and is left out; so is one
    with the same questions as an earlier segment (a folder of one document), which would be the
    same test counted twice in the correction."""
    groups, seen = [], set()
    for column in (c for c in SEGMENT_COLUMNS if c in frame):
        for value, index in frame.reset_index(drop=True).groupby(column, sort=True).indices.items():
            if min_questions <= len(index) < len(frame) and tuple(index) not in seen:
                seen.add(tuple(index))
                groups.append((column, str(value), np.asarray(index)))
    return groups


def regressions(tests: list[dict], alpha: float = ALPHA) -> list[dict]:
    """The tests (dicts with delta and p) whose mean change is negative and significant after
    Benjamini-Hochberg over all of them, each with p_bh added."""
    adjusted = bh_adjust([test["p"] for test in tests])
    return [
        {**test, "p_bh": float(p)} for test, p in zip(tests, adjusted, strict=True) if p < alpha and test["delta"] < 0
    ]


def paired_segment_tests(
    a: pd.Series, b: pd.Series, frame: pd.DataFrame, permutations: int = 10_000, seed: int = 0
) -> list[dict]:
    """segment_tests of the per-question differences b - a (aligned with `frame`'s rows); a
    question without a value under either run is left out, neither a tie nor a NaN p-value."""
    diffs = pd.to_numeric(b, errors="coerce").to_numpy(dtype=float) - pd.to_numeric(a, errors="coerce").to_numpy(
        dtype=float
    )
    keep = ~np.isnan(diffs)
    return segment_tests(diffs[keep], frame[keep], permutations, seed)


def regression_report(tests: list[dict]) -> dict:
    """How many segment tests were run, their correction and the regressed segments."""
    return {"tests": len(tests), "correction": f"{BH}, alpha {ALPHA}", "regressed": regressions(tests)}


def segment_tests(diffs: np.ndarray, frame: pd.DataFrame, permutations: int = 10_000, seed: int = 0) -> list[dict]:
    """A paired randomization test of the per-question differences `diffs` (aligned with `frame`'s
    rows) within every segment: {segment, value, n_questions, delta, p}."""
    return [
        {
            "segment": column,
            "value": value,
            "n_questions": len(index),
            "delta": float(diffs[index].mean()),
            "p": randomization_p_value(diffs[index], permutations, seed),
        }
        for column, value, index in segment_groups(frame)
    ]
