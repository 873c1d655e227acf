"""Reply hygiene: the one question (and quoted evidence) in a model's reply, cleaned, or the
reason the reply is rejected. The parser of the question-writing task (tasks.QUESTIONS).

A rejected reply is cached all the same (with its reason, its text cut: llm.cache.replies.raw_for_cache),
so a refusal is not paid for on every run; the golden-set build asks the passage again or moves
on (goldenset.selection).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from retrieval_bench.core.question_form import reads_as_question


@dataclass(frozen=True)
class Shape:
    """What a usable reply's question looks like: its length in words, and whether it must read as
    a question ('?' or an interrogative opening); the reasons a reply outside it is rejected for."""

    min_words: int
    max_words: int
    asks: bool
    too_short: str = "too_short"
    too_long: str = "too_long"

    @property
    def max_chars(self) -> int:
        """The most characters its words may hold: 10 words of 6,000 characters were kept."""
        return max(100, 12 * self.max_words)


QUESTION_SHAPE = Shape(3, 60, asks=True)
# A search-box query (question kind keyword): 2-6 words, a question or not.
KEYWORD_SHAPE = Shape(2, 6, asks=False, too_short="keyword_too_short", too_long="keyword_too_long")


def shape_of(kind: str) -> Shape:
    """The reply shape a question kind is held to: a search-box query for `keyword`, else a question."""
    return KEYWORD_SHAPE if kind == "keyword" else QUESTION_SHAPE


def length_reason(question: str, shape: Shape) -> str | None:
    """Why `question` is too short or too long for `shape` (its words, its characters), or None:
    clean_reply's rule, asked again of a cached reply (accepted under an earlier limit)."""
    n_words = len(question.split())
    if n_words < shape.min_words:
        return shape.too_short
    if n_words > shape.max_words or len(question) > shape.max_chars:
        return shape.too_long
    return None


@dataclass(frozen=True)
class Cleaned:
    question: str
    evidence: str
    rejected: str | None  # the reason, or None for a usable question


# A question, its evidence excerpt and the JSON around them are well under this; a longer reply is
# rejected before it is parsed (parsing megabytes of text is slow and proves nothing).
MAX_REPLY_CHARS = 20_000

REJECT_REASONS = {
    "truncated": "the reply hit max_tokens (stop_reason max_tokens)",
    "refusal": "the model refused or said the passage cannot be asked about",
    "empty": "no question in the reply",
    "several_questions": "more than one question in the reply",
    "malformed_json": (
        "the reply looks like JSON but is not one valid object with a question (or holds an escape of no character)"
    ),
    "control_characters": "the question holds control characters (a NUL, an escape sequence, a bell)",
    "too_short": f"fewer than {QUESTION_SHAPE.min_words} words",
    "too_long": (
        f"more than {QUESTION_SHAPE.max_words} words (or {QUESTION_SHAPE.max_chars} characters): not a search query"
    ),
    "not_a_question": "a statement or command, not a question (no '?' and no interrogative opening)",
    "schema_mismatch": "not one JSON object of the reply schema (generate.response_format json_schema)",
    "oversize": f"over {MAX_REPLY_CHARS:,} characters outside <think> blocks: not one question and its excerpt",
    "too_deep": "JSON nested too deep to read: expected one flat object {question, evidence}",
    "keyword_too_short": f"a keyword query of fewer than {KEYWORD_SHAPE.min_words} words",
    "keyword_too_long": (
        f"a keyword query of more than {KEYWORD_SHAPE.max_words} words (or {KEYWORD_SHAPE.max_chars} characters): "
        "not what a search box gets"
    ),
}

