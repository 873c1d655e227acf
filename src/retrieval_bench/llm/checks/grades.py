"""Reply hygiene of the relevance-judging task (tasks.JUDGE): the one 0-3 grade in a judge's
reply, or the reason the reply is rejected.

The prompt (data/judge_prompt.txt, UMBRELA-style) asks for `##final score: N` and nothing else.
Accepted as well: a reply that is only the digit, a JSON object with one of the keys O, score,
grade, final_score or relevance (Thomas et al.'s Bing prompt answers {"M": .., "T": .., "O": ..}),
and any of these after a <think> block or inside a code fence; the intermediate M and T scores of
the Bing-style answer are ignored. A reply cut at max_tokens is used if its final score is
already there. Rejected (cached with the reason, so a refusal is not paid for on every run, and
asked again up to judge.max_attempts times): no grade, several different final grades, a grade
outside 0-3, a refusal, an empty reply.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

MAX_GRADE = 3

REJECT_REASONS = {
    "empty": "an empty reply",
    "refusal": "the model refused to grade",
    "no_grade": "no final score in the reply",
    "several_grades": "different final scores in one reply",
    "out_of_range": "a final score outside 0-3",
    "truncated": "the reply hit max_tokens before its final score",
    "schema_mismatch": "not one JSON object of the reply schema (judge.response_format json_schema)",
}

_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_UNCLOSED_THINKING = re.compile(r"<think(?:ing)?>.*", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```[a-zA-Z]*")
_FINAL = re.compile(r"final\s*(?:score|grade)\s*\**\s*(?:\(O\))?\s*[:=\-]?\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE)
_O_LINE = re.compile(r"^\s*\**O\**\s*[:=]\s*\**\s*(-?\d+(?:\.\d+)?)", re.IGNORECASE | re.MULTILINE)
_BARE = re.compile(r"^\s*[\"'*`(\[]*\s*(-?\d+(?:\.\d+)?)\s*[\"'*`)\].]*\s*$")
_JSON = re.compile(r"\{.*\}", re.DOTALL)
_JSON_KEYS = ("O", "o", "final_score", "score", "grade", "relevance")
_REFUSAL = re.compile(
    r"^\s*(?:i\s*(?:'m|am)\s+(?:sorry|unable)|i\s+(?:can(?:not|'t)|won't|will\s+not)\b|sorry\b|as\s+an\s+ai\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Graded:
    grade: int | None
    rejected: str | None  # the reason, or None for a usable grade


def _number(text: str) -> int | float:
    value = float(text)
    return int(value) if value.is_integer() else value


def _from_json(text: str) -> list[int | float]:
    match = _JSON.search(text)
    if not match:
        return []
    try:
        data = json.loads(match.group())
    except (json.JSONDecodeError, RecursionError):  # broken, or nested too deep to read: no grade there
        return []
    if not isinstance(data, dict):
        return []
    for key in _JSON_KEYS:
        value = data.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return [_number(str(value))]
        if isinstance(value, str) and re.fullmatch(r"\s*-?\d+(?:\.\d+)?\s*", value):
            return [_number(value)]
    return []


def parse_grade(text: str, stop_reason: str | None = None) -> Graded:
    """The grade in a judge's reply, or why there is none."""
    body = _UNCLOSED_THINKING.sub("", _THINKING.sub("", text or "")).strip()
    body = _FENCE.sub("", body).strip()
    if not body:
        return Graded(None, "truncated" if stop_reason == "max_tokens" else "empty")
    found = (
        [_number(m) for m in _FINAL.findall(body)] or _from_json(body) or [_number(m) for m in _O_LINE.findall(body)]
    )
    if not found:
        bare = _BARE.match(body)
        found = [_number(bare.group(1))] if bare else []
    if not found:
        if _REFUSAL.search(body):
            return Graded(None, "refusal")
        return Graded(None, "truncated" if stop_reason == "max_tokens" else "no_grade")
    if len(set(found)) > 1:
        return Graded(None, "several_grades")
    grade = found[0]
    if not isinstance(grade, int) or not 0 <= grade <= MAX_GRADE:
        return Graded(None, "out_of_range")
    return Graded(grade, None)
