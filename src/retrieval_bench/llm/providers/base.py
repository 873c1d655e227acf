"""The interface every LLM API implements; one module per API, each listed in registry.py.

A Provider builds the SDK client (behind the guarded HTTP client of connection.py, so the shared
rate-limit pause and the unreachable-endpoint stop work for it too), sends one prompt, turns the
SDK's answer into a Reply, and names its SDK's error types so that errors.classify_error can
tell a spend limit, a refused request and a passing fault apart. A BatchProvider adds an API
that takes many requests at once (runs by batch.BatchRunner, which journals every batch).

`family` goes into every cache key (retrieval_bench.llm.cache.replies.cache_key): providers whose
replies are interchangeable (Anthropic's Messages and Message Batches APIs) share one, so a
question paid for through either is never asked again through the other.
"""

from __future__ import annotations

import math
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Protocol

from retrieval_bench.llm.providers.schema import ReplySchema
from retrieval_bench.llm.providers.tokens import estimate_input_tokens, estimate_output_tokens
from retrieval_bench.llm.transport.credentials import mask_keys
from retrieval_bench.llm.transport.errors import classify_error

if TYPE_CHECKING:
    from retrieval_bench.llm.transport.ratelimit import SharedPause


@dataclass(frozen=True)
class Reply:
    text: str
    stop_reason: str | None  # normalised to Anthropic's names: end_turn, max_tokens, refusal, ...
    input_tokens: int
    output_tokens: int


MAX_REPORTED_TOKENS = 100_000_000  # a hundred times the largest context window of 2026


def reported_tokens(usage: Any, input_name: str, output_name: str, prompt: str, text: str) -> tuple[int, int]:
    """(input, output) tokens as the API's `usage` reports them under these names; a count it leaves
    out or null (some servers do) is estimated from the prompt's or reply's length (llm.providers.tokens),
    so the reply is kept and cached like any other, never paid for again."""
    counts = []
    for name, estimate in ((input_name, estimate_input_tokens(prompt)), (output_name, estimate_output_tokens(text))):
        value = getattr(usage, name, None)
        # beyond any context window (1e308 overflowed the cost: a traceback) a count is no count
        known = isinstance(value, (int, float)) and math.isfinite(value) and 0 <= value <= MAX_REPORTED_TOKENS
        counts.append(int(value) if known and value is not None else estimate)
    return counts[0], counts[1]


def reply_text(content: Any) -> str:
    """A reply's text as the cache can keep it: a string as it is, content parts (a list, as some
    OpenAI-compatible servers send) joined, none as ""; a lone surrogate (JSON "\\ud800"), which no
    UTF-8 file can hold, as "?" (else the paid reply was lost at the cache and asked for again on
    every rerun). Any other content is a ValueError: a failed request, not a crash."""
    if content is None:
        return ""
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, dict) else getattr(part, "text", None) for part in content]
        content = "".join(part for part in parts if isinstance(part, str))
    if not isinstance(content, str):
        raise ValueError(f"a reply whose content is a {type(content).__name__}, not text")
    return content.encode("utf-8", "replace").decode("utf-8")


class CallSettings(Protocol):
    """What a provider reads of llm.cost.settings.Settings (which looks providers up in the registry, so
    providers name only this)."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def max_tokens(self) -> int: ...
    @property
    def concurrency(self) -> int: ...
    @property
    def max_retries(self) -> int: ...
    @property
    def base_url(self) -> str | None: ...
    @property
    def section(self) -> str: ...
    @property
    def timeout_s(self) -> float: ...
    @property
    def temperature(self) -> float | None: ...


class Provider:
    """One API behind `generate.provider`: `name` is that setting's value. Everything params.yaml,
    the credentials and the prices need to know about it is here, so a new API is its module and
    one line in registry.py."""

    name: str
    family: str  # in the cache key: providers with interchangeable replies share one
    batch = False  # a BatchProvider: submitted in batches, half price
    sends_seed = False  # each request carries a seed (llm.runs.tasks.Job.seed), so a re-ask is not the same request
    takes_temperature = False  # the API takes <section>.temperature
    key_env: str  # the environment variable holding the user's key
    url_env: str  # the environment variable where the user may point it elsewhere
    default_url: str  # where it goes when nothing says otherwise (its SDK's default)
    official_hosts: frozenset[str] = frozenset()  # the API's own hosts: a key may go there over https
    takes_base_url = False  # <section>.base_url picks the server, and a server there may need no key
    free_on_loopback = False  # a server on this machine costs nothing
    # List prices of the models it serves, US dollars per million (input, output) tokens.
    prices: Mapping[str, tuple[float, float]] = MappingProxyType({})

    def client(self, settings: CallSettings, pause: SharedPause, max_retries: int | None = None) -> Any:
        """The SDK's async client (it has `close()`), its HTTP client from connection.guarded_http_client
        waiting on `pause` and feeding it every response; the SDK retries settings.max_retries times
        unless `max_retries` is given."""
        raise NotImplementedError

    async def send(
        self,
        client: Any,
        settings: CallSettings,
        prompt: str,
        seed: int | None = None,
        schema: ReplySchema | None = None,
    ) -> Reply:
        """One request: `prompt` as the user message, settings.model, max_tokens and temperature (if
        set), `seed` where the API takes one, the reply held to `schema` where given. A ValueError
        means an undecodable answer (it is asked again); SDK errors pass through."""
        raise NotImplementedError

    def reply(self, answer: Any, prompt: str) -> Reply:
        """The SDK's answer as a Reply, its stop reason in Anthropic's names."""
        raise NotImplementedError

    def sdk_errors(self) -> tuple[type, type]:
        """The SDK's (HTTP status error, connection error) types."""
        raise NotImplementedError

    def classify(self, error: BaseException, section: str) -> tuple[str, str]:
        """('spend_limit' | 'fatal' | 'transient', one line without secrets naming `section`'s keys):
        a key the server echoed in its error is masked."""
        kind, line = classify_error(error, *self.sdk_errors(), section)
        return kind, mask_keys(line)


@dataclass(frozen=True)
class BatchInfo:
    """A batch as the account's listing shows it."""

    id: str
    created_unix: float
    n_requests: int
    ended: bool


@dataclass(frozen=True)
class BatchResult:
    """One request's result in an ended batch: `kind` is succeeded, errored, expired or canceled."""

    custom_id: str
    kind: str
    reason: str  # why it did not succeed ("" if it did)
    answer: Any  # the SDK's answer when it succeeded (Provider.reply makes it a Reply)


class BatchProvider(Provider):
    """An API that takes up to `max_requests` requests at once, each named by a custom_id (the
    cache key). `create` must not retry: a retried create after a lost answer is a second, paid
    batch (batch.BatchRunner reconciles instead)."""

    batch = True
    max_requests: int

    def request(
        self,
        custom_id: str,
        model: str,
        max_tokens: int,
        prompt: str,
        schema: ReplySchema | None = None,
    ) -> dict:
        """One request of a batch, as the API takes it."""
        raise NotImplementedError

    async def create(self, client: Any, requests: list[dict]) -> str:
        """Create one batch, without SDK retries; its id."""
        raise NotImplementedError

    def listing(self, client: Any) -> AsyncIterator[BatchInfo]:
        """The account's batches, most recent first."""
        raise NotImplementedError

    async def status(self, client: Any, batch_id: str) -> tuple[bool, str]:
        """(ended, a few words on its progress)."""
        raise NotImplementedError

    def results(self, client: Any, batch_id: str) -> AsyncGenerator[BatchResult, None]:
        """The results of an ended batch."""
        raise NotImplementedError
