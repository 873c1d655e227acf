"""People's reviews in the real `dvc repro`: a reviews file, tracked by DVC as the review command
leaves it, reruns the golden set's stage (which counts the rejections in metrics/goldenset.json),
score and the leaderboard, takes the rejected question out, and `show` prints the
prediction-powered figures; without one, `show` says there are no reviews yet."""

import json
from pathlib import Path

import pytest
from conftest import dvc, read_metrics, run

from retrieval_bench.goldenset.reviews import append_clicks, question_click
from retrieval_bench.review.tracking import track

pytestmark = pytest.mark.pipeline


def ran_stages(output: str) -> set[str]:
    return {line.split("'")[1] for line in output.splitlines() if line.startswith("Running stage")}


def test_a_reviews_file_reruns_scoring_and_the_figures_follow(reproduced):
    before = read_metrics(reproduced)
    assert "no reviews yet" in run(["retrieval-bench", "show"], cwd=reproduced).stdout
    qids = [json.loads(line)["qid"] for line in (reproduced / "data" / "goldenset.jsonl").read_text().splitlines()]
    for qid, mark in zip(qids[:4], ["fine", "fine", "ambiguous", "fine"], strict=True):
        append_clicks(reproduced / "data" / "reviews", [question_click("ana", qid, mark)])
    assert "is tracked by DVC" in track(Path("data/reviews/ana.jsonl"), root=reproduced)  # as `review` leaves it
    # the golden set's stage counts the rejections (its questions unchanged: nothing between it and
    # score reruns, and nothing is generated: the slice generates no question)
    assert ran_stages(dvc("repro", cwd=reproduced).stdout) == {"generate_goldenset", "score", "leaderboard"}
    counted = json.loads((reproduced / "metrics" / "goldenset.json").read_text())["reviews"]
    assert counted["n_reviewed"] == 4 and counted["n_rejected"] == 1 and counted["by_reason"]["ambiguous"] == 1
    (cell,) = [cell for kinds in counted["by_set"].values() for cell in kinds.values() if cell["n_rejected"]]
    assert cell["by_reason"]["ambiguous"] == 1 and cell["rejection_rate"] == round(1 / cell["n_reviewed"], 4)
    after = read_metrics(reproduced)
    assert after["n_rejected"] == 1 and after["n_questions"] == before["n_questions"] - 1
    # the declared DVC metric leaves the rejected question out as metrics.json does
    headline = json.loads((reproduced / "metrics" / "headlines" / "default.json").read_text())
    assert headline["mrr"] == pytest.approx(after["mrr"], abs=1e-4)
    board = json.loads((reproduced / "metrics" / "leaderboard.json").read_text())
    figures = board["reviews"]["ppi"]
    assert figures["available"] and figures["n_reviewed"] == 4 and figures["n_kept"] == 3
    assert board["reviews"]["rejections"]["by_reason"]["ambiguous"] == 1
    shown = run(["retrieval-bench", "show"], cwd=reproduced).stdout
    assert "reviews: 4 questions reviewed, 1 rejected (ambiguous 1)" in shown and "PPI" in shown
    assert dvc("status", "-q", cwd=reproduced, check=False).returncode == 0  # the tracked file's stages are current
