"""Does a synthetic question set order a panel of systems as a real (or hand-written) one does?
Kendall tau and tau_AP of the orderings by mean score, the share of system pairs whose verdict
(B better / worse / no significant difference) is the same on both sets, each with a bootstrap
interval over questions, and the pairs whose verdicts differ. Pure functions of score matrices:
one row per system (same order in both sets), one column per question of that set."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

from retrieval_bench.evaluation.ordering import kendall_tau, tau_ap
from retrieval_bench.evaluation.stats import ALPHA, MC_PERMUTATIONS, sign_flip_p_value

VERDICT_WORDS = {1: "better", -1: "worse", 0: "no significant difference"}
# Random sign flips per test inside a bootstrap draw, where a p-value only feeds that draw's verdict:
# standard error 0.01 at a p of ALPHA, at 1/24 of the cost of MC_PERMUTATIONS
RESAMPLED_PERMUTATIONS = 500


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
        significant = sign_flip_p_value(diffs, permutations, seed) < alpha
        verdicts.append(int(np.sign(diffs.mean())) if significant else 0)
    return np.array(verdicts, dtype=np.int8)


def verdict_agreement(first: np.ndarray, second: np.ndarray) -> float:
    """The share of pairs with the same verdict in both; NaN when there are no pairs."""
    return float(np.mean(first == second)) if len(first) else math.nan


def differing_pairs(first: np.ndarray, second: np.ndarray, systems: list[str], names: tuple[str, str]) -> list[dict]:
    """The pairs whose verdicts differ, each as {a, b, <first name>: verdict of b against a, ...};
    `flip` is true when the verdicts are opposite (not only one of them significant)."""
    rows = []
    for (a, b), v1, v2 in zip(itertools.combinations(systems, 2), first, second):
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


def _statistics(
    reference: np.ndarray, synthetic: np.ndarray, verdicts: tuple[np.ndarray, np.ndarray]
) -> tuple[float, float, float]:
    means_ref, means_syn = reference.mean(axis=1), synthetic.mean(axis=1)
    return kendall_tau(means_ref, means_syn), tau_ap(means_syn, means_ref), verdict_agreement(*verdicts)


def _both_verdicts(
    reference: np.ndarray, synthetic: np.ndarray, permutations: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    return pair_verdicts(reference, permutations=permutations, seed=seed), pair_verdicts(
        synthetic, permutations=permutations, seed=seed
    )


def _interval(values: list[float], level: float) -> tuple[float, float]:
    finite = np.asarray([v for v in values if not math.isnan(v)])
    if len(finite) == 0:
        return math.nan, math.nan
    # the statistics take few values (tau over 4 systems: multiples of 1/3): an endpoint is one of them,
    # the empirical quantile, not an interpolation between two that moves with every draw
    low, high = np.quantile(finite, [(1 - level) / 2, 1 - (1 - level) / 2], method="inverted_cdf")
    return float(low), float(high)


def certificate(
    reference: np.ndarray,
    synthetic: np.ndarray,
    systems: list[str],
    names: tuple[str, str] = ("reference", "synthetic"),
    resamples: int = 200,
    permutations: int = MC_PERMUTATIONS,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """Kendall tau (tau-b) and tau_AP of the synthetic set's ordering against the reference set's,
    and the verdict agreement, each with a percentile bootstrap interval (`resamples` draws of each
    set's questions with replacement, independently; the verdicts inside a draw use
    RESAMPLED_PERMUTATIONS random flips when a test cannot be enumerated, to stay fast), and the
    pairs whose verdicts differ. The interval's ends are empirical quantiles of the draws (values
    the statistic takes), so they move with the seed only when a quantile falls near a step."""
    reference, synthetic = np.asarray(reference, dtype=np.float64), np.asarray(synthetic, dtype=np.float64)
    verdicts = _both_verdicts(reference, synthetic, permutations, seed)
    point = _statistics(reference, synthetic, verdicts)
    rng = np.random.default_rng(seed)
    draws = []
    for _ in range(resamples):
        ref = reference[:, rng.integers(0, reference.shape[1], reference.shape[1])]
        syn = synthetic[:, rng.integers(0, synthetic.shape[1], synthetic.shape[1])]
        draws.append(_statistics(ref, syn, _both_verdicts(ref, syn, min(permutations, RESAMPLED_PERMUTATIONS), seed)))
    estimates = [Estimate(value, *_interval([draw[i] for draw in draws], level)) for i, value in enumerate(point)]
    return {
        "kendall_tau": estimates[0].to_dict(),
        "tau_ap": estimates[1].to_dict(),
        "pair_agreement": estimates[2].to_dict(),
        "pairs": len(verdicts[0]),
        "differing_pairs": differing_pairs(*verdicts, systems, names),
    }
