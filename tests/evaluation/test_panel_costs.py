"""The leaderboard a team decides with: the questions every system can score (and who left which
out), each system's costs measured in one process (interleaved, repeated, with their noise) and
the Pareto front that does not separate costs within the noise, the decision table and its rule,
the quality-vs-cost plot rows, and metrics/headline.json (numbers only)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS, load_all_params
from retrieval_bench.evaluation.panel.costs import PLOT_COLUMNS, Timings, cost_rows, system_row
from retrieval_bench.evaluation.panel.headline import headline, system_headline
from retrieval_bench.evaluation.panel.leaderboard import left_out, scorable
from retrieval_bench.evaluation.panel.report import PanelInputs, panel_report


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
    # none left to compare: one line naming each system's loss, not an empty board said to be "no panel"
    tables["dense"] = table([1.0, 0.5, 0.5, 1.0], n_relevant=[0, 1, 0, 1])
    with pytest.raises(
        InputError, match=r"no question can be compared: none of the 4 answerable .* dense 2, dense-c400 2"
    ):
        panel_report(PanelInputs(tables, [], {}), {"fail_on": "none"})
    # every comparable question rejected by a reviewer: the same empty board, said as such
    rejected = {name: table([1.0, 0.5]).assign(review="wrong_evidence") for name in ("a", "b")}
    with pytest.raises(InputError, match=r"a reviewer rejected every one of the 2 questions every system can score"):
        panel_report(PanelInputs(rejected, [], {}), {"fail_on": "none"})


def timing(median, spread=0.0):
    """A measured cost as panel_costs.measure gives it: wall {median, low, high} and CPU."""
    wall = {"median": median, "low": median - spread, "high": median + spread}
    return {"wall": wall, "cpu": {"median": median}}


def row(system, chunking, method, search, index_bytes, embed, embedder="default", spread=0.0):
    settings = {**DEFAULTS["retrieval"], "chunking": chunking, "embedder": embedder, "method": method}
    info = {"method": method, "n_chunks": 100, "index_bytes": index_bytes}
    searched = {} if search is None else timing(search, spread)
    embedded = {} if embed is None else timing(embed, spread)
    chars = {"default": 800, "c400": 400}[chunking]
    return system_row(
        system,
        settings,
        {"model": "org/m", "max_seq_length": None},
        info,
        Timings(searched, embedded),
        chunk_chars=chars,
    )


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
        "dense": row("dense", "default", "dense", 0.4, 1_750_000, 3.0),
        "dense-c400": row("dense-c400", "c400", "dense", 0.7, 3_100_000, 3.5),
        "bm25": row("bm25", "default", "bm25", 0.3, 900_000, 3.0),
        "external": row("external", "default", "run-file", None, None, None),
    }
    golden_report = {"n_questions": 30, "n_generated": 0, "echo_rate": 0.0, "style_examples": {"file": None}}
    judge_report = {"enabled": False, "why": "off", "judged": 0, "relevant": 0, "cost_usd": 0.0}
    report = panel_report(
        PanelInputs(tables, [], costs, {"goldenset": golden_report, "judge": judge_report}), {"fail_on": "none"}
    )
    board = report["leaderboard"]
    assert board["question_sets"]["all"]["n_questions"] == 27
    assert board["left_out"]["n_left_out"] == 3
    assert "- dense-c400: 3 questions have no relevant chunk in chunking c400" in report["markdown"]
    assert "costs" not in board and "Pareto" not in report["markdown"]  # measured: apart from DVC's outputs
    systems = report["costs"]["systems"]
    assert systems["bm25"]["embed_seconds_per_1000"] == 0.0 and systems["bm25"]["model"] is None
    assert [name for name, r in systems.items() if r["pareto"]] == ["dense", "bm25", "external"]
    assert systems["dense-c400"]["dominated_by"] == ["dense"] and not systems["external"]["costs_measured"]
    assert (
        "| dense-c400 | c400 | default (org/m, max_seq_length model's own) | dense | 100 |" in report["costs_markdown"]
    )
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
    report = panel_report(
        PanelInputs(alone, [], {}, {"goldenset": {"n_questions": 5}, "judge": None}), {"fail_on": "none"}
    )
    assert report["headline"]["panel"] == {
        "default": {"mrr": 0.75, "ndcg@10": 0.75, "recall@10": 0.75, "recall_budget@4000": 0.75}
    }
    assert report["headline"]["goldenset"] == {"n_questions": 5} and report["plot"] == []
    assert not report["certificate"]["available"] and report["verdicts"] == [] and report["failed"] is None
    assert report["recall_curve"].to_dict("records") == [{"system": "default", "k": 10, "recall": 0.75}]
    # one system is no comparison: "every other system is significantly worse" was said of none
    costs = {"default": row("default", "default", "dense", 0.9, 1_750_000, 3.0, spread=0.05)}
    first = panel_report(PanelInputs(alone, [], costs), {"fail_on": "none"})["decision"].splitlines()[0]
    assert first == "**Ship default (the best mrr, 0.750); the panel has no other system to compare it with.**"


def test_headline_leaves_out_what_is_not_a_number():
    cert = {"available": True, "metrics": {"mrr": {"kendall_tau": {"value": float("nan")}}}}
    out = headline({"a": table([0.5])}, {"n_questions": True, "echo_rate": None}, {"cost_usd": "1"}, cert)
    assert out == {
        "panel": {"a": {"mrr": 0.5, "ndcg@10": 0.5, "recall@10": 0.5, "recall_budget@4000": 0.5}},
        "goldenset": {},
        "judge": {},
    }


def test_a_systems_headline_leaves_out_the_unanswerable_questions_nan_figures():
    """The score stage's table holds every question: an unanswerable one has no ranking figure
    (NaN), which the means leave out, as metrics.json's do."""
    rows = table([0.5, 1.0, float("nan")]).assign(kind=["single", "single", "unanswerable"])
    figures = system_headline(rows)
    assert figures == {"mrr": 0.75, "ndcg@10": 0.75, "recall@10": 0.75, "recall_budget@4000": 0.75}
    assert system_headline(rows, {"single": 1.0}) == figures  # one answerable kind: the same mean


