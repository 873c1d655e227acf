"""bench/judge_agreement.py against the stub server on a slice of SciFact: a judge that grades
exactly as the human labels agrees perfectly (kappa 1) and keeps the system ranking; a rerun pays
nothing; without SciFact the bench skips in one line."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from conftest import SHARED_SCIFACT
from stub_llm import StubLLM, stage_env

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))
import judge_agreement  # noqa: E402


def test_skips_cleanly_without_scifact_where_the_workplace_keeps_it_and_refuses_a_mistyped_folder(
    tmp_path, capsys, monkeypatch
):
    import common

    monkeypatch.setattr(common, "SCIFACT", tmp_path / "nowhere")  # a user's clone: the workplace's folder absent
    assert judge_agreement.main([str(tmp_path / "nowhere")]) == 0
    assert (
        capsys.readouterr().out.strip()
        == f"judge_agreement: skipped: {tmp_path / 'nowhere'} has no corpus.jsonl (BEIR SciFact)"
    )
    with pytest.raises(common.InputError, match=r"typo: no corpus.jsonl here; expected a BEIR SciFact folder"):
        judge_agreement.main([str(tmp_path / "typo")])  # a folder the user named: a mistyped path is no skip


def test_agreement_statistics():
    assert judge_agreement.cohen_kappa([1, 0, 1, 0], [1, 0, 1, 0]) == 1.0
    assert judge_agreement.cohen_kappa([1, 1, 0, 0], [1, 0, 1, 0]) == 0.0
    assert (
        judge_agreement.kendall_tau([3, 2, 1], [30, 20, 10]) == 1.0
        and judge_agreement.kendall_tau([3, 2, 1], [1, 2, 3]) == -1.0
    )


@pytest.mark.skipif(not (SHARED_SCIFACT / "corpus.jsonl").is_file(), reason="../shared/data/scifact is absent")
def test_a_judge_grading_like_the_humans_agrees_and_keeps_the_ranking(tmp_path, monkeypatch, capsys):
    qrels = [line.split("\t") for line in (SHARED_SCIFACT / "qrels" / "test.tsv").read_text().splitlines()[1:]]
    relevant_docs = {doc for _, doc, grade in qrels if int(grade) > 0}
    texts = {}
    for line in (SHARED_SCIFACT / "corpus.jsonl").read_text().splitlines():
        doc = json.loads(line)
        if doc["_id"] in relevant_docs:
            texts[f"{doc.get('title') or ''} {doc['text']}".strip()] = doc["_id"]
    cache = tmp_path / "judgements.jsonl"
    argv = [
        str(SHARED_SCIFACT),
        "--queries",
        "6",
        "--corpus-limit",
        "30",
        "--depth",
        "5",
        "--max-seq-length",
        "96",
        "--provider",
        "anthropic",
        "--cache",
        str(cache),
        "--json",
    ]
    with StubLLM() as stub:
        # The stub sees only the passage: grade 3 an abstract some test query judges relevant, else 0.
        stub.reply = lambda passage: "##final score: 3" if passage in texts else "##final score: 0"
        for key, value in stage_env(stub).items():
            monkeypatch.setenv(key, value)
        assert judge_agreement.main(argv) == 0
        report = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert report["queries"] == 6 and report["graded_pairs"] == report["pooled_pairs"] > 0
        assert report["requests"] == report["pooled_pairs"] == len(stub.generation_requests())
        # Every abstract graded 3 is relevant to some query, not always to this one: near-perfect, not perfect.
        assert report["confusion"]["human_relevant_judge_not"] == 0 and report["cohen_kappa"] > 0.5
        assert set(report["ndcg@10_human"]) == {"dense", "bm25", "hybrid"} and -1 <= report["kendall_tau"] <= 1
        stub.reset_counts()
        assert judge_agreement.main(argv) == 0
        assert stub.generation_requests() == [] and json.loads(capsys.readouterr().out.strip())["requests"] == 0
