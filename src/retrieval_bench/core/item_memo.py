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

A machine that kept nothing for an item (a fresh clone, a CI runner) takes its outputs from the
stage's last run instead (PreviousRun: DVC's cache, filled by `dvc pull`, or git's HEAD), when the
key that run wrote beside them is the key of the item's inputs here.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import yaml

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_path, fsync_folder, hash_file, write_json
from retrieval_bench.core.revisions import git_show

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


_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml where installed


def _load_yaml(path: Path) -> Any:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_YAML_LOADER)


def code_digest(stage: str, pipeline: Path) -> str | None:
    """The digest of the files under the stage's code deps in dvc.yaml (src/..., stages/...): what
    makes DVC rerun it for a code edit. None without dvc.yaml or that stage."""
    try:
        defined = _load_yaml(pipeline)
        deps = defined["stages"][stage]["deps"]
    except (OSError, KeyError, TypeError, yaml.YAMLError):
        return None
    code = sorted(dep for dep in deps if isinstance(dep, str) and dep.split("/")[0] in _CODE_ROOTS)
    return inputs_digest(code)


class _NotAdopted(Exception):
    """A file of the last run missing, or not the bytes its key file records."""


class PreviousRun:
    """The outputs a stage's last run left where a fresh clone has them: in a folder DVC caches, the
    files dvc.lock records (copied from DVC's cache, there after `dvc pull`); in the rest (outputs
    with cache: false, kept in git), the files git holds at HEAD. Read only for an item the local
    memo lacks; DVC (about 1 CPU-s of imports) only for a path in a cached folder."""

    def __init__(self, stage: str, project: Path) -> None:
        self.stage, self.project = stage, project
        self._folders: dict[str, str] | None = None  # a cached output folder -> its .dir object id
        self._cached: dict[str, Path] | None = None  # a file in one -> its object in DVC's cache

    def _cached_folders(self) -> dict[str, str]:
        if self._folders is None:
            self._folders = {}
            try:
                stage = _load_yaml(self.project / "dvc.yaml")["stages"][self.stage]
                declared = [out for section in ("outs", "metrics", "plots") for out in stage.get(section, [])]
                uncached = {
                    next(iter(out))
                    for out in declared
                    if isinstance(out, dict) and not next(iter(out.values())).get("cache", True)
                }
                for out in _load_yaml(self.project / "dvc.lock")["stages"][self.stage].get("outs", []):
                    if str(out.get("md5", "")).endswith(".dir") and out["path"] not in uncached:
                        self._folders[out["path"]] = out["md5"]
            except Exception:  # no lock or no such stage yet, a file unreadable: nothing to take
                self._folders = {}
        return self._folders

    def _cached_files(self) -> dict[str, Path]:
        if self._cached is None:
            self._cached = {}
            try:
                from dvc.repo import Repo

                with Repo(str(self.project)) as repo:
                    objects = repo.cache.local
                    for folder, oid in self._cached_folders().items():
                        for entry in json.loads(Path(objects.oid_to_path(oid)).read_text(encoding="utf-8")):
                            self._cached[f"{folder}/{entry['relpath']}"] = Path(objects.oid_to_path(entry["md5"]))
            except Exception:  # no DVC project, a manifest not pulled: nothing to take
                self._cached = {}
        return self._cached

    def copy(self, path: str, target: Path) -> None:
        """Write the file at `path` as the last run left it to `target`; _NotAdopted where neither
        DVC's cache nor git has it."""
        posix = Path(path).as_posix()
        try:
            if any(posix.startswith(f"{folder}/") for folder in self._cached_folders()):
                shutil.copyfile(self._cached_files()[posix], target)
                return
            committed = git_show(posix, "HEAD", self.project)  # cache: false outputs: small, kept in git
            if committed is None:
                raise _NotAdopted(path)
            target.write_bytes(committed)
        except (OSError, KeyError) as error:  # not pulled, no such file at HEAD
            raise _NotAdopted(path) from error


class ItemMemo:
    """One stage's kept outputs, by item and key (see the module's docstring)."""

    def __init__(self, stage: str, project: Path = Path(".")) -> None:
        self.stage = stage
        root = Path(os.environ.get("DVC_ROOT", str(project)))
        self.code = code_digest(stage, project / "dvc.yaml") if (root / ".dvc").is_dir() else None
        self.folder = root / paths.STAGE_MEMO / stage
        self.seen: dict[Path, str] = {}  # content digests of this run's input files
        self.previous = PreviousRun(stage, project)

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

    def adopt(self, item: str, key: str | None, outputs: list[str], key_file: str | None) -> bool:
        """Where this machine kept nothing for the item (a fresh clone, a CI runner), take its
        outputs and `key_file` from the stage's last run (PreviousRun) if that key file says `key`
        and every output read back has the digest it records (so no file of another run is taken,
        whatever source each came from); they are kept here too."""
        if key is None or key_file is None or any((self.folder / item).glob("[!.]*")):
            return False  # what this machine ran last is in the memo: the last run's outputs are too
        try:
            with ExitStack() as placing:  # every output and the key file replaced, or none
                recorded_at = placing.enter_context(atomic_path(key_file))
                self.previous.copy(key_file, recorded_at)
                recorded = json.loads(recorded_at.read_text(encoding="utf-8"))
                if recorded.get("key") != key or sorted(recorded.get("outputs", {})) != sorted(outputs):
                    raise _NotAdopted(key_file)
                for output in outputs:
                    tmp = placing.enter_context(atomic_path(output))
                    self.previous.copy(output, tmp)
                    if file_digest(tmp, {}) != recorded["outputs"][output]:
                        raise _NotAdopted(output)
        except (_NotAdopted, OSError, ValueError, AttributeError):
            return False
        self.keep(item, key, [*outputs, key_file])
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
        """Drop what is kept for items not in `items` (a system taken out of the panel). Not in an
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
        key_file: Callable[[str], str] | None = None,
        known: Iterable[str] | None = None,
    ) -> list[str]:
        """Compute each item whose key is not kept (`inputs(item)`: its input files and settings),
        copy back the others' outputs; return the items computed. `key_file(item)`: where its key
        and its outputs' digests are written, for a fresh clone to adopt them (adopt), kept with its
        outputs. `known`: every item there is (default `items`; more where a few are named by hand):
        what is kept for any other is dropped."""
        computed = []
        for item in items:
            key, written = self.key(*inputs(item)), outputs(item)
            beside = key_file(item) if key_file and key is not None else None
            kept = [*written, *([beside] if beside else [])]
            if beside is not None:  # never an old key beside new outputs, should this item fail
                Path(beside).unlink(missing_ok=True)
            if self.restore(item, key, kept):
                print(
                    f"{self.stage} {item}: unchanged since a run before, its outputs copied back ({self.folder / item})"
                )
            elif self.adopt(item, key, written, beside):
                print(f"{self.stage} {item}: unchanged since the committed run, its outputs taken from it")
            else:
                compute(item)
                if beside is not None:  # what the outputs are, and what they came from
                    write_json(beside, {"key": key, "outputs": {out: file_digest(Path(out), {}) for out in written}})
                self.keep(item, key, kept)
                computed.append(item)
            for output in kept:  # an input of a later item (an exported run)
                self.seen.pop(Path(output).resolve(), None)
        self.forget_others(items if known is None else known)
        others = ", the others unchanged" if len(computed) < len(items) else ""
        print(f"{self.stage}: {len(computed)} of {len(items)} computed{others}")
        return computed
