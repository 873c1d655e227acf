"""Every question kind through `dvc repro generate_goldenset` (the real dvc CLI, the real anthropic
SDK against the stub on 127.0.0.1): the golden set holds rows of each kind with the agreed fields,
and a rerun after a params edit that keeps the kinds asks for nothing (each kind's cache keys hit)."""

from __future__ import annotations

import json
import sys

import pytest
from conftest import copy_project, git, run, set_params, tool_env
from stub_llm import StubLLM, read_jsonl

pytestmark = pytest.mark.pipeline

KINDS = {"single": 0.4, "multi": 0.3, "unanswerable": 0.15, "keyword": 0.15}


def test_dvc_repro_writes_every_kind_and_a_rerun_asks_nothing(tmp_path):
    project = copy_project(tmp_path / "project")
    set_params(
        project,
        **{
            "generate.provider": "anthropic",
            "generate.max_questions": 40,
            "generate.handwritten": "data/no_questions.jsonl",  # every question generated
            "generate.kinds": KINDS,
        },
    )
    # a hand-written question of another corpus: skipped, so every question of this one is generated
    (project / "data/no_questions.jsonl").write_text(
        '{"question": "Where is the moon tonight?", "doc_id": "not-in-this-corpus.md", "evidence": "the moon"}\n'
    )
    git("add", "-A", cwd=project)
    git("commit", "-qm", "every question kind", cwd=project)
    dvc = [sys.executable, "-m", "dvc"]
    with StubLLM() as stub:
        env = {**tool_env(), "ANTHROPIC_API_KEY": "sk-ant-test-key", "ANTHROPIC_BASE_URL": stub.url}
        run([*dvc, "repro", "generate_goldenset"], cwd=project, env=env)
        asked = len(stub.generation_requests())
        golden = read_jsonl(project / "data/goldenset.jsonl")
        stub.reset_counts()
        set_params(project, **{"generate.max_questions": 39})  # reruns the stage: every reply from the cache
        run([*dvc, "repro", "generate_goldenset"], cwd=project, env=env)
        assert not stub.requests
    counts = {kind: sum(row["kind"] == kind for row in golden) for kind in KINDS}
    assert counts == {"single": 16, "multi": 12, "unanswerable": 6, "keyword": 6}
    assert asked == len(golden) == 40
    for row in golden:
        if row["kind"] == "multi":
            assert 2 <= len(row["evidence_spans"]) <= 3
            assert row["evidence_spans"][0] == {k: row[k] for k in ("doc_id", "start", "end")}
        elif row["kind"] == "unanswerable":
            assert (row["gold_chunk_id"], row["doc_id"], row["start"], row["end"]) == (None, None, None, None)
            assert row["evidence_spans"] == [] and row["near_doc_id"]
        else:
            assert row["gold_chunk_id"] and "evidence_spans" not in row
    report = json.loads((project / "metrics/goldenset.json").read_text())
    assert report["n_questions"] == 39 and set(report["n_by_kind"]) == set(KINDS)
