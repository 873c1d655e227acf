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


def test_methods_external_runs_and_python_retrievers(project):
    dvc("repro", cwd=project)
    git("add", "-A", cwd=project)
    git("commit", "-qm", "dense", cwd=project)
    run_table = pd.read_parquet(project / "data" / "panel" / "default" / "run.parquet")
    assert list(run_table.columns) == ["qid", "chunk_id", "rank", "score"]
    within = run_table[run_table["rank"] <= 100]  # retrieval.depth; beyond it only a tie group straddling the cut
    assert within.groupby("qid").size().max() == min(100, read_metrics(project)["n_chunks"])

    # An external engine: export the questions, let it write a TREC run, score that run.
    run([sys.executable, "-m", "retrieval_bench.cli", "export-questions"], cwd=project)
    run([sys.executable, "runs/sqlite_fts.py", "runs/fts5.trec"], cwd=project)
    set_params(project, **{"retrieval.method": "run-file", "retrieval.run_file": "runs/fts5.trec"})
    output = dvc("repro", cwd=project).stdout
    assert ran_stages(output) == {"retrieve@default", "judge", "score@default", "leaderboard"}  # nothing re-embedded
    from_file = read_metrics(project)
    assert 0 < from_file["mrr"] < 1

    # The same engine called as Python code gives the same metrics.
    set_params(
        project,
        **{"retrieval.method": "python", "retrieval.python": "runs.sqlite_fts:search", "retrieval.run_file": None},
    )
    dvc("repro", cwd=project)
    from_code = read_metrics(project)
    assert from_code == from_file
    compared = json.loads(
        run([sys.executable, "-m", "retrieval_bench.cli", "compare", "HEAD", "workspace", "--json"], cwd=project).stdout
    )
    assert compared["n_questions"] == from_code["n_questions"] and "mrr" in compared["metrics"]
