"""recall_budget@B (score.budgets): the library against a plain hand computation on random runs
(every order of every tie group enumerated, the context filled chunk by chunk), for every tie
policy, chunk labels and evidence spans, characters and words; a tiny case checked by hand; a
tie group far too big to enumerate against its closed form; and the params checks."""

from __future__ import annotations

import itertools
from math import floor

import numpy as np
import pandas as pd
import pytest
import yaml

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.core.relevance import judge
from retrieval_bench.core.run_table import from_records
from retrieval_bench.evaluation.score.budgets import chunk_columns, first_fits
from retrieval_bench.evaluation.score.metrics import summarize
from retrieval_bench.evaluation.score.scoring import score_run
from retrieval_bench.evaluation.score.settings import Scoring

MIN_COVERAGE = 0.4


def table(spans: list[tuple[int, int]], texts: list[str] | None = None) -> pd.DataFrame:
    texts = texts or ["x" * (end - start) for start, end in spans]
    return pd.DataFrame(
        {
            "chunk_id": [f"c{i}" for i in range(len(spans))],
            "doc_id": "d",
            "start": [start for start, _ in spans],
            "end": [end for _, end in spans],
            "text": texts,
        }
    )


def length_of(chunks: pd.DataFrame, unit: str) -> dict[str, int]:
    if unit == "words":
        return {c: len(t.split()) for c, t in zip(chunks["chunk_id"], chunks["text"])}
    return {c: e - s for c, s, e in zip(chunks["chunk_id"], chunks["start"], chunks["end"])}


def contexts(run: pd.DataFrame, chunks: pd.DataFrame, golden_row: dict, unit: str, policy: str):
    """Every context the ranking can hand over (one per order of each tie group, or the one the
    policy stands for), filled in rank order until the first chunk that does not fit."""
    length = length_of(chunks, unit)
    judgement = judge([golden_row], chunks, MIN_COVERAGE)[0]
    judged = chunks["chunk_id"].to_numpy()[judgement.indices].tolist()
    gain = dict(zip(judged, judgement.gains.tolist()))
    levels = sorted(set(run["score"]), reverse=True)
    groups = [run.loc[run["score"] == level, "chunk_id"].tolist() for level in levels]
    if policy == "expected":
        orders = [
            sum(parts, []) for parts in itertools.product(*(map(list, itertools.permutations(g)) for g in groups))
        ]
    else:  # judged chunks last (pessimistic, higher gains last) or first (optimistic, higher gains first)
        orders = [[]]
        for members in groups:
            mine = sorted([c for c in judged if c in members], key=gain.get, reverse=policy == "optimistic")
            rest = [c for c in members if c not in mine]
            orders[0] += rest + mine if policy == "pessimistic" else mine + rest
    return [lambda budget, order=order: fill(order, length, budget) for order in orders]


def fill(order: list[str], length: dict[str, int], budget: int) -> list[str]:
    taken, used = [], 0
    for chunk in order:
        used += length[chunk]
        if used > budget:
            break
        taken.append(chunk)
    return taken


def hand_recall(context: list[str], chunks: pd.DataFrame, row: dict) -> float:
    if row.get("relevant") is not None:
        relevant = [c for c, grade in row["relevant"].items() if grade > 0 and c in set(chunks["chunk_id"])]
        return sum(c in context for c in relevant) / len(relevant) if relevant else 0.0
    spans = dict(zip(chunks["chunk_id"], zip(chunks["start"], chunks["end"])))
    # the evidence characters some chunk holds: one no chunk holds (a gap between chunks) counts for nothing
    evidence = set(range(row["start"], row["end"])) & set().union(*(range(*span) for span in spans.values()))
    covered = set().union(*(range(*spans[c]) for c in context)) & evidence
    return len(covered) / max(len(evidence), 1)


