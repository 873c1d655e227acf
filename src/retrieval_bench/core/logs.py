"""What a library function says as it works: one line at a time, to a callable the stage chooses."""

from collections.abc import Callable

Log = Callable[[str], None]


def silent(line: str) -> None:
    """The log of a call that must say nothing: a check's, a benchmark's, a dry run's look ahead."""
