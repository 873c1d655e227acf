"""`retrieval-bench compare [A] [B]`: did run B retrieve better than run A, question by question?

A and B are git revisions (branches, tags, commits), DVC experiment names, or `workspace` (the
working tree). Both runs' per-question results of one panel system (--system, default `default`:
metrics/panel/default/per_question.csv) are paired by qid, and for each metric the
report gives the two means, the mean paired difference (B - A), a paired bootstrap confidence
interval of that difference, a two-sided paired randomization (sign-flip) test p-value,
wins/ties/losses, and the minimum detectable difference for this many questions. It also lists
the questions that flipped: first relevant chunk in the top k under one run and not the other.
When both runs carry the judged view (judged_<metric> columns: duplicates and pooled LLM
grades, evaluation.score.judged), the same statistics of the judged metrics, over the same paired
questions, are shown beside the strict ones, and the metrics whose verdict differs are marked.

The statistics live in retrieval_bench.evaluation.stats; pairing here is pure (compare_tables),
the report's formats are in evaluation.compare.report, reading runs from git in compare_runs.
"""

from __future__ import annotations

import argparse
import math
import re
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.paths import DEFAULT
from retrieval_bench.core.revisions import WORKSPACE
from retrieval_bench.core.values import count_argument
from retrieval_bench.evaluation.compare.kinds import kind_comparison
from retrieval_bench.evaluation.compare.outcome import Comparison
from retrieval_bench.evaluation.compare.report import format_json, format_markdown, format_text
from retrieval_bench.evaluation.compare.runs import params_changed, question_context, read_run, stale_params_warning
from retrieval_bench.evaluation.panel.reviewed import paired_deltas
from retrieval_bench.evaluation.score.per_question import JUDGED, checked_per_question, metric_columns
from retrieval_bench.evaluation.score.reviewed import kept
from retrieval_bench.evaluation.score.segments import SEGMENT_COLUMNS
from retrieval_bench.evaluation.stats import (
    MAX_RESAMPLES,
    Resampling,
    min_detectable_delta,
    paired_bootstrap_ci,
    paired_segment_tests,
    randomization_p_value,
    regression_report,
    win_tie_loss,
)

# ---------------------------------------------------------------------------------------------
# Comparing two per-question tables (pure)
# ---------------------------------------------------------------------------------------------


def hit_ks(columns) -> list[int]:
    return sorted(int(match.group(1)) for c in columns if (match := re.fullmatch(r"hit@(\d+)", c)))


def choose_flip_k(columns, k: int | None = None) -> int | None:
    """The cutoff for flipped questions: `k` if given (it must have a hit@k column), else the
    smallest k >= 5 with a hit@k column, else the largest one; None when there are none."""
    ks = hit_ks(columns)
    if k is not None:
        if k not in ks:
            raise InputError(f"--k {k}: no hit@{k} column in both runs (have: {', '.join(map(str, ks)) or 'none'})")
        return k
    if not ks:
        return None
    at_least_5 = [value for value in ks if value >= 5]
    return at_least_5[0] if at_least_5 else ks[-1]


