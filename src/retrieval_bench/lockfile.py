"""dvc.lock's stale entries, and `retrieval-bench lock prune`, which drops them.

DVC keeps the lock entry of a stage that dvc.yaml no longer has: a panel system taken out of
params.yaml, a stage renamed (dvc#5293). Nothing reads such an entry, but DVC parses and rewrites
the whole of dvc.lock, in pure Python, after every stage it runs, so each stale entry makes every
later stage slower (docs/benchmarks.md, "Panel overhead per system"). `make repro` prunes after
`dvc repro`. The entries of the stages dvc.yaml has are left byte for byte as DVC wrote them.

A prune holds what a `dvc repro` holds while it works: DVC's repository lock (.dvc/tmp/lock), which
a repro lets go only while a stage's command runs, and then a write lock over the whole project
(DVC's rwlock, .dvc/tmp/rwlock), which conflicts with the locks that stage holds on its deps and
outs until DVC has recorded it in dvc.lock. A prune between two of a repro's writes would write
back a dvc.lock without the entry DVC had just added; while another DVC process holds either
lock, prune changes nothing and says so in one line.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import atomic_open, leftover_temps, read_text

LOCK, PIPELINE = "dvc.lock", "dvc.yaml"


def current_stages(root: Path) -> set[str]:
    """The names of the stages dvc.yaml at `root` defines, foreach and matrix items expanded
    ("chunk@default"), as dvc.lock keys them."""
    from dvc.repo import Repo

    with _dvc_errors(), Repo(str(root)) as repo:
        return _defined_stages(repo, root)


def _defined_stages(repo: Any, root: Path) -> set[str]:
    pipeline = (root / PIPELINE).resolve()
    with _dvc_errors():
        return {stage.name for stage in repo.index.stages if Path(stage.dvcfile.path).resolve() == pipeline}


@contextmanager
def _dvc_errors() -> Iterator[None]:
    """DVC's error (dvc.yaml or params.yaml unreadable, no DVC project) as one line: prune nothing."""
    from dvc.exceptions import DvcException

    try:
        yield
    except DvcException as error:
        raise InputError(f"{PIPELINE}: {str(error).splitlines()[0]}") from None


@contextmanager
def repository_locks(root: Path) -> Iterator[Any]:
    """The DVC repository at `root`, for the block, with both locks a running `dvc repro` holds
    (module docstring); an InputError naming the lock another process holds (DVC first retries
    the repository lock for a few seconds)."""
    from dvc.lock import LockError
    from dvc.repo import Repo
    from dvc.rwlock import RWLOCK_FILE, rwlock

    with _dvc_errors():
        repo = Repo(str(root))
    project = repo.root_dir
    with repo, ExitStack() as held:
        try:
            held.enter_context(repo.lock)
        except LockError:
            raise _busy(repo.lock.lockfile, project) from None
        hardlink = repo.config["core"].get("hardlink_lock", False)
        try:  # writing the whole project: refused while any stage holds its deps or outs
            held.enter_context(rwlock(repo.tmp_dir, repo.fs, "retrieval-bench lock prune", [], [project], hardlink))
        except LockError:
            raise _busy(os.path.join(repo.tmp_dir, RWLOCK_FILE), project) from None
        yield repo


def _busy(lock: str, project: str) -> InputError:
    return InputError(
        f"{LOCK}: not pruned: another DVC process (a `dvc repro`?) is working in this project and holds its "
        f"lock ({os.path.relpath(lock, project)}); prune again when it has finished"
    )


def prune(root: Path, dry_run: bool = False) -> list[str]:
    """Drop from root/dvc.lock the entries of stages root/dvc.yaml does not define; returns their
    names, sorted. The file is rewritten (atomically) by DVC's own YAML writer, only when one goes,
    under DVC's locks; the temporary files of a prune that was killed go first."""
    from dvc.utils.serialize import YAMLError, dumps_yaml, parse_yaml_for_update

    lock = root / LOCK
    if lock.exists() and not lock.is_file():  # a folder by that name: DVC cannot use it either
        raise InputError(f"{lock}: not a regular file; DVC writes dvc.lock as a YAML file (move this aside)")
    if not lock.is_file():
        return []
    with repository_locks(root) as repo:
        if not dry_run:
            for leftover in leftover_temps(lock):  # every prune holds the lock: none of these is being written
                leftover.unlink(missing_ok=True)
        text = read_text(lock)  # bytes that are not UTF-8: one line naming the file and the line
        try:
            data = parse_yaml_for_update(text, str(lock))
        except YAMLError as error:
            raise InputError(f"{lock}: not readable as YAML ({error}); `dvc repro` rewrites it") from None
        stages = data.get("stages") if isinstance(data, dict) else None
        if not isinstance(stages, dict):
            raise InputError(f"{lock}: expected a mapping with `stages:`, as DVC writes it")
        for name, entry in stages.items():  # else DVC's own check blames dvc.yaml for the lock
            if not isinstance(entry, dict):
                raise InputError(f"{lock}: stage {quoted(name)} is {quoted(entry)}, not a mapping as DVC writes it")
        stale = sorted(set(stages) - _defined_stages(repo, root))
        if stale and not dry_run:
            for name in stale:
                del stages[name]
            with atomic_open(lock) as out:
                out.write(dumps_yaml(data))
    return stale


def add_arguments(parser: argparse.ArgumentParser) -> None:
    commands = parser.add_subparsers(dest="lock_command", required=True)
    pruning = commands.add_parser("prune", help="drop dvc.lock's entries of stages dvc.yaml no longer has")
    pruning.add_argument("--dry-run", action="store_true", help="say what would be dropped, change nothing")
    pruning.set_defaults(run=run_prune)


def run_prune(args: argparse.Namespace) -> int:
    root = Path.cwd()
    if not (root / PIPELINE).is_file():  # a subfolder or another folder: it silently pruned nothing
        raise InputError(f"{PIPELINE}: not found in {root}; run `retrieval-bench lock prune` from the project root")
    stale = prune(root, dry_run=args.dry_run)
    verb = "would drop" if args.dry_run else "dropped"
    if stale:
        print(f"{LOCK}: {verb} {len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'}: {', '.join(stale)}")
    elif args.dry_run:  # said when asked; `make repro`'s prune before each run stays quiet
        print(f"{LOCK}: no stale entry")
    return 0
