"""A provider added as a third party would add one: this module, and one line in llm/providers/registry.py
(tests/llm/test_provider_plugin.py adds that line). It speaks the chat-completions protocol, so the
stub server answers it; everything else is its own: name, family (its own cache keys), key and
URL variables, official host and list prices."""

from __future__ import annotations

from types import MappingProxyType

from retrieval_bench.llm.providers.openai_compatible import ChatCompletions


class FakeChat(ChatCompletions):
    name = "fake-llm"
    family = "fake-llm"
    takes_temperature = False
    key_env = "FAKE_LLM_API_KEY"
    url_env = "FAKE_LLM_BASE_URL"
    default_url = "https://api.fake-llm.example/v1"
    official_hosts = frozenset({"api.fake-llm.example"})
    takes_base_url = True
    free_on_loopback = False  # a server of its own is paid for like the API
    prices = MappingProxyType({"fake-small": (2.0, 8.0)})


FAKE_CHAT = FakeChat()
