"""Stage 2: the golden set -> data/goldenset.jsonl, from real labels or from hand-written and
generated questions (generated with generate.provider, or taken from the question cache).

Which passages get a question is decided before anything is paid for: see
retrieval_bench.goldenset.selection. `python -m stages.generate_goldenset --dry-run` (or
RETRIEVAL_BENCH_DRY_RUN=1) prints what would be generated and its estimated cost, and writes
nothing.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
from collections import Counter
from pathlib import Path

import pandas as pd

from retrieval_bench.goldenset import echo
from retrieval_bench.goldenset.cache import read_cache
from retrieval_bench.llm.generate import (
    REJECT_REASONS,
    Meta,
    Settings,
    journal_path_for,
)
from retrieval_bench.goldenset.build import (
    deduplicate,
    evidence_texts,
    generated_row,
    handwritten_rows,
    label_rows,
    normalise_question,
    read_handwritten,
    sample_rows,
)
from retrieval_bench.io import (
    InputError,
    read_jsonl,
    run_stage,
    write_json,
    write_jsonl,
)
from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.params import load_params
from retrieval_bench.goldenset.selection import (
    CacheIndex,
    generate_missing,
    max_rounds,
    rank_passages,
    walk,
)

DOCUMENTS = "data/documents.parquet"
LABELS = "data/labels.jsonl"
PROMPT = "data/question_prompt.txt"
CACHE = "data/question_cache.jsonl"
JOURNAL = str(journal_path_for(CACHE))
GOLDENSET = "data/goldenset.jsonl"
REPORT = "metrics/goldenset.json"
REJECTS = "metrics/generate_rejects.jsonl"
DRY_RUN_ENV = "RETRIEVAL_BENCH_DRY_RUN"


def log(message: str) -> None:
    print(f"generate_goldenset: {message}", flush=True)


def dry_run_requested_by_env() -> bool:
    return os.environ.get(DRY_RUN_ENV, "").lower() in ("1", "true", "yes")


def end_dry_run(message: str) -> None:
    """Stop after a dry run: exit 0 from the command line, 3 under `dvc repro` (the environment
    switch) so that DVC records nothing."""
    log(message)
    raise SystemExit(3 if dry_run_requested_by_env() else 0)


def synthetic(params: dict, documents: pd.DataFrame, template: str, prompt_sha256: str, dry_run: bool) -> tuple[list[dict], list[dict], dict, pd.DataFrame]:
    passages = chunk_documents(documents, params["passages"]["chars"], params["passages"]["overlap"])
    hw_rows, counts = handwritten_rows(read_handwritten(Path(params["handwritten"])), documents, passages)
    hw_rows, hw_duplicates = deduplicate(hw_rows)
    counts["duplicate_questions_dropped"] = hw_duplicates
    settings = Settings.from_params(params)
    family = settings.family
    meta = Meta(params["provider"], family or "", params["model"], prompt_sha256, params["max_tokens"])
    ranked = rank_passages(passages, params["seed"], {row["chunk_sha256"] for row in hw_rows})
    budget = None if params["max_questions"] == 0 else max(0, params["max_questions"] - len(hw_rows))
    seen = {normalise_question(row["question"]) for row in hw_rows}
    if family is not None:
        generate_missing(params, settings, meta, template, ranked, budget, seen, CACHE, dry_run, log)
        if dry_run:
            end_dry_run("dry run: nothing was generated or written")
    elif dry_run:
        index = CacheIndex(read_cache(CACHE), meta, by_key=False)
        plan = walk(ranked, index, budget, params["max_attempts"], params["drop_echo"], seen, template, generating=False)
        log(f"provider none: nothing is generated; {plan.uncached} chosen passages have no cached question")
        end_dry_run("dry run: nothing was written")
    index = CacheIndex(read_cache(CACHE), meta, by_key=family is not None)
    plan = walk(ranked, index, budget, params["max_attempts"], params["drop_echo"], seen, template, generating=False)
    texts = dict(zip(documents["doc_id"], documents["text"]))
    generated = [generated_row(record, passage, texts[passage["doc_id"]]) for passage, record in plan.accepted]
    counts.update(
        passages=len(passages), uncached=plan.uncached, exhausted=plan.exhausted, cache_matches=len(index.by_passage),
        evidence_not_located=sum(not row["evidence_located"] for row in generated),
    )
    covered = {row["chunk_sha256"] for row in hw_rows + generated}
    counts["passages_without_question"] = int((~passages["text_sha256"].isin(covered)).sum())
    return hw_rows + generated, plan.rejects, counts, passages


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m stages.generate_goldenset", description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="print what would be generated and its cost; write nothing")
    parser.add_argument("--no-wait", action="store_true", help="exit with one line if another run holds the question cache, instead of waiting")
    args = parser.parse_args(argv)
    if args.no_wait:
        os.environ["RETRIEVAL_BENCH_LOCK_WAIT"] = "0"
    dry_run = args.dry_run or dry_run_requested_by_env()
    params = load_params("generate")
    documents = pd.read_parquet(DOCUMENTS)
    labels = read_jsonl(LABELS)
    prompt_bytes = Path(PROMPT).read_bytes()
    prompt_sha256 = hashlib.sha256(prompt_bytes).hexdigest()
    template = prompt_bytes.decode("utf-8")
    if "{passage}" not in template:
        raise InputError(f"{PROMPT}: the prompt has no {{passage}} placeholder")
    if not dry_run:
        for path in (CACHE, JOURNAL):  # persistent stage outputs, so they must exist
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).touch()
    rejects: list[dict] = []
    texts = dict(zip(documents["doc_id"], documents["text"]))
    if labels:
        if dry_run:
            end_dry_run("real labels: nothing would be generated")
        rows, counts = sample_rows(label_rows(labels), params["max_questions"], params["seed"]), {}
        log(f"using {len(rows)} real labelled queries; no question is generated")
        gauge = echo.mark(rows, evidence_texts(rows, texts))
    else:
        rows, rejects, counts, passages = synthetic(params, documents, template, prompt_sha256, dry_run)
        gauge = echo.mark(rows, evidence_texts(rows, texts))
        if params["drop_echo"]:
            # Generated echoes were already regenerated or replaced; hand-written ones are dropped.
            for row in rows:
                if row.get("echo"):
                    rejects.append({"reason": "echo", "source": row["source"], "chunk_id": row["gold_chunk_id"],
                                    "doc_id": row["doc_id"], "question": row["question"], "regenerated": False})
            rows = [row for row in rows if not row.get("echo")]
        rows = sample_rows(rows, params["max_questions"], params["seed"])
        if not rows:
            raise InputError(
                f"no usable question for any passage of this corpus in {CACHE} or {params['handwritten']}; "
                "set generate.provider to generate them, or bring real queries (see README)"
            )
        n_generated = sum(row["source"] != "hand-written" for row in rows)
        log(
            f"{len(rows)} questions ({len(rows) - n_generated} hand-written, {n_generated} generated); "
            f"{counts['other_corpus']} hand-written ones are for documents not in this corpus, {counts['not_located']} could not be located; "
            f"{counts['passages_without_question']} of {counts['passages']} passages have no question"
        )
        if counts["uncached"] and params["provider"] == "none" and counts["cache_matches"]:
            log(f"{counts['uncached']} chosen passages have no cached question; set generate.provider (e.g. anthropic) "
                "to generate them, or `dvc pull` a shared question cache")
        elif counts["uncached"]:
            log(f"{counts['uncached']} chosen passages still have no question after {max_rounds(params)} rounds "
                "of replacing rejected replies; rerun to continue")
    write_jsonl(GOLDENSET, rows)
    write_jsonl(REJECTS, rejects)
    reasons = Counter(reject["reason"] for reject in rejects)
    report = {
        "n_questions": len(rows),
        "n_handwritten": sum(row["source"] == "hand-written" for row in rows),
        "n_generated": sum(row["source"] not in ("hand-written", "qrels") for row in rows),
        "echo_rate": gauge["echo_rate"],
        "echo_flagged": sum(bool(row.get("echo")) for row in rows),
        "rejected": len(rejects),
        "rejected_by_reason": dict(sorted(reasons.items())),
        **{key: counts[key] for key in (
            "duplicate_questions_dropped", "passages", "passages_without_question", "uncached", "exhausted",
            "evidence_not_located",
        ) if key in counts},
        "handwritten_other_corpus": counts.get("other_corpus", 0),
        "handwritten_not_located": counts.get("not_located", 0),
    }
    write_json(REPORT, report)
    summary = ", ".join(f"{n} {reason}" for reason, n in reasons.most_common())
    log(
        f"wrote {len(rows)} questions to {GOLDENSET}; echo rate {gauge['echo_rate']} ({echo.ECHO_RULE}); "
        f"{len(rejects)} rejected replies{f' ({summary})' if summary else ''}"
        + (f", listed in {REJECTS}" if rejects else "")
    )
    for reason in reasons:
        if reason in REJECT_REASONS:
            log(f"  {reason}: {REJECT_REASONS[reason]}")


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]))
