"""Which reference passages get a generated question, and which cached reply each one gets.

Decided before anything is generated, so only the chosen passages are paid for: every passage
that no hand-written question covers, ranked by a seeded hash of its text; the first
max_questions - (hand-written questions) of them get one. The ranking depends only on the
passage's text, so raising max_questions adds passages without replacing any, and editing one
passage changes one choice. A passage whose reply is rejected (a hygiene reject, a duplicate of
an earlier question, an echo with generate.drop_echo) is asked again up to generate.max_attempts
times, then the next passage in the ranking takes its place. A reply whose quoted evidence is not
in the passage that was sent is such a reject (evidence_not_in_passage): an excerpt found
elsewhere would move the gold span to text the passage never held.

Generation holds the question cache's lock (retrieval_bench.locking) from the first look at the
cache and journal to the last reply written, so two runs never ask for the same question.
"""
from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass, field

import pandas as pd

from retrieval_bench.goldenset import echo
from retrieval_bench.goldenset.build import Hygiene
from retrieval_bench.llm.cache import read_cache
from retrieval_bench.goldenset.evidence import evidence_in_passage, evidence_text
from retrieval_bench.llm import hygiene
from retrieval_bench.llm.batch import journal_path_for, pending_batch_events, pending_intent_events
from retrieval_bench.llm.cost import check_cost, estimate
from retrieval_bench.llm.errors import StopGeneration
from retrieval_bench.llm.registry import counterpart
from retrieval_bench.llm.runner import can_resume, resume_batches, run
from retrieval_bench.llm.settings import Meta, Settings
from retrieval_bench.llm.tasks import QUESTIONS, Job
from retrieval_bench.llm.prices import usd
from retrieval_bench.locking import exclusive

# Why a reply was not used: the reply hygiene's reasons, and the golden set's own.
REJECT_REASONS = {
    **hygiene.REJECT_REASONS,
    "evidence_not_in_passage": "the quoted evidence is not in the passage that was sent",
    "echo": "the question copies its passage (echo gauge; generate.drop_echo)",
    "duplicate_question": "the same question as for another passage (ambiguous label)",
    "near_duplicate_question": "nearly the same question as an earlier one (generate.drop_near_duplicates)",
    "context_dependent": "the question needs its passage in view, e.g. 'in this section' (generate.drop_context_dependent)",
}


# --------------------------------------------------------------------------------------------
def rank_passages(passages: pd.DataFrame, seed: int, covered: set[str]) -> list[dict]:
    """Passages that may get a generated question, in the order they are chosen: one per distinct
    text (identical passages would get identical questions), none already covered by a
    hand-written question, ordered by sha256(seed, text sha256)."""
    seen: set[str] = set(covered)
    eligible = []
    for passage in passages.to_dict("records"):
        if passage["text_sha256"] in seen or not passage["text"].strip():
            continue
        seen.add(passage["text_sha256"])
        eligible.append(passage)
    return sorted(eligible, key=lambda p: (hashlib.sha256(f"{seed}\0{p['text_sha256']}".encode()).hexdigest(), p["chunk_id"]))


class CacheIndex:
    """Cached replies for (passage, attempt). With a provider, by exact cache key; with provider
    none (no family to key on), any reply for this model and prompt, same max_tokens first."""

    def __init__(self, records: dict[str, dict], meta: Meta, by_key: bool) -> None:
        self.meta = meta
        self.by_key = by_key
        self.records = records
        self.by_passage: dict[tuple[str, int], dict] = {}
        if not by_key:
            matching = [r for r in records.values() if r.get("model") == meta.model and r.get("prompt_sha256") == meta.prompt_sha256]
            # Records with the configured max_tokens win over others for the same passage and attempt.
            for record in sorted(matching, key=lambda r: r.get("max_tokens") == meta.max_tokens):
                self.by_passage[(record.get("passage_sha256"), int(record.get("attempt") or 0))] = record

    def lookup(self, passage: dict, attempt: int, job: Job | None) -> dict | None:
        if self.by_key:
            return self.records.get(job.key)
        return self.by_passage.get((passage["text_sha256"], attempt))


@dataclass
class Plan:
    accepted: list[tuple[dict, dict]] = field(default_factory=list)  # (passage, cache record)
    misses: list[Job] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    uncached: int = 0  # chosen passages with no cached question (they keep their place in the choice)
    exhausted: int = 0  # passages whose every attempt was rejected


