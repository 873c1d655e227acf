"""Where a question's evidence lies: an excerpt in a document (hand-written questions) or in the
passage a model was shown (generated ones).

A generated question's evidence is looked for only in the passage that was sent, never elsewhere
in its document, where a chunk's text could steer it. An excerpt a model quotes back from the
escaped passage (retrieval_bench.llm.passage_escape) still matches the original.
"""

from __future__ import annotations

import re

from retrieval_bench.llm.passage_escape import INVISIBLE_CHARS, unescape_passage

_MATCH_QUOTES = {ord(c): '"' for c in "“”„‟«»″〝〞＂"} | {ord(c): "'" for c in "‘’‚‛′‹›`´＇"}
_INVISIBLE = re.compile(f"[{INVISIBLE_CHARS}\u200c\u200d]")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.+|…|\[\.\.\.\]|\[…\])\s*")


def _match_form(text: str) -> tuple[str, list[int]]:
    """`text` lowercased, quotes unified, invisible characters dropped and whitespace runs made one
    space, with the index in `text` of every character of the result."""
    out: list[str] = []
    where: list[int] = []
    for index, char in enumerate(text):
        if _INVISIBLE.match(char):
            continue
        if char.isspace():
            if out and out[-1] != " ":
                out.append(" ")
                where.append(index)
            continue
        for lowered in char.translate(_MATCH_QUOTES).lower():
            out.append(lowered)
            where.append(index)
    return "".join(out), where


def locate_in_passage(evidence: str, passage: str) -> tuple[int, int] | None:
    """The span [start, end) of `evidence` in `passage`, comparing both with case, quotes (curly or
    straight), whitespace and invisible characters normalised; an excerpt a model quoted back from
    an escaped passage (escape_passage) matches the original text, and an excerpt elided with
    '...' matches its pieces in order. None if it is not there (or is empty)."""
    evidence = unescape_passage(evidence or "")
    pieces = [p for p in (_match_form(piece)[0].strip(" .,;:") for piece in _ELLIPSIS.split(evidence)) if p]
    if not pieces:
        return None
    haystack, where = _match_form(passage)
    position, start = 0, None
    for piece in pieces:
        found = haystack.find(piece, position)
        if found < 0:
            return None
        start = found if start is None else start
        position = found + len(piece)
    return where[start], where[position - 1] + 1


def evidence_in_passage(evidence: str, passage: str) -> bool:
    """Whether the excerpt a reply quotes is in the passage that was sent (see locate_in_passage).
    An empty excerpt is not: the caller decides what no evidence means (selection.walk anchors
    such a question to its whole passage)."""
    return locate_in_passage(evidence, passage) is not None


def evidence_text(evidence: str, passage_text: str) -> str:
    """The part of `passage_text` a generated reply quotes as its evidence, else the whole passage."""
    span = locate_in_passage(evidence, passage_text)
    return passage_text[span[0] : span[1]] if span else passage_text


# --------------------------------------------------------------------------------------------
# Evidence in a document
# --------------------------------------------------------------------------------------------
def locate_evidence(document: str, excerpt: str, near: int = 0) -> tuple[int, int] | None:
    """The span of `excerpt` in `document`: exact match first (the one nearest `near`), then a
    match that ignores case and differences in whitespace; None if neither is found."""
    excerpt = excerpt.strip()
    if not excerpt:
        return None
    exact = [m.start() for m in re.finditer(re.escape(excerpt), document)]
    if exact:
        start = min(exact, key=lambda s: abs(s - near))
        return start, start + len(excerpt)
    pattern = r"\s+".join(re.escape(word) for word in excerpt.split())
    loose = list(re.finditer(pattern, document, flags=re.IGNORECASE))
    if loose:
        match = min(loose, key=lambda m: abs(m.start() - near))
        return match.start(), match.end()
    return None
