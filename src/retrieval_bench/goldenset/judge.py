"""Pooled LLM relevance judgements: what the stage `judge` does (TREC pooling, UMBRELA grades).

For each question, the top judge.depth chunks of every run named in judge.pool (the current run
the default system's, data/panel/default/run.parquet, by default; other run files, or `rev:<revision>` for the run of a git revision
or DVC experiment) are pooled; the golden set's own relevant chunks and their duplicates are left
out (they are relevant already), as are chunks that real labels (qrels) judge, whatever the grade
(a person's judgement stands), and every other pooled (question, chunk) pair is graded 0-3 by
the judge model with data/judge_prompt.txt (llm.runs.tasks.JUDGE).

Everything paid for goes through the LLM layer's one entry point (llm.runs.paid), as the golden set's
questions do: the same providers, the batch API and its journal (data/judgements.batches.jsonl), the cost estimate and
the guard at judge.max_cost_usd, the reply hygiene (llm.checks.grades; a rejected reply is asked again
up to judge.max_attempts times), and an append-only content-addressed cache
(data/judgements.jsonl, keyed by provider family, model, prompt, question and chunk text), held
under the cache's lock (retrieval_bench.core.locking) from the first look to the last reply. A kill
loses only the requests in flight; a rerun pays only for pairs never graded. Off
(judge.enabled false, or provider none) nothing is read from the runs and nothing is asked.
"""

from __future__ import annotations

import hashlib
import io
import itertools
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.logs import Log
from retrieval_bench.core.params import JUDGE_POOL_REVISION
from retrieval_bench.core.paths import DEFAULT, JUDGE_PROMPT, at_revision, run_of
from retrieval_bench.core.relevance import judge as strict_judgements
from retrieval_bench.core.revisions import read_artefact, resolve_revision
from retrieval_bench.core.run_table import read_run_file, read_run_table
from retrieval_bench.corpus.duplicates import group_members
from retrieval_bench.llm.cache.replies import EarlierKeys, read_cache, restore_from_mirror
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.tasks import JUDGE, Job, prompt_text
from retrieval_bench.llm.transport.errors import StopGeneration


class JudgeDryRun(Exception):
    """A dry run has said what judging would cost; nothing was asked or written."""


@dataclass(frozen=True)
class JudgeSettings:
    """The judge section as pooling and grading read it (a validated section: params.DEFAULTS), built
    once from params (as evaluation's Scoring is), with score.min_coverage: the strict judgement
    whose relevant chunks (the gold) the pool leaves out."""

    section: Mapping[str, Any]  # the section as validated: the LLM layer's Settings and Meta read it
    enabled: bool
    provider: str
    pool: tuple[str, ...]  # run files or rev:<revision> (read_pool)
    depth: int  # the top chunks of each pooled run judged per question
    max_attempts: int
    min_grade: int  # a chunk graded >= this counts as relevant (the report's `relevant`)
    min_coverage: float  # score.min_coverage

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "JudgeSettings":
        """From the checked params (load_all_params): the judge section and score.min_coverage."""
        judge = params["judge"]
        return cls(
            section=judge,
            enabled=bool(judge["enabled"]),
            provider=judge["provider"],
            pool=tuple(judge["pool"]),
            depth=judge["depth"],
            max_attempts=judge["max_attempts"],
            min_grade=judge["min_grade"],
            min_coverage=params["score"]["min_coverage"],
        )

    @property
    def on(self) -> bool:
        return self.enabled and self.provider != "none"


@dataclass(frozen=True)
class JudgePrompt:
    """The judge prompt's template and the sha256 of its file's bytes (part of every cache key)."""

    template: str
    sha256: str


@dataclass
class Pair:
    qid: str
    chunk_id: str
    runs: list[str]
    question: str
    text: str
    text_sha256: str


@dataclass
class Judged:
    rows: list[dict]  # data/judged_pool.jsonl: one per pooled pair
    report: dict  # metrics/judge.json

    def summary(self, pool_path: str) -> str:
        r = self.report
        if not r["enabled"]:
            return f"off ({r['why']}): nothing judged, nothing paid; the judged view counts duplicate chunks only"
        return (
            f"{r['judged']} of {r['pooled']} pooled pairs graded ({r['relevant']} relevant, {r['unjudged']} unjudged), "
            f"{r['requests']} requests this run, {usd(r['cost_usd'])}; written to {pool_path}"
        )


def read_prompt(data: bytes, path: str) -> JudgePrompt:
    """The judge prompt of a file's bytes, checked for its placeholders."""
    template = prompt_text(data, path)
    for placeholder in (JUDGE.query_placeholder, JUDGE.placeholder):
        if placeholder is not None and placeholder not in template:
            raise InputError(f"{path}: the judge prompt has no {placeholder} placeholder")
    return JudgePrompt(template, hashlib.sha256(data).hexdigest())


