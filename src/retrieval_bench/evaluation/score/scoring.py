"""Score one retrieval method on the golden set: judge the chunks, place them, compute every
metric per question (retrieval_bench.evaluation.score.metrics) and the summary for metrics.json; in
two views, strict (the golden set's labels) and judged (plus duplicates and pooled LLM
judgements: retrieval_bench.evaluation.score.judged). score_system is what the score stage does
for each panel system: both views, the question's segments, the summary and the warnings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_bench.core.errors import some_of
from retrieval_bench.core.relevance import Judgement, judge, labels_without_spans
from retrieval_bench.core.run_table import positions
from retrieval_bench.evaluation.score.abstention import (
    UNANSWERABLE,
    abstention_summary,
    abstention_warning,
    contradiction_warning,
    top_scores,
)
from retrieval_bench.evaluation.score.budgets import budget_table
from retrieval_bench.evaluation.score.judged import (
    PREFIX,
    ChunkCopies,
    JudgedInputs,
    judged_summary,
    judged_table,
    pool_grades,
    unjudged_warning,
    without_repeated_twins,
)
from retrieval_bench.evaluation.score.kinds import by_kind
from retrieval_bench.evaluation.score.metrics import score_question, summarize
from retrieval_bench.evaluation.score.per_question import metric_columns
from retrieval_bench.evaluation.score.reviewed import (
    JUDGE_ONLY,
    REVIEW,
    has_reviews,
    human_grades,
    kept,
    rejected_count,
    review_marks,
    with_human_grades,
)
from retrieval_bench.evaluation.score.segments import segments
from retrieval_bench.evaluation.score.settings import Scoring

UNSCORABLE_EXAMPLES = 5


def score_run(golden: list[dict], chunks: pd.DataFrame, run: pd.DataFrame, scoring: Scoring) -> pd.DataFrame:
    """per_question.csv from a run (retrieval_bench.retrieval.run): a judged chunk the run did not
    retrieve is not retrieved, and ties are equal scores within the run; recall_budget@B columns
    for scoring.budgets (retrieval_bench.evaluation.score.budgets)."""
    return _strict_view(golden, chunks, run, scoring)[0]


def _strict_view(
    golden: list[dict], chunks: pd.DataFrame, run: pd.DataFrame, scoring: Scoring
) -> tuple[pd.DataFrame, list[Judgement]]:
    """score_run's table, and each question's judgement (the judged view starts from them)."""
    judgements, placed = _judged_and_placed(golden, chunks, run, scoring.min_coverage)
    table = _table(golden, judgements, placed, scoring)
    qids = [row["qid"] for row in golden]
    if scoring.budgets:
        table = pd.concat([table, budget_table(judgements, placed, run, qids, chunks, scoring)], axis=1)
    # the abstention signal: a strict figure, with or without the judged view
    table["top_score"] = top_scores(run, qids)
    return table, judgements


def _judged_and_placed(golden: list[dict], chunks: pd.DataFrame, run: pd.DataFrame, min_coverage: float):
    """Each question's judged chunks, and where the run placed them."""
    judgements = judge(golden, chunks, min_coverage)
    chunk_ids = chunks["chunk_id"].to_numpy()
    placed = positions(run, [row["qid"] for row in golden], [chunk_ids[j.indices].tolist() for j in judgements])
    return judgements, placed


def score_run_both_views(
    golden: list[dict],
    chunks: pd.DataFrame,
    run: pd.DataFrame,
    scoring: Scoring,
    inputs: JudgedInputs,
) -> pd.DataFrame:
    """per_question.csv: the strict columns of score_run, unchanged and first (recall_budget@B
    with them: the judged view has no budgets), then the judged view's (duplicates of judged
    chunks from inputs.duplicates, LLM grades from inputs.pool_rows, the rows of
    data/judged_pool.jsonl). With inputs.reviews, people's grades win over the judge's in the
    judged view, and the columns `review` and judge_only_<metric> (evaluation.score.reviewed) follow."""
    strict, judgements = _strict_view(golden, chunks, run, scoring)
    chunk_ids = set(chunks["chunk_id"])
    qids = {row["qid"] for row in golden}
    grades = pool_grades(inputs.pool_rows, qids, chunk_ids, inputs.pool_path, inputs.pooled_chunking)
    copies = ChunkCopies.of(chunks, inputs.duplicates)
    judged = judged_table(golden, judgements, run, scoring, copies=copies, grades=grades)
    reviews = inputs.reviews
    if reviews is None or not has_reviews(reviews):
        return pd.concat([strict, judged], axis=1)
    human = human_grades(reviews, chunk_ids)
    judge_only = judged
    if human:
        merged = with_human_grades(grades, human)
        judged = judged_table(golden, judgements, run, scoring, copies=copies, grades=merged)
    marks = review_marks(reviews, [str(row["qid"]) for row in golden])
    columns = [f"{PREFIX}{column}" for _, column in metric_columns(strict.columns)]
    judge_figures = judge_only[columns].rename(columns=lambda c: JUDGE_ONLY + c.removeprefix(PREFIX))
    return pd.concat([strict, judged, pd.DataFrame({REVIEW: marks}), judge_figures], axis=1)


def _table(golden, judgements, placed, scoring: Scoring) -> pd.DataFrame:
    ks = list(scoring.ks)
    return pd.DataFrame(
        [
            {"qid": row["qid"], **score_question(judgement, where, ks, scoring.ties)}
            for row, judgement, where in zip(golden, judgements, placed, strict=True)
        ]
    )


