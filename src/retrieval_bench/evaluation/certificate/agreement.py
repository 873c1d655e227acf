"""Does a synthetic question set order a panel of systems as a real (or hand-written) one does?
Kendall tau and tau_AP of the orderings by mean score, each with a bootstrap interval over
questions, the share of system pairs whose verdict (B better / worse / no significant difference)
is the same on both sets, and the pairs whose verdicts differ. Pure functions of score matrices:
one row per system (same order in both sets), one column per question of that set."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from retrieval_bench.evaluation.stats import (
    ALPHA,
    MC_PERMUTATIONS,
    Resampling,
    kendall_tau,
    kendall_tau_rows,
    sign_flip_p_value,
    tau_ap,
)

VERDICT_WORDS = {1: "better", -1: "worse", 0: "no significant difference"}
# Bootstrap draws of the (descriptive) tau intervals, shared by every metric: the ends are steps of the
# statistic, and at this many draws they stay put across seeds unless a tail's share is within ~0.2% of
# its bar (tests/evaluation/test_verdict.py); 100,000 cost 4 CPU-s a set at 8 systems, this 1 (issue 45)
RESAMPLES = 20_000


def pair_verdicts(
    scores: np.ndarray, alpha: float = ALPHA, permutations: int = MC_PERMUTATIONS, seed: int = 0
) -> np.ndarray:
    """For every pair (a, b), a < b, of the systems (rows): +1 when b is better than a (paired
    randomization test p < alpha over the set's questions, exact up to 20 nonzero differences,
    else `permutations` random flips of its own), -1 when worse, 0 otherwise; in
    itertools.combinations order."""
    verdicts = []
    for a, b in itertools.combinations(range(len(scores)), 2):
        diffs = scores[b] - scores[a]
        verdicts.append(pair_verdict(float(diffs.mean()), sign_flip_p_value(diffs, permutations, seed), alpha))
    return np.array(verdicts, dtype=np.int8)


def pair_verdict(mean_diff: float, p: float, alpha: float = ALPHA) -> int:
    """+1 (b better), -1 (worse) or 0 (no significant difference) from b - a's mean and its p."""
    return int(np.sign(mean_diff)) if p < alpha else 0


def verdict_agreement(first: np.ndarray, second: np.ndarray) -> float:
    """The share of pairs with the same verdict in both; NaN when there are no pairs."""
    return float(np.mean(first == second)) if len(first) else math.nan


def differing_pairs(first: np.ndarray, second: np.ndarray, systems: list[str], names: tuple[str, str]) -> list[dict]:
    """The pairs whose verdicts differ, each as {a, b, <first name>: verdict of b against a, ...};
    `flip` is true when the verdicts are opposite (not only one of them significant)."""
    rows = []
    for (a, b), v1, v2 in zip(itertools.combinations(systems, 2), first, second, strict=True):
        if v1 != v2:
            rows.append(
                {
                    "a": a,
                    "b": b,
                    names[0]: VERDICT_WORDS[int(v1)],
                    names[1]: VERDICT_WORDS[int(v2)],
                    "flip": bool(v1 * v2 < 0),
                }
            )
    return rows


@dataclass(frozen=True)
class Estimate:
    value: float
    low: float
    high: float

    def to_dict(self) -> dict:
        return {"value": self.value, "ci_low": self.low, "ci_high": self.high}


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval's ends: empirical quantiles of the draws (method inverted_cdf), so
    values the statistic takes (tau over 6 systems: steps of 2/15), not interpolations between two
    that would move with every draw. With RESAMPLES draws an end jumps a step across seeds only
    when a tail's true share sits within about 0.2% of (1 - level) / 2."""
    finite = values[~np.isnan(values)]
    if len(finite) == 0:
        return math.nan, math.nan
    low, high = np.quantile(finite, [(1 - level) / 2, 1 - (1 - level) / 2], method="inverted_cdf")
    return float(low), float(high)