_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_PREAMBLE = re.compile(
    r"""^\s*(?:
        (?:sure|okay|ok|certainly|of\ course)[\s,!.:-]*        # "Sure! ..."
      | here(?:'s|\ is|\ are)\b[^:\n?]{0,60}:\s*               # "Here is a question:" / "Here's one user question:"
      | (?:generated\ |user\ |search\ )?(?:question|query|q)\s*\d*\s*[:.)\-]\s*   # "Question:" "Q1." "Query -"
      | \*\*(?:question|query)\s*\d*\s*[:.]?\*\*\s*[:\-]?\s*     # "**Question:**" "**Question**:"
      | (?:\d{1,2}\s*[.)]|[-*•]|\#{1,6})\s+                     # "1. " "2) " "- " "# "
    )""",
    re.IGNORECASE | re.VERBOSE,
)
_QUOTES = [('"', '"'), ("'", "'"), ("“", "”"), ("‘", "’"), ("`", "`"), ("«", "»"), ("**", "**"), ("*", "*")]
_REFUSAL = re.compile(
    r"""^(?:i\s*(?:'m|am)\s+(?:sorry|unable|not\ able)|i\s+(?:can(?:not|'t)|won't|will\ not|apologi[sz]e|do\ not|don't)\b
        |sorry\b|as\ an\ ai\b|unfortunately\b|apologies\b)
      |\b(?:the\ passage|this\ passage|the\ text)\s+(?:does\ not|doesn't)\s+(?:contain|provide|include|have)\b
      |\bnot\ enough\ (?:information|context)\b|\bno\ (?:meaningful\ )?question\ can\b""",
    re.IGNORECASE | re.VERBOSE,
)
_JSON_START = re.compile(r"[\[{]")
_JSON_LOOKALIKE = re.compile(r"""[{\[]\s*["'](?:question|questions|query|evidence)["']\s*:""", re.IGNORECASE)
_FENCE_MARK = re.compile(r"```[a-zA-Z]*")
# Invisible characters are dropped from questions (they can hide text or reverse its display);
# zero-width joiners stay, some scripts need them.
_QUESTION_INVISIBLE = re.compile("[\u00ad\u180e\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")


def _strip_wrappers(text: str) -> str:
    """Strip preambles, numbering, bullet marks and enclosing quotes until nothing changes."""
    previous = None
    while text != previous:
        previous = text
        text = _PREAMBLE.sub("", text, count=1).strip()
        for left, right in _QUOTES:
            if len(text) > len(left) + len(right) and text.startswith(left) and text.endswith(right):
                inner = text[len(left) : len(text) - len(right)]
                balanced = inner.count(left) % 2 == 0 if left == right else inner.count(left) == inner.count(right)
                if balanced:
                    text = inner.strip()
        text = text.strip()
    return text


