"""Stage 6: one leaderboard of the panel systems (params panel) on every question set ->
metrics/leaderboard.json, .csv and .md, the plots recall_at_k.csv and first_relevant_rank_histogram.csv,
metrics/certificate.json (does each synthetic question set
order the systems as the real or hand-written ones do? agrees / disagrees / undetermined) and metrics/headline.json (its few
numbers; the DVC metrics are each system's, by score). Beside them, not DVC outputs (measured times differ on every run, the
outputs must not): each system's costs and the Pareto front, metrics/costs.json and .md, and
metrics/plots/quality_vs_cost.csv."""

import json
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_open, read_jsonl, write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.stage import run_stage
from retrieval_bench.evaluation.panel_costs import PLOT_COLUMNS, read_costs
from retrieval_bench.evaluation.panel_report import panel_report, summary_line
from retrieval_bench.evaluation.per_question import read_per_question


def main() -> None:
    params = load_all_params()
    tables = {system: read_per_question(path := paths.per_question_of(system), path) for system in params["panel"]}
    reports = {
        name: json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).is_file() else None
        for name, path in (("goldenset", paths.GOLDENSET_REPORT), ("judge", paths.JUDGE_REPORT))
    }
    report = panel_report(tables, read_jsonl(paths.GOLDENSET), params["validity"], read_costs(params), reports)
    write_json(paths.LEADERBOARD, report["leaderboard"])
    write_json(paths.CERTIFICATE, report["certificate"])
    write_json(paths.HEADLINE, report["headline"])
    write_json(paths.COSTS, report["costs"])
    with atomic_open(paths.COSTS_TABLE) as handle:
        handle.write(report["costs_markdown"])
    for path, table in (
        (paths.LEADERBOARD_CSV, pd.DataFrame(report["rows"])),
        (paths.QUALITY_VS_COST, pd.DataFrame(report["plot"], columns=list(PLOT_COLUMNS))),
        (paths.RECALL_CURVE, report["recall_curve"]),
        (paths.RANK_HISTOGRAM, report["rank_histograms"]),
    ):
        with atomic_open(path) as handle:
            table.to_csv(handle, index=False, lineterminator="\n")
    with atomic_open(paths.LEADERBOARD_TABLE) as handle:
        handle.write(report["markdown"])
    print(summary_line(report["leaderboard"]))
    for line in report["verdicts"]:
        print(line)
    if report["failed"]:
        raise InputError(f"validity.fail_on: {report['failed']} (metrics/certificate.json says why)")


if __name__ == "__main__":
    run_stage(main)
