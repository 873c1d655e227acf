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

Generation goes through the LLM layer's entry point for paid work (llm.runs.paid), which holds the
question cache's lock from the first look at the cache and journal to the last reply written, so
two runs never ask for the same question.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from retrieval_bench.goldenset import echo
from retrieval_bench.goldenset.build import Hygiene
from retrieval_bench.goldenset.evidence import evidence_in_passage, evidence_text
from retrieval_bench.llm.checks import hygiene
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.tasks import QUESTIONS, Job

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
    accepted: list[tuple[dict, dict]] = field(default_factory=list)  # (passage, cache record)
    misses: list[Job] = field(default_factory=list)
    rejects: list[dict] = field(default_factory=list)
    uncached: int = 0  # chosen passages with no cached question (they keep their place in the choice)
    exhausted: int = 0  # passages whose every attempt was rejected


def walk(
    ranked: list[dict],
    index: CacheIndex,
    budget: int | None,
    max_attempts: int,
    drop_echo: bool,
    seen_questions: set[str],
    *,
    template: str,
    generating: bool,
    hygiene: Hygiene = Hygiene(),
) -> Plan:
    """Go down the ranking until `budget` passages have a usable question or are waiting for one.
    Deterministic for a given cache: a duplicate is the later passage's question in this order."""
    plan = Plan()
    seen = hygiene.index(seen_questions)
    for passage in ranked:
        if budget is not None and len(plan.accepted) + len(plan.misses) + plan.uncached >= budget:
            break
        for attempt in range(max_attempts):
            job = (
                QUESTIONS.job(index.meta, template, passage["text"], passage["text_sha256"], attempt)
                if index.by_key
                else None
            )
            record = index.lookup(passage, attempt, job)
            if record is None:
                if generating:
                    assert job is not None  # only generate_missing generates, with a keyed index
                    plan.misses.append(job)
                else:
                    plan.uncached += 1
                break
            reason = _reject_reason(record, passage, hygiene, seen, drop_echo)
            if reason is None:
                plan.accepted.append((passage, record))
                seen.add(record["question"])
                break
            plan.rejects.append(
                {
                    "reason": reason,
                    "source": "generated",
                    "chunk_id": passage["chunk_id"],
                    "doc_id": passage["doc_id"],
                    "attempt": attempt,
                    "question": record.get("question") or "",
                    "raw": record.get("raw"),
                    "regenerated": attempt + 1 < max_attempts,
                    "key": record.get("key"),
                }
            )
        else:
            plan.exhausted += 1
    return plan


def _reject_reason(record: dict, passage: dict, hygiene: Hygiene, seen, drop_echo: bool) -> str | None:
    """Why a cached reply is not used for `passage` (None: it is): its own reject reason, evidence
    not in the passage sent, the golden set's hygiene given the questions `seen`, or an echo."""
    reason = record.get("rejected")
    evidence = record.get("evidence") or ""
    if reason is None and evidence and not evidence_in_passage(evidence, passage["text"]):
        reason = "evidence_not_in_passage"  # an empty excerpt anchors the question to the whole passage
    if reason is None:
        reason = hygiene.reason(record["question"], seen)
    # The echo gauge measures against the evidence (the whole passage when there is none).
    if reason is None and drop_echo and echo.is_echo(record["question"], evidence_text(evidence, passage["text"])):
        reason = "echo"
    return reason


def generate_missing(
    params: dict,
    settings: Settings,
    meta: Meta,
    template: str,
    ranked: list[dict],
    budget: int | None,
    *,
    seen: set[str],
    cache_path: str,
    dry_run: bool,
    log: Callable[[str], None],
) -> None:
    """Generate until every chosen passage has a usable question or is out of attempts, appending
    each reply to the cache at `cache_path`. With `dry_run`, log the plan and its cost only.
    Everything but a dry run happens under the cache's lock (llm.runs.paid): a second run waits (or, with
    RETRIEVAL_BENCH_LOCK_WAIT=0, stops with one line) and then asks only for what is still missing."""
    hygiene = Hygiene.from_params(params)

    def missing(cache: dict[str, dict], round_number: int) -> tuple[list[Job], int]:
        plan = walk(
            ranked,
            CacheIndex(cache, meta, by_key=True),
            budget,
            params["max_attempts"],
            params["drop_echo"],
            seen,
            template=template,
            generating=True,
            hygiene=hygiene,
        )
        return plan.misses, len(plan.accepted)

    work = PaidWork(QUESTIONS, meta, settings, cache_path, params["max_attempts"])
    pay_for(work, missing, max_rounds(params), dry_run, log)


def max_rounds(params: dict) -> int:
    # Each round asks for the missing questions: first attempts, then regenerations and
    # replacements for rejected ones. More rounds than attempts only matter for replacements.
    return params["max_attempts"] + 2
