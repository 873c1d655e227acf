"""Bad generate.style_examples files and params: one `error:` line naming the file (and line),
exit 1, nothing generated or written (the generate_goldenset stage against the stub server)."""

from __future__ import annotations

import pytest
from conftest import set_params
from stub_llm import StubLLM, run_stage_here, stage_project

EXAMPLES = "data/real_questions.jsonl"


@pytest.mark.parametrize(
    ("name", "content", "params", "expected"),
    [
        ("missing.jsonl", None, {}, "missing.jsonl: generate.style_examples: no such file"),
        ("real_questions.jsonl", b"", {}, "real_questions.jsonl: generate.style_examples holds no question"),
        ("real_questions.jsonl", b'{"question": "a?"}\n{"question": \n', {}, "real_questions.jsonl:2: invalid JSON"),
        (
            "real_questions.jsonl",
            b'{"question": "a?"}\n\n{"text": "b?"}\n',
            {},
            "real_questions.jsonl:3: a style example needs a `question` field; fields found: text",
        ),
        (
            "real_questions.jsonl",
            b'{"question": "a?"}\n{"question": 7}\n',
            {},
            "real_questions.jsonl:2: `question` must be a text, got int",
        ),
        ("real_questions.jsonl", b'{"question": "  "}\n', {}, "real_questions.jsonl:1: `question` is empty"),
        ("real_questions.jsonl", b'{"question": "caf\xe9?"}\n', {}, "real_questions.jsonl:1: not UTF-8 text"),
        ("real_questions.jsonl", b"[1, 2]\n", {}, "real_questions.jsonl:1: expected a JSON object"),
        ("real_questions.txt", b"how do i?\n", {}, "real_questions.txt: expected a .jsonl, .csv or .json question set"),
        (
            "real_questions.csv",
            b"user_input\nhow?\n",
            {},
            "real_questions.csv:2: a ragas testset record needs reference_contexts",
        ),
        (
            "real_questions.jsonl",
            b'{"question": "a?"}\n',
            {"generate.style_examples_count": 0},
            "generate.style_examples_count must be 1-50",
        ),
        (
            "real_questions.jsonl",
            b'{"question": "a?"}\n',
            {"generate.style_examples_count": 51},
            "generate.style_examples_count must be 1-50",
        ),
        (
            "real_questions.jsonl",
            b'{"question": "a?"}\n',
            {"generate.style_examples": 5},
            "generate.style_examples must be a file path or null, got 5",
        ),
    ],
)
def test_bad_style_examples_are_one_line(tmp_path, name, content, params, expected):
    project = stage_project(tmp_path / "p", docs=["inmemorydb.md"])
    if content is not None:
        (project / "data" / name).write_bytes(content)
    set_params(project, **{"generate.provider": "anthropic", "generate.style_examples": f"data/{name}", **params})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert not stub.requests
    assert status == 1 and err.startswith("error:") and len(err.strip().splitlines()) == 1, err
    assert expected in err
    assert not (project / "data/goldenset.jsonl").exists()
