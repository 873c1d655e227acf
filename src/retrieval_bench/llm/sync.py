"""The sync runner: generate.concurrency requests at a time through one provider, every reply
appended to the cache as it arrives.

It stops cleanly (Outcome.stop) at a spend limit, a refused request, an unreachable endpoint,
generate.max_cost_usd (counting the requests in flight at their worst case), a disk too full to
keep the replies in flight (before paying for more), or a run of failures; a failed request is
never cached and is asked again by the next run.
"""
from __future__ import annotations

import asyncio
import threading

from retrieval_bench.llm.cache import CacheWriteError, CacheWriter, free_bytes
from retrieval_bench.llm.connection import EndpointUnreachable
from retrieval_bench.llm.prices import usd
from retrieval_bench.llm.progress import Meter, Outcome
from retrieval_bench.llm.provider import Provider, Reply
from retrieval_bench.llm.ratelimit import SharedPause
from retrieval_bench.llm.settings import Meta, Settings
from retrieval_bench.llm.tasks import Job, Task
from retrieval_bench.llm.tokens import estimate_input_tokens

MALFORMED_TRIES = 3  # a reply that cannot be decoded (a proxy hiccup) is asked again this often
# Free space kept on the cache's disk for the replies in flight: a sync run stops before paying
# for a request when less is free (SPACE_RESERVE_BYTES + this much per request in flight); a
# batch is not created without room for its results (batch.RESULT_BYTES_PER_REQUEST).
SPACE_RESERVE_BYTES = 1 << 20
SPACE_PER_REPLY_BYTES = 64 << 10


async def run_sync(provider: Provider, task: Task, jobs: list[Job], meta: Meta, settings: Settings,
                   writer: CacheWriter, meter: Meter) -> Outcome:
    pause = SharedPause(on_pause=meter.write)
    client = provider.client(settings, pause)
    outcome = meter.outcome
    semaphore = asyncio.Semaphore(settings.concurrency)
    worst_case = settings.cost(
        max((estimate_input_tokens(j.prompt) for j in jobs), default=0), settings.max_tokens, batch=False
    )
    state = {"in_flight": 0, "consecutive_failures": 0}
    breaker = max(10, 2 * settings.concurrency)
    unsaved: list[tuple[dict, Reply]] = []
    space_needed = SPACE_RESERVE_BYTES + settings.concurrency * SPACE_PER_REPLY_BYTES
    kept_lock = threading.Lock()

    def keep(record: dict) -> None:  # in a worker thread: counted once written, even if Ctrl-C cancels the wait
        writer.append(record)
        with kept_lock:
            outcome.kept += 1

    async def one(job: Job) -> None:
        async with semaphore:
            if outcome.stop:
                return
            free = free_bytes(writer.path)
            if free < space_needed:
                outcome.stop = outcome.stop or (
                    f"only {free / 1e6:.1f} MB free on the disk holding {writer.path}, below the {space_needed / 1e6:.1f} MB "
                    "kept for the replies in flight: stopped before paying for more, so nothing paid was lost"
                )
                return
            limit = settings.max_cost_usd
            if limit is not None and outcome.cost + (state["in_flight"] + 1) * worst_case > limit:
                outcome.stop = outcome.stop or (
                    f"stopped at generate.max_cost_usd {usd(limit)} (spent {usd(outcome.cost, against=limit)})"
                )
                return
            state["in_flight"] += 1
            try:
                for tries in range(1, MALFORMED_TRIES + 1):
                    try:
                        reply = await provider.send(client, settings, job.prompt)
                        break
                    except ValueError as error:  # an undecodable body: JSON or schema errors
                        if tries == MALFORMED_TRIES:
                            raise
                        meter.write(f"malformed reply ({type(error).__name__}); asking again")
                        await asyncio.sleep(0.2 * tries)
            except Exception as error:  # noqa: BLE001 - every failure is classified and reported
                kind, message = provider.classify(error)
                if kind == "spend_limit" or pause.spend_limited:
                    outcome.stop = outcome.stop or f"the API's spend limit or credit is exhausted ({message})"
                elif isinstance(error, EndpointUnreachable):
                    outcome.stop = outcome.stop or message
                elif kind == "fatal":
                    outcome.stop = outcome.stop or f"the API refused the request: {message}"
                else:
                    meter.fail(message)
                    state["consecutive_failures"] += 1
                    if state["consecutive_failures"] >= breaker:
                        outcome.stop = outcome.stop or f"{breaker} requests in a row failed after retries (last: {message})"
                return
            finally:
                state["in_flight"] -= 1
            state["consecutive_failures"] = 0
            record = task.record(meta, job.key, job.passage_sha256, job.attempt, reply)
            try:
                await asyncio.to_thread(keep, record)  # fsync off the event loop; appends are serialised
            except CacheWriteError as error:
                unsaved.append((record, reply))
                outcome.stop = outcome.stop or str(error)
                return
            meter.add(reply, rejected=record["rejected"] is not None)

    try:
        await asyncio.gather(*(one(job) for job in jobs))
    finally:
        await client.close()
        summary = pause.summary()
        if summary:
            meter.write(summary)
    if unsaved:
        _save_late(unsaved, writer, meter)
    return outcome


def _save_late(unsaved: list[tuple[dict, Reply]], writer: CacheWriter, meter: Meter) -> None:
    """Try once more to write the replies a failed write left in memory (the requests in flight
    when the disk filled), then say plainly what could not be kept."""
    outcome = meter.outcome
    lost = 0
    for record, reply in unsaved:
        try:
            writer.append(record)
            outcome.kept += 1
            meter.add(reply, rejected=record["rejected"] is not None)
        except CacheWriteError:
            meter.add(reply, rejected=False, saved=False)
            lost += 1
    if lost:
        outcome.stop = (f"{outcome.stop}; the cache is consistent (a torn line is never left), but {lost} replies "
                        "received after that could not be saved and will be asked again")
    else:
        outcome.stop = f"{outcome.stop}; the cache is consistent and nothing paid was lost"
