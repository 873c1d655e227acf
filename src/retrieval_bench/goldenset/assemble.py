"""The golden set from the stage's inputs: real labels (question set real), hand-written questions
plus generated ones (generated with generate.provider, or taken from the question cache; with
real labels only when a provider is set), and the question sets of other tools
(generate.imported, goldenset.imported), with the echo gauge, the report (metrics/goldenset.json)
and the lines the stage prints.

Which passages get a question is decided before anything is paid for (goldenset.selection). A
dry run logs what would be generated and its estimated cost, then raises DryRunDone: nothing is
generated or written.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.logs import Log
from retrieval_bench.core.question_sets import GENERATED, HANDWRITTEN, REAL, question_set_of
from retrieval_bench.goldenset import echo, kinds, style_examples
from retrieval_bench.goldenset.build import (
    deduplicate,
    drop_unhygienic,
    evidence_texts,
    handwritten_rows,
    label_rows,
    mark_hygiene,
    normalise_question,
    read_handwritten,
    sample_rows,
)
from retrieval_bench.goldenset.evidence import UNLOCATED_NAMED
from retrieval_bench.goldenset.generate_settings import GenerateSettings, GenerationRun
from retrieval_bench.goldenset.imported import ImportedSet, found_line, imported_rows, read_imported
from retrieval_bench.goldenset.imported import plan_line as imported_plan_line
from retrieval_bench.goldenset.kind_classifier import classify, read_kind_prompt
from retrieval_bench.goldenset.selection import (
    REJECT_REASONS,
    CacheIndex,
    KindRun,
    generate_missing,
    rank_passages,
    walk,
)
from retrieval_bench.llm.cache.replies import EarlierKeys, read_cache
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.tasks import KIND_LABEL, QUESTION_TASKS, QUESTIONS, prompt_text


class DryRunDone(Exception):
    """A dry run has said what it would do; its message is the last line to print. Nothing was
    generated or written."""


def read_prompt(
    data: bytes, path: str | Path, examples: list[str] | None = None, placeholder: str = QUESTIONS.placeholder
) -> tuple[str, str]:
    """(template, sha256 of its bytes) of the question prompt read from `path`, with the style
    examples rendered in (goldenset.style_examples); the sha256 of the template as sent is part of
    every cache key, so the examples are too (none: the file's own bytes, the keys as before).
    `placeholder`: where the kind's task puts its passage(s)."""
    template = style_examples.render(prompt_text(data, path), examples or [], placeholder)
    prompt_sha256 = hashlib.sha256(template.encode("utf-8")).hexdigest()
    if placeholder not in template:
        raise InputError(f"{path}: the prompt has no {placeholder} placeholder")
    return template, prompt_sha256


# kind -> (template, sha256), and the kind classifier's under KIND_LABEL.name: read_question_prompts
Prompts = Mapping[str, tuple[str, str]]


def read_question_prompts(
    files: Mapping[str, str], settings: GenerateSettings, log: Log
) -> tuple[Prompts, style_examples.StyleExamples]:
    """Each generated kind's prompt, read_prompt of its file in `files` (by kind) with the examples
    generate.style_examples names rendered in, and the examples; with generate.kind_classifier llm,
    the classifier's (files[KIND_LABEL.name]) too. A missing file is one line."""
    examples = style_examples.load(settings.section)
    if examples.file is not None:
        log(f"{len(examples.questions)} style examples from {examples.file} in every question prompt")
    prompts = {}
    for kind in settings.prompt_kinds:
        path = Path(files[kind])
        if not path.is_file():
            raise InputError(f"{path}: no such file (the prompt of question kind {kind}, generate.kinds)")
        prompts[kind] = read_prompt(path.read_bytes(), path, examples.questions, QUESTION_TASKS[kind].placeholder)
    if settings.asks_kinds:
        prompts[KIND_LABEL.name] = read_kind_prompt(files[KIND_LABEL.name])
    return prompts, examples


@dataclass
class GoldenSet:
    rows: list[dict]  # data/goldenset.jsonl
    rejects: list[dict]  # every reply (or hand-written echo) not used, and why
    report: dict  # metrics/goldenset.json

    def summary(self, golden_path: str, rejects_path: str) -> list[str]:
        """The lines to print once the golden set is written."""
        reasons = Counter(reject["reason"] for reject in self.rejects)
        listed = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
        lines = [
            f"wrote {len(self.rows)} questions to {golden_path}; echo rate {self.report['echo_rate']} ({echo.ECHO_RULE}; a keyword query also: {echo.SHORT_ECHO_RULE}); "
            f"{len(self.rejects)} rejected replies{f' ({listed})' if listed else ''}"
            + (f", listed in {rejects_path}" if self.rejects else "")
        ]
        lines.extend(f"  {reason}: {REJECT_REASONS[reason]}" for reason in reasons if reason in REJECT_REASONS)
        return lines


def assemble(
    settings: GenerateSettings, documents: pd.DataFrame, labels: list[dict], prompts: Prompts, run: GenerationRun
) -> GoldenSet:
    """The golden set for the generate section `settings`: real `labels` (question set real), and
    hand-written and generated questions (each kind from its prompt in `prompts`) unless there are
    real labels and the provider is none (generating what the cache lacks), and the imported sets
    (generate.imported). Every row says its kind (single unless its question set says another).
    Raises DryRunDone at the end of a dry run."""
    params, log, cache_path = settings.section, run.log, run.cache_path
    imported = read_imported(dict(settings.imported))
    for named in imported:
        log(imported_plan_line(named))
    labelled = label_rows(labels) if labels else []
    real = sample_rows(labelled, settings.max_questions, settings.seed)
    real_left_out = len(labelled) - len(real)
    if real_left_out:  # a query log larger than max_questions is scored on a sample: said
        log(
            f"real labelled queries: a sample of {len(real)} of {len(labelled)} (generate.max_questions "
            f"{settings.max_questions}; 0 takes them all)"
        )
    generating = not labels or settings.provider != "none"
    synthetic_rows: list[dict[str, Any]] = []
    rejects: list[dict[str, Any]] = []
    counts: dict[str, Any] = {}
    if not generating:
        log(real_only_line(len(real), params, bool(imported)))
        if run.dry_run:
            raise DryRunDone("dry run: nothing would be generated or written")
        classified(real, settings, prompts, run, counts)  # provider none: the cached kinds only
    else:
        synthetic_rows, rejects, counts = synthetic(settings, documents, prompts, run, real)
    hygiene = settings.hygiene
    groups = {"real": real, "synthetic": synthetic_rows}
    passages = settings.passages(documents)
    imported_report = {}
    for named in imported:
        groups[named.name], named_rejects, named_counts = imported_rows(named, documents, passages, hygiene)
        log(found_line(named.name, groups[named.name], named_counts))
        rejects += named_rejects
        imported_report[named.name] = {
            "file": named.file,
            "format": named.kind,
            "read": len(named.questions),
            **named_counts,
        }
    check_unique_qids(groups, lambda name, row: origin(name, row, params, imported, cache_path))
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    candidates = [row for group in groups.values() for row in group]
    assign_kinds(candidates)  # before the echo gauge: a keyword question gets its short-query rule
    # Keyword queries are held to the short-query rule too, which needs the corpus's rare terms.
    rare = kinds.Corpus(passages).rare() if any(row.get("kind") == "keyword" for row in candidates) else None
    gauge = echo.mark(candidates, evidence_texts(candidates, texts), rare)
    if settings.drop_echo:  # generated echoes were already regenerated or replaced; the others are dropped
        for name in [name for name in groups if name != "real"]:
            groups[name], dropped = drop_echoes(groups[name])
            rejects += dropped
    for group in groups.values():
        mark_hygiene(group, hygiene.near_jaccard)
    handwritten_left_out = 0
    if generating:
        handwritten = sum(question_set_of(row) == HANDWRITTEN for row in groups["synthetic"])
        groups["synthetic"] = sample_rows(groups["synthetic"], settings.max_questions, settings.seed)
        handwritten_left_out = handwritten - sum(question_set_of(row) == HANDWRITTEN for row in groups["synthetic"])
        # counted on what is kept: echoes and near-duplicates dropped, hand-written ones sampled away
        kept = {row["chunk_sha256"] for row in groups["synthetic"]}
        counts["passages_without_question"] = int((~passages["text_sha256"].isin(kept)).sum())
        if not any(groups.values()):
            raise no_usable_question(params, cache_path, counts, rejects)
        log_synthetic(groups["synthetic"], counts, settings, log)
    golden = [row for group in groups.values() for row in group]
    summary = {**report(golden, rejects, counts, gauge), **kinds_report(golden, counts), "imported": imported_report}
    if real_left_out:
        summary["real_left_out"] = real_left_out
    if handwritten_left_out:
        summary["handwritten_left_out"] = handwritten_left_out
    return GoldenSet(golden, rejects, summary)


def assign_kinds(rows: list[dict]) -> None:
    """Every row's kind, in place: real, hand-written and imported rows carry theirs (build.assigned_kind),
    a generated one its kind's, and single when generated with generate.kinds single alone."""
    for row in rows:
        row.setdefault("kind", "single")


def kinds_report(rows: list[dict], counts: dict) -> dict:
    """What metrics/goldenset.json says of the kinds: the unanswerable questions' check, each question
    set's mix (mix_by_question_set), with generate.kinds match the mix matched, and each kind that
    got fewer questions than its share (from `counts`)."""
    mixes = mix_by_question_set(rows)
    said = (
        {"unanswerable_check": kinds.UNANSWERABLE_CHECK} if any(r.get("kind") == "unanswerable" for r in rows) else {}
    )
    return {
        **said,
        **({"mix_by_question_set": mixes} if mixes else {}),
        **({"matched_mix": counts["matched_mix"]} if "matched_mix" in counts else {}),
        **({"kind_classifier": counts["kind_classifier"]} if "kind_classifier" in counts else {}),
        **({"kind_shortfall": counts["kind_shortfall"]} if "kind_shortfall" in counts else {}),
    }


def mix_by_question_set(rows: list[dict]) -> dict[str, dict[str, float]]:
    """{question set: {kind: share}} (kinds.mix, the rules generate.kinds match uses; shares to 4
    decimals), every set's, when real or hand-written questions are present (the mix the others
    are set against); else {}."""
    by_set: dict[str, list[dict]] = {}
    for row in rows:
        by_set.setdefault(question_set_of(row), []).append(row)
    if not any(name in by_set for name in (REAL, HANDWRITTEN)):
        return {}
    return {name: {kind: round(share, 4) for kind, share in kinds.mix(by_set[name])} for name in sorted(by_set)}


def check_unique_qids(groups: dict[str, list[dict]], origin: Callable[[str, dict], str]) -> None:
    """One qid per question across all question sets (real, synthetic, each imported set): two
    golden rows with one id would be merged by the systems that key on it. A collision (a
    hand-written `setx:1` beside set setx's `1`) is an InputError naming both (`origin`: a row's
    file and own qid)."""
    first: dict[str, tuple[str, dict]] = {}
    for name, rows in groups.items():
        for row in rows:
            if row["qid"] in first:
                raise InputError(
                    f"qid {quoted(row['qid'])} names two questions: {origin(*first[row['qid']])} and {origin(name, row)}; "
                    "qids must be unique across question sets (an imported set's are NAME:<its own qid>): rename one"
                )
            first[row["qid"]] = (name, row)


def origin(name: str, row: dict, params: Mapping, imported: list[ImportedSet], cache_path: str) -> str:
    """Where golden row `row` of group `name` comes from, for messages: its file and own qid."""
    for named in imported:
        if named.name == name:
            return f"{named.file} (generate.imported.{name}) qid {quoted(row['qid'][len(name) + 1 :])}"
    if name == "real":
        return f"the real labels (load.source) qid {quoted(row['qid'])}"
    if question_set_of(row) == HANDWRITTEN:
        return f"{params['handwritten']} (generate.handwritten) qid {quoted(row['qid'])}"
    return f"the question cache {cache_path} (generated) qid {quoted(row['qid'])}"


def drop_echoes(rows: list[dict]) -> tuple[list[dict], list[dict]]:
    """(rows the echo gauge did not flag, a reject for each flagged one). A row judged by labels
    (an imported BEIR set's qrels) is never dropped: its evidence is a whole labelled chunk or
    document, where sharing words is no sign of quoting a passage."""
    flagged = [bool(row.get("echo")) and row.get("relevant") is None for row in rows]
    rejects = [
        {
            "reason": "echo",
            "source": row["source"],
            "chunk_id": row["gold_chunk_id"],
            "doc_id": row["doc_id"],
            "question": row["question"],
            "regenerated": False,
            **({"question_set": row["question_set"]} if "question_set" in row else {}),
        }
        for row, echo in zip(rows, flagged, strict=True)
        if echo
    ]
    return [row for row, echo in zip(rows, flagged, strict=True) if not echo], rejects


def real_only_line(n_real: int, params: Mapping, imported: bool) -> str:
    """The plan with real labels and provider none: the real queries only, and the settings that
    cannot take effect so: files of questions to add, and (without `imported` sets, which they
    apply to) the drops of questions, which never drop a real one."""
    files = [
        f"generate.{key} {params[key]}"
        for key in ("handwritten", "style_examples")
        if params[key] is not None and Path(params[key]).is_file() and Path(params[key]).read_bytes().strip()
    ]
    drops = ("drop_echo", "drop_context_dependent", "drop_near_duplicates")
    unused = files + [f"generate.{key} true" for key in drops if params[key] and not imported]
    return f"{n_real} real labelled queries (question set real); no question is generated (generate.provider none)" + (
        f"; not used without a provider: {', '.join(unused)}" if unused else ""
    )


def no_usable_question(params: Mapping, cache_path: str | Path, counts: dict, rejects: list[dict]) -> InputError:
    """The one line a golden set without any usable question stops with: why, and what to do."""
    skipped = counts.get("other_corpus", 0)
    why = (
        (
            f"; {skipped} hand-written questions were skipped because their doc_id is not a document id of this corpus "
            "(with ready chunks each chunk is its own document: doc_id must be a chunk id)"
        )
        if skipped
        else ""
    )
    remedy = (
        f"every reply of generate.provider {params['provider']} was rejected ("
        + ", ".join(f"{reason}: {n}" for reason, n in Counter(r["reason"] for r in rejects).most_common())
        + "): check generate.model, max_tokens and response_format"
        if params["provider"] != "none" and rejects
        else "set generate.provider to generate them"
    )
    return InputError(
        f"no usable question for any passage of this corpus in {cache_path} or {params['handwritten']}{why}; "
        f"{remedy}, or bring real queries (docs/how-to/your-corpus.md)"
    )


def located_handwritten(
    path: str, documents: pd.DataFrame, passages: pd.DataFrame, log: Log
) -> tuple[list[dict], dict[str, int]]:
    """The hand-written questions at `path` located in the documents, without repeats: (rows,
    counts). Each whose evidence is not found, and each whose evidence occurs more than once (the
    first occurrence is taken), is named in a line of its own (the first evidence.UNLOCATED_NAMED
    of either)."""
    unlocated: list[str] = []
    rows, counts = handwritten_rows(read_handwritten(Path(path)), documents, passages, unlocated)
    for line in unlocated:
        log(line)
    if counts["not_located"] > UNLOCATED_NAMED:
        log(
            f"... and {counts['not_located'] - UNLOCATED_NAMED} more hand-written questions whose evidence is not found"
        )
    if counts["ambiguous_evidence"] > UNLOCATED_NAMED:
        log(f"... and {counts['ambiguous_evidence'] - UNLOCATED_NAMED} more whose evidence occurs more than once")
    rows, counts["duplicate_questions_dropped"] = deduplicate(rows)
    if counts["duplicate_questions_dropped"]:
        log(f"{counts['duplicate_questions_dropped']} hand-written questions repeat an earlier one and are dropped")
    return rows, counts


def synthetic(
    settings: GenerateSettings, documents: pd.DataFrame, prompts: Prompts, run: GenerationRun, real: list[dict]
) -> tuple[list[dict], list[dict], dict]:
    """Hand-written questions located in the documents, then generated ones of each kind for the
    chosen passages (generating what the cache lacks): (rows, rejected replies, counts). `real`:
    the real labelled queries beside them (the plan line counts them; generate.kinds match takes
    their mix, else the hand-written questions')."""
    passages = settings.passages(documents)
    hw_rows, found = located_handwritten(settings.handwritten, documents, passages, run.log)
    counts: dict[str, Any] = dict(found)
    hw_rows, hw_rejects = drop_unhygienic(hw_rows, settings.hygiene)  # generated ones are asked again instead (walk)
    settings = classified(real + hw_rows, settings, prompts, run, counts)  # before their mix is matched
    if settings.match:
        settings = matched(settings, real, hw_rows, counts, run.log)
    llm = Settings.from_params(dict(settings.section))
    covered = {row["chunk_sha256"] for row in hw_rows}
    ranked = rank_passages(passages, settings.seed, covered)
    budget = None if settings.max_questions == 0 else max(0, settings.max_questions - len(hw_rows))
    run.log(plan_line(settings.max_questions, len(hw_rows), budget, len(ranked), len(real)))
    runs = kind_runs(settings, passages, prompts, budget, covered, EarlierKeys.of(read_cache(run.cache_path)))
    if len(runs) > 1:
        run.log("kinds: " + ", ".join(f"{r.kind} {'all' if r.budget is None else r.budget}" for r in runs))
    seen = {normalise_question(row["question"]) for row in hw_rows}
    if llm.family is not None:
        generate_missing(runs, settings, seen, run)
        if run.dry_run:
            raise DryRunDone("dry run: nothing was generated or written")
    texts = dict(zip(documents["doc_id"], documents["text"], strict=True))
    generated: list[dict] = []
    rejects = list(hw_rejects)
    records = read_cache(run.cache_path)
    counts.update(uncached=0, exhausted=0, cache_matches=0)
    for kind_run in runs:
        index = CacheIndex(records, kind_run.meta, by_key=llm.family is not None)
        plan = walk(kind_run, index, seen, settings, generating=False)
        seen.update(record["question"] for _, record in plan.accepted)
        generated += [kinds.kind_row(kind_run.kind, record, unit, texts) for unit, record in plan.accepted]
        rejects += plan.rejects
        counts["uncached"] += plan.uncached
        counts["exhausted"] += plan.exhausted
        counts["cache_matches"] += len(index.by_passage)
        if kind_run.budget is not None and len(plan.accepted) + plan.uncached < kind_run.budget:
            # the kind's units ran out (every one used or rejected): fewer questions than its share
            made = len(plan.accepted)
            counts.setdefault("kind_shortfall", {})[kind_run.kind] = {"planned": kind_run.budget, "made": made}
            units = "passage groups sharing a rare term" if kind_run.kind == "multi" else "eligible passages"
            run.log(
                f"kind {kind_run.kind}: {made} of {kind_run.budget} planned questions: the corpus has no more "
                f"{units} ({plan.exhausted} had every reply rejected); the golden set holds fewer than its share"
            )
    if run.dry_run:  # provider none: nothing is generated; what the cache leaves without a question
        run.log(f"provider none: nothing is generated; {counts['uncached']} chosen passages have no cached question")
        raise DryRunDone("dry run: nothing was written")
    counts.update(
        passages=len(passages), evidence_not_located=sum(row["evidence_located"] is False for row in generated)
    )
    return hw_rows + generated, rejects, counts


def classified(
    rows: list[dict], settings: GenerateSettings, prompts: Prompts, run: GenerationRun, counts: dict
) -> GenerateSettings:
    """generate.kind_classifier llm: the kinds of `rows` the rules gave asked of the LLM, in place
    (goldenset.kind_classifier), its report in `counts`; the settings to generate with (what it
    spent counted under the same limit: after_spending). rules: the settings unchanged."""
    if not settings.asks_kinds:
        return settings
    counts["kind_classifier"] = classify(rows, settings, prompts[KIND_LABEL.name], run)
    return settings.after_spending(counts["kind_classifier"]["cost_usd"])


def matched(
    settings: GenerateSettings, real: list[dict], hw_rows: list[dict], counts: dict, log: Log
) -> GenerateSettings:
    """generate.kinds match: the settings generating in the mix of the `real` (else the hand-written)
    questions, logged and recorded in `counts` (matched_mix)."""
    settings.check_match(len(real), len(hw_rows))
    settings = settings.matched(kinds.mix(real or hw_rows))
    source = "real" if real else "hand-written"
    counts["matched_mix"] = {"from": source, **{kind: round(share, 4) for kind, share in settings.kinds}}
    log(f"generate.kinds match: the {source} questions' mix, " + ", ".join(f"{k} {v:.0%}" for k, v in settings.kinds))
    return settings


def kind_runs(
    settings: GenerateSettings,
    passages: pd.DataFrame,
    prompts: Prompts,
    budget: int | None,
    covered: set[str],
    earlier: EarlierKeys,
) -> list[KindRun]:
    """Each generated kind's run: its share of `budget` (None: every passage, for single alone;
    with several kinds their shares of the eligible passages), its units in its own seeded ranking
    (passages no hand-written question `covered`; multi: passage groups), its task and prompt."""
    llm = Settings.from_params(dict(settings.section))
    corpus = kinds.Corpus(passages)
    eligible = len(rank_passages(passages, settings.seed, covered))
    shares = (
        None
        if budget is None and len(settings.kinds) == 1
        # the shares of what is generated: the budget, or fewer where fewer passages are eligible
        else kinds.allocate(eligible if budget is None else min(budget, eligible), settings.kinds)
    )
    runs = []
    for kind in settings.kind_names:
        ranked = rank_passages(passages, kinds.ranking_seed(settings.seed, kind), covered)
        template, prompt_sha256 = prompts[kind]
        runs.append(
            KindRun(
                kind,
                QUESTION_TASKS[kind],
                template,
                Meta.from_params(dict(settings.section), llm, prompt_sha256, earlier, settings.seed),
                corpus.groups(ranked) if kind == "multi" else ranked,
                None if shares is None else shares[kind],
                corpus,
            )
        )
    return runs


def plan_line(max_questions: int, n_handwritten: int, budget: int | None, n_eligible: int, n_real: int = 0) -> str:
    """What the golden set is to hold: the `n_real` real labelled queries (none: not said), the
    hand-written questions, and how many passages get a generated one (`budget`: None, no limit)
    of the `n_eligible` that may."""
    if budget is None:
        line = (
            f"max_questions 0 (no limit): {n_handwritten} hand-written questions, and a generated question for "
            f"each of the {n_eligible} passages they do not cover"
        )
    elif budget == 0:
        line = f"max_questions {max_questions} is used up by {n_handwritten} hand-written questions: 0 to generate"
        if n_handwritten > max_questions:
            line += f"; a sample of {max_questions} of them is kept (0 takes them all)"
    else:
        line = (
            f"max_questions {max_questions} less {n_handwritten} hand-written questions: {min(budget, n_eligible)} "
            f"passages get a generated question (of {n_eligible} eligible)"
        )
    if not n_real:
        return line
    to_generate = n_eligible if budget is None else min(budget, n_eligible)
    return (
        f"{n_real} real labelled queries (question set real) + {to_generate} questions to generate "
        f"(or take from the question cache): {line}; the real queries are extra"
    )


def log_synthetic(rows: list[dict], counts: dict, settings: GenerateSettings, log: Log) -> None:
    params = settings.section
    n_generated = sum(question_set_of(row) == GENERATED for row in rows)
    log(
        f"{len(rows)} questions ({len(rows) - n_generated} hand-written, {n_generated} generated); "
        f"{counts['other_corpus']} hand-written ones are for documents not in this corpus, {counts['not_located']} could not be located; "
        f"{counts['passages_without_question']} of {counts['passages']} passages have no question"
    )
    if counts["uncached"] and params["provider"] == "none" and counts["cache_matches"]:
        log(
            f"{counts['uncached']} chosen passages have no cached question; set generate.provider (e.g. anthropic) "
            "to generate them, or `dvc pull` a shared question cache"
        )
    elif params["provider"] == "none":
        # Nothing was asked and nothing rejected: say so, and what would add questions.
        more = (
            f": set generate.provider (e.g. anthropic) to generate questions for {counts['uncached']} more passages"
            if counts["uncached"]
            else ""
        )
        cached = f" and {n_generated} from the question cache" if n_generated else ""
        log(f"{len(rows) - n_generated} hand-written questions{cached}; generation off (provider none){more}")
    elif counts["uncached"]:
        log(
            f"{counts['uncached']} chosen passages still have no question after {settings.max_rounds} rounds "
            "of replacing rejected replies; the golden set holds the others. To ask again: "
            "`dvc repro -f -s generate_goldenset`, then `dvc repro` (a plain `dvc repro` sees nothing changed)"
        )


def report(rows: list[dict], rejects: list[dict], counts: dict, gauge: dict) -> dict:
    """metrics/goldenset.json: sizes (by question set too), the echo gauge, rejects by reason,
    where questions are missing."""
    reasons = Counter(reject["reason"] for reject in rejects)
    by_set = Counter(question_set_of(row) for row in rows)
    return {
        "n_questions": len(rows),
        "n_handwritten": by_set["hand-written"],
        "n_generated": by_set["generated"],
        "n_by_question_set": dict(sorted(by_set.items())),
        "n_by_kind": dict(sorted(Counter(row.get("kind", "single") for row in rows).items())),
        "echo_rate": gauge["echo_rate"],
        "echo_flagged": sum(bool(row.get("echo")) for row in rows),
        "rejected": len(rejects),
        "rejected_by_reason": dict(sorted(reasons.items())),
        **{
            key: counts[key]
            for key in (
                "duplicate_questions_dropped",
                "passages",
                "passages_without_question",
                "uncached",
                "exhausted",
                "evidence_not_located",
            )
            if key in counts
        },
        "context_dependent_flagged": sum("context_dependent" in row for row in rows),
        "near_duplicate_flagged": sum("near_duplicate_of" in row for row in rows),
        "handwritten_other_corpus": counts.get("other_corpus", 0),
        "handwritten_not_located": counts.get("not_located", 0),
    }
