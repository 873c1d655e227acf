"""The reply parsers of the question kinds other than `single` (goldenset.kinds): a search-box
query, a question that needs several passages, and a near-miss question the corpus cannot answer;
and of the kind classifier's reply (a real or hand-written question's kind, kind_label_fields).

Each question kind reads its reply as hygiene.clean_reply reads a question's (preambles, fences,
refusals, several questions: the same rejects), then holds the kind's own fields to its rules; the
classifier's reply is one word, read on its own (kind_label_fields). Whether each
excerpt is in its passage, and whether the corpus might answer a near miss after all, are checked
where the passages are known (goldenset.selection)."""

from __future__ import annotations

import re
from typing import Any

from retrieval_bench.core.question_sets import WORDED_KINDS
from retrieval_bench.llm.checks.hygiene import clean_reply, reply_object, shape_of

MULTI_PIECES = (2, 3)  # a multi-evidence question's excerpts: one from each of its 2-3 passages

REJECT_REASONS = {
    "evidence_pieces": (
        f"a multi-evidence reply without {MULTI_PIECES[0]}-{MULTI_PIECES[1]} non-empty excerpts (a JSON list under "
        "`evidence`), one from each passage"
    ),
    "no_changed_fact": "an unanswerable question's reply without `changed_fact` (what it changed of the passage)",
    "no_kind": f'a kind classifier\'s reply naming no kind of {", ".join(WORDED_KINDS)} (as {{"kind": ...}} or alone)',
}
_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_BARE_WORD = re.compile(r"[\s\"'*`.:]*(?:kind[\s\"'*`:=]*)?([a-z]+)[\s\"'*`.]*", re.IGNORECASE)


def keyword_fields(text: str, stop_reason: str | None) -> dict[str, Any]:
    """A search-box query's fields: `query` (or `question`) of 2-6 words, and its evidence excerpt."""
    cleaned = clean_reply(text, stop_reason, shape_of("keyword"))
    return {"question": cleaned.question, "evidence": cleaned.evidence, "rejected": cleaned.rejected}


def multi_fields(text: str, stop_reason: str | None) -> dict[str, Any]:
    """A multi-evidence question's fields: the question, `evidence` (the first excerpt, as a
    single question's) and `evidence_pieces` (one excerpt per passage, in the passages' order)."""
    cleaned = clean_reply(text, stop_reason)
    fields: dict[str, Any] = {"question": cleaned.question, "evidence": "", "evidence_pieces": []}
    if cleaned.rejected is not None:
        return {**fields, "rejected": cleaned.rejected}
    value = (reply_object(text) or {}).get("evidence")
    texts = value if isinstance(value, list) and all(isinstance(piece, str) for piece in value) else []
    pieces = [" ".join(piece.split()) for piece in texts]
    if not (all(pieces) and MULTI_PIECES[0] <= len(pieces) <= MULTI_PIECES[1]):
        return {**fields, "rejected": "evidence_pieces"}
    return {**fields, "evidence": pieces[0], "evidence_pieces": pieces, "rejected": None}


def unanswerable_fields(text: str, stop_reason: str | None) -> dict[str, Any]:
    """A near-miss question's fields: the question, `evidence` (the passage's fact it changed,
    quoted) and `changed_fact` (what the question assumes instead), which must be said."""
    cleaned = clean_reply(text, stop_reason)
    changed = (reply_object(text) or {}).get("changed_fact")
    changed = " ".join(changed.split()) if isinstance(changed, str) else ""
    fields = {"question": cleaned.question, "evidence": cleaned.evidence, "changed_fact": changed}
    if cleaned.rejected is None and not changed:
        return {**fields, "rejected": "no_changed_fact"}
    return {**fields, "rejected": cleaned.rejected}


def kind_label_fields(text: str, stop_reason: str | None) -> dict[str, Any]:
    """The kind classifier's fields: `kind`, one of WORDED_KINDS, from {"kind": ...} or a reply
    that is the word alone ("multi", "Kind: multi"); `question` is null (the record's context
    names the question). An empty reply, or one cut at max_tokens before its kind, is rejected as
    hygiene's empty / truncated; any other reply without a kind as no_kind."""
    body = _THINKING.sub("", text or "").strip()
    fields: dict[str, Any] = {"question": None, "kind": None}
    if not body:
        return {**fields, "rejected": "truncated" if stop_reason == "max_tokens" else "empty"}
    said = (reply_object(body) or {}).get("kind")
    bare = _BARE_WORD.fullmatch(body)
    word = said if isinstance(said, str) else bare.group(1) if bare else ""
    kind = word.strip().lower()
    if kind in WORDED_KINDS:
        return {**fields, "kind": kind, "rejected": None}
    return {**fields, "rejected": "truncated" if stop_reason == "max_tokens" else "no_kind"}
