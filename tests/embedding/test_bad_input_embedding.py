"""Bad input on the embedding surfaces (the embedding cache, stored and saved vectors, ANN, Ray and
embed params): one `error:` line naming where, exit status 1, no traceback, the last good output
intact; or, for a damaged cache, the right recovery: the damaged vectors embedded again, said in
one line naming the shard, the output the same as from a sound cache."""

from __future__ import annotations

import json
import shutil
import socket
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import ROOT, set_params
from stage_helpers import stage_in_process
from store_helpers import unit

from retrieval_bench.core import paths
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.embedding import embedding_cache as ec
from retrieval_bench.stores import registry

QUESTIONS = ["what is a write-ahead log?", "how does a checkpoint work?", "can readers and writers run together?"]
SENTINEL = b"the last good output"
DIM = 384  # the bundled model's


def assert_one_line_error(result, *fragments: str) -> None:
    """Exit status 1, exactly one `error:` line holding every fragment, no traceback (progress bars
    drawn before the failure may share stderr)."""
    assert result.returncode == 1, result.stdout + result.stderr
    lines = [line for line in result.stderr.replace("\r", "\n").splitlines() if line.startswith("error:")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


def _golden(folder: Path) -> None:
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "goldenset.jsonl").write_text(
        "".join(json.dumps({"qid": f"q{i}", "question": q}) + "\n" for i, q in enumerate(QUESTIONS))
    )


@pytest.fixture
def embedding(workdir):
    """The workdir with a golden set and a stand-in for the last good question vectors."""
    _golden(workdir)
    for path in (paths.QUESTION_VECTORS, paths.CORPUS_VECTORS, paths.CHUNKS):
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
    (workdir / paths.QUESTION_VECTORS).write_bytes(SENTINEL)
    return workdir


PARAM_CASES = [
    ({"embed.batch_size": 0}, "embed.batch_size must be between 1 and 65536, got 0"),
    ({"embed.batch_size": 10**9}, "embed.batch_size must be between 1 and 65536, got 1000000000"),
    ({"embed.ray.num_actors": 0}, "embed.ray.num_actors must be between 1 and 1024, got 0"),
    ({"embed.ray.num_actors": 100_000}, "embed.ray.num_actors must be between 1 and 1024, got 100000"),
    ({"embed.ray.batch_size": 0}, "embed.ray.batch_size must be between 1 and 1048576, got 0"),
    (
        {"embed.ray.num_cpus_per_actor": float("nan")},
        "params.embed.ray.num_cpus_per_actor must be a finite number, got nan",
    ),
    ({"embed.ray.num_gpus_per_actor": -1}, "embed.ray.num_gpus_per_actor must be between 0 and 64, got -1"),
    (
        {"embed.ray.num_gpus_per_actor": float("inf")},
        "params.embed.ray.num_gpus_per_actor must be a finite number, got inf",
    ),
    ({"embed.ray.timeout_s": 0}, "embed.ray.timeout_s must be between 0.1 and 600, got 0"),
    ({"embed.ray.timeout_s": 1e9}, "embed.ray.timeout_s must be between 0.1 and 600, got 1000000000.0"),
    ({"embed.ray.timeout_s": "soon"}, "params.embed.ray.timeout_s must be a number, got 'soon'"),
    ({"embed.ray.address": " "}, "embed.ray.address must be null (start a local Ray), auto or host:port"),
    ({"retrieval.ann.ef_search": 100_000_000}, "retrieval.ann.ef_search must be between 1 and 32768, got 100000000"),
    (
        {"retrieval.ann.ef_construction": 10**7},
        "retrieval.ann.ef_construction must be between 1 and 4096, got 10000000",
    ),
    ({"retrieval.ann.hnsw_m": 100_000}, "retrieval.ann.hnsw_m must be between 2 and 256, got 100000"),
    ({"retrieval.ann.nlist": 10**9}, "retrieval.ann.nlist must be between 1 and 1048576, got 1000000000"),
    ({"retrieval.ann.nprobe": 0}, "retrieval.ann.nprobe must be between 1 and 1048576, got 0"),
    ({"retrieval.ann.pq_m": 0}, "retrieval.ann.pq_m must be between 1 and 1024, got 0"),
    ({"retrieval.ann.pq_bits": 64}, "retrieval.ann.pq_bits must be between 1 and 16, got 64"),
]


