"""Generate questions with an LLM: providers, the cost estimate and guard, output hygiene.

Providers (generate.provider):

- ``anthropic``: the Messages API, ``generate.concurrency`` requests at a time (AsyncAnthropic
  and a semaphore). The SDK retries 429/5xx/connection errors ``generate.max_retries`` times and
  honours retry-after(-ms); on top of that one shared pause holds back every worker after a 429,
  529 or 503, so they do not all hammer a rate-limited API.
- ``anthropic-batch``: the Message Batches API (half price, results within 24 h). Requests go in
  batches of at most 10,000, custom_id = the cache key; each batch id is written to the journal
  (data/question_cache.batches.jsonl) before waiting, so a rerun after a crash resumes polling
  instead of submitting again. Errored, expired and canceled requests stay uncached and are
  submitted again by the next run.
- ``openai-compatible``: chat completions through the openai SDK at ``generate.base_url`` (vLLM,
  Ollama, a llama.cpp server, or OpenAI itself).
- ``none``: no calls; the question cache and hand-written questions only.

API keys come only from the environment (ANTHROPIC_API_KEY, OPENAI_API_KEY) and are never
written anywhere; ANTHROPIC_BASE_URL / OPENAI_BASE_URL are honoured as the SDKs do. A key is
sent only where its user pointed it (retrieval_bench.llm.credentials): a generate.base_url from
params.yaml that is neither loopback nor vouched for by the user is refused while a key is set.

Only model replies are cached (including replies rejected by the hygiene rules, so a refusal is
not paid for on every run); a request the API failed is never cached and is asked again.

Faults end in one line: an endpoint that refuses connections (or cannot be resolved or reached
within CONNECT_TIMEOUT_S) a few times in a row stops the run naming it; a disk too full to keep
the replies in flight stops the run before paying for more; a write that fails anyway cuts the
cache back to its last whole record.

A batch is never paid for twice: its intent (the requests and the sha256 of their keys, which
are also their custom_ids) is journalled and fsynced before `create`, which is called with SDK
retries off. Any outcome that leaves it unknown whether the batch exists (a 5xx, a timeout, a
connection lost after sending, a kill) is reconciled by listing the account's batches created
since the intent and adopting the one with those requests before anything is submitted again.
"""
from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from retrieval_bench.goldenset.cache import (
    CacheWriteError,
    CacheWriter,
    cache_key,
    free_bytes,
    pending_batches,
    pending_intents,
    read_cache,
    read_journal,
)
from retrieval_bench.llm.credentials import Endpoint, anthropic_endpoint, openai_endpoint
from retrieval_bench.io import InputError
from retrieval_bench.params import DEFAULTS

# The family goes into the cache key: sync and batch Anthropic calls return the same kind of reply.
FAMILIES = {"anthropic": "anthropic", "anthropic-batch": "anthropic", "openai-compatible": "openai-compatible"}
BATCH_MAX_REQUESTS = 10_000
REQUEST_TIMEOUT_S = 120.0
CONNECT_TIMEOUT_S = 3.0
# An endpoint is deemed unreachable after this many failed connection attempts in a row spanning
# at least this many seconds (so a momentary blip under high concurrency does not stop a run).
CONNECT_FAILURES = 3
CONNECT_FAILURE_SPAN_S = 1.0
# Free space kept on the cache's disk for the replies in flight: a sync run stops before paying
# for a request when less is free (SPACE_RESERVE_BYTES + this much per request in flight), a
# batch is not created without room for its results.
SPACE_RESERVE_BYTES = 1 << 20
SPACE_PER_REPLY_BYTES = 64 << 10

# The cost estimate. Claude's tokenizer gives about 3.5-4 characters per token on English prose and
# fewer on code, so ceil(chars / 3.5) + a small per-message overhead is a slightly pessimistic count
# of input tokens. A reply (a JSON object with a question and a short excerpt) is about 60-100
# tokens: the estimate assumes EXPECTED_OUTPUT_TOKENS, the upper bound assumes generate.max_tokens.
CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 10
EXPECTED_OUTPUT_TOKENS = 100


# --------------------------------------------------------------------------------------------
# Settings, jobs, replies
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """The generate section of params.yaml that concerns the API calls (defaults: params.DEFAULTS)."""

    provider: str
    model: str
    max_tokens: int
    concurrency: int
    max_retries: int
    base_url: str | None
    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float
    max_cost_usd: float | None
    batch_poll_seconds: float

    @classmethod
    def from_params(cls, params: dict) -> "Settings":
        """From a validated generate section; keys it lacks take their params.DEFAULTS value."""
        params = {**DEFAULTS["generate"], **params}
        price = {**DEFAULTS["generate"]["price"], **params["price"]}
        return cls(
            provider=params["provider"], model=params["model"], max_tokens=params["max_tokens"],
            concurrency=params["concurrency"], max_retries=params["max_retries"], base_url=params["base_url"],
            input_per_mtok=float(price["input_per_mtok"]), output_per_mtok=float(price["output_per_mtok"]),
            batch_discount=float(price["batch_discount"]), max_cost_usd=params["max_cost_usd"],
            batch_poll_seconds=float(params["batch_poll_seconds"]),
        )

    @property
    def family(self) -> str | None:
        return FAMILIES.get(self.provider)

    @property
    def batch(self) -> bool:
        return self.provider == "anthropic-batch"

    def price_factor(self, batch: bool | None = None) -> float:
        return self.batch_discount if (self.batch if batch is None else batch) else 1.0

    def cost(self, input_tokens: float, output_tokens: float, batch: bool | None = None) -> float:
        usd = input_tokens * self.input_per_mtok / 1e6 + output_tokens * self.output_per_mtok / 1e6
        return usd * self.price_factor(batch)


@dataclass(frozen=True)
class Meta:
    """What a cache record says about how it was made (besides the passage)."""

    provider: str
    family: str
    model: str
    prompt_sha256: str
    max_tokens: int


@dataclass(frozen=True)
class Job:
    key: str
    passage_sha256: str
    attempt: int
    prompt: str


@dataclass(frozen=True)
class Reply:
    text: str
    stop_reason: str | None  # normalised to Anthropic's names: end_turn, max_tokens, refusal, ...
    input_tokens: int
    output_tokens: int


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


def render_prompt(template: str, passage: str) -> str:
    """The prompt for one passage: str.replace, so braces elsewhere in the template are literal,
    with the passage escaped (escape_passage)."""
    return template.replace("{passage}", escape_passage(passage))


