"""Where a question's evidence lies: an excerpt in a document (hand-written questions: whatever
its spacing, and when it is not there, the document's nearest text, to name it by) or in the
passage a model was shown (generated ones).

A generated question's evidence is looked for only in the passage that was sent, never elsewhere
in its document, where a chunk's text could steer it. An excerpt a model quotes back from the
escaped passage (retrieval_bench.llm.checks.passage_escape) still matches the original.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Mapping

from retrieval_bench.core.errors import quoted
from retrieval_bench.llm.checks.passage_escape import INVISIBLE_CHARS, unescape_passage

_MATCH_QUOTES = {ord(c): '"' for c in "“”„‟«»″〝〞＂"} | {ord(c): "'" for c in "‘’‚‛′‹›`´＇"}
_INVISIBLE = re.compile(f"[{INVISIBLE_CHARS}\u200c\u200d]")
_ELLIPSIS = re.compile(r"\s*(?:\.\.\.+|…|\[\.\.\.\]|\[…\])\s*")


def _match_form(text: str) -> tuple[str, list[int]]:
    """`text` lowercased, quotes unified, accents decomposed (NFD: "é" typed or pasted matches either
    form), invisible characters dropped and whitespace runs made one space, with the index in `text`
    of every character of the result."""
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
        for lowered in unicodedata.normalize("NFD", char.translate(_MATCH_QUOTES).lower()):
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
    assert start is not None  # set by the first of the pieces (there is one)
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
    match that ignores case, curly or straight quotes, the spacing between words and around
    punctuation (loose_pattern) and the Unicode form (NFC or NFD); None if neither is found. The span is the document's own text."""
    excerpt = excerpt.strip()
    if not excerpt:
        return None
    exact = [m.start() for m in re.finditer(re.escape(excerpt), document)]
    if exact:
        start = min(exact, key=lambda s: abs(s - near))
        return start, start + len(excerpt)
    # Then in either Unicode form: text copied from a rendered page is mostly NFC, a file may be NFD.
    for form in dict.fromkeys([excerpt, unicodedata.normalize("NFC", excerpt), unicodedata.normalize("NFD", excerpt)]):
        loose = list(re.finditer(loose_pattern(form), document, flags=re.IGNORECASE))
        if loose:
            match = min(loose, key=lambda m: abs(m.start() - near))
            return match.start(), match.end()
    return None


_TOKEN = re.compile(r"\w+|[^\w\s]")
_QUOTE_CLASS = {
    target: "[" + re.escape(target + "".join(chr(c) for c, t in _MATCH_QUOTES.items() if t == target)) + "]"
    for target in set(_MATCH_QUOTES.values())
}


def loose_pattern(excerpt: str) -> str:
    """A regex for `excerpt` whatever the whitespace between its words (runs of spaces, line breaks)
    and around its punctuation: evidence copied as "INSERT , even" finds the page's "INSERT, even".
    Two words still need some whitespace between them."""
    tokens = _TOKEN.findall(excerpt)
    parts = []
    # Each token with the one before it: the first list is one longer, its last item left over.
    for previous, token in zip([None, *tokens], tokens, strict=False):
        if previous is not None:
            parts.append(r"\s+" if _is_word(previous) and _is_word(token) else r"\s*")
        quote = token.translate(_MATCH_QUOTES)
        parts.append(_QUOTE_CLASS[quote] if quote in _QUOTE_CLASS else re.escape(token))
    return "".join(parts)


def _is_word(token: str) -> bool:
    return token[0].isalnum() or token[0] == "_"


_WORD = re.compile(r"\w+")


def nearest_text(document: str, excerpt: str) -> tuple[int, str]:
    """(words shared, text) of the stretch of `document` most like `excerpt`: of the windows of as
    many words, the first sharing the most words with it (to show where evidence that is not
    there went astray)."""
    wanted = Counter(word.lower() for word in _WORD.findall(excerpt))
    words = [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(document)]
    size = sum(wanted.values())
    window: Counter[str] = Counter()
    shared, best, best_start = 0, 0, 0
    for i, (word, _, _) in enumerate(words):
        window[word] += 1
        shared += window[word] <= wanted[word]
        if i >= size:  # the word leaving the window
            leaving = words[i - size][0]
            shared -= window[leaving] <= wanted[leaving]
            window[leaving] -= 1
        if shared > best:
            best, best_start = shared, max(0, i - size + 1)
    if not best:
        return 0, ""
    last = words[min(best_start + size, len(words)) - 1]
    return best, " ".join(document[words[best_start][1] : last[2]].split())


UNLOCATED_NAMED = 10  # the questions a run names whose evidence is not found (the rest are counted)


def not_located_line(record: dict, texts: Mapping[str, str]) -> str:
    """One line naming a question whose evidence is not in its document (or in any, without a
    doc_id): where it is written, its qid, and the text of the document nearest its evidence."""
    doc_id = record.get("doc_id")
    candidates = [doc_id] if doc_id is not None else sorted(texts)
    shared, nearest, found_in = max(
        ((*nearest_text(texts[c], record["evidence"]), c) for c in candidates), key=lambda found: found[0]
    )
    qid = f"qid {record['qid']}" if record.get("qid") is not None else f"question {quoted(record['question'], 80)}"
    place = doc_id if doc_id is not None else "any document"
    near = f"nearest text (in {found_in}): {quoted(nearest, 160)}" if shared else f"no word of it is in {place}"
    where = record.get("where", "a hand-written question")
    return f"{where}: {qid}: evidence {quoted(record['evidence'], 80)} not found in {place}; {near}"