def _rank(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def flipped_questions(a: pd.DataFrame, b: pd.DataFrame, k: int) -> list[dict]:
    """Questions (a and b indexed by the same qids) whose hit@k differs between the runs (in the
    top k under one run only, or a tie at the cut that counts a share of a hit), worst first: the largest rank loss (B rank - A rank; no relevant chunk
    counts as an infinite rank) first, the largest gains last."""
    column = f"hit@{k}"
    # a hit of a tie at the cut is a share (score.ties expected: 0.5); any change of it is a flip
    hit_a = np.nan_to_num(a[column].to_numpy(dtype=np.float64))
    hit_b = np.nan_to_num(b[column].to_numpy(dtype=np.float64))
    rank_a = (
        a["first_relevant_rank"].to_numpy(dtype=np.float64) if "first_relevant_rank" in a else np.full(len(a), np.nan)
    )
    rank_b = (
        b["first_relevant_rank"].to_numpy(dtype=np.float64) if "first_relevant_rank" in b else np.full(len(b), np.nan)
    )
    rows: list[dict[str, Any]] = []
    for index in np.flatnonzero(hit_a != hit_b):
        ra, rb = rank_a[index], rank_b[index]
        loss = np.nan_to_num(rb, nan=np.inf) - np.nan_to_num(ra, nan=np.inf)
        rows.append(
            {
                "qid": str(a.index[int(index)]),
                "change": "lost" if hit_a[index] > hit_b[index] else "gained",
                "a_rank": _rank(ra),
                "b_rank": _rank(rb),
                "_loss": 0.0 if np.isnan(loss) else float(loss),
            }
        )
    rows.sort(key=lambda row: (row["change"] != "lost", -row["_loss"], row["qid"]))
    for row in rows:
        del row["_loss"]
    return rows


def compare_tables(
    a_df: pd.DataFrame,
    b_df: pd.DataFrame,
    a_label: str = "A",
    b_label: str = "B",
    resampling: Resampling = Resampling(),
    *,
    k: int | None = None,
) -> Comparison:
    """Pair two per-question tables by qid (the intersection, with a warning when the question
    sets differ) and compute every metric's statistics (drawn as `resampling` says) and the flipped
    questions."""
    resamples, seed, level = resampling.resamples, resampling.seed, resampling.level
    if not 1 <= resamples <= MAX_RESAMPLES:
        raise InputError(f"--resamples must be between 1 and {MAX_RESAMPLES}, got {resamples}")
    if seed < 0:  # numpy seeds no generator with a negative number
        raise InputError(f"--seed must be 0 or more, got {seed}")
    if not 0 < level < 1:  # also refuses NaN
        raise InputError(f"--level must be a confidence level between 0 and 1 (e.g. 0.95), got {level}")
    warnings: list[str] = []
    a_all, b_all = (checked_per_question(df, label) for df, label in ((a_df, a_label), (b_df, b_label)))
    a_reviewed, b_reviewed, dropped = _paired(
        a_all.set_index("qid"), b_all.set_index("qid"), a_label, b_label, warnings
    )
    # As score and the leaderboard: questions a reviewer rejected leave every figure but the prediction-
    # powered ones, which need them (a rejected question counts there as K = 0). Rejected on either side:
    # B's own metrics.json left out what its reviews rejected, though A's run predates them.
    both = kept(a_reviewed).index.intersection(kept(b_reviewed).index)
    a, b = a_reviewed.loc[both], b_reviewed.loc[both]
    if len(a) < len(a_reviewed):
        warnings.append(f"{len(a_reviewed) - len(a)} questions a reviewer rejected are left out (data/reviews)")
    common = list(a.index)
    names = metric_columns(set(a.columns) & set(b.columns))
    for side, label, other in ((a, a_label, b), (b, b_label, a)):
        alone = [name for name, _ in metric_columns(set(side.columns) - set(other.columns))]
        if alone:  # else the verdict silently moves to another metric
            warnings.append(f"metrics only in {label}, not compared: {', '.join(alone)}")
    if not names:
        raise InputError(f"{a_label} and {b_label} share no metric column (reciprocal_rank, ndcg@10, recall@k, hit@k)")
    metrics = _statistics(a, b, names, resampling, warnings=warnings)
    judged, coincide = _judged_view(a, b, names, metrics, resampling, warnings=warnings)
    flip_k = choose_flip_k(set(a.columns) & set(b.columns), k)
    flipped = flipped_questions(a, b, flip_k) if flip_k is not None else []
    return Comparison(
        a=a_label,
        b=b_label,
        n_questions=len(common),
        metrics=metrics,
        flip_k=flip_k,
        flipped=flipped,
        warnings=warnings,
        resamples=resamples,
        seed=seed,
        level=level,
        n_unscorable_dropped=dropped,
        judged=judged,
        views_coincide=coincide,
        segments=_segment_regressions(a, b, names[0][1], resamples, seed),
        ppi=paired_deltas(a_reviewed.reset_index(), b_reviewed.reset_index()),
        by_kind=kind_comparison((kept(a_all), kept(b_all)), (a, b), resamples, seed, warnings),
    )


def _paired(
    a: pd.DataFrame, b: pd.DataFrame, a_label: str, b_label: str, warnings: list[str]
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """The questions of both tables (A's order) scorable under both, and how many were dropped as
    unscorable; a warning in `warnings` when the question sets differ."""
    only_a = a.index.difference(b.index)
    only_b = b.index.difference(a.index)
    common = [qid for qid in a.index if qid in b.index]  # A's order
    if len(only_a) or len(only_b):
        warnings.append(
            f"the question sets differ: {len(only_a)} only in {a_label}, {len(only_b)} only in {b_label}; "
            f"{len(common)} in both, of which those scorable under both are compared"
        )
    if not common:
        raise InputError(f"{a_label} and {b_label} have no question (qid) in common")
    common, dropped = _scorable_in_both(a.loc[common], b.loc[common], a_label, b_label, warnings)
    if not common:
        raise InputError(f"no question is scorable (has a relevant chunk) under both {a_label} and {b_label}")
    return a.loc[common], b.loc[common], dropped


def _judged_view(
    a: pd.DataFrame,
    b: pd.DataFrame,
    names: list[tuple[str, str]],
    strict: dict[str, dict],
    resampling: Resampling,
    *,
    warnings: list[str],
) -> tuple[dict[str, dict], bool]:
    """The judged view's statistics over the metrics whose judged column both runs carry, and
    whether the views coincide (every such judged column equals its strict one in both runs):
    then the strict figures are the judged ones, not a second resampling that would differ only
    by its seed."""
    judged_names = [(name, column) for name, column in names if JUDGED + column in a and JUDGED + column in b]
    if not judged_names:
        return {}, False
    # the pool is per question, whichever system is scored: one pool gives both sides the same counts
    if "n_pooled" in a and "n_pooled" in b and not _same(a["n_pooled"], b["n_pooled"]):
        warnings.append(
            f"the judged views rest on different pools ({int(a['n_pooled'].sum())} pooled pairs in A, "
            f"{int(b['n_pooled'].sum())} in B: another judge.pool or judge settings, or the judge off on one side): "
            "their deltas compare judgements as much as systems; judge both sides with one pool (judge.pool "
            "naming both runs, e.g. rev:<A>) before reading them"
        )
    if all(_same(t[column], t[JUDGED + column]) for _, column in judged_names for t in (a, b)):
        return {name: {**strict[name], "column": JUDGED + column} for name, column in judged_names}, True
    named = [(name, JUDGED + column) for name, column in judged_names]
    return _statistics(a, b, named, resampling, warnings=warnings, view=JUDGED), False


def _same(first: pd.Series, second: pd.Series) -> bool:
    x, y = (
        pd.to_numeric(first, errors="coerce").to_numpy(dtype=float),
        pd.to_numeric(second, errors="coerce").to_numpy(dtype=float),
    )
    return bool(np.all((np.abs(x - y) <= 1e-12) | (np.isnan(x) & np.isnan(y))))


def _segment_regressions(a: pd.DataFrame, b: pd.DataFrame, column: str, permutations: int, seed: int) -> dict | None:
    """Segments (of B's per-question rows) where B regressed on `column`, Benjamini-Hochberg over
    every segment tested; None when B's rows carry no segment columns (runs scored before them)."""
    if not any(c in b for c in SEGMENT_COLUMNS):
        return None
    return {"column": column, **regression_report(paired_segment_tests(a[column], b[column], b, permutations, seed))}


def metric_stream_seed(seed: int, name: str) -> int:
    """The seed of one metric's resampling: the user's seed and the metric's name (crc32), stable
    across runs and independent of which other metrics are compared."""
    return (seed * 1_000_003 + zlib.crc32(name.encode("utf-8"))) % 2**32


def _statistics(
    a: pd.DataFrame,
    b: pd.DataFrame,
    names: list[tuple[str, str]],
    resampling: Resampling,
    *,
    warnings: list[str],
    view: str = "",
) -> dict[str, dict]:
    """Every metric's paired statistics over the questions of `a` and `b` (same qids, same order)."""
    resamples, seed, level = resampling.resamples, resampling.seed, resampling.level
    metrics = {}
    for name, column in names:
        # Each metric draws from its own stream, seeded by its name: adding a k changes no other figure;
        # not by the view, so where the strict and judged differences are the same, so are their figures.
        metric_seed = metric_stream_seed(seed, name)
        va = pd.to_numeric(a[column], errors="coerce").to_numpy(dtype=np.float64)
        vb = pd.to_numeric(b[column], errors="coerce").to_numpy(dtype=np.float64)
        keep = ~(np.isnan(va) | np.isnan(vb))
        if not keep.all():
            warnings.append(f"{view}{name}: {int((~keep).sum())} questions without a value in one run left out")
        va, vb = va[keep], vb[keep]
        diffs = vb - va
        low, high = paired_bootstrap_ci(diffs, resamples, metric_seed, level)
        wins, ties, losses = win_tie_loss(va, vb)
        metrics[name] = {
            "column": column,
            "n": int(len(diffs)),
            "a": float(va.mean()) if len(va) else math.nan,
            "b": float(vb.mean()) if len(vb) else math.nan,
            "delta": float(diffs.mean()) if len(diffs) else math.nan,
            "ci_low": low,
            "ci_high": high,
            "p_value": randomization_p_value(diffs, resamples, metric_seed),
            "wins": wins,
            "ties": ties,
            "losses": losses,
            "min_detectable_delta": min_detectable_delta(diffs),
        }
    return metrics


def _scorable_in_both(
    a: pd.DataFrame, b: pd.DataFrame, a_label: str, b_label: str, warnings: list[str]
) -> tuple[list[str], int]:
    """The paired qids with a relevant chunk under both runs, and how many were dropped. A
    question that lost its relevant chunk (e.g. to a re-chunking) would otherwise count as a
    retrieval loss; runs written before n_relevant existed count every question as scorable."""
    scorable_a = (
        pd.to_numeric(a["n_relevant"], errors="coerce").fillna(1) > 0 if "n_relevant" in a else pd.Series(True, a.index)
    )
    scorable_b = (
        pd.to_numeric(b["n_relevant"], errors="coerce").fillna(1) > 0 if "n_relevant" in b else pd.Series(True, b.index)
    )
    both = scorable_a & scorable_b
    # an unanswerable question has no relevant chunk by definition: scored by abstention, never paired
    unanswerable = (a["kind"] == "unanswerable") if "kind" in a else pd.Series(False, a.index)
    scorable_a, scorable_b = scorable_a | unanswerable, scorable_b | unanswerable
    only_a, only_b = int((scorable_a & ~scorable_b).sum()), int((scorable_b & ~scorable_a).sum())
    neither = int((~scorable_a & ~scorable_b).sum())
    if only_a or only_b:
        warnings.append(
            f"THE RUNS SCORE DIFFERENT QUESTIONS: {only_a} questions have a relevant chunk only under {a_label}, "
            f"{only_b} only under {b_label} (their chunking cannot hold the evidence); the figures below are paired "
            f"over the {int(both.sum())} questions scorable under both, {only_a + only_b + neither} left out"
        )
    elif neither:
        warnings.append(f"{neither} questions have no relevant chunk under either run and are left out")
    return [qid for qid in a.index if both[qid]], only_a + only_b + neither


def attach_question_text(flipped: list[dict], golden: list[dict] | None, gold_text: dict[str, str] | None) -> None:
    """Add each flipped question's text, gold chunk id and the first non-empty line of its gold
    text (keyed by qid: the evidence span, else the gold chunk), where known (in place)."""
    by_qid = {str(row.get("qid")): row for row in golden or []}
    for row in flipped:
        question = by_qid.get(row["qid"])
        if question is None:
            continue
        row["question"] = question.get("question")
        gold = question.get("gold_chunk_id")
        if gold is not None:
            row["gold_chunk_id"] = str(gold)
            text = (gold_text or {}).get(row["qid"])
            if text is not None:
                row["gold_first_line"] = next((line.strip() for line in text.splitlines() if line.strip()), "")


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument(
        "a", nargs="?", default="main", help="baseline: git revision, DVC experiment or 'workspace' (default: main)"
    )
    parser.add_argument(
        "b",
        nargs="?",
        default=WORKSPACE,
        help="candidate: git revision, DVC experiment or 'workspace' (default: workspace)",
    )
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--md", action="store_true", help="print a Markdown report (for a pull-request comment)")
    output.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument(
        "--resamples",
        type=int,
        default=10_000,
        help=f"bootstrap resamples and sign-flip permutations, 1-{MAX_RESAMPLES} (default: 10000)",
    )
    parser.add_argument(
        "--level",
        type=float,
        default=0.95,
        help=(
            "confidence level of the intervals; a delta is significant at p < 1 - level (the minimum "
            "detectable change and the segment regressions stay at alpha 0.05) (default: 0.95)"
        ),
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="random seed of the bootstrap and the permutations (default: 0)"
    )
    parser.add_argument(
        "--show",
        type=count_argument,
        default=10,
        help="flipped questions listed per direction in text and Markdown (default: 10)",
    )
    parser.add_argument(
        "--system",
        default=DEFAULT,
        help="the panel system whose results (metrics/panel/SYSTEM/per_question.csv) are compared at A and B "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--k",
        type=int,
        default=None,
        help="cutoff for flipped questions (default: the smallest k >= 5 with a hit@k column)",
    )
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    a_df, a_commit = read_run(args.a, cwd, args.system)
    b_df, b_commit = read_run(args.b, cwd, args.system)
    comparison = compare_tables(a_df, b_df, args.a, args.b, Resampling(args.resamples, args.seed, args.level), k=args.k)
    comparison.a_commit, comparison.b_commit = a_commit, b_commit
    comparison.params_changed = params_changed(cwd, a_commit, b_commit)
    stale = stale_params_warning(cwd) if WORKSPACE in (args.a, args.b) else None
    if stale:
        comparison.warnings.append(stale)
    if comparison.flipped:
        attach_question_text(comparison.flipped, *question_context(cwd, [a_commit, b_commit]))
    if args.json:
        for warning in comparison.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        sys.stdout.write(format_json(comparison))
    elif args.md:
        sys.stdout.write(format_markdown(comparison, args.show))
    else:
        sys.stdout.write(format_text(comparison, args.show))
    return 0
