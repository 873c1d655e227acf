"""The question cache shared through a DVC remote: generate on one machine, `dvc push`; a fresh
clone's `dvc repro --pull` makes no LLM call, not even when the stage has to run again."""

from __future__ import annotations

import json
import sys
import uuid

import pytest
from conftest import copy_project, git, run, set_params, tool_env
from stub_llm import StubLLM, read_jsonl

pytestmark = pytest.mark.pipeline


def test_dvc_push_then_repro_pull_on_a_fresh_clone_makes_no_llm_call(tmp_path):
    key = f"sk-ant-api03-PIPELINE-{uuid.uuid4().hex}"
    project = copy_project(tmp_path / "project")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 35, "generate.concurrency": 4})
    git("add", "-A", cwd=project)
    git("commit", "-qm", "generate with anthropic", cwd=project)
    outputs = []
    with StubLLM() as stub:
        env = {**tool_env(), "ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": stub.url}
        dvc = [sys.executable, "-m", "dvc"]
        outputs.append(run([*dvc, "repro", "generate_goldenset"], cwd=project, env=env))
        generated = len(stub.generation_requests())
        assert generated > 0
        golden = read_jsonl(project / "data/goldenset.jsonl")
        assert len(golden) == 35 and sum(row["source"] == "claude-haiku-4-5" for row in golden) == generated

        run([*dvc, "remote", "add", "-d", "store", str(tmp_path / "remote")], cwd=project, env=env)
        git("add", "-A", cwd=project)
        git("commit", "-qm", "golden set and remote", cwd=project)
        outputs.append(run([*dvc, "push"], cwd=project, env=env))

        clone = tmp_path / "clone"
        git("clone", "-q", str(project), str(clone), cwd=tmp_path)
        stub.reset_counts()
        outputs.append(run([*dvc, "repro", "--pull", "generate_goldenset"], cwd=clone, env=env))
        assert not stub.requests, "the clone called the LLM"
        assert read_jsonl(clone / "data/goldenset.jsonl") == golden

        # The stage runs again (fewer questions) and every question comes from the pulled cache.
        set_params(clone, **{"generate.max_questions": 30})
        outputs.append(run([*dvc, "repro", "generate_goldenset"], cwd=clone, env=env))
        assert "generate_goldenset" in outputs[-1].stdout
        assert not stub.requests
        assert json.loads((clone / "metrics/goldenset.json").read_text())["n_questions"] == 30

    for folder in (project, clone, tmp_path / "remote"):
        leaked = [p for p in folder.rglob("*") if p.is_file() and key.encode() in p.read_bytes()]
        assert not leaked
    assert all(key not in result.stdout + result.stderr for result in outputs)
