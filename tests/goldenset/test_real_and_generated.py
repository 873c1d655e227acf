"""Real labelled queries beside generated questions on the same corpus: a BEIR folder with
generate.provider set gives both in one golden set (the real ones question set `real`, graded and
multi-relevant judgements kept whole), through load_chunks and generate_goldenset with the real
anthropic SDK against the stub server; the dry run prints the plan for both; with provider none
the golden set is the real queries only, and the settings that cannot take effect are named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, stage_env, stage_project

from retrieval_bench.evaluation.score.segments import question_set
from stages import load_chunks

ROOT = Path(__file__).resolve().parents[2]
GOLDEN = "data/goldenset.jsonl"
QUERIES = {
    "r1": ("does a reader block a writer in wal mode", {"p0": 2, "p3": 1, "p5": 0}),  # graded, several relevant
    "r2": ("can wal work over a network filesystem", {"p4": 1}),
    "r3": ("what does autoincrement add over rowid", {"p7": 2}),
}


def paragraphs() -> list[str]:
    texts = [(ROOT / "data" / "sample" / "sqlite" / name).read_text() for name in ("wal.md", "autoinc.md")]
    return [p.strip() for text in texts for p in text.split("\n\n") if len(p.strip()) > 120][:10]


@pytest.fixture
def beir_project(tmp_path, monkeypatch):
    """A stage project whose load.source is a BEIR folder of 10 passages and 3 judged queries."""
    project = stage_project(tmp_path / "p")
    folder = project / "data" / "beir"
    (folder / "qrels").mkdir(parents=True)
    corpus = [{"_id": f"p{i}", "title": "", "text": text} for i, text in enumerate(paragraphs())]
    (folder / "corpus.jsonl").write_text("".join(json.dumps(doc) + "\n" for doc in corpus))
    (folder / "queries.jsonl").write_text(
        "".join(json.dumps({"_id": qid, "text": text}) + "\n" for qid, (text, _) in QUERIES.items())
    )
    qrels = [f"{qid}\t{doc}\t{grade}" for qid, (_, grades) in QUERIES.items() for doc, grade in grades.items()]
    (folder / "qrels" / "test.tsv").write_text("query-id\tcorpus-id\tscore\n" + "\n".join(qrels) + "\n")
    set_params(project, **{"load.source": "data/beir", "generate.max_questions": 4})
    monkeypatch.chdir(project)
    load_chunks.main()
    assert len(read_jsonl(project / "data" / "labels.jsonl")) == 3
    return project


def test_real_queries_and_generated_questions_in_one_golden_set(beir_project):
    set_params(beir_project, **{"generate.provider": "anthropic"})
    with StubLLM() as stub:
        status, out, err = run_stage_here(beir_project, stub)
        assert status == 0, err
        assert len(stub.generation_requests()) == 4  # max_questions: the real queries are extra
    golden = read_jsonl(beir_project / GOLDEN)
    real = {row["qid"]: row for row in golden if question_set(row) == "real"}
    assert sorted(real) == ["r1", "r2", "r3"] and {row["source"] for row in real.values()} == {"qrels"}
    assert real["r1"]["relevant"] == {"p0": 2, "p3": 1, "p5": 0} and real["r1"]["gold_chunk_id"] == "p0"
    assert [span[0::3] for span in real["r1"]["relevant_spans"]] == [["p0", 2], ["p3", 1], ["p5", 0]]
    generated = [row for row in golden if question_set(row) == "generated"]
    assert len(generated) == 4 and {row["source"] for row in generated} == {"claude-haiku-4-5"}
    report = json.loads((beir_project / "metrics" / "goldenset.json").read_text())
    assert report["n_by_question_set"] == {"generated": 4, "real": 3} and report["n_questions"] == 7
    assert "3 real labelled queries (question set real) + 4 questions to generate" in out


def test_the_dry_run_prints_the_plan_for_both_and_asks_nothing(beir_project):
    set_params(beir_project, **{"generate.provider": "anthropic"})
    with StubLLM() as stub:
        no_key = {k: v for k, v in stage_env(stub).items() if k != "ANTHROPIC_API_KEY"}
        status, out, err = run_stage_here(beir_project, stub, "--dry-run", env=no_key)
        assert status == 0, err
        assert not stub.requests
    assert "3 real labelled queries (question set real) + 4 questions to generate" in out
    assert "dry run" in out and not (beir_project / GOLDEN).exists()


def test_with_provider_none_the_golden_set_is_the_real_queries_and_unused_settings_are_named(beir_project):
    (beir_project / "data" / "mine.jsonl").write_text(
        json.dumps({"question": "q?", "doc_id": "p0", "evidence": paragraphs()[0][:40]}) + "\n"
    )
    (beir_project / "data" / "style.jsonl").write_text(json.dumps({"question": "how do i turn on wal"}) + "\n")
    set_params(
        beir_project,
        **{
            "generate.handwritten": "data/mine.jsonl",
            "generate.style_examples": "data/style.jsonl",
            "generate.drop_echo": True,
        },
    )
    with StubLLM() as stub:
        status, out, err = run_stage_here(beir_project, stub)
        assert status == 0, err
        dry_status, dry_out, _ = run_stage_here(beir_project, stub, "--dry-run")
        assert not stub.requests
    golden = read_jsonl(beir_project / GOLDEN)
    assert sorted(row["qid"] for row in golden) == ["r1", "r2", "r3"]
    assert {question_set(row) for row in golden} == {"real"}
    expected = (
        "3 real labelled queries (question set real); no question is generated (generate.provider none); "
        "not used without a provider: generate.handwritten data/mine.jsonl, generate.style_examples "
        "data/style.jsonl, generate.drop_echo true\n"
    )
    assert expected in out and expected in dry_out and dry_status == 0
    assert "style examples" not in out  # said to be unused, not said to be in every prompt
    (beir_project / "data" / "none.jsonl").write_text("")
    set_params(
        beir_project,
        **{"generate.handwritten": "data/none.jsonl", "generate.style_examples": None, "generate.drop_echo": False},
    )
    with StubLLM() as stub:
        out = run_stage_here(beir_project, stub)[1]
    assert "3 real labelled queries (question set real); no question is generated (generate.provider none)\n" in out


def test_a_query_log_larger_than_max_questions_is_sampled_and_says_so(beir_project):
    """With more real queries than generate.max_questions, 2 of 3 were scored and nothing said so:
    the load line said 3, the golden set held 2."""
    set_params(beir_project, **{"generate.max_questions": 2})
    with StubLLM() as stub:
        status, out, err = run_stage_here(beir_project, stub)
        assert status == 0, err
    assert "real labelled queries: a sample of 2 of 3 (generate.max_questions 2; 0 takes them all)" in out
    report = json.loads((beir_project / "metrics" / "goldenset.json").read_text())
    assert report["n_questions"] == 2 and report["real_left_out"] == 1
