"""dvc.lock's stale entries, and `retrieval-bench lock prune`, which drops them.

DVC keeps the lock entry of a stage that dvc.yaml no longer has: a panel system taken out of
params.yaml, a stage renamed (dvc#5293). Nothing reads such an entry, but DVC parses and rewrites
the whole of dvc.lock, in pure Python, after every stage it runs, so each stale entry makes every
later stage slower (docs/benchmarks.md, "Panel overhead per system"). `make repro` prunes after
`dvc repro`. The entries of the stages dvc.yaml has are left byte for byte as DVC wrote them.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_open

LOCK, PIPELINE = "dvc.lock", "dvc.yaml"


def current_stages(root: Path) -> set[str]:
    """The names of the stages dvc.yaml at `root` defines, foreach and matrix items expanded
    ("retrieve@default"), as dvc.lock keys them."""
    from dvc.exceptions import DvcException
    from dvc.repo import Repo

    pipeline = (root / PIPELINE).resolve()
    try:
        with Repo(str(root)) as repo:
            return {stage.name for stage in repo.index.stages if Path(stage.dvcfile.path).resolve() == pipeline}
    except DvcException as error:  # dvc.yaml or params.yaml unreadable: prune nothing, say DVC's reason
        raise InputError(f"{pipeline.name}: {str(error).splitlines()[0]}") from None


def prune(root: Path, dry_run: bool = False) -> list[str]:
    """Drop from root/dvc.lock the entries of stages root/dvc.yaml does not define; returns their
    names, sorted. The file is rewritten (atomically) by DVC's own YAML writer, only when one goes."""
    from dvc.utils.serialize import YAMLError, dumps_yaml, parse_yaml_for_update

    lock = root / LOCK
    if not lock.is_file():
        return []
    try:
        data = parse_yaml_for_update(lock.read_text(), str(lock))
    except YAMLError as error:
        raise InputError(f"{lock}: not readable as YAML ({error}); `dvc repro` rewrites it") from None
    stages = data.get("stages") if isinstance(data, dict) else None
    if not isinstance(stages, dict):
        raise InputError(f"{lock}: expected a mapping with `stages:`, as DVC writes it")
    stale = sorted(set(stages) - current_stages(root))
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
    stale = prune(Path.cwd(), dry_run=args.dry_run)
    verb = "would drop" if args.dry_run else "dropped"
    if stale:
        print(f"{LOCK}: {verb} {len(stale)} stale entr{'y' if len(stale) == 1 else 'ies'}: {', '.join(stale)}")
    return 0
