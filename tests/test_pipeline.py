"""The real `dvc repro` in a fresh repository: metrics, caching, and re-running only what changed."""
import pandas as pd
import pytest
from conftest import dvc, git, read_metrics, set_params

pytestmark = pytest.mark.pipeline


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_repro_caches_and_reruns_only_what_changed(project):
    first = dvc("repro", cwd=project)
    assert ran_stages(first.stdout) == {"load_chunks", "generate_goldenset", "embed", "score"}
    metrics = read_metrics(project)
    expected = {f"recall@{k}" for k in (1, 3, 5, 10, 20)} | {"mrr", "ndcg@10", "n_questions", "n_chunks"}
    assert expected <= set(metrics)
    assert metrics["n_questions"] >= 10 and metrics["n_chunks"] >= 50
    recalls = [metrics[f"recall@{k}"] for k in (1, 3, 5, 10, 20)]
    assert all(0 <= r <= 1 for r in recalls) and recalls == sorted(recalls)
    assert 0 < metrics["mrr"] <= 1 and 0 < metrics["ndcg@10"] <= 1
    per_question = pd.read_csv(project / "metrics" / "per_question.csv")
    assert len(per_question) == metrics["n_questions"]
    assert per_question["reciprocal_rank"].mean() == pytest.approx(metrics["mrr"])

    assert ran_stages(dvc("repro", cwd=project).stdout) == set()  # nothing changed, nothing runs
    git("add", "-A", cwd=project)
    git("commit", "-qm", "baseline", cwd=project)

    set_params(project, **{"score.k": [1, 2, 5]})
    assert ran_stages(dvc("repro", cwd=project).stdout) == {"score"}
    diff = dvc("metrics", "diff", "HEAD", "--json", cwd=project).stdout
    assert '"recall@2"' in diff and '"recall@20"' in diff  # a new metric and a removed one

    set_params(project, **{"embed.batch_size": 7})  # not a result-changing param
    assert ran_stages(dvc("repro", cwd=project).stdout) == set()


def test_rechunking_keeps_the_golden_set(project):
    dvc("repro", cwd=project)
    before = pd.read_csv(project / "metrics" / "per_question.csv")
    metrics_before = read_metrics(project)
    set_params(project, **{"load.chunking": {"size": 400, "overlap": 50}})
    status = dvc("status", cwd=project).stdout
    assert "load_chunks" in status and "generate_goldenset" not in status
    output = dvc("repro", cwd=project).stdout
    assert ran_stages(output) == {"load_chunks", "embed", "score"}  # no new questions, no LLM bill
    after = pd.read_csv(project / "metrics" / "per_question.csv")
    assert set(after["qid"]) == set(before["qid"])  # the same questions score both chunkings
    metrics_after = read_metrics(project)
    assert metrics_after["n_chunks"] > metrics_before["n_chunks"]
    assert metrics_after["mrr"] != metrics_before["mrr"]
