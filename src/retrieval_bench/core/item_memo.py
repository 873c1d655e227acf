"""The last outputs of each item (a panel system) of a stage that runs many items in one DVC stage,
kept between runs: an item whose inputs did not change gets its outputs copied back, not computed.

Why: with a DVC stage per panel system, DVC reread and rewrote the whole dvc.lock after each one,
so what a panel cost per system grew with the panel (docs/benchmarks.md, "Panel overhead per
system"). retrieve and score now run every system in one stage each. DVC deletes a stage's outputs
before it runs it, so the stage keeps each item's outputs here, under the digest of everything they
were computed from: the content of every file the item reads, its settings, and the code dvc.yaml
lists for the stage. A rerun after one system's edit computes that system alone.

Where: under the DVC project's .dvc/tmp (DVC_ROOT's, for an experiment too), beside the embedding
caches; not a DVC output (a persistent output would keep DVC from run-caching the stage). Outside a
DVC project nothing is kept. Entries are folders named by their key, written whole and renamed into
place, so runs side by side (queued experiments) never see half an entry; each item keeps its
KEPT most recent keys (an edit undone is copied back too), and an item no longer run loses its own.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import yaml

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, fsync_folder, hash_file

KEPT = 3  # keys per item: the current one and two before it
STALE_WRITE_S = 86_400  # an entry still being written after a day was left by a run that died
_CODE_ROOTS = {"src", "stages"}  # the folders of a stage's deps that are its code (dvc.yaml lists them by package)


def file_digest(path: Path, seen: dict[Path, str]) -> str:
    """The content digest of a file (blake2b), read once per `seen` (one stage run: a file shared by
    several items, a corpus's vectors, is read once; within a run the inputs do not change)."""
    resolved = path.resolve()
    if resolved not in seen:
        seen[resolved] = hash_file(path, hashlib.blake2b(digest_size=20)).hexdigest()
    return seen[resolved]


def _files_under(path: Path) -> list[Path]:
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts)
    return [path] if path.is_file() else []


def inputs_digest(
    files: Iterable[str | Path], settings: Any = None, code: str = "", seen: dict[Path, str] | None = None
) -> str:
    """The key of an item: its code's digest, its settings (JSON) and every input file's content,
    by name (a folder: every file under it; a missing path counts as missing)."""
    digest = hashlib.blake2b(digest_size=20)
    digest.update(code.encode())
    digest.update(json.dumps(settings, sort_keys=True, default=str).encode())
    for path in sorted(map(str, files)):
        found = _files_under(Path(path))
        digest.update(f"\0{path}:{len(found)}".encode())
        for file in found:
            digest.update(f"\0{file.as_posix()}={file_digest(file, {} if seen is None else seen)}".encode())
    return digest.hexdigest()


def code_digest(stage: str, pipeline: Path) -> str | None:
    """The digest of the files under the stage's code deps in dvc.yaml (src/..., stages/...): what
    makes DVC rerun it for a code edit. None without dvc.yaml or that stage."""
    try:
        defined = yaml.load(pipeline.read_text(encoding="utf-8"), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
        deps = defined["stages"][stage]["deps"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None
    code = sorted(dep for dep in deps if isinstance(dep, str) and dep.split("/")[0] in _CODE_ROOTS)
    return inputs_digest(code)


class ItemMemo:
    """One stage's kept outputs, by item and key (see the module's docstring)."""

    def __init__(self, stage: str, project: Path = Path(".")) -> None:
        self.stage = stage
        root = Path(os.environ.get("DVC_ROOT", str(project)))
        self.code = code_digest(stage, project / "dvc.yaml") if (root / ".dvc").is_dir() else None
        self.folder = root / paths.STAGE_MEMO / stage
        self.seen: dict[Path, str] = {}  # content digests of this run's input files

    def key(self, inputs: Iterable[str | Path], settings: Any = None) -> str | None:
        return None if self.code is None else inputs_digest(inputs, settings, self.code, self.seen)

    def restore(self, item: str, key: str | None, outputs: list[str]) -> bool:
        """Copy the item's outputs kept under `key` back; False (nothing to copy, or an entry that
        went away while read) when it must be computed."""
        entry = self.folder / item / str(key)
        if key is None or not entry.is_dir():
            return False
        try:
            for number, output in enumerate(outputs):
                with atomic_path(output) as tmp:
                    shutil.copyfile(entry / str(number), tmp)
            os.utime(entry)  # the most recently used keys are the ones kept
        except FileNotFoundError:
            return False
        return True

    def keep(self, item: str, key: str | None, outputs: list[str]) -> None:
        """Keep the item's outputs, just computed, under `key` (flushed to disk before the entry is
        named: a power cut never leaves an entry of truncated files); drop its keys beyond the KEPT
        newest. A run beside this one (a queued experiment) may rename or drop entries meanwhile."""
        if key is None:
            return
        folder = self.folder / item
        try:
            folder.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(dir=folder, prefix=".writing-"))
        except FileNotFoundError:  # the folder dropped by a run beside this one: nothing kept this time
            return
        try:
            for number, output in enumerate(outputs):
                shutil.copyfile(output, staging / str(number))
                with open(staging / str(number), "rb") as copied:
                    os.fsync(copied.fileno())
            fsync_folder(staging)
            os.replace(staging, folder / key)
            fsync_folder(folder)
        except OSError:  # the same key kept by a run beside this one (the same bytes), or no space
            shutil.rmtree(staging, ignore_errors=True)
        self._drop_old(folder)

    @staticmethod
    def _drop_old(folder: Path) -> None:
        stale = time.time() - STALE_WRITE_S
        dated = []
        for entry in list(folder.iterdir()) if folder.is_dir() else []:
            try:
                changed = entry.stat().st_mtime
            except FileNotFoundError:  # renamed or dropped by a run beside this one
                continue
            if not entry.name.startswith("."):
                dated.append((changed, entry))
            elif changed < stale:  # a run killed while it kept its outputs
                shutil.rmtree(entry, ignore_errors=True)
        for _, old in sorted(dated, reverse=True)[KEPT:]:
            shutil.rmtree(old, ignore_errors=True)

    def forget_others(self, items: Iterable[str]) -> None:
        """Drop what is kept for items no longer run (a system taken out of the panel). Not in an
        experiment: queued ones share this folder, each with a panel of its own."""
        if self.code is None or not self.folder.is_dir() or os.environ.get("DVC_EXP_BASELINE_REV"):
            return
        for entry in set(self.folder.iterdir()) - {self.folder / item for item in items}:
            shutil.rmtree(entry, ignore_errors=True)

    def run(
        self,
        items: list[str],
        inputs: Callable[[str], tuple[list[str], Any]],
        outputs: Callable[[str], list[str]],
        compute: Callable[[str], None],
        every_item: bool = True,
    ) -> list[str]:
        """Compute each item whose key is not kept (`inputs(item)`: its input files and settings),
        copy back the others' outputs; return the items computed. `every_item`: `items` is all
        there is (not a few named by hand), so what is kept for any other item is dropped."""
        computed = []
        for item in items:
            key = self.key(*inputs(item))
            if self.restore(item, key, outputs(item)):
                print(
                    f"{self.stage} {item}: unchanged since a run before, its outputs copied back ({self.folder / item})"
                )
            else:
                compute(item)
                self.keep(item, key, outputs(item))
                computed.append(item)
            for output in outputs(item):  # an input of a later item (a run file another system exports)
                self.seen.pop(Path(output).resolve(), None)
        if every_item:
            self.forget_others(items)
        print(f"{self.stage}: {len(computed)} of {len(items)} computed, the others unchanged")
        return computed
