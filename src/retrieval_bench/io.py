"""File I/O every stage shares: one-line input errors and all-or-nothing writes."""
from __future__ import annotations

import errno
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, Iterator


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


class InputError(Exception):
    """Bad input from the user: reported as one line, exit status 1, no traceback."""


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; rename it over `path` only if the block succeeds."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    os.close(fd)
    tmp = Path(tmp_name)
    os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; outputs get the usual permissions
    try:
        try:
            yield tmp
            os.replace(tmp, target)
        except OSError as error:
            if error.errno in (errno.ENOSPC, errno.EDQUOT):
                raise InputError(
                    f"no space left on the device writing {target}; it was not changed (writes are all or nothing): "
                    "free some space and rerun"
                ) from None
            raise
    finally:
        tmp.unlink(missing_ok=True)


@contextmanager
def atomic_open(path: str | Path, mode: str = "w") -> Iterator[IO[Any]]:
    """Open a temporary file for writing that replaces `path` only when closed without error."""
    with atomic_path(path) as tmp:
        encoding = None if "b" in mode else "utf-8"
        with open(tmp, mode, encoding=encoding) as handle:
            yield handle


def write_json(path: str | Path, data: Any) -> None:
    with atomic_open(path) as handle:
        json.dump(data, handle, indent=2, ensure_ascii=False)
        handle.write("\n")


def write_jsonl(path: str | Path, rows: Iterable[dict]) -> None:
    with atomic_open(path) as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_jsonl(path: str | Path) -> list[dict]:
    """Read a JSON Lines file of objects; a bad line is an InputError naming file and line."""
    rows = []
    for line_number, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as error:
            raise InputError(f"{path}:{line_number}: invalid JSON ({error.msg})") from None
        if not isinstance(row, dict):
            raise InputError(f"{path}:{line_number}: expected a JSON object, got {type(row).__name__}")
        rows.append(row)
    return rows


def read_text_lines(path: str | Path) -> Iterator[str]:
    """The lines of a UTF-8 text file (a byte-order mark is tolerated), split on "\n" only;
    bytes that are not UTF-8 are an InputError naming the line."""
    with open(path, "rb") as handle:
        for line_number, raw in enumerate(handle, 1):
            try:
                yield raw.decode("utf-8-sig" if line_number == 1 else "utf-8")
            except UnicodeDecodeError:
                raise InputError(f"{path}:{line_number}: not UTF-8 text") from None


def describe_os_error(error: OSError) -> str:
    """One line for a failure of the operating system (disk full, permission, missing file)."""
    what = "no space left on the device" if error.errno in (errno.ENOSPC, errno.EDQUOT) else (error.strerror or str(error))
    where = f" ({error.filename})" if error.filename else ""
    return f"{what}{where}"


def run_stage(main: Callable[[], None]) -> None:
    """Run a stage's main(); an InputError or an OSError (a full disk, a permission) becomes one
    line on stderr and exit status 1. (Under `dvc repro`, DVC reports any failing stage with its
    own message and exits 255.)"""
    try:
        main()
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        sys.exit(1)
    except OSError as error:
        print(f"error: {describe_os_error(error)}", file=sys.stderr)
        sys.exit(1)
