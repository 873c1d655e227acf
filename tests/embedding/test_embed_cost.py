"""What embedding costs, measured by the embed stage on its own batches (embedding.embed_cost):
the batches dealt into repeats, checked against a hand computation; the timed sample when they are
too few; what embed_texts records of its batches."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.embedding.embed import QUIET, BatchTime, embed_texts
from retrieval_bench.embedding.embed_cost import CostSettings, dealt_rounds, embedding_cost
from retrieval_bench.embedding.settings import EmbedSettings


def by_hand(batches: list[BatchTime], rounds: int, clock: str) -> list[float]:
    """Seconds per chunk of each group: batch i (from 1; batch 0 the warm-up) in group (i - 1) mod rounds."""
    seconds, texts = [0.0] * rounds, [0] * rounds
    for i, batch in enumerate(batches):
        if i == 0:
            continue
        seconds[(i - 1) % rounds] += getattr(batch, clock)
        texts[(i - 1) % rounds] += batch.texts
    return [s / t for s, t in zip(seconds, texts, strict=True)]


@pytest.mark.parametrize("seed", range(20))
def test_the_batches_are_dealt_into_repeats_as_a_hand_computation_says(seed):
    rng = np.random.default_rng(seed)
    rounds = int(rng.integers(1, 6))
    batches = [
        BatchTime(int(rng.integers(1, 33)), float(rng.uniform(0.01, 2)), float(rng.uniform(0.01, 4)))
        for _ in range(int(rng.integers(rounds + 1, 40)))
    ]
    costs = CostSettings(rounds, 1)
    repeats = dealt_rounds(batches, costs)
    assert repeats is not None
    for clock in ("wall", "cpu"):
        assert repeats[clock] == pytest.approx(by_hand(batches, rounds, clock), rel=1e-12)


def test_too_few_batches_or_chunks_are_not_enough():
    batch = BatchTime(32, 1.0, 1.0)
    assert dealt_rounds([batch] * 5, CostSettings(5, 1)) is None  # 4 timed batches for 5 repeats
    assert dealt_rounds([batch] * 6, CostSettings(5, 64)) is None  # 160 chunks timed, a sample would time 320
    assert dealt_rounds([batch] * 11, CostSettings(5, 64)) is not None
    assert dealt_rounds([], CostSettings(1, 1)) is None


def settings(**changes) -> EmbedSettings:
    return EmbedSettings.from_params({**DEFAULTS["embed"], "device": "cpu", **changes})


TEXTS = [f"passage {i}: " + "retrieval evaluation with synthetic questions " * (1 + i % 5) for i in range(40)]


def test_the_stage_s_own_batches_give_the_cost_and_a_cached_run_times_a_sample(tmp_path):
    embedder = settings(batch_size=4)
    _, first = embed_texts(TEXTS, embedder, "", tmp_path / "cache", progress=QUIET)
    assert sum(batch.texts for batch in first.batch_times) == first.embedded == 40
    assert [batch.texts for batch in first.batch_times] == [4] * 10 and all(b.wall > 0 for b in first.batch_times)
    costs = CostSettings(3, 4)
    said: list[str] = []
    cost = embedding_cost(first.batch_times, TEXTS, embedder, costs, log=said.append)
    assert said == []  # timed on its own batches: no extra work to announce
    assert cost["timed_on"] == "the stage's own batches" and cost["chunks_timed"] == 36
    repeats = by_hand(list(first.batch_times), 3, "wall")
    assert cost["wall"]["median"] == round(float(np.median(repeats)) * 1000, 4)
    assert cost["wall"]["low"] == round(min(repeats) * 1000, 4) and cost["wall"]["high"] == round(
        max(repeats) * 1000, 4
    )
    assert cost["repeats"] == 3 and cost["batch_size"] == 4 and cost["device"] == "cpu"

    _, again = embed_texts(TEXTS, embedder, "", tmp_path / "cache", progress=QUIET)
    assert again.embedded == 0 and again.batch_times == ()  # every vector from the cache: nothing timed
    sampled = embedding_cost(again.batch_times, TEXTS, embedder, costs, log=said.append)
    # the stage's silent stretch (26 s on the sample) now says what it does
    assert said == [  # it said "too few were embedded here to time" of a stage that embedded every chunk anew
        "its vectors came from the cache: timing the embedding cost on a sample of the first 4 chunks instead "
        "(3 rounds after a warm-up, 16 chunks embedded)"
    ]
    said.clear()
    embedding_cost(first.batch_times[:2], TEXTS, embedder, costs, log=said.append)
    assert said[0].startswith("the 8 it embedded are too few to time: timing the embedding cost on a sample")
    assert sampled["timed_on"] == "a sample of the first 4 chunks" and sampled["chunks_timed"] == 12
    assert 0 < sampled["wall"]["low"] <= sampled["wall"]["median"] <= sampled["wall"]["high"]
    assert embedding_cost((), [], embedder, costs) == {}  # no chunk: nothing to time
