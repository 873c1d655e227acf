"""Stage 5: score the run against the golden set -> metrics/ (metrics, per question, plots), in two
views: strict (the golden set's labels) and judged (plus duplicate chunks and pooled LLM grades)."""

import pandas as pd

from retrieval_bench import paths
from retrieval_bench.evaluation.budgets import chunk_columns
from retrieval_bench.evaluation.metrics import rank_histogram
from retrieval_bench.evaluation.system_score import score_system
from retrieval_bench.io import atomic_open, read_jsonl, read_table, run_stage, write_json
from retrieval_bench.params import load_all_params
from retrieval_bench.run_contract import read_run_table


def main() -> None:
    all_params = load_all_params()
    ks = sorted(all_params["score"]["k"])
    chunks = read_table(paths.CHUNKS, chunk_columns(all_params["score"]))
    table, summary = score_system(
        all_params,
        read_jsonl(paths.GOLDENSET),
        chunks,
        read_run_table(paths.RUN),
        paths.RUN_INFO,
        read_table(paths.DUPLICATES),
        read_jsonl(paths.JUDGED_POOL),
        paths.JUDGED_POOL,
    )
    write_json(paths.METRICS, summary)
    for path, frame in (
        (paths.PER_QUESTION, table),
        (paths.RECALL_CURVE, pd.DataFrame({"k": ks, "recall": [summary[f"recall@{k}"] for k in ks]})),
        (paths.RANK_HISTOGRAM, rank_histogram(table["first_relevant_rank"])),
    ):
        with atomic_open(path) as handle:
            frame.to_csv(handle, index=False, lineterminator="\n")
    print(
        " ".join(
            f"{name}={value:.4f}" if isinstance(value, float) else f"{name}={value}" for name, value in summary.items()
        )
    )


if __name__ == "__main__":
    run_stage(main)
