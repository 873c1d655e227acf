"""Stage 5: score the run against the golden set -> metrics/ (metrics, per question, plots), in two
views: strict (the golden set's labels) and judged (plus duplicate chunks and pooled LLM grades)."""
import sys

import pandas as pd

from retrieval_bench import paths
from retrieval_bench.evaluation.judged import judged_summary, unjudged_warning
from retrieval_bench.evaluation.metrics import rank_histogram, summarize
from retrieval_bench.evaluation.scoring import score_run_both_views, unscorable_warning
from retrieval_bench.io import atomic_open, read_jsonl, read_table, run_stage, write_json
from retrieval_bench.params import load_all_params
from retrieval_bench.retrieval.run import read_run_table
from retrieval_bench.retrieval.run_info import run_info_metrics


def main() -> None:
    all_params = load_all_params()
    params, judge = all_params["score"], all_params["judge"]
    ks = sorted(params["k"])
    chunks = read_table(paths.CHUNKS, ["chunk_id", "doc_id", "start", "end"])
    golden = read_jsonl(paths.GOLDENSET)
    run = read_run_table(paths.RUN)
    duplicates = read_table(paths.DUPLICATES)
    table = score_run_both_views(
        golden, chunks, run, ks, params["min_coverage"], params["ties"], duplicates, read_jsonl(paths.JUDGED_POOL),
        judge["min_grade"], judge["ambiguous_at"], paths.JUDGED_POOL,
    )
    for warning in (unscorable_warning(table), unjudged_warning(table)):
        if warning:
            print(f"score: warning: {warning}", file=sys.stderr)
    summary = {**summarize(table, ks, len(chunks)), **judged_summary(table, ks, duplicates), **run_info_metrics(paths.RUN_INFO, ks)}
    write_json(paths.METRICS, summary)
    for path, frame in (
        (paths.PER_QUESTION, table),
        (paths.RECALL_CURVE, pd.DataFrame({"k": ks, "recall": [summary[f"recall@{k}"] for k in ks]})),
        (paths.RANK_HISTOGRAM, rank_histogram(table["first_relevant_rank"])),
    ):
        with atomic_open(path) as handle:
            frame.to_csv(handle, index=False, lineterminator="\n")
    print(" ".join(f"{name}={value:.4f}" if isinstance(value, float) else f"{name}={value}" for name, value in summary.items()))


if __name__ == "__main__":
    run_stage(main)
