"""The one entry point for paid LLM work (the golden set's questions, the judge's grades).

Under the cache's lock (retrieval_bench.core.locking; none for a dry run): journalled batches of an
earlier run are reconciled and collected first, then round by round the caller says what is
still missing given the cache, batches in flight are left out, the estimate is logged, a dry run
stops there, the cost guard checks the round against <section>.max_cost_usd (counting what this
run spent), and the jobs run (runner.run: sync or batch, with its progress bar) with what is left
of the limit, so that the sync run's own guard stops at the limit less the earlier rounds' and
the collected batches' spend, never at the whole limit again. A round that
fails requests or gets no reply ends the rounds; failed requests end the work in one line
(StopGeneration), every reply received being kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field, replace

from retrieval_bench.core.errors import Interrupted
from retrieval_bench.core.locking import exclusive
from retrieval_bench.core.logs import Log
from retrieval_bench.llm.cache.replies import journal_path_for, journal_pending, read_cache
from retrieval_bench.llm.cost.guard import check_cost, estimate
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.providers.registry import batch_providers, counterpart
from retrieval_bench.llm.runs.runner import can_resume, resume_batches, run
from retrieval_bench.llm.runs.tasks import JUDGE, QUESTIONS, Job, Task
from retrieval_bench.llm.transport.errors import StopGeneration

# The cache's records by key and the round's number -> (the jobs still to ask, how many are done).
Missing = Callable[[dict[str, dict], int], tuple[list[Job], int]]


@dataclass(frozen=True)
class PaidWork:
    """What is paid for: the task, how its records are made, the settings and the cache."""

    task: Task
    meta: Meta
    settings: Settings
    cache_path: str
    max_attempts: int  # replies a rejected one may be asked again for (the dry run says so)
    # USD this run spent before this work under the same <section>.max_cost_usd (the kind
    # classifier's, the earlier question kinds'): counted against the limit, not in Paid.spent
    spent_before: float = 0.0


@dataclass(frozen=True)
class Round:
    """One round of asking: its number (0: the first), the jobs still to ask and how many are done."""

    number: int
    jobs: list[Job]
    done: int


@dataclass
class Paid:
    spent: float = 0.0  # USD, resumed batches included
    asked: int = 0  # requests sent this run (succeeded or failed)
    planned: bool = False  # a dry run found work to do (and logged its cost)
    done_at_start: int = 0  # what `missing` counted done when the first round looked (after resuming)
    failed: list[str] = field(default_factory=list)  # why each failed request failed, every round
    timed_out: int = 0  # of the failed: requests that ran past <section>.timeout_s


def pay_for(work: PaidWork, missing: Missing, rounds: int, dry_run: bool, log: Log) -> Paid:
    """Ask for what `missing` names, up to `rounds` rounds (see the module's docstring)."""
    with nullcontext() if dry_run else exclusive(work.cache_path, log):
        paid = Paid(spent=_resume(work, dry_run, log))
        for round_number in range(rounds):
            jobs, done = missing(read_cache(work.cache_path), round_number)
            if round_number == 0:
                paid.done_at_start = done
            in_flight = {r["key"] for events in journal_pending(work.cache_path) for e in events for r in e["requests"]}
            jobs = [job for job in jobs if job.key not in in_flight]
            if not jobs:
                if dry_run and round_number == 0:  # else the plan says nothing of the cache or the cost
                    wording = work.task.wording
                    log(f"0 {wording.to_do}, {done} {wording.done}: nothing to ask, $0.00")
                break
            if not _round(work, Round(round_number, jobs, done), paid, dry_run, log=log):
                break
    if paid.failed:
        reasons = "; ".join(f"{n}x {r}" for r, n in Counter(paid.failed).most_common(3))
        raise StopGeneration(
            f"{len(paid.failed)} {work.task.wording.requests} failed ({reasons}){_timeout_hint(work.settings, paid)}; "
            f"every reply received is kept in {work.cache_path}; rerun to ask for the missing {work.task.wording.noun} again"
        )
    return paid


# Journals written before batches named their task held one task's batches: the question cache's
# (the batch provider then refused several question kinds) or the judge's.
UNNAMED_TASKS = (QUESTIONS.name, JUDGE.name)


def of_task(events: list[dict], task: Task) -> list[dict]:
    """The journal events of `task`'s batches (each names its task; an unnamed one is the
    questions' or the judge's, UNNAMED_TASKS): another task's are collected by that task's work,
    whose parser reads its results."""
    return [
        event for event in events if event.get("task", task.name if task.name in UNNAMED_TASKS else None) == task.name
    ]


def _resume(work: PaidWork, dry_run: bool, log: Log) -> float:
    """Collect the batches of this work's task an earlier run journalled (none in a dry run); what
    they cost."""
    pending, intents = (of_task(events, work.task) for events in journal_pending(work.cache_path))
    if not (pending or intents):
        return 0.0
    if dry_run or not can_resume(work.settings):
        log(
            f"{len(pending) + len(intents)} journalled batches are not collected yet ({journal_path_for(work.cache_path)}); "
            f"{work.settings.section}.provider {' or '.join(batch_providers())} collects them"
        )
        return 0.0
    if intents:
        log(
            f"{len(intents)} batches were being created when an earlier run stopped; reconciling them with the "
            "account's batches before submitting anything"
        )
    if pending:
        log(f"{len(pending)} batches from an earlier run were not collected; resuming them (no new submission)")
    return resume_batches(work.task, pending, work.settings, work.cache_path, intents).cost


def _round(work: PaidWork, this: Round, paid: Paid, dry_run: bool, *, log: Log) -> bool:
    """One round: the estimate, a dry run's plan or the guard and the run; whether to go on."""
    settings, wording, jobs = work.settings, work.task.wording, this.jobs
    est = estimate([job.prompt for job in jobs], settings)
    log(
        f"{len(jobs)} {wording.to_do if this.number == 0 else wording.to_redo}, {this.done} {wording.done}; "
        f"{est.describe(settings)}"
    )
    if settings.max_cost_usd is not None:
        log(f"cost limit {settings.section}.max_cost_usd {usd(settings.max_cost_usd)}")
    if dry_run:
        other_provider = counterpart(settings.provider)
        if other_provider is not None:
            other = estimate([job.prompt for job in jobs], settings, batch=other_provider.batch)
            log(f"with {other_provider.name} instead: ~{usd(other.usd)} (at most {usd(other.usd_max)})")
        log(
            f"rejected replies are asked again ({settings.section}.max_attempts {work.max_attempts}), which adds a little"
        )
        paid.planned = True
        return False
    spent = work.spent_before + paid.spent  # under the limit: other work's and this work's so far
    check_cost(est, settings, spent, wording)
    try:
        outcome = run(work.task, jobs, work.meta, _remaining(settings, spent), work.cache_path)
    except (StopGeneration, Interrupted) as stop:  # a limit, a refusal or Ctrl-C: the line tells the whole spend
        if not paid.spent:
            raise
        raise type(stop)(
            f"{stop}; {usd(paid.spent)} was spent before this round (earlier rounds, collected batches)"
        ) from None
    paid.spent += outcome.cost
    paid.asked += outcome.succeeded + len(outcome.failed)
    paid.failed.extend(outcome.failed)
    paid.timed_out += outcome.timed_out
    timeouts = f" ({outcome.timed_out} timed out)" if outcome.timed_out else ""
    log(
        f"{outcome.succeeded} replies ({outcome.rejected} rejected), {len(outcome.failed)} failed{timeouts}; "
        f"{outcome.input_tokens:,} input + {outcome.output_tokens:,} output tokens, {usd(outcome.cost)}"
    )
    return not (outcome.failed or outcome.succeeded == 0)


def _timeout_hint(settings: Settings, paid: Paid) -> str:
    """What the closing line says of requests that timed out: how many, and what to change."""
    if not paid.timed_out:
        return ""
    return (
        f"; {paid.timed_out} timed out after {settings.section}.timeout_s {settings.timeout_s:g}s: raise it, "
        f"or lower {settings.section}.max_tokens or {settings.section}.concurrency for a slow local server"
    )


def _remaining(settings: Settings, spent: float) -> Settings:
    """The settings a round runs with: max_cost_usd less what this run spent before it (earlier
    rounds, collected batches), the budget the sync run's in-run guard stops at."""
    if settings.max_cost_usd is None:
        return settings
    return replace(settings, max_cost_usd=max(0.0, settings.max_cost_usd - spent))
