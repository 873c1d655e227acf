"""RunContext: what a sync or a batch run works with besides its provider, its jobs and how their
records are made (Meta): one frozen object that llm.runs.runner builds for either runner."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from retrieval_bench.llm.cache.replies import CacheWriter
from retrieval_bench.llm.cost.settings import Settings
from retrieval_bench.llm.runs.progress import Meter
from retrieval_bench.llm.runs.tasks import Task


@dataclass(frozen=True)
class RunContext:
    """The task asked; the settings its requests go with (<section>.max_cost_usd: what is left of it
    for this round); the cache its replies are appended to, through `writer` (the caller closes
    it); the meter counting them (its outcome is the run's)."""

    task: Task
    settings: Settings
    cache_path: str | Path
    writer: CacheWriter
    meter: Meter
