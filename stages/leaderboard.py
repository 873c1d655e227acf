"""Stage 6: one leaderboard of the panel systems (params panel) on every question set ->
metrics/leaderboard.json, .csv and .md, and metrics/certificate.json (do the generated questions
order the systems as the real or hand-written ones do?)."""

import sys

import pandas as pd

from retrieval_bench import paths
from retrieval_bench.evaluation.panel_report import panel_report, summary_line
from retrieval_bench.evaluation.per_question import read_per_question
from retrieval_bench.io import InputError, atomic_open, read_jsonl, run_stage, write_json
from retrieval_bench.params import load_all_params


def main() -> None:
    params = load_all_params()
    tables = {
        system: read_per_question(path := paths.panel_file(paths.PANEL_METRICS, system, "per_question.csv"), path)
        for system in params["panel"]
    }
    report = panel_report(tables, read_jsonl(paths.GOLDENSET), params["validity"])
    write_json(paths.LEADERBOARD, report["leaderboard"])
    write_json(paths.CERTIFICATE, report["certificate"])
    with atomic_open(paths.LEADERBOARD_CSV) as handle:
        pd.DataFrame(report["rows"]).to_csv(handle, index=False, lineterminator="\n")
    with atomic_open(paths.LEADERBOARD_TABLE) as handle:
        handle.write(report["markdown"])
    print(summary_line(report["leaderboard"]))
    if report["warning"]:
        if params["validity"]["fail_below"]:
            raise InputError(f"validity: {report['warning']} (validity.fail_below is true)")
        print(f"leaderboard: warning: {report['warning']}", file=sys.stderr)


if __name__ == "__main__":
    run_stage(main)
