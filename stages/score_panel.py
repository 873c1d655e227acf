"""Stage 5 for one panel system (`python -m stages.score_panel <system>`): its run scored, on its
chunking, as the score stage scores the single run -> metrics/panel/<system>/metrics.json and
per_question.csv."""

import sys

from retrieval_bench import paths
from retrieval_bench.evaluation.budgets import chunk_columns
from retrieval_bench.evaluation.system_score import score_system
from retrieval_bench.io import atomic_open, read_jsonl, read_table, run_stage, stage_parser, write_json
from retrieval_bench.params import load_all_params, panel_system
from retrieval_bench.run_contract import read_run_table


def main(argv: list[str]) -> None:
    parser = stage_parser("score_panel", __doc__)
    parser.add_argument("system", help="a system named under panel in params.yaml")
    system = parser.parse_args(argv).system
    all_params = load_all_params()
    chunking = panel_system(all_params["panel"], system)["chunking"]
    chunks = read_table(paths.chunks_of(chunking), chunk_columns(all_params["score"]))
    table, summary = score_system(
        all_params,
        read_jsonl(paths.GOLDENSET),
        chunks,
        read_run_table(paths.panel_file(paths.PANEL_RUNS, system, "run.parquet")),
        paths.panel_file(paths.PANEL_RUNS, system, "run_info.json"),
        read_table(paths.duplicates_of(chunking)),
        read_jsonl(paths.JUDGED_POOL),
        paths.JUDGED_POOL,
        label=f"score {system}",
    )
    write_json(paths.panel_file(paths.PANEL_METRICS, system, "metrics.json"), summary)
    with atomic_open(paths.panel_file(paths.PANEL_METRICS, system, "per_question.csv")) as handle:
        table.to_csv(handle, index=False, lineterminator="\n")
    print(
        f"score {system}: "
        + " ".join(f"{name}={value:.4f}" for name, value in summary.items() if isinstance(value, float))
    )


if __name__ == "__main__":
    run_stage(lambda: main(sys.argv[1:]), own_arguments=True)
