"""Pipeline outputs as they were at a git revision or DVC experiment (for `retrieval-bench compare`
and the judge stage's `rev:` pool entries): from git, or else from the DVC cache through dvc.api."""

from __future__ import annotations

import subprocess
from pathlib import Path

from retrieval_bench.core.errors import InputError

WORKSPACE = "workspace"
EXPERIMENT_REFS = "refs/exps"


def run_git(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """`git ARGS` in `cwd`, its output captured; an InputError when there is no git to run."""
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    except FileNotFoundError:
        raise InputError("git is not installed or not on PATH") from None


def experiment_ref(name: str, cwd: Path) -> str | None:
    """The full ref of DVC experiment `name` (refs/exps/.../<name>), None if there is none."""
    listing = run_git(["for-each-ref", EXPERIMENT_REFS, "--format=%(refname)"], cwd)
    if listing.returncode != 0:
        return None
    matches = sorted(
        ref
        for ref in listing.stdout.split()
        if ref.rsplit("/", 1)[-1] == name
        and not ref.startswith((f"{EXPERIMENT_REFS}/exec/", f"{EXPERIMENT_REFS}/celery/"))
    )
    if len(matches) > 1:
        raise InputError(f"{name}: several DVC experiments have this name ({', '.join(matches)}); give the full ref")
    return matches[0] if matches else None


def resolve_revision(rev: str, cwd: Path) -> str:
    """The commit of a git revision or DVC experiment name; an InputError when it is neither."""
    found = run_git(["rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"], cwd)
    if found.returncode == 0:
        return str(found.stdout.strip())
    inside = run_git(["rev-parse", "--is-inside-work-tree"], cwd)
    if inside.returncode != 0:
        raise InputError(f"{rev}: not in a git repository (run from the project's root)")
    ref = experiment_ref(rev, cwd)
    if ref is not None:
        found = run_git(["rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}"], cwd)
        if found.returncode == 0:
            return str(found.stdout.strip())
    # a clone of another branch has main only as origin/main, which DVC's `metrics diff main` finds too
    tracking = run_git(["for-each-ref", "--format=%(objectname) %(refname:short)", f"refs/remotes/*/{rev}"], cwd)
    found_in = dict(line.split(" ", 1) for line in tracking.stdout.splitlines() if " " in line)
    if len(found_in) == 1:
        return next(iter(found_in))
    if len(found_in) > 1:
        named = ", ".join(sorted(found_in.values()))
        raise InputError(f"{rev}: no local branch, and remote branches by that name differ ({named}): name one")
    said = run_git(["rev-parse", "--verify", f"{rev}^{{commit}}"], cwd).stderr
    if "is ambiguous" in said:  # a short commit id two commits start with: git says so, and lists them
        raise InputError(f"{rev}: ambiguous, more than one commit starts with it; give more of its digits")
    raise InputError(f"{rev}: not a git revision or DVC experiment name")


def git_show(path: str, commit: str, cwd: Path) -> bytes | None:
    """The bytes of `path` as committed at `commit`; None when it is not committed there (or there
    is no git to ask)."""
    try:
        shown = subprocess.run(["git", "show", f"{commit}:./{path}"], cwd=cwd, capture_output=True)
    except FileNotFoundError:
        return None
    return shown.stdout if shown.returncode == 0 else None


def read_artefact(path: str, commit: str | None, cwd: Path) -> bytes | None:
    """A pipeline output as it was at `commit` (None: the working tree), from git or else from the
    DVC cache through dvc.api; None when it cannot be had there (never pulled, say)."""
    if commit is None:
        return (cwd / path).read_bytes() if (cwd / path).is_file() else None
    committed = git_show(path, commit, cwd)
    if committed is not None:
        return committed
    try:
        import dvc.api

        data: bytes = dvc.api.read(path, repo=str(cwd), rev=commit, mode="rb")
        return data
    except Exception:  # noqa: BLE001 - not in the local cache: the context is optional
        return None
