"""The certificate's decision: would a synthetic question set make the shipping decision the
reference set (real queries, else hand-written ones) makes? Pure functions of score matrices:
one row per system (same order in both sets), one column per question, and each question's
cluster (its document: questions on one page are not independent).

Per metric, from the reference: its best system b, and the *decision pairs*: b against every
system within `margin` of it (the close candidates), against the synthetic set's best (the
system it would ship), and the pairs named in `candidates`. Any other pair decides nothing: a
weak or outlying system cannot decide the verdict unless the synthetic set would ship it.
The hypotheses, each a difference synthetic - reference of a mean over questions:
- a decision pair: the synthetic set's difference b - a against the reference's (within `margin`?);
- the level: the systems' mean score (within `level_margin`? an easier or harder set).
Each estimate's standard error is clustered by document, each set on its own.

- `disagrees`: some hypothesis of some metric is beyond its margin, by one joint max-T
  permutation test (clusters permuted between the sets, studentized) over every pair and level of
  every metric: a set whose decision pairs and level are within their margins is judged
  `disagrees` with probability <= ALPHA (family-wise; asymptotically, the studentized
  permutation test is valid without exchangeability).
- `agrees`: the headline metric's every decision pair and its level are equivalent within their
  margins (TOST at ALPHA each: an intersection-union test, so no correction is owed; the
  synthetic set's best is then a close candidate), no metric disagrees, and the style
  classifier does not tell the sets apart (AUC <= max_style_auc): a set beyond a margin is
  judged `agrees` with probability <= ALPHA.
- `undetermined` otherwise, with how many questions per side would decide it (resampled).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
from scipy import special

from retrieval_bench.core.errors import InputError
from retrieval_bench.evaluation.certificate.states import AGREES, DISAGREES, UNDETERMINED
from retrieval_bench.evaluation.score.per_question import HEADLINE_CUTOFF, headline_column
from retrieval_bench.evaluation.stats import ALPHA, EPS, tie_level

HEADLINE_METRIC = "mrr"
MIN_TO_RESAMPLE = 10  # fewer questions than this are not grown by resampling (questions_to_decide)
# Max-T permutations, drawn in blocks: the p-value's Monte Carlo error at ALPHA is sqrt(.05 * .95 /
# 20_000) = 0.0015, and while the verdict's p lies within MC_BAND errors of ALPHA (where another seed
# could put it on the other side) another block is drawn, up to MAX_BLOCKS (1.28 million draws, about
# 5 CPU-s at 8 systems): the error shrinks to 0.0002, so only a p within about 0.0006 of the bar can
# still change verdict with the seed (bench/certificate_power.py counts the flips)
PERMUTATIONS = 20_000
MAX_BLOCKS = 64
MC_BAND = float(special.ndtri(1 - 0.001 / 2))  # 3.29: the two-sided 99.9% normal quantile
BOOTSTRAPS = 4_000  # cluster bootstrap draws of the same-winner probabilities
DECIDE_DRAWS = 200  # resampled sets per size in questions_to_decide
FACTORS = (2, 4, 8, 16)


@dataclass(frozen=True)
class Rule:
    """The practical margins (in units of the metric), the named decision pairs (system indexes)
    and the style classifier's bar (validity.* in params.yaml)."""

    margin: float = 0.03
    level_margin: float = 0.10
    candidates: tuple[tuple[int, int], ...] = ()
    max_style_auc: float = 0.85


@dataclass(frozen=True)
class Side:
    """One question set: {metric: (systems x questions)} and each question's cluster (0..G-1)."""

    matrices: dict[str, np.ndarray]
    clusters: np.ndarray

    @property
    def n(self) -> int:
        return int(next(iter(self.matrices.values())).shape[1])


