"""What the LLM-layer tests share: a question template, jobs over numbered passages, and settings."""

from __future__ import annotations

import hashlib

from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.providers.registry import PROVIDERS
from retrieval_bench.llm.runs.tasks import QUESTIONS, Job

TEMPLATE = "Write one question.\n<passage>\n{passage}\n</passage>\n"


def jobs_for(n: int, provider: str = "anthropic", model: str = "claude-haiku-4-5") -> tuple[Meta, list[Job]]:
    meta = Meta(provider, PROVIDERS[provider].family, model, "p" * 64, 300)
    texts = [f"Passage {i}: the write-ahead log keeps page {i} until a checkpoint copies it back." for i in range(n)]
    return meta, [QUESTIONS.job(meta, TEMPLATE, text, hashlib.sha256(text.encode()).hexdigest(), 0) for text in texts]


def settings(provider: str = "anthropic", **overrides) -> Settings:
    values = dict(provider=provider, concurrency=4, max_retries=3, batch_poll_seconds=0.05)
    values.update(overrides)
    return Settings.from_params(values)
