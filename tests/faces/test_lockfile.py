"""`retrieval-bench lock prune`: dvc.lock's entries of stages dvc.yaml no longer has, on a small
real git + DVC project whose foreach stage follows params.yaml, as a panel does; and the project's
own dvc.lock holds no such entry."""

from __future__ import annotations

import difflib
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import ROOT, dvc, git, run

from retrieval_bench.core.errors import InputError
from retrieval_bench.lockfile import current_stages, prune

PIPELINE = """
stages:
  system:
    foreach: ${panel}
    do:
      cmd: python -c "open('out/${key}.txt', 'w').write('${item.depth}')"
      params:
        - panel.${key}.depth
      outs:
        - out/${key}.txt
"""


def set_panel(project: Path, names: list[str]) -> None:
    (project / "params.yaml").write_text(
        yaml.safe_dump({"panel": {name: {"depth": 10 + i} for i, name in enumerate(names)}})
    )


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """Systems a, b and c reproduced, then b taken out of params.yaml and the pipeline reproduced
    again: DVC keeps b's entry (dvc#5293)."""
    (tmp_path / "dvc.yaml").write_text(PIPELINE)
    (tmp_path / "out").mkdir()
    set_panel(tmp_path, ["a", "b", "c"])
    git("init", "-q", "-b", "main", cwd=tmp_path)
    dvc("init", "-q", cwd=tmp_path)
    dvc("repro", "-q", cwd=tmp_path)
    set_panel(tmp_path, ["a", "c"])
    dvc("repro", "-q", cwd=tmp_path)
    return tmp_path


def lock_stages(project: Path) -> set[str]:
    return set(yaml.safe_load((project / "dvc.lock").read_text())["stages"])


def cli(project: Path, *args: str) -> subprocess.CompletedProcess:
    return run([sys.executable, "-m", "retrieval_bench.cli", "lock", *args], cwd=project, check=False)


def test_the_stale_entry_is_dropped_and_the_others_are_left_as_dvc_wrote_them(project: Path):
    assert lock_stages(project) == {"system@a", "system@b", "system@c"}  # the trap this guards against
    before = (project / "dvc.lock").read_text()

    dry = cli(project, "prune", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.strip() == "dvc.lock: would drop 1 stale entry: system@b"
    assert (project / "dvc.lock").read_text() == before

    done = cli(project, "prune")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "dvc.lock: dropped 1 stale entry: system@b"
    assert lock_stages(project) == {"system@a", "system@c"}
    after = (project / "dvc.lock").read_text()
    changes = [line for line in difflib.ndiff(before.splitlines(), after.splitlines()) if line[:1] in "+-"]
    assert changes and all(line.startswith("- ") for line in changes)  # lines removed, none added or changed
    assert "system@b" in "".join(changes)

    status = dvc("status", "--json", cwd=project).stdout
    assert status.strip() == "{}"  # nothing to rerun: the entries kept still match the workspace
    assert cli(project, "prune").stdout == ""  # nothing more to drop, nothing said
    assert (project / "dvc.lock").read_text() == after


def test_a_system_put_back_after_pruning_is_restored_from_the_run_cache(project: Path):
    prune(project)
    set_panel(project, ["a", "b", "c"])
    repro = dvc("repro", cwd=project).stdout
    assert "Stage 'system@b' is cached - skipping run, checking out outputs" in repro
    assert lock_stages(project) == {"system@a", "system@b", "system@c"}


def test_current_stages_expands_foreach_items(project: Path):
    assert current_stages(project) == {"system@a", "system@c"}


def test_without_a_lock_nothing_is_done(tmp_path: Path):
    assert prune(tmp_path) == []


def test_an_unreadable_lock_or_pipeline_is_one_line(project: Path):
    (project / "dvc.yaml").write_text(PIPELINE.replace("${panel}", "${no_such_key}"))
    with pytest.raises(InputError, match=r"^dvc\.yaml: .*no_such_key") as error:
        prune(project)
    assert "\n" not in str(error.value)
    (project / "dvc.lock").write_text("stages: [unclosed\n")
    failed = cli(project, "prune")
    assert failed.returncode == 1
    assert failed.stderr.startswith("error: ") and failed.stderr.count("\n") == 1
    assert "dvc.lock" in failed.stderr


def test_the_projects_own_lock_holds_only_the_stages_of_its_dvc_yaml():
    stale = prune(ROOT, dry_run=True)
    assert stale == [], (
        f"dvc.lock holds entries of stages dvc.yaml does not have: run `retrieval-bench lock prune` ({stale})"
    )


def test_outside_the_project_root_it_says_so_and_a_dry_run_says_when_nothing_is_stale(project: Path):
    """From a subfolder (or any folder without dvc.yaml) `lock prune` exited 0 and said nothing,
    leaving the stale entry; a dry run with nothing stale printed nothing either."""
    (project / "data").mkdir(exist_ok=True)
    inside = cli(project / "data", "prune")
    assert inside.returncode == 1 and inside.stderr.strip() == (
        f"error: dvc.yaml: not found in {project / 'data'}; run `retrieval-bench lock prune` from the project root"
    )
    assert "system@b" in (project / "dvc.lock").read_text()
    assert cli(project, "prune").returncode == 0
    dry = cli(project, "prune", "--dry-run")
    assert dry.returncode == 0 and dry.stdout.strip() == "dvc.lock: no stale entry"
    assert cli(project, "prune").stdout == ""  # make repro's prune before each run stays quiet
