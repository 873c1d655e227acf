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
    kendall_tau,
    kendall_tau_rows,
    sign_flip_p_value,
    tau_ap,
)

VERDICT_WORDS = {1: "better", -1: "worse", 0: "no significant difference"}
# Bootstrap draws of the tau intervals: the ends are steps of the statistic, and at this many draws
# they stay put across seeds unless a tail's share is within ~0.1% of its bar (tests/evaluation/test_verdict.py)
RESAMPLES = 100_000


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


def percentile_interval(values: np.ndarray, level: float) -> tuple[float, float]:
    """The percentile interval's ends: empirical quantiles of the draws (method inverted_cdf), so
    values the statistic takes (tau over 6 systems: steps of 2/15), not interpolations between two
    that would move with every draw. With RESAMPLES draws an end jumps a step across seeds only
    when a tail's true share sits within about 0.1% of (1 - level) / 2."""
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
    """tau_ap of each row pair: vectorised where the estimated ordering has no ties (C(i) counted
    over the systems sorted by it), else by stats.tau_ap once per distinct pair of orderings
    (its closed form for ties; resampled orderings of a few systems repeat)."""
    out = np.full(len(estimated), np.nan)
    width = estimated.shape[1]
    if width < 2:
        return out
    ordered = np.sort(estimated, axis=1)
    untied = (np.diff(ordered, axis=1) != 0).all(axis=1) & (actual != actual[:, :1]).any(axis=1)
    order = np.argsort(-estimated[untied], axis=1)
    truth = np.take_along_axis(actual[untied], order, axis=1)
    # above[r, j, i]: the j-th system of the estimated order is above the i-th in the true one
    above = (truth[:, :, None] > truth[:, None, :]) + 0.5 * (truth[:, :, None] == truth[:, None, :])
    counted = (np.triu(np.ones((width, width)), k=1)[None] * above).sum(axis=1)[:, 1:]
    out[untied] = 2 / (width - 1) * (counted / np.arange(1, width)).sum(axis=1) - 1

    def ranks(rows: np.ndarray) -> np.ndarray:  # systems below each one: ties share a rank
        return (rows[:, :, None] > rows[:, None, :]).sum(axis=2)

    rest = ~untied
    if rest.any():
        patterns, where = np.unique(
            np.hstack([ranks(estimated[rest]), ranks(actual[rest])]), axis=0, return_inverse=True
        )
        values = np.array([tau_ap(row[:width], row[width:]) for row in patterns], dtype=np.float64)
        out[rest] = values[where.ravel()]
    return out


def certificate(
    reference: np.ndarray,
    synthetic: np.ndarray,
    verdicts: tuple[np.ndarray, np.ndarray],
    systems: list[str],
    names: tuple[str, str] = ("reference", "synthetic"),
    resamples: int = RESAMPLES,
    *,
    seed: int = 0,
    level: float = 0.95,
    drawn: tuple[np.ndarray, np.ndarray] | None = None,
) -> dict:
    """Kendall tau (tau-b) and tau_AP of the synthetic set's ordering against the reference set's,
    each with a percentile bootstrap interval (`resamples` draws of each set's questions with
    replacement, independently; their ends are empirical quantiles, values the statistic takes),
    the agreement of the two sets' pair `verdicts` (each set's pair_verdicts, uncorrected; a point
    figure: the certificate's verdict, evaluation.certificate.verdict, decides from the pairs themselves) and
    the pairs whose verdicts differ. `drawn`: each set's resampled means (resampled_means), when
    the draws are shared across metrics."""
    reference, synthetic = np.asarray(reference, dtype=np.float64), np.asarray(synthetic, dtype=np.float64)
    if drawn is None:
        rng = np.random.default_rng(seed)
        drawn = resampled_means(reference, resamples, rng), resampled_means(synthetic, resamples, rng)
    drawn_ref, drawn_syn = drawn
    taus, aps = kendall_tau_rows(drawn_ref, drawn_syn), _tau_ap_rows(drawn_syn, drawn_ref)
    means_ref, means_syn = reference.mean(axis=1), synthetic.mean(axis=1)
    return {
        "kendall_tau": Estimate(kendall_tau(means_ref, means_syn), *percentile_interval(taus, level)).to_dict(),
        "tau_ap": Estimate(tau_ap(means_syn, means_ref), *percentile_interval(aps, level)).to_dict(),
        "pair_agreement": {"value": verdict_agreement(*verdicts)},
        "pairs": len(verdicts[0]),
        "differing_pairs": differing_pairs(*verdicts, systems, names),
    }
