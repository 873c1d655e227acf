"""A committed run that matches the code: on a clean clone, `dvc status` reports no changed code,
data or params dependency for any stage, so a fresh `make repro` reruns nothing the committed
dvc.lock already covers. Outputs that are not in git (every cached stage output, and the stamps
check_params writes) are missing on a clone: DVC reports them as deleted, which is fine; anything
else it reports is a dvc.lock older than the code.

Byte-identical outputs, hence a clean `git status` after a run from scratch, hold on one machine
(checked below with two copies of the project), but for the costs the leaderboard stage measures
(paths.MEASURED_OUTPUTS: their figures differ run to run); on another CPU the float32 embeddings and scores
may differ in their last bits and dvc.lock's md5s change (docs/explanation/limits.md;
tests/embedding/test_bit_stable.py keeps the docs saying so)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest
import yaml
from conftest import ROOT, copy_project, dvc, git, run, tool_env
from test_first_hour_pipeline import make_repro

from retrieval_bench.core import paths

pytestmark = pytest.mark.pipeline


def changed_dependencies(status: dict, produced: frozenset[str] = frozenset()) -> dict[str, dict]:
    """Per stage, the deps and params `dvc status --json` reports as changed (not merely missing).
    A folder dep holding `produced` outputs of other stages (the leaderboard's data/panel) reads as
    modified on a clone, its hash covering only the .gitignore files DVC keeps there in git: those
    outputs' own stages say whether they are current."""
    changed: dict[str, dict] = {}
    for stage, entries in status.items():
        for entry in entries:
            if not isinstance(entry, dict):
                continue  # "always changed" (check_params)
            deps = {
                path: state
                for path, state in entry.get("changed deps", {}).items()
                if state != "deleted" and not any(out.startswith(path.rstrip("/") + "/") for out in produced)
            }
            params = entry.get("changed params", {})
            if deps or params:
                changed[stage] = {**changed.get(stage, {}), **deps, **params}
    return changed


def without_measured(lock_text: str) -> dict:
    """dvc.lock without the entries of the measured outputs and dependencies (paths.is_measured)."""
    lock = yaml.safe_load(lock_text)
    for stage in lock["stages"].values():
        for entries in ("outs", "deps"):
            stage[entries] = [entry for entry in stage.get(entries, []) if not paths.is_measured(entry["path"])]
    return lock


def test_changed_dependencies_ignores_missing_outputs_but_not_stale_code():
    status = {
        "check_params": ["always changed"],
        "load_chunks": [
            {"changed deps": {"data/params_checked.txt": "deleted"}},
            {"changed outs": {paths.DOCUMENTS: "deleted", paths.SOURCE_CHUNKS: "deleted"}},
        ],
        "chunk@default": [{"changed outs": {paths.CHUNKS: "deleted", paths.DUPLICATES: "deleted"}}],
        "score": [{"changed deps": {"stages/score.py": "modified", "params.yaml": {"score.k": "modified"}}}],
    }
    assert changed_dependencies(status) == {
        "score": {"stages/score.py": "modified", "params.yaml": {"score.k": "modified"}}
    }


def test_a_clean_clone_has_no_changed_dependencies(tmp_path):
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True, capture_output=True)
    status = json.loads(dvc("status", "--json", cwd=clone).stdout or "{}")
    lock = yaml.safe_load((clone / "dvc.lock").read_text())["stages"]
    produced = frozenset(out["path"] for stage in lock.values() for out in stage.get("outs", []))
    changed = changed_dependencies(status, produced)
    assert changed == {}, (
        "the committed dvc.lock does not match the committed code: run `dvc repro` and commit dvc.lock "
        f"(stages with changed deps or params: {json.dumps(changed, sort_keys=True)})"
    )


def test_a_run_from_scratch_is_reproducible_and_a_clone_with_its_remote_reruns_nothing(reproduced, tmp_path):
    """Two copies of one project run from scratch on one machine write the same dvc.lock but for
    the measured costs (no clock or random name in any other output, the embedding-cache shards
    included), so a fresh clone's run on
    the committer's kind of CPU leaves the committed dvc.lock as it is; and a clone whose default
    remote holds the outputs runs no stage
    in `make repro` and leaves `git status` clean."""
    env = tool_env()
    one, two = reproduced, copy_project(tmp_path / "two")  # one: the session's run from scratch
    run([sys.executable, "-m", "dvc", "repro"], cwd=two, env=env)
    assert without_measured((one / "dvc.lock").read_text()) == without_measured((two / "dvc.lock").read_text())

    dvc("remote", "add", "-d", "store", str(tmp_path / "remote"), cwd=one)
    git("add", "-A", cwd=one)
    git("commit", "-qm", "the run and its remote", cwd=one)
    dvc("push", "-q", cwd=one)
    clone = tmp_path / "clone"
    git("clone", "-q", str(one), str(clone), cwd=tmp_path)
    result = make_repro(clone, env)
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.findall(r"Running stage '([^']+)'", result.stdout) == []
    assert git("status", "--porcelain", cwd=clone).stdout == ""
