"""generate.provider `anthropic`: the Messages API through AsyncAnthropic.

The SDK retries 429/5xx/connection errors generate.max_retries times and honours
retry-after(-ms), capped at generate.timeout_s; the shared pause (ratelimit.py) holds back every
worker on top of that. The key comes only from ANTHROPIC_API_KEY and the endpoint only from
ANTHROPIC_BASE_URL (credentials.py), and its models' list prices are here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from retrieval_bench.llm.providers.base import CallSettings, Provider, Reply, reply_text, reported_tokens
from retrieval_bench.llm.providers.schema import ReplySchema
from retrieval_bench.llm.transport.connection import ConnectionGuard, guarded_http_client
from retrieval_bench.llm.transport.credentials import endpoint_for

if TYPE_CHECKING:
    from retrieval_bench.llm.transport.ratelimit import SharedPause


# Anthropic's list prices, US dollars per million input / output tokens (the Message Batches API:
# half). A dated snapshot (claude-haiku-4-5-20251001) costs what its alias costs (llm.cost.prices).
LIST_PRICES = MappingProxyType(
    {
        "claude-haiku-4-5": (1.0, 5.0),
        "claude-sonnet-4-5": (3.0, 15.0),
        "claude-opus-4-1": (15.0, 75.0),
    }
)


class Messages(Provider):
    name = "anthropic"
    family = "anthropic"  # the Message Batches API returns the same replies: one family, one cache
    key_env = "ANTHROPIC_API_KEY"
    url_env = "ANTHROPIC_BASE_URL"  # the only way to point it elsewhere: params.yaml cannot
    default_url = "https://api.anthropic.com"
    official_hosts = frozenset({"api.anthropic.com"})
    prices = LIST_PRICES

    def client(self, settings: CallSettings, pause: SharedPause, max_retries: int | None = None) -> Any:
        import anthropic
        import httpx2

        endpoint = endpoint_for(self, settings.base_url, section=settings.section)
        http = guarded_http_client(
            anthropic,
            anthropic.AnthropicError,
            pause,
            ConnectionGuard(endpoint),
            settings.timeout_s,
            settings.section,
            limits=httpx2.Limits(
                max_connections=max(settings.concurrency * 2, 10), max_keepalive_connections=settings.concurrency + 2
            ),
        )
        # api_key given: no profile on disk is read.
        return anthropic.AsyncAnthropic(
            api_key=endpoint.key,
            base_url=endpoint.url,
            http_client=http,
            timeout=settings.timeout_s,
            max_retries=settings.max_retries if max_retries is None else max_retries,
        )

    async def send(
        self,
        client: Any,
        settings: CallSettings,
        prompt: str,
        seed: int | None = None,
        schema: ReplySchema | None = None,
    ) -> Reply:
        message = await client.messages.create(**message_params(settings.model, settings.max_tokens, prompt, schema))
        return self.reply(message, prompt)

    def reply(self, answer: Any, prompt: str = "") -> Reply:
        blocks = getattr(answer, "content", None)
        if not isinstance(blocks, list):  # e.g. a server's {"foo": 1} or null: retried, then a counted failure
            raise ValueError("not a Messages reply (no content blocks)")
        text = reply_text([block for block in blocks if getattr(block, "type", None) == "text"])
        tokens = reported_tokens(getattr(answer, "usage", None), "input_tokens", "output_tokens", prompt, text)
        return Reply(text, answer.stop_reason, *tokens)

    def sdk_errors(self) -> tuple[type, type]:
        import anthropic

        return anthropic.APIStatusError, anthropic.APIConnectionError


def message_params(model: str, max_tokens: int, prompt: str, schema: ReplySchema | None) -> dict[str, Any]:
    """A Messages request's parameters, a schema as structured output (`output_config.format`). The
    anthropic SDK 2.14 takes neither a seed nor a temperature (check_params refuses one)."""
    params: dict[str, Any] = {
        "model": model,
        "max_tokens": max_tokens,
        "messages": [{"role": "user", "content": prompt}],
    }
    if schema is not None:
        params["output_config"] = {"format": {"type": "json_schema", "schema": schema.schema}}
    return params


MESSAGES = Messages()
