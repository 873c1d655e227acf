"""Files in and out: all-or-nothing writes, readers that refuse what is not a regular file, UTF-8
text, JSON Lines, Parquet tables and .npy arrays this pipeline wrote, hashing, the user cache."""

from __future__ import annotations

import csv
import errno
import glob
import hashlib
import json
import math
import os
import stat
import tempfile
import time
from collections.abc import Iterable
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import IO, Any, Iterator, Literal

import numpy as np

from retrieval_bench.core.errors import (
    InputError,
    describe_os_error,
    first_line,
    quoted,
)


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds."""
    target = Path(path)
    if target.is_dir():  # os.replace would fail at the end, naming the temporary file
        raise InputError(f"{target}: a folder; name a file to write")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=TEMP_SUFFIX)
    except OSError as error:
        raise _write_error(error, target) from None
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
    try:
        try:
            yield tmp
            os.replace(tmp, target)
        except OSError as error:
            raise _write_error(error, target) from None
    finally:
        tmp.unlink(missing_ok=True)
    _drop_stale_temps(target)


STALE_TEMP_SECONDS = 3600.0  # a temporary file untouched this long beside a target just written: a killed writer's


def _drop_stale_temps(target: Path) -> None:
    """Delete what writers killed before their rename left beside `target` (a full copy of a
    vectors file, say), once it is old enough that no live writer can still be filling it; git and
    DVC ignore them meanwhile (.gitignore, .dvcignore)."""
    now = time.time()
    for leftover in leftover_temps(target):
        try:
            if leftover.is_file() and now - leftover.stat().st_mtime > STALE_TEMP_SECONDS:
                leftover.unlink()
        except OSError:
            pass  # gone already, or not ours to delete: the next write tries again


# What a write fails on for a reason of the place written, named by the file, not its temporary.
_PLACE_ERRORS = {
    errno.ENOSPC: "free some space",
    errno.EDQUOT: "free some space",
    errno.EFBIG: "raise the limit",
    errno.EROFS: "make its folder writable",
    errno.EACCES: "make its folder writable",
    errno.EPERM: "make its folder writable",
}


def _write_error(error: OSError, target: Path) -> Exception:
    """The InputError naming `target` for a full, read-only or forbidden place; `error` as it is else."""
    remedy = _PLACE_ERRORS.get(error.errno or 0)
    if remedy is None:
        return error
    return InputError(
        f"{describe_os_error(error, with_file=False)} writing {target}; it was not changed (writes are all or "
        f"nothing): {remedy} and rerun"
    )


# A chunk's text, or a reference context, in one CSV field may be longer than the csv module's
# default limit (128 KB): raised once, here, for every CSV reader of the project (a process-wide setting).
csv.field_size_limit(2**31 - 1)


def end_last_line(handle: IO[bytes]) -> None:
    """Before an append to a JSON Lines file open to read and write (r+b or a+b): a last line
    without its newline is either a whole record (a hand edit), which gets its newline, or the
    rest of an append a crash cut short, which is cut off, so the next record never lands glued to
    it, unreadable. Only the last byte is read when the file ends whole, as it almost always does."""
    size = handle.seek(0, os.SEEK_END)
    if not size:
        return
    handle.seek(size - 1)
    if handle.read(1) == b"\n":
        return
    handle.seek(0)
    content = handle.read()
    start = content.rfind(b"\n") + 1
    try:
        json.loads(content[start:])
    except (ValueError, RecursionError):
        handle.truncate(start)
        handle.seek(start)
        return
    handle.write(b"\n")


def fsync_folder(folder: str | Path) -> None:
    """Flush `folder`'s entries (a rename, a new file) to disk; a no-op where folders cannot be
    opened (not POSIX)."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


TEMP_SUFFIX = ".tmp"


def leftover_temps(path: str | Path) -> list[Path]:
    """The temporary files (atomic_path) or folders (locking.build_once) made beside `path` and never
    renamed or removed: a writer killed (SIGKILL) mid-write leaves one. Only a caller that holds the
    lock all writers of `path` take may delete them: another's would be one still being written."""
    target = Path(path)
    return sorted(target.parent.glob(f".{glob.escape(target.name)}.*{TEMP_SUFFIX}"))


# What a path may name besides a regular file or a folder: reading one may never end (/dev/zero)
# or wait for a writer that never comes (a FIFO, a terminal), so it is refused before it is opened.
_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a folder"),
)


def _kind(mode: int) -> str:
    return next((name for test, name in _SPECIAL_FILES if test(mode)), "not a regular file")


