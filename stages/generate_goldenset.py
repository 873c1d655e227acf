"""Stage 2: the golden set -> data/goldenset.jsonl: real labels, hand-written and generated
questions, and question sets of other tools (generate.imported) (retrieval_bench.goldenset.assemble).
Generated questions come from the question cache (data/question_cache.jsonl) or from the LLM of
generate.provider for what it lacks; with a default DVC remote, the cache version dvc.lock records (a
teammate's `dvc push`) is fetched first, so nothing is paid for twice (retrieval_bench.goldenset.remote).
People's reviews (data/reviews/) are counted in metrics/goldenset.json. `--dry-run` (or
RETRIEVAL_BENCH_DRY_RUN=1 under `dvc repro`) prints what would be generated and its cost for the sync
and the batch API; it needs no API key, calls nothing, writes nothing."""

from __future__ import annotations

import sys

from retrieval_bench.core import paths
from retrieval_bench.core.files import read_jsonl, read_table, touch_jsonl, write_json, write_jsonl
from retrieval_bench.core.locking import dry_run_from_env, paid_stage_arguments
from retrieval_bench.core.logs import silent
from retrieval_bench.core.params import load_params
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.goldenset.assemble import DryRunDone, assemble, read_question_prompts
from retrieval_bench.goldenset.generate_settings import GenerateSettings, GenerationRun
from retrieval_bench.goldenset.remote import fetch_shared_cache
from retrieval_bench.goldenset.reviews import review_report


def log(message: str) -> None:
    print(f"generate_goldenset: {message}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("generate_goldenset", __doc__)
    dry_run = paid_stage_arguments(
        parser, argv, "print what would be generated and its cost; write nothing", "question cache"
    )
    settings = GenerateSettings.from_params(load_params("generate"))
    documents = read_table(paths.DOCUMENTS)
    labels = read_jsonl(paths.LABELS)
    generating = not labels or settings.provider != "none"  # real labels alone generate nothing
    prompts, examples = read_question_prompts(paths.GOLDENSET_PROMPTS, settings, log if generating else silent)
    run = GenerationRun(paths.QUESTION_CACHE, dry_run, log)
    if generating or settings.asks_kinds:  # the question cache holds the kinds told too
        fetch_shared_cache(run, paths.BATCH_JOURNAL, paths.DVC_LOCK, settings.provider != "none")
    for path in () if dry_run else (paths.QUESTION_CACHE, paths.BATCH_JOURNAL):
        touch_jsonl(path)  # persistent stage outputs: they must exist, and DVC warns about empty ones
    try:
        golden = assemble(settings, documents, labels, prompts, run)
    except DryRunDone as done:  # exit 0 from the command line, 3 under `dvc repro` (the switch): DVC records nothing
        log(str(done))
        raise SystemExit(3 if dry_run_from_env() else 0) from None
    write_jsonl(paths.GOLDENSET, golden.rows)
    write_jsonl(paths.GENERATE_REJECTS, golden.rejects)
    reviewed = review_report(paths.REVIEWS, golden.rows)  # people's verdicts: the set's measured quality
    write_json(paths.GOLDENSET_REPORT, {**golden.report, "style_examples": examples.report(), **reviewed})
    for line in golden.summary(paths.GOLDENSET, paths.GENERATE_REJECTS):
        log(line)


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
