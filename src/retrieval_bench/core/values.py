"""Ids and texts read from the user's files: checked as text (no null, float or lone surrogate); a TREC
run line's record."""

from __future__ import annotations

import math
import re
import unicodedata

import numpy as np

from retrieval_bench.core.errors import (
    InputError,
    json_kind,
    quoted,
)


def _unicode(value: str, where: str, field: str) -> str:
    """`value` if it is valid Unicode: JSON's \\ud800 escapes give lone surrogates, which no UTF-8
    file (Parquet, JSONL) can hold."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as error:
        raise InputError(
            f"{where}: {field!r} holds a lone surrogate {quoted(value[error.start])} at character "
            f"{error.start}, which is not text (an escape such as \\ud800 without its pair)"
        ) from None
    return value


def visible(text: str) -> bool:
    """Whether `text` holds a character one can see: not only spaces (U+00A0 included), line
    breaks, and format or control characters such as U+200B, U+2060 or U+FEFF, which str.strip()
    keeps."""
    return any(not char.isspace() and unicodedata.category(char)[0] not in "CZ" for char in text)


def checked_id(value: object, where: str, field: str) -> str:
    """An id as text: a non-empty string, or an integer (42 -> "42"); anything else (null, NaN,
    a float, true, a list, a lone surrogate) is an InputError naming `where` (file and record)."""
    if isinstance(value, str) and value.strip():
        return _unicode(value, where, field)
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return str(int(value))
    got = "an empty string" if isinstance(value, str) else json_kind(value)
    raise InputError(f"{where}: {field!r} must be a non-empty string (or an integer), got {got}")


QID_RULE = (
    "a non-empty text (or a whole number) of printable characters: no tab, line break or other control character, "
    "no leading or trailing space"
)


def checked_qid(qid: object, where: str, field: str) -> str:
    """A question id as text, of the form QID_RULE (a TSV, a TREC run or a qrels line holds it whole),
    or an InputError naming `where` and `field`."""
    text = str(qid) if isinstance(qid, (str, int)) and not isinstance(qid, bool) else ""
    if not text or not text.isprintable() or text != text.strip():
        raise InputError(f"{where}: {field!r} must be {QID_RULE}; got {quoted(qid)}")
    return text


def checked_text(value: object, where: str, field: str) -> str:
    """A text: a string (it may be empty; empty texts are dropped and counted later)."""
    if isinstance(value, str):
        return _unicode(value, where, field)
    raise InputError(f"{where}: {field!r} must be a string, got {json_kind(value)}")


def count_argument(text: str) -> int:
    """An argparse type for a command's count option (--show): a whole number, 0 or more; argparse
    turns the error into its one usage line."""
    import argparse

    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a whole number, 0 or more")
    return value


def path_argument(text: str) -> str:
    """An argparse type for a path a command writes: not empty (an empty path is the working folder,
    where `export-beir ''` wrote its files among the project's)."""
    import argparse

    if not text.strip():
        raise argparse.ArgumentTypeError("an empty path; name the file or folder to write")
    return text


# A TREC run's score as trec_eval's atof reads it: an ASCII decimal number (float() also takes
# "1_000" and Arabic-Indic digits, which atof reads as 1 and 0: another ranking, unsaid).
# (inf and nan as atof reads them: then refused as not finite, by name.)
TREC_SCORE = re.compile(r"[+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:e[+-]?[0-9]+)?|inf(?:inity)?|nan)", re.ASCII | re.I)


def finite_score(value: object) -> float | None:
    """`value` as a float when it is a finite real number (not a bool; an integer too large for a
    float is none), else None."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.integer, np.floating)):
        return None
    try:
        score = float(value)
    except OverflowError:
        return None
    return score if math.isfinite(score) else None


def trec_record(line: str, at: str) -> tuple[str, str, float]:
    """(qid, chunk_id, score) of one TREC run line, `qid Q0 chunk_id rank score tag` (whitespace-
    separated; the rank is not read: rows are ordered by score, as trec_eval does), or an
    InputError naming `at`."""
    fields = line.split()
    if len(fields) != 6:
        raise InputError(f"{at}: expected a TREC run line 'qid Q0 chunk_id rank score tag', got {len(fields)} fields")
    if not TREC_SCORE.fullmatch(fields[4]):
        raise InputError(f"{at}: score must be a number, got {quoted(fields[4])}")
    return fields[0], fields[2], float(fields[4])
