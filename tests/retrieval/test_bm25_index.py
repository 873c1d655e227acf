"""The BM25 index cache (user cache, bm25/): a second run on the same chunks loads the index
instead of building it, a changed chunk text or tokenizer setting builds another, a damaged entry
is rebuilt, and the runs are those of the plain definition (an index built in the process);
without numba, bm25s' numpy backend gives the same runs."""

from __future__ import annotations

import os
import subprocess
import sys

import bm25s
import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.retrieval import bm25
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

WORDS = [f"w{i}" for i in range(200)] + ["running", "runs", "ran", "the", "and"]


def make(seed: int = 4, n_chunks: int = 300):
    rng = np.random.default_rng(seed)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(0, 20)))) for _ in range(n_chunks)]
    asked = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 5)))) for _ in range(40)] + [
        "the of and",
        "unheard words",
    ]
    return Questions([f"q{i}" for i in range(len(asked))], asked), Corpus([f"c{i}" for i in range(n_chunks)], texts)


def settings(depth=10, method="bm25", **bm25_options):
    return RetrievalSettings.from_params(
        {
            **DEFAULTS["retrieval"],
            "method": method,
            "depth": depth,
            "bm25": {**DEFAULTS["retrieval"]["bm25"], **bm25_options},
        }
    )


def plain_run(questions: Questions, corpus: Corpus, options: dict, depth: int) -> pd.DataFrame:
    """The definition: every chunk's bm25s score from an index built here, each question's chunks
    scoring above 0 ranked by score then chunk id, cut at `depth` with the whole tie group."""
    index = bm25s.BM25()
    index.index(bm25.tokenize(corpus.texts, **options), show_progress=False)
    rows = []
    for qid, words in zip(questions.qids, bm25.tokenize(questions.texts, **options)):
        scores = index.get_scores(words).astype(np.float32) if words else np.zeros(len(corpus.texts), np.float32)
        hits = np.flatnonzero(scores > 0)
        order = hits[np.lexsort((np.array(corpus.chunk_ids, dtype=object)[hits], -scores[hits]))]
        cut = scores[order[depth - 1]] if len(order) >= depth else -np.inf
        kept = [i for rank, i in enumerate(order) if rank < depth or scores[i] >= cut]
        rows += [(qid, corpus.chunk_ids[i], rank, float(scores[i])) for rank, i in enumerate(kept, 1)]
    return pd.DataFrame(rows, columns=["qid", "chunk_id", "rank", "score"])


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))
    return tmp_path / "bm25"


def entries(folder):
    return sorted(path.name for path in folder.iterdir() if not path.name.startswith("."))


@pytest.mark.parametrize("options", [{}, {"stemmer": "none", "stopwords": "none"}])
def test_cached_index_runs_are_the_plain_definitions(cache, options):
    questions, corpus = make()
    for depth in (1, 3, 10):
        expected = plain_run(questions, corpus, {**DEFAULTS["retrieval"]["bm25"], **options}, depth)
        for _ in range(2):  # built, then loaded from the cache
            run = retrieve(settings(depth, **options), questions, corpus)
            pd.testing.assert_frame_equal(run, expected, check_dtype=False)


def test_second_run_loads_the_index_and_changes_build_another(cache, monkeypatch):
    questions, corpus = make()
    builds = []
    real_index = bm25s.BM25.index
    monkeypatch.setattr(bm25s.BM25, "index", lambda self, *a, **k: builds.append(1) or real_index(self, *a, **k))
    first = retrieve(settings(), questions, corpus)
    assert len(builds) == 1 and len(entries(cache)) == 1
    pd.testing.assert_frame_equal(retrieve(settings(), questions, corpus), first)
    assert len(builds) == 1  # a cache hit: nothing tokenized or indexed
    edited = Corpus(corpus.chunk_ids, [corpus.texts[0] + " running", *corpus.texts[1:]])
    retrieve(settings(), questions, edited)
    retrieve(settings(stemmer="none"), questions, corpus)
    retrieve(settings(stopwords="none"), questions, corpus)
    assert len(builds) == 4 and len(entries(cache)) == 4
    texts_moved = Corpus(corpus.chunk_ids, [corpus.texts[0] + corpus.texts[1], "", *corpus.texts[2:]])
    options = settings().bm25
    assert bm25.index_key(texts_moved.texts, options) != bm25.index_key(corpus.texts, options)


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete", "manifest"])
def test_a_damaged_entry_is_rebuilt_not_read(cache, damage):
    questions, corpus = make()
    expected = retrieve(settings(), questions, corpus)
    (entry,) = [cache / name for name in entries(cache)]
    data = entry / "data.csc.index.npy"
    if damage == "flip":
        raw = bytearray(data.read_bytes())
        raw[-5] ^= 0x40  # one score changed: the file still loads
        data.write_bytes(bytes(raw))
    elif damage == "truncate":
        data.write_bytes(data.read_bytes()[:-8])
    elif damage == "delete":
        (entry / "vocab.index.json").unlink()
    else:
        (entry / bm25.MANIFEST).write_text("{", encoding="utf-8")
    index, built = bm25.load_or_build(corpus.texts, settings().bm25, "numpy")
    assert built
    pd.testing.assert_frame_equal(retrieve(settings(), questions, corpus), expected)
    assert bm25._intact(entry) and entries(cache) == [entry.name]


