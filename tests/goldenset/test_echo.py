"""The echo gauge: copied questions are flagged, paraphrases pass, BM25 ranks the gold passage."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest

from retrieval_bench.core.files import read_jsonl
from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
from retrieval_bench.goldenset.build import evidence_texts, handwritten_rows, read_handwritten
from retrieval_bench.goldenset.echo import ECHO_MIN_NGRAM, longest_shared_run, mark, measure
from retrieval_bench.goldenset.gauge import gauge_question_set

ROOT = Path(__file__).resolve().parents[2]

PASSAGE = (
    "In WAL mode, readers do not block writers and a writer does not block readers. "
    "The WAL file grows until a checkpoint copies its pages back into the database file; "
    "by default a checkpoint runs when the WAL reaches 1000 pages."
)


def test_longest_shared_run_counts_consecutive_words_ignoring_case_and_punctuation():
    assert longest_shared_run("Do READERS block writers?", PASSAGE) == 2  # "block writers"
    assert (
        longest_shared_run("when the WAL reaches 1000 pages, what happens?", PASSAGE) == 6
    )  # "when the wal reaches 1000 pages"
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


def sample_tables():
    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    return documents, chunk_documents(documents, 800, 100)


def test_bundled_handwritten_questions_are_not_flagged_against_their_evidence():
    documents, passages = sample_tables()
    records = read_handwritten(ROOT / "data" / "handwritten_questions.jsonl")
    rows, counts = handwritten_rows(records, documents, passages)
    assert len(rows) == len(records) and counts == {"other_corpus": 0, "not_located": 0, "ambiguous_evidence": 0}
    summary = mark(rows, evidence_texts(rows, dict(zip(documents["doc_id"], documents["text"]))))
    answerable = [row for row in rows if row["kind"] != "unanswerable"]  # an unanswerable one has no evidence to echo
    assert summary["echo_rate"] == 0.0 and summary["n_measured"] == len(answerable) < len(rows)
    assert max(row["echo_longest_ngram"] for row in answerable) <= 4


def planted_echo(record: dict, offset: int) -> str:
    """A question that copies seven words of its evidence, from a different place each time (the
    start, the middle, the very end: where a passage-based gauge missed them)."""
    evidence_words = record["evidence"].split()
    start = [0, max(0, len(evidence_words) // 2 - 3), max(0, len(evidence_words) - 7)][offset % 3]
    return f"Why does {' '.join(evidence_words[start : start + 7])} matter here?"


def single_evidence_records() -> list[dict]:
    """The bundled hand-written questions with one evidence text (not the multi or unanswerable ones)."""
    return [r for r in read_jsonl(ROOT / "data" / "handwritten_questions.jsonl") if isinstance(r.get("evidence"), str)]


def write_sets(tmp_path: Path) -> tuple[Path, Path]:
    records = single_evidence_records()
    paraphrased = tmp_path / "paraphrased.jsonl"
    echoed = tmp_path / "echoed.jsonl"
    paraphrased.write_text(
        "".join(json.dumps({**r, "qid": f"para-{i}", "author": "me"}) + "\n" for i, r in enumerate(records))
    )
    echoed.write_text(
        "".join(
            json.dumps({**r, "qid": f"echo-{i}", "question": planted_echo(r, i)}) + "\n"
            for i, r in enumerate(records)
            if len(r["evidence"].split()) >= 7
        )
    )
    return paraphrased, echoed


def test_gauge_flags_planted_echoes_and_passes_paraphrases(tmp_path):
    documents, chunks = sample_tables()
    paraphrased, echoed = write_sets(tmp_path)
    kind, echo_table, echo_summary = gauge_question_set(echoed, chunks, documents)
    assert kind == "handwritten" and len(echo_table) >= 150
    assert echo_summary["echo_rate"] >= 0.95
    _, para_table, para_summary = gauge_question_set(paraphrased, chunks, documents)
    assert para_summary["echo_rate"] <= 0.05
    assert para_table["qid"].tolist()[:2] == ["para-0", "para-1"]  # the user's own ids
    assert (para_table["n_relevant_chunks"] >= 1).all() and para_table["bm25_rank"].notna().all()


def test_gauge_reads_ragas_and_llamaindex_sets_with_their_ids(tmp_path):
    documents, chunks = sample_tables()
    records = single_evidence_records()[:20]
    ragas_csv = tmp_path / "testset.csv"
    with open(ragas_csv, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["user_input", "reference_contexts", "reference", "synthesizer_name"])
        for r in records:
            writer.writerow([r["question"], repr([r["evidence"]]), "an answer", "single_hop"])
    llama = tmp_path / "qa.json"
    llama.write_text(
        json.dumps(
            {
                "queries": {f"li-{i}": r["question"] for i, r in enumerate(records)},
                "corpus": {f"node-{i}": r["evidence"] for i, r in enumerate(records)},
                "relevant_docs": {f"li-{i}": [f"node-{i}"] for i in range(len(records))},
                "mode": "text",
            }
        )
    )
    kind, ragas_table, ragas_summary = gauge_question_set(ragas_csv, chunks, documents)
    assert kind == "ragas" and len(ragas_table) == 20 and ragas_summary["echo_rate"] == 0.0
    assert (ragas_table["n_relevant_chunks"] >= 1).all()
    kind, llama_table, _ = gauge_question_set(llama, chunks, documents)
    assert kind == "llamaindex" and llama_table["qid"].tolist() == [f"li-{i}" for i in range(20)]
    assert (llama_table["n_relevant_chunks"] >= 1).all()
    # The same files import as the golden set (generate.handwritten), keeping ids and fields.
    for path, prefix in ((llama, "li-"), (ragas_csv, None)):
        rows, counts = handwritten_rows(read_handwritten(path), documents, chunks)
        assert len(rows) == 20 and counts["not_located"] == 0
        if prefix:
            assert all(row["qid"].startswith(prefix) for row in rows)
        else:
            assert all(row["synthesizer_name"] == "single_hop" for row in rows)


def test_handwritten_questions_keep_the_users_qid_and_fields(tmp_path):
    documents, passages = sample_tables()
    paraphrased, _ = write_sets(tmp_path)
    rows, _ = handwritten_rows(read_handwritten(paraphrased), documents, passages)
    assert rows[0]["qid"] == "para-0" and rows[0]["author"] == "me"
    # Without a qid a question keeps the id derived from its document and text, as before.
    plain, _ = handwritten_rows(read_handwritten(ROOT / "data" / "handwritten_questions.jsonl"), documents, passages)
    assert plain[0]["qid"].startswith("q") and len(plain[0]["qid"]) == 13


def test_gauge_command_prints_rate_and_offenders(tmp_path, capsys):
    from retrieval_bench.cli import main

    documents, chunks = sample_tables()
    documents.to_parquet(tmp_path / "documents.parquet")
    chunks.to_parquet(tmp_path / "chunks.parquet")
    _, echoed = write_sets(tmp_path)
    out = tmp_path / "gauge.csv"
    assert (
        main(
            [
                "gauge",
                str(echoed),
                "--chunks",
                str(tmp_path / "chunks.parquet"),
                "--documents",
                str(tmp_path / "documents.parquet"),
                "--out",
                str(out),
                "--show",
                "3",
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "echo rate 100.0%" in printed and printed.count("ECHO ") == 3
    assert set(pd.read_csv(out)["echo"]) == {True}


def test_a_quote_from_evidence_outside_the_best_passage_is_flagged(tmp_path):
    # Evidence longer than a reference passage, quoted at its far end: a gauge measuring against
    # the passage that overlaps the evidence most flagged 9 of 100 such questions.
    documents, chunks = sample_tables()
    texts = dict(zip(documents["doc_id"], documents["text"]))
    records = []
    for number, chunk in enumerate(chunks.itertuples()):
        document = texts[chunk.doc_id]
        start, end = chunk.start + 300, min(len(document), chunk.start + 1500)
        if end - start >= 1100 and len(records) < 40:
            words_ = document[start:end].split()
            records.append(
                {
                    "qid": f"s{number}",
                    "question": f"Why does {' '.join(words_[-8:-1])} matter here?",
                    "doc_id": chunk.doc_id,
                    "evidence": document[start:end],
                }
            )
    path = tmp_path / "straddling.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, table, summary = gauge_question_set(path, chunks, documents)
    assert len(table) == 40 and summary["echo_rate"] == 1.0
