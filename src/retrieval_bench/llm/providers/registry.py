"""Every provider by its `generate.provider` name (`none`, no calls, has no entry).

A new API is one module implementing provider.Provider (its name, key and URL variables, official
hosts and list prices included) and one line here: params.yaml's choices (llm.cost.settings), the
credentials and the prices are read from the providers listed here (tests/llm/test_provider_plugin.py
adds one that way)."""

from __future__ import annotations

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.providers.anthropic import MESSAGES
from retrieval_bench.llm.providers.anthropic_batch import MESSAGE_BATCHES
from retrieval_bench.llm.providers.base import BatchProvider, Provider
from retrieval_bench.llm.providers.openai_compatible import CHAT_COMPLETIONS

PROVIDERS: dict[str, Provider] = {
    MESSAGES.name: MESSAGES,
    MESSAGE_BATCHES.name: MESSAGE_BATCHES,
    CHAT_COMPLETIONS.name: CHAT_COMPLETIONS,
}
NO_PROVIDER = "none"  # no calls: cached and hand-written questions only


def named(name: str, section: str, path: str = "params.yaml") -> Provider | None:
    """The provider <section>.provider names (None for `none`); any other name is an InputError
    listing the choices."""
    if name == NO_PROVIDER:
        return None
    if name not in PROVIDERS:
        raise InputError(
            f"{path}: {section}.provider must be one of {', '.join(sorted([NO_PROVIDER, *PROVIDERS]))}, got {name!r}"
        )
    return PROVIDERS[name]


def batch_providers() -> list[str]:
    """The names of the providers that submit batches (and collect journalled ones)."""
    return [name for name, provider in PROVIDERS.items() if provider.batch]


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