CHILD = """
import sys, pickle
sys.modules["numba"] = None  # numba not installed
from retrieval_bench.retrieval import bm25
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.settings import RetrievalSettings
from retrieval_bench.core.params import DEFAULTS
questions, corpus, out = pickle.load(open(sys.argv[1], "rb"))
bm25.NUMBA_FROM_CHUNKS = 1  # a large corpus: numba would be asked for
runs = [
    retrieve(RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": m, "depth": 5}), questions, corpus)
    for m in ("bm25", "hybrid")
]
pickle.dump((bm25.numba_installed(), runs), open(out, "wb"))
"""


def test_without_numba_the_numpy_backend_gives_the_same_runs(cache, tmp_path, monkeypatch):
    import pickle

    rng = np.random.default_rng(1)
    questions, corpus = make()
    questions = Questions(questions.qids, questions.texts, rng.normal(size=(len(questions.qids), 4)).astype(np.float32))
    corpus = Corpus(corpus.chunk_ids, corpus.texts, rng.normal(size=(len(corpus.chunk_ids), 4)).astype(np.float32))
    monkeypatch.setattr(bm25, "NUMBA_FROM_CHUNKS", 1)
    expected = [retrieve(settings(5, method=m), questions, corpus) for m in ("bm25", "hybrid")]
    assert bm25.backend_for(len(corpus.texts)) == "numba"
    data = tmp_path / "in.pickle"
    data.write_bytes(pickle.dumps((questions, corpus, str(tmp_path / "out.pickle"))))
    child = subprocess.run(
        [sys.executable, "-c", CHILD, str(data)], capture_output=True, text=True, env=os.environ.copy()
    )
    assert child.returncode == 0, child.stderr
    installed, runs = pickle.loads((tmp_path / "out.pickle").read_bytes())
    assert not installed and "pip install -e '.[bm25-fast]'" in child.stderr
    assert child.stderr.count("numba is not installed") == 1  # one note, however many searches
    for run, wanted in zip(runs, expected):
        pd.testing.assert_frame_equal(run, wanted)


NUMBA_CHILD = """
import sys, pickle
from bm25s.numba import retrieve_utils
from retrieval_bench.retrieval import bm25
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.settings import RetrievalSettings
from retrieval_bench.core.params import DEFAULTS
questions, corpus = pickle.load(open(sys.argv[1], "rb"))
bm25.NUMBA_FROM_CHUNKS = 1  # a large corpus: numba searches
retrieve(RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "bm25", "depth": 5}), questions, corpus)
stats = retrieve_utils._retrieve_internal_jitted_serial.stats  # the search on one thread
print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
"""


def test_the_numba_search_is_compiled_once_per_machine_not_per_process(cache, tmp_path):
    import pickle

    data = tmp_path / "in.pickle"
    data.write_bytes(pickle.dumps(make()))
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba"), "NUMBA_NUM_THREADS": "1"}
    counts = []
    for _ in range(2):
        child = subprocess.run([sys.executable, "-c", NUMBA_CHILD, str(data)], capture_output=True, text=True, env=env)
        assert child.returncode == 0, child.stderr
        counts.append(tuple(map(int, child.stdout.split())))
    assert counts == [(0, 1), (1, 0)]  # compiled and cached, then loaded from numba's cache
