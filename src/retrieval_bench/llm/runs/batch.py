"""The batch runner: submit, wait, collect, with a journal so that no batch is ever paid for twice.

Each batch's intent (its requests and the sha256 of their keys, which are also their
custom_ids) is journalled and fsynced (data/question_cache.batches.jsonl, next to the cache)
before `create`, which is called with SDK retries off; its id is journalled before waiting, so a
rerun after a crash resumes polling instead of submitting again. Any outcome that leaves it
unknown whether the batch exists (a 5xx, a timeout, a connection lost after sending, a kill) is
reconciled by listing the account's batches created since the intent and adopting the one with
those requests before anything is submitted again. Errored, expired and canceled requests stay
uncached and are submitted again by the next run.

The API itself (request shape, create, listing, status, results) is the BatchProvider's.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import time
from collections import Counter
from collections.abc import Iterable
from datetime import datetime, timezone
from pathlib import Path

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.cache.replies import (
    CacheWriteError,
    CacheWriter,
    free_bytes,
    journal_path_for,
    read_cache,
    read_journal,
)
from retrieval_bench.llm.cost.settings import Meta
from retrieval_bench.llm.providers.base import BatchProvider, BatchResult
from retrieval_bench.llm.runs.context import RunContext
from retrieval_bench.llm.runs.progress import Outcome
from retrieval_bench.llm.runs.sync import SPACE_RESERVE_BYTES, run_pause
from retrieval_bench.llm.runs.tasks import Job
from retrieval_bench.llm.transport.credentials import endpoint_for, key_leak
from retrieval_bench.llm.transport.errors import EndpointUnreachable, StopGeneration

# An intent without a batch is reconciled by listing the batches created since it was written
# (less this much, for a server clock behind ours), adopting one whose requests are its requests.
RECONCILE_CLOCK_SKEW_S = 300.0
# A batch whose creation may still be under way (the request was sent, the answer never came) is
# looked for until the intent is this old, before it is declared never created.
RECONCILE_GRACE_S = 20.0
GRACE_ENV = "RETRIEVAL_BENCH_RECONCILE_GRACE_S"
RECONCILE_LIST_LIMIT = 10_000  # batches examined per listing, at most
CREATE_TRIES = 3  # creates of one request set, when the API says it created nothing (429, connection refused)
RESULT_BYTES_PER_REQUEST = 8 << 10  # room kept on the disk for each result of a batch


def intent_id(keys: Iterable[str]) -> str:
    """The content hash of a request set: the sha256 of its sorted keys (= custom_ids)."""
    return hashlib.sha256("\n".join(sorted(keys)).encode("ascii")).hexdigest()


def reconcile_grace_s() -> float:
    value = os.environ.get(GRACE_ENV)
    try:
        return max(0.0, float(value)) if value else RECONCILE_GRACE_S
    except ValueError:
        raise InputError(f"{GRACE_ENV} must be a number of seconds, got {value!r}") from None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="microseconds")


def _not_created(error: BaseException) -> bool:
    """Whether a failed create certainly created nothing: the API refused it (4xx, 429 included)
    or the request never left this machine (no connection). A 5xx, a timeout or a connection
    lost after sending leaves it unknown."""
    if isinstance(error, EndpointUnreachable):
        return True
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        return 400 <= status < 500
    import httpx2

    cause = error.__cause__
    return isinstance(cause, (httpx2.ConnectError, httpx2.ConnectTimeout))


MAX_POLL_FAILURES = 10  # consecutive failed polls of one batch before the run stops (nothing is lost)


class BatchRunner:
    def __init__(self, api: BatchProvider, context: RunContext) -> None:
        settings = context.settings
        self.api = api
        self.task = context.task
        self.settings = settings
        self.journal_path = journal_path_for(context.cache_path)
        self.cache_path = Path(context.cache_path)
        self.writer = context.writer
        self.meter = context.meter
        self.pause = run_pause(settings, self.meter.write)
        self.client = api.client(settings, self.pause)
        self.key = endpoint_for(api, settings.base_url, section=settings.section).key  # never stored (key_leak)
        self.journal = CacheWriter(self.journal_path, checksum=False)
        self.strangers: set[str] = set()  # keys of intents whose adopted batch turned out to be someone else's

    async def close(self) -> None:
        self.journal.close()
        await self.client.close()
        self.pause.report()

    def _journal(self, event: dict, what: str) -> None:
        try:
            self.journal.append(event)
        except CacheWriteError as error:
            raise StopGeneration(
                f"{error} ({what}); nothing was lost: the journal is consistent and a rerun "
                "finds any batch already created instead of paying for it again"
            ) from None

    def _check_space(self, n_requests: int, outcome: str) -> None:
        """Room on the cache's disk for `n_requests` results, before submitting or reading them;
        `outcome`: what stopping here means, for the one line."""
        need = SPACE_RESERVE_BYTES + n_requests * RESULT_BYTES_PER_REQUEST
        free = free_bytes(self.cache_path)
        if free < need:
            raise StopGeneration(
                f"only {free / 1e6:.1f} MB free on the disk holding {self.cache_path}, below the {need / 1e6:.1f} MB "
                f"needed {outcome}"
            )

    # --- submission: intent first, create once, reconcile anything ambiguous ---------------------
    async def submit(self, jobs: list[Job], meta: Meta) -> list[dict]:
        events: list[dict] = []
        for begin in range(0, len(jobs), self.api.max_requests):
            chunk = jobs[begin : begin + self.api.max_requests]
            events.extend(await self._submit_one(chunk, meta, len(events)))
        return events

    def _requests(self, chunk: list[Job], meta: Meta) -> list[dict]:
        """The batch's requests, each with the reply schema (json_schema)."""
        schema = self.task.schema if meta.response_format == "json_schema" else None
        return [self.api.request(job.key, meta.model, meta.max_tokens, job.prompt, schema) for job in chunk]

    async def _submit_one(self, chunk: list[Job], meta: Meta, submitted_before: int) -> list[dict]:
        # custom_id = the cache key, a sha256 hex: 64 characters, the API's maximum; the batch's marker
        requests = self._requests(chunk, meta)
        intent = {
            "event": "intent",
            "batch_id": None,
            "intent": intent_id(job.key for job in chunk),
            "intent_at": _now(),
            "intent_unix": time.time(),
            "n_requests": len(chunk),
            "task": self.task.name,  # whose parser reads its results: a journal holds every kind's batches
            **meta.journal_fields(),
            "requests": [
                {"key": job.key, "passage_sha256": job.passage_sha256, "attempt": job.attempt} for job in chunk
            ],
        }
        for tries in range(1, CREATE_TRIES + 1):
            self._check_space(
                len(chunk),
                f"for the results of {len(chunk)} requests: nothing was submitted, nothing paid was lost; "
                "free some space and rerun",
            )
            intent = {**intent, "intent_at": _now(), "intent_unix": time.time()}
            self._journal(intent, "before creating a batch; nothing was submitted")  # durable before create
            try:
                batch_id = await self.api.create(self.client, requests)  # no SDK retries: a retry could pay twice
            except Exception as error:  # noqa: BLE001 - every failure is classified
                kind, message = self.api.classify(error, self.settings.section)
                if kind == "spend_limit" or self.pause.spend_limited:
                    self._abandon(intent, message)
                    raise StopGeneration(
                        f"the API's spend limit or credit is exhausted ({message}); "
                        f"{submitted_before} batches were submitted before it"
                    ) from None
                if not _not_created(error):
                    self.meter.write(
                        f"creating a batch of {len(chunk)} requests ended in doubt ({message}); "
                        "looking for it among the account's batches before submitting anything again"
                    )
                    adopted = await self.reconcile(intent)
                    if adopted:
                        return adopted
                else:
                    self._abandon(intent, message)
                if kind == "fatal" or tries == CREATE_TRIES:
                    raise StopGeneration(f"submitting a batch of {len(chunk)} requests failed: {message}") from None
                self.meter.write(f"no batch was created ({message}); trying again")
                await asyncio.sleep(min(8.0, 0.5 * 2**tries))
                continue
            event = self._submitted(intent, batch_id)
            self.meter.outcome.submitted_batches += 1
            self.meter.write(
                f"submitted batch {batch_id} ({len(chunk)} requests); a rerun resumes it if this run stops"
            )
            return [event]
        return []

    def _submitted(self, intent: dict, batch_id: str, adopted: bool = False, verified: bool = True) -> dict:
        event = {k: v for k, v in intent.items() if k not in ("event", "batch_id", "intent_at", "intent_unix")}
        event.update(event="submitted", batch_id=batch_id, submitted=_now())
        if adopted:
            event.update(adopted=True, verified=verified)
        self._journal(event, f"after batch {batch_id} was created")  # before waiting: a rerun resumes it
        return event

    def _abandon(self, intent: dict, reason: str) -> None:
        self._journal(
            {
                "event": "abandoned",
                "batch_id": None,
                "intent": intent["intent"],
                "reason": reason[:300],
                "abandoned": _now(),
            },
            "recording that no batch was created",
        )

    async def reconcile(self, intent: dict) -> list[dict]:
        """Adopt the batch(es) that `intent` may have created, or declare it never created once the
        grace period is over. Returns the "submitted" events journalled for adopted batches."""
        deadline = float(intent["intent_unix"]) + reconcile_grace_s()
        while True:
            found = await self._find(intent)
            if found:
                events = []
                for batch_id, verified in found:
                    events.append(self._submitted(intent, batch_id, adopted=True, verified=verified))
                    self.meter.outcome.adopted_batches += 1
                    self.meter.write(
                        f"adopted batch {batch_id} ({intent['n_requests']} requests"
                        + (
                            ", the same custom_ids"
                            if verified
                            else ", created after the intent; its custom_ids are checked when it ends"
                        )
                        + "): it is collected, not submitted again"
                    )
                return events
            wait = deadline - time.time()
            if wait <= 0:
                self._abandon(intent, "no batch with these requests was created")
                return []
            await asyncio.sleep(min(wait, max(0.2, min(2.0, reconcile_grace_s() / 5))))

    async def _find(self, intent: dict) -> list[tuple[str, bool]]:
        """Batches created since the intent (less RECONCILE_CLOCK_SKEW_S), not in the journal, with
        as many requests: an ended one is verified by its custom_ids (then it alone is adopted);
        one still processing cannot be, and is adopted as a candidate (collection skips results
        with foreign custom_ids, so adopting a stranger's batch costs nothing)."""
        known = {event.get("batch_id") for event in read_journal(self.journal_path)}
        keys = {request["key"] for request in intent["requests"]}
        cutoff = float(intent["intent_unix"]) - RECONCILE_CLOCK_SKEW_S
        candidates: list[tuple[str, bool]] = []
        examined = 0
        try:
            async for batch in self.api.listing(self.client):
                examined += 1
                if batch.created_unix < cutoff or examined > RECONCILE_LIST_LIMIT:
                    break
                if batch.id in known:
                    continue
                if batch.n_requests != len(keys):
                    continue
                if batch.ended:
                    custom_ids = await self._custom_ids(batch.id)
                    if custom_ids == keys:
                        return [(batch.id, True)]
                    if custom_ids is not None:
                        continue  # someone else's batch of the same size
                candidates.append((batch.id, False))
        except Exception as error:  # noqa: BLE001
            _, message = self.api.classify(error, self.settings.section)
            raise StopGeneration(
                f"could not list the account's batches to check whether a batch of {len(keys)} requests was created "
                f"({message}); nothing more was submitted: rerun to check again (it is submitted only if it does not exist)"
            ) from None
        return candidates

    async def _custom_ids(self, batch_id: str) -> set[str] | None:
        try:
            return {item.custom_id async for item in self.api.results(self.client, batch_id)}
        except Exception:  # noqa: BLE001 - results gone or unreadable: cannot verify
            return None

    # --- waiting and collecting ---------------------------------------------------------------------
    async def wait_and_collect(self, events: list[dict]) -> None:
        pending = {event["batch_id"]: event for event in events}
        failures: Counter[str] = Counter()  # consecutive failed polls of each batch
        while pending:
            for batch_id, event in list(pending.items()):
                try:
                    ended, progress = await self.api.status(self.client, batch_id)
                    failures[batch_id] = 0
                except Exception as error:  # noqa: BLE001
                    kind, message = self.api.classify(error, self.settings.section)
                    failures[batch_id] += 1
                    if getattr(error, "status_code", None) == 404:
                        self._collected(event, {"gone": len(event["requests"])}, note="batch not found")
                        self.meter.write(f"batch {batch_id} no longer exists; its requests will be submitted again")
                        del pending[batch_id]
                        continue
                    if kind in ("fatal", "spend_limit"):
                        raise StopGeneration(
                            f"polling batch {batch_id} failed: {message}; rerun to resume it"
                        ) from None
                    if failures[batch_id] >= MAX_POLL_FAILURES:  # a server failing every poll: not forever
                        raise StopGeneration(
                            f"polling batch {batch_id} failed {failures[batch_id]} times in a row (last: {message}); "
                            "the batch stays on the server and in the journal: rerun to resume it"
                        ) from None
                    self.meter.write(f"polling batch {batch_id} failed ({message}); trying again")
                    continue
                if ended:
                    await self._collect(event)
                    del pending[batch_id]
                else:
                    self.meter.bar.set_description_str(f"batch {batch_id[-8:]}: {progress}", refresh=True)
            if pending:
                await asyncio.sleep(self.settings.batch_poll_seconds)

    async def _collect(self, event: dict) -> None:
        by_key = {request["key"]: request for request in event["requests"]}
        meta = Meta.from_journal(event, self.api.name)
        cached = set(read_cache(self.cache_path))
        self._check_space(
            len(by_key),
            f"to keep the results of batch {event['batch_id']}: nothing paid was lost, its results stay on the "
            "server (29 days); free some space and rerun to collect them",
        )
        counts: Counter[str] = Counter()
        try:
            # aclosing: a stop inside the loop closes the stream now, not in a traceback at exit
            async with contextlib.aclosing(self.api.results(self.client, event["batch_id"])) as results:
                async for item in results:
                    request = by_key.get(item.custom_id)
                    if request is None:
                        continue  # not one of this batch's requests (an adopted stranger's batch)
                    counts[item.kind] += 1
                    if item.kind != "succeeded":
                        self.meter.fail(item.reason)
                        continue
                    if request["key"] in cached:
                        self.meter.bar.update(1)
                        continue
                    self._keep(event, meta, request, item)
                    cached.add(request["key"])
        except StopGeneration:
            raise
        except Exception as error:  # noqa: BLE001
            kind, message = self.api.classify(error, self.settings.section)
            if getattr(error, "status_code", None) == 404:
                self._collected(event, dict(counts), note="results no longer available")
                self.meter.write(
                    f"the results of batch {event['batch_id']} are gone; missing requests will be submitted again"
                )
                return
            raise StopGeneration(
                f"reading the results of batch {event['batch_id']} failed: {message}; rerun to resume"
            ) from None
        if event.get("adopted") and not event.get("verified") and not counts:
            self._collected(event, {}, note="not ours: none of its custom_ids is one of the intent's requests")
            self.meter.write(f"adopted batch {event['batch_id']} held none of these requests; it was someone else's")
            self.strangers.update(by_key)
            return
        missing = len(by_key) - sum(counts.values())
        if missing:
            counts["missing"] = missing
            for _ in range(missing):
                self.meter.fail("missing from the results")
        self._collected(event, dict(counts))

    def _keep(self, event: dict, meta: Meta, request: dict, item: BatchResult) -> None:
        """One succeeded result appended to the cache (one holding the API key counts as failed)."""
        try:
            reply = self.api.reply(item.answer, "")
            record = self.task.record(meta, request["key"], request["passage_sha256"], request["attempt"], reply)
        except ValueError as error:  # not a reply (reply_text): counted, and collection goes on
            self.meter.fail(f"an unreadable result ({error})")
            return
        leak = key_leak(record, self.key)
        if leak:  # billed, never kept
            self.meter.fail(leak, paid=reply)
            return
        try:
            self.writer.append(record)
        except CacheWriteError as error:
            raise StopGeneration(
                f"{error}: the cache is consistent and nothing paid was lost, the results of batch "
                f"{event['batch_id']} stay on the server (29 days); free some space and rerun to collect them"
            ) from None
        self.meter.outcome.kept += 1
        self.meter.add(reply, rejected=record["rejected"] is not None, note=self.task.note(record))

    def _collected(self, event: dict, counts: dict, note: str | None = None) -> None:
        record = {
            "event": "collected",
            "batch_id": event["batch_id"],
            "counts": counts,
            "collected": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        }
        if note:
            record["note"] = note
        self._journal(record, f"after collecting batch {event['batch_id']}")


