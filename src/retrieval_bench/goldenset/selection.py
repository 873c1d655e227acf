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

With several question kinds (generate.kinds, goldenset.kinds) each kind has its own ranking (its
own seed), its share of the questions to generate, and its own walk (KindRun); a multi question's
unit is a passage group, every one of whose excerpts must be in its own passage.

Generation goes through the LLM layer's entry point for paid work (llm.runs.paid), which holds the
question cache's lock from the first look at the cache and journal to the last reply written, so
two runs never ask for the same question.
"""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from retrieval_bench.core.logs import Log
from retrieval_bench.goldenset import kinds
from retrieval_bench.goldenset.generate_settings import GenerateSettings, GenerationRun
from retrieval_bench.llm.cache.replies import read_cache
from retrieval_bench.llm.checks import hygiene
from retrieval_bench.llm.checks import kinds as reply_kinds
from retrieval_bench.llm.cost.guard import check_cost, estimate
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.tasks import Job, Task

# Why a reply was not used: the reply checks' reasons, and the golden set's own.
REJECT_REASONS = {
    **hygiene.REJECT_REASONS,
    **reply_kinds.REJECT_REASONS,
    **kinds.REJECT_REASONS,
    "evidence_not_in_passage": "the quoted evidence is not in the passage that was sent (multi: each excerpt in its own)",
    "echo": "the question copies its passage (echo gauge; generate.drop_echo)",
    "duplicate_question": "the same question as for another passage (ambiguous label)",
    "near_duplicate_question": "nearly the same question as an earlier one (generate.drop_near_duplicates)",
    "context_dependent": "the question needs its passage in view, e.g. 'in this section' (generate.drop_context_dependent)",
}


# --------------------------------------------------------------------------------------------
MIN_PASSAGE_WORDS = 5  # fewer words than this get no generated question


def rank_passages(passages: pd.DataFrame, seed: int | str, covered: set[str]) -> list[dict]:
    """Passages that may get a generated question (MIN_PASSAGE_WORDS words or more), in the order they
    are chosen: one per distinct text (identical passages would get identical questions), none already covered by a
    hand-written question, ordered by sha256(seed, text sha256) (a kind's seed: kinds.ranking_seed)."""
    seen: set[str] = set(covered)
    eligible = []
    for passage in passages.to_dict("records"):
        # a heading alone ("# Notes") has nothing to ask about: a paid request for a junk question
        if passage["text_sha256"] in seen or len(passage["text"].split()) < MIN_PASSAGE_WORDS:
            continue
        seen.add(passage["text_sha256"])
        eligible.append(passage)
    return sorted(
        eligible, key=lambda p: (hashlib.sha256(f"{seed}\0{p['text_sha256']}".encode()).hexdigest(), p["chunk_id"])
    )


class CacheIndex:
    """Cached replies for (passage, attempt). With a provider, by exact cache key; with provider
    none (no family to key on), any reply for this model and prompt, same max_tokens first."""

    def __init__(self, records: dict[str, dict], meta: Meta, by_key: bool) -> None:
        self.meta = meta
        self.by_key = by_key
        self.records = records
        self.by_passage: dict[tuple[Any, int], dict] = {}  # (passage_sha256 as recorded, attempt)
        if not by_key:
            matching = [
                r
                for r in records.values()
                if r.get("model") == meta.model and r.get("prompt_sha256") == meta.prompt_sha256
            ]
            # Records with the configured max_tokens win over others for the same passage and attempt.
            for record in sorted(matching, key=lambda r: r.get("max_tokens") == meta.max_tokens):
                self.by_passage[(record.get("passage_sha256"), int(record.get("attempt") or 0))] = record

    def lookup(self, passage: dict, attempt: int, job: Job | None) -> dict | None:
        if self.by_key:
            assert job is not None  # keyed lookups come with the job (walk makes one when by_key)
            return self.records.get(job.key)
        return self.by_passage.get((passage["text_sha256"], attempt))


@dataclass
class Plan:
    accepted: list[tuple[dict, dict]] = field(default_factory=list)  # (unit, cache record)
    misses: list[Job] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    uncached: int = 0  # chosen units with no cached question (they keep their place in the choice)
    exhausted: int = 0  # units whose every attempt was rejected


@dataclass(frozen=True)
class KindRun:
    """One kind's share of the generation: its task and prompt, how its records are made, the units
    it writes from in the order they are chosen (passages; multi: passage groups) and how many."""

    kind: str
    task: Task
    template: str
    meta: Meta
    units: Iterable[dict]  # passages, or a multi question's groups (kinds.Groups: made as the walk reaches them)
    budget: int | None  # None: every unit
    corpus: kinds.Corpus  # the reference passages' words (multi groups, unanswerable check, keyword echo)


def walk(
    run: KindRun, index: CacheIndex, seen_questions: set[str], settings: GenerateSettings, generating: bool
) -> Plan:
    """Go down the kind's units until its budget has a usable question or is waiting for one.
    Deterministic for a given cache: a duplicate is the later unit's question in this order."""
    plan = Plan()
    seen = settings.hygiene.index(seen_questions)
    for unit in run.units:
        if run.budget is not None and len(plan.accepted) + len(plan.misses) + plan.uncached >= run.budget:
            break
        # past max_attempts only what the cache holds (a question paid for under a higher setting)
        for attempt in itertools.count():
            job = (
                run.task.job(run.meta, run.template, unit["text"], unit["text_sha256"], attempt)
                if index.by_key
                else None
            )
            record = index.lookup(unit, attempt, job)
            if record is None and attempt >= settings.max_attempts:
                plan.exhausted += 1
                break
            if record is None:
                if generating:
                    assert job is not None  # only generate_missing generates, with a keyed index
                    plan.misses.append(job)
                else:
                    plan.uncached += 1
                break
            reason = _reject_reason(record, unit, run, seen, settings)
            if reason is None:
                plan.accepted.append((unit, record))
                seen.add(record["question"])
                break
            plan.rejects.append(
                {
                    "reason": reason,
                    "source": "generated",
                    **({"kind": run.kind} if run.kind != "single" else {}),
                    "chunk_id": unit["chunk_id"],
                    "doc_id": unit["doc_id"],
                    "attempt": attempt,
                    "question": record.get("question") or "",
                    "raw": record.get("raw"),
                    "regenerated": attempt + 1 < settings.max_attempts,
                    "key": record.get("key"),
                }
            )
    return plan


def _reject_reason(record: dict, unit: dict, run: KindRun, seen, settings: GenerateSettings) -> str | None:
    """Why a cached reply is not used for `unit` (None: it is): its own reject reason, evidence
    not in the passage sent (kinds.evidence_reason), the golden set's hygiene given the questions
    `seen`, a near miss the corpus may answer, or an echo with generate.drop_echo."""
    # the kind's limits now, not when the reply was cached
    reason = record.get("rejected") or hygiene.length_reason(record["question"], hygiene.shape_of(run.kind))
    reason = reason or kinds.evidence_reason(run.kind, record, unit)
    if reason is None:
        reason = settings.hygiene.reason(record["question"], seen) or kinds.corpus_reason(run.kind, record, run.corpus)
    if reason is None and settings.drop_echo and kinds.echoes(run.kind, record, unit, run.corpus):
        reason = "echo"
    return reason


def generate_missing(runs: list[KindRun], settings: GenerateSettings, seen: set[str], run: GenerationRun) -> None:
    """Generate until every chosen unit of every kind has a usable question or is out of attempts,
    appending each reply to the cache at `run.cache_path`, kind after kind (a kind's questions count
    as seen for the next). With a dry run, log each kind's plan and cost only. generate.max_cost_usd
    covers all kinds and the kind classifier before them: each kind runs with what they left of
    it. Everything but a dry run happens under the cache's lock (llm.runs.paid): a second run waits
    (or, with RETRIEVAL_BENCH_LOCK_WAIT=0, stops with one line) and then asks only for what is
    still missing."""
    llm = Settings.from_params(dict(settings.section))
    if len(runs) > 1:
        _all_kinds(runs, settings, seen, llm, run)
    seen = set(seen)
    spent = settings.spent_before  # the kind classifier's, under the same generate.max_cost_usd
    for kind_run in runs:
        log = run.log if len(runs) == 1 else (lambda line, kind=kind_run.kind: run.log(f"{kind}: {line}"))

        def missing(
            cache: dict[str, dict], round_number: int, kind_run: KindRun = kind_run, log: Log = log
        ) -> tuple[list[Job], int]:
            plan = walk(kind_run, CacheIndex(cache, kind_run.meta, by_key=True), seen, settings, generating=True)
            if round_number and not run.dry_run:  # the round line counts the parser's rejects, not these checks'
                log(checked_line(plan))
            return plan.misses, len(plan.accepted)

        work = PaidWork(kind_run.task, kind_run.meta, llm, run.cache_path, settings.max_attempts, spent)
        spent += pay_for(work, missing, settings.max_rounds, run.dry_run, log).spent
        if not run.dry_run:
            plan = walk(
                kind_run, CacheIndex(read_cache(run.cache_path), kind_run.meta, by_key=True), seen, settings, False
            )
            seen.update(record["question"] for _, record in plan.accepted)


def checked_line(plan: Plan) -> str:
    """The replies so far as the golden set's checks see them (the reply parser's, the evidence
    check, hygiene, the corpus check, drop_echo): usable, rejected and why."""
    reasons = Counter(reject["reason"] for reject in plan.rejects)
    why = f" ({', '.join(f'{n} {reason}' for reason, n in reasons.most_common(3))})" if reasons else ""
    return f"checked so far: {len(plan.accepted)} usable questions, {len(plan.rejects)} replies rejected{why}"


def _all_kinds(
    runs: list[KindRun], settings: GenerateSettings, seen: set[str], llm: Settings, run: GenerationRun
) -> None:
    """Several kinds: the first requests of all of them estimated together, logged, and (unless a dry
    run) checked against generate.max_cost_usd before any kind is asked, so the limit covers them all."""
    cache = read_cache(run.cache_path)
    prompts = [
        job.prompt
        for kind_run in runs
        for job in walk(kind_run, CacheIndex(cache, kind_run.meta, by_key=True), seen, settings, generating=True).misses
    ]
    if not prompts:
        return
    est = estimate(prompts, llm)
    run.log(f"all kinds ({', '.join(r.kind for r in runs)}): {est.describe(llm)}")
    if not run.dry_run:
        check_cost(est, llm, settings.spent_before)
