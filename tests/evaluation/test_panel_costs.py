"""The leaderboard a team decides with: the questions every system can score (and who left which
out), each system's costs and the Pareto front in the leaderboard files, the quality-vs-cost
plot rows, and metrics/headline.json (numbers only)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.params import load_all_params
from retrieval_bench.evaluation.panel.costs import PLOT_COLUMNS, read_costs, searches_vectors, system_row
from retrieval_bench.evaluation.panel.headline import headline
from retrieval_bench.evaluation.panel.leaderboard import left_out, scorable
from retrieval_bench.evaluation.panel.report import panel_report


def table(rr, n_relevant=None, qids=None) -> pd.DataFrame:
    n = len(rr)
    return pd.DataFrame(
        {
            "qid": qids or [f"q{i}" for i in range(n)],
            "n_relevant": n_relevant if n_relevant is not None else [1] * n,
            "reciprocal_rank": rr,
            "ndcg@10": rr,
            "recall@10": rr,
            "recall_budget@4000": rr,
            "question_set": "hand-written",
        }
    )


def test_a_question_is_compared_only_where_every_system_has_a_relevant_chunk():
    """Observed: scorable filtered on the first system's n_relevant only, so a question with no
    relevant chunk in another system's chunking was scored 0 for it."""
    tables = {
        "dense": table([1.0, 0.5, 0.5, 1.0]),
        "dense-c400": table([1.0, 0.0, 0.5, 1.0], n_relevant=[1, 0, 2, 0]),
    }
    aligned = scorable(tables)
    assert list(aligned["dense"].index) == ["q0", "q2"] == list(aligned["dense-c400"].index)
    report = left_out(tables, {"dense": "default", "dense-c400": "c400"})
    assert report["n_questions"] == 4 and report["n_compared"] == 2 and report["n_left_out"] == 2
    assert report["by_system"]["dense-c400"]["no_relevant_chunk"] == 2
    assert report["by_system"]["dense"]["no_relevant_chunk"] == 0


def row(system, chunking, method, search, index_bytes, embed_info, embedder="default"):
    settings = {"chunking": chunking, "embedder": embedder, "method": method, "rerank": {"first_stage": "dense"}}
    info = {"method": method, "n_chunks": 100, "index_bytes": index_bytes}
    timing = {"search_ms_per_question": search}
    return system_row(system, settings, {"model": "m", "max_seq_length": None}, info, embed_info, timing)


def test_the_report_has_costs_the_pareto_front_left_out_questions_and_a_numeric_headline():
    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.9, 30)
    tables = {
        "dense": table(base),
        "dense-c400": table(np.clip(base - 0.05, 0, 1), n_relevant=[0, 0, 0] + [1] * 27),
        "bm25": table(np.clip(base - 0.2, 0, 1)),
        "external": table(np.clip(base - 0.3, 0, 1)),
    }
    costs = {
        "dense": row("dense", "default", "dense", 0.4, 1_750_000, {"seconds_per_1000": 3.0}),
        "dense-c400": row("dense-c400", "c400", "dense", 0.7, 3_100_000, {"seconds_per_1000": 3.5}),
        "bm25": row("bm25", "default", "bm25", 0.3, 900_000, {"seconds_per_1000": 3.0}),
        "external": row("external", "default", "run-file", None, None, {}),
    }
    golden_report = {"n_questions": 30, "n_generated": 0, "echo_rate": 0.0, "style_examples": {"file": None}}
    judge_report = {"enabled": False, "why": "off", "judged": 0, "relevant": 0, "cost_usd": 0.0}
    report = panel_report(tables, [], {"fail_on": "none"}, costs, {"goldenset": golden_report, "judge": judge_report})
    board = report["leaderboard"]
    assert board["question_sets"]["all"]["n_questions"] == 27
    assert board["left_out"]["n_left_out"] == 3
    assert "- dense-c400: 3 questions have no relevant chunk in chunking c400" in report["markdown"]
    assert "costs" not in board and "Pareto" not in report["markdown"]  # measured: apart from DVC's outputs
    systems = report["costs"]["systems"]
    assert systems["bm25"]["embed_seconds_per_1000"] == 0.0 and systems["bm25"]["model"] is None
    assert [name for name, r in systems.items() if r["pareto"]] == ["dense", "bm25", "external"]
    assert systems["dense-c400"]["dominated_by"] == ["dense"] and not systems["external"]["costs_measured"]
    assert "| dense-c400 | c400 | default (m, max_seq_length model's own) | dense | 100 |" in report["costs_markdown"]
    assert "| no (beaten by dense) |" in report["costs_markdown"]
    assert "| yes (a cost not measured) |" in report["costs_markdown"]
    assert [list(r) for r in report["plot"]] == [list(PLOT_COLUMNS)] * 4
    assert report["plot"][0]["ci_low"] <= report["plot"][0]["mrr"] <= report["plot"][0]["ci_high"]
    head = report["headline"]
    assert set(head["panel"]) == set(tables) and list(head["panel"]["dense"]) == [
        "mrr",
        "ndcg@10",
        "recall@10",
        "recall_budget@4000",
    ]
    assert head["panel"]["dense"]["mrr"] == round(float(base[3:].mean()), 4)  # the compared questions
    assert head["goldenset"] == {"n_questions": 30, "n_generated": 0, "echo_rate": 0.0}
    assert head["judge"] == {"judged": 0, "relevant": 0, "cost_usd": 0.0} and "certificate" not in head
    json.dumps(head, allow_nan=False)


