"""The run contract through the real `dvc repro`: switching methods re-runs retrieve and score
only, an external engine's run file and the same engine as Python code score identically."""

import json
import sys

import pandas as pd
import pytest
from conftest import dvc, git, read_metrics, run, set_params

pytestmark = pytest.mark.pipeline


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")} - {"check_params"}


def test_methods_external_runs_and_python_retrievers(reproduced):
    git("add", "-A", cwd=reproduced)
    git("commit", "-qm", "dense", cwd=reproduced)
    run_table = pd.read_parquet(reproduced / "data" / "panel" / "default" / "run.parquet")
    assert list(run_table.columns) == ["qid", "chunk_id", "rank", "score"]
    within = run_table[run_table["rank"] <= 100]  # retrieval.depth; beyond it only a tie group straddling the cut
    assert within.groupby("qid").size().max() == min(100, read_metrics(reproduced)["n_chunks"])

    # An external engine: export the questions, let it write a TREC run, score that run.
    run([sys.executable, "-m", "retrieval_bench.cli", "export-questions"], cwd=reproduced)
    run([sys.executable, "runs/sqlite_fts.py", "runs/fts5.trec"], cwd=reproduced)
    set_params(reproduced, **{"retrieval.method": "run-file", "retrieval.run_file": "runs/fts5.trec"})
    output = dvc("repro", cwd=reproduced).stdout
    assert ran_stages(output) == {"retrieve", "judge", "score", "leaderboard"}  # nothing re-embedded
    from_file = read_metrics(reproduced)
    assert 0 < from_file["mrr"] < 1

    # The same engine called as Python code gives the same metrics.
    set_params(
        reproduced,
        **{"retrieval.method": "python", "retrieval.python": "runs.sqlite_fts:search", "retrieval.run_file": None},
    )
    dvc("repro", cwd=reproduced)
    from_code = read_metrics(reproduced)
    assert from_code == from_file
    compared = json.loads(
        run(
            [sys.executable, "-m", "retrieval_bench.cli", "compare", "HEAD", "workspace", "--json"], cwd=reproduced
        ).stdout
    )
    answerable = from_code["n_questions"] - from_code.get("n_unanswerable", 0)  # compare pairs the ranked questions
    assert compared["n_questions"] == answerable and "mrr" in compared["metrics"]
