"""One writer at a time: OS-level locks on the caches.

The question and judgement caches (and with them their batch journals) are locked exclusively,
by an flock(2) on the cache file itself, so no lock file is left in data/ and a process that dies
(even by SIGKILL) releases it with its file descriptors. A second run that finds the cache locked
waits for it, saying so, and then reads the cache afresh, so it asks only for what the first run
did not get; with RETRIEVAL_BENCH_LOCK_WAIT=0 it exits at once with one line instead
(RETRIEVAL_BENCH_LOCK_WAIT=N: wait at most N seconds). The same lock, with a label (`what`) for
its messages, guards an embedding cache folder (exclusive: one run reads and appends at a time,
so two never embed the same texts) and the folders built once in the user cache (`build_once`:
the extracted model, ONNX exports, a model shipped to a Ray node, the BM25 index).

After the lock is taken the path is checked to still name the locked file: a file replaced
meanwhile (`dvc checkout`, a `dvc commit` that moved it into the DVC cache) is opened and
locked again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import TEMP_SUFFIX, leftover_temps

try:  # POSIX
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

WAIT_ENV = "RETRIEVAL_BENCH_LOCK_WAIT"
DRY_RUN_ENV = "RETRIEVAL_BENCH_DRY_RUN"  # 1: a paying stage dry runs (under `dvc repro`, where no flag reaches it)
POLL_S = 0.2


def paid_stage_arguments(
    parser: argparse.ArgumentParser, argv: list[str] | None, dry_run_help: str, cache: str
) -> bool:
    """A paying stage's command line: --dry-run and --no-wait (one line instead of a wait when
    another run holds `cache`: WAIT_ENV 0 for this process). Whether to dry run is returned:
    --dry-run given, or DRY_RUN_ENV set (dry_run_from_env)."""
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument(
        "--no-wait",
        action="store_true",
        help=f"exit with one line if another run holds the {cache}, instead of waiting",
    )
    args = parser.parse_args(argv)
    if args.no_wait:
        os.environ[WAIT_ENV] = "0"
    return args.dry_run or dry_run_from_env()


def dry_run_from_env() -> bool:
    """RETRIEVAL_BENCH_DRY_RUN=1: a dry run under `dvc repro` (the stage then exits 3, so DVC records nothing)."""
    return os.environ.get(DRY_RUN_ENV, "").lower() in ("1", "true", "yes")


def _wait_limit() -> float | None:
    """Seconds to wait for another run's lock: None = as long as it takes."""
    value = os.environ.get(WAIT_ENV, "").strip()
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        raise InputError(f"{WAIT_ENV} must be a number of seconds (0 = do not wait), got {value!r}") from None
    return max(0.0, seconds)


def _try_lock(fd: int, shared: bool = False) -> bool:
    if fcntl is None:  # pragma: no cover - Windows: lock the first byte
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
            return True
        except OSError:
            return False
    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def _same_file(fd: int, path: Path) -> bool:
    try:
        here, there = os.fstat(fd), os.stat(path)
    except FileNotFoundError:
        return False
    return (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino)


@contextmanager
def exclusive(path: str | Path, log: Callable[[str], None] | None = None, what: str | None = None) -> Iterator[None]:
    """Hold the exclusive lock on `path` (a file, created if missing and never truncated, or a
    folder) for the block. `what`: what a holder does, for the messages ("pruning <folder>");
    without it they speak of another run generating into the cache at `path`."""
    with _locked(path, log, what, shared=False):
        yield


@contextmanager
def shared(path: str | Path, log: Callable[[str], None] | None = None, what: str | None = None) -> Iterator[None]:
    """Hold a shared lock on `path` for the block: any number of shared holders, no exclusive one."""
    with _locked(path, log, what, shared=True):
        yield


@contextmanager
def try_exclusive(path: str | Path) -> Iterator[bool]:
    """The exclusive lock on the file `path` (created if missing) if no other holder has it: True,
    and held for the block; else False at once. To tell a live writer's leftovers from a dead one's."""
    fd = _open(Path(path))
    try:
        yield _try_lock(fd)
    finally:
        os.close(fd)


def build_once(
    target: str | Path,
    build: Callable[[Path], None],
    valid: Callable[[Path], bool],
    what: str,
    log: Callable[[str], None] | None = None,
) -> bool:
    """Make the folder `target` once, whole or not at all, unless it is `valid` already (then it is
    kept as it is). Under an exclusive lock on `.<name>.lock` beside it, `build(staging)` fills a
    new temporary folder there, which is renamed to `target`: a half-built folder is never seen,
    and of the processes that find it missing at once (Ray actors on one node, two stages) one
    builds it while the others wait, then find it valid. An invalid `target` (a damaged copy) is
    moved aside and deleted just before the rename. True when this call built it. They wait
    whatever RETRIEVAL_BENCH_LOCK_WAIT says: a build ends by itself, and the actors of one run
    wait for each other here."""
    target = Path(target)
    if valid(target):
        return False
    with _locked(target.parent / f".{target.name}.lock", log, what, shared=False, limited=False):
        if valid(target):  # built by the process we waited for
            return False
        for leftover in leftover_temps(target):  # of builds that were killed:
            shutil.rmtree(leftover, ignore_errors=True)  # while we hold the lock nobody else builds `target`
        staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX))
        stale = staging.with_suffix(".stale")
        try:
            build(staging)
            if os.path.lexists(target):  # a damaged copy: out of the way in one rename, then deleted
                os.replace(target, stale)
            os.replace(staging, target)  # atomic: nobody else builds while we hold the lock
            return True
        finally:
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(stale, ignore_errors=True)


def _open(path: Path) -> int:
    if path.is_dir():
        return os.open(path, os.O_RDONLY)
    return os.open(path, os.O_RDONLY | os.O_CREAT, 0o666)  # flock needs no write access


@contextmanager
def _locked(
    path: str | Path, log: Callable[[str], None] | None, what: str | None, shared: bool, limited: bool = True
) -> Iterator[None]:
    path = Path(path)
    if fcntl is None and (shared or path.is_dir()):  # pragma: no cover - Windows locks bytes of files only
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    limit = _wait_limit() if limited else None
    started = time.monotonic()
    told = False
    while True:
        fd = _open(path)
        try:
            while not _try_lock(fd, shared):
                waited = time.monotonic() - started
                if limit is not None and waited >= limit:
                    how = "not waiting" if limit == 0 else f"gave up after {limit:g}s"
                    raise InputError(
                        f"another run is generating into {path} and holds its lock; {how} ({WAIT_ENV}={limit:g}); "
                        "rerun when it has finished: it asks only for the questions that run did not get"
                        if what is None
                        else f"another process is {what} and holds its lock ({path}); {how} ({WAIT_ENV}={limit:g}); "
                        "rerun when it has finished"
                    )
                if not told and log is not None:
                    log(
                        f"another run is generating into {path}; waiting for it to finish "
                        f"(then only what it did not get is asked for; {WAIT_ENV}=0 exits instead)"
                        if what is None
                        else f"another process is {what}; waiting for it to finish{f' ({WAIT_ENV}=0 exits instead)' if limited else ''}"
                    )
                    told = True
                time.sleep(POLL_S)
        except BaseException:
            os.close(fd)
            raise
        if _same_file(fd, path):
            break
        os.close(fd)  # the path was replaced while we waited: lock the file it names now
    if told and log is not None:
        log(
            f"the other {'run' if what is None else 'process'} finished after {time.monotonic() - started:.1f}s; continuing"
        )
    try:
        yield
    finally:
        os.close(fd)  # releases the lock
