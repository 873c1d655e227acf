"""Stage 5 (`python -m stages.score [SYSTEM ...]`): each panel system's run (or those named) scored strict and
judged (duplicates, LLM grades, data/reviews/) -> metrics/panel/<system>/metrics.json, per_question.csv and
metrics/headlines/<system>.json (a `dvc metrics show` row). Unchanged systems get their last scores back."""

import sys
from functools import lru_cache

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_open, read_jsonl, write_json
from retrieval_bench.core.item_memo import ItemMemo
from retrieval_bench.core.run_table import read_run_table
from retrieval_bench.core.stage import panel_stage_arguments, progress, run_stage
from retrieval_bench.evaluation.panel.headline import system_headline
from retrieval_bench.evaluation.score.budgets import chunk_columns, chunk_tables, panel_chunk_ids
from retrieval_bench.evaluation.score.judged import JudgedInputs, unpooled_warning
from retrieval_bench.evaluation.score.reviewed import kept
from retrieval_bench.evaluation.score.scoring import score_system, summary_text
from retrieval_bench.evaluation.score.settings import Scoring, score_inputs
from retrieval_bench.goldenset.reviews import Reviews, golden_reviews


def score_one(
    params: dict, scoring: Scoring, golden: list, pool: list, reviews: Reviews, system: str, tables=chunk_tables
) -> None:
    chunking = params["panel"][system]["chunking"]
    chunks, duplicates = tables(chunking, tuple(chunk_columns(params["score"])))
    judged = JudgedInputs(duplicates, pool, paths.JUDGED_POOL, reviews, pooled_chunking=chunking == paths.DEFAULT)
    run, run_info = read_run_table(paths.run_of(system)), paths.run_info_of(system)
    with progress(1, f"score {system}", "system", delay=1.0):  # its elapsed time: 4 million run rows take seconds
        table, summary, warnings = score_system(scoring, golden, chunks, run, judged, run_info_path=run_info)
    for warning in filter(
        None, [*warnings, unpooled_warning(params["judge"], paths.run_of(system), params["panel"][system])]
    ):
        print(f"score {system}: warning: {warning}", file=sys.stderr)
    write_json(paths.metrics_of(system), summary)
    write_json(paths.headline_of(system), system_headline(kept(table)))  # as metrics.json: rejected questions left out
    with atomic_open(paths.per_question_of(system)) as handle:
        table.to_csv(handle, index=False, lineterminator="\n")
    print(f"score {system}: {summary_text(summary)}")


def main(argv: list[str]) -> None:
    params, systems = panel_stage_arguments("score", __doc__, argv)
    scoring = Scoring.from_params(params)
    golden, panel = read_jsonl(paths.GOLDENSET), params["panel"]  # golden, pool, reviews, chunk tables: read once
    reviews = golden_reviews(paths.REVIEWS, {str(row["qid"]) for row in golden}, lambda: panel_chunk_ids(panel))
    pool = read_jsonl(paths.JUDGED_POOL)
    tables = lru_cache(maxsize=1)(chunk_tables)  # systems run by chunking: one held at a time, this run only
    ItemMemo("score").run(
        sorted(systems, key=lambda system: panel[system]["chunking"]),
        lambda system: score_inputs(scoring, system, panel[system]["chunking"]),
        paths.score_outputs_of,
        lambda system: score_one(params, scoring, golden, pool, reviews, system, tables),
        paths.score_key_of,
        known=panel,
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
