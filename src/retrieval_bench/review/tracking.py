"""A reviewer's file put under DVC (`dvc add`), one `.dvc` file per reviewer: teammates get it with
`dvc pull`, and two reviewers' files never meet in one hash, so their merges do not conflict.

Why one `.dvc` per file and not the folder: a folder added whole is one hash that every two
reviewers' clicks change, a conflict at every merge. A file git already holds (a team that shares
reviews through git) is left to git."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def track(path: Path, root: Path = Path(".")) -> str | None:
    """Put the reviews file `path` (relative to the project `root`) under DVC and say so in one
    line; None when there is nothing to track (no file yet). Never raises: the clicks are in the
    file whatever happens here, and the line says what to run where DVC could not add it."""
    if not (root / path).is_file():
        return None
    if not (root / ".dvc").is_dir():
        return f"review: {path} is not tracked by DVC (no DVC project here): commit it, or `dvc add` it in one"
    if _in_git(path, root):
        return f"review: {path} is tracked by git: commit it to share the clicks"
    command = [sys.executable, "-m", "dvc", "add", "--quiet", str(path)]
    try:
        added = subprocess.run(command, cwd=root, capture_output=True, text=True)
    except KeyboardInterrupt:  # a second Ctrl-C while DVC adds it
        return f"review: {path} is not tracked by DVC yet (stopped); every click is in it: `dvc add {path}` tracks it"
    if added.returncode:
        said = [line.strip() for line in (added.stderr + added.stdout).splitlines() if line.strip()]
        why = next((line for line in said if line.startswith("ERROR")), said[0] if said else "no reason given")
        why = why.removeprefix("ERROR:").strip()
        return f"review: {path} is not tracked by DVC yet ({why}); every click is in it: `dvc add {path}` tracks it"
    return (
        f"review: {path} is tracked by DVC: commit {path}.dvc and {path.parent}/.gitignore, "
        "and `dvc push` shares the clicks (teammates: `dvc pull`)"
    )


def _in_git(path: Path, root: Path) -> bool:
    listed = subprocess.run(["git", "ls-files", "--error-unmatch", str(path)], cwd=root, capture_output=True)
    return listed.returncode == 0
