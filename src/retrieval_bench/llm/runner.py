"""The entry points: run a task's jobs through the configured provider (sync or batch), or resume
the journalled batches of an earlier run; a clean stop ends in one line (StopGeneration).

Only model replies are cached (replies the task's parser rejects too, so a refusal is not paid
for on every run); a request the API failed is never cached and is asked again.
"""
from __future__ import annotations

import asyncio
from pathlib import Path

from retrieval_bench.goldenset.cache import CacheWriter
from retrieval_bench.llm.batch import run_batches
from retrieval_bench.llm.errors import StopGeneration
from retrieval_bench.llm.progress import Meter, Outcome
from retrieval_bench.llm.provider import BatchProvider
from retrieval_bench.llm.registry import batch_api
from retrieval_bench.llm.settings import Meta, Settings
from retrieval_bench.llm.sync import run_sync
from retrieval_bench.llm.tasks import Job, Task


def run(task: Task, jobs: list[Job], meta: Meta, settings: Settings, cache_path: str | Path) -> Outcome:
    """Generate `jobs`, appending every reply to the cache as it arrives. Raises StopGeneration
    on a clean stop (spend limit, refused request, cost limit, unreachable endpoint, full disk);
    failed requests are listed in the outcome and stay uncached. The caller holds the cache's
    lock (retrieval_bench.locking) and has reconciled the journal (resume_batches)."""
    provider = settings.api
    meter = Meter(len(jobs), settings, f"generate ({settings.provider})")
    writer = CacheWriter(cache_path)
    try:
        if isinstance(provider, BatchProvider):
            outcome = asyncio.run(run_batches(provider, task, jobs, meta, settings, cache_path, writer, meter, [], []))
        else:
            outcome = asyncio.run(run_sync(provider, task, jobs, meta, settings, writer, meter))
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def can_resume(settings: Settings) -> bool:
    """Whether the configured provider's family has a batch API to collect journalled batches with."""
    return batch_api(settings.family) is not None


def resume_batches(task: Task, events: list[dict], settings: Settings, cache_path: str | Path,
                   intents: list[dict] | None = None) -> Outcome:
    """Reconcile the journalled intents without an outcome (adopting any batch they created),
    then poll the journalled, uncollected batches `events` (and the adopted ones) until they end
    and cache their results, through the batch API of the configured provider's family."""
    intents = intents or []
    total = sum(len(event["requests"]) for event in events) + sum(len(i["requests"]) for i in intents)
    meter = Meter(total, settings, "resume batches", batch=True)
    writer = CacheWriter(cache_path)
    try:
        outcome = asyncio.run(run_batches(batch_api(settings.family), task, [], None, settings, cache_path, writer, meter,
                                          events, intents))
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
