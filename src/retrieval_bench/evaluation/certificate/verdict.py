"""The certificate's decision: does a synthetic question set order a panel as the reference set
(real queries, else hand-written ones) does? `agrees`, `disagrees` or `undetermined`, per metric
and per set, from tests over both sets' questions, never from a point estimate alone. Pure
functions of score matrices: one row per system (same order in both), one column per question.

Per metric:
- a pair of systems is *separable* when the reference set tells them apart: paired randomization
  test, Holm-corrected over all pairs, p < ALPHA. Only separable pairs can agree or flip; the
  rest are "not separable with these questions".
- a separable pair is *reproduced* when the synthetic set tells them apart in the same direction
  (the same test, Holm-corrected over the separable pairs), and *contradicted* when it is not and
  the two sets see significantly different differences, the synthetic one smaller or reversed
  (Welch's t-test of the two sets' per-question differences, Holm-corrected over every pair of
  every metric of the set): a flip, or a difference the synthetic questions cannot see.
  Otherwise it is *unsettled*.
- the metric `disagrees` when a pair is contradicted, `agrees` when every separable pair is
  reproduced, and is `undetermined` otherwise (or when no pair is separable).

The set `disagrees` when any metric does, `agrees` when none does and the headline metric (mrr)
agrees, and is `undetermined` otherwise. Random splits of one set are judged `disagrees` in at
most ALPHA of trials by construction (the Holm-corrected family); bench/certificate_power.py
measures that rate and the power against questions that quote their passage.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from scipy import stats

from retrieval_bench.evaluation.stats import ALPHA, EPS, MC_PERMUTATIONS, holm_adjust, pearson, sign_flip_p_value

AGREES, DISAGREES, UNDETERMINED = "agrees", "disagrees", "undetermined"
HEADLINE_METRIC = "mrr"
MIN_TO_RESAMPLE = 10  # fewer questions than this are not grown by resampling (questions_to_decide)
VERDICT_NUMBER = {AGREES: 1, UNDETERMINED: 0, DISAGREES: -1}  # metrics/headline.json holds numbers only


def welch_p(first: np.ndarray, second: np.ndarray) -> float:
    """Two-sided p-value of "the two independent samples have the same mean" (Welch's t-test,
    Welch-Satterthwaite degrees of freedom). Both constant: 0 when the means differ, else 1; NaN
    with fewer than 2 values in either."""
    first, second = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    if len(first) < 2 or len(second) < 2:
        return math.nan
    gap = abs(first.mean() - second.mean())
    var_f, var_s = first.var(ddof=1) / len(first), second.var(ddof=1) / len(second)
    if var_f + var_s <= EPS * EPS:
        return 0.0 if gap > EPS else 1.0
    dof = (var_f + var_s) ** 2 / (var_f**2 / (len(first) - 1) + var_s**2 / (len(second) - 1))
    return float(min(1.0, 2 * stats.t.sf(gap / math.sqrt(var_f + var_s), dof)))


def _pair_p(diffs: np.ndarray, permutations: int, seed: int) -> float:
    p = sign_flip_p_value(diffs, permutations, seed)
    return 1.0 if math.isnan(p) else p


def pair_calls(
    reference: np.ndarray,
    synthetic: np.ndarray,
    permutations: int = MC_PERMUTATIONS,
    seed: int = 0,
    every_synthetic_p: bool = True,
) -> list[dict]:
    """Every pair (a, b), a < b in itertools.combinations order: the reference's and the synthetic
    set's mean difference b - a and each set's raw paired randomization p (`p_reference`,
    `p_synthetic`: for separable pairs only unless `every_synthetic_p`, which the descriptive
    pair agreement needs and a resampled verdict does not), the raw Welch p of "the two sets see
    the same difference" (`p_differs`, corrected by judge_pairs over the whole set), whether the
    reference separates them, and for separable pairs the synthetic test's Holm-adjusted p
    (`p_reproduced`)."""
    pairs = list(itertools.combinations(range(len(reference)), 2))
    diffs = [(reference[b] - reference[a], synthetic[b] - synthetic[a]) for a, b in pairs]
    ref_p = [_pair_p(ref_diff, permutations, seed) for ref_diff, _ in diffs]
    separable = holm_adjust(ref_p) < ALPHA
    calls, reproduced_p = [], []
    for (a, b), (ref_diff, syn_diff), p, is_separable in zip(pairs, diffs, ref_p, separable):
        call = {
            "a": a,
            "b": b,
            "reference_diff": float(ref_diff.mean()),
            "synthetic_diff": float(syn_diff.mean()),
            "p_reference": p,
            "p_differs": welch_p(syn_diff, ref_diff),
            "separable": bool(is_separable),
        }
        if is_separable or every_synthetic_p:
            call["p_synthetic"] = _pair_p(syn_diff, permutations, seed)
        if is_separable:
            same_way = np.sign(call["reference_diff"]) * call["synthetic_diff"] > EPS
            reproduced_p.append(call["p_synthetic"] if same_way else 1.0)
        calls.append(call)
    for call, p in zip([c for c in calls if c["separable"]], holm_adjust(reproduced_p)):
        call["p_reproduced"] = float(p)
    return calls


def judge_pairs(calls_by_metric: dict[str, list[dict]]) -> None:
    """Marks each separable pair reproduced / contradicted / unsettled (`status`), in place. The
    Welch p-values are Holm-corrected over every pair of every metric, separable or not: the
    family is fixed before the reference picks its separable pairs, so a pair it picked for a
    lucky large difference cannot make a false alarm more likely than ALPHA (the winner's curse)."""
    every = [call for calls in calls_by_metric.values() for call in calls]
    adjusted = holm_adjust([1.0 if math.isnan(c["p_differs"]) else c["p_differs"] for c in every])
    for call, p in zip(every, adjusted):
        call["p_differs_holm"] = float(p)
        if not call["separable"]:
            continue
        smaller = abs(call["synthetic_diff"]) < abs(call["reference_diff"]) or (
            call["synthetic_diff"] * call["reference_diff"] < 0
        )
        if call["p_reproduced"] < ALPHA:
            call["status"] = "reproduced"
        elif p < ALPHA and smaller:
            call["status"] = "contradicted"
        else:
            call["status"] = "unsettled"


def metric_verdict(calls: list[dict]) -> dict:
    """The verdict of one metric from its judged pair calls, with the counts behind it."""
    counts = {
        key: sum(call.get("status") == key for call in calls) for key in ("reproduced", "contradicted", "unsettled")
    }
    separable = sum(call["separable"] for call in calls)
    if counts["contradicted"]:
        verdict = DISAGREES
    elif separable and counts["reproduced"] == separable:
        verdict = AGREES
    else:
        verdict = UNDETERMINED
    return {"verdict": verdict, "pairs": len(calls), "separable": separable, **counts}


def headline_metric(names) -> str:
    """The metric a set's verdict and line rest on: mrr, else the first there is."""
    names = list(names)
    return HEADLINE_METRIC if HEADLINE_METRIC in names else names[0]


def set_verdict(metric_verdicts: dict[str, str]) -> str:
    """disagrees when any metric does; agrees when none does and the headline metric agrees."""
    if DISAGREES in metric_verdicts.values():
        return DISAGREES
    return AGREES if metric_verdicts[headline_metric(metric_verdicts)] == AGREES else UNDETERMINED


def decide(
    reference: dict[str, np.ndarray],
    synthetic: dict[str, np.ndarray],
    permutations: int = MC_PERMUTATIONS,
    seed: int = 0,
    every_synthetic_p: bool = True,
) -> dict:
    """{verdict, metrics: {metric: {verdict, counts, calls}}} of a synthetic set against the
    reference, both as {metric: (systems x questions) matrix} (pair_calls for every_synthetic_p)."""
    calls = {
        name: pair_calls(reference[name], synthetic[name], permutations, seed, every_synthetic_p) for name in reference
    }
    judge_pairs(calls)
    metrics = {name: {**metric_verdict(metric_calls), "calls": metric_calls} for name, metric_calls in calls.items()}
    return {"verdict": set_verdict({name: m["verdict"] for name, m in metrics.items()}), "metrics": metrics}


def _floor_sizes(n_reference: int) -> list[int]:
    """Reference subset sizes for the noise floor: doubling from 5 up to half the reference."""
    largest = n_reference // 2
    sizes = [n for n in (5 * 2**i for i in range(20)) if n < largest]
    return sizes + [largest] if largest >= 5 else []


def noise_floor(reference: np.ndarray, synthetic: np.ndarray, draws: int = 50, seed: int = 0) -> dict:
    """How many reference questions order the panel as consistently as the synthetic set does.
    Each draw splits the reference questions at random into two halves: the first n questions of
    one half against the other half (Pearson correlation of the systems' means: their order and
    spacing, finer than a tau over a handful of systems) is the reference's own consistency at
    size n, and the synthetic set against that other half is the synthetic set's.
    `as_consistent_as` is where the mean curves cross (linear between sizes), with `bound` "about",
    "at least" (never crossed: at least half the reference) or "fewer than" (crossed at the
    smallest size, 5); None, with `why`, when the reference has fewer than 10 questions or either
    side's means do not vary (no correlation)."""
    n_ref = reference.shape[1]
    sizes = _floor_sizes(n_ref)
    rng = np.random.default_rng(seed)
    syn_means = synthetic.mean(axis=1)
    own, theirs = np.full((draws, len(sizes)), np.nan), np.full(draws, np.nan)
    for draw in range(draws):
        order = rng.permutation(n_ref)
        judge = reference[:, order[n_ref // 2 :]].mean(axis=1)
        theirs[draw] = pearson(syn_means, judge)
        for i, n in enumerate(sizes):
            own[draw, i] = pearson(reference[:, order[:n]].mean(axis=1), judge)
    synthetic_correlation = float(np.nanmean(theirs)) if sizes and not np.isnan(theirs).all() else math.nan
    curve = [
        {"n": n, "reference_correlation": float(np.nanmean(own[:, i])) if not np.isnan(own[:, i]).all() else math.nan}
        for i, n in enumerate(sizes)
    ]
    result = {
        "draws": draws,
        "synthetic_correlation": synthetic_correlation,
        "curve": curve,
        "as_consistent_as": None,
        "bound": None,
        "why": None,
    }
    points = [point for point in curve if not math.isnan(point["reference_correlation"])]
    if not sizes:
        return {**result, "why": "fewer than 10 reference questions"}
    if not points:
        return {**result, "why": "the reference's halves score every system alike"}
    if math.isnan(synthetic_correlation):
        return {**result, "why": "the synthetic set scores every system alike"}
    crossing = next(
        (i for i, point in enumerate(points) if point["reference_correlation"] >= synthetic_correlation), None
    )
    if crossing is None:
        return {**result, "as_consistent_as": points[-1]["n"], "bound": "at least"}
    if crossing == 0:
        return {**result, "as_consistent_as": points[0]["n"], "bound": "fewer than"}
    low, high = points[crossing - 1], points[crossing]
    share = (synthetic_correlation - low["reference_correlation"]) / (
        high["reference_correlation"] - low["reference_correlation"]
    )
    return {**result, "as_consistent_as": round(low["n"] + share * (high["n"] - low["n"])), "bound": "about"}


def questions_to_decide(
    reference: dict[str, np.ndarray],
    synthetic: dict[str, np.ndarray],
    draws: int = 10,
    permutations: int = 1_000,
    seed: int = 0,
    factors: tuple[int, ...] = (2, 4, 8, 16),
) -> dict:
    """For an undetermined set: how many questions would likely decide it, by resampling. The
    limiting set is the reference when it separates no pair on the headline metric, else the
    synthetic set; its questions are drawn with replacement at `factors` times its size (the same
    questions for every metric; the other set kept), then, if that never decides, both sets at
    once (a pair the reference only just separates needs both). The first size at which at least
    half of `draws` resampled verdicts (decide, the same families) are agrees or disagrees is
    returned as {grown: [reference and/or synthetic], n: {set: size in all}, why: None}; n None,
    with why (and the largest factor tried, or too_few: the set and its size), when none does, or
    when a set to grow has fewer than MIN_TO_RESAMPLE questions
    (copies of a handful of questions would look decisive). The estimate takes the differences the
    questions show as the true ones: it says how many questions like these would decide, not what
    more questions would show."""
    sets = {"reference": reference, "synthetic": synthetic}
    sizes = {name: next(iter(matrices.values())).shape[1] for name, matrices in sets.items()}
    headline = headline_metric(reference)
    calls = pair_calls(reference[headline], synthetic[headline], permutations, seed, every_synthetic_p=False)
    limiting = "synthetic" if any(call["separable"] for call in calls) else "reference"
    small = [name for name in ("reference", "synthetic") if sizes[name] < MIN_TO_RESAMPLE]
    if small:
        return {
            "grown": small,
            "n": None,
            "why": f"too few {small[0]} questions ({sizes[small[0]]}) to estimate how many would decide it",
            "too_few": {"set": small[0], "n": sizes[small[0]]},
        }
    rng = np.random.default_rng(seed)
    for grown in ([limiting], ["reference", "synthetic"]):
        for factor in factors:
            decided = 0
            for _ in range(draws):
                drawn = dict(sets)
                for name in grown:
                    picked = rng.integers(0, sizes[name], factor * sizes[name])
                    drawn[name] = {metric: matrix[:, picked] for metric, matrix in sets[name].items()}
                verdict = decide(drawn["reference"], drawn["synthetic"], permutations, seed, every_synthetic_p=False)[
                    "verdict"
                ]
                decided += verdict != UNDETERMINED
            if 2 * decided >= draws:
                return {"grown": grown, "n": {name: factor * sizes[name] for name in grown}, "why": None}
    return {
        "grown": ["reference", "synthetic"],
        "n": None,
        "why": f"not even {factors[-1]} times as many reference and synthetic questions would decide it (resampled)",
        "factor": factors[-1],
    }