def side(matrices: dict[str, np.ndarray], clusters=None) -> Side:
    """A Side, clusters relabelled 0..G-1; every question its own cluster when none are given or
    there is only one (a clustered variance needs two)."""
    n = next(iter(matrices.values())).shape[1]
    labels = np.arange(n) if clusters is None else np.unique(np.asarray(clusters), return_inverse=True)[1].ravel()
    if labels.size and labels.max() < 1:
        labels = np.arange(n)
    matrices = {m: np.asarray(x, dtype=np.float64) for m, x in matrices.items()}
    for metric, scores in matrices.items():
        if not np.isfinite(scores).all():  # a NaN would be the best mean and every statistic's NaN
            system, question = np.argwhere(~np.isfinite(scores))[0]
            raise InputError(f"{metric}: system {system} has no finite score for question {question}")
    return Side(matrices, labels)


def headline_metric(names) -> str:
    """The metric a set's verdict and line rest on: for multi-evidence questions (complete@k among
    the metrics) complete@10, whether every piece was found, as the leaderboard ranks them (else
    their deepest complete@k, as headline_column picks); otherwise mrr, else the first there is."""
    names = list(names)
    complete = headline_column(names, "complete", HEADLINE_CUTOFF)
    return complete or (HEADLINE_METRIC if HEADLINE_METRIC in names else names[0])


def tied_best(means: np.ndarray) -> list[int]:
    """The systems at the best mean (to tie_level's 12 digits), in panel order."""
    levels = tie_level(means)
    return [int(s) for s in np.flatnonzero(levels == levels.max())]


def decision_pairs(
    reference_means: np.ndarray, synthetic_means: np.ndarray, rule: Rule
) -> tuple[int, list[tuple[int, int]]]:
    """(the reference's best system b, the decision pairs): (b, s) for every s within the margin
    of b on the reference, (b, s) for every system the synthetic set ranks best when it is not one
    of those (the choice the synthetic set would make: a tie there is a choice of any of them, so
    none is left untested), then the named pairs. A tie for the reference's best goes to the first
    system; the others tied are within the margin of it, so each is a pair with it."""
    best = tied_best(reference_means)[0]
    close = [s for s in range(len(reference_means)) if reference_means[best] - reference_means[s] <= rule.margin + EPS]
    chosen = [s for s in tied_best(synthetic_means) if s not in close]
    pairs = [(best, s) for s in [*close, *chosen] if s != best]
    return best, pairs + [(a, b) for a, b in rule.candidates if (a, b) not in pairs and (b, a) not in pairs]


@dataclass(frozen=True)
class Family:
    """The tested hypotheses of every metric, as contrasts of the systems' scores."""

    metric: list[str]  # per hypothesis
    kind: list[str]  # "pair" or "level"
    pair: list[tuple[int, int] | None]
    margin: np.ndarray
    weights: np.ndarray  # (hypotheses, metrics * systems): the contrast of the stacked scores


def family(reference: Side, synthetic: Side, rule: Rule) -> Family:
    """The decision pairs (second minus first) and the level of every metric."""
    metrics = list(reference.matrices)
    systems = len(next(iter(reference.matrices.values())))
    rows: list[np.ndarray] = []
    meta: list[tuple[str, str, tuple[int, int] | None, float]] = []
    for i, metric in enumerate(metrics):
        _, pairs = decision_pairs(
            reference.matrices[metric].mean(axis=1), synthetic.matrices[metric].mean(axis=1), rule
        )
        for a, b in pairs:
            row = np.zeros(len(metrics) * systems)
            row[i * systems + b], row[i * systems + a] = 1.0, -1.0
            rows.append(row)
            meta.append((metric, "pair", (a, b), rule.margin))
        row = np.zeros(len(metrics) * systems)
        row[i * systems : (i + 1) * systems] = 1.0 / systems
        rows.append(row)
        meta.append((metric, "level", None, rule.level_margin))
    return Family(
        [m[0] for m in meta],
        [m[1] for m in meta],
        [m[2] for m in meta],
        np.array([m[3] for m in meta]),
        np.vstack(rows),
    )