async def run_batches(
    api: BatchProvider,
    context: RunContext,
    jobs: list[Job],
    meta: Meta | None,
    *,
    resume: list[dict],
    intents: list[dict],
) -> Outcome:
    """Reconcile `intents`, collect the journalled batches `resume`, then submit `jobs` (resubmitting
    those whose only adopted batch turned out to be a stranger's) and collect them."""
    runner = BatchRunner(api, context)
    meter = context.meter
    try:
        resume = list(resume)
        for intent in intents:
            meter.write(
                f"a batch of {intent['n_requests']} requests was being created when a run stopped; "
                "looking for it among the account's batches before submitting anything"
            )
            resume.extend(await runner.reconcile(intent))
        if resume:
            meter.write(f"resuming {len(resume)} journalled batches: {', '.join(e['batch_id'] for e in resume)}")
            await runner.wait_and_collect(resume)
        for _ in range(CREATE_TRIES):
            if not jobs:
                break
            assert meta is not None  # new jobs come with their run's meta (only a resume has none)
            events = await runner.submit(jobs, meta)
            await runner.wait_and_collect(events)
            # An intent whose only adopted batches were strangers' created nothing: submit it now.
            cached = set(read_cache(context.cache_path))
            jobs = [job for job in jobs if job.key in runner.strangers and job.key not in cached]
            runner.strangers.clear()
    finally:
        await runner.close()
    return meter.outcome
