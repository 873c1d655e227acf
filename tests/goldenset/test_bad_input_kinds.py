"""Bad generate.kinds: one `error:` line naming the key, exit 1, nothing asked or written (the
generate_goldenset stage against the stub server)."""

from __future__ import annotations

import pytest
from conftest import set_params
from stub_llm import StubLLM, run_stage_here, stage_project


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


def test_match_with_handwritten_questions_is_not_available_yet(tmp_path):
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    (project / "data/hw.jsonl").write_text(
        '{"question": "How do I open a database that lives only in RAM?", "doc_id": "inmemorydb.md", '
        '"evidence": "In-Memory Databases"}\n'
    )
    set_params(
        project,
        **{"generate.provider": "anthropic", "generate.kinds": "match", "generate.handwritten": "data/hw.jsonl"},
    )
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert "generate.kinds: match is not available yet" in err


def test_several_kinds_with_a_batch_provider_are_refused_in_one_line(tmp_path):
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    set_params(project, **{"generate.provider": "anthropic-batch", "generate.kinds": {"single": 0.5, "keyword": 0.5}})
    with StubLLM() as stub:
        status, _, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and len(err.strip().splitlines()) == 1, err
    assert "generate.kinds single, keyword need a sync provider" in err