def read_pool(pool: Iterable[str], cwd: Path = Path(".")) -> dict[str, pd.DataFrame]:
    """Each judge.pool entry's run (qid, chunk_id, rank): a run file (our Parquet run, a TREC run
        or JSONL), or rev:<revision>, the default system's run as committed there (from git or the DVC
    cache; data/run.parquet at revisions from before the panel held every system)."""
    runs = {}
    for entry in pool:
        if entry.startswith(JUDGE_POOL_REVISION):
            revision = entry[len(JUDGE_POOL_REVISION) :]
            commit = resolve_revision(revision, cwd)
            for path in at_revision(run_of, DEFAULT):
                if (data := read_artefact(path, commit, cwd)) is not None:
                    break
            if data is None:
                raise InputError(
                    f"judge.pool {entry}: {run_of(DEFAULT)} is not in git or the DVC cache at {revision}; "
                    "`dvc pull` it first"
                )
            run = read_run_table(io.BytesIO(data), f"judge.pool {entry}: {path} at {revision}")
        elif not (cwd / entry).is_file():
            raise InputError(f"judge.pool {entry}: not found (a run file, or {JUDGE_POOL_REVISION}<git revision>)")
        elif entry.lower().endswith(".parquet"):
            run = read_run_table(cwd / entry, f"judge.pool {entry}")
        else:
            run = read_run_file(cwd / entry)
        runs[entry] = run  # read_run_table and read_run_file check the columns, ids and scores
    return runs


def pool_pairs(
    golden: list[dict],
    chunks: pd.DataFrame,
    runs: dict[str, pd.DataFrame],
    duplicates: pd.DataFrame,
    settings: JudgeSettings,
    *,
    log: Log | None = None,
) -> list[Pair]:
    """The pooled pairs of the top settings.depth of each run, question by question in golden-set
    order, chunks in order of first appearance; the gold (the strict judgement's relevant chunks at
    settings.min_coverage) and its copies are left out."""
    depth = settings.depth
    members = group_members(duplicates)
    chunk_ids = chunks["chunk_id"].to_numpy()
    text_of = dict(zip(chunks["chunk_id"], chunks["text"], strict=True))
    sha_of = dict(zip(chunks["chunk_id"], chunks["text_sha256"], strict=True))
    tops = {
        label: {
            qid: group.sort_values("rank")["chunk_id"].tolist()
            for qid, group in run[run["rank"] <= depth].groupby("qid", sort=False)
        }
        for label, run in runs.items()
    }
    pairs: list[Pair] = []
    counts: Counter[str] = Counter()
    for row, strict in zip(golden, strict_judgements(golden, chunks, settings.min_coverage), strict=True):
        gold = {
            chunk_ids[i] for i, gain in zip(strict.indices.tolist(), strict.gains.tolist(), strict=True) if gain > 0
        }
        gold |= {member for chunk_id in gold for member in members.get(chunk_id, ())}
        gold |= set(row.get("relevant") or {})  # chunks real labels judged (0 included) are judged already
        found: dict[str, Pair] = {}
        for label, top in tops.items():
            for chunk_id in top.get(str(row["qid"]), []):
                if chunk_id in gold:
                    counts["skipped_gold"] += 1
                elif chunk_id not in text_of:
                    counts["unknown_chunks"] += 1
                elif chunk_id in found:
                    found[chunk_id].runs.append(label)
                else:
                    found[chunk_id] = Pair(
                        str(row["qid"]), chunk_id, [label], row["question"], text_of[chunk_id], sha_of[chunk_id]
                    )
        pairs.extend(found.values())
    if log is not None:
        asked = {str(row["qid"]) for row in golden}
        unknown = {label: len(set(top) - asked) for label, top in tops.items() if set(top) - asked}
        log(
            f"{len(pairs)} pooled pairs from the top {depth} of {', '.join(runs)}; {counts['skipped_gold']} gold chunks "
            "or their copies left out"
            + (f", {counts['unknown_chunks']} chunk ids not in the chunk table" if counts["unknown_chunks"] else "")
            + "".join(
                f"; {n} question ids of {label} are not in the golden set (a run of another golden set?): "
                "nothing pooled from them"
                for label, n in unknown.items()
            )
        )
    return pairs


def _status(
    pairs: list[Pair], cache: dict[str, dict], meta: Meta, template: str, max_attempts: int
) -> tuple[dict[int, dict], list[Job], Counter, int]:
    """Per pair (by position) its accepted record, the jobs still to ask (one per distinct key),
    the rejected replies by reason and how many pairs wait for a reply. A grade paid for at an
    attempt beyond max_attempts (set higher before) is taken: lowering it hid paid grades."""
    accepted: dict[int, dict] = {}
    misses: dict[str, Job] = {}
    rejected: Counter = Counter()
    waiting = 0
    for position, pair in enumerate(pairs):
        for attempt in itertools.count():
            job = JUDGE.pair_job(meta, template, pair.question, pair.text, pair.text_sha256, attempt)
            record = cache.get(job.key)
            if record is None:
                if attempt < max_attempts:  # else out of attempts: unjudged
                    misses.setdefault(job.key, job)
                    waiting += 1
                break
            if record.get("rejected") is None and record.get("grade") is not None:
                accepted[position] = record
                break
            rejected[record.get("rejected") or "no_grade"] += 1
    return accepted, list(misses.values()), rejected, waiting