def random_case(rng: np.random.Generator, span: bool, unit: str):
    n = int(rng.integers(2, 8))
    starts = rng.integers(0, 50, size=n)
    spans = [(int(s), int(s + rng.integers(1, 20))) for s in starts]
    texts = ["".join(rng.choice(list("ab  "), size=end - start)) for start, end in spans]  # 0 words possible
    chunks = table(spans, texts)
    retrieved = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
    scores = rng.integers(0, 3, size=len(retrieved)).astype(float)  # few levels: many ties
    run = from_records([("q", f"c{i}", s) for i, s in zip(retrieved, scores)])
    if span:
        start = int(rng.integers(0, 50))
        row = {"qid": "q", "doc_id": "d", "start": start, "end": start + int(rng.integers(1, 30))}
    else:
        labelled = rng.choice(n, size=int(rng.integers(1, n + 1)), replace=False)
        row = {"qid": "q", "relevant": {f"c{i}": int(rng.integers(1, 4)) for i in labelled} | {"gone": 1}}
    top = sum(length_of(chunks, unit).values())
    budgets = sorted({int(b) for b in rng.integers(0, top + 2, size=3)} | {1})
    return chunks, run, row, budgets


@pytest.mark.parametrize("unit", ["chars", "words"])
@pytest.mark.parametrize("policy", ["expected", "pessimistic", "optimistic"])
@pytest.mark.parametrize("span", [False, True], ids=["labels", "spans"])
@pytest.mark.parametrize("seed", range(25))
def test_recall_budget_equals_the_hand_computation(seed, span, policy, unit):
    rng = np.random.default_rng(seed)
    chunks, run, row, budgets = random_case(rng, span, unit)
    ours = score_run([row], chunks, run, Scoring((1,), MIN_COVERAGE, policy, tuple(budgets), unit)).iloc[0]
    fills = contexts(run, chunks, row, unit, policy)
    for budget in budgets:
        truth = np.mean([hand_recall(context(budget), chunks, row) for context in fills])
        assert ours[f"recall_budget@{budget}"] == pytest.approx(truth, abs=1e-12), budget


def test_a_tiny_case_by_hand():
    # Chunks A (500 chars), B and C (800 each, tied), D (300), ranked A, {B, C}, D; A, C, D relevant.
    chunks = table([(0, 500), (500, 1300), (1300, 2100), (2100, 2400)])
    run = from_records([("q", "c0", 3.0), ("q", "c1", 2.0), ("q", "c2", 2.0), ("q", "c3", 1.0)])
    row = {"qid": "q", "relevant": {"c0": 1, "c2": 1, "c3": 1}}
    got = {
        policy: score_run([row], chunks, run, Scoring((1,), MIN_COVERAGE, policy, (1300, 1600, 2100, 2500))).iloc[0]
        for policy in ("expected", "pessimistic", "optimistic")
    }
    # 1300: A (500) fits; C fits only ahead of B (500 + 800), half the orders; D (2400) not: (1 + 1/2) / 3.
    # 1600: the same: after A + B (1300), C (2100) ends the context although D (300) would still fit.
    # 2100: A and C fit in either order (1300 or 2100), D (2400) not: 2 / 3.  2500: all three.
    assert [got["expected"][f"recall_budget@{b}"] for b in (1300, 1600, 2100, 2500)] == pytest.approx(
        [0.5, 0.5, 2 / 3, 1.0]
    )
    assert got["pessimistic"]["recall_budget@1300"] == pytest.approx(1 / 3)  # C behind B
    assert got["optimistic"]["recall_budget@1300"] == pytest.approx(2 / 3)  # C ahead of B
    # Evidence [400, 1400), 1000 chars: A covers 100 (too little to be relevant, but it covers), B 800, C 100.
    # 500: A only, 0.1. 1300: A and whichever of B, C comes first: 0.1 + 0.8 / 2 + 0.1 / 2.
    span = {"qid": "q", "doc_id": "d", "start": 400, "end": 1400}
    assert score_run([span], chunks, run, Scoring((1,), MIN_COVERAGE, budgets=(500, 1300))).iloc[0][
        ["recall_budget@500", "recall_budget@1300"]
    ].tolist() == pytest.approx([0.1, 0.1 + 0.5 * 0.8 + 0.5 * 0.1])