def test_a_panel_of_the_default_system_alone_has_its_headline_and_the_golden_set():
    alone = {"default": table([0.5, 1.0])}
    report = panel_report(alone, [], {"fail_on": "none"}, {}, {"goldenset": {"n_questions": 5}, "judge": None})
    assert report["headline"]["panel"] == {
        "default": {"mrr": 0.75, "ndcg@10": 0.75, "recall@10": 0.75, "recall_budget@4000": 0.75}
    }
    assert report["headline"]["goldenset"] == {"n_questions": 5} and report["plot"] == []
    assert not report["certificate"]["available"] and report["verdicts"] == [] and report["failed"] is None
    assert report["recall_curve"].to_dict("records") == [{"system": "default", "k": 10, "recall": 0.75}]


def test_headline_leaves_out_what_is_not_a_number():
    cert = {"available": True, "metrics": {"mrr": {"kendall_tau": {"value": float("nan")}}}}
    out = headline({"a": table([0.5])}, {"n_questions": True, "echo_rate": None}, {"cost_usd": "1"}, cert)
    assert out == {
        "panel": {"a": {"mrr": 0.5, "ndcg@10": 0.5, "recall@10": 0.5, "recall_budget@4000": 0.5}},
        "goldenset": {},
        "judge": {},
    }


def test_which_systems_pay_for_embedding_matches_the_retrieve_stage():
    from retrieval_bench.retrieval.methods import METHODS, needs_vectors

    for method in METHODS:
        for first_stage in ("dense", "bm25", "hybrid"):
            settings = {"method": method, "rerank": {"first_stage": first_stage}}
            assert searches_vectors(settings) == needs_vectors(settings), settings


def test_costs_are_read_from_each_systems_run_info_and_its_timing_files(tmp_path):
    params = load_all_params()
    system, settings = next((s, v) for s, v in params["panel"].items() if v["method"] == "dense")
    run_info = tmp_path / paths.run_info_of(system)
    run_info.parent.mkdir(parents=True)
    run_info.write_text(json.dumps({"method": "dense", "n_chunks": 1140, "index_bytes": 1_751_040}))
    timing = tmp_path / paths.search_timing(system)
    timing.parent.mkdir(parents=True)
    timing.write_text(json.dumps({"search_ms_per_question": 0.41}))
    info = tmp_path / paths.embedding_info(settings["chunking"], settings["embedder"])
    info.parent.mkdir(parents=True)
    info.write_text(json.dumps({"chunks": 1140, "embedded": 1140, "seconds_per_1000": 2.95}))
    rows = read_costs(params, tmp_path)
    assert set(rows) == set(params["panel"])
    assert rows[system]["index_mb"] == 1.751 and rows[system]["embed_seconds_per_1000"] == 2.95
    assert rows[system]["search_ms_per_question"] == 0.41
    assert rows[system]["model"] == params["embedders"][settings["embedder"]]["model"]
    other = next(s for s in params["panel"] if s != system)
    assert rows[other]["search_ms_per_question"] is None  # no timing yet: not measured


def test_show_prints_the_left_out_questions_and_the_costs_with_the_pareto_mark():
    from retrieval_bench.show import leaderboard_lines

    tables = {"dense": table([1.0, 0.5, 0.5]), "dense-c400": table([1.0, 0.0, 0.5], n_relevant=[1, 0, 1])}
    costs = {
        "dense": row("dense", "default", "dense", 0.4, 1_750_000, {"seconds_per_1000": 3.0}),
        "dense-c400": row("dense-c400", "c400", "dense", 0.7, 3_100_000, {"seconds_per_1000": 3.5}),
    }
    report = panel_report(tables, [], {"fail_on": "none"}, costs)
    shown = "\n".join(leaderboard_lines(report["leaderboard"], report["costs"]))
    assert "dense-c400: 1 questions have no relevant chunk in chunking c400" in shown
    assert "measured on this machine" in shown
    costs_part = shown[shown.index("costs (measured") :].splitlines()
    assert next(line for line in costs_part if line.startswith("  dense ")).endswith("  P")
    assert not next(line for line in costs_part if line.startswith("  dense-c400 ")).endswith("P")
