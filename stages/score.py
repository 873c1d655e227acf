"""Stage 5 (`python -m stages.score [SYSTEM ...]`): every panel system's run (or those named) scored
against the golden set on its chunking -> metrics/panel/<system>/metrics.json and per_question.csv,
in two views: strict (the golden set's labels) and judged (plus duplicate chunks and pooled LLM
grades); and metrics/headlines/<system>.json, its few headline numbers (the DVC metrics: a row of
`dvc metrics show` each). People's reviews (data/reviews/) take rejected questions out and put their
grades before the judge's. A system whose inputs did not change gets its last scores back."""

import sys

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_open, read_jsonl, read_table, write_json
from retrieval_bench.core.item_memo import ItemMemo
from retrieval_bench.core.run_table import read_run_table
from retrieval_bench.core.stage import panel_stage_arguments, run_stage
from retrieval_bench.evaluation.panel.headline import system_headline
from retrieval_bench.evaluation.score.budgets import chunk_columns
from retrieval_bench.evaluation.score.judged import JudgedInputs
from retrieval_bench.evaluation.score.scoring import score_system
from retrieval_bench.evaluation.score.settings import Scoring, score_inputs
from retrieval_bench.goldenset.reviews import Reviews, golden_reviews


def score_one(
    params: dict, scoring: Scoring, golden: list[dict], pool: list[dict], reviews: Reviews, system: str
) -> None:
    chunking = params["panel"][system]["chunking"]
    chunks = read_table(paths.chunks_of(chunking), chunk_columns(params["score"]))
    judged = JudgedInputs(read_table(paths.duplicates_of(chunking)), pool, paths.JUDGED_POOL, reviews)
    run, run_info = read_run_table(paths.run_of(system)), paths.run_info_of(system)
    table, summary, warnings = score_system(scoring, golden, chunks, run, judged, run_info_path=run_info)
    for warning in warnings:
        print(f"score {system}: warning: {warning}", file=sys.stderr)
    write_json(paths.metrics_of(system), summary)
    write_json(paths.headline_of(system), system_headline(table))
    with atomic_open(paths.per_question_of(system)) as handle:
        table.to_csv(handle, index=False, lineterminator="\n")
    shown = {name: value for name, value in summary.items() if not isinstance(value, dict)}  # by_kind: metrics.json
    print(
        f"score {system}: " + " ".join(f"{n}={v:.4f}" if isinstance(v, float) else f"{n}={v}" for n, v in shown.items())
    )


def main(argv: list[str]) -> None:
    params, systems = panel_stage_arguments("score", __doc__, argv)
    scoring = Scoring.from_params(params)
    golden = read_jsonl(paths.GOLDENSET)  # and the pool and the reviews, read once for every system
    reviews = golden_reviews(paths.REVIEWS, {str(row["qid"]) for row in golden})
    pool = read_jsonl(paths.JUDGED_POOL)
    ItemMemo("score").run(
        systems,
        lambda system: score_inputs(scoring, system, params["panel"][system]["chunking"]),
        paths.score_outputs_of,
        lambda system: score_one(params, scoring, golden, pool, reviews, system),
        paths.score_key_of,
        known=params["panel"],
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
