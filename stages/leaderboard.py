"""Stage 6: one leaderboard of the panel systems on every question set -> metrics/leaderboard.json, .csv and .md,
the plots recall_at_k.csv and first_relevant_rank_histogram.csv, metrics/certificate.json (does each synthetic
question set order the systems as the real or hand-written ones do?) and metrics/headline.json (its few numbers);
people's reviews (data/reviews/) add the prediction-powered figures. Then every system's costs, measured in one
process (evaluation.panel.costs.measure): metrics/costs.json and .md with the Pareto front, metrics/decision.md
and metrics/plots/quality_vs_cost.csv, whose figures differ from run to run (no stage reads them)."""

import json
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_open, without_nan, write_json
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.stage import progress, run_stage
from retrieval_bench.evaluation.panel.costs import PLOT_COLUMNS, cost_rows, measure
from retrieval_bench.evaluation.panel.report import PanelInputs, panel_report, review_inputs, summary_line
from retrieval_bench.evaluation.score.per_question import read_per_question
from retrieval_bench.evaluation.score.settings import Scoring


def main() -> None:
    params = load_all_params()
    tables = {system: read_per_question(path := paths.per_question_of(system), path) for system in params["panel"]}
    reports = {
        name: json.loads(Path(path).read_text(encoding="utf-8")) if Path(path).is_file() else None
        for name, path in (("goldenset", paths.GOLDENSET_REPORT), ("judge", paths.JUDGE_REPORT))
    }
    measured = measure(params)
    costs, score = cost_rows(params, measured), {key: params["score"][key] for key in ("budget_unit", "weights")}
    golden, reviewed = review_inputs(Scoring.from_params(params))
    inputs = PanelInputs(tables, golden, costs, reports, measured, reviewed)
    with progress(1, "leaderboard: intervals, tests, certificate", "step", delay=1.0):  # seconds at scale
        report = panel_report(inputs, params["validity"], **score)
    write_json(paths.LEADERBOARD, report["leaderboard"])
    write_json(paths.CERTIFICATE, without_nan(report["certificate"]))  # a tau of systems all tied is NaN
    write_json(paths.HEADLINE, report["headline"])
    write_json(paths.COSTS, report["costs"])
    for path, out in (
        (paths.COSTS_TABLE, report["costs_markdown"]),
        (paths.DECISION, report["decision"]),
        (paths.LEADERBOARD_TABLE, report["markdown"]),
        (paths.LEADERBOARD_CSV, pd.DataFrame(report["rows"])),
        (paths.QUALITY_VS_COST, pd.DataFrame(report["plot"], columns=list(PLOT_COLUMNS))),
        (paths.RECALL_CURVE, report["recall_curve"]),
        (paths.RANK_HISTOGRAM, report["rank_histograms"]),
    ):
        with atomic_open(path) as handle:
            handle.write(out) if isinstance(out, str) else out.to_csv(handle, index=False, lineterminator="\n")
    print(summary_line(report["leaderboard"]))
    for line in report["verdicts"]:
        print(line)
    if report["failed"]:
        raise InputError(f"validity.fail_on: {report['failed']} (metrics/certificate.json says why)")


if __name__ == "__main__":
    run_stage(main)
