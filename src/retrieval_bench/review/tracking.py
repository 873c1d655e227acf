"""A reviewer's file put under DVC (`dvc add`), one `.dvc` file per reviewer: teammates get it with
`dvc pull`, and two reviewers' files never meet in one hash, so their merges do not conflict.

Why one `.dvc` per file and not the folder: a folder added whole is one hash that every two
reviewers' clicks change, a conflict at every merge. A file git already holds (a team that shares
reviews through git) is left to git."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.revisions import run_git


def track(path: Path, root: Path = Path(".")) -> str | None:
    """Put the reviews file `path` (relative to the project `root`) under DVC and say so in one
    line; None when there is nothing to track (no file yet). Never raises: the clicks are in the
    file whatever happens here, and the line says what to run where DVC could not add it."""
    if not (root / path).is_file():
        return None
    if not (root / ".dvc").is_dir():
        return f"review: {path} is not tracked by DVC (no DVC project here): commit it, or `dvc add` it in one"

    def not_yet(why: str) -> str:
        return f"review: {path} is not tracked by DVC yet ({why}); every click is in it: `dvc add {path}` tracks it"

    try:
        if _in_git(path, root):
            return f"review: {path} is tracked by git: commit it to share the clicks"
        added = subprocess.run(
            [sys.executable, "-m", "dvc", "add", str(path)], cwd=root, capture_output=True, text=True
        )
    except KeyboardInterrupt:  # a second Ctrl-C while git or DVC runs
        return not_yet("stopped")
    except OSError as error:  # the interpreter could not be started
        return not_yet(str(error.strerror or error))
    if added.returncode:
        return not_yet(_reason(added.stderr + added.stdout))
    ignore = path.parent / ".gitignore"  # DVC writes it in a git project only
    commit = f"{path}.dvc and {ignore}" if (root / ignore).is_file() else f"{path}.dvc"
    return (
        f"review: {path} is tracked by DVC: commit {commit}, and `dvc push` shares the clicks (teammates: `dvc pull`)"
    )


def _reason(said: str) -> str:
    """The first sentence of DVC's error line, without its ERROR: prefix."""
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    line = next((line for line in lines if line.startswith("ERROR")), lines[0] if lines else "no reason given")
    return re.split(r"\.\s+(?=[A-Z])", line.removeprefix("ERROR:").strip())[0].rstrip(".")


def _in_git(path: Path, root: Path) -> bool:
    try:
        return run_git(["ls-files", "--error-unmatch", str(path)], root).returncode == 0
    except InputError:  # no git on this machine: nothing is tracked by it
        return False
