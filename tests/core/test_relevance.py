"""Evidence spans: locating excerpts, coverage relevance, and the reduction to chunk-id metrics."""

import numpy as np
import pandas as pd
import pytest
from conftest import pessimistic_ranks

from retrieval_bench.core.relevance import coverage, judge, union_coverage
from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.evaluation.score.metrics import question_metrics, span_recall
from retrieval_bench.goldenset.build import (
    deduplicate,
    handwritten_rows,
    sample_rows,
)
from retrieval_bench.goldenset.evidence import locate_evidence

DOC = "SQLite stores data in one file.\nWAL mode lets readers   and writers run at the same time. Vacuum rebuilds it."


def test_locate_exact_fuzzy_and_missing():
    assert locate_evidence(DOC, "stores data in one file") == (7, 30)
    start, end = locate_evidence(DOC, "wal MODE lets readers and writers\nrun")  # case and whitespace differ
    assert DOC[start:end] == "WAL mode lets readers   and writers run"
    assert locate_evidence(DOC, "not in the document") is None
    assert locate_evidence(DOC, "   ") is None
    repeated = "x y. x y. x y."
    assert locate_evidence(repeated, "x y", near=9) == (10, 13)  # the occurrence nearest the passage


@pytest.mark.parametrize(
    "chunk,expected",
    [
        ((10, 20), 0.5),  # chunk inside the span: it holds 10 of 20 evidence characters
        ((0, 100), 1.0),  # span inside the chunk
        ((0, 15), 0.25),  # span split across two chunks: the first part
        ((15, 40), 0.75),  # ... and the rest
        ((30, 50), 0.0),  # touching the end, no overlap
    ],
)
def test_coverage_hand_computed(chunk, expected):
    assert coverage(np.array([chunk[0]]), np.array([chunk[1]]), 10, 30)[0] == pytest.approx(expected)


def test_union_coverage_counts_overlapping_chunks_once():
    assert union_coverage(np.array([0, 12]), np.array([20, 25]), 10, 30) == pytest.approx(15 / 20)
    assert union_coverage(np.array([0, 15]), np.array([15, 40]), 10, 30) == 1.0
    assert union_coverage(np.array([], dtype=int), np.array([], dtype=int), 10, 30) == 0.0


def test_span_judgement_and_recall_over_split_evidence():
    chunks = pd.DataFrame(
        {
            "chunk_id": ["a", "b", "c", "x"],
            "doc_id": ["d", "d", "d", "other"],
            "start": [0, 15, 40, 0],
            "end": [15, 40, 60, 100],
        }
    )
    golden = [{"qid": "q", "doc_id": "d", "start": 10, "end": 30}]
    (judgement,) = judge(golden, chunks, min_coverage=0.5)
    assert judgement.indices.tolist() == [0, 1]  # only chunks of the same document that overlap
    assert judgement.gains.tolist() == [0.0, 0.75]  # chunk a holds 25% < min_coverage: not relevant
    ranks = np.array([1, 3])
    assert span_recall(judgement, ranks, [1, 2, 3]) == {1: 0.25, 2: 0.25, 3: 1.0}
    row = question_metrics(
        ranks[judgement.gains > 0], judgement.gains[judgement.gains > 0], [1, 3], span_recall(judgement, ranks, [1, 3])
    )
    assert row["hit@1"] == 0 and row["hit@3"] == 1 and row["reciprocal_rank"] == pytest.approx(1 / 3)
    assert row["recall@1"] == 0.25  # the non-relevant top chunk still covers part of the evidence


def test_evidence_across_the_gap_a_chunker_trims_counts_only_what_chunks_hold():
    """Chunks [0, 57) and [58, 94) with overlap 0: the space at 57 is in no chunk. Evidence 9-94 has
    85 characters, 84 of them held; the two chunks at ranks 1-2 cover all a retriever can give, so
    recall@2 is 1 (it was 84/85) and the gains add up to 1."""
    chunks = pd.DataFrame({"chunk_id": ["a", "b"], "doc_id": ["d", "d"], "start": [0, 58], "end": [57, 94]})
    (judgement,) = judge([{"qid": "q", "doc_id": "d", "start": 9, "end": 94}], chunks, min_coverage=0.3)
    assert judgement.held == pytest.approx(84 / 85)
    assert judgement.gains.tolist() == pytest.approx([48 / 84, 36 / 84])
    assert span_recall(judgement, np.array([1, 2]), [1, 2]) == pytest.approx({1: 48 / 84, 2: 1.0})
    # the expected policy (all orders of a tie) and the context budget count alike
    from retrieval_bench.evaluation.score.scoring import score_run
    from retrieval_bench.evaluation.score.settings import Scoring

    chunks["text"] = ["x" * 57, "y" * 36]
    run = pd.DataFrame({"qid": ["q", "q"], "chunk_id": ["a", "b"], "rank": [1, 2], "score": [1.0, 1.0]})
    golden = [{"qid": "q", "doc_id": "d", "start": 9, "end": 94}]
    row = score_run(golden, chunks, run, Scoring((1, 2), 0.3, "expected", (57, 100))).iloc[0]
    assert row["recall@2"] == pytest.approx(1.0) and row["recall_budget@100"] == pytest.approx(1.0)
    assert row["recall@1"] == pytest.approx((48 / 84 + 36 / 84) / 2)  # either chunk first, by chance
    assert row["recall_budget@57"] == pytest.approx(1 / 2 * 48 / 84 + 1 / 2 * 36 / 84)
    # The judged view counts against the same held share: a chunk the judge graded relevant (c, in
    # another document) took the whole span and the judged recall@2 fell to 84/85 below the strict 1.
    from retrieval_bench.evaluation.score.judged import JudgedInputs
    from retrieval_bench.evaluation.score.scoring import score_run_both_views

    chunks = pd.concat(
        [chunks, pd.DataFrame({"chunk_id": ["c"], "doc_id": ["e"], "start": [0], "end": [40], "text": ["z" * 40]})]
    )
    pool = [{"qid": "q", "chunk_id": "c", "grade": 3}]
    for ties in ("pessimistic", "expected"):
        both = score_run_both_views(
            golden,
            chunks,
            run,
            Scoring((1, 2), 0.3, ties),
            JudgedInputs(pd.DataFrame({"group": [], "chunk_id": []}), pool),
        ).iloc[0]
        assert both["recall@2"] == both["judged_recall@2"] == pytest.approx(1.0)
    ranked_c = pd.DataFrame(
        {"qid": ["q"] * 3, "chunk_id": ["c", "a", "b"], "rank": [1, 2, 3], "score": [3.0, 2.0, 1.0]}
    )
    both = score_run_both_views(
        golden,
        chunks,
        ranked_c,
        Scoring((1,), 0.3, "pessimistic"),
        JudgedInputs(pd.DataFrame({"group": [], "chunk_id": []}), pool),
    ).iloc[0]
    assert both["judged_recall@1"] == 1.0  # the judge's chunk holds it all: 1 at most, not 85/84


