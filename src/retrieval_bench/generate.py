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
written anywhere; ANTHROPIC_BASE_URL / OPENAI_BASE_URL are honoured as the SDKs do.

Only model replies are cached (including replies rejected by the hygiene rules, so a refusal is
not paid for on every run); a request the API failed is never cached and is asked again.
"""
from __future__ import annotations

import asyncio
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

from retrieval_bench.cache import (
    CacheWriter,
    cache_key,
    pending_batches,
    read_cache,
    read_journal,
)
from retrieval_bench.io import InputError
from retrieval_bench.params import DEFAULTS

# The family goes into the cache key: sync and batch Anthropic calls return the same kind of reply.
FAMILIES = {"anthropic": "anthropic", "anthropic-batch": "anthropic", "openai-compatible": "openai-compatible"}
BATCH_MAX_REQUESTS = 10_000
REQUEST_TIMEOUT_S = 120.0

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


def render_prompt(template: str, passage: str) -> str:
    """The prompt for one passage: str.replace, so braces elsewhere in the template are literal."""
    return template.replace("{passage}", passage)


def make_job(meta: Meta, template: str, passage_text: str, passage_sha256: str, attempt: int) -> Job:
    key = cache_key(meta.family, meta.model, meta.prompt_sha256, passage_text, meta.max_tokens, attempt)
    return Job(key, passage_sha256, attempt, render_prompt(template, passage_text))


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
    "too_short": "fewer than 3 words",
    "too_long": "more than 60 words: not a search query",
    "echo": "the question copies its passage (echo gauge; generate.drop_echo)",
    "duplicate_question": "the same question as for another passage (ambiguous label)",
}

_THINKING = re.compile(r"<think(?:ing)?>.*?</think(?:ing)?>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
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


def _parse_json(text: str) -> Any:
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    for opener, closer in (("{", "}"), ("[", "]")):
        start, end = text.find(opener), text.rfind(closer)
        if start != -1 and end > start:
            try:
                return json.loads(text[start:end + 1])
            except json.JSONDecodeError:
                continue
    return None


def _split_questions(text: str) -> list[str]:
    """Question sentences: split after '?' where the next text starts a new sentence."""
    parts = [p.strip() for p in re.split(r"(?<=\?)\s+(?=[\"'“(]?[A-Z0-9])", text) if p.strip()]
    return [p for p in parts if len(p.split()) >= 3] or parts


def clean_reply(raw: str, stop_reason: str | None = None) -> Cleaned:
    """The question and evidence in a reply, cleaned, or the reason to reject it.

    The expected reply is {"question": ..., "evidence": ...}; a JSON object in a code fence or
    after a preamble is accepted, and so is a bare question (then without evidence). Preambles
    ("Here is a question:"), numbering, bullets and enclosing quotes are stripped; empty replies,
    refusals, several questions, truncated replies (stop_reason max_tokens) and replies that are
    not a plausible search query (under 3 or over 60 words) are rejected."""
    text = _THINKING.sub("", raw or "").strip()  # reasoning models served locally think out loud first
    if stop_reason in ("max_tokens", "length"):
        return Cleaned("", "", "truncated")
    if stop_reason == "refusal":
        return Cleaned("", "", "refusal")
    parsed = _parse_json(text)
    evidence = ""
    if isinstance(parsed, list):
        items = [item for item in parsed if item]
        if len(items) > 1:
            return Cleaned("", "", "several_questions")
        parsed = items[0] if items else {}
    if isinstance(parsed, dict):
        if isinstance(parsed.get("questions"), list):
            if len(parsed["questions"]) > 1:
                return Cleaned("", "", "several_questions")
            parsed = {"question": (parsed["questions"] or [""])[0], "evidence": parsed.get("evidence", "")}
        question = parsed.get("question") or parsed.get("query") or ""
        if isinstance(question, list):
            if len(question) > 1:
                return Cleaned("", "", "several_questions")
            question = question[0] if question else ""
        question = str(question)
        evidence = str(parsed.get("evidence") or "")
    else:
        question = text
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
    submitted_batches: int = 0


def classify_error(error: BaseException) -> tuple[str, str]:
    """('spend_limit' | 'fatal' | 'transient', a one-line description without secrets)."""
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
        return "transient", f"{type(error).__name__}: connection failed"
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

    def add(self, reply: Reply, rejected: bool) -> None:
        o = self.outcome
        o.succeeded += 1
        o.rejected += int(rejected)
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
def _anthropic_client(settings: Settings, pause: SharedPause):
    import anthropic
    import httpx2

    key = os.environ.get("ANTHROPIC_API_KEY")
    if not key:
        raise InputError(f"generate.provider {settings.provider} needs ANTHROPIC_API_KEY in the environment")
    http = anthropic.DefaultAsyncHttpxClient(
        event_hooks=pause.hooks(), timeout=httpx2.Timeout(REQUEST_TIMEOUT_S, connect=10.0),
        limits=httpx2.Limits(max_connections=max(settings.concurrency * 2, 10), max_keepalive_connections=settings.concurrency + 2),
    )
    # base_url=None: the SDK reads ANTHROPIC_BASE_URL itself. api_key given: no profile on disk is read.
    return anthropic.AsyncAnthropic(api_key=key, max_retries=settings.max_retries, http_client=http, timeout=REQUEST_TIMEOUT_S)


def _openai_client(settings: Settings, pause: SharedPause):
    import httpx2
    import openai

    key = os.environ.get("OPENAI_API_KEY")
    base_url = settings.base_url or os.environ.get("OPENAI_BASE_URL")
    if not base_url and not key:
        raise InputError(
            "generate.provider openai-compatible needs generate.base_url (vLLM: http://localhost:8000/v1, "
            "Ollama: http://localhost:11434/v1, llama.cpp: http://localhost:8080/v1) or OPENAI_API_KEY for OpenAI itself"
        )
    http = openai.DefaultAsyncHttpxClient(event_hooks=pause.hooks(), timeout=httpx2.Timeout(REQUEST_TIMEOUT_S, connect=10.0))
    # Local servers take any key; a placeholder is sent when OPENAI_API_KEY is not set.
    return openai.AsyncOpenAI(
        api_key=key or "not-needed", base_url=base_url, max_retries=settings.max_retries, http_client=http,
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

    async def one(job: Job) -> None:
        async with semaphore:
            if outcome.stop:
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
            await asyncio.to_thread(writer.append, record)  # fsync off the event loop; appends are serialised
            meter.add(reply, rejected=record["rejected"] is not None)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        await client.close()
        summary = pause.summary()
        if summary:
            meter.write(summary)
    return outcome


# --------------------------------------------------------------------------------------------
# Batch provider: anthropic-batch, with a journal so a crash never submits twice
# --------------------------------------------------------------------------------------------
def journal_path_for(cache_path: str | Path) -> Path:
    """The batch journal lives next to the cache: data/question_cache.batches.jsonl."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.stem + ".batches.jsonl")


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

    async def close(self) -> None:
        self.journal.close()
        await self.client.close()

    async def submit(self, jobs: list[Job], meta: Meta) -> list[dict]:
        events = []
        for begin in range(0, len(jobs), BATCH_MAX_REQUESTS):
            chunk = jobs[begin:begin + BATCH_MAX_REQUESTS]
            requests = [
                {
                    "custom_id": job.key,  # a sha256 hex: 64 characters, the API's maximum
                    "params": {"model": meta.model, "max_tokens": meta.max_tokens, "messages": [{"role": "user", "content": job.prompt}]},
                }
                for job in chunk
            ]
            try:
                batch = await self.client.messages.batches.create(requests=requests)
            except Exception as error:  # noqa: BLE001
                kind, message = classify_error(error)
                if kind == "spend_limit" or self.pause.spend_limited:
                    raise StopGeneration(f"the API's spend limit or credit is exhausted ({message}); "
                                         f"{len(events)} batches were submitted before it") from None
                raise StopGeneration(f"submitting a batch of {len(chunk)} requests failed: {message}") from None
            event = {
                "event": "submitted",
                "batch_id": batch.id,
                "submitted": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "family": meta.family, "provider": meta.provider, "model": meta.model,
                "prompt_sha256": meta.prompt_sha256, "max_tokens": meta.max_tokens,
                "requests": [{"key": job.key, "passage_sha256": job.passage_sha256, "attempt": job.attempt} for job in chunk],
            }
            self.journal.append(event)  # before waiting: a rerun resumes this batch instead of resubmitting
            self.meter.outcome.submitted_batches += 1
            self.meter.write(f"submitted batch {batch.id} ({len(chunk)} requests); a rerun resumes it if this run stops")
            events.append(event)
        return events

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
        counts: Counter[str] = Counter()
        try:
            results = await self.client.messages.batches.results(event["batch_id"])
            async for item in results:
                request = by_key.get(item.custom_id)
                if request is None:
                    continue
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
                self.writer.append(record)
                cached.add(request["key"])
                self.meter.add(reply, rejected=record["rejected"] is not None)
        except Exception as error:  # noqa: BLE001
            kind, message = classify_error(error)
            if getattr(error, "status_code", None) == 404:
                self._collected(event, dict(counts), note="results no longer available")
                self.meter.write(f"the results of batch {event['batch_id']} are gone; missing requests will be submitted again")
                return
            raise StopGeneration(f"reading the results of batch {event['batch_id']} failed: {message}; rerun to resume") from None
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
        self.journal.append(record)