def other_chunking_warning(inputs: JudgedInputs, per_question: pd.DataFrame) -> str | None:
    """A system on another chunking than the one the judge pooled, with the judge on: its judged
    view has the grades of the chunks it shares with that chunking only (n_pooled: the pooled
    pairs pool_grades kept for it)."""
    if inputs.pooled_chunking or not inputs.pool_rows:
        return None
    shared = int(per_question["n_pooled"].sum())
    return (
        f"the judge grades the default chunking's chunks, and this system's chunking shares {shared} of the "
        f"{len(inputs.pool_rows)} pooled pairs: its {PREFIX}* metrics count its other chunks as not relevant "
        "(a lower bound, not comparable with the default chunking's systems)"
    )


def unscorable_warning(per_question: pd.DataFrame) -> str | None:
    """A warning naming how many answerable questions have no relevant chunk in this chunking, or None."""
    answerable = per_question["kind"] != UNANSWERABLE if "kind" in per_question else True
    unscorable = per_question.loc[(per_question["n_relevant"] == 0) & answerable, "qid"].astype(str).tolist()
    if not unscorable:
        return None
    examples = some_of(unscorable, UNSCORABLE_EXAMPLES)
    return (
        f"{len(unscorable)} of {len(per_question)} questions have no relevant chunk in this chunking ({examples}): "
        "they score 0 on every metric; see score.min_coverage in docs/reference/metrics.md"
    )


def unspanned_warning(golden: list[dict], chunks: pd.DataFrame) -> str | None:
    """A warning naming the chunk-labelled questions this chunking cannot re-judge: they name chunk
    ids the table lacks and carry no relevant_spans (a golden set from before them), or None."""
    qids = [str(qid) for qid in labels_without_spans(golden, chunks)]
    if not qids:
        return None
    examples = some_of(qids, UNSCORABLE_EXAMPLES)
    return (
        f"{len(qids)} of {len(golden)} labelled questions name chunks not in this chunking and carry no "
        f"relevant_spans ({examples}): only the labelled chunks found are judged; rebuild the golden set "
        "(dvc repro generate_goldenset) to judge them by where their chunks lie"
    )


def summary_text(summary: dict) -> str:
    """metrics.json's flat figures as the score stage prints them: name=value (by_kind: in the file)."""
    return " ".join(
        f"{n}={v:.4f}" if isinstance(v, float) else f"{n}={v}" for n, v in summary.items() if not isinstance(v, dict)
    )


def score_system(
    scoring: Scoring,
    golden: list[dict],
    chunks: pd.DataFrame,
    run: pd.DataFrame,
    inputs: JudgedInputs,
    *,
    run_info_path: str,
) -> tuple[pd.DataFrame, dict, list[str]]:
    """(per-question table with the question's segments, summary with the abstention figures when
    there are unanswerable questions, the warnings: questions nothing could be scored for, unjudged
    pairs, abstention). The summary leaves out the questions a reviewer rejected (`n_rejected` says
    how many)."""
    ks = list(scoring.ks)
    table = score_run_both_views(golden, chunks, run, scoring, inputs)
    table = pd.concat([table, segments(golden)], axis=1)
    warnings = (
        unscorable_warning(table),
        unspanned_warning(golden, chunks),
        unjudged_warning(table),
        abstention_warning(table),
        contradiction_warning(table),
        other_chunking_warning(inputs, table),
    )
    summary = {
        **system_summary(kept(table), len(chunks), scoring, inputs.duplicates, graded=scoring.judge_enabled),
        **ann_recall_metrics(run_info_path, ks),
    }
    if REVIEW in table:
        summary["n_rejected"] = rejected_count(table)
    return table, summary, [warning for warning in warnings if warning]


def system_summary(
    scored: pd.DataFrame, n_chunks: int, scoring: Scoring, duplicates: pd.DataFrame | None, *, graded: bool
) -> dict[str, Any]:
    """metrics.json's figures of a per-question table (with its segments; the questions reviewers
    kept): the strict metrics, the judged view's when `duplicates` are given (`graded`: the judge
    graded some pair), the abstention figures and, with several kinds, by_kind. The score stage's
    and the Python API's one summary."""
    ks = list(scoring.ks)
    summary: dict[str, Any] = summarize(scored, ks, n_chunks, list(scoring.budgets))
    if duplicates is not None:
        summary = {**summary, **without_repeated_twins(summary, judged_summary(scored, ks, duplicates), graded=graded)}
    summary.update(abstention_summary(scored))
    kinds = by_kind(scored)
    if kinds:
        summary["by_kind"] = kinds
    return summary


def ann_recall_metrics(run_info_path: str | Path, ks: list[int]) -> dict[str, float]:
    """ann_recall@k for each k up to the run's depth, read from the `ann_recall` curve retrieve
    wrote to run_info.json (retrieval/run_info.py); nothing for exact methods, or when the file
    is absent. Read here, not imported from retrieval, so the score stage's closure (its DVC deps)
    does not hold the dense search."""
    path = Path(run_info_path)
    if not path.is_file():
        return {}
    curve = json.loads(path.read_text(encoding="utf-8")).get("ann_recall", {})
    return {f"ann_recall@{k}": float(curve[str(k)]) for k in sorted(ks) if str(k) in curve}