def test_pre_chunked_spans_reduce_exactly_to_chunk_id_metrics():
    rng = np.random.default_rng(7)
    texts = [f"chunk number {i} " * 3 for i in range(30)]
    chunks = pd.DataFrame(
        {
            "chunk_id": [f"c{i}" for i in range(30)],
            "doc_id": [f"c{i}" for i in range(30)],
            "start": 0,
            "end": [len(t) for t in texts],
        }
    )
    ks = [1, 3, 5, 10]
    for _ in range(50):
        gold = int(rng.integers(30))
        start = int(rng.integers(0, 10))
        span_row = {"qid": "q", "doc_id": f"c{gold}", "start": start, "end": start + int(rng.integers(1, 20))}
        label_row = {"qid": "q", "relevant": {f"c{gold}": 1}}
        scores = rng.random(30)
        results = []
        for row in (span_row, label_row):
            (judgement,) = judge([row], chunks, 0.5)
            ranks = pessimistic_ranks(scores, judgement.indices)
            recall = span_recall(judgement, ranks, ks) if judgement.span else None
            results.append(question_metrics(ranks, judgement.gains, ks, recall))
        assert results[0] == results[1]


def test_handwritten_rows_follow_the_evidence_not_the_chunking():
    documents = pd.DataFrame({"doc_id": ["d.md", "e.md"], "text": [DOC, "Another document entirely."]})
    records = [
        {"question": "Can readers and writers work together?", "doc_id": "d.md", "evidence": "WAL mode lets readers"},
        {"question": "Elsewhere?", "doc_id": "gone.md", "evidence": "x"},
        {"question": "Lost?", "doc_id": "e.md", "evidence": "not there"},
    ]
    small = handwritten_rows(records, documents, chunk_documents(documents, 40, 10))
    large = handwritten_rows(records, documents, chunk_documents(documents, 400, 10))
    assert small[1] == large[1] == {"other_corpus": 1, "not_located": 1, "ambiguous_evidence": 0}
    for rows in (small[0], large[0]):
        (row,) = rows
        assert DOC[row["start"] : row["end"]] == "WAL mode lets readers"
        assert row["source"] == "hand-written" and row["doc_id"] == "d.md"
    assert small[0][0]["qid"] == large[0][0]["qid"]  # same question, same id, whatever the chunking


def test_sampling_is_reproducible_and_duplicates_are_dropped():
    rows = [{"qid": f"q{i:02d}", "question": f"question {i}?"} for i in range(40)]
    first = sample_rows(rows, 10, seed=3)
    assert first == sample_rows(list(reversed(rows)), 10, seed=3) and len(first) == 10
    assert first != sample_rows(rows, 10, seed=4)
    assert sample_rows(rows, 0, seed=3) == sorted(rows, key=lambda r: r["qid"])
    # prefix-stable: one more allowed question adds one; one more question displaces at most one
    qids = lambda sampled: {row["qid"] for row in sampled}  # noqa: E731
    assert qids(first) < qids(sample_rows(rows, 11, seed=3)) and len(sample_rows(rows, 11, seed=3)) == 11
    assert len(qids(first) - qids(sample_rows([*rows, {"qid": "q40", "question": "new?"}], 10, seed=3))) <= 1
    kept, dropped = deduplicate(rows[:3] + [{"qid": "q99", "question": "QUESTION  1?"}])
    assert dropped == 1 and len(kept) == 3


def test_evidence_is_found_whatever_its_unicode_form():
    """Evidence typed in NFC ("é" one character) in a document written in NFD ("e" and a combining
    accent), and the reverse, is found; the span is the document's own text."""
    import unicodedata

    from retrieval_bench.goldenset.evidence import locate_in_passage

    sentence = "La crème brûlée coûte huit euros à Zürich."
    for document_form, evidence_form in (("NFD", "NFC"), ("NFC", "NFD")):
        document = "Menu. " + unicodedata.normalize(document_form, sentence) + " Fin."
        evidence = unicodedata.normalize(evidence_form, "crème brûlée coûte huit euros à Zürich")
        for found in (locate_evidence(document, evidence), locate_in_passage(evidence, document)):
            assert found is not None
            assert unicodedata.normalize("NFC", document[found[0] : found[1]]) == unicodedata.normalize("NFC", evidence)
