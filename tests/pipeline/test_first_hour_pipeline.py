"""The first hour of a new user (issue 16), through the real dvc and make: a teammate's clean clone
with a default remote pays for nothing even without `--pull`, `make repro` pulls where a remote
exists, and a run prints no warning about empty outputs and no push hint without a remote."""

from __future__ import annotations

import shutil
import sys
import uuid
from pathlib import Path

import pytest
from conftest import copy_project, git, run, set_params, tool_env
from stub_llm import StubLLM, read_jsonl

pytestmark = pytest.mark.pipeline

VENV = Path(sys.executable).parent.parent
DVC = [sys.executable, "-m", "dvc"]
# What every run printed (DVC warns about each empty output and dependency, with no switch to turn it off).
EMPTY_BEFORE = [
    "data/labels.jsonl",
    "data/question_cache.jsonl",
    "data/question_cache.batches.jsonl",
    "metrics/generate_rejects.jsonl",
]


def make_repro(project: Path, env: dict):
    """`make repro` with this interpreter's environment (never reinstalled: -o)."""
    return run(["make", "repro", f"VENV={VENV}", "-o", f"{VENV}/.installed"], cwd=project, env=env, check=False)


def test_a_teammates_clean_clone_pays_for_nothing_even_without_pull(tmp_path):
    """Observed: on a clean clone with a key set and a default remote holding the question cache,
    plain `dvc repro` regenerated every question."""
    project = copy_project(tmp_path / "project")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 30, "generate.concurrency": 4})
    git("add", "-A", cwd=project)
    git("commit", "-qm", "generate with anthropic", cwd=project)
    with StubLLM() as stub:
        env = {**tool_env(), "ANTHROPIC_API_KEY": f"sk-ant-{uuid.uuid4().hex}", "ANTHROPIC_BASE_URL": stub.url}
        run([*DVC, "repro", "generate_goldenset"], cwd=project, env=env)
        paid = len(stub.generation_requests())
        assert paid > 0
        run([*DVC, "remote", "add", "-d", "store", str(tmp_path / "remote")], cwd=project, env=env)
        git("add", "-A", cwd=project)
        git("commit", "-qm", "golden set and remote", cwd=project)
        run([*DVC, "push"], cwd=project, env=env)

        clone = tmp_path / "clone"
        git("clone", "-q", str(project), str(clone), cwd=tmp_path)
        stub.reset_counts()
        result = run([*DVC, "repro", "generate_goldenset"], cwd=clone, env=env)
        assert not stub.generation_requests(), "the clone paid again"
        assert f"fetched {paid} questions already paid for from DVC remote 'store'" in result.stdout
        assert read_jsonl(clone / "data/goldenset.jsonl") == read_jsonl(project / "data/goldenset.jsonl")

        # The teammate generates more and pushes; the clone takes their dvc.lock (`git pull`).
        set_params(project, **{"generate.max_questions": 40})
        run([*DVC, "repro", "generate_goldenset"], cwd=project, env=env)
        more = len(stub.generation_requests())
        assert more > 0
        run([*DVC, "push"], cwd=project, env=env)
        for name in ("dvc.lock", "params.yaml"):
            shutil.copy2(project / name, clone / name)
        stub.reset_counts()
        result = run([*DVC, "repro", "generate_goldenset"], cwd=clone, env=env)
        assert not stub.generation_requests(), "the clone paid for what its teammate had pushed"
        assert f"fetched {more} questions already paid for" in result.stdout
        git("add", "-A", cwd=project)
        git("commit", "-qm", "40 questions", cwd=project)

        # A remote that cannot be read: nothing is paid, one line says what to do.
        broken = tmp_path / "broken"
        git("clone", "-q", str(project), str(broken), cwd=tmp_path)
        run([*DVC, "remote", "modify", "--local", "store", "url", str(tmp_path / "gone")], cwd=broken, env=env)
        result = run([*DVC, "repro", "generate_goldenset"], cwd=broken, env=env, check=False)
        assert result.returncode != 0 and not stub.generation_requests()
        errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
        assert len(errors) == 1 and "dvc repro --pull" in errors[0] and "does not exist" in errors[0]

        # `make repro` pulls where a default remote exists.
        fresh = tmp_path / "fresh"
        git("clone", "-q", str(project), str(fresh), cwd=tmp_path)
        result = make_repro(fresh, env)
        assert result.returncode == 0, result.stdout + result.stderr
        assert "dvc repro --pull   # default remote 'store'" in result.stdout
        assert not stub.generation_requests()


def test_make_repro_prints_no_empty_output_warning_and_no_push_hint_without_a_remote(project):
    """Observed: every run printed six "WARNING: '…' is empty." lines and "Use `dvc push`" with no
    remote configured."""
    result = make_repro(project, tool_env())
    assert result.returncode == 0, result.stdout + result.stderr
    printed = result.stdout + result.stderr
    assert "Running stage 'score'" in printed
    assert [path for path in EMPTY_BEFORE if f"'{path}' is empty" in printed] == []
    assert "Use `dvc push`" not in printed
    rerun = run([*DVC, "repro"], cwd=project)  # dvc itself, everything cached: not a word about empty outputs
    assert "is empty" not in rerun.stdout + rerun.stderr
