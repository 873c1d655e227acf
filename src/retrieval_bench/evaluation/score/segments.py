"""The segments a question belongs to, carried by every per-question row so that a verdict can be
broken down: its question set (origin), kind (single, multi, unanswerable, keyword), source
document, the document's folder, and its length.
The tests over them are segment_tests.py's (kept apart: scoring needs only the tags)."""

from __future__ import annotations

import posixpath

import pandas as pd

from retrieval_bench.core.question_sets import kind_of, question_set_of

SEGMENT_COLUMNS = ["question_set", "kind", "document", "folder", "length_bucket"]
LENGTH_BUCKETS = ((8, "short (<= 8 words)"), (15, "medium (9-15 words)"))
LONG = "long (16+ words)"


question_set = question_set_of  # the segment a row's origin puts it in


def length_bucket(question: str) -> str:
    n = len(question.split())
    return next((name for limit, name in LENGTH_BUCKETS if n <= limit), LONG)


def segments(golden: list[dict]) -> pd.DataFrame:
    """One row per golden row, in order: the SEGMENT_COLUMNS (an unanswerable question's document
    is the one it was written near; document and folder missing when the row names none, e.g. a
    labelled query with several relevant chunks: in no segment, as per_question.csv reads back)."""
    rows = []
    for row in golden:
        named = row.get("doc_id") or row.get("near_doc_id")
        document = str(named) if named else None
        rows.append(
            {
                "question_set": question_set(row),
                "kind": kind_of(row),
                "document": document,
                "folder": (posixpath.dirname(document) or ".") if document else None,
                "length_bucket": length_bucket(row["question"]),
            }
        )
    return pd.DataFrame(rows, columns=SEGMENT_COLUMNS)
