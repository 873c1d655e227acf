"""The entry points: run a task's jobs through the configured provider (sync or batch), or resume
the journalled batches of an earlier run; a clean stop ends in one line (StopGeneration), and so
does Ctrl-C (io.Interrupted, naming what was kept and what a rerun resumes).

Only model replies are cached (replies the task's parser rejects too, so a refusal is not paid
for on every run); a request the API failed is never cached and is asked again.

Whatever needs no network (the API key and where it may be sent) is checked before the progress
bar appears.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from retrieval_bench.core.errors import Interrupted
from retrieval_bench.llm.cache.replies import CacheWriter, journal_path_for
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.providers.base import BatchProvider, Provider
from retrieval_bench.llm.providers.registry import batch_api
from retrieval_bench.llm.runs.batch import run_batches
from retrieval_bench.llm.runs.context import RunContext
from retrieval_bench.llm.runs.progress import Meter, Outcome
from retrieval_bench.llm.runs.sync import run_sync
from retrieval_bench.llm.runs.tasks import Job, Task
from retrieval_bench.llm.transport.errors import StopGeneration
from retrieval_bench.llm.transport.ratelimit import SharedPause


def run(task: Task, jobs: list[Job], meta: Meta, settings: Settings, cache_path: str | Path) -> Outcome:
    """Generate `jobs`, appending every reply to the cache as it arrives. Raises StopGeneration
    on a clean stop (spend limit, refused request, cost limit, unreachable endpoint, full disk);
    failed requests are listed in the outcome and stay uncached. The caller holds the cache's
    lock (retrieval_bench.core.locking) and has reconciled the journal (resume_batches)."""
    provider = settings.api
    assert provider is not None  # generation runs only with a provider (not `none`)
    preflight(provider, settings)
    meter = Meter(len(jobs), settings, f"{task.stage} ({settings.provider})", task.stage)
    writer = CacheWriter(cache_path)
    context = RunContext(task, settings, cache_path, writer, meter)
    try:
        if isinstance(provider, BatchProvider):
            outcome = asyncio.run(run_batches(provider, context, jobs, meta, resume=[], intents=[]))
        else:
            outcome = asyncio.run(run_sync(provider, context, jobs, meta))
    except KeyboardInterrupt:
        raise interrupted(meter.outcome, cache_path, settings.batch) from None
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def preflight(provider: Provider, settings: Settings) -> None:
    """The checks that need no network, before any bar: the provider's client is built (the API
    key is there, and may go where the URL points) and closed without a request."""
    client = provider.client(settings, SharedPause())
    asyncio.run(client.close())


def interrupted(outcome: Outcome, cache_path: str | Path, batch: bool) -> Interrupted:
    """The one line Ctrl-C ends a run with: what is kept and what a rerun does."""
    kept = max(outcome.kept, outcome.succeeded)
    line = f"interrupted; {kept} replies are kept in {cache_path} ({usd(outcome.cost)} spent), a rerun asks only for the rest"
    if batch:
        line += f"; batches already submitted are journalled in {journal_path_for(cache_path)}: a rerun collects them, paying nothing twice"
    return Interrupted(line)


def can_resume(settings: Settings) -> bool:
    """Whether the configured provider's family has a batch API to collect journalled batches with."""
    return batch_api(settings.family) is not None


def resume_batches(
    task: Task, events: list[dict], settings: Settings, cache_path: str | Path, intents: list[dict] | None = None
) -> Outcome:
    """Reconcile the journalled intents without an outcome (adopting any batch they created),
    then poll the journalled, uncollected batches `events` (and the adopted ones) until they end
    and cache their results, through the batch API of the configured provider's family."""
    intents = intents or []
    total = sum(len(event["requests"]) for event in events) + sum(len(i["requests"]) for i in intents)
    api = batch_api(settings.family)
    assert api is not None  # journalled batches were made by a batch API of this family
    preflight(api, settings)
    meter = Meter(total, settings, f"{task.stage}: resume batches", task.stage, batch=True)
    writer = CacheWriter(cache_path)
    context = RunContext(task, settings, cache_path, writer, meter)
    try:
        outcome = asyncio.run(run_batches(api, context, [], None, resume=events, intents=intents))
    except KeyboardInterrupt:
        raise interrupted(meter.outcome, cache_path, batch=True) from None
    finally:
        writer.close()
        meter.close()
    _raise_on_stop(outcome, cache_path)
    return outcome


def _raise_on_stop(outcome: Outcome, cache_path: str | Path) -> None:
    if outcome.stop:
        kept = (
            "(nothing received is paid for twice)" if not outcome.unsaved else "(the replies kept are not paid again)"
        )
        raise StopGeneration(
            f"{outcome.stop}; {outcome.kept} replies from this run are kept in {cache_path} "
            f"({usd(outcome.cost)} spent); rerun to ask for the rest: only what is missing is requested {kept}"
        )
