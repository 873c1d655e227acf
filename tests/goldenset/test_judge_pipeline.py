"""`dvc repro` with the judge on, against the stub server: retrieve -> judge -> score, paid once (a
forced rerun asks nothing), both views in metrics.json and per_question.csv, and `compare`
showing strict and judged deltas side by side across two commits pooled together."""

import json

import pandas as pd
import pytest
from conftest import dvc, git, read_metrics, set_params
from stub_llm import StubLLM, stage_env

pytestmark = pytest.mark.pipeline


def ran(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")} - {"check_params"}


def test_judge_stage_end_to_end_paid_once_and_compared(reproduced, monkeypatch, capsys):
    with StubLLM() as stub:
        stub.reply = lambda passage: "##final score: 3" if "checkpoint" in passage.lower() else "##final score: 0"
        for key, value in stage_env(stub).items():
            monkeypatch.setenv(key, value)
        set_params(reproduced, **{"judge.enabled": True, "judge.max_retries": 1})
        first = dvc("repro", cwd=reproduced)
        assert {"judge", "score"} <= ran(first.stdout)
        report = json.loads((reproduced / "metrics" / "judge.json").read_text())
        paid = len(stub.generation_requests())
        assert report["requests"] == paid > 0 and report["judged"] == report["pooled"]
        metrics = read_metrics(reproduced)
        assert metrics["judge_judged"] == report["judged"] and metrics["judge_relevant"] == report["relevant"] > 0
        assert metrics["judge_relevant_share"] == pytest.approx(report["relevant"] / report["judged"], abs=1e-4)
        assert metrics["judged_hit@5"] >= metrics["hit@5"] and metrics["n_questions_gaining_judged"] > 0
        per_question = pd.read_csv(reproduced / "metrics" / "panel" / "default" / "per_question.csv")
        assert {"judged_recall@5", "judged_reciprocal_rank", "n_pooled", "n_judge_relevant"} <= set(
            per_question.columns
        )

        forced = dvc("repro", "-f", "-s", "judge", cwd=reproduced)
        assert ran(forced.stdout) == {"judge"} and len(stub.generation_requests()) == paid  # rerun: 0 calls
        assert json.loads((reproduced / "metrics" / "judge.json").read_text())["requests"] == 0
        git("add", "-A", cwd=reproduced)
        git("commit", "-qm", "dense, judged", cwd=reproduced)

        # Another method, pooled with the committed run: only pairs never graded are paid for.
        set_params(
            reproduced, **{"retrieval.method": "bm25", "judge.pool": ["data/panel/default/run.parquet", "rev:HEAD"]}
        )
        dvc("repro", cwd=reproduced)
        report = json.loads((reproduced / "metrics" / "judge.json").read_text())
        assert report["judged_before_this_run"] > 0 and report["requests"] == len(stub.generation_requests()) - paid

    from retrieval_bench.cli import main

    monkeypatch.chdir(reproduced)
    capsys.readouterr()
    assert main(["compare", "HEAD", "workspace", "--resamples", "500"]) == 0
    text = capsys.readouterr().out
    assert "side by side" in text and "judged delta" in text and "strict delta" in text
    assert main(["compare", "HEAD", "workspace", "--json", "--resamples", "500"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert set(data["judged_metrics"]) == set(data["metrics"])