def file_state(path: str | Path) -> str | None:
    """None where `path` (symbolic links followed) is a regular file, else what it is for a
    message: "not found", "a folder", "a FIFO (named pipe)", "a character device"..."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "not found"
    return None if stat.S_ISREG(mode) else _kind(mode)


def _not_regular(path: str | Path, mode: int, folder_ok: bool) -> InputError | None:
    if stat.S_ISREG(mode) or (folder_ok and stat.S_ISDIR(mode)):
        return None
    kind = _kind(mode)
    return InputError(
        f"{path}: expected a file{' or a folder' if folder_ok else ''}, found {kind}"
        + ("" if stat.S_ISDIR(mode) else ", which is never read (it may never end, or wait for a writer forever)")
    )


def check_regular(path: str | Path, folder_ok: bool = False) -> None:
    """An InputError at once unless `path` (symbolic links followed: /dev/stdin) is a regular file,
    or a folder where `folder_ok`; a missing path raises FileNotFoundError for the caller to word."""
    error = _not_regular(path, os.stat(path).st_mode, folder_ok)
    if error is not None:
        raise error


def open_regular(path: str | Path) -> IO[bytes]:
    """`path` opened for reading in binary, if it is a regular file (check_regular), else one
    InputError at once: every reader of a path the user gives opens it here."""
    check_regular(path)
    # O_NONBLOCK: should a FIFO be swapped in after the check, opening it does not wait for a writer.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        error = _not_regular(path, os.fstat(fd).st_mode, folder_ok=False)
        if error is not None:
            raise error
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


HASH_BLOCK = 1 << 20  # bytes read at a time when hashing a file


def hash_file(source: str | Path | IO[bytes], digest: Any = None) -> Any:
    """`digest` (a hashlib object; a new sha256 when None) updated with the bytes of a file, read in
    blocks: `source` is a path (of a regular file: open_regular) or a binary handle open for
    reading. Returns the digest."""
    digest = hashlib.sha256() if digest is None else digest
    with open_regular(source) if isinstance(source, (str, os.PathLike)) else nullcontext(source) as handle:
        for block in iter(lambda: handle.read(HASH_BLOCK), b""):
            digest.update(block)
    return digest


def sha256_file(source: str | Path | IO[bytes]) -> str:
    """The hex sha256 of a file (a path or a binary handle open for reading)."""
    return str(hash_file(source).hexdigest())


def cache_root() -> Path:
    """$RETRIEVAL_BENCH_CACHE, else $XDG_CACHE_HOME/retrieval-bench (~/.cache/retrieval-bench): the
    user cache outside the project, where the bundled model is extracted (models/), ONNX exports
    (exports/) and ANN indexes (ann/) are kept."""
    base = os.environ.get("RETRIEVAL_BENCH_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "retrieval-bench"
    )
    return Path(base)


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces `path` only when closed without error."""
    with atomic_path(path) as tmp:
        encoding = None if "b" in mode else "utf-8"
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle


def without_nan(data: Any) -> Any:
    """`data` with every non-finite float (nested in dicts and lists) as None: JSON has no NaN, and
    `json.dump` writes a bare `NaN` that strict readers (JavaScript's JSON.parse, jq) refuse."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {key: without_nan(value) for key, value in data.items()}
    if isinstance(data, (list, tuple)):
        return [without_nan(value) for value in data]
    return data


def write_json(path: str | Path, data: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def write_jsonl(path: str | Path, rows: Iterable[dict[str, Any]]) -> None:
    """JSON Lines; no rows is one blank line (see touch_jsonl)."""
    with atomic_open(path) as handle:
        written = 0
        for written, row in enumerate(rows, 1):
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")
        if not written:
            handle.write("\n")


def touch_jsonl(path: str | Path) -> None:
    """Make sure a JSON Lines output exists and is not empty: a missing or empty file becomes one
    blank line, which every reader here skips. DVC warns "'<path>' is empty." about every empty
    output and dependency on every run, and has no switch to turn that off."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as handle:
        if handle.tell() == 0:
            handle.write("\n")


def read_table(source: str | Path | IO[bytes], columns: list[str] | None = None, name: str | None = None) -> Any:
    """A Parquet table this pipeline wrote (a path or a binary handle; `name` names it in
    messages): one that is truncated, empty, not Parquet or lacks one of `columns` is an
    InputError naming it, not a traceback."""
    import pandas as pd
    import pyarrow
    import pyarrow.parquet

    name = name or str(source)
    if isinstance(source, (str, os.PathLike)):
        check_regular(source)
    try:
        found = pyarrow.parquet.read_schema(source).names
        missing = [column for column in columns or () if column not in found]
        if missing:
            raise InputError(
                f"{name}: no column {', '.join(map(repr, missing))} (columns: {quoted(found, 120)}); "
                "a table of another kind: rerun the stage that writes it (`dvc repro`)"
            )
        if hasattr(source, "seek"):
            source.seek(0)
        return pd.read_parquet(source, columns=columns)
    except (pyarrow.ArrowException, ValueError, EOFError) as error:
        raise InputError(
            f"{name}: not a readable Parquet table ({first_line(error)}); rerun the stage that writes it (`dvc repro`)"
        ) from None


