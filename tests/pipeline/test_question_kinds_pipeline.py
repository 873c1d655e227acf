"""The sample shows question kinds without a key, under the real `dvc repro`: the bundled
hand-written multi-evidence and unanswerable questions reach the golden set in their schema, each
system's metrics leave the unanswerable ones out of every mean, and the leaderboard (and `show`)
has complete@k and the abstention figures; the hand-written mix is reported beside the generated
one, and score.weights real-mix reruns the leaderboard alone, stating the weights."""

import json
import re

import pandas as pd
import pytest
from conftest import SLICE_DOCS, copy_project, dvc, read_metrics, run, set_params

pytestmark = pytest.mark.pipeline

# The slice and the documents most of the sample's multi and unanswerable questions are about.
DOCS = [
    *SLICE_DOCS,
    "lang_vacuum.md",
    "lockingv3.md",
    "isolation.md",
    "lang_transaction.md",
    "limits.md",
    "whentouse.md",
]
PANEL = {
    "default": {"chunking": "default", "embedder": "default"},
    "bm25": {"chunking": "default", "embedder": "default", "method": "bm25"},
}


def test_the_sample_s_kinds_reach_the_leaderboard(tmp_path):
    project = copy_project(tmp_path / "project", docs=DOCS)
    set_params(project, panel=PANEL)
    dvc("repro", cwd=project)

    golden = [json.loads(line) for line in (project / "data" / "goldenset.jsonl").read_text().splitlines()]
    kinds = {row["qid"]: row.get("kind") for row in golden}
    assert {"single", "multi", "unanswerable"} <= set(kinds.values())
    for row in golden:
        if row["kind"] == "multi":
            first = row["evidence_spans"][0]
            assert len(row["evidence_spans"]) >= 2 and (row["doc_id"], row["start"]) == (
                first["doc_id"],
                first["start"],
            )
        if row["kind"] == "unanswerable":
            assert row["evidence_spans"] == [] and row["doc_id"] is None and row["gold_chunk_id"] is None

    n_unanswerable = sum(kind == "unanswerable" for kind in kinds.values())
    for system in PANEL:
        table = pd.read_csv(project / "metrics" / "panel" / system / "per_question.csv", dtype={"qid": str})
        metrics = read_metrics(project, system)
        answerable = table[table["kind"] != "unanswerable"]
        assert metrics["mrr"] == pytest.approx(answerable["reciprocal_rank"].mean())  # no unanswerable one in a mean
        assert table.loc[table["kind"] == "unanswerable", "reciprocal_rank"].isna().all()
        assert metrics["n_unanswerable"] == n_unanswerable and 0 <= metrics["abstention_auc"] <= 1
        multi = answerable[answerable["kind"] == "multi"]
        assert metrics["by_kind"]["multi"]["complete@10"] == pytest.approx(multi["complete@10"].mean())
        assert (multi["complete@10"] <= multi["evidence_recall@10"]).all()

    board = json.loads((project / "metrics" / "leaderboard.json").read_text())
    assert {"multi", "unanswerable"} <= set(board["kinds"])
    assert "complete@10" in board["kinds"]["multi"]["metrics"]
    assert board["kinds"]["unanswerable"]["n_questions"] == n_unanswerable
    for system in PANEL:
        figures = board["kinds"]["unanswerable"]["systems"][system]
        assert 0 <= figures["abstention_auc"] <= 1 and 0 <= figures["false_hit_rate"] <= 1
    text = (project / "metrics" / "leaderboard.md").read_text()
    assert "### kind multi" in text and "### kind unanswerable" in text and "abstention AUC" in text
    shown = run(["retrieval-bench", "show"], cwd=project).stdout
    assert "kind unanswerable" in shown and "complete@10" in shown

    mixes = json.loads((project / "metrics" / "goldenset.json").read_text())["mix_by_question_set"]
    assert {"single", "multi", "unanswerable"} <= set(mixes["hand-written"])
    assert sum(mixes["hand-written"].values()) == pytest.approx(1, abs=1e-3) and "mix of kinds:" in shown
    assert "reweighted" not in board and "reweighted" not in text  # score.weights none: the headline as it was
    set_params(project, **{"score.weights": "real-mix"})
    again = dvc("repro", cwd=project).stdout
    assert set(re.findall(r"Running stage '([^']+)'", again)) - {"check_params"} == {"leaderboard"}
    weights = json.loads((project / "metrics" / "leaderboard.json").read_text())["reweighted"]["weights"]
    said = "reweighted to the hand-written mix: " + ", ".join(f"{k} {w:.2f}" for k, w in weights.items())
    assert (
        {"single", "multi"} <= set(weights)
        and "unanswerable" not in weights
        and sum(weights.values()) == pytest.approx(1, abs=1e-3)
    )
    for path in ("leaderboard.md", "decision.md"):
        assert said in (project / "metrics" / path).read_text()
    assert said in run(["retrieval-bench", "show"], cwd=project).stdout