@pytest.mark.parametrize(
    "changes,fragment", PARAM_CASES, ids=[next(iter(c)) + "=" + str(next(iter(c.values()))) for c, _ in PARAM_CASES]
)
def test_bad_embed_ann_and_ray_params_are_one_line_naming_the_key(embedding, changes, fragment, monkeypatch, capsys):
    set_params(embedding, **changes)
    assert_one_line_error(
        stage_in_process("embed_questions", embedding, monkeypatch, capsys), f"params.yaml: {fragment}"
    )
    assert (embedding / paths.QUESTION_VECTORS).read_bytes() == SENTINEL


def test_a_ray_address_that_accepts_and_never_answers_is_one_line_after_its_timeout(embedding, monkeypatch, capsys):
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        set_params(embedding, **{"embed.engine": "ray", "embed.ray.address": address, "embed.ray.timeout_s": 0.5})
        result = stage_in_process("embed_questions", embedding, monkeypatch, capsys)
    assert_one_line_error(
        result, f"embed.ray.address '{address}': {address} did not answer within 0.5s (embed.ray.timeout_s)"
    )
    assert (embedding / paths.QUESTION_VECTORS).read_bytes() == SENTINEL


# --- a damaged embedding cache: the damaged vectors are embedded again, said in one line ------------


def _flip_exponent(vec: Path, keys: Path) -> None:
    data = bytearray(vec.read_bytes())
    data[ec.HEADER_BYTES + DIM * 4 + 3] ^= 0x40  # row 1, first float: ~1e38
    vec.write_bytes(bytes(data))


def _fill_row(value: float):
    def damage(vec: Path, keys: Path) -> None:
        data = bytearray(vec.read_bytes())
        at = ec.HEADER_BYTES + DIM * 4
        data[at : at + DIM * 4] = np.full(DIM, value, dtype="<f4").tobytes()
        vec.write_bytes(bytes(data))

    return damage


def _edit_header(old: bytes, new: bytes):
    def damage(vec: Path, keys: Path) -> None:
        vec.write_bytes(vec.read_bytes().replace(old, new, 1))

    return damage


def _flip_checksum(vec: Path, keys: Path) -> None:
    data = bytearray(keys.read_bytes())
    data[ec.RECORD_BYTES[ec.VERSION] + ec.KEY_BYTES] ^= 0xFF  # record 1's CRC
    keys.write_bytes(bytes(data))


def _truncate(which: str, cut: int):
    def damage(vec: Path, keys: Path) -> None:
        path = vec if which == "vec" else keys
        path.write_bytes(path.read_bytes()[:cut])

    return damage


def _as_format1(dim: int):
    """The shard rewritten as format 1 (no checksums) would have, its header saying `dim`."""

    def damage(vec: Path, keys: Path) -> None:
        header = json.dumps({"format": ec.FORMAT, "version": 1, "dtype": "<f4", "dim": dim}).encode()
        vec.write_bytes(
            header + b" " * (ec.HEADER_BYTES - 1 - len(header)) + b"\n" + vec.read_bytes()[ec.HEADER_BYTES :]
        )
        records = keys.read_bytes()
        step = ec.RECORD_BYTES[ec.VERSION]
        keys.write_bytes(b"".join(records[at : at + ec.KEY_BYTES] for at in range(0, len(records), step)))

    return damage


