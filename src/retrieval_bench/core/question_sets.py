"""The golden set's question sets and kinds: which set a row belongs to, the names the golden set
keeps for itself, which set is the reference the others are judged against, and a row's kind. One place for the
golden set that writes the rows, the params that name imported sets, and the leaderboard and
certificate that read them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError

HANDWRITTEN, REAL, GENERATED, ALL = "hand-written", "real", "generated", "all"
# A row's `source` -> its question set when the row names none; any other source was generated.
SOURCE_SETS = {"hand-written": HANDWRITTEN, "qrels": REAL}
# Names no imported set (generate.imported) may take: the golden set's own, and the leaderboard's whole set.
RESERVED = (REAL, HANDWRITTEN, GENERATED, ALL)
REFERENCE_SETS = (REAL, HANDWRITTEN)  # the first present is the reference: the headline's and the certificate's
# A question's kind: what it needs of the corpus (one passage, several, none, or a search-box query).
QUESTION_KINDS = ("single", "multi", "unanswerable", "keyword")
SINGLE, MULTI, UNANSWERABLE, KEYWORD = QUESTION_KINDS
# The kinds a question's wording tells (generate.kind_classifier llm): whether the corpus answers it
# (unanswerable) is a fact of its labels, not of its words.
WORDED_KINDS = (SINGLE, MULTI, KEYWORD)


def kind_of(row: Mapping[str, Any]) -> str:
    """A golden row's kind: single when it says none (a golden set from before kinds)."""
    return str(row.get("kind") or SINGLE)


def question_set_of(row: Mapping[str, Any]) -> str:
    """The row's own `question_set` (an imported set's name) when it has one, else by its source:
    hand-written (the user's own questions), real (labelled queries: qrels, BEIR) or generated."""
    return str(row.get("question_set") or SOURCE_SETS.get(str(row.get("source")), GENERATED))


def reference_set(present: Iterable[str]) -> str | None:
    """The reference question set among those `present`: real queries, else hand-written ones."""
    present = set(present)
    return next((name for name in REFERENCE_SETS if name in present), None)


def check_handwritten(path: str | Path) -> Path:
    """generate.handwritten as a path, or one InputError when no such file is there: check_params
    says so before `dvc repro` runs a stage (DVC would run load_chunks and chunk first), and
    generate_goldenset before it reads (a mistyped path must not plan, or pay for, questions as if
    there were none; an empty file holds none)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(
            f"generate.handwritten: {path}: no such file (name an existing file; an empty one holds no questions)"
        )
    return path
