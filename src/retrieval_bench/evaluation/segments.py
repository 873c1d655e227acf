"""The segments a question belongs to, carried by every per-question row so that a verdict can be
broken down: its question set (origin), source document, the document's folder, and its length.
The tests over them are segment_tests.py's (kept apart: scoring needs only the tags)."""

from __future__ import annotations

import posixpath

import pandas as pd

SEGMENT_COLUMNS = ["question_set", "document", "folder", "length_bucket"]
# The golden set's `source` of a row -> its question set; any other source was generated.
QUESTION_SETS = {"hand-written": "hand-written", "qrels": "real"}
GENERATED = "generated"
LENGTH_BUCKETS = ((8, "short (<= 8 words)"), (15, "medium (9-15 words)"))
LONG = "long (16+ words)"


def question_set(row: dict) -> str:
    """The row's own `question_set` (an imported set's name, generate.imported) when it has one,
    else by its source: hand-written (the user's own questions), real (labelled queries: qrels,
    BEIR) or generated."""
    return row.get("question_set") or QUESTION_SETS.get(row.get("source"), GENERATED)


def length_bucket(question: str) -> str:
    n = len(question.split())
    return next((name for limit, name in LENGTH_BUCKETS if n <= limit), LONG)


def segments(golden: list[dict]) -> pd.DataFrame:
    """One row per golden row, in order: the SEGMENT_COLUMNS (document and folder empty when the
    row names no document, e.g. a labelled query with several relevant chunks)."""
    rows = []
    for row in golden:
        document = str(row.get("doc_id") or "")
        rows.append(
            {
                "question_set": question_set(row),
                "document": document,
                "folder": posixpath.dirname(document) or ".",
                "length_bucket": length_bucket(row["question"]),
            }
        )
    return pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