CACHE_CASES = {  # name -> (damage, a fragment of the one warning line, or None when nothing is worth saying)
    "flipped exponent bit": (_flip_exponent, "1 vectors fail their checksum"),
    "nan row": (_fill_row(np.nan), "1 vectors fail their checksum"),
    "inf row": (_fill_row(np.inf), "1 vectors fail their checksum"),
    "zero row": (_fill_row(0.0), "1 vectors fail their checksum"),
    "record checksum flipped": (_flip_checksum, "1 vectors fail their checksum"),
    "header dim edited to 383": (_edit_header(b'"dim": 384', b'"dim": 383'), "its .vec header fails its checksum"),
    "header version 99": (_edit_header(b'"version": 2', b'"version": 9'), "names format version 9"),
    "header garbage": (_edit_header(b'{"format"', b'#"format"'), "its .vec header is missing or unreadable"),
    "keys torn mid-record": (_truncate("keys", ec.RECORD_BYTES[ec.VERSION] * 2 + 5), None),
    "vec torn mid-row": (_truncate("vec", ec.HEADER_BYTES + DIM * 4 * 2 + 100), None),
    "vec header only": (_truncate("vec", ec.HEADER_BYTES), None),
    "format 1, dim edited to 383": (_as_format1(383), "its vectors have 383 dimensions, embed.model makes 384"),
    "format 1, row damaged": (
        lambda vec, keys: (_as_format1(DIM)(vec, keys), _flip_exponent(vec, keys)),
        "1 vectors fail their checksum or are not finite unit vectors",
    ),
}


@pytest.fixture(scope="module")
def good_cache(tmp_path_factory):
    """The question cache and question vectors of one sound run (embedded once for the module)."""
    from conftest import ROOT

    folder = tmp_path_factory.mktemp("good")
    shutil.copytree(ROOT / "stages", folder / "stages")
    shutil.copy(ROOT / "params.yaml", folder)
    _golden(folder)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(folder)
        from stages.embed_questions import main

        main([paths.DEFAULT])
    return folder


@pytest.mark.parametrize("case", list(CACHE_CASES))
def test_a_damaged_cache_shard_is_embedded_again_and_said_in_one_line(good_cache, tmp_path, case, monkeypatch, capsys):
    shutil.copytree(good_cache, tmp_path / "work")
    work = tmp_path / "work"
    good = np.load(work / paths.QUESTION_VECTORS)
    cache = work / paths.QUESTION_EMBEDDING_CACHE
    vec = next(cache.glob("*.vec"))
    damage, said = CACHE_CASES[case]
    damage(vec, vec.with_suffix(".keys"))
    result = stage_in_process("embed_questions", work, monkeypatch, capsys)
    assert result.returncode == 0, result.stderr
    warnings = [
        line
        for line in result.stderr.splitlines()
        if line.startswith("embedding cache:") and "format-1 shard" not in line
    ]
    assert "Traceback" not in result.stderr and "error:" not in result.stderr
    if said is None:
        assert warnings == []
    else:
        assert len(warnings) == 1 and said in warnings[0] and vec.name.removesuffix(".vec") in warnings[0], (
            result.stderr
        )
    np.testing.assert_allclose(np.load(work / paths.QUESTION_VECTORS), good, atol=1e-6)
    again = stage_in_process("embed_questions", work, monkeypatch, capsys)  # the repaired vectors are served now
    assert again.returncode == 0 and "3 from the cache, 0 embedded" in again.stdout


# --- non-finite or zero vectors read from outside: a store, or the embed stages' .npy files ---------


@pytest.mark.parametrize(
    "engine,value",
    [("sqlite-vec", np.nan), ("sqlite-vec", np.inf), ("sqlite-vec", 0.0), ("lancedb", np.inf), ("lancedb", 0.0)],
)  # LanceDB refuses to store a NaN
def test_a_bad_stored_vector_is_one_line_naming_the_store_and_chunk(embedding, engine, value, monkeypatch, capsys):
    ids, texts = [f"c{i}" for i in range(6)], [f"chunk {i} about pages" for i in range(6)]
    vectors = unit(np.random.default_rng(1).normal(size=(6, DIM)))
    vectors[4] = value
    location = embedding / ("store.db" if engine == "sqlite-vec" else "store.lancedb")
    source = f"{engine}:{location}?table=chunks"
    registry.create_collection(parse_address(source), ids, texts, [{} for _ in ids], vectors)
    pd.DataFrame({"chunk_id": ids, "text": texts}).to_parquet(embedding / paths.CHUNKS)
    (embedding / paths.CORPUS_VECTORS).write_bytes(SENTINEL)
    set_params(embedding, **{"load.source": source, "embed.corpus_vectors": "stored"})
    what = "is all zeros" if value == 0 else "is not finite"
    assert_one_line_error(
        stage_in_process("embed_corpus", embedding, monkeypatch, capsys),
        "embed.corpus_vectors stored: the vector of chunk 'c4' in ",
        str(location),
        what,
    )
    assert (embedding / paths.CORPUS_VECTORS).read_bytes() == SENTINEL


