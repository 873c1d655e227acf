"""Stage 5, once per panel system (`python -m stages.score <system>`): its run scored against the
golden set on its chunking -> metrics/panel/<system>/metrics.json and per_question.csv, in two
views: strict (the golden set's labels) and judged (plus duplicate chunks and pooled LLM grades);
and headline.json, its few headline numbers (the DVC metrics file: one row of `dvc metrics show`).
People's reviews (data/reviews/) take rejected questions out and put their grades before the judge's."""

import sys

from retrieval_bench.core import paths
from retrieval_bench.core.files import atomic_open, read_jsonl, read_table, write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.params_panel import panel_system
from retrieval_bench.core.run_table import read_run_table
from retrieval_bench.core.stage import run_stage, stage_parser
from retrieval_bench.evaluation.panel.headline import system_headline
from retrieval_bench.evaluation.score.budgets import chunk_columns
from retrieval_bench.evaluation.score.judged import JudgedInputs
from retrieval_bench.evaluation.score.scoring import score_system
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.reviews import golden_reviews


def main(argv: list[str]) -> None:
    parser = stage_parser("score", __doc__)
    parser.add_argument("system", help="a system named under panel in params.yaml (the sample's first: default)")
    system = parser.parse_args(argv).system
    all_params = load_all_params()
    chunking = panel_system(all_params["panel"], system)["chunking"]
    chunks = read_table(paths.chunks_of(chunking), chunk_columns(all_params["score"]))
    golden = read_jsonl(paths.GOLDENSET)
    reviews = golden_reviews(paths.REVIEWS, {str(row["qid"]) for row in golden})
    judged = JudgedInputs(
        read_table(paths.duplicates_of(chunking)), read_jsonl(paths.JUDGED_POOL), paths.JUDGED_POOL, reviews
    )
    table, summary, warnings = score_system(
        Scoring.from_params(all_params),
        golden,
        chunks,
        read_run_table(paths.run_of(system)),
        judged,
        run_info_path=paths.run_info_of(system),
    )
    for warning in warnings:
        print(f"score {system}: warning: {warning}", file=sys.stderr)
    write_json(paths.metrics_of(system), summary)
    write_json(paths.headline_of(system), system_headline(table))
    with atomic_open(paths.per_question_of(system)) as handle:
        table.to_csv(handle, index=False, lineterminator="\n")
    print(
        f"score {system}: "
        + " ".join(
            f"{name}={value:.4f}" if isinstance(value, float) else f"{name}={value}"
            for name, value in summary.items()
            if not isinstance(value, dict)  # by_kind: in metrics.json
        )
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
