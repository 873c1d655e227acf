"""Every provider by its `generate.provider` name (`none`, no calls, has no entry).

A new API is one module implementing provider.Provider and one line here (params.py lists the
names params.yaml may use; tests/test_generate.py checks the two agree)."""

from __future__ import annotations

from retrieval_bench.llm.anthropic import MESSAGES
from retrieval_bench.llm.anthropic_batch import MESSAGE_BATCHES
from retrieval_bench.llm.openai_compatible import CHAT_COMPLETIONS
from retrieval_bench.llm.provider import BatchProvider, Provider

PROVIDERS: dict[str, Provider] = {provider.name: provider for provider in (MESSAGES, MESSAGE_BATCHES, CHAT_COMPLETIONS)}


def batch_api(family: str | None) -> BatchProvider | None:
    """The batch API of a family, which collects journalled batches whichever provider of the
    family a rerun uses."""
    return next((p for p in PROVIDERS.values() if isinstance(p, BatchProvider) and p.family == family), None)


def counterpart(name: str) -> Provider | None:
    """The provider of the same family on the other side of sync / batch (for the dry run's "with
    ... instead" price), if there is one."""
    provider = PROVIDERS.get(name)
    if provider is None:
        return None
    return next((p for p in PROVIDERS.values() if p.family == provider.family and p.batch != provider.batch), None)