def test_costs_are_read_from_each_systems_run_info_and_the_measured_timings(tmp_path):
    params = load_all_params()
    system, settings = next((s, v) for s, v in params["panel"].items() if v["method"] == "dense")
    run_info = tmp_path / paths.run_info_of(system)
    run_info.parent.mkdir(parents=True)
    run_info.write_text(json.dumps({"method": "dense", "n_chunks": 1140, "index_bytes": 1_751_040}))
    pair = f"{settings['chunking']}/{settings['embedder']}"
    measured = {"search": {system: timing(0.5, 0.25)}, "embed": {pair: timing(2.95, 0.5)}}
    rows = cost_rows(params, measured, tmp_path)
    assert set(rows) == set(params["panel"])
    assert rows[system]["index_mb"] == 1.751 and rows[system]["embed_seconds_per_1000"] == 2.95
    assert rows[system]["search_ms_per_question"] == 0.5 and rows[system]["search_ms_per_question_range"] == [
        0.25,
        0.75,
    ]
    assert rows[system]["model"] == params["embedders"][settings["embedder"]]["model"]
    assert rows[system]["chunk_chars"] == params["chunkings"][settings["chunking"]]["chars"]
    other = next(s for s in params["panel"] if s != system)
    assert rows[other]["search_ms_per_question"] is None  # not measured
    # ready chunks (BEIR, a store): the default chunking is the source's, whatever load.chunking says
    # (the decision table said 1600 after `-S load.chunking.chars=1600` on 60 ready chunks of up to 797)
    (tmp_path / paths.SOURCE_CHUNKS).parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"chunk_id": ["c1"], "text": ["one"]}).to_parquet(tmp_path / paths.SOURCE_CHUNKS)
    given = cost_rows(params, measured, tmp_path)
    for name, settings in params["panel"].items():
        own = settings["chunking"] == paths.DEFAULT
        assert given[name]["chunk_chars"] == (None if own else params["chunkings"][settings["chunking"]]["chars"])


def test_costs_within_the_noise_do_not_separate_systems_on_the_front():
    """Observed: 9 of 10 systems on the front, split by search times that load noise had spread
    30x. A cost lower only within the noise (overlapping ranges of repeats) dominates nothing."""
    tables = {"a": table([1.0, 0.5, 0.5, 1.0]), "b": table([1.0, 0.5, 0.5, 0.9])}
    noisy = {  # b: a touch worse, and faster only within the noise
        "a": row("a", "default", "dense", 0.50, 1_000_000, 3.0, spread=0.2),
        "b": row("b", "default", "dense", 0.45, 1_000_000, 3.0, spread=0.2),
    }
    systems = panel_report(PanelInputs(tables, [], noisy), {"fail_on": "none"})["costs"]["systems"]
    assert systems["b"]["dominated_by"] == ["a"] and systems["a"]["pareto"]
    apart = {**noisy, "b": row("b", "default", "dense", 0.05, 1_000_000, 3.0, spread=0.01)}  # faster beyond it
    systems = panel_report(PanelInputs(tables, [], apart), {"fail_on": "none"})["costs"]["systems"]
    assert systems["a"]["pareto"] and systems["b"]["pareto"]


