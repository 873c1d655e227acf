"""Exact dense search's scores are the fixed-order definition (tests/exact_reference.py) bit for bit,
whichever way they are summed first (scores_of's float64 sum, or the tree where it cannot be sure),
however the questions are batched and blocked, and wherever the candidates are found (FAISS, or a
torch device: here torch's CPU backend standing in for a GPU); `retrieval.device` asks for a GPU
in one line naming the key where there is none."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_dense_identity import plain_run, tied_data

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.retrieval import dense, flat, torch_flat
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings
from tests.exact_reference import reference_scores


def on_device(device: str) -> RetrievalSettings:
    return RetrievalSettings.from_params({**DEFAULTS["retrieval"], "device": device})


def unit(rng: np.random.Generator, n: int, d: int) -> np.ndarray:
    vectors = rng.normal(size=(n, d)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize("d", [384, 7, 1])
def test_scores_are_the_fixed_tree_whether_or_not_the_float64_sum_is_sure(d):
    rng = np.random.default_rng(d)
    questions, chunks = unit(rng, 12, d), unit(rng, 300, d)
    indices = rng.integers(0, 300, size=(12, 40))
    expected = np.take_along_axis(reference_scores(questions, chunks), indices, axis=1)
    _, margins = flat.error_bounds(questions, chunks)
    assert np.array_equal(flat.scores_of(questions, chunks, indices, margins), expected)
    # margins too wide to be sure of anything: every score is the tree's own
    assert np.array_equal(flat.scores_of(questions, chunks, indices, margins + 1.0), expected)


@pytest.mark.parametrize("exact_entries", [256, 7, 1])
def test_scores_do_not_depend_on_how_questions_are_batched_or_blocked(monkeypatch, exact_entries):
    monkeypatch.setattr(flat, "EXACT_ENTRIES", exact_entries)
    rng = np.random.default_rng(exact_entries)
    questions, chunks = unit(rng, 23, 48), unit(rng, 1_500, 48)
    together = flat.search(questions, chunks, 20)
    alone = [flat.search(questions[i : i + 1], chunks, 20) for i in range(len(questions))]
    monkeypatch.setattr(flat, "SEARCH_BLOCK", 4)
    blocked = flat.search(questions[::-1], chunks, 20)
    for indices, scores in (tuple(np.concatenate(part) for part in zip(*alone)), tuple(a[::-1] for a in blocked)):
        assert np.array_equal(indices, together[0]) and np.array_equal(scores, together[1])
    full = reference_scores(questions, chunks)
    assert np.array_equal(together[1], np.take_along_axis(full, together[0], axis=1))
    assert np.array_equal(together[0], np.lexsort((np.tile(np.arange(1_500), (23, 1)), -full), axis=1)[:, :20])


@pytest.mark.parametrize("score_entries", [1 << 26, 300, 1])
@pytest.mark.parametrize("depth", [1, 10, 150])
def test_the_torch_path_gives_the_faiss_run_on_data_full_of_ties(monkeypatch, score_entries, depth):
    monkeypatch.setattr(torch_flat, "SCORE_ENTRIES", score_entries)  # 1: one question's width of chunks per block
    questions, chunks = tied_data(depth + 1, 2_000, 30)
    qids = [f"q{i}" for i in range(len(questions))]
    chunk_ids = [f"c{(i * 7919) % 2_000}" for i in range(len(chunks))]
    asked = Questions(qids, [""] * len(qids), questions)
    corpus = Corpus(chunk_ids, [""] * len(chunk_ids), chunks)
    on_faiss = dense.retrieve(asked, corpus, on_device("cpu"), depth)
    monkeypatch.setattr(torch_flat, "torch_device", lambda setting, where: "cpu")  # torch's CPU backend for a GPU
    on_torch = dense.retrieve(asked, corpus, on_device("cuda"), depth)
    pd.testing.assert_frame_equal(on_torch, on_faiss)
    pd.testing.assert_frame_equal(on_torch, plain_run(questions, chunks, qids, chunk_ids, depth), check_dtype=False)


def test_torch_candidates_are_each_questions_best_by_float32_products():
    rng = np.random.default_rng(5)
    questions, chunks = unit(rng, 9, 16), unit(rng, 500, 16)
    scores, indices = torch_flat.candidates_on("cpu", chunks)(questions, 12)
    products = questions @ chunks.T
    assert np.allclose(scores, np.take_along_axis(products, indices, axis=1), atol=1e-6)
    assert np.allclose(scores, -np.sort(-products, axis=1)[:, :12], atol=1e-6)


def test_a_gpu_that_is_not_here_is_one_line_naming_the_key(monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert torch_flat.torch_device("cpu", "retrieval") is None
    assert torch_flat.torch_device("auto", "retrieval") is None  # FAISS on this CPU
    for setting in ("cuda", "cuda:1"):
        with pytest.raises(InputError, match=rf"^panel\.gpu\.device {setting}: torch sees no CUDA device") as error:
            torch_flat.torch_device(setting, "panel.gpu")
        assert "\n" not in str(error.value)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
    assert torch_flat.torch_device("auto", "retrieval") == "cuda"
    with pytest.raises(InputError, match=r"^retrieval\.device cuda:1: this machine has 1 CUDA device"):
        torch_flat.torch_device("cuda:1", "retrieval")
