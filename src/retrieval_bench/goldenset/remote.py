"""The question cache a team shares through a DVC remote, fetched before anything is paid for.

dvc.lock names the version of data/question_cache.jsonl (and of its batch journal) that the last
`dvc repro` recorded, and `dvc push` puts it on the remote. On a clean clone a plain `dvc repro`
(without --pull) finds no cache, and a teammate who `git pull`s new questions has an old one:
either would pay again for questions already paid for. So before the generate stage asks for
anything, a file that is not the version dvc.lock names is completed from that version, read from
DVC's cache on this machine or from the default remote: every record it lacks is appended (the
cache is append-only and keyed by content, so the union is always right; the journal gets the
lines it lacks).

`dvc pull` cannot run inside a stage (`dvc repro` holds the repository's lock meanwhile), so the
version is read through DVC's Python API (Repo.cloud.get_remote_odb), which takes no lock. When it
cannot be read (the remote is unreachable, or nobody pushed it) a run that would pay stops with
one line saying to run `dvc repro --pull`; RETRIEVAL_BENCH_PULL=0 skips the check. Without a
default remote nothing is asked of any remote and nothing is refused.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import yaml

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.locking import exclusive
from retrieval_bench.goldenset.generate_settings import GenerationRun
from retrieval_bench.llm.cache.replies import merge, restore_from_mirror

PULL_ENV = "RETRIEVAL_BENCH_PULL"


class Unavailable(Exception):
    """The recorded version could not be read (its message says why)."""


def recorded_versions(lock_path: str | Path, outs: tuple[str, ...]) -> dict[str, dict]:
    """{path: dvc.lock's entry (md5, size)} for those of `outs` some stage of dvc.lock records."""
    try:
        lock = yaml.safe_load(Path(lock_path).read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError):
        return {}
    found = {}
    for stage in (lock.get("stages") or {}).values():
        for out in (stage or {}).get("outs") or []:
            if isinstance(out, dict) and out.get("path") in outs and out.get("md5"):
                found[out["path"]] = out
    return found


def _md5(path: str | Path) -> str | None:
    try:
        return hashlib.md5(Path(path).read_bytes()).hexdigest()
    except FileNotFoundError:
        return None


def stale_versions(root: str | Path, lock_path: str, outs: tuple[str, ...]) -> dict[str, dict]:
    """The entries of `outs` whose file here is not the version dvc.lock records (missing or
    different), in a DVC repository; none with RETRIEVAL_BENCH_PULL=0."""
    if os.environ.get(PULL_ENV, "").strip().lower() in ("0", "false", "no") or not (Path(root) / ".dvc").is_dir():
        return {}
    recorded = recorded_versions(Path(root) / lock_path, outs)
    return {
        path: entry
        for path, entry in recorded.items()
        if int(entry.get("size") or 0) > 0 and _md5(Path(root) / path) != entry["md5"]
    }


def read_version(root: str | Path, md5: str) -> tuple[bytes, str] | None:
    """(content, where it came from) of the object `md5`: DVC's cache here, else the default
    remote; None when no default remote is configured and the cache here lacks it."""
    from dvc.repo import Repo

    with Repo(str(root)) as repo:
        local = repo.cache.local
        if local is not None and local.fs.exists(local.oid_to_path(md5)):
            return Path(local.oid_to_path(md5)).read_bytes(), "DVC's cache on this machine"
        name = repo.config["core"].get("remote")
        if not name:
            return None
        where = f"DVC remote {name!r} ({repo.config['remote'].get(name, {}).get('url', '?')})"
        try:
            store = repo.cloud.get_remote(name, "generate_goldenset")
            if not store.fs.exists(store.path):
                raise Unavailable(f"{where} does not exist")
            odb = repo.cloud.get_remote_odb(name, "generate_goldenset")
            path = odb.oid_to_path(md5)
            if not odb.fs.exists(path):
                raise Unavailable(f"{where} does not hold it: was `dvc push` run after the run that generated it?")
            return odb.fs.cat_file(path), where
        except Unavailable:
            raise
        except Exception as error:  # noqa: BLE001 - any failure to read a remote (credentials, network, plugin)
            reason = " ".join(str(error).split())[:200] or type(error).__name__
            raise Unavailable(f"{where} could not be read: {reason}") from None


def fetch_shared_cache(
    run: GenerationRun, journal_path: str, lock_path: str, paying: bool, *, root: str | Path = "."
) -> None:
    """Complete the question cache (run.cache_path) and batch journal from the versions dvc.lock
    records (see the module docstring) before anything is paid for; a dry run only says whether
    they differ. Raises InputError when `paying` and a version a default remote should hold cannot
    be read."""
    cache_path, dry_run, log = run.cache_path, run.dry_run, run.log
    restore_from_mirror(Path(root) / cache_path, "questions already paid for", log, dry_run)
    stale = stale_versions(root, lock_path, (cache_path, journal_path))
    if not stale:
        return
    if dry_run:
        log(
            f"{', '.join(stale)} differ from the version dvc.lock records; a real run first fetches what they lack "
            "(DVC cache or default remote), so this estimate may count questions already paid for"
        )
        return
    fetched = {}
    for path in sorted(stale, key=lambda p: p != cache_path):
        entry = stale[path]
        try:
            found = read_version(root, entry["md5"])
        except Unavailable as error:
            if not paying:
                log(f"{path}: the version dvc.lock records is not here and {error}; going on without it")
                continue
            raise InputError(
                f"{path} is missing or behind the version dvc.lock records (md5 {entry['md5'][:12]}, "
                f"{int(entry.get('size') or 0):,} bytes), which {error}; run `dvc repro --pull` "
                f"(or `dvc pull {cache_path} {journal_path}`) so that questions already paid for are not paid "
                f"again, or set {PULL_ENV}=0 to generate without them"
            ) from None
        if found is not None:  # None: no default remote, nothing shared to fetch
            fetched[path] = found
    if not fetched:
        return
    with exclusive(Path(root) / cache_path, log):  # no other run appends meanwhile
        for path, (data, where) in fetched.items():
            added = merge(Path(root) / path, data, keyed=path == cache_path)
            what = "questions already paid for" if path == cache_path else "batch journal events"
            log(f"{path}: fetched {added} {what} from {where} (the version dvc.lock records), before asking for any")