def load_array(path: str | Path, mmap_mode: Literal["r+", "r", "w+", "c"] | None = None) -> np.ndarray:
    """A 2-d float .npy array this pipeline wrote; a truncated, empty or foreign file is an
    InputError naming it."""
    check_regular(path)
    try:
        array: np.ndarray = np.load(path, mmap_mode=mmap_mode, allow_pickle=False)
    except (ValueError, EOFError) as error:
        raise InputError(
            f"{path}: not a readable .npy array ({first_line(error)}); rerun the embed stages (`dvc repro`)"
        ) from None
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.floating):
        raise InputError(
            f"{path}: expected a 2-d float array, got shape {array.shape} of {array.dtype}; rerun the embed stages"
        )
    return array


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Read a JSON Lines file of objects; a bad line is an InputError naming file and line."""
    return [row for _, row in numbered_jsonl(path)]


def numbered_jsonl(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each non-blank line of a JSON Lines file, checked as read_jsonl does."""
    for line_number, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        row = parse_json(line.rstrip("\r\n"), path, line_number)  # an error past the end is on this line
        if not isinstance(row, dict):
            raise InputError(f"{path}:{line_number}: expected a JSON object, got {type(row).__name__}")
        yield line_number, row


def parse_json(text: str, path: str | Path, first_line: int = 1) -> Any:
    """`text` (read from `path`, starting at line `first_line`) as JSON; invalid JSON, or JSON
    nested deeper than Python's parser goes (its recursion limit), is an InputError naming the line."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(f"{path}:{first_line + error.lineno - 1}: invalid JSON ({error.msg})") from None
    except RecursionError:
        deepest, line = _deepest(text)
        raise InputError(
            f"{path}:{first_line + line}: JSON nested {deepest} levels deep, deeper than Python's JSON parser "
            "reads (a question set or a table row is a few levels deep)"
        ) from None


def _deepest(text: str) -> tuple[int, int]:
    """(depth, line from 0) of the deepest nesting of lists and objects in JSON `text`."""
    level, deepest, deepest_line, line = 0, 0, 0, 0
    in_string = escaped = False
    for char in text:
        if char == "\n":
            line += 1
        elif in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            level += 1
            if level > deepest:
                deepest, deepest_line = level, line
        elif char in "]}":
            level -= 1
    return deepest, deepest_line


def read_text(path: str | Path) -> str:
    """A UTF-8 text file's whole text, checked as read_text_lines checks it."""
    return "".join(read_text_lines(path))


def read_text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (a byte-order mark is tolerated), split on "\n" only;
    bytes that are not UTF-8 are an InputError naming the line, and so is a path that is not a
    regular file (open_regular)."""
    with open_regular(path) as handle:
        for line_number, raw in enumerate(handle, 1):
            try:
                yield raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}:{line_number}: not UTF-8 text") from None


def csv_rows(path: str | Path) -> Iterator[tuple[int, list[str]]]:
    """(the line a row starts on, its fields) of each row of a CSV file, read strictly: csv's
    lenient mode let a stray quote open a field that ran to the end of the file, every later row
    swallowed into one text without a word. Such a quote, or text after a closing quote, is an
    InputError naming the line its row starts on."""
    reader = csv.reader(read_text_lines(path), strict=True)
    start = 1
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as error:
            what = (
                "a quoted field opened on this row is never closed"
                if "unexpected end of data" in str(error)
                else f"a quote in this row breaks its fields ({error})"
            )
            hint = "a stray quote? Inside a field write a quote twice, and quote that field"
            raise InputError(f"{path}:{start}: {what}: {hint}") from None
        yield start, row
        start = reader.line_num + 1


def _raise(error: OSError) -> None:
    raise error


def folder_entries(root: Path) -> list[Path]:
    """Every entry below `root` as root.rglob("*") lists them (a link to a folder listed, not
    followed), except that a folder that cannot be listed raises its OSError (a stage's one line:
    "Permission denied (PATH)"): rglob skipped it, and the documents in it were lost unsaid."""
    entries = []
    for folder, folders, files in os.walk(root, onerror=_raise):
        entries += [Path(folder, name) for name in (*folders, *files)]
    return entries


def check_not_an_input(out: str | Path, option: str, inputs: dict[str, str | Path]) -> None:
    """A command's output `out` (named by `option`) is none of its inputs ({option: path}): the
    write replaced the file it read (a golden set, a DVC-tracked chunk table) with its report."""
    for name, path in inputs.items():
        if os.path.realpath(out) == os.path.realpath(path):
            raise InputError(f"{option} {out}: the file {name} reads; write the output to another path")