def make_job(meta: Meta, template: str, passage_text: str, passage_sha256: str, attempt: int) -> Job:
    escaped = escape_passage(passage_text)
    key = cache_key(meta.family, meta.model, meta.prompt_sha256, passage_text, meta.max_tokens, attempt,
                    escaped=escaped != passage_text)
    return Job(key, passage_sha256, attempt, template.replace("{passage}", escaped))


# --------------------------------------------------------------------------------------------
# Evidence: an excerpt of the passage that was sent, or nothing
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


def make_record(meta: Meta, key: str, passage_sha256: str, attempt: int, reply: Reply, provider: str | None = None) -> dict:
    cleaned = clean_reply(reply.text, reply.stop_reason)
    return {
        "key": key,
        "family": meta.family,
        "provider": provider or meta.provider,
        "model": meta.model,
        "prompt_sha256": meta.prompt_sha256,
        "passage_sha256": passage_sha256,
        "max_tokens": meta.max_tokens,
        "attempt": attempt,
        "question": cleaned.question,
        "evidence": cleaned.evidence,
        "rejected": cleaned.rejected,
        "stop_reason": reply.stop_reason,
        "raw": reply.text,
        "usage": {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# --------------------------------------------------------------------------------------------
# Output hygiene
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cleaned:
    question: str
    evidence: str
    rejected: str | None  # the reason, or None for a usable question


REJECT_REASONS = {
    "truncated": "the reply hit max_tokens (stop_reason max_tokens)",
    "refusal": "the model refused or said the passage cannot be asked about",
    "empty": "no question in the reply",
    "several_questions": "more than one question in the reply",
    "malformed_json": "the reply looks like JSON but is not one valid object with a question",
    "too_short": "fewer than 3 words",
    "too_long": "more than 60 words: not a search query",
    "not_a_question": "a statement or command, not a question (no '?' and no interrogative opening)",
    "evidence_not_in_passage": "the quoted evidence is not in the passage that was sent",
    "echo": "the question copies its passage (echo gauge; generate.drop_echo)",
    "duplicate_question": "the same question as for another passage (ambiguous label)",
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
# Openings that make a question without a question mark ("how to enable WAL mode"); a statement
# or a command ("Explain WAL mode.") is not a search question.
_INTERROGATIVES = {
    "how", "what", "what's", "whats", "why", "when", "where", "which", "who", "whom", "whose", "whether",
    "is", "are", "am", "was", "were", "can", "could", "do", "does", "did", "should", "would", "will", "shall",
    "may", "might", "must", "has", "have", "had", "isn't", "aren't", "can't", "cannot", "doesn't", "don't",
    "didn't", "won't", "wouldn't", "shouldn't", "couldn't", "wasn't", "weren't", "hasn't", "haven't",
}
_PREPOSITIONS = {"in", "on", "at", "for", "from", "to", "with", "by", "under", "after", "before", "during", "of"}
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
                inner = text[len(left):len(text) - len(right)]
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
            outside.append(text[position:match.start() + 1])
            position = match.start() + 1
            continue
        usable = isinstance(value, dict) or (
            isinstance(value, list) and value and all(isinstance(v, (dict, str)) for v in value)
        )
        if usable:
            values.append(value)
            outside.append(text[position:match.start()])
        else:
            outside.append(text[position:end])
        position = end
    outside.append(text[position:])
    return values, "".join(outside)


def _split_questions(text: str) -> list[str]:
    """Question sentences: split after '?' where the next text starts a new sentence."""
    parts = [p.strip() for p in re.split(r"(?<=\?)\s+(?=[\"'“(]?[A-Z0-9])", text) if p.strip()]
    return [p for p in parts if len(p.split()) >= 3] or parts


def reads_as_question(question: str) -> bool:
    """Ends with a question mark, or opens like a question ("how to ...", "in which file ...")."""
    if question.rstrip(" \"'”’)»*").endswith(("?", "？")):
        return True
    words = [w.strip("\"'“”‘’(*").replace("’", "'").lower() for w in question.split()[:2]]
    if not words:
        return False
    return words[0] in _INTERROGATIVES or (
        len(words) > 1 and words[0] in _PREPOSITIONS and words[1] in {"what", "which", "whom", "whose", "how"}
    )


def clean_reply(raw: str, stop_reason: str | None = None) -> Cleaned:
    """The question and evidence in a reply, cleaned, or the reason to reject it.

    The expected reply is {"question": ..., "evidence": ...}: exactly one JSON object, in a code
    fence or after a preamble if need be. Two objects, or a list of several, are several
    questions; something that looks like JSON but does not decode as one object is
    malformed_json (its braces never become part of a question). A bare question without JSON is
    accepted (then without evidence). Preambles ("Here is a question:"), numbering, bullets and
    enclosing quotes are stripped; empty replies, refusals, several questions, truncated replies
    (stop_reason max_tokens), replies that are not a plausible search query (under 3 or over 60
    words) and statements (no '?', no interrogative opening) are rejected. Whether the evidence
    is in the passage is checked where the passage is known (selection.walk)."""
    text = _THINKING.sub("", raw or "").strip()  # reasoning models served locally think out loud first
    if stop_reason in ("max_tokens", "length"):
        return Cleaned("", "", "truncated")
    if stop_reason == "refusal":
        return Cleaned("", "", "refusal")
    values, outside = _json_values(text)
    items: list[Any] = []
    for value in values:
        items.extend([value] if isinstance(value, dict) else [v for v in value if v])
    evidence = ""
    if len(items) > 1:
        return Cleaned("", "", "several_questions")
    if items:
        item = items[0]
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
    elif _JSON_LOOKALIKE.search(text) or text.startswith("{"):
        return Cleaned("", "", "malformed_json")
    else:
        question = text
    question = _QUESTION_INVISIBLE.sub("", question)
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
    n_words = len(question.split())
    if n_words < 3:
        return Cleaned(question, evidence, "too_short")
    if n_words > 60:
        return Cleaned("", evidence, "too_long")
    if not reads_as_question(question):
        return Cleaned(question, evidence, "not_a_question")
    return Cleaned(question, evidence, None)


# --------------------------------------------------------------------------------------------
# Cost estimate and guard
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    requests: int
    input_tokens: int
    output_tokens: int  # expected
    output_tokens_max: int  # every reply at max_tokens
    usd: float
    usd_max: float
    batch: bool

    def describe(self, settings: Settings) -> str:
        mode = "batch, half price" if self.batch else "sync"
        return (
            f"{self.requests} requests to {settings.provider} {settings.model} ({mode}): about "
            f"{self.input_tokens:,} input + {self.output_tokens:,} output tokens ~ ${self.usd:.2f} "
            f"(at most ${self.usd_max:.2f} if every reply used max_tokens {settings.max_tokens}) "
            f"at ${settings.input_per_mtok:g}/${settings.output_per_mtok:g} per million input/output tokens"
        )


def estimate_input_tokens(prompt: str) -> int:
    return math.ceil(len(prompt) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def estimate(prompts: Iterable[str], settings: Settings, batch: bool | None = None) -> Estimate:
    """Estimated tokens and USD for sending `prompts` (see CHARS_PER_TOKEN for the method)."""
    batch = settings.batch if batch is None else batch
    prompts = list(prompts)
    n = len(prompts)
    input_tokens = sum(estimate_input_tokens(p) for p in prompts)
    output_tokens = n * min(EXPECTED_OUTPUT_TOKENS, settings.max_tokens)
    output_max = n * settings.max_tokens
    return Estimate(
        n, input_tokens, output_tokens, output_max,
        settings.cost(input_tokens, output_tokens, batch), settings.cost(input_tokens, output_max, batch), batch,
    )


def check_cost(est: Estimate, settings: Settings, spent: float = 0.0) -> None:
    """Refuse to start above generate.max_cost_usd. Sync runs are checked on the estimate and
    then stopped at the limit while they run; a batch cannot be stopped once submitted, so it is
    checked on its upper bound (every reply at max_tokens)."""
    limit = settings.max_cost_usd
    if limit is None:
        return
    planned = est.usd_max if est.batch else est.usd
    if spent + planned > limit:
        what = "upper bound" if est.batch else "estimate"
        raise InputError(
            f"the cost {what} ${spent + planned:.2f} for {est.requests} questions is above generate.max_cost_usd "
            f"${limit:.2f}; raise generate.max_cost_usd, lower generate.max_questions"
            + ("" if est.batch else ", or use generate.provider anthropic-batch (half price)")
        )


# --------------------------------------------------------------------------------------------
# Errors, the shared pause, progress
# --------------------------------------------------------------------------------------------
SPEND_LIMIT_CODES = {
    "enforced_spend_limit_reached", "contract_spend_limit_reached", "linked_organization_spend_limit_reached",
    "linked_organization_billing_unavailable", "insufficient_quota", "billing_hard_limit_reached",
}
_SPEND_LIMIT_TEXT = re.compile(
    r"credit balance|spend(?:ing)? limit|usage limits?\b|insufficient[_ ]quota|exceeded your current quota|billing", re.IGNORECASE
)


def _error_body_fields(body: object) -> tuple[str | None, str]:
    """(error code, message) from an Anthropic- or OpenAI-shaped error body."""
    if not isinstance(body, dict):
        return None, ""
    error = body.get("error", body)
    if not isinstance(error, dict):
        return None, str(error)
    details = error.get("details") if isinstance(error.get("details"), dict) else {}
    code = details.get("error_code") or error.get("code") or (error.get("type") if error.get("type") in SPEND_LIMIT_CODES else None)
    return (code if isinstance(code, str) else None), str(error.get("message") or "")


def is_spend_limit(status: int, body: object) -> bool:
    if status == 402:
        return True
    if status not in (400, 403, 429):
        return False
    code, message = _error_body_fields(body)
    return code in SPEND_LIMIT_CODES or bool(_SPEND_LIMIT_TEXT.search(message))


def _retry_after_seconds(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) / scale)
            except ValueError:
                continue
    return None


class SharedPause:
    """httpx event hooks shared by every request of one client.

    After a 429 (rate limit), 529 (overloaded) or 503, every request waits until the time the
    API asked for (retry-after-ms / retry-after, else DEFAULT_PAUSE seconds) before it is sent,
    so the workers back off together instead of each retrying into the limit. The SDK's own
    retry of the failed request honours the same header. A spend-limit or out-of-credit reply is
    marked not retryable (x-should-retry: false) so that no retry is wasted on it."""

    DEFAULT_PAUSE = 1.0

    def __init__(self, on_pause: Callable[[str], None] | None = None) -> None:
        self.until = 0.0
        self.pauses: Counter[int] = Counter()
        self.paused_s = 0.0
        self.spend_limited = False
        self._on_pause = on_pause

    async def before_request(self, request: Any) -> None:
        while True:
            delay = self.until - time.monotonic()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    async def after_response(self, response: Any) -> None:
        status = response.status_code
        if status in (400, 402, 403, 429):
            await response.aread()
            try:
                body = json.loads(response.content or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            if is_spend_limit(status, body):
                self.spend_limited = True
                response.headers["x-should-retry"] = "false"
                return
        if status in (429, 503, 529):
            wait = _retry_after_seconds(response.headers)
            wait = self.DEFAULT_PAUSE if wait is None else wait
            now = time.monotonic()
            self.pauses[status] += 1
            if now + wait > self.until:
                self.paused_s += now + wait - max(self.until, now)
                self.until = now + wait
                if self._on_pause and wait >= 1.0:
                    self._on_pause(f"HTTP {status}: pausing all requests for {wait:.1f}s")

    def hooks(self) -> dict[str, list]:
        return {"request": [self.before_request], "response": [self.after_response]}

    def summary(self) -> str | None:
        if not self.pauses:
            return None
        names = {429: "rate limited (429)", 529: "overloaded (529)", 503: "unavailable (503)"}
        what = ", ".join(f"{n}x {names.get(s, s)}" for s, n in sorted(self.pauses.items()))
        return f"the API answered {what}; all requests paused {self.paused_s:.1f}s in total"


class StopGeneration(InputError):
    """A clean stop: progress is kept in the cache, the stage exits non-zero with one line."""


@dataclass
class Outcome:
    succeeded: int = 0
    rejected: int = 0
    failed: list[str] = field(default_factory=list)  # reasons
    stop: str | None = None  # why the run stopped early
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    submitted_batches: int = 0  # batches created by this run
    adopted_batches: int = 0  # batches found by reconciliation (created by an earlier, interrupted attempt)
    unsaved: int = 0  # replies received (and paid) that could not be written to the cache


class EndpointUnreachable(Exception):
    """Mixed into an SDK error type (so the SDK neither wraps nor retries it): the endpoint refused
    or dropped CONNECT_FAILURES connection attempts in a row; the message names it."""


_UNREACHABLE_TYPES: dict[type, type] = {}


def _unreachable_error(sdk_error: type, message: str) -> Exception:
    cls = _UNREACHABLE_TYPES.get(sdk_error)
    if cls is None:
        cls = _UNREACHABLE_TYPES[sdk_error] = type("EndpointUnreachableError", (EndpointUnreachable, sdk_error), {})
    return cls(message)


def _os_reason(error: BaseException) -> str:
    """The operating system's words for a failed connection ("Connection refused"), if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, OSError) and (current.errno or current.strerror):
            return os.strerror(current.errno) if current.errno else current.strerror
        current = current.__cause__ or current.__context__
    return str(error) or type(error).__name__


def _origin_of(url: Any) -> str:
    try:
        scheme, host, port = url.scheme, url.host, url.port
    except AttributeError:
        return str(url)
    return f"{scheme}://{host}" + (f":{port}" if port else "")


class ConnectionGuard:
    """Failed connection attempts to one endpoint (refused, unresolvable, no answer within
    CONNECT_TIMEOUT_S). After CONNECT_FAILURES in a row spanning at least CONNECT_FAILURE_SPAN_S
    the endpoint is deemed unreachable: every request then fails at once with one message naming
    it, instead of each one retrying with backoff (which took ~47 s before stopping)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.first_failure = 0.0
        self.unreachable: str | None = None

    def failed(self, request: Any, error: BaseException) -> None:
        now = time.monotonic()
        if self.failures == 0:
            self.first_failure = now
        self.failures += 1
        if self.failures >= CONNECT_FAILURES and now - self.first_failure >= CONNECT_FAILURE_SPAN_S:
            where = _origin_of(getattr(request, "url", None)) if request is not None else self.endpoint.shown
            reason = "no answer within the connect timeout" if "timeout" in type(error).__name__.lower() else _os_reason(error)
            self.unreachable = (
                f"cannot connect to {where} ({reason}; {self.failures} attempts in "
                f"{now - self.first_failure:.1f}s); the endpoint comes from {self.endpoint.source}: "
                "check that the server is running and the URL is right"
            )

    def succeeded(self) -> None:
        self.failures = 0


def _guarded_http_client(sdk: Any, sdk_error: type, pause: "SharedPause", guard: ConnectionGuard, **kwargs: Any) -> Any:
    """The SDK's default async HTTP client, with the shared pause's hooks, a short connect timeout,
    and `guard` watching connection failures."""
    import httpx2

    class GuardedHttpClient(sdk.DefaultAsyncHttpxClient):
        async def send(self, request: Any, **options: Any) -> Any:
            if guard.unreachable:
                raise _unreachable_error(sdk_error, guard.unreachable)
            try:
                response = await super().send(request, **options)
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as error:
                guard.failed(request, error)
                if guard.unreachable:
                    raise _unreachable_error(sdk_error, guard.unreachable) from None
                raise
            guard.succeeded()
            return response

    return GuardedHttpClient(
        event_hooks=pause.hooks(), timeout=httpx2.Timeout(REQUEST_TIMEOUT_S, connect=CONNECT_TIMEOUT_S), **kwargs
    )


def classify_error(error: BaseException) -> tuple[str, str]:
    """('spend_limit' | 'fatal' | 'transient', a one-line description without secrets)."""
    if isinstance(error, EndpointUnreachable):
        return "fatal", str(error)
    sdks = [sys.modules[name] for name in ("anthropic", "openai") if name in sys.modules]  # only those in use
    status_errors = tuple(sdk.APIStatusError for sdk in sdks)
    connection_errors = tuple(sdk.APIConnectionError for sdk in sdks)
    status = getattr(error, "status_code", None)
    if status_errors and isinstance(error, status_errors) and status is not None:
        code, message = _error_body_fields(getattr(error, "body", None))
        message = message or str(getattr(error, "message", "")) or type(error).__name__
        message = " ".join(message.split())[:300]
        if is_spend_limit(status, getattr(error, "body", None)) or getattr(error, "error_code", None) in SPEND_LIMIT_CODES:
            return "spend_limit", f"HTTP {status}: {message}"
        if status in (401, 403):
            return "fatal", f"HTTP {status} authentication/permission error: {message} (check the API key in the environment)"
        if status == 404:
            return "fatal", f"HTTP 404: {message} (check generate.model and the base URL)"
        if status in (400, 413, 422):
            return "fatal", f"HTTP {status}: {message}"
        return "transient", f"HTTP {status}: {message}"
    if connection_errors and isinstance(error, connection_errors):
        request = getattr(error, "request", None)
        where = _origin_of(request.url) if request is not None else "the endpoint"
        what = "timed out" if "timeout" in type(error).__name__.lower() else f"failed ({_os_reason(error.__cause__ or error)})"
        return "transient", f"{type(error).__name__}: the connection to {where} {what}"
    return "transient", f"{type(error).__name__}: {str(error)[:200]}"


class Meter:
    """The progress bar: done/total, tokens and spend so far."""

    def __init__(self, total: int, settings: Settings, desc: str, batch: bool | None = None) -> None:
        from tqdm import tqdm

        self.settings = settings
        self.batch = settings.batch if batch is None else batch
        self.outcome = Outcome()
        self.bar = tqdm(
            total=total, desc=desc, unit="q", file=sys.stderr, dynamic_ncols=True,
            mininterval=0.5 if sys.stderr.isatty() else 15.0,
        )

    def add(self, reply: Reply, rejected: bool, saved: bool = True) -> None:
        o = self.outcome
        o.succeeded += int(saved)
        o.unsaved += int(not saved)
        o.rejected += int(rejected and saved)
        o.input_tokens += reply.input_tokens
        o.output_tokens += reply.output_tokens
        o.cost = self.settings.cost(o.input_tokens, o.output_tokens, self.batch)
        self.bar.set_postfix_str(f"in {o.input_tokens:,} out {o.output_tokens:,} tok ${o.cost:.4f}", refresh=False)
        self.bar.update(1)

    def fail(self, reason: str) -> None:
        self.outcome.failed.append(reason)
        self.bar.update(1)

    def write(self, message: str) -> None:
        self.bar.write(f"generate_goldenset: {message}", file=sys.stderr)

    def close(self) -> None:
        self.bar.close()


# --------------------------------------------------------------------------------------------
# Clients
# --------------------------------------------------------------------------------------------
def _anthropic_client(settings: Settings, pause: SharedPause, max_retries: int | None = None):
    import anthropic
    import httpx2

    endpoint = anthropic_endpoint(settings.provider)
    http = _guarded_http_client(
        anthropic, anthropic.AnthropicError, pause, ConnectionGuard(endpoint),
        limits=httpx2.Limits(max_connections=max(settings.concurrency * 2, 10), max_keepalive_connections=settings.concurrency + 2),
    )
    # api_key given: no profile on disk is read.
    return anthropic.AsyncAnthropic(
        api_key=endpoint.key, base_url=endpoint.url, http_client=http, timeout=REQUEST_TIMEOUT_S,
        max_retries=settings.max_retries if max_retries is None else max_retries,
    )


def _openai_client(settings: Settings, pause: SharedPause):
    import openai

    # Refuses a params.yaml base_url the user did not vouch for while OPENAI_API_KEY is set.
    endpoint = openai_endpoint(settings.base_url)
    http = _guarded_http_client(openai, openai.OpenAIError, pause, ConnectionGuard(endpoint))
    # Local servers take any key; a placeholder is sent when OPENAI_API_KEY is not set.
    return openai.AsyncOpenAI(
        api_key=endpoint.key, base_url=endpoint.url, max_retries=settings.max_retries, http_client=http,
        timeout=REQUEST_TIMEOUT_S,
    )


def _anthropic_reply(message: Any) -> Reply:
    text = "".join(getattr(block, "text", "") for block in message.content if getattr(block, "type", None) == "text")
    usage = message.usage
    return Reply(text, message.stop_reason, int(usage.input_tokens or 0), int(usage.output_tokens or 0))


_OPENAI_STOP = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use"}


def _openai_reply(completion: Any, prompt: str) -> Reply:
    if not completion.choices:
        raise ValueError("a completion without choices")
    choice = completion.choices[0]
    text = choice.message.content or ""
    usage = completion.usage
    input_tokens = usage.prompt_tokens if usage else estimate_input_tokens(prompt)
    output_tokens = usage.completion_tokens if usage else math.ceil(len(text) / CHARS_PER_TOKEN)
    return Reply(text, _OPENAI_STOP.get(choice.finish_reason or "", choice.finish_reason), int(input_tokens), int(output_tokens))


# --------------------------------------------------------------------------------------------
# Sync providers: anthropic, openai-compatible
# --------------------------------------------------------------------------------------------
MALFORMED_TRIES = 3  # a reply that cannot be decoded (a proxy hiccup) is asked again this often


async def _run_sync(jobs: list[Job], meta: Meta, settings: Settings, writer: CacheWriter, meter: Meter) -> Outcome:
    pause = SharedPause(on_pause=meter.write)
    if settings.provider == "anthropic":
        client = _anthropic_client(settings, pause)

        async def call(prompt: str) -> Reply:
            message = await client.messages.create(
                model=settings.model, max_tokens=settings.max_tokens, messages=[{"role": "user", "content": prompt}]
            )
            return _anthropic_reply(message)
    else:
        client = _openai_client(settings, pause)

        async def call(prompt: str) -> Reply:
            completion = await client.chat.completions.create(
                model=settings.model, max_tokens=settings.max_tokens, messages=[{"role": "user", "content": prompt}]
            )
            return _openai_reply(completion, prompt)

    outcome = meter.outcome
    semaphore = asyncio.Semaphore(settings.concurrency)
    worst_case = settings.cost(
        max((estimate_input_tokens(j.prompt) for j in jobs), default=0), settings.max_tokens, batch=False
    )
    state = {"in_flight": 0, "consecutive_failures": 0}
    breaker = max(10, 2 * settings.concurrency)
    unsaved: list[tuple[dict, Reply]] = []
    space_needed = SPACE_RESERVE_BYTES + settings.concurrency * SPACE_PER_REPLY_BYTES

    async def one(job: Job) -> None:
        async with semaphore:
            if outcome.stop:
                return
            free = free_bytes(writer.path)
            if free < space_needed:
                outcome.stop = outcome.stop or (
                    f"only {free / 1e6:.1f} MB free on the disk holding {writer.path}, below the {space_needed / 1e6:.1f} MB "
                    "kept for the replies in flight: stopped before paying for more, so nothing paid was lost"
                )
                return
            limit = settings.max_cost_usd
            if limit is not None and outcome.cost + (state["in_flight"] + 1) * worst_case > limit:
                outcome.stop = outcome.stop or (
                    f"stopped at generate.max_cost_usd ${limit:.2f} (spent ${outcome.cost:.2f})"
                )
                return
            state["in_flight"] += 1
            try:
                for tries in range(1, MALFORMED_TRIES + 1):
                    try:
                        reply = await call(job.prompt)
                        break
                    except ValueError as error:  # an undecodable body: JSON or schema errors
                        if tries == MALFORMED_TRIES:
                            raise
                        meter.write(f"malformed reply ({type(error).__name__}); asking again")
                        await asyncio.sleep(0.2 * tries)
            except Exception as error:  # noqa: BLE001 - every failure is classified and reported
                kind, message = classify_error(error)
                if kind == "spend_limit" or pause.spend_limited:
                    outcome.stop = outcome.stop or f"the API's spend limit or credit is exhausted ({message})"
                elif isinstance(error, EndpointUnreachable):
                    outcome.stop = outcome.stop or message
                elif kind == "fatal":
                    outcome.stop = outcome.stop or f"the API refused the request: {message}"
                else:
                    meter.fail(message)
                    state["consecutive_failures"] += 1
                    if state["consecutive_failures"] >= breaker:
                        outcome.stop = outcome.stop or f"{breaker} requests in a row failed after retries (last: {message})"
                return
            finally:
                state["in_flight"] -= 1
            state["consecutive_failures"] = 0
            record = make_record(meta, job.key, job.passage_sha256, job.attempt, reply)
            try:
                await asyncio.to_thread(writer.append, record)  # fsync off the event loop; appends are serialised
            except CacheWriteError as error:
                unsaved.append((record, reply))
                outcome.stop = outcome.stop or str(error)
                return
            meter.add(reply, rejected=record["rejected"] is not None)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        await client.close()
        summary = pause.summary()
        if summary:
            meter.write(summary)
    if unsaved:
        _save_late(unsaved, writer, meter)
    return outcome


def _save_late(unsaved: list[tuple[dict, Reply]], writer: CacheWriter, meter: Meter) -> None:
    """Try once more to write the replies a failed write left in memory (the requests in flight
    when the disk filled), then say plainly what could not be kept."""
    outcome = meter.outcome
    lost = 0
    for record, reply in unsaved:
        try:
            writer.append(record)
            meter.add(reply, rejected=record["rejected"] is not None)
        except CacheWriteError:
            meter.add(reply, rejected=False, saved=False)
            lost += 1
    if lost:
        outcome.stop = (f"{outcome.stop}; the cache is consistent (a torn line is never left), but {lost} replies "
                        "received after that could not be saved and will be asked again")
    else:
        outcome.stop = f"{outcome.stop}; the cache is consistent and nothing paid was lost"


# --------------------------------------------------------------------------------------------
# Batch provider: anthropic-batch, with a journal so that no batch is ever paid for twice
# --------------------------------------------------------------------------------------------
# An intent without a batch is reconciled by listing the batches created since it was written
# (less this much, for a server clock behind ours), adopting one whose requests are its requests.
RECONCILE_CLOCK_SKEW_S = 300.0
# A batch whose creation may still be under way (the request was sent, the answer never came) is
# looked for until the intent is this old, before it is declared never created.
RECONCILE_GRACE_S = 20.0
GRACE_ENV = "RETRIEVAL_BENCH_RECONCILE_GRACE_S"
RECONCILE_LIST_LIMIT = 10_000  # batches examined per listing, at most
CREATE_TRIES = 3  # creates of one request set, when the API says it created nothing (429, connection refused)
RESULT_BYTES_PER_REQUEST = 8 << 10  # room kept on the disk for each result of a batch


def journal_path_for(cache_path: str | Path) -> Path:
    """The batch journal lives next to the cache: data/question_cache.batches.jsonl."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.stem + ".batches.jsonl")


def intent_id(keys: Iterable[str]) -> str:
    """The content hash of a request set: the sha256 of its sorted keys (= custom_ids)."""
    return hashlib.sha256("\n".join(sorted(keys)).encode("ascii")).hexdigest()


def reconcile_grace_s() -> float:
    value = os.environ.get(GRACE_ENV)
    try:
        return max(0.0, float(value)) if value else RECONCILE_GRACE_S
    except ValueError:
        raise InputError(f"{GRACE_ENV} must be a number of seconds, got {value!r}") from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _not_created(error: BaseException) -> bool:
    """Whether a failed create certainly created nothing: the API refused it (4xx, 429 included)
    or the request never left this machine (no connection). A 5xx, a timeout or a connection
    lost after sending leaves it unknown."""
    if isinstance(error, EndpointUnreachable):
        return True
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return 400 <= status < 500
    import httpx2

    cause = error.__cause__
    return isinstance(cause, (httpx2.ConnectError, httpx2.ConnectTimeout))


class BatchRunner:
    def __init__(self, settings: Settings, cache_path: str | Path, writer: CacheWriter, meter: Meter) -> None:
        self.settings = settings
        self.journal_path = journal_path_for(cache_path)
        self.cache_path = Path(cache_path)
        self.writer = writer
        self.meter = meter
        self.pause = SharedPause(on_pause=meter.write)
        self.client = _anthropic_client(settings, self.pause)
        self.journal = CacheWriter(self.journal_path)
        self.strangers: set[str] = set()  # keys of intents whose adopted batch turned out to be someone else's

    async def close(self) -> None:
        self.journal.close()
        await self.client.close()

    def _journal(self, event: dict, what: str) -> None:
        try:
            self.journal.append(event)
        except CacheWriteError as error:
            raise StopGeneration(f"{error} ({what}); nothing was lost: the journal is consistent and a rerun "
                                 "finds any batch already created instead of paying for it again") from None

    def _check_space(self, n_requests: int) -> None:
        need = SPACE_RESERVE_BYTES + n_requests * RESULT_BYTES_PER_REQUEST
        free = free_bytes(self.cache_path)
        if free < need:
            raise StopGeneration(
                f"only {free / 1e6:.1f} MB free on the disk holding {self.cache_path}, below the {need / 1e6:.1f} MB "
                f"needed for the results of {n_requests} requests: nothing was submitted, nothing paid was lost; "
                "free some space and rerun"
            )

    # --- submission: intent first, create once, reconcile anything ambiguous ---------------------
    async def submit(self, jobs: list[Job], meta: Meta) -> list[dict]:
        events = []
        for begin in range(0, len(jobs), BATCH_MAX_REQUESTS):
            chunk = jobs[begin:begin + BATCH_MAX_REQUESTS]
            events.extend(await self._submit_one(chunk, meta, len(events)))
        return events

    async def _submit_one(self, chunk: list[Job], meta: Meta, submitted_before: int) -> list[dict]:
        requests = [
            {
                "custom_id": job.key,  # a sha256 hex: 64 characters, the API's maximum; the batch's marker
                "params": {"model": meta.model, "max_tokens": meta.max_tokens, "messages": [{"role": "user", "content": job.prompt}]},
            }
            for job in chunk
        ]
        intent = {
            "event": "intent", "batch_id": None, "intent": intent_id(job.key for job in chunk),
            "intent_at": _now(), "intent_unix": time.time(), "n_requests": len(chunk),
            "family": meta.family, "provider": meta.provider, "model": meta.model,
            "prompt_sha256": meta.prompt_sha256, "max_tokens": meta.max_tokens,
            "requests": [{"key": job.key, "passage_sha256": job.passage_sha256, "attempt": job.attempt} for job in chunk],
        }
        for tries in range(1, CREATE_TRIES + 1):
            self._check_space(len(chunk))
            intent = {**intent, "intent_at": _now(), "intent_unix": time.time()}
            self._journal(intent, "before creating a batch; nothing was submitted")  # durable before create
            try:
                # SDK retries off: a retried create after a lost answer is a second, paid batch.
                batch = await self.client.with_options(max_retries=0).messages.batches.create(requests=requests)
            except Exception as error:  # noqa: BLE001 - every failure is classified
                kind, message = classify_error(error)
                if kind == "spend_limit" or self.pause.spend_limited:
                    self._abandon(intent, message)
                    raise StopGeneration(f"the API's spend limit or credit is exhausted ({message}); "
                                         f"{submitted_before} batches were submitted before it") from None
                if not _not_created(error):
                    self.meter.write(f"creating a batch of {len(chunk)} requests ended in doubt ({message}); "
                                     "looking for it among the account's batches before submitting anything again")
                    adopted = await self.reconcile(intent)
                    if adopted:
                        return adopted
                else:
                    self._abandon(intent, message)
                if kind == "fatal" or tries == CREATE_TRIES:
                    raise StopGeneration(f"submitting a batch of {len(chunk)} requests failed: {message}") from None
                self.meter.write(f"no batch was created ({message}); trying again")
                await asyncio.sleep(min(8.0, 0.5 * 2 ** tries))
                continue
            event = self._submitted(intent, batch.id)
            self.meter.outcome.submitted_batches += 1
            self.meter.write(f"submitted batch {batch.id} ({len(chunk)} requests); a rerun resumes it if this run stops")
            return [event]
        return []

    def _submitted(self, intent: dict, batch_id: str, adopted: bool = False, verified: bool = True) -> dict:
        event = {k: v for k, v in intent.items() if k not in ("event", "batch_id", "intent_at", "intent_unix")}
        event.update(event="submitted", batch_id=batch_id, submitted=_now())
        if adopted:
            event.update(adopted=True, verified=verified)
        self._journal(event, f"after batch {batch_id} was created")  # before waiting: a rerun resumes it
        return event

    def _abandon(self, intent: dict, reason: str) -> None:
        self._journal({"event": "abandoned", "batch_id": None, "intent": intent["intent"], "reason": reason[:300],
                       "abandoned": _now()}, "recording that no batch was created")

    async def reconcile(self, intent: dict) -> list[dict]:
        """Adopt the batch(es) that `intent` may have created, or declare it never created once the
        grace period is over. Returns the "submitted" events journalled for adopted batches."""
        deadline = float(intent["intent_unix"]) + reconcile_grace_s()
        while True:
            found = await self._find(intent)
            if found:
                events = []
                for batch_id, verified in found:
                    events.append(self._submitted(intent, batch_id, adopted=True, verified=verified))
                    self.meter.outcome.adopted_batches += 1
                    self.meter.write(
                        f"adopted batch {batch_id} ({intent['n_requests']} requests"
                        + (", the same custom_ids" if verified else ", created after the intent; its custom_ids are checked when it ends")
                        + "): it is collected, not submitted again"
                    )
                return events
            wait = deadline - time.time()
            if wait <= 0:
                self._abandon(intent, "no batch with these requests was created")
                return []
            await asyncio.sleep(min(wait, max(0.2, min(2.0, reconcile_grace_s() / 5))))

    async def _find(self, intent: dict) -> list[tuple[str, bool]]:
        """Batches created since the intent (less RECONCILE_CLOCK_SKEW_S), not in the journal, with
        as many requests: an ended one is verified by its custom_ids (then it alone is adopted);
        one still processing cannot be, and is adopted as a candidate (collection skips results
        with foreign custom_ids, so adopting a stranger's batch costs nothing)."""
        known = {event.get("batch_id") for event in read_journal(self.journal_path)}
        keys = {request["key"] for request in intent["requests"]}
        cutoff = float(intent["intent_unix"]) - RECONCILE_CLOCK_SKEW_S
        candidates: list[tuple[str, bool]] = []
        examined = 0
        try:
            async for batch in self.client.messages.batches.list(limit=100):
                examined += 1
                if batch.created_at.timestamp() < cutoff or examined > RECONCILE_LIST_LIMIT:
                    break
                if batch.id in known:
                    continue
                counts = batch.request_counts
                total = counts.processing + counts.succeeded + counts.errored + counts.canceled + counts.expired
                if total != len(keys):
                    continue
                if batch.processing_status == "ended":
                    custom_ids = await self._custom_ids(batch.id)
                    if custom_ids == keys:
                        return [(batch.id, True)]
                    if custom_ids is not None:
                        continue  # someone else's batch of the same size
                candidates.append((batch.id, False))
        except Exception as error:  # noqa: BLE001
            _, message = classify_error(error)
            raise StopGeneration(
                f"could not list the account's batches to check whether a batch of {len(keys)} requests was created "
                f"({message}); nothing more was submitted: rerun to check again (it is submitted only if it does not exist)"
            ) from None
        return candidates

    async def _custom_ids(self, batch_id: str) -> set[str] | None:
        try:
            return {item.custom_id async for item in await self.client.messages.batches.results(batch_id)}
        except Exception:  # noqa: BLE001 - results gone or unreadable: cannot verify
            return None

    # --- waiting and collecting ---------------------------------------------------------------------
    async def wait_and_collect(self, events: list[dict]) -> None:
        pending = {event["batch_id"]: event for event in events}
        while pending:
            for batch_id, event in list(pending.items()):
                try:
                    batch = await self.client.messages.batches.retrieve(batch_id)
                except Exception as error:  # noqa: BLE001
                    kind, message = classify_error(error)
                    if getattr(error, "status_code", None) == 404:
                        self._collected(event, {"gone": len(event["requests"])}, note="batch not found")
                        self.meter.write(f"batch {batch_id} no longer exists; its requests will be submitted again")
                        del pending[batch_id]
                        continue
                    if kind in ("fatal", "spend_limit"):
                        raise StopGeneration(f"polling batch {batch_id} failed: {message}; rerun to resume it") from None
                    self.meter.write(f"polling batch {batch_id} failed ({message}); trying again")
                    continue
                if batch.processing_status == "ended":
                    await self._collect(event)
                    del pending[batch_id]
                else:
                    counts = batch.request_counts
                    self.meter.bar.set_description_str(
                        f"batch {batch_id[-8:]}: {batch.processing_status}, {counts.processing} processing", refresh=True
                    )
            if pending:
                await asyncio.sleep(self.settings.batch_poll_seconds)

    async def _collect(self, event: dict) -> None:
        by_key = {request["key"]: request for request in event["requests"]}
        meta = Meta(event.get("provider", "anthropic-batch"), event["family"], event["model"], event["prompt_sha256"], event["max_tokens"])
        cached = set(read_cache(self.cache_path))
        need = SPACE_RESERVE_BYTES + len(by_key) * RESULT_BYTES_PER_REQUEST
        free = free_bytes(self.cache_path)
        if free < need:
            raise StopGeneration(
                f"only {free / 1e6:.1f} MB free on the disk holding {self.cache_path}, below the {need / 1e6:.1f} MB needed "
                f"to keep the results of batch {event['batch_id']}: nothing paid was lost, its results stay on the server "
                "(29 days); free some space and rerun to collect them"
            )
        counts: Counter[str] = Counter()
        try:
            results = await self.client.messages.batches.results(event["batch_id"])
            async for item in results:
                request = by_key.get(item.custom_id)
                if request is None:
                    continue  # not one of this batch's requests (an adopted stranger's batch)
                result = item.result
                counts[result.type] += 1
                if result.type != "succeeded":
                    reason = result.type
                    error = getattr(result, "error", None)
                    if error is not None:
                        inner = getattr(error, "error", None)
                        reason = f"{result.type}: {getattr(inner, 'type', '')} {getattr(inner, 'message', '')}".strip()
                    self.meter.fail(reason)
                    continue
                if request["key"] in cached:
                    self.meter.bar.update(1)
                    continue
                reply = _anthropic_reply(result.message)
                record = make_record(meta, request["key"], request["passage_sha256"], request["attempt"], reply, "anthropic-batch")
                try:
                    self.writer.append(record)
                except CacheWriteError as error:
                    raise StopGeneration(
                        f"{error}: the cache is consistent and nothing paid was lost, the results of batch "
                        f"{event['batch_id']} stay on the server (29 days); free some space and rerun to collect them"
                    ) from None
                cached.add(request["key"])
                self.meter.add(reply, rejected=record["rejected"] is not None)
        except StopGeneration:
            raise
        except Exception as error:  # noqa: BLE001
            kind, message = classify_error(error)
            if getattr(error, "status_code", None) == 404:
                self._collected(event, dict(counts), note="results no longer available")
                self.meter.write(f"the results of batch {event['batch_id']} are gone; missing requests will be submitted again")
                return
            raise StopGeneration(f"reading the results of batch {event['batch_id']} failed: {message}; rerun to resume") from None
        if event.get("adopted") and not event.get("verified") and not counts:
            self._collected(event, {}, note="not ours: none of its custom_ids is one of the intent's requests")
            self.meter.write(f"adopted batch {event['batch_id']} held none of these requests; it was someone else's")
            self.strangers.update(by_key)
            return
        missing = len(by_key) - sum(counts.values())
        if missing:
            counts["missing"] = missing
            for _ in range(missing):
                self.meter.fail("missing from the results")
        self._collected(event, dict(counts))

    def _collected(self, event: dict, counts: dict, note: str | None = None) -> None:
        record = {"event": "collected", "batch_id": event["batch_id"], "counts": counts,
                  "collected": datetime.now(timezone.utc).isoformat(timespec="seconds")}
        if note:
            record["note"] = note
        self._journal(record, f"after collecting batch {event['batch_id']}")


def pending_batch_events(cache_path: str | Path) -> list[dict]:
    """Batches submitted (journalled) and not yet collected."""
    return pending_batches(read_journal(journal_path_for(cache_path)))


def pending_intent_events(cache_path: str | Path) -> list[dict]:
    """Batch intents with no known outcome: a batch may or may not exist for each."""
    return pending_intents(read_journal(journal_path_for(cache_path)))


# --------------------------------------------------------------------------------------------
# Entry point for the stage
# --------------------------------------------------------------------------------------------
def run(jobs: list[Job], meta: Meta, settings: Settings, cache_path: str | Path) -> Outcome:
    """Generate `jobs`, appending every reply to the cache as it arrives. Raises StopGeneration
    on a clean stop (spend limit, refused request, cost limit, unreachable endpoint, full disk);
    failed requests are listed in the outcome and stay uncached. The caller holds the cache's
    lock (retrieval_bench.locking) and has reconciled the journal (resume_batches)."""
    meter = Meter(len(jobs), settings, f"generate ({settings.provider})")
    writer = CacheWriter(cache_path)
    try:
        if settings.batch:
            outcome = asyncio.run(_run_batches(jobs, meta, settings, cache_path, writer, meter, [], []))
        else:
            outcome = asyncio.run(_run_sync(jobs, meta, settings, writer, meter))
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def resume_batches(events: list[dict], settings: Settings, cache_path: str | Path, intents: list[dict] | None = None) -> Outcome:
    """Reconcile the journalled intents without an outcome (adopting any batch they created),
    then poll the journalled, uncollected batches `events` (and the adopted ones) until they end
    and cache their results."""
    intents = intents or []
    total = sum(len(event["requests"]) for event in events) + sum(len(i["requests"]) for i in intents)
    meter = Meter(total, settings, "resume batches", batch=True)
    writer = CacheWriter(cache_path)
    try:
        outcome = asyncio.run(_run_batches([], None, settings, cache_path, writer, meter, events, intents))
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def _raise_on_stop(outcome: Outcome, cache_path: str | Path) -> None:
    if outcome.stop:
        raise StopGeneration(
            f"{outcome.stop}; {outcome.succeeded} replies from this run are kept in {cache_path} "
            f"(${outcome.cost:.2f} spent); rerun to generate the rest: only missing questions are requested"
        )


async def _run_batches(jobs, meta, settings, cache_path, writer, meter, resume, intents) -> Outcome:
    runner = BatchRunner(settings, cache_path, writer, meter)
    try:
        resume = list(resume)
        for intent in intents:
            meter.write(f"a batch of {intent['n_requests']} requests was being created when a run stopped; "
                        "looking for it among the account's batches before submitting anything")
            resume.extend(await runner.reconcile(intent))
        if resume:
            meter.write(f"resuming {len(resume)} journalled batches: {', '.join(e['batch_id'] for e in resume)}")
            await runner.wait_and_collect(resume)
        for _ in range(CREATE_TRIES):
            if not jobs:
                break
            events = await runner.submit(jobs, meta)
            await runner.wait_and_collect(events)
            # An intent whose only adopted batches were strangers' created nothing: submit it now.
            cached = set(read_cache(cache_path))
            jobs = [job for job in jobs if job.key in runner.strangers and job.key not in cached]
            runner.strangers.clear()
    finally:
        await runner.close()
    return meter.outcome