def _json_values(text: str) -> tuple[list[Any], str]:
    """Every JSON object (or list of objects or strings) in `text`, in order, and the text around
    them. Nested values count once: the scan resumes after each value it decodes."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    outside: list[str] = []
    position = 0
    while True:
        match = _JSON_START.search(text, position)
        if match is None:
            break
        try:
            value, end = decoder.raw_decode(text, match.start())
        except json.JSONDecodeError:
            outside.append(text[position : match.start() + 1])
            position = match.start() + 1
            continue
        usable = (
            isinstance(value, dict)
            or (isinstance(value, list) and value and all(isinstance(v, (dict, str)) for v in value))
        ) and _is_text(value)
        if usable:
            values.append(value)
            outside.append(text[position : match.start()])
        else:
            outside.append(text[position:end])
        position = end
    outside.append(text[position:])
    return values, "".join(outside)


# Control characters but the line breaks and tab a reply's lines are split and spaced on.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def _is_text(value: Any) -> bool:
    """Whether a decoded JSON value holds text only: a \\ud800 escape without its pair decodes to a
    lone surrogate, which no UTF-8 file holds (the cache's checksum failed on it, on every rerun)."""
    try:
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _split_questions(text: str) -> list[str]:
    """Question sentences: split after '?' where the next text starts a new sentence."""
    parts = [p.strip() for p in re.split(r"(?<=\?)\s+(?=[\"'“(]?[A-Z0-9])", text) if p.strip()]
    return [p for p in parts if len(p.split()) >= 3] or parts


def reply_object(raw: str) -> dict | None:
    """The one JSON object of a reply (outside <think> blocks), or None when it holds not exactly
    one: what a kind whose reply has more fields than question and evidence reads them from."""
    text = _THINKING.sub("", raw or "").strip()
    if len(text) > MAX_REPLY_CHARS:
        return None
    try:
        values, _ = _json_values(text)
    except RecursionError:
        return None
    return values[0] if len(values) == 1 and isinstance(values[0], dict) else None


def clean_reply(raw: str, stop_reason: str | None = None, shape: Shape = QUESTION_SHAPE) -> Cleaned:
    """The question and evidence in a reply, cleaned, or the reason to reject it.

    The expected reply is {"question": ..., "evidence": ...}: exactly one JSON object, in a code
    fence or after a preamble if need be. Two objects, or a list of several, are several
    questions; something that looks like JSON but does not decode as one object is
    malformed_json (its braces never become part of a question). A bare question without JSON is
    accepted (then without evidence). Preambles ("Here is a question:"), numbering, bullets and
    enclosing quotes are stripped; replies over MAX_REPLY_CHARS (oversize), JSON nested too deep
    to read (too_deep), empty replies, refusals, several questions, truncated replies
    (stop_reason max_tokens), replies that are not a plausible search query (`shape`: under 3 or
    over 60 words) and statements (no '?', no interrogative opening; a keyword query need not ask)
    are rejected. Whether the evidence is in the passage is checked where the passage is known
    (selection.walk)."""
    text = _THINKING.sub("", raw or "").strip()  # reasoning models served locally think out loud first
    if stop_reason in ("max_tokens", "length"):
        return Cleaned("", "", "truncated")
    if stop_reason == "refusal":
        return Cleaned("", "", "refusal")
    if len(text) > MAX_REPLY_CHARS:
        return Cleaned("", "", "oversize")
    try:
        values, outside = _json_values(text)
    except RecursionError:  # json's C decoder stops at Python's recursion limit, cleanly
        return Cleaned("", "", "too_deep")
    items: list[Any] = []
    for value in values:
        items.extend([value] if isinstance(value, dict) else [v for v in value if v])
    if len(items) > 1:
        return Cleaned("", "", "several_questions")
    if items:
        found = _question_in(items[0], outside)
        if isinstance(found, Cleaned):
            return found
        question, evidence = found
    elif _JSON_LOOKALIKE.search(text) or text.startswith("{"):
        return Cleaned("", "", "malformed_json")
    else:
        question, evidence = text, ""
    return _checked(question, evidence, text, shape)


def _question_in(item: Any, outside: str) -> tuple[str, str] | Cleaned:
    """(question, evidence) of the one JSON value a reply holds (`outside`: the reply's text
    around it), or the reason to reject the reply."""
    evidence = ""
    if isinstance(item, dict):
        if isinstance(item.get("questions"), list):
            if len(item["questions"]) > 1:
                return Cleaned("", "", "several_questions")
            item = {"question": (item["questions"] or [""])[0], "evidence": item.get("evidence", "")}
        question = item.get("question") or item.get("query") or ""
        if isinstance(question, list):
            if len(question) > 1:
                return Cleaned("", "", "several_questions")
            question = question[0] if question else ""
        if not isinstance(question, str):
            return Cleaned("", "", "malformed_json")
        evidence = item.get("evidence") or ""
        evidence = evidence if isinstance(evidence, str) else ""
    else:
        question = item
    prose = _FENCE_MARK.sub("", outside)
    if "?" in prose:  # a question outside the object as well
        return Cleaned("", "", "several_questions")
    return question, evidence


def _checked(question: str, evidence: str, text: str, shape: Shape) -> Cleaned:
    """The question's wrappers stripped and its shape checked (one plausible search question)."""
    question = _QUESTION_INVISIBLE.sub("", question)
    if _CONTROL.search(question):  # a NUL, an escape sequence, a bell: printed later to terminals
        return Cleaned("", "", "control_characters")
    lines = [_strip_wrappers(line) for line in question.splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return Cleaned("", "", "refusal" if _REFUSAL.search(text) else "empty")
    asking = [line for line in lines if "?" in line]
    if len(asking) > 1:
        return Cleaned("", "", "several_questions")
    if len(lines) > 1:
        # One question among explanation lines: keep the question; several statements: ambiguous.
        if not asking:
            return Cleaned("", "", "several_questions")
        lines = asking
    question = " ".join(lines[0].split())
    evidence = " ".join(_strip_wrappers(evidence).split()) if evidence else ""
    if _REFUSAL.search(question):
        return Cleaned("", evidence, "refusal")
    if len(_split_questions(question)) > 1:
        return Cleaned("", evidence, "several_questions")
    length = length_reason(question, shape)
    if length == shape.too_short:
        return Cleaned(question, evidence, length)
    if length is not None:
        return Cleaned("", evidence, length)
    if shape.asks and not reads_as_question(question):
        return Cleaned(question, evidence, "not_a_question")
    return Cleaned(question, evidence, None)