def walk(
    ranked: list[dict], index: CacheIndex, budget: int | None, max_attempts: int, drop_echo: bool,
    seen_questions: set[str], template: str, generating: bool, hygiene: Hygiene = Hygiene(),
) -> Plan:
    """Go down the ranking until `budget` passages have a usable question or are waiting for one.
    Deterministic for a given cache: a duplicate is the later passage's question in this order."""
    plan = Plan()
    seen = hygiene.index(seen_questions)
    for passage in ranked:
        if budget is not None and len(plan.accepted) + len(plan.misses) + plan.uncached >= budget:
            break
        for attempt in range(max_attempts):
            job = QUESTIONS.job(index.meta, template, passage["text"], passage["text_sha256"], attempt) if index.by_key else None
            record = index.lookup(passage, attempt, job)
            if record is None:
                if generating:
                    plan.misses.append(job)
                else:
                    plan.uncached += 1
                break
            reason = record.get("rejected")
            evidence = record.get("evidence") or ""
            if reason is None and evidence and not evidence_in_passage(evidence, passage["text"]):
                reason = "evidence_not_in_passage"  # an empty excerpt anchors the question to the whole passage
            if reason is None:
                reason = hygiene.reason(record["question"], seen)
            # The echo gauge measures against the evidence (the whole passage when there is none).
            if reason is None and drop_echo and echo.is_echo(record["question"], evidence_text(evidence, passage["text"])):
                reason = "echo"
            if reason is None:
                plan.accepted.append((passage, record))
                seen.add(record["question"])
                break
            plan.rejects.append({
                "reason": reason, "source": "generated", "chunk_id": passage["chunk_id"], "doc_id": passage["doc_id"],
                "attempt": attempt, "question": record.get("question") or "", "raw": record.get("raw"),
                "regenerated": attempt + 1 < max_attempts, "key": record.get("key"),
            })
        else:
            plan.exhausted += 1
    return plan


def generate_missing(
    params: dict, settings: Settings, meta: Meta, template: str, ranked: list[dict], budget: int | None,
    seen: set[str], cache_path: str, dry_run: bool, log: Callable[[str], None],
) -> None:
    """Generate until every chosen passage has a usable question or is out of attempts, appending
    each reply to the cache at `cache_path`. With `dry_run`, log the plan and its cost only.
    Everything but a dry run happens under the cache's lock: a second run waits (or, with
    RETRIEVAL_BENCH_LOCK_WAIT=0, stops with one line) and then asks only for what is still missing."""
    with nullcontext() if dry_run else exclusive(cache_path, log):
        _generate_missing(params, settings, meta, template, ranked, budget, seen, cache_path, dry_run, log)


def _generate_missing(
    params: dict, settings: Settings, meta: Meta, template: str, ranked: list[dict], budget: int | None,
    seen: set[str], cache_path: str, dry_run: bool, log: Callable[[str], None],
) -> None:
    pending = pending_batch_events(cache_path)
    intents = pending_intent_events(cache_path)
    if (pending or intents) and can_resume(settings) and not dry_run:
        if intents:
            log(f"{len(intents)} batches were being created when an earlier run stopped; reconciling them with the "
                "account's batches before submitting anything")
        if pending:
            log(f"{len(pending)} batches from an earlier run were not collected; resuming them (no new submission)")
        resume_batches(QUESTIONS, pending, settings, cache_path, intents)
    elif pending or intents:
        log(f"{len(pending) + len(intents)} journalled batches are not collected yet ({journal_path_for(cache_path)}); "
            "provider anthropic-batch collects them")
    failed: list[str] = []
    spent = 0.0
    for round_number in range(max_rounds(params)):
        index = CacheIndex(read_cache(cache_path), meta, by_key=True)
        plan = walk(ranked, index, budget, params["max_attempts"], params["drop_echo"], seen, template, generating=True,
                    hygiene=Hygiene.from_params(params))
        # A batch in flight (or that may exist) for one of these keys is not submitted again.
        in_flight = {r["key"] for e in pending_batch_events(cache_path) + pending_intent_events(cache_path) for r in e["requests"]}
        jobs = [job for job in plan.misses if job.key not in in_flight]
        if not jobs:
            break
        est = estimate([job.prompt for job in jobs], settings)
        cached = len(plan.accepted)
        what = "questions to generate" if round_number == 0 else "more questions to replace rejected replies"
        log(f"{len(jobs)} {what}, {cached} cached; {est.describe(settings)}")
        if settings.max_cost_usd is not None:
            log(f"cost limit generate.max_cost_usd {usd(settings.max_cost_usd)}")
        if dry_run:
            other_provider = counterpart(settings.provider)
            if other_provider is not None:
                other = estimate([job.prompt for job in jobs], settings, batch=other_provider.batch)
                log(f"with {other_provider.name} instead: ~{usd(other.usd)} (at most {usd(other.usd_max)})")
            log(f"rejected replies are asked again (generate.max_attempts {params['max_attempts']}), which adds a little")
            return
        check_cost(est, settings, spent)
        outcome = run(QUESTIONS, jobs, meta, settings, cache_path)
        spent += outcome.cost
        failed.extend(outcome.failed)
        log(
            f"{outcome.succeeded} replies ({outcome.rejected} rejected), {len(outcome.failed)} failed; "
            f"{outcome.input_tokens:,} input + {outcome.output_tokens:,} output tokens, {usd(outcome.cost)}"
        )
        if outcome.failed or outcome.succeeded == 0:
            break
    if failed:
        reasons = Counter(failed).most_common(3)
        raise StopGeneration(
            f"{len(failed)} requests failed ({'; '.join(f'{n}x {r}' for r, n in reasons)}); every reply received is "
            f"kept in {cache_path}; rerun to ask for the missing questions again"
        )


def max_rounds(params: dict) -> int:
    # Each round asks for the missing questions: first attempts, then regenerations and
    # replacements for rejected ones. More rounds than attempts only matter for replacements.
    return params["max_attempts"] + 2
