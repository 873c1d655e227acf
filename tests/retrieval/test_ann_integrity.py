"""The ANN index cache's integrity: a cached FAISS index ends with the sha256 of its bytes, checked
before FAISS reads it. An index with flipped bytes (FAISS reads them without complaint and searches
nonsense), a truncated one or one without a checksum (an older version's, another program's) is
rebuilt once, as a fresh build would be, and said once on stderr; an intact one is loaded as it is."""

from __future__ import annotations

import hashlib

import numpy as np
import pytest

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

faiss = pytest.importorskip("faiss")

CHECKSUM_BYTES = 8 + 32  # the marker, then the sha256


@pytest.fixture
def data():
    rng = np.random.default_rng(3)
    vectors = rng.normal(size=(2000 + 40, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    corpus = Corpus([f"c{i}" for i in range(2000)], [""] * 2000, vectors[:2000])
    questions = Questions([f"q{i}" for i in range(40)], [""] * 40, vectors[2000:])
    return questions, corpus


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "ann"


def settings(index: str = "hnsw") -> RetrievalSettings:
    return RetrievalSettings.from_params(
        {
            **DEFAULTS["retrieval"],
            "method": "ann",
            "depth": 20,
            "ann": {**DEFAULTS["retrieval"]["ann"], "index": index, "nlist": 16, "nprobe": 4, "pq_m": 8},
        }
    )


def cached_index(cache):
    (path,) = cache.glob("*.faiss")
    return path


def damage_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if "damaged" in line]


def test_flipped_bytes_in_the_vector_region_rebuild_the_index_once_and_say_so(data, cache, builds, capsys):
    """About 160 flipped exponent bytes among the stored vectors: FAISS reads the file and would
    score those chunks ~1e36; the checksum catches it, and the rebuild is the fresh build, byte
    for byte (one build thread: a deterministic graph)."""
    questions, corpus = data
    fresh = retrieve(settings(), questions, corpus)
    path = cached_index(cache)
    sound = path.read_bytes()
    start = sound.find(corpus.vectors.tobytes())  # IndexHNSWFlat stores the vectors as given, in order
    assert start > 0
    damaged = bytearray(sound)
    for row in np.random.default_rng(1).choice(len(corpus.vectors), size=160, replace=False):
        damaged[start + row * corpus.vectors.shape[1] * 4 + 3] ^= 0x40  # sign-and-exponent byte of the row's 1st float
    path.write_bytes(bytes(damaged))
    faiss.read_index(str(path))  # FAISS itself finds nothing wrong
    capsys.readouterr()

    assert retrieve(settings(), questions, corpus).equals(fresh)
    assert damage_lines(capsys) == [f"ann: the cached index {path} was damaged (checksum mismatch): rebuilt"]
    assert path.read_bytes() == sound and builds == ["hnsw", "hnsw"]

    assert retrieve(settings(), questions, corpus).equals(fresh)  # the rebuilt index is loaded, silently
    assert damage_lines(capsys) == [] and builds == ["hnsw", "hnsw"]


@pytest.mark.parametrize("index", ["hnsw", "ivf-flat", "ivf-pq"])
@pytest.mark.parametrize("keep", ["half", "all but the last byte"])
def test_a_truncated_index_is_rebuilt_once_and_said_once(data, cache, builds, capsys, index, keep):
    questions, corpus = data
    fresh = retrieve(settings(index), questions, corpus)
    path = cached_index(cache)
    sound = path.read_bytes()
    path.write_bytes(sound[: len(sound) // 2 if keep == "half" else -1])
    capsys.readouterr()

    assert retrieve(settings(index), questions, corpus).equals(fresh)
    (line,) = damage_lines(capsys)
    assert line.startswith(f"ann: the cached index {path} was damaged (no checksum at its end: truncated")
    assert path.read_bytes() == sound and builds == [index, index]


def test_an_index_without_a_checksum_is_rebuilt_once_and_said_once(data, cache, builds, capsys):
    """A FAISS file as an older retrieval-bench (or FAISS itself) wrote it, under the cache's name."""
    questions, corpus = data
    fresh = retrieve(settings(), questions, corpus)
    path = cached_index(cache)
    sound = path.read_bytes()
    faiss.write_index(faiss.read_index(str(path)), str(path))
    assert sound.startswith(path.read_bytes())  # the same index, no checksum after it
    capsys.readouterr()

    assert retrieve(settings(), questions, corpus).equals(fresh)
    (line,) = damage_lines(capsys)
    assert "no checksum at its end" in line and "written by an older retrieval-bench or another program" in line
    assert path.read_bytes() == sound and builds == ["hnsw", "hnsw"]


@pytest.mark.parametrize("index", ["hnsw", "ivf-flat", "ivf-pq"])
def test_an_intact_index_ends_with_its_sha256_and_is_loaded_not_rebuilt(data, cache, builds, capsys, index):
    questions, corpus = data
    fresh = retrieve(settings(index), questions, corpus)
    path = cached_index(cache)
    written = path.read_bytes()
    assert written[-CHECKSUM_BYTES:] == b"RBSHA256" + hashlib.sha256(written[:-CHECKSUM_BYTES]).digest()
    before = path.stat()

    assert retrieve(settings(index), questions, corpus).equals(fresh)
    after = path.stat()
    assert builds == [index] and (after.st_ino, after.st_mtime_ns) == (before.st_ino, before.st_mtime_ns)
    assert damage_lines(capsys) == []
