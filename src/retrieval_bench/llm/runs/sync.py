"""The sync runner: generate.concurrency requests at a time through one provider, every reply
appended to the cache as it arrives.

It stops cleanly (Outcome.stop) at a spend limit, a refused request, an unreachable endpoint,
settings.max_cost_usd (what llm.runs.paid left of <section>.max_cost_usd for this round; counting the
requests in flight at their worst case), a disk too full to keep the replies in flight (before
paying for more), or a run of failures; a failed request is never cached and is asked again by
the next run, and neither is a reply that holds the API key (credentials.key_leak), which counts
as failed.
"""

from __future__ import annotations

import asyncio
import math
import threading

from retrieval_bench.core.logs import Log
from retrieval_bench.llm.cache.replies import CacheWriteError, CacheWriter, free_bytes
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.providers.base import Provider, Reply
from retrieval_bench.llm.providers.tokens import estimate_input_tokens
from retrieval_bench.llm.runs.context import RunContext
from retrieval_bench.llm.runs.progress import Meter, Outcome
from retrieval_bench.llm.runs.tasks import Job
from retrieval_bench.llm.transport.connection import timed_out
from retrieval_bench.llm.transport.credentials import endpoint_for, key_leak
from retrieval_bench.llm.transport.errors import EndpointUnreachable
from retrieval_bench.llm.transport.ratelimit import SharedPause


def failures_to_stop(concurrency: int) -> int:
    """How many requests in a row may fail before a run stops rather than pay on."""
    return max(10, 2 * concurrency)


MALFORMED_TRIES = 3  # a reply that cannot be decoded (a proxy hiccup) is asked again this often
# Free space kept on the cache's disk for the replies in flight: a sync run stops before paying
# for a request when less is free (SPACE_RESERVE_BYTES + this much per request in flight); a
# batch is not created without room for its results (batch.RESULT_BYTES_PER_REQUEST).
SPACE_RESERVE_BYTES = 1 << 20
SPACE_PER_REPLY_BYTES = 64 << 10


def run_pause(settings: Settings, on_pause: Log) -> SharedPause:
    """A run's shared pause (sync or batch): server-asked waits capped at its section's timeout_s,
    lines written by `on_pause`."""
    return SharedPause(on_pause, settings.timeout_s, f"{settings.section}.timeout_s")


async def run_sync(provider: Provider, context: RunContext, jobs: list[Job], meta: Meta) -> Outcome:
    return await _SyncRun(provider, context, meta).run(jobs)


