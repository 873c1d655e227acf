"""Edges of the kinds' figures found by review: the judged view collapses copies of relevant
chunks only; a kind's means and the overall ones are over the same questions; the abstention
section reads every system on the same answerable questions; a question the run returned nothing
for is below every score in the top-1 medians and quartiles too."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.core.run_table import from_records
from retrieval_bench.evaluation.panel.kinds import abstention_section
from retrieval_bench.evaluation.score.abstention import abstention_summary, top_score_quantiles, top_scores
from retrieval_bench.evaluation.score.judged import JudgedInputs
from retrieval_bench.evaluation.score.scoring import score_run, score_run_both_views, system_summary
from retrieval_bench.evaluation.score.segments import segments
from retrieval_bench.evaluation.score.settings import Scoring


def test_a_copy_of_a_chunk_below_the_coverage_bar_stays_in_the_judged_run():
    """a2 overlaps the evidence below min_coverage (gain 0) and b1 copies it: neither is relevant,
    so the judged view must rank as the strict one does (it dropped b1 and lifted a1 a rank)."""
    chunks = pd.DataFrame(
        {
            "chunk_id": ["a1", "a2", "b1", "z1"],
            "doc_id": ["A", "A", "B", "Z"],
            "start": [0, 90, 0, 0],
            "end": [100, 300, 210, 10],
        }
    )
    golden = [{"qid": "q", "question": "what", "doc_id": "A", "start": 0, "end": 100}]
    duplicates = pd.DataFrame({"group": [0, 0], "chunk_id": ["a2", "b1"]})
    run = from_records([("q", "a2", 0.9), ("q", "b1", 0.8), ("q", "a1", 0.7), ("q", "z1", 0.1)])
    table = score_run_both_views(golden, chunks, run, Scoring(ks=(1, 3, 5)), JudgedInputs(duplicates))
    assert table["reciprocal_rank"].iloc[0] == table["judged_reciprocal_rank"].iloc[0] == 1 / 3
    # a copy of the relevant chunk still collapses: b2 copies a1 and ranks first
    chunks = pd.concat([chunks, pd.DataFrame({"chunk_id": ["b2"], "doc_id": ["B"], "start": [300], "end": [400]})])
    duplicates = pd.DataFrame({"group": [1, 1], "chunk_id": ["a1", "b2"]})
    run = from_records([("q", "b2", 0.95), ("q", "a2", 0.9), ("q", "a1", 0.7)])
    table = score_run_both_views(golden, chunks, run, Scoring(ks=(1, 3, 5)), JudgedInputs(duplicates))
    assert table["reciprocal_rank"].iloc[0] == 1 / 3 and table["judged_reciprocal_rank"].iloc[0] == 1.0


def test_a_kinds_means_and_the_overall_ones_are_over_the_same_questions():
    chunks = pd.DataFrame({"chunk_id": ["a", "b", "c"], "doc_id": ["A", "B", "C"], "start": [0] * 3, "end": [100] * 3})
    golden = [
        {"qid": "q1", "question": "x", "doc_id": "A", "start": 0, "end": 100},
        {"qid": "q2", "question": "y", "doc_id": "Z", "start": 0, "end": 100},  # no chunk holds it: scores 0
        {"qid": "u1", "question": "z", "kind": "unanswerable", "doc_id": None, "start": None, "end": None},
    ]
    run = from_records([("q1", "a", 1.0), ("q2", "b", 0.5), ("u1", "c", 0.2)])
    scoring = Scoring(ks=(1, 10))
    table = score_run(golden, chunks, run, scoring)
    table["top_score"] = top_scores(run, [row["qid"] for row in golden])
    table = pd.concat([table, segments(golden)], axis=1)
    summary = system_summary(table, len(chunks), scoring, None, graded=False)
    assert summary["mrr"] == summary["by_kind"]["single"]["mrr"] == 0.5
    assert summary["recall@10"] == summary["by_kind"]["single"]["recall@10"] == 0.5


def test_every_system_is_read_on_the_same_answerable_questions_for_abstention():
    """q2 has no relevant chunk under B's chunking: it leaves both systems' figures, so equal
    scores give equal figures (B looked perfect with it dropped for B alone)."""
    base = {"qid": ["q1", "q2", "u1"], "kind": ["single", "single", "unanswerable"], "top_score": [0.9, 0.1, 0.5]}
    base["hit@1"] = [1.0, 1.0, np.nan]
    tables = {"A": pd.DataFrame(base | {"n_relevant": [1, 1, 0]}), "B": pd.DataFrame(base | {"n_relevant": [1, 0, 0]})}
    section = abstention_section(tables)
    assert section["n_answerable"] == 1
    assert section["systems"]["A"]["abstention_auc"] == section["systems"]["B"]["abstention_auc"] == 1.0


def test_a_question_without_results_is_below_every_score_in_the_medians_and_quartiles():
    table = pd.DataFrame(
        {
            "qid": ["a1", "a2", "u1", "u2", "u3"],
            "kind": ["single", "single", "unanswerable", "unanswerable", "unanswerable"],
            "n_relevant": [1, 1, 0, 0, 0],
            "hit@1": [1, 1, np.nan, np.nan, np.nan],
            "top_score": [0.9, 0.8, np.nan, np.nan, 0.85],
        }
    )
    summary = abstention_summary(table)
    # 2 of the 3 unanswerable got nothing: their median falls on "nothing", no number to declare
    assert "top_score_median_unanswerable" not in summary
    assert abs(summary["top_score_median_answerable"] - 0.85) < 1e-12
    low, median, high = top_score_quantiles(np.array([np.nan, 0.2, 0.4, 0.6]), [0.25, 0.5, 0.75])
    assert low is None and abs(median - 0.3) < 1e-12 and abs(high - 0.45) < 1e-12
    assert top_score_quantiles(np.array([]), [0.5]) == []


def test_a_multi_question_without_evidence_spans_is_scored_on_its_one_piece():
    """generate.kind_classifier llm relabels a hand-written (span) or real (labelled) question
    multi without giving it pieces: it is judged by its span or labels, as question-kinds.md says
    (it raised KeyError 'evidence_spans' in score, gauge and export-beir)."""
    chunks = pd.DataFrame(
        {"chunk_id": ["a", "b", "c"], "doc_id": ["A", "A", "C"], "start": [0, 50, 0], "end": [50, 100, 80]}
    )
    single = {"qid": "q1", "question": "x", "doc_id": "A", "start": 10, "end": 40}
    labelled = {"qid": "q2", "question": "y", "relevant": {"c": 1}}
    run = from_records([("q1", "b", 0.9), ("q1", "a", 0.8), ("q2", "c", 0.7), ("q2", "a", 0.1)])
    scoring = Scoring(ks=(1, 10))
    plain = score_run([single, labelled], chunks, run, scoring)
    relabelled = score_run([{**single, "kind": "multi"}, {**labelled, "kind": "multi"}], chunks, run, scoring)
    assert list(relabelled["reciprocal_rank"]) == list(plain["reciprocal_rank"]) == [0.5, 1.0]
    assert list(relabelled["complete@1"]) == [0.0, 1.0] and list(relabelled["complete@10"]) == [1.0, 1.0]
