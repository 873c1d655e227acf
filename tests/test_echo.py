"""The echo gauge: copied questions are flagged, paraphrases pass, BM25 ranks the gold passage."""
from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_bench.echo import ECHO_MIN_NGRAM, gauge, longest_shared_run, measure
from retrieval_bench.goldenset import handwritten_rows
from retrieval_bench.io import read_jsonl
from retrieval_bench.load import chunk_documents, read_documents_folder

ROOT = Path(__file__).resolve().parents[1]

PASSAGE = (
    "In WAL mode, readers do not block writers and a writer does not block readers. "
    "The WAL file grows until a checkpoint copies its pages back into the database file; "
    "by default a checkpoint runs when the WAL reaches 1000 pages."
)


def test_longest_shared_run_counts_consecutive_words_ignoring_case_and_punctuation():
    assert longest_shared_run("Do READERS block writers?", PASSAGE) == 2  # "block writers"
    assert longest_shared_run("when the WAL reaches 1000 pages, what happens?", PASSAGE) == 6  # "when the wal reaches 1000 pages"
    assert longest_shared_run("", PASSAGE) == 0


@pytest.mark.parametrize(
    "question",
    [
        "Does a writer does not block readers in WAL mode?",  # a copied run of five words
        "What happens when a checkpoint copies its pages back into the database file?",
        "WAL file grows until a checkpoint?",  # five words in a row
        "Do readers block writers in WAL mode?",  # every content word is in the passage
    ],
)
def test_planted_verbatim_questions_are_flagged(question):
    assert measure(question, PASSAGE).flagged


@pytest.mark.parametrize(
    "question",
    [
        "Can people keep reading the database while someone else is saving changes?",
        "How large does the log get before its contents are moved back automatically?",
        "Is concurrent access a problem in write-ahead logging?",
        "WAL readers?",  # too few content words to call it an echo
    ],
)
def test_paraphrases_are_not_flagged(question):
    echo = measure(question, PASSAGE)
    assert not echo.flagged and echo.longest_ngram < ECHO_MIN_NGRAM


def test_bundled_handwritten_questions_are_not_flagged():
    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    passages = chunk_documents(documents, 800, 100)
    rows, counts = handwritten_rows(read_jsonl(ROOT / "data" / "handwritten_questions.jsonl"), documents, passages)
    assert len(rows) == 180 and counts == {"other_corpus": 0, "not_located": 0}
    summary = gauge(rows, dict(zip(passages["chunk_id"], passages["text"])), passages["text"].tolist(), passages["chunk_id"].tolist())
    # The figures the README quotes.
    assert summary["echo_rate"] == 0.0
    assert max(row["echo_longest_ngram"] for row in rows) == 4
    assert max(row["echo_content_share"] for row in rows) < 0.86
    assert round(summary["bm25_mrr"], 2) == 0.38 and round(summary["bm25_recall@1"], 2) == 0.26
    assert all(1 <= row["bm25_rank"] <= len(passages) for row in rows)


def test_gauge_marks_rows_and_ranks_the_gold_passage():
    passages = {
        "a": PASSAGE,
        "b": "An in-memory database exists only as long as the connection that opened it is open.",
        "c": "AUTOINCREMENT prevents the reuse of ROWIDs from previously deleted rows.",
    }
    rows = [
        {"question": "What happens when a checkpoint copies its pages back into the database file?", "gold_chunk_id": "a"},
        {"question": "Could a row identifier be handed out twice after I delete things?", "gold_chunk_id": "c"},
        {"question": "unknown gold", "gold_chunk_id": "zzz"},
    ]
    summary = gauge(rows, passages, list(passages.values()), list(passages))
    assert rows[0]["echo"] is True and rows[0]["bm25_rank"] == 1
    assert rows[1]["echo"] is False and rows[1]["echo_content_share"] < 0.9
    assert rows[2]["echo"] is None and rows[2]["bm25_rank"] is None
    assert summary["n_measured"] == 2 and summary["echo_rate"] == 0.5
    assert summary["bm25_recall@1"] == (1.0 if rows[1]["bm25_rank"] == 1 else 0.5)
