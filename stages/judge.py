"""Stage judge: pooled LLM relevance judgements -> data/judged_pool.jsonl (the pooled pairs and
their grades, read by score), data/judgements.jsonl (the persistent cache of paid grades) and
metrics/judge.json. Off by default (judge.enabled: false): then it writes an empty pool at once.

`python -m stages.judge --dry-run` (or RETRIEVAL_BENCH_DRY_RUN=1) prints what judging would cost.
"""

from __future__ import annotations

import sys
from pathlib import Path

from retrieval_bench.core import paths
from retrieval_bench.core.files import read_jsonl, read_table, touch_jsonl, write_json, write_jsonl
from retrieval_bench.core.locking import dry_run_from_env, paid_stage_arguments
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.goldenset import judge as judging


def log(message: str) -> None:
    print(f"judge: {message}", flush=True)


def main(argv: list[str] | None = None) -> None:
    parser = stage_parser("judge", __doc__)
    dry_run = paid_stage_arguments(parser, argv, "print what judging would cost; write nothing", "judgement cache")
    settings = judging.JudgeSettings.from_params(load_all_params())
    for path in () if dry_run else (paths.JUDGEMENTS, paths.JUDGE_BATCH_JOURNAL):  # persistent outputs: they must exist
        touch_jsonl(path)
    # A dry run exits 0 from the command line, 3 under `dvc repro` (the switch): DVC records nothing.
    try:
        if not settings.on:
            judged = judging.off(settings, dry_run)
        else:
            prompt = judging.read_prompt(Path(paths.JUDGE_PROMPT).read_bytes(), paths.JUDGE_PROMPT)
            chunks = read_table(paths.CHUNKS, ["chunk_id", "doc_id", "start", "end", "text", "text_sha256"])
            golden, runs, duplicates = (
                read_jsonl(paths.GOLDENSET),
                judging.read_pool(settings.pool),
                read_table(paths.DUPLICATES),
            )
            pairs = judging.pool_pairs(golden, chunks, runs, duplicates, settings, log=log)
            judged = judging.judge_pool(settings, pairs, prompt, paths.JUDGEMENTS, dry_run, log=log)
    except judging.JudgeDryRun as done:
        log(str(done))
        raise SystemExit(3 if dry_run_from_env() else 0) from None
    write_jsonl(paths.JUDGED_POOL, judged.rows)
    write_json(paths.JUDGE_REPORT, judged.report)
    log(judged.summary(paths.JUDGED_POOL))


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
