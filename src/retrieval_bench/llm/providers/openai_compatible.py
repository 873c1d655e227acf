"""generate.provider `openai-compatible`: chat completions through the openai SDK at
generate.base_url (vLLM, Ollama, a llama.cpp server, or OpenAI itself).

OPENAI_API_KEY goes only where its user pointed it (credentials.endpoint_for); local servers
take any key, so a placeholder is sent when none is set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from retrieval_bench.llm.providers.base import CallSettings, Provider, Reply, reply_text, reported_tokens
from retrieval_bench.llm.providers.schema import ReplySchema
from retrieval_bench.llm.transport.connection import ConnectionGuard, guarded_http_client
from retrieval_bench.llm.transport.credentials import endpoint_for

if TYPE_CHECKING:
    from retrieval_bench.llm.transport.ratelimit import SharedPause

# finish_reason in Anthropic's stop_reason names (what the reply hygiene reads).
_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "content_filter": "refusal", "tool_calls": "tool_use"}


class ChatCompletions(Provider):
    name = "openai-compatible"
    family = "openai-compatible"
    sends_seed = True
    takes_temperature = True
    key_env = "OPENAI_API_KEY"
    url_env = "OPENAI_BASE_URL"
    default_url = "https://api.openai.com/v1"
    official_hosts = frozenset({"api.openai.com"})
    takes_base_url = True
    free_on_loopback = True  # vLLM, Ollama, llama.cpp on this machine

    def client(self, settings: CallSettings, pause: SharedPause, max_retries: int | None = None) -> Any:
        import openai

        # Refuses a params.yaml base_url the user did not vouch for while OPENAI_API_KEY is set.
        endpoint = endpoint_for(self, settings.base_url, section=settings.section)
        http = guarded_http_client(
            openai, openai.OpenAIError, pause, ConnectionGuard(endpoint), settings.timeout_s, settings.section
        )
        # Local servers take any key; a placeholder is sent when the key is not set. The URL is
        # always given: a provider of this protocol but another vendor has its own default.
        return openai.AsyncOpenAI(
            api_key=endpoint.key,
            base_url=endpoint.url or self.default_url,
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
        options: dict[str, Any] = {}
        if settings.temperature is not None:
            options["temperature"] = settings.temperature
        if seed is not None:
            options["seed"] = seed
        if schema is not None:
            options["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": schema.name, "schema": schema.schema, "strict": True},
            }
        completion = await client.chat.completions.create(
            model=settings.model,
            max_tokens=settings.max_tokens,
            messages=[{"role": "user", "content": prompt}],
            **options,
        )
        return self.reply(completion, prompt)

    def reply(self, answer: Any, prompt: str) -> Reply:
        if not answer.choices:
            raise ValueError("a completion without choices")
        choice = answer.choices[0]
        if getattr(choice, "message", None) is None:
            raise ValueError("a completion choice without a message")
        text = reply_text(choice.message.content)
        tokens = reported_tokens(answer.usage, "prompt_tokens", "completion_tokens", prompt, text)
        return Reply(text, _STOP_REASONS.get(choice.finish_reason or "", choice.finish_reason), *tokens)

    def sdk_errors(self) -> tuple[type, type]:
        import openai

        return openai.APIStatusError, openai.APIConnectionError


CHAT_COMPLETIONS = ChatCompletions()
