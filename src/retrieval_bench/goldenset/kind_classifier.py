"""generate.kind_classifier llm: the kinds of real and hand-written questions told by the LLM of
generate.provider instead of the wording rules (build.assigned_kind).

Asked: the questions whose row names no kind (kind_by rule) and whose labels leave it open: a
question the rules call single or keyword (not unanswerable, which its labels decide, nor multi,
which its evidence spans decide). The model reads the question alone (data/kind_prompt.txt) and
answers single, multi or keyword (llm.runs.tasks.KIND_LABEL). Replies go to the question cache
(keyed by provider family, model, the prompt's sha256 and the question), through the LLM layer's
one entry point (llm.runs.paid): priced, guarded by generate.max_cost_usd (what it spends is taken
off what the questions may), journalled under the batch API, paid once. With provider none only
the cache is read (by model, prompt and question, as generated questions are); a question without
a cached kind keeps the rule's. A classified row says kind_by llm; `report` is what
metrics/goldenset.json says of it (kind_classifier)."""

from __future__ import annotations

import hashlib
import itertools
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.logs import Log
from retrieval_bench.core.question_sets import KEYWORD, SINGLE
from retrieval_bench.goldenset.build import RULE
from retrieval_bench.goldenset.generate_settings import LLM, GenerateSettings, GenerationRun
from retrieval_bench.goldenset.selection import CacheIndex
from retrieval_bench.llm.cache.replies import EarlierKeys, read_cache
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.tasks import KIND_LABEL, Job, prompt_text


def read_kind_prompt(path: str | Path) -> tuple[str, str]:
    """(template, sha256 of the file's bytes) of the classifier prompt at `path`, as the question
    prompts are read; a missing file or placeholder is one line."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file (the prompt of generate.kind_classifier llm)")
    data = path.read_bytes()
    template = prompt_text(data, path)
    if KIND_LABEL.placeholder not in template:
        raise InputError(f"{path}: the kind classifier's prompt has no {KIND_LABEL.placeholder} placeholder")
    return template, hashlib.sha256(data).hexdigest()


def askable(row: dict) -> bool:
    """Whether the classifier decides this row's kind: the rules gave it, and its labels leave it open."""
    return row.get("kind_by") == RULE and row.get("kind") in (SINGLE, KEYWORD)


@dataclass(frozen=True)
class Classifier:
    """The classifier of one run: its prompt, how its requests are keyed and sent."""

    settings: GenerateSettings
    template: str
    meta: Meta
    llm: Settings

    @classmethod
    def of(cls, settings: GenerateSettings, prompt: tuple[str, str], cache: dict[str, dict]) -> "Classifier":
        """The classifier of the generate section `settings` with `prompt` (read_kind_prompt), its
        requests keyed as the question `cache`'s records were (EarlierKeys)."""
        template, sha256 = prompt
        llm = Settings.from_params(dict(settings.section))
        meta = Meta.from_params(dict(settings.section), llm, sha256, EarlierKeys.of(cache), settings.seed)
        return cls(settings, template, meta, llm)

    def jobs(self, question: str) -> list[Job]:
        """The question's request for each attempt (generate.max_attempts): a rejected reply is asked again."""
        sha = hashlib.sha256(question.encode("utf-8")).hexdigest()
        return [
            KIND_LABEL.job(self.meta, self.template, question, sha, attempt)
            for attempt in range(self.settings.max_attempts)
        ]

    def status(self, questions: list[str], cache: dict[str, dict]) -> tuple[dict[str, str], list[Job]]:
        """({question: its kind} for the questions with an accepted reply, the requests still to
        make: each other question's first attempt not yet answered)."""
        index = CacheIndex(cache, self.meta, by_key=self.llm.family is not None)
        kinds: dict[str, str] = {}
        misses: dict[str, Job] = {}
        for question in questions:
            sha = hashlib.sha256(question.encode("utf-8")).hexdigest()
            # past max_attempts only what the cache holds (a label paid for under a higher setting)
            for attempt in itertools.count():
                job = KIND_LABEL.job(self.meta, self.template, question, sha, attempt)
                record = index.lookup({"text_sha256": job.passage_sha256}, job.attempt, job)
                if record is None:
                    if attempt < self.settings.max_attempts:
                        misses.setdefault(job.key, job)
                    break
                if record.get("rejected") is None and record.get("kind"):
                    kinds[question] = str(record["kind"])
                    break
        return kinds, list(misses.values())


def classify(
    rows: list[dict], settings: GenerateSettings, prompt: tuple[str, str], run: GenerationRun
) -> dict[str, Any]:
    """Set the kind of every askable row the classifier answers (kind_by llm), in place, asking
    generate.provider for what the cache lacks (a dry run logs the plan and its cost only); the
    report for metrics/goldenset.json, with what was spent (`cost_usd`)."""
    asked = [row for row in rows if askable(row)]
    questions = sorted({row["question"] for row in asked})
    cache = read_cache(run.cache_path)
    classifier = Classifier.of(settings, prompt, cache)
    log: Log = lambda line: run.log(f"kind classifier: {line}")  # noqa: E731
    spent, requests = 0.0, 0
    # With a provider pay_for runs even with nothing to ask: it collects a batch an earlier run left.
    if classifier.llm.family is not None:
        context = {job.key: {"question": q} for q in questions for job in classifier.jobs(q)}
        work = PaidWork(
            KIND_LABEL.with_context(context), classifier.meta, classifier.llm, run.cache_path, settings.max_attempts
        )

        def missing(records: dict[str, dict], round_number: int) -> tuple[list[Job], int]:
            kinds, jobs = classifier.status(questions, records)
            return jobs, len(kinds)

        paid = pay_for(work, missing, settings.max_attempts + 1, run.dry_run, log)
        spent, requests, cache = paid.spent, paid.asked, read_cache(run.cache_path)  # with the replies just paid for
    kinds, _ = classifier.status(questions, cache)
    changed: Counter[str] = Counter()
    for row in asked:
        kind = kinds.get(row["question"])
        if kind is None:
            continue
        if kind != row["kind"]:
            changed[f"{row['kind']}->{kind}"] += 1
        row.update(kind=kind, kind_by=LLM)
    report = {
        "by": LLM,
        "asked": len(asked),
        "classified": sum(row["kind_by"] == LLM for row in asked),
        "by_rule": sum(row["kind_by"] == RULE for row in asked),
        "changed": dict(sorted(changed.items())),
        "requests": requests,
        "cost_usd": round(spent, 6),
    }
    log(summary_line(report, settings.provider, run.dry_run))
    return report


def summary_line(report: dict[str, Any], provider: str, dry_run: bool = False) -> str:
    """What the stage prints of the classifier's report."""
    moved = ", ".join(f"{n} {change.replace('->', ' to ')}" for change, n in report["changed"].items())
    why = (
        "not asked in a dry run: the plan below counts them so, and generate.kinds match may shift"
        if dry_run
        else "no cached reply, provider none"
        if provider == "none"
        else "every attempt rejected"
    )
    left = f"; {report['by_rule']} keep the rules' kind ({why})" if report["by_rule"] else ""
    return (
        f"{report['classified']} of {report['asked']} real and hand-written questions without a stated kind classified "
        f"by the LLM ({moved or 'none changed'} from the rules){left}; {report['requests']} requests, "
        f"{usd(report['cost_usd'])}"
    )
