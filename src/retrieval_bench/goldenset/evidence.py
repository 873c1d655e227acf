"""Where a question's evidence lies: an excerpt in a document (hand-written questions) or in the
passage a model was shown (generated ones), and the passage tags that keep a passage data.

A generated question's evidence is looked for only in the passage that was sent, never elsewhere
in its document, where a chunk's text could steer it. A passage goes into the prompt between
<passage> and </passage>; escape_passage keeps any text in it from reading as one of those tags,
and an excerpt a model quotes back from the escaped text still matches the original.
"""
from __future__ import annotations

import re

# --------------------------------------------------------------------------------------------
# The passage inside the prompt: data, never instructions or delimiters
# --------------------------------------------------------------------------------------------
# Characters that render as nothing (zero-width, soft hyphen, bidi controls, BOM): text that hides
# them inside a tag name still reads as that tag to a model.
_INVISIBLE_CHARS = "\u00ad\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff"
_IGNORABLE = f"[{_INVISIBLE_CHARS}]*"
_GAP = f"[\\s{_INVISIBLE_CHARS}]*"
_TAG_TAIL = _GAP + "/?" + _GAP + _IGNORABLE.join("passage") + r"(?![A-Za-z0-9_\-])"
# An opening or closing <passage> tag, however spaced, cased or interleaved with invisible characters.
_DELIMITER = re.compile(r"[<\uff1c\ufe64](?=" + _TAG_TAIL + ")", re.IGNORECASE)
_ESCAPED_DELIMITER = re.compile(r"&(lt|#x[0-9a-f]{4});(?=" + _TAG_TAIL + ")", re.IGNORECASE)


def escape_passage(passage: str) -> str:
    """The passage as it is put between the prompt's <passage> and </passage>: every '<' (or
    full-width look-alike) that starts something a model could read as one of those tags becomes
    an HTML entity ('&lt;'), so no chunk can close the block (its text would stand outside it, as
    instructions) or open a fake one. Any other passage is returned unchanged, so its prompt and
    cache key are what they always were."""
    return _DELIMITER.sub(lambda m: "&lt;" if m.group() == "<" else f"&#x{ord(m.group()):04x};", passage)


def unescape_passage(text: str) -> str:
    """Undo escape_passage (for text a model quotes back from an escaped passage)."""
    return _ESCAPED_DELIMITER.sub(lambda m: "<" if m.group(1).lower() == "lt" else chr(int(m.group(1)[2:], 16)), text)


# --------------------------------------------------------------------------------------------
# Evidence in the passage that was sent
# --------------------------------------------------------------------------------------------
_MATCH_QUOTES = {ord(c): '"' for c in "“”„‟«»″〝〞＂"} | {ord(c): "'" for c in "‘’‚‛′‹›`´＇"}
_INVISIBLE = re.compile(f"[{_INVISIBLE_CHARS}\u200c\u200d]")
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
    return passage_text[span[0]:span[1]] if span else passage_text


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