def test_the_same_system_measured_twice_lands_within_the_stated_noise():
    """Two identical tasks timed in one interleaved measurement: under any load that treats them
    alike (exchangeable repeats), their REPEATS ranges fail to overlap only when every repeat of one
    is faster than every repeat of the other, probability 2 / C(2n, n); at n = 9 that is 4e-5, with
    no timing margin. Interleaving in rotated order keeps a burst of load from landing on one."""
    from retrieval_bench.core.timing import interleaved, summary
    from retrieval_bench.evaluation.panel.pareto import dominates

    work = np.random.default_rng(0).standard_normal((300, 64)).astype(np.float32)

    def search() -> int:
        (work @ work.T).argmax(axis=1)
        return 300

    timed = interleaved({"a": search, "a-again": search}, repeats=9)
    ranges = {name: summary(figures["wall"], 1000) for name, figures in timed.items()}
    points = {name: {"quality": 0.5, "costs": {"search": (r["low"], r["high"])}} for name, r in ranges.items()}
    assert not dominates(points["a"], points["a-again"]) and not dominates(points["a-again"], points["a"]), ranges
    assert all(len(figures["wall"]) == len(figures["cpu"]) == 9 for figures in timed.values())


def test_the_decision_names_the_best_and_the_as_good_cheaper_systems_by_its_rule():
    from retrieval_bench.evaluation.panel.decision import RULE

    rng = np.random.default_rng(0)
    base = rng.uniform(0.3, 0.9, 40)
    tables = {
        "default": table(base),
        "hybrid": table(base - np.isin(np.arange(40), [3, 7]) * 0.1),  # as good, searches 3x faster beyond the noise
        "bm25": table(np.clip(base - 0.4, 0, 1)),  # significantly worse, cheapest
    }
    costs = {
        "default": row("default", "default", "dense", 0.9, 1_750_000, 3.0, spread=0.05),
        "hybrid": row("hybrid", "default", "hybrid", 0.3, 1_750_000, 3.0, spread=0.05),
        "bm25": row("bm25", "default", "bm25", 0.1, 900_000, None),
    }
    report = panel_report(PanelInputs(tables, [], costs), {"fail_on": "none"})
    first, _, header, _, *rows = report["decision"].splitlines()[:7]
    assert first.startswith(
        "**Ship hybrid (as good as default (not significantly worse, Holm) and 3.0x cheaper to search)"
    )
    assert header.startswith(
        "| system | chunk chars | embedder | method | mrr [95% CI] | recall@10 | recall in 4,000 chars |"
    )
    assert rows[0].startswith("| default | 800 | m | dense | ") and "| bm25 | 800 | — | bm25 |" in rows[2]
    assert (
        rows[2].split(" | ")[4].endswith(" *")
        and RULE.format(over="of the headline question set") in report["decision"]
    )
    costs["hybrid"] = row("hybrid", "default", "hybrid", 0.85, 1_750_000, 3.0, spread=0.05)  # within the noise
    line = panel_report(PanelInputs(tables, [], costs), {"fail_on": "none"})["decision"].splitlines()[0]
    best = f"{base.mean():.3f}"
    assert (
        line
        == f"**Ship default (the best mrr, {best}); as good (not significantly worse, Holm) but no cheaper: hybrid.**"
    )


def test_show_prints_the_decision_first_and_the_left_out_questions():
    from retrieval_bench.show import decision_lines, leaderboard_lines

    tables = {"dense": table([1.0, 0.5, 0.5]), "dense-c400": table([1.0, 0.0, 0.5], n_relevant=[1, 0, 1])}
    costs = {
        "dense": row("dense", "default", "dense", 0.4, 1_750_000, 3.0),
        "dense-c400": row("dense-c400", "c400", "dense", 0.7, 3_100_000, 3.5),
    }
    report = panel_report(PanelInputs(tables, [], costs), {"fail_on": "none"})
    shown = decision_lines(report["decision"])
    assert shown[0].startswith("Ship dense (the best mrr") and shown[1].startswith("| system | chunk chars |")
    assert [line.split(" | ")[0] for line in shown[3:5]] == ["| dense", "| dense-c400"]
    board = "\n".join(leaderboard_lines(report["leaderboard"]))
    assert "dense-c400: 1 questions have no relevant chunk in chunking c400" in board