def _save(array):
    def write(path: Path) -> None:
        with open(path, "wb") as handle:
            np.save(handle, array)

    return write


def _nan_row(path: Path) -> None:
    rows = unit(np.random.default_rng(2).normal(size=(3, 8)))
    rows[1, 2] = np.nan
    _save(rows)(path)


NPY_CASES = {  # name -> (the file, how it is spoiled, a fragment of the line)
    "corpus truncated": (
        paths.CORPUS_VECTORS,
        lambda p: p.write_bytes(p.read_bytes()[:-20]),
        f"{paths.CORPUS_VECTORS}: not a readable .npy array (mmap length",
    ),
    "corpus empty": (
        paths.CORPUS_VECTORS,
        lambda p: p.write_bytes(b""),
        f"{paths.CORPUS_VECTORS}: not a readable .npy array (No data left in file)",
    ),
    "corpus header cut": (
        paths.CORPUS_VECTORS,
        lambda p: p.write_bytes(p.read_bytes()[:30]),
        f"{paths.CORPUS_VECTORS}: not a readable .npy array (EOF: reading array header",
    ),
    "corpus 1-D": (
        paths.CORPUS_VECTORS,
        _save(np.ones(4, np.float32)),
        f"{paths.CORPUS_VECTORS}: expected a 2-d float array, got shape (4,)",
    ),
    "corpus rows": (
        paths.CORPUS_VECTORS,
        _save(np.ones((3, 8), np.float32)),
        f"{paths.CORPUS_VECTORS}: a float32 array of shape (3, 8), expected",
    ),
    "corpus strings": (
        paths.CORPUS_VECTORS,
        _save(np.array([["a"] * 8] * 4)),
        "expected a 2-d float array, got shape (4, 8)",
    ),
    "corpus objects": (
        paths.CORPUS_VECTORS,
        _save(np.array([{"a": 1}] * 4, dtype=object)),
        f"{paths.CORPUS_VECTORS}: not a readable .npy array (Array can't be memory-mapped",
    ),
    "questions nan": (
        paths.QUESTION_VECTORS,
        _nan_row,
        f"{paths.QUESTION_VECTORS}: the vector of 'q1' (row 1) is not finite",
    ),
    "questions ids not json": (
        paths.QUESTION_IDS,
        lambda p: p.write_text("[q0"),
        f"{paths.QUESTION_IDS}: unreadable (",
    ),
}


@pytest.mark.parametrize("case", list(NPY_CASES))
def test_bad_saved_vectors_are_one_line_in_retrieve(embedding, case, monkeypatch, capsys):
    chunk_ids = [f"c{i}" for i in range(4)]
    pd.DataFrame({"chunk_id": chunk_ids, "text": [f"chunk {i}" for i in chunk_ids]}).to_parquet(
        embedding / paths.CHUNKS
    )
    for npy, ids_file, ids, rows in (
        (paths.CORPUS_VECTORS, paths.CORPUS_IDS, chunk_ids, 4),
        (paths.QUESTION_VECTORS, paths.QUESTION_IDS, ["q0", "q1", "q2"], 3),
    ):
        _save(unit(np.random.default_rng(rows).normal(size=(rows, 8))))(embedding / npy)
        (embedding / ids_file).write_text(json.dumps(ids))
    (embedding / paths.run_of(paths.DEFAULT)).parent.mkdir(parents=True, exist_ok=True)
    (embedding / paths.run_of(paths.DEFAULT)).write_bytes(SENTINEL)
    name, spoil, fragment = NPY_CASES[case]
    spoil(embedding / name)
    set_params(embedding, **{"retrieval.method": "dense", "retrieval.depth": 2, "score.k": [1, 2]})
    assert_one_line_error(
        stage_in_process("retrieve", embedding, monkeypatch, capsys), fragment, "rerun the embed stages"
    )
    assert (embedding / paths.run_of(paths.DEFAULT)).read_bytes() == SENTINEL


