"""A committed run that matches the code: on a clean clone, `dvc status` reports no changed code,
data or params dependency for any stage, so a fresh `make repro` reruns nothing the committed
dvc.lock already covers and leaves `git status` clean. Outputs that are not in git (every cached
stage output, and the stamps check_params writes) are missing on a clone: DVC reports them as
deleted, which is fine; anything else it reports is a dvc.lock older than the code."""

from __future__ import annotations

import json
import subprocess

import pytest
from conftest import ROOT, dvc

pytestmark = pytest.mark.pipeline


def changed_dependencies(status: dict) -> dict[str, dict]:
    """Per stage, the deps and params `dvc status --json` reports as changed (not merely missing)."""
    changed: dict[str, dict] = {}
    for stage, entries in status.items():
        for entry in entries:
            if not isinstance(entry, dict):
                continue  # "always changed" (check_params)
            deps = {path: state for path, state in entry.get("changed deps", {}).items() if state != "deleted"}
            params = entry.get("changed params", {})
            if deps or params:
                changed[stage] = {**changed.get(stage, {}), **deps, **params}
    return changed


def test_changed_dependencies_ignores_missing_outputs_but_not_stale_code():
    status = {
        "check_params": ["always changed"],
        "load_chunks": [
            {"changed deps": {"data/params_checked.txt": "deleted"}},
            {"changed outs": {"data/chunks.parquet": "deleted"}},
        ],
        "score": [{"changed deps": {"stages/score.py": "modified", "params.yaml": {"score.k": "modified"}}}],
    }
    assert changed_dependencies(status) == {
        "score": {"stages/score.py": "modified", "params.yaml": {"score.k": "modified"}}
    }


def test_a_clean_clone_has_no_changed_dependencies(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, capture_output=True)
    status = json.loads(dvc("status", "--json", cwd=clone).stdout or "{}")
    assert changed_dependencies(status) == {}, (
        "the committed dvc.lock does not match the committed code: run `dvc repro` and commit dvc.lock "
        f"(stages with changed deps or params: {json.dumps(changed_dependencies(status), sort_keys=True)})"
    )