def pending_batch_events(cache_path: str | Path) -> list[dict]:
    """Batches submitted (journalled) and not yet collected."""
    return pending_batches(read_journal(journal_path_for(cache_path)))


# --------------------------------------------------------------------------------------------
# Entry point for the stage
# --------------------------------------------------------------------------------------------
def run(jobs: list[Job], meta: Meta, settings: Settings, cache_path: str | Path) -> Outcome:
    """Generate `jobs`, appending every reply to the cache as it arrives. Raises StopGeneration
    on a clean stop (spend limit, refused request, cost limit); failed requests are listed in
    the outcome and stay uncached."""
    meter = Meter(len(jobs), settings, f"generate ({settings.provider})")
    writer = CacheWriter(cache_path)
    try:
        if settings.batch:
            outcome = asyncio.run(_run_batches(jobs, meta, settings, cache_path, writer, meter, []))
        else:
            outcome = asyncio.run(_run_sync(jobs, meta, settings, writer, meter))
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def resume_batches(events: list[dict], settings: Settings, cache_path: str | Path) -> Outcome:
    """Poll the journalled, uncollected batches `events` until they end and cache their results."""
    meter = Meter(sum(len(event["requests"]) for event in events), settings, "resume batches", batch=True)
    writer = CacheWriter(cache_path)
    try:
        outcome = asyncio.run(_run_batches([], None, settings, cache_path, writer, meter, events))
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


async def _run_batches(jobs, meta, settings, cache_path, writer, meter, resume) -> Outcome:
    runner = BatchRunner(settings, cache_path, writer, meter)
    try:
        if resume:
            meter.write(f"resuming {len(resume)} journalled batches: {', '.join(e['batch_id'] for e in resume)}")
            await runner.wait_and_collect(resume)
        if jobs:
            events = await runner.submit(jobs, meta)
            await runner.wait_and_collect(events)
    finally:
        await runner.close()
    return meter.outcome