def stacked(one: Side) -> np.ndarray:
    """(metrics * systems, questions): every metric's matrix, one under the other."""
    return np.vstack(list(one.matrices.values()))


def cluster_sums(values: np.ndarray, clusters: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """((clusters, rows) sums of `values` (rows x questions) by cluster, (clusters,) sizes)."""
    groups = int(clusters.max()) + 1
    sums = np.zeros((groups, len(values)))
    np.add.at(sums, clusters, values.T)
    return sums, np.bincount(clusters, minlength=groups).astype(np.float64)


def weighted_moments(weights: np.ndarray, sums: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(draws, rows) means and clustered variances of the mean of the questions in the clusters
    taken `weights` (draws x clusters) times each: var = G/(G-1) sum_g w_g (S_g - n_g mean)^2 / N^2,
    G the clusters taken, expanded so that one product serves every draw."""
    return moments_of(weights @ moment_columns(sums, sizes), sums.shape[1])


def moment_columns(sums: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """(clusters, 3 rows + 3): what weighted_moments takes weighted sums of, per cluster: its size,
    its sums S_g, S_g^2 and S_g n_g, n_g^2, and 1 (the clusters taken)."""
    return np.hstack(
        [sizes[:, None], sums, sums**2, sums * sizes[:, None], (sizes**2)[:, None], np.ones((len(sizes), 1))]
    )


def moments_of(weighted: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(means, clustered variances) from weighted sums of moment_columns (draws x columns)."""
    total, taken = weighted[:, 0], weighted[:, -1]
    sums, squares, cross = (weighted[:, 1 + i * rows : 1 + (i + 1) * rows] for i in range(3))
    mean = sums / total[:, None]
    spread = squares - 2 * mean * cross + mean**2 * weighted[:, -2:-1]
    variance = np.maximum(spread, 0) * (taken / np.maximum(taken - 1, 1) / total**2)[:, None]
    # one cluster says nothing of the spread: an infinite variance, so no test passes on it
    return mean, np.where((taken >= 2)[:, None], variance, np.inf)


def estimates(reference: Side, synthetic: Side, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(differences synthetic - reference of each contrast, their clustered standard errors)."""
    out = []
    for one in (reference, synthetic):
        sums, sizes = cluster_sums(weights @ stacked(one), one.clusters)
        out.append(weighted_moments(np.ones((1, len(sizes))), sums, sizes))
    (mean_r, var_r), (mean_s, var_s) = out
    return (mean_s - mean_r)[0], np.sqrt(var_r + var_s)[0]


ASSIGNMENT_BLOCK = 2_000_000  # draws x clusters drawn at once: ~16 MB of keys, ~40 MB with their order


def _assignment_blocks(
    groups_reference: int, groups_synthetic: int, draws: int, seed: int | tuple[int, int], rows: int
) -> Iterator[np.ndarray]:
    """(rows, G_r + G_s) booleans, `rows` draws at a time: the pooled clusters each draw gives the
    reference (G_r of them), by the order of uniform keys. The same draws whatever `rows` (a
    generator's stream goes on from one call to the next), in bounded memory however many clusters
    (10,000 real queries took 3.5 GB at once)."""
    total = groups_reference + groups_synthetic
    rng = np.random.default_rng(seed)
    if not draws:
        yield np.zeros((0, total), bool)
    for start in range(0, draws, max(rows, 1)):
        yield np.argsort(rng.random((min(rows, draws - start), total)), axis=1) < groups_reference


def max_t_null_in_blocks(
    reference: Side, synthetic: Side, weights: np.ndarray, draws: int, seed: int | tuple[int, int]
) -> np.ndarray:
    """max_t_null over `draws` random assignments of the clusters (seed `seed`), a block of draws at a time."""
    groups = (int(reference.clusters.max()) + 1, int(synthetic.clusters.max()) + 1)
    rows = max(1, ASSIGNMENT_BLOCK // max(sum(groups), 1))
    blocks = _assignment_blocks(*groups, draws, seed, rows)
    return np.concatenate([max_t_null(reference, synthetic, weights, block) for block in blocks])


def studentized(diff: np.ndarray, se: np.ndarray, margin: np.ndarray | float = 0.0) -> np.ndarray:
    """(|diff| - margin) / se; where se is 0, +inf beyond the margin and -inf within it; where se
    is infinite (a side of one cluster), -inf: no evidence either way."""
    excess = np.abs(diff) - margin
    with np.errstate(divide="ignore", invalid="ignore"):
        t = excess / se
    return np.where(np.isinf(se), -np.inf, np.where(se > EPS, t, np.where(excess > EPS, np.inf, -np.inf)))


def max_t_null(reference: Side, synthetic: Side, weights: np.ndarray, assignments: np.ndarray) -> np.ndarray:
    """(draws,) max over hypotheses of |difference| / se with the clusters permuted between the sets
    by `assignments` (True: to the reference)."""
    sums_r, sizes_r = cluster_sums(weights @ stacked(reference), reference.clusters)
    sums_s, sizes_s = cluster_sums(weights @ stacked(synthetic), synthetic.clusters)
    columns = moment_columns(np.vstack([sums_r, sums_s]), np.concatenate([sizes_r, sizes_s]))
    to_reference = assignments.astype(np.float64) @ columns
    # every pooled cluster goes to one side: the synthetic side's sums are the rest (one product, not two)
    mean_r, var_r = moments_of(to_reference, sums_r.shape[1])
    mean_s, var_s = moments_of(columns.sum(axis=0) - to_reference, sums_r.shape[1])
    return studentized(mean_s - mean_r, np.sqrt(var_r + var_s)).max(axis=1)


def null_until_decided(
    sides: tuple[Side, Side], weights: np.ndarray, observed_max: float, permutations: int, seed: int
) -> np.ndarray:
    """The max-T null of `sides` (reference, synthetic): a first block of `permutations` draws (seed
    `seed`), then more blocks (seeds (seed, 1), (seed, 2), ...) while the verdict's p, that of the
    largest observed statistic, is within MC_BAND Monte Carlo errors of ALPHA, up to MAX_BLOCKS: a
    verdict far from the bar costs one block, one near it as many as it takes to stop depending
    on the seed."""
    reference, synthetic = sides
    blocks = [max_t_null_in_blocks(reference, synthetic, weights, permutations, seed)]
    while len(blocks) < MAX_BLOCKS and permutations:
        null = np.concatenate(blocks)
        p = (1 + int((null >= observed_max).sum())) / (1 + len(null))
        if abs(p - ALPHA) > MC_BAND * math.sqrt(ALPHA * (1 - ALPHA) / len(null)):
            break
        blocks.append(max_t_null_in_blocks(reference, synthetic, weights, permutations, (seed, len(blocks))))
    return np.concatenate(blocks)


def max_t_critical(null: np.ndarray) -> float:
    """The value a studentized excess must pass for its adjusted p, (1 + #{null >= it}) / (1 +
    draws), to be <= ALPHA: the (k+1)-th largest null value, k = floor(ALPHA (draws + 1)) - 1."""
    k = math.floor(ALPHA * (len(null) + 1) + EPS) - 1
    return float(np.sort(null)[::-1][k]) if k >= 0 else math.inf


def t_quantile(reference: Side, synthetic: Side, factor: int = 1) -> float:
    """The one-sided (1 - ALPHA) t quantile of the TOSTs, with the fewer clusters' degrees of freedom."""
    dof = max(1, factor * min(int(reference.clusters.max()) + 1, int(synthetic.clusters.max()) + 1) - 1)
    return float(special.stdtrit(dof, 1 - ALPHA))


def winner_probabilities(reference: Side, synthetic: Side, draws: int, seed: int) -> dict[str, dict]:
    """Per metric, the cluster bootstrap probability that the synthetic set's best system is the
    reference's best (resampling the synthetic questions) and of the reverse (resampling the
    reference's), the draws shared across metrics."""
    rng = np.random.default_rng(seed)
    means = {}
    for name, one in (("reference", reference), ("synthetic", synthetic)):
        sums, sizes = cluster_sums(stacked(one), one.clusters)
        counts = resampled_counts(len(sizes), 1, draws, rng)
        means[name] = weighted_moments(counts, sums, sizes)[0]
    systems = len(next(iter(reference.matrices.values())))
    out = {}
    for i, metric in enumerate(reference.matrices):
        block = slice(i * systems, (i + 1) * systems)
        tied_r, tied_s = (tied_best(one.matrices[metric].mean(axis=1)) for one in (reference, synthetic))
        shared = [system for system in tied_s if system in tied_r]
        out[metric] = {  # a tie is named by a system both sets rank best, where there is one
            "reference_best": shared[0] if shared else tied_r[0],
            "synthetic_best": shared[0] if shared else tied_s[0],
            "p_synthetic_picks_reference_best": picked_share(means["synthetic"][:, block], tied_r),
            "p_reference_picks_synthetic_best": picked_share(means["reference"][:, block], tied_s),
        }
    return out


def picked_share(draws: np.ndarray, systems: list[int]) -> float:
    """The share of draws (rows of means) whose best is one of `systems` (the other set's best,
    all of them when it ties), a tie in a draw counting as an even chance for each system in it:
    neither the order of the panel nor two identical systems decide anything."""
    levels = tie_level(draws)
    tied = levels == levels.max(axis=1, keepdims=True)
    return float(np.mean(tied[:, systems].sum(axis=1) / tied.sum(axis=1)))


def resampled_counts(groups: int, factor: int, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, groups): how often each cluster is drawn in `factor * groups` draws with replacement."""
    picked = rng.integers(0, groups, (draws, factor * groups)) + (np.arange(draws) * groups)[:, None]
    return np.bincount(picked.ravel(), minlength=draws * groups).reshape(draws, groups).astype(np.float64)


@dataclass(frozen=True)
class Bars:
    """What judge holds the estimates to: the max-T `critical` value (beyond the margin), the TOST's
    `t_tost` (equivalent within it), and whether the set `may_agree` (no other bar, the style's,
    is failed)."""

    critical: float
    t_tost: float
    may_agree: bool


def judge(
    diff: np.ndarray, se: np.ndarray, fam: Family, headline: str, bars: Bars
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(verdict, beyond, equivalent) from estimates (rows: draws, columns: hypotheses): beyond the
    margin when the studentized excess passes the max-T critical value; equivalent when the TOST
    interval diff +- t se lies inside the margin. Vectorised over draws for questions_to_decide."""
    beyond = studentized(diff, se, fam.margin) > bars.critical
    equivalent = np.abs(diff) + bars.t_tost * se < fam.margin - EPS
    on_headline = np.array([m == headline for m in fam.metric])
    agree = equivalent[..., on_headline].all(axis=-1) & bars.may_agree
    verdict = np.where(beyond.any(axis=-1), DISAGREES, np.where(agree, AGREES, UNDETERMINED))
    return verdict, beyond, equivalent


def decide(
    reference: Side,
    synthetic: Side,
    rule: Rule = Rule(),
    style_auc: float | None = None,
    permutations: int = PERMUTATIONS,
    seed: int = 0,
) -> dict:
    """{verdict, why_not_agrees, critical, hypotheses: [...], winner: {metric: ...}, level:
    {metric: per-system shifts}} of a synthetic set against the reference (see the module)."""
    fam = family(reference, synthetic, rule)
    diff, se = estimates(reference, synthetic, fam.weights)
    observed = studentized(diff, se, fam.margin)
    observed_max = float(observed.max()) if len(observed) else -math.inf
    null = null_until_decided((reference, synthetic), fam.weights, observed_max, permutations, seed)
    # single-step max-T adjusted p: the share of permutations whose largest statistic reaches this one
    p_beyond = (1 + (null[None, :] >= observed[:, None]).sum(axis=1)) / (1 + len(null))
    critical = max_t_critical(null)
    t_tost = t_quantile(reference, synthetic)
    headline = headline_metric(reference.matrices)
    winner = winner_probabilities(reference, synthetic, BOOTSTRAPS, seed)
    # the synthetic set's best, when not a close candidate, is in the decision pairs (its pair with
    # the reference's best cannot be equivalent), so only the style bar is checked apart
    why_not = ["style"] if style_auc is not None and style_auc > rule.max_style_auc else []
    verdicts, _, equivalent = judge(diff, se, fam, headline, Bars(critical, t_tost, may_agree=not why_not))
    verdict = str(verdicts)
    hypotheses = [
        {
            "metric": metric,
            "kind": kind,
            "pair": pair,
            "margin": float(margin),
            "diff": float(d),
            "se": float(s),
            "tost_low": float(d - t_tost * s),
            "tost_high": float(d + t_tost * s),
            "p_beyond": float(p),
            "beyond": bool(o > critical),
            "equivalent": bool(e),
        }
        for metric, kind, pair, margin, d, s, o, p, e in zip(
            fam.metric, fam.kind, fam.pair, fam.margin, diff, se, observed, p_beyond, equivalent, strict=True
        )
    ]
    shifts = {
        metric: (synthetic.matrices[metric].mean(axis=1) - reference.matrices[metric].mean(axis=1)).tolist()
        for metric in reference.matrices
    }
    return {
        "verdict": verdict,
        "why_not_agrees": why_not,
        "critical": critical,
        "t_tost": t_tost,
        "permutations": len(null),
        "hypotheses": hypotheses,
        "winner": winner,
        "shifts": shifts,
    }


def questions_to_decide(
    reference: Side, synthetic: Side, decision: dict, rule: Rule = Rule(), draws: int = DECIDE_DRAWS, seed: int = 0
) -> dict:
    """For an undetermined set: the questions per side that would likely decide it. Both sets'
    clusters are drawn with replacement at `FACTORS` times their number, and each draw judged with
    the decision's own critical values (max-T; the TOST's t at the grown degrees of freedom); the
    first size at which at least half the draws decide is {n: {reference, synthetic}, factor}; n
    None with why when none does, or when a set has fewer than MIN_TO_RESAMPLE questions (copies of
    a handful would look decisive). It takes the differences the questions show as the true ones:
    how many questions like these would decide, not what more would show."""
    small = [
        (name, one.n) for name, one in (("reference", reference), ("synthetic", synthetic)) if one.n < MIN_TO_RESAMPLE
    ]
    if small:
        return {
            "n": None,
            "too_few": {"set": small[0][0], "n": small[0][1]},
            "why": f"too few {small[0][0]} questions ({small[0][1]}) to estimate how many would decide it",
        }
    fam = family(reference, synthetic, rule)
    headline = headline_metric(reference.matrices)
    rng = np.random.default_rng(seed)
    for factor in FACTORS:
        moments = []
        for one in (reference, synthetic):
            sums, sizes = cluster_sums(fam.weights @ stacked(one), one.clusters)
            moments.append(weighted_moments(resampled_counts(len(sizes), factor, draws, rng), sums, sizes))
        (mean_r, var_r), (mean_s, var_s) = moments
        bars = Bars(
            decision["critical"], t_quantile(reference, synthetic, factor), may_agree=not decision["why_not_agrees"]
        )
        verdicts, _, _ = judge(mean_s - mean_r, np.sqrt(var_r + var_s), fam, headline, bars)
        if 2 * int((verdicts != UNDETERMINED).sum()) >= draws:
            return {
                "n": {"reference": factor * reference.n, "synthetic": factor * synthetic.n},
                "factor": factor,
                "why": None,
            }
    return {
        "n": None,
        "factor": FACTORS[-1],
        "why": f"not even {FACTORS[-1]} times as many questions on each side would decide it (resampled)",
    }