class _SyncRun:
    """One sync run's shared state: the client, the pause, the in-flight count, the breaker."""

    def __init__(self, provider: Provider, context: RunContext, meta: Meta) -> None:
        settings, meter = context.settings, context.meter
        self.provider, self.meta = provider, meta
        self.task, self.settings, self.writer, self.meter = context.task, settings, context.writer, meter
        self.pause = run_pause(settings, meter.write)
        self.client = provider.client(settings, self.pause)
        self.key = endpoint_for(provider, settings.base_url, section=settings.section).key  # never stored (key_leak)
        self.outcome = meter.outcome
        self.semaphore = asyncio.Semaphore(settings.concurrency)
        self.worst_case = 0.0
        self.longest_prompt = 0  # estimated input tokens of the longest prompt of the run
        self.tokens_per_estimate = 1.0  # the most input tokens the API reported per estimated one
        self.in_flight = 0
        self.consecutive_failures = 0
        self.breaker = failures_to_stop(settings.concurrency)
        self.unsaved: list[tuple[dict, Reply]] = []
        self.short_of_room = False  # the disk check stopped the run
        self.space_needed = SPACE_RESERVE_BYTES + settings.concurrency * SPACE_PER_REPLY_BYTES
        self.kept_lock = threading.Lock()
        self.schema = self.task.schema if settings.response_format == "json_schema" else None

    async def run(self, jobs: list[Job]) -> Outcome:
        self.longest_prompt = max((estimate_input_tokens(j.prompt) for j in jobs), default=0)
        self.worst_case = self.settings.cost(self.longest_prompt, self.settings.max_tokens, batch=False)
        try:
            await asyncio.gather(*(self.one(job) for job in jobs))
        finally:
            await self.client.close()
            self.pause.report()
        if self.unsaved or self.short_of_room:  # what the disk kept is known only now
            _save_late(self.unsaved, self.writer, self.meter)
        return self.outcome

    def stop(self, reason: str) -> None:
        """The first reason to stop wins: later ones follow from it."""
        self.outcome.stop = self.outcome.stop or reason

    def keep(self, record: dict) -> None:  # in a worker thread: counted once written, even if Ctrl-C cancels the wait
        self.writer.append(record)
        with self.kept_lock:
            self.outcome.kept += 1

    def may_pay(self) -> bool:
        """Room on the disk for the replies in flight, and the cost limit not reached counting
        them at their worst case; else the run stops before paying for more."""
        free = free_bytes(self.writer.path)
        if free < self.space_needed:
            self.stop(
                f"only {free / 1e6:.1f} MB free on the disk holding {self.writer.path}, below the "
                f"{self.space_needed / 1e6:.1f} MB kept for the replies in flight: stopped before paying for more"
            )
            self.short_of_room = True
            return False
        limit = self.settings.max_cost_usd
        if limit is not None and self.outcome.cost + (self.in_flight + 1) * self.worst_case > limit:
            # Said when the next request is held back, before the ones in flight are paid for: the
            # closing line counts what they cost once they are in.
            self.stop(
                f"stopped before passing {self.settings.section}.max_cost_usd: with "
                f"{usd(self.outcome.cost, against=limit)} spent and {self.in_flight} requests in flight (each up to "
                f"{usd(self.worst_case)}), the next could pass the {usd(limit)} this run had left"
            )
            return False
        return True

    def observe(self, job: Job, reply: Reply) -> None:
        """Raise the worst case of a request to what the API counts: the character estimate leans
        high for English, low for code or CJK text (2 tokens a character passed max_cost_usd by a
        quarter), so once a reply reports more input tokens than estimated, every request's worst
        case grows by that ratio."""
        ratio = reply.input_tokens / max(1, estimate_input_tokens(job.prompt))
        if math.isfinite(ratio) and ratio > self.tokens_per_estimate:
            self.tokens_per_estimate = ratio
            worst_input = math.ceil(self.longest_prompt * ratio)
            self.worst_case = self.settings.cost(worst_input, self.settings.max_tokens, batch=False)

    async def send(self, job: Job) -> Reply:
        """One request; an undecodable reply is asked again up to MALFORMED_TRIES times."""
        tries = 1
        while True:
            try:
                return await self.provider.send(self.client, self.settings, job.prompt, job.seed, self.schema)
            except ValueError as error:  # an undecodable body: JSON or schema errors
                if tries == MALFORMED_TRIES:
                    raise
                self.meter.write(f"malformed reply ({type(error).__name__}); asking again")
                await asyncio.sleep(0.2 * tries)
                tries += 1

    def failed(self, error: Exception) -> None:
        """A request that failed after the SDK's retries: a clean stop, or one failure more."""
        kind, message = self.provider.classify(error, self.settings.section)
        if kind == "spend_limit" or self.pause.spend_limited:
            self.stop(f"the API's spend limit or credit is exhausted ({message})")
        elif isinstance(error, EndpointUnreachable):
            self.stop(message)
        elif kind == "fatal":
            self.stop(f"the API refused the request: {message}")
        else:
            self.meter.fail(message, timed_out=timed_out(error))
            self.failed_in_a_row(f"failed after retries (last: {message})")

    def failed_in_a_row(self, how: str) -> None:
        """One more failure in a row: at `breaker` of them the run stops rather than pay on."""
        self.consecutive_failures += 1
        if self.consecutive_failures >= self.breaker:
            self.stop(f"{self.breaker} requests in a row {how}")

    async def one(self, job: Job) -> None:
        async with self.semaphore:
            if self.outcome.stop or not self.may_pay():
                return
            # In flight (counted at its worst case by may_pay) until its reply is billed: a reply
            # waiting for its write was counted nowhere, and other requests passed max_cost_usd.
            self.in_flight += 1
            try:
                await self._ask_and_keep(job)
            finally:
                self.in_flight -= 1

    async def _ask_and_keep(self, job: Job) -> None:
        try:
            reply = await self.send(job)
        except Exception as error:  # noqa: BLE001 - every failure is classified and reported
            self.failed(error)
            return
        self.observe(job, reply)
        record = self.task.record(self.meta, job.key, job.passage_sha256, job.attempt, reply, seed=job.seed)
        leak = key_leak(record, self.key)
        if leak:  # billed, never kept: a server echoing the key is stopped as failing requests are
            self.meter.fail(leak, paid=reply)
            self.failed_in_a_row("were replies holding the API key, never kept")
            return
        self.consecutive_failures = 0
        try:
            await asyncio.to_thread(self.keep, record)  # fsync off the event loop; appends are serialised
        except CacheWriteError as error:
            self.unsaved.append((record, reply))
            self.stop(str(error))
            return
        self.meter.add(reply, rejected=record["rejected"] is not None, note=self.task.note(record))


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
        outcome.stop = (
            f"{outcome.stop}; the cache is consistent (a torn line is never left), but {lost} replies "
            "received after that could not be saved and will be asked (and paid for) again"
        )
    else:
        outcome.stop = f"{outcome.stop}; the cache is consistent and nothing paid was lost"