def judge_pool(
    settings: JudgeSettings, pairs: list[Pair], prompt: JudgePrompt, cache_path: str, dry_run: bool, *, log: Log
) -> Judged:
    """Grade every pooled pair the cache lacks (see the module's docstring); the judged pool and
    the report. Raises JudgeDryRun after a dry run, StopGeneration on a clean stop."""
    section, template, max_attempts = dict(settings.section), prompt.template, settings.max_attempts
    restore_from_mirror(cache_path, "judgements already paid for", log, dry_run)
    calls = Settings.from_params(section, section="judge")
    # The judge has no seed of its own: each request's seed derives from 0 and its key.
    meta = Meta.from_params(section, calls, prompt.sha256, EarlierKeys.of(read_cache(cache_path)), seed=0)
    context: dict[str, Any] = {}
    for pair in pairs:
        for attempt in range(max_attempts):
            key = JUDGE.pair_job(meta, template, pair.question, pair.text, pair.text_sha256, attempt).key
            context.setdefault(key, {"qid": pair.qid, "chunk_id": pair.chunk_id, "question": pair.question})

    def missing(cache: dict[str, dict], round_number: int) -> tuple[list[Job], int]:
        accepted, jobs, _, _ = _status(pairs, cache, meta, template, max_attempts)
        return jobs, len(accepted)

    work = PaidWork(JUDGE.with_context(context), meta, calls, cache_path, max_attempts)
    paid = pay_for(work, missing, max_attempts + 1, dry_run, log)
    if dry_run:
        raise JudgeDryRun(
            "dry run: nothing was asked or written"
            if paid.planned
            else f"dry run: all {len(pairs)} pooled pairs are graded or in flight already; nothing to ask"
        )
    accepted, _, rejected, waiting = _status(pairs, read_cache(cache_path), meta, template, max_attempts)
    _check_all_answered(pairs, waiting, cache_path)
    _check_some_graded(settings, pairs, accepted, rejected, cache_path)
    rows: list[dict[str, Any]] = [
        {
            "qid": p.qid,
            "chunk_id": p.chunk_id,
            "runs": p.runs,
            "grade": accepted[i]["grade"] if i in accepted else None,
            "key": accepted[i]["key"] if i in accepted else None,
        }
        for i, p in enumerate(pairs)
    ]
    grades = Counter(row["grade"] for row in rows if row["grade"] is not None)
    report = {
        "enabled": True,
        "pooled": len(pairs),
        "judged": sum(grades.values()),
        "unjudged": len(pairs) - sum(grades.values()),
        "judged_before_this_run": paid.done_at_start,
        "requests": paid.asked,
        "cost_usd": round(paid.spent, 6),
        "rejected_replies": sum(rejected.values()),
        "rejected_by_reason": dict(sorted(rejected.items())),
        "grades": {str(g): grades.get(g, 0) for g in range(4)},
        "relevant": sum(n for g, n in grades.items() if g >= settings.min_grade),
    }
    return Judged(rows, report)


def _check_all_answered(pairs: list[Pair], waiting: int, cache_path: str) -> None:
    """Every pooled pair has an accepted grade or used all its attempts on rejected replies; a pair
    still waiting for a reply (its batch vanished: gone, expired, results deleted) stops the stage,
    so judged metrics never pass unjudged pairs off as judged."""
    if waiting:
        raise StopGeneration(
            f"{waiting} of {len(pairs)} pooled pairs are unjudged: no reply came back for them (their batch is gone, "
            f"expired or its results were deleted); every grade received is kept in {cache_path}: rerun to resubmit "
            "only these, nothing graded is paid for twice"
        )


def _check_some_graded(
    settings: JudgeSettings, pairs: list[Pair], accepted: dict[int, dict], rejected: Counter, cache_path: str
) -> None:
    """A pool where every reply was rejected means a judge that cannot answer (model, max_tokens,
    prompt): the judged view would silently equal the strict one, so the stage stops instead."""
    if pairs and not accepted and rejected:
        reasons = ", ".join(f"{reason}: {n}" for reason, n in rejected.most_common())
        raise InputError(
            f"every reply of judge.provider {settings.provider} was rejected ({reasons}): no pooled pair "
            f"of {len(pairs)} has a grade; check judge.model, judge.max_tokens and the prompt in {JUDGE_PROMPT}; "
            f"the rejected replies are kept in {cache_path} and are not asked again at this judge.max_attempts"
        )


def off(settings: JudgeSettings, dry_run: bool) -> Judged:
    """What the stage writes when judging is off: no pair, no request, no cost."""
    why = "judge.enabled is false" if not settings.enabled else "judge.provider is none"
    if dry_run:
        raise JudgeDryRun(f"dry run: judging is off ({why}); nothing would be asked")
    report = {
        "enabled": False,
        "why": why,
        "pooled": 0,
        "judged": 0,
        "unjudged": 0,
        "judged_before_this_run": 0,
        "requests": 0,
        "cost_usd": 0.0,
        "rejected_replies": 0,
        "rejected_by_reason": {},
        "grades": {str(g): 0 for g in range(4)},
        "relevant": 0,
    }
    return Judged([], report)