def test_each_task_is_warmed_up_then_timed_once_a_round_in_rotated_order():
    from retrieval_bench.core.timing import interleaved

    calls = []
    tasks = {name: (lambda name=name: calls.append(name) or 10) for name in ("a", "b", "c")}
    timed = interleaved(tasks, repeats=3)
    assert calls == ["a", "b", "c", "a", "b", "c", "b", "c", "a", "c", "a", "b"]
    assert all(len(figures["wall"]) == 3 and min(figures["wall"]) >= 0 for figures in timed.values())


def test_a_rerank_search_is_scored_afresh_on_every_timed_call(tmp_path):
    """Its cross-encoder is most of its cost: each call gets a score cache of its own, never the run's."""
    from retrieval_bench.retrieval.costs import RERANK_SAMPLE, search_task
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.settings import RetrievalSettings

    questions = Questions([f"q{i}" for i in range(20)], [f"question {i}" for i in range(20)])
    caches = []
    settings = RetrievalSettings.from_params(
        {**DEFAULTS["retrieval"], "method": "rerank"}, rerank_cache="data/panel/default/rerank_cache.jsonl"
    )
    task = search_task(
        settings, questions, Corpus(["c0"], lambda: ["text"]), lambda s, q, c: caches.append(s), tmp_path
    )
    assert task() == task() == RERANK_SAMPLE
    assert len({s.rerank.cache for s in caches}) == 2 and all(str(tmp_path) in s.rerank.cache for s in caches)
    external = RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "run-file"})
    assert search_task(external, questions, None, None, tmp_path) is None


def test_a_ship_line_over_systems_the_questions_cannot_tell_apart_says_so():
    """14 reference questions told no system apart, and the Ship line named the cheaper one "as good
    as" a far better mean: the line now says the choice rests on cost."""
    rng = np.random.default_rng(5)
    tables = {"dense": table(rng.uniform(0.3, 0.9, 6)), "bm25": table(rng.uniform(0.2, 0.8, 6))}
    costs = {
        "dense": row("dense", "default", "dense", 0.9, 1_750_000, 3.0, spread=0.05),
        "bm25": row("bm25", "default", "bm25", 0.1, 900_000, None),
    }
    first = panel_report(PanelInputs(tables, [], costs), {"fail_on": "none"})["decision"].splitlines()[0]
    assert first.endswith(
        "; no system is significantly worse than the best, so these questions do not tell the systems apart and "
        "the choice rests on cost: add questions before trusting it.**"
    ), first


def test_pairs_that_embed_alike_get_one_embedding_cost(tmp_path):
    """`-S load.chunking.chars=400 -S load.chunking.overlap=50` made default and dense-c400 one
    system, yet the decision read "Ship dense-c400 (as good as default and 5.3x cheaper to embed)":
    80 against 15 s per 1,000 chunks, each timed by its own stage at another load."""
    from retrieval_bench.evaluation.panel.costs import embed_costs

    params = load_all_params()
    for chunking in params["chunkings"]:
        for embedder in params["embedders"]:
            path = tmp_path / paths.embed_cost_of(chunking, embedder)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({"wall": {"median": float(len(chunking) + len(embedder))}}))
    apart = embed_costs(params, tmp_path)
    assert apart["default/default"] != apart["c400/default"]  # 800 and 400 characters: two figures
    params["chunkings"]["default"] = dict(params["chunkings"]["c400"])  # the experiment's chunking
    alike = embed_costs(params, tmp_path)
    assert alike["c400/default"] == alike["default/default"] == apart["default/default"]
    pd.DataFrame({"chunk_id": ["c1"], "text": ["one"]}).to_parquet(tmp_path / paths.SOURCE_CHUNKS)
    given = embed_costs(params, tmp_path)  # ready chunks: the default chunking is the source's, not c400's
    assert given["c400/default"] != given["default/default"]


def test_the_step_after_each_timed_call_is_outside_the_clocks(monkeypatch):
    """The embed stage's cost timing moves a progress bar after each call: that step must not be
    in the published seconds. On a fake clock a call takes 1 s and the step 1000 s."""
    from retrieval_bench.core import timing

    clock = {"now": 0.0}
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock["now"])
    monkeypatch.setattr(timing.time, "process_time", lambda: clock["now"])

    def call() -> int:
        clock["now"] += 1.0
        return 1

    steps = []
    result = timing.interleaved(
        {"a": call, "b": call}, 3, after=lambda: steps.append(clock.__setitem__("now", clock["now"] + 1000))
    )
    assert result == {name: {"wall": [1.0] * 3, "cpu": [1.0] * 3} for name in ("a", "b")}
    assert len(steps) == 2 + 2 * 3  # a warm-up of each, then every timed call
