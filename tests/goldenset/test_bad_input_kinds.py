"""Bad generate.kinds: one `error:` line naming the key, exit 1, nothing asked or written (the
generate_goldenset stage against the stub server); and `match` with questions to take the mix from."""

from __future__ import annotations

import json

import pytest
from conftest import set_params
from stub_llm import StubLLM, read_jsonl, run_stage_here, stage_project


@pytest.mark.parametrize(
    ("kinds", "expected"),
    [
        (
            {"single": 0.5, "multihop": 0.5},
            "generate.kinds.multihop: unknown kind (kinds: single, multi, unanswerable, keyword)",
        ),
        ({"single": 0.6, "multi": 0.3}, "generate.kinds: the shares sum to 0.9, not 1"),
        ({"single": 0.7, "multi": 0.4}, "the shares sum to 1.1"),
        ({"single": 1.2, "keyword": -0.2}, "generate.kinds.keyword is a negative share (-0.2)"),
        ({"single": "most"}, "generate.kinds.single must be a share between 0 and 1, got 'most'"),
        ({}, "generate.kinds must be a mapping of kinds to shares"),
        ("everything", "generate.kinds must be a mapping of kinds to shares"),
        (
            "match",
            "generate.kinds: match generates in the mix of the real or hand-written questions, and there are none",
        ),
    ],
)
def test_bad_kinds_are_one_line(tmp_path, kinds, expected):
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])  # no real labels, no hand-written questions
    set_params(project, **{"generate.provider": "anthropic", "generate.kinds": kinds})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err
    assert expected in err and "params.yaml" in err
    assert not (project / "data/goldenset.jsonl").exists()


def test_match_generates_in_the_mix_of_the_handwritten_questions(tmp_path):
    """generate.kinds: match: the hand-written questions' kinds by rule (three questions, one
    keyword-shaped query): a third of what is generated is keyword queries."""
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    handwritten = [
        ("How do I keep a whole database in RAM only?", "force an SQLite database to exist purely in memory"),
        ("What happens to a RAM database when the connection closes?", "ceases to exist as soon as the database"),
        ("attach ram database", "ATTACH DATABASE ':memory:' AS aux1;"),
    ]
    (project / "data/hw.jsonl").write_text(
        "".join(json.dumps({"question": q, "doc_id": "inmemorydb.md", "evidence": e}) + "\n" for q, e in handwritten)
    )
    set_params(
        project,
        **{
            "generate.provider": "anthropic",
            "generate.kinds": "match",
            "generate.handwritten": "data/hw.jsonl",
            "generate.max_questions": 9,
        },
    )
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
    assert status == 0, err
    assert "generate.kinds match: the hand-written questions' mix, single 67%, keyword 33%" in out
    rows = read_jsonl(project / "data/goldenset.jsonl")
    generated = [row for row in rows if row["source"] != "hand-written"]
    assert sorted(row["kind"] for row in generated) == ["keyword"] * 2 + ["single"] * 4  # 6 to generate, 2:1
    report = json.loads((project / "metrics/goldenset.json").read_text())
    assert report["matched_mix"] == {"from": "hand-written", "single": 0.6667, "keyword": 0.3333}
    # each question set's mix beside the other, by the rules match uses: the generated set matches
    assert report["mix_by_question_set"] == {
        "generated": {"single": 0.6667, "keyword": 0.3333},
        "hand-written": {"single": 0.6667, "keyword": 0.3333},
    }


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_mistyped_handwritten_path_is_one_line_before_any_plan_or_request(tmp_path, dry_run):
    """A missing generate.handwritten file is not "no hand-written questions" (the plan would then
    generate, and pay for, questions the user wrote): an empty file is that."""
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    set_params(project, **{"generate.provider": "anthropic", "generate.handwritten": "data/hand_writen.jsonl"})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub, *(["--dry-run"] if dry_run else []))
        assert not stub.requests
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert "generate.handwritten: data/hand_writen.jsonl: no such file" in err and "plan" not in out
    assert not (project / "data/goldenset.jsonl").exists()
    set_params(project, **{"generate.handwritten": "data/no_handwritten_questions.jsonl"})  # empty: none
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub, "--dry-run")
    assert status == 0 and "less 0 hand-written questions" in out, out + err
