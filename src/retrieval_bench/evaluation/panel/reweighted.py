"""score.weights real-mix: the leaderboard's headline reweighted to the mix of kinds of the real
(else hand-written) questions, so that a golden set whose generated questions are mostly of one
kind ranks the systems as the real traffic would.

A system's reweighted mean of a metric is sum_k w_k x mean_k: mean_k its mean over the compared
questions of answerable kind k, w_k kind k's share of the reference questions' mix
(goldenset.kinds.mix, the rules generate.kinds match uses), unanswerable questions' share dropped
(they are in no ranking mean) and the rest renormalised to sum to 1; a kind of the mix that no
compared question has is dropped too (and named), the rest renormalised again. The interval is a
stratified bootstrap: each resample draws each kind's questions within that kind (as many as it
has) and applies the weights, so the kinds' counts stay fixed as the weights assume. The Holm marks
are the leaderboard's paired sign-flip tests on the per-question differences scaled by
c_i = w_k(i) x n / n_k(i) (their mean is the reweighted mean difference; scaling each question's
difference by a fixed positive number keeps it symmetric under the null, so the test stays exact).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.question_sets import ALL, REFERENCE_SETS, question_set_of
from retrieval_bench.evaluation.panel.leaderboard import entry_table, leaderboard_metrics, rank_systems
from retrieval_bench.evaluation.score.abstention import UNANSWERABLE
from retrieval_bench.evaluation.score.per_question import kinds_of
from retrieval_bench.evaluation.stats import expanded_tail
from retrieval_bench.goldenset.kinds import mix

BATCH_ELEMENTS = 4_000_000  # as stats' bootstrap: ~32 MB of indices at once


def real_mix(golden: Sequence[Mapping]) -> tuple[str, dict[str, float]]:
    """(the question set the mix is taken from, {answerable kind: weight}): kinds.mix of the golden
    rows of the real set, else of the hand-written one, unanswerable dropped and renormalised.
    One line (InputError) when there is neither, or when all of them are unanswerable."""
    for name in REFERENCE_SETS:
        rows = [dict(row) for row in golden if question_set_of(row) == name]
        if rows:
            break
    else:
        raise InputError(
            "score.weights real-mix: the golden set has no real or hand-written question to take the mix of kinds "
            "from; add some (generate.handwritten, or real labelled queries) or set score.weights: none"
        )
    shares = {kind: share for kind, share in mix(rows) if kind != UNANSWERABLE}
    if not shares:
        raise InputError(
            f"score.weights real-mix: every {name} question is unanswerable: no answerable kind to weight; "
            "set score.weights: none"
        )
    return name, normalised(shares)


def normalised(weights: Mapping[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    return {kind: weight / total for kind, weight in weights.items()}


def question_factors(kinds: np.ndarray, weights: Mapping[str, float]) -> np.ndarray:
    """c_i = w_k(i) x n / n_k(i) (0 for a kind without weight): mean(c x values) = weighted_mean."""
    factors = np.zeros(len(kinds))
    for kind, weight in weights.items():
        mask = kinds == kind
        factors[mask] = weight * len(kinds) / mask.sum()
    return factors


def stratified_bootstrap_ci(
    values: np.ndarray,
    kinds: np.ndarray,
    weights: Mapping[str, float],
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """The interval of weighted_mean: each resample draws each weighted kind's n_k questions with
    replacement within the kind (kinds in `weights` order, seeded) and takes the weighted mean of
    the kinds' resampled means; the ends are the expanded percentile interval's quantiles
    (stats.paired_bootstrap_ci's, n the weighted questions)."""
    values = np.asarray(values, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    for kind, weight in weights.items():
        own = values[kinds == kind]
        step = max(1, BATCH_ELEMENTS // len(own))  # resample indices drawn at once: bounds memory
        for start in range(0, resamples, step):
            draws = rng.integers(0, len(own), size=(min(step, resamples - start), len(own)))
            means[start : start + len(draws)] += weight * own[draws].mean(axis=1)
    n = int(sum((kinds == kind).sum() for kind in weights))
    tail = expanded_tail(n, level)
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def reweighted(
    aligned: dict[str, pd.DataFrame],
    golden: Sequence[Mapping],
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> dict | None:
    """The leaderboard's reweighted headline over all compared questions (`aligned`, as
    leaderboard.scorable gives them): {mix_of, weights (over the kinds compared), absent (kinds of
    the mix no compared question has), n_questions, n_by_kind, metrics: {metric: rank_systems'
    entry, its means reweighted, its interval stratified}}; None without a compared question (the
    board then has no headline to reweight: leaderboard.left_out says why)."""
    source, mixed = real_mix(golden)
    first = next(iter(aligned.values()))
    if not len(first):
        return None
    kinds = kinds_of(first)
    present = set(kinds)
    weights = normalised({kind: weight for kind, weight in mixed.items() if kind in present})
    if not weights:
        raise InputError(
            f"score.weights real-mix: no compared question is of a kind of the {source} questions' mix "
            f"({', '.join(mixed)}); set score.weights: none"
        )
    factors = question_factors(kinds, weights)
    metrics = {}
    for name, column in leaderboard_metrics(first.columns):
        values = {system: table[column].to_numpy(dtype=float) for system, table in aligned.items()}
        ranked = rank_systems({s: factors * v for s, v in values.items()}, resamples, seed, level)
        for system, row in ranked["systems"].items():
            row["ci_low"], row["ci_high"] = stratified_bootstrap_ci(
                values[system], kinds, weights, resamples, seed, level
            )
        metrics[name] = ranked
    return {
        "mix_of": source,
        "weights": {kind: round(weight, 4) for kind, weight in weights.items()},
        "absent": [kind for kind in mixed if kind not in present],
        "n_questions": len(first),
        "n_by_kind": {kind: int((kinds == kind).sum()) for kind in sorted(present)},
        "metrics": metrics,
    }


def weights_text(entry: Mapping) -> str:
    """How the headline is weighted, e.g. "reweighted to the real mix: single 0.70, multi 0.30"."""
    text = f"reweighted to the {entry['mix_of']} mix: " + ", ".join(f"{k} {w:.2f}" for k, w in entry["weights"].items())
    absent = entry["absent"]
    return text + (f" ({', '.join(absent)}: in the mix, no compared question; dropped)" if absent else "")


def headline_entry(board: Mapping) -> Mapping:
    """The entry ({n_questions, metrics}) the board's headline is read from: the reweighted one
    with score.weights real-mix, else its headline question set's."""
    return board.get("reweighted") or board["question_sets"].get(board.get("headline_set", ALL), {})


def reweighted_lines(board: Mapping) -> list[str]:
    """leaderboard.md's reweighted headline (score.weights real-mix), before the question sets:
    its table and how it is weighted and tested."""
    entry = board["reweighted"]
    title = f"the headline: all questions, {weights_text(entry)}"
    return [
        *entry_table(dict(board), dict(entry), title),
        "Each system's mean is sum of weight x its mean over the compared questions of the kind (n by kind: "
        + ", ".join(f"{k} {n}" for k, n in entry["n_by_kind"].items())
        + "); its interval resamples each kind's questions within the kind; the tests are the paired sign-flip "
        "tests of the reweighted differences (docs/reference/metrics.md#reweighted-to-the-real-mix).",
        "",
    ]