def test_a_folder_that_is_no_model_and_positions_beyond_the_model_are_one_line_naming_the_key(tmp_path, monkeypatch):
    """embed.model or rerank.model naming a folder without a model raised transformers' ValueError;
    max_seq_length beyond MiniLM's 512 positions failed mid-stage, on the first long chunk only."""
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding import model_source
    from retrieval_bench.embedding.backends import load_encoder
    from retrieval_bench.embedding.settings import EmbedSettings
    from retrieval_bench.retrieval.rerank import load_cross_encoder

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    empty = tmp_path / "not-a-model"
    empty.mkdir()
    (empty / "config.json").write_text("{}")
    settings = EmbedSettings.from_params(DEFAULTS["embed"], "embedders.e5.model")
    with pytest.raises(
        ec.InputError, match=r"^embedders\.e5\.model '.*not-a-model': not a model sentence-transformers can load"
    ):
        load_encoder(str(empty), "x", settings)
    with pytest.raises(InputError, match=r"^panel\.rr\.rerank\.model '.*not-a-model': not a cross-encoder"):
        load_cross_encoder(str(empty), "panel.rr.rerank.model")
    from transformers.utils import logging as transformers_logging

    # off while a model loads (its "Loading weights" bar wrote \r into logs), as it was after: it
    # also governs huggingface_hub's download bars
    assert transformers_logging.is_progress_bar_enabled()
    with model_source.loading("embed.model", "m"):
        assert not transformers_logging.is_progress_bar_enabled()
    assert transformers_logging.is_progress_bar_enabled()
    transformers_logging.disable_progress_bar()
    try:
        with model_source.loading("embed.model", "m"):
            pass
        assert not transformers_logging.is_progress_bar_enabled()  # off before: left off
    finally:
        transformers_logging.enable_progress_bar()
    model = model_source.resolve_model(DEFAULTS["embed"]["model"])
    long = EmbedSettings.from_params({**DEFAULTS["embed"], "max_seq_length": 2048}, "embedders.e5.model")
    with pytest.raises(InputError, match=r"^embed\.max_seq_length 2048 is beyond the model's 512 positions"):
        load_encoder(model, "x", long)


def test_an_embedders_own_setting_is_named_by_its_own_key(tmp_path):
    """An embedder keeping the base model but setting max_seq_length (or precision) of its own was
    told of `embed.max_seq_length`, which the user had not touched."""
    import yaml

    from retrieval_bench.core.errors import InputError
    from retrieval_bench.core.params import load_all_params
    from retrieval_bench.core.params_schema import DEFAULTS
    from retrieval_bench.embedding import model_source
    from retrieval_bench.embedding.backends import load_encoder
    from retrieval_bench.embedding.settings import EmbedSettings

    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["embedders"]["long"] = {"max_seq_length": 2048}
    params["embedders"]["half"] = {"precision": "fp16"}
    params["embed"]["device"] = "cpu"
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    checked = load_all_params(tmp_path / "params.yaml")
    long, half = (EmbedSettings.of_embedder(checked, name) for name in ("long", "half"))
    assert (long.key("max_seq_length"), long.key("precision"), long.model_key) == (
        "embedders.long.max_seq_length",
        "embed.precision",
        "embed.model",
    )
    model = model_source.resolve_model(DEFAULTS["embed"]["model"])
    with pytest.raises(InputError, match=r"^embedders\.long\.max_seq_length 2048 is beyond the model's 512 positions"):
        load_encoder(model, "x", long)
    with pytest.raises(InputError, match=r"^embedders\.half\.precision fp16 needs a GPU with embed\.backend torch"):
        load_encoder(model, "x", half)


def test_the_usable_positions_leave_out_a_padding_offset():
    """RoBERTa and MPNet (all-mpnet-base-v2) have 514 position rows but read 512 tokens (positions
    start after padding_idx 1): 514 passed the check and crashed on the first long chunk."""
    from transformers import BertConfig, BertModel, RobertaConfig, RobertaModel

    from retrieval_bench.embedding.backends import usable_positions

    small = dict(vocab_size=50, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8)
    roberta = RobertaModel(RobertaConfig(**small, max_position_embeddings=514, pad_token_id=1))
    bert = BertModel(BertConfig(**small, max_position_embeddings=512, pad_token_id=0))
    assert usable_positions(roberta) == 512 and usable_positions(bert) == 512 and usable_positions(object()) is None
