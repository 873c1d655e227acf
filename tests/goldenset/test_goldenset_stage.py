"""The golden-set stage in-process on a slice of the sample: hand-written questions only, the
echo gauge against the evidence, and no notice about a question cache the user never used."""

from __future__ import annotations

import json

import pytest
from conftest import copy_project, set_params

from stages import generate_goldenset, load_chunks


@pytest.fixture
def slice_project(tmp_path, monkeypatch):
    project = copy_project(tmp_path / "project")
    monkeypatch.chdir(project)
    load_chunks.main()
    return project


def test_handwritten_only_set_says_nothing_about_the_cache(slice_project, capsys):
    generate_goldenset.main([])
    printed = capsys.readouterr()
    assert "no cached question" not in printed.out + printed.err
    report = json.loads((slice_project / "metrics" / "goldenset.json").read_text())
    # Nothing was asked, nothing rejected: the line says so, not "after 4 rounds ...; rerun to continue".
    assert "rounds of replacing rejected replies" not in printed.out + printed.err
    assert (
        f"{report['n_handwritten']} hand-written questions; generation off (provider none)" in printed.out + printed.err
    )
    assert report["n_handwritten"] == report["n_questions"] >= 10
    assert report["echo_rate"] == 0.0 and "bm25_mrr" not in report  # BM25 figures: `retrieval-bench gauge`
    rows = [json.loads(line) for line in (slice_project / "data" / "goldenset.jsonl").read_text().splitlines()]
    answerable = [row for row in rows if row["kind"] != "unanswerable"]  # an unanswerable one has no evidence to echo
    assert answerable and all(row["echo"] is False and row["echo_longest_ngram"] <= 4 for row in answerable)


def test_a_planted_echo_is_flagged_against_its_evidence(slice_project, capsys):
    records = [
        json.loads(line) for line in (slice_project / "data" / "handwritten_questions.jsonl").read_text().splitlines()
    ]
    record = next(r for r in records if r["doc_id"] == "wal.md")
    # Quote the last words of the evidence: what a gauge against a reference passage could miss.
    copied = " ".join(record["evidence"].split()[-6:])
    planted = {
        "qid": "my-echo-1",
        "question": f"What is meant by {copied}?",
        "doc_id": "wal.md",
        "evidence": record["evidence"],
        "team": "qa",
    }
    (slice_project / "data" / "planted.jsonl").write_text(json.dumps(planted) + "\n")
    set_params(slice_project, **{"generate.handwritten": "data/planted.jsonl"})
    generate_goldenset.main([])
    rows = [json.loads(line) for line in (slice_project / "data" / "goldenset.jsonl").read_text().splitlines()]
    assert [(row["qid"], row["team"], row["echo"]) for row in rows] == [("my-echo-1", "qa", True)]