def test_a_run_holding_only_a_chunk_below_the_bar_scores_zero():
    """A multi question whose one retrieved chunk overlaps a piece under the coverage bar (gain 0)
    and whose relevant chunks are not in the run: recall_budget 0 under every tie policy (the
    expected one raised TypeError: the documented chunk-size experiment's score stage failed)."""
    chunks = table([(0, 100), (70, 170), (200, 300)])
    pieces = [{"doc_id": "d", "start": 0, "end": 80}, {"doc_id": "d", "start": 210, "end": 290}]
    row = {"qid": "q", "kind": "multi", "doc_id": "d", "start": 0, "end": 80, "evidence_spans": pieces}
    run = from_records([("q", "c1", 1.0)])
    for policy in ("expected", "pessimistic", "optimistic"):
        got = score_run([row], chunks, run, Scoring((1,), 0.5, policy, (100, 1000))).iloc[0]
        assert [got["recall_budget@100"], got["recall_budget@1000"]] == [0.0, 0.0]


def test_a_tie_group_too_big_to_enumerate_has_its_closed_form():
    # One chunk among 3,000 others of 800 and 400 of length 0: with j of the 3,000 before it
    # (each j as likely) it fits when 800 j + 500 <= room.
    others = np.array([800] * 3000 + [0] * 400)
    rooms = np.array([500, 4000, 4499, 10**7])
    expected = [min(3001, floor((room - 500) / 800) + 1) / 3001 for room in rooms]
    assert first_fits(others, np.array([500]), rooms) == pytest.approx(expected, abs=1e-12)
    # Two marked chunks: the first of them is either, with 0..3000 others before it, P(J = j) = 2 (3001 - j) / (3002 * 3001).
    p_j = np.array([2 * (3001 - j) / (3002 * 3001) for j in range(3001)])
    two = [
        0.5 * sum(p_j[: max(0, floor((room - c) / 800) + 1)].sum() for c in (500, 900) if room >= c) for room in rooms
    ]
    assert first_fits(others, np.array([500, 900]), rooms) == pytest.approx(two, abs=1e-12)


def test_budgets_reach_the_summary_and_words_read_the_text():
    per_question = pd.DataFrame({"recall@1": [0.5], "recall_budget@100": [0.25], "hit@1": [1.0], "n_relevant": [1]})
    for name in (
        "reciprocal_rank",
        "reciprocal_rank@1",
        "ndcg@1",
        "map@1",
        "complete@1",
        "evidence_recall@1",
        "first_relevant_rank",
    ):
        per_question[name] = 0.0
    summary = summarize(per_question, [1], 3, [100])
    assert list(summary)[:3] == ["recall@1", "recall_budget@100", "hit@1"] and summary["recall_budget@100"] == 0.25
    assert "text" in chunk_columns({"budgets": [100], "budget_unit": "words"})
    assert "text" not in chunk_columns({"budgets": [100], "budget_unit": "chars"})
    assert "text" not in chunk_columns({"budgets": [], "budget_unit": "words"})


@pytest.mark.parametrize(
    ("score", "message"),
    [
        (
            {"budgets": [0, 2000]},
            "score.budgets must be a list of distinct positive integers up to 1,000,000,000,000 or [], got [0, 2000]",
        ),
        (
            {"budgets": [2000, 2000]},
            "score.budgets must be a list of distinct positive integers up to 1,000,000,000,000 or []",
        ),
        (
            {"budgets": [1.5]},
            "score.budgets must be a list of distinct positive integers up to 1,000,000,000,000 or []",
        ),
        ({"budgets": 2000}, "params.score.budgets must be list, got 2000"),
        ({"budget_unit": "tokens"}, "score.budget_unit must be one of chars, words, got 'tokens'"),
    ],
)
def test_bad_budgets_name_the_key(tmp_path, score, message):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"score": score}))
    with pytest.raises(InputError) as error:
        load_all_params(path)
    assert message in str(error.value) and "\n" not in str(error.value)


def test_no_budgets_is_off(tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"score": {"budgets": []}}))
    assert load_all_params(path)["score"]["budgets"] == []