def resampled_means(scores: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """(resamples, systems): the systems' means over `resamples` draws of the questions (columns)
    with replacement, as how often each question was drawn times the scores, in batches that
    bound memory at ~32 MB."""
    n = scores.shape[1]
    batch = max(1, 4_000_000 // max(n, 1))
    means = []
    for start in range(0, resamples, batch):
        size = min(batch, resamples - start)
        drawn = rng.integers(0, n, size=(size, n)) + (np.arange(size) * n)[:, None]
        counts = np.bincount(drawn.ravel(), minlength=size * n).reshape(size, n)
        means.append(counts @ scores.T / n)
    return np.concatenate(means) if means else np.empty((0, len(scores)))


def _tau_ap_rows(estimated: np.ndarray, actual: np.ndarray) -> np.ndarray:
    """stats.tau_ap of each row pair, vectorised: its closed form for ties taken per system. A
    system with `a` systems above it in the estimated ordering and a tie group of k sits at a rank
    i - 1 uniform over a..a+k-1, so the systems above count with weight mean 1/(i - 1) =
    (H(a+k-1) - H(a-1)) / k, and those of its own group with sum_{j=1}^{k-1} j / ((k-1)(a+j)) / k
    = ((k-1) - a (H(a+k-1) - H(a))) / ((k-1) k), H the harmonic numbers. One system v at a time
    over every row ((rows, systems) arrays, not (rows, systems, systems): 1.7x quicker at 20,000 x
    8); the agreements are sums of halves, exact in any order, and the systems' terms are summed
    as one row each, so the values are the same bits."""
    rows, width = estimated.shape
    out = np.full(rows, np.nan)
    if width < 2:
        return out
    harmonic = np.concatenate([[0.0], np.cumsum(1 / np.arange(1, 2 * width + 1))])
    terms = np.empty((rows, width))
    for v in range(width):
        higher, same = estimated > estimated[:, v : v + 1], estimated == estimated[:, v : v + 1]
        tied = actual == actual[:, v : v + 1]
        agree = (actual > actual[:, v : v + 1]) + np.where(same, 1.0, 0.5) * tied  # [r, u]: u above v
        agree[:, v] = 0.0
        above, size = higher.sum(axis=1), same.sum(axis=1)  # systems above v, v's group's size
        span = harmonic[above + size - 1] - harmonic[np.maximum(above - 1, 0)]
        from_above = np.where(above > 0, span / size, 0.0)
        inner = (size - 1) - above * (harmonic[above + size - 1] - harmonic[above])
        from_group = np.where(size > 1, inner / np.maximum((size - 1) * size, 1), 0.0)
        terms[:, v] = (agree * higher).sum(axis=1) * from_above + (agree * same).sum(axis=1) * from_group
    valid = (estimated != estimated[:, :1]).any(axis=1) & (actual != actual[:, :1]).any(axis=1)
    out[valid] = (2 * terms.sum(axis=1) / (width - 1) - 1)[valid]
    return out


def certificate(
    scores: tuple[np.ndarray, np.ndarray],
    verdicts: tuple[np.ndarray, np.ndarray],
    systems: list[str],
    names: tuple[str, str] = ("reference", "synthetic"),
    resampling: Resampling = Resampling(RESAMPLES),
    *,
    drawn: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict:
    """Kendall tau (tau-b) and tau_AP of the synthetic set's ordering against the reference set's
    (`scores`: the reference's and the synthetic set's score matrices), each with a percentile
    bootstrap interval at resampling.level (resampling.resamples draws of each set's questions with
    replacement, independently, from resampling.seed; their ends are empirical quantiles, values the
    statistic takes), the agreement of the two sets' pair `verdicts` (each set's pair_verdicts,
    uncorrected; a point figure: the certificate's verdict, evaluation.certificate.verdict, decides
    from the pairs themselves) and the pairs whose verdicts differ. `drawn`: each set's resampled
    means (resampled_means), when the draws are shared across metrics."""
    reference, synthetic = (np.asarray(one, dtype=np.float64) for one in scores)
    if drawn is None:
        rng = np.random.default_rng(resampling.seed)
        drawn = (
            resampled_means(reference, resampling.resamples, rng),
            resampled_means(synthetic, resampling.resamples, rng),
        )
    drawn_ref, drawn_syn = drawn
    taus, aps = kendall_tau_rows(drawn_ref, drawn_syn), _tau_ap_rows(drawn_syn, drawn_ref)
    means_ref, means_syn = reference.mean(axis=1), synthetic.mean(axis=1)
    level = resampling.level
    return {
        "kendall_tau": Estimate(kendall_tau(means_ref, means_syn), *percentile_interval(taus, level)).to_dict(),
        "tau_ap": Estimate(tau_ap(means_syn, means_ref), *percentile_interval(aps, level)).to_dict(),
        "pair_agreement": {"value": verdict_agreement(*verdicts)},
        "pairs": len(verdicts[0]),
        "differing_pairs": differing_pairs(*verdicts, systems, names),
    }
