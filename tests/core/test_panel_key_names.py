"""A panel system's retrieval errors name the key the user wrote (panel.NAME.…), not retrieval.…
(#28 item 7: a panel system's missing run file was reported as retrieval.run_file)."""

from __future__ import annotations

import numpy as np
import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.retrieval import methods
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings


def inputs():
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(6, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus = Corpus([f"c{i}" for i in range(6)], ["text"] * 6, vectors)
    return Questions(["q1"], ["a question"], vectors[:1]), corpus


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"method": "run-file", "run_file": "runs/missing.trec"}, "panel.x.run_file runs/missing.trec"),
        ({"method": "run-file", "run_file": None}, "panel.x.method run-file needs panel.x.run_file"),
        ({"method": "python", "python": "no_colon"}, "panel.x.python must be 'module:function'"),
        (
            {"method": "ann", "ann": {**DEFAULTS["retrieval"]["ann"], "index": "ivf-flat", "nlist": 50}},
            "panel.x.ann.nlist 50",
        ),
    ],
)
def test_a_panel_systems_errors_name_its_own_keys(tmp_path, monkeypatch, changes, named):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path / "cache"))
    questions, corpus = inputs()
    settings = {**DEFAULTS["retrieval"], **changes}
    with pytest.raises(InputError) as raised:
        methods.retrieve(RetrievalSettings.from_params(settings, where="panel.x"), questions, corpus)
    assert named in str(raised.value) and "retrieval." not in str(raised.value)
    with pytest.raises(InputError, match=r"^retrieval\."):  # the single system keeps its own keys
        methods.retrieve(RetrievalSettings.from_params(settings), questions, corpus)
