"""Bad input as one line: the exception every reader raises, and the words of its messages
(a value quoted, an exception's first line, an OS error, a missing optional extra, a command line
argparse refuses)."""

from __future__ import annotations

import argparse
import errno
import math
import sys
from contextlib import contextmanager
from typing import Iterator, NoReturn


class InputError(Exception):
    """Bad input from the user: reported as one line, exit status 1, no traceback."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C, with one line saying what was kept and what a rerun does (run_stage prints it)."""


class OneLineArguments(argparse.ArgumentParser):
    """An argument parser whose refusal is one `error:` line naming the command and exit status 2,
    not argparse's usage block (its subcommands' parsers are of this class too)."""

    def error(self, message: str) -> NoReturn:
        print(f"error: {self.prog}: {message} (see --help)", file=sys.stderr)
        sys.exit(2)


INTERRUPTED_EXIT = 130  # 128 + SIGINT, as a shell reports a process ended by Ctrl-C


def json_kind(value: object) -> str:
    """A value as JSON would name it, for messages: null, a number 1.5, a list, ..."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (int, float)):
        return f"the number {value}"
    return f"a {type(value).__name__}" if not isinstance(value, str) else repr(value)


QUOTE_CHARS = 40  # at most this much of a value read from a file is echoed in an error line


def quoted(value: object, limit: int = QUOTE_CHARS) -> str:
    """A value from a file, for an error line: its repr (control characters escaped, so it stays
    one line), cut to `limit` characters; no more of an arbitrary file is echoed."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def flow_yaml(value: object) -> str:
    """A params value as one line of YAML flow style, for an error line that says what to write
    ({name: {chunking: default, embedder: default}}): quoted where YAML would read another type
    back ('017', 'yes')."""
    import yaml

    return yaml.safe_dump(value, default_flow_style=True, width=2**31 - 1, sort_keys=False).strip()


def some_of(items: list[str], limit: int = 5) -> str:
    """The first `limit` of `items`, comma-separated, with ", ..." when there are more: the
    examples a warning names."""
    return ", ".join(items[:limit]) + (", ..." if len(items) > limit else "")


@contextmanager
def optional_extra(extra: str, what: str) -> Iterator[None]:
    """Imports in the block come from the optional extra `extra` of pyproject.toml: one that fails
    (the package, or a module it needs, is not installed) is one InputError saying that `what`
    needs the extra and the `pip install` that brings it. The project's own modules failing to
    import is a bug, re-raised as it is."""
    try:
        yield
    except ImportError as error:
        if (error.name or "").split(".")[0] == __name__.split(".")[0]:
            raise
        raise InputError(
            f"{what} needs the {extra} extra, which is not installed ({first_line(error)}): pip install -e '.[{extra}]'"
        ) from None


def first_line(error: BaseException, limit: int = 120) -> str:
    """The first non-blank line of an exception's message (stripped), cut to `limit` characters."""
    text = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def describe_os_error(error: OSError, with_file: bool = True) -> str:
    """One line for a failure of the operating system (disk full, the file-size limit, permission,
    missing file), naming the file it names when `with_file`."""
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        what = "no space left on the device"
    elif error.errno == errno.EFBIG:
        what = "file too large for this process's file-size limit (`ulimit -f`)"
    else:
        what = error.strerror or str(error)
    where = f" ({error.filename})" if error.filename and with_file else ""
    return f"{what}{where}"
