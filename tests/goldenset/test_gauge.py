"""`gauge` judges every question's relevance in one spans.judge call (each call indexes all the
chunks) and gets what judging each row alone gets."""

from __future__ import annotations

import json

import pandas as pd
from test_echo import ROOT, sample_tables

from retrieval_bench.core import relevance as spans
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.goldenset import gauge


def test_one_judge_call_for_all_questions_matches_judging_each_alone(tmp_path, monkeypatch):
    documents, chunks = sample_tables()
    records = read_jsonl(ROOT / "data" / "handwritten_questions.jsonl")[:40]
    # Chunk labels for the first ten (their node ids are chunk ids), evidence spans for the rest.
    node_ids = [chunks["chunk_id"].iloc[i * 7] if i < 10 else f"node-{i}" for i in range(len(records))]
    path = tmp_path / "qa.json"
    path.write_text(
        json.dumps(
            {
                "queries": {f"q{i}": r["question"] for i, r in enumerate(records)},
                "corpus": {node: r["evidence"] for node, r in zip(node_ids, records)},
                "relevant_docs": {f"q{i}": [node] for i, node in enumerate(node_ids)},
                "mode": "text",
            }
        )
    )
    calls = []
    monkeypatch.setattr(gauge, "judge", lambda rows, c, m: calls.append(len(rows)) or spans.judge(rows, c, m))
    _, table, summary = gauge.gauge_question_set(path, chunks, documents)
    assert calls == [40]

    monkeypatch.setattr(gauge, "judge", lambda rows, c, m: [j for row in rows for j in spans.judge([row], c, m)])
    _, alone, alone_summary = gauge.gauge_question_set(path, chunks, documents)
    pd.testing.assert_frame_equal(table, alone)
    assert summary == alone_summary and (table["n_relevant_chunks"] >= 1).all()


def test_a_keyword_question_quoting_rare_terms_is_flagged_as_generate_goldenset_flags_it(tmp_path):
    """`gauge` applied only the general rule, which two words never reach: a keyword query of two
    of its evidence's rare terms was flagged by generate_goldenset and not by `gauge`."""
    from retrieval_bench.goldenset import echo, kinds

    documents, chunks = sample_tables()
    rare = kinds.Corpus(chunks).rare()
    text = documents["text"].iloc[0]
    words = [word for word in echo.words(text) if word.lower() in rare]
    first = text.find(words[0])
    second = text.find(words[1], first + len(words[0]))
    evidence = text[first : second + len(words[1])]
    row = {"question": f"{words[0]} {words[1]}", "doc_id": documents["doc_id"].iloc[0], "evidence": evidence}
    path = tmp_path / "keyword.jsonl"
    path.write_text(json.dumps({**row, "kind": "keyword"}) + "\n" + json.dumps(row) + "\n")
    _, table, summary = gauge.gauge_question_set(path, chunks, documents)
    assert table["echo"].tolist() == [True, False] and summary["echo_flagged"] == 1
