"""The embedding cache: durable append-only shards, torn tails ignored, keys that never mix
settings, prune; and a SIGKILL in the middle of the real embed_corpus stage loses only the batch
in flight."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import ROOT, tool_env

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.embedding import embedding_cache as ec
from retrieval_bench.embedding.embed import EmbedProgress, embedding_space, load_model
from retrieval_bench.embedding.settings import EmbedSettings

N_KILL = 160  # chunks embedded in batches of 4 by the stage that is killed


def keys(n: int, salt: str = "") -> list[bytes]:
    return ec.text_keys(ec.space_digest({"salt": salt}), [f"text {i}" for i in range(n)])


def vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, dim)).astype(np.float32)


def test_vectors_round_trip_and_old_shards_are_never_rewritten(tmp_path):
    folder = tmp_path / "cache"
    first, second = vectors(5), vectors(3, seed=1)
    with ec.EmbeddingCache(folder) as cache:
        assert cache.get(keys(5)) == {}
        cache.put(keys(5)[:2], first[:2])
        cache.put(keys(5)[2:], first[2:])
    shard_bytes = {p.name: p.read_bytes() for p in folder.iterdir()}
    assert sorted(p.suffix for p in folder.iterdir()) == [".keys", ".vec"]  # one shard per run, not per vector
    with ec.EmbeddingCache(folder) as cache:
        found = cache.get(keys(5) + keys(3, "other"))
        assert set(found) == set(keys(5))
        np.testing.assert_array_equal(np.stack([found[k] for k in keys(5)]), first)
        cache.put(keys(3, "other"), second)
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.name in shard_bytes} == shard_bytes
    with ec.EmbeddingCache(folder) as cache:
        assert len(cache.get(keys(5) + keys(3, "other"))) == 8
        np.testing.assert_array_equal(np.stack([cache.get([k])[k] for k in keys(3, "other")]), second)


def test_the_same_runs_write_the_same_files_so_dvc_lock_stays_put(tmp_path):
    """Shard names come from a sequence number and the first key, never a clock or random bits:
    two folders filled by the same runs are byte-identical, names included (a fresh clone's
    `dvc repro` then leaves dvc.lock as committed); the order of names is still the order of age."""

    def fill(folder: Path) -> dict[str, bytes]:
        for salt in ("a", "b", "c"):
            with ec.EmbeddingCache(folder) as cache:
                cache.put(keys(4, salt), vectors(4, seed=len(salt)))
        return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in {".keys", ".vec"}}

    first, second = fill(tmp_path / "one"), fill(tmp_path / "two")
    assert first == second and len(first) == 6
    stems = sorted({Path(name).stem for name in first})
    assert [stem.split("-")[1] for stem in stems] == [keys(4, salt)[0].hex()[:8] for salt in ("a", "b", "c")]
    assert [shard.name for shard in ec.read_shards(tmp_path / "one")] == stems  # oldest first


def test_a_torn_tail_is_ignored_and_a_foreign_shard_skipped(tmp_path, capsys):
    folder = tmp_path / "cache"
    data = vectors(6)
    with ec.EmbeddingCache(folder) as cache:
        cache.put(keys(6)[:4], data[:4])
        cache.put(keys(6)[4:], data[4:])
    keys_file = next(folder.glob("*.keys"))
    vec_file = keys_file.with_suffix(".vec")
    with open(keys_file, "r+b") as handle:  # the last key half-written
        handle.truncate(5 * ec.RECORD_BYTES[ec.VERSION] + 7)
    with open(vec_file, "ab") as handle:  # rows written, their keys never were
        handle.write(vectors(2, seed=9).tobytes())
    (folder / "junk.keys").write_bytes(b"\0" * 64)
    (folder / "junk.vec").write_bytes(b"not a shard")
    with ec.EmbeddingCache(folder) as cache:
        found = cache.get(keys(6))
    assert set(found) == set(keys(6)[:5])
    np.testing.assert_array_equal(np.stack([found[k] for k in keys(6)[:5]]), data[:5])
    assert f"ignoring {folder / 'junk.keys'}" in capsys.readouterr().err  # its folder too: names repeat across them
    # a shard killed before its first batch reached the disk: both files empty, nothing lost, nothing said
    (folder / "junk.keys").unlink()
    (folder / "junk.vec").unlink()
    (folder / "00000000000000000009-cafe.keys").write_bytes(b"")
    (folder / "00000000000000000009-cafe.vec").write_bytes(b"")
    with ec.EmbeddingCache(folder) as cache:
        assert set(cache.get(keys(6))) == set(keys(6)[:5])
    assert capsys.readouterr().err == ""


def test_every_setting_that_decides_a_vector_is_in_its_key():
    settings = EmbedSettings.from_params(DEFAULTS["embed"])
    base = embedding_space("sha256:model-a", settings, "")
    variants = [
        embedding_space("sha256:model-b", settings, ""),
        embedding_space("sha256:model-a", settings, "query: "),
        embedding_space("sha256:model-a", dataclasses.replace(settings, max_seq_length=128), ""),
        embedding_space("sha256:model-a", dataclasses.replace(settings, precision="bf16"), ""),
        embedding_space("sha256:model-a", dataclasses.replace(settings, backend="onnx"), ""),
        embedding_space("sha256:model-a", dataclasses.replace(settings, backend="onnx", quantize="int8"), ""),
    ]
    digests = {ec.space_digest(space) for space in [base, *variants]}
    assert len(digests) == 1 + len(variants)
    texts = ["same text"]
    assert len({ec.text_keys(d, texts)[0] for d in digests}) == len(digests)
    # batch_size and device decide nothing: the same key
    same = embedding_space("sha256:model-a", dataclasses.replace(settings, batch_size=3, device="cpu"), "")
    assert ec.space_digest(same) == ec.space_digest(base)


def test_prune_keeps_what_is_needed_in_one_shard(tmp_path):
    folder = tmp_path / "cache"
    data = vectors(10)
    for start in (0, 4, 7):  # three runs, three shards
        with ec.EmbeddingCache(folder) as cache:
            cache.put(keys(10)[start : start + 3 if start < 7 else 10], data[start : start + 3 if start < 7 else 10])
    keep = set(keys(10)[::2])
    dry = ec.prune(folder, keep, dry_run=True)
    assert (dry.kept, dry.dropped) == (5, 4) and len(list(folder.glob("*.keys"))) == 3  # text 3 was never cached
    report = ec.prune(folder, keep)
    assert (report.kept, report.dropped) == (5, 4) and report.bytes_after < report.bytes_before
    assert len(list(folder.glob("*.keys"))) == 1 and len(list(folder.glob("*.vec"))) == 1
    with ec.EmbeddingCache(folder) as cache:
        found = cache.get(keys(10))
    assert set(found) == keep
    for i in (0, 2, 4, 6, 8):
        np.testing.assert_array_equal(found[keys(10)[i]], data[i])


def test_prune_reads_each_kept_row_once(tmp_path, monkeypatch):
    """Rows are read (and checksummed) once, as they are written, not once to choose and again to copy."""
    folder = tmp_path / "cache"
    for start in (0, 4):  # two runs, two shards: a rewrite
        with ec.EmbeddingCache(folder) as cache:
            cache.put(keys(8)[start : start + 4], vectors(8)[start : start + 4])
    read, rows = [], ec.Shard.rows
    monkeypatch.setattr(ec.Shard, "rows", lambda shard, indices: read.extend(indices) or rows(shard, indices))
    report = ec.prune(folder, set(keys(8)[1:]))
    assert (report.kept, report.rewritten) == (7, True) and len(read) == 7


def test_a_prune_that_only_merges_shards_says_it_rewrote_the_cache(tmp_path):
    folder = tmp_path / "cache"
    data = vectors(6)
    for start in (0, 3):  # two runs, two shards, every vector still needed
        with ec.EmbeddingCache(folder) as cache:
            cache.put(keys(6)[start : start + 3], data[start : start + 3])
    report = ec.prune(folder, set(keys(6)))
    assert (report.kept, report.dropped, report.rewritten) == (6, 0, True) and len(list(folder.glob("*.keys"))) == 1
    assert "dropped 0, in one shard" in report.line()
    again = ec.prune(folder, set(keys(6)))  # one shard, nothing to drop: left alone
    assert (again.dropped, again.rewritten) == (0, False) and "unchanged" in again.line()
    assert not ec.prune(folder, set(keys(6)), dry_run=True).rewritten


def test_the_prune_command_merges_shards_and_names_the_old_location_to_delete(tmp_path, monkeypatch, capsys):
    """`retrieval-bench cache prune` on caches (under .dvc/tmp, no DVC outputs) that hold only needed
    vectors, in two shards each: nothing dropped, one shard each; a 0.2.0 cache folder left in data/
    is named, to be deleted."""
    from retrieval_bench.core import paths
    from retrieval_bench.embedding.cache_prune import run_prune
    from retrieval_bench.embedding.embed import cache_keys
    from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = EmbedSettings.from_params(DEFAULTS["embed"])
    chunks, questions = ["chunk one", "chunk two"], ["question one?", "question two?"]
    Path(paths.CHUNKS).parent.mkdir(parents=True)
    pd.DataFrame({"chunk_id": ["c1", "c2"], "text": chunks}).to_parquet(paths.CHUNKS)
    Path(paths.GOLDENSET).write_text(
        "".join(json.dumps({"qid": f"q{i}", "question": q}) + "\n" for i, q in enumerate(questions))
    )
    for folder, texts, prompt in (
        (paths.CORPUS_EMBEDDING_CACHE, chunks, settings.document_prompt),
        (paths.QUESTION_EMBEDDING_CACHE, questions, settings.query_prompt),
    ):
        for i, key in enumerate(
            cache_keys(texts, settings, prompt, model_fingerprint(resolve_model(settings.model)))
        ):  # one run per text: two shards
            with ec.EmbeddingCache(ec.in_project(folder)) as cache:
                cache.put([key], vectors(1, dim=384, seed=i))  # the model's dimension: prune checks it
    params = tmp_path / "params.yaml"
    params.write_text(yaml.safe_dump({"embed": {}}))
    args = type("Args", (), {"params": str(params), "dry_run": False})()
    from retrieval_bench.embedding import cache_prune, embed

    resolved = []
    for module in (cache_prune, embed):  # wherever the command resolves the model: once
        monkeypatch.setattr(module, "resolve_model", lambda model, *a: resolved.append(model) or resolve_model(model))
    assert run_prune(args) == 0
    assert resolved == [settings.model]
    lines = capsys.readouterr().out.splitlines()
    assert [line.split(":")[0] for line in lines[:2]] == [paths.CORPUS_EMBEDDING_CACHE, paths.QUESTION_EMBEDDING_CACHE]
    assert len(lines) == 2 and all("kept 2 vectors, dropped 0, in one shard" in line for line in lines)
    Path(paths.LEGACY_EMBEDDING_CACHES[0]).mkdir(parents=True)
    Path(paths.LEGACY_EMBEDDING_CACHES[0], ".gitignore").write_text("/corpus\n")  # as every clone has it
    run_prune(args)
    assert len(capsys.readouterr().out.splitlines()) == 2  # no 0.2.0 cache to delete
    Path(paths.LEGACY_EMBEDDING_CACHES[0], "corpus").mkdir()
    run_prune(args)  # one shard each now, nothing to drop: unchanged
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 3 and all("unchanged" in line for line in lines[:2])
    assert lines[2].startswith(f"{paths.LEGACY_EMBEDDING_CACHES[0]}: the embedding caches' 0.2.0 location")
    # A golden-set row without its question: one line naming it, before any cache is touched (it
    # was a KeyError once the corpus caches had been pruned).
    with open(paths.GOLDENSET, "a") as golden:
        golden.write(json.dumps({"qid": "x"}) + "\n")
    with pytest.raises(InputError, match=rf"^{paths.GOLDENSET}:3: no question; expected a golden set"):
        run_prune(args)
    assert capsys.readouterr().out == ""


def test_prune_waits_for_the_runs_using_the_cache_and_says_so(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    with ec.EmbeddingCache(folder) as cache:
        cache.put(keys(2), vectors(2))
    monkeypatch.setenv("RETRIEVAL_BENCH_LOCK_WAIT", "0")
    with ec.EmbeddingCache(folder):
        with pytest.raises(
            InputError,
            match=rf"another process is using the embedding cache {re.escape(str(folder))} .*and holds its lock .*not waiting",
        ):
            ec.prune(folder, set())
    assert ec.prune(folder, set()).dropped == 2


def _cache_entries(folder: Path) -> int:
    return sum(len(shard.keys) for shard in ec.read_shards(folder)) if folder.is_dir() else 0


def _embedded(output: str) -> tuple[int, int]:
    cached, embedded = re.search(r"(\d+) from the cache, (\d+) embedded", output).groups()
    return int(cached), int(embedded)


# The embed stage, with its third batch held in flight (computed, not yet in the cache) until the
# test kills it: the kill lands there on any machine, whatever its load (no race with a poll).
HOLD_THIRD_BATCH = """
import runpy, sys, time
from pathlib import Path
from retrieval_bench.embedding import embedding_cache

holding, put, puts = Path(sys.argv[1]), embedding_cache.EmbeddingCache.put, []

def put_or_hold(self, keys, vectors):
    puts.append(len(keys))
    if len(puts) == 3:
        holding.touch()
        while True:
            time.sleep(60)
    put(self, keys, vectors)

embedding_cache.EmbeddingCache.put = put_or_hold
sys.argv = ["stages.embed_corpus", "default", "default"]  # the default chunking and embedder
runpy.run_module("stages.embed_corpus", run_name="__main__", alter_sys=True)
"""


@pytest.mark.pipeline
def test_sigkill_mid_embed_loses_only_the_batch_in_flight(tmp_path):
    work = tmp_path / "work"
    (work / paths.CHUNKS).parent.mkdir(parents=True)
    params = yaml.safe_load((ROOT / "params.yaml").read_text())
    params["embed"]["batch_size"] = 4
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    texts = [f"Chunk {i}: the write-ahead log keeps page {i} until a checkpoint copies it back." for i in range(N_KILL)]
    pd.DataFrame({"chunk_id": [f"c{i}" for i in range(N_KILL)], "text": texts}).to_parquet(work / paths.CHUNKS)
    cache = work / paths.CORPUS_EMBEDDING_CACHE
    env = {**tool_env(), "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}  # this checkout's code
    holding = tmp_path / "third-batch-in-flight"
    process = subprocess.Popen(
        [sys.executable, "-c", HOLD_THIRD_BATCH, str(holding)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not holding.exists():
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert _cache_entries(cache) == 8  # the two batches written are kept, the one in flight is lost
    assert not (work / paths.CORPUS_VECTORS).exists()  # no half-written output

    command = [sys.executable, "-m", "stages.embed_corpus", paths.DEFAULT, paths.DEFAULT]
    rerun = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, check=True)
    assert _embedded(rerun.stdout) == (8, N_KILL - 8)
    assert json.loads((work / paths.CORPUS_IDS).read_text()) == [f"c{i}" for i in range(N_KILL)]
    plain = load_model(params["embed"]["model"]).encode(texts, batch_size=32, normalize_embeddings=True)
    np.testing.assert_allclose(np.load(work / paths.CORPUS_VECTORS), plain, atol=1e-6)


def unit_vectors(n: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    rows = vectors(n, dim, seed)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def write_format1_shard(folder: Path, shard_keys: list[bytes], rows: np.ndarray, dim: int | None = None) -> Path:
    """A shard as format 1 wrote it (before checksums): no header CRC, 32-byte key records."""
    folder.mkdir(parents=True, exist_ok=True)
    header = json.dumps({"format": ec.FORMAT, "version": 1, "dtype": "<f4", "dim": dim or rows.shape[1]}).encode()
    vec = folder / "00000000000000000001-legacy.vec"
    vec.write_bytes(header + b" " * (ec.HEADER_BYTES - 1 - len(header)) + b"\n" + rows.astype("<f4").tobytes())
    vec.with_suffix(".keys").write_bytes(b"".join(shard_keys))
    return vec


def damage_row(vec: Path, row: int, dim: int, value: float | None = None, flip_exponent: bool = False) -> None:
    data = bytearray(vec.read_bytes())
    at = ec.HEADER_BYTES + row * dim * 4
    if flip_exponent:  # the top exponent bit of the first float: 0.3 becomes ~1e38
        data[at + 3] ^= 0x40
    else:
        data[at : at + dim * 4] = np.full(dim, value, dtype="<f4").tobytes()
    vec.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["flipped exponent bit", "nan", "zeros", "inf"])
def test_a_damaged_row_is_never_served_and_said_once_naming_the_shard(tmp_path, capsys, damage):
    folder = tmp_path / "cache"
    data = unit_vectors(4)
    with ec.EmbeddingCache(folder, dim=8) as cache:
        cache.put(keys(4), data)
    vec = next(folder.glob("*.vec"))
    value = {"nan": np.nan, "zeros": 0.0, "inf": np.inf}.get(damage)
    damage_row(vec, 1, 8, value, flip_exponent=damage == "flipped exponent bit")
    capsys.readouterr()
    with ec.EmbeddingCache(folder, dim=8) as cache:
        found = cache.get(keys(4))
        assert set(found) == {keys(4)[i] for i in (0, 2, 3)}
        cache.put([keys(4)[1]], data[1:2])  # what embed_texts does: embed it again, into the run's new shard
    lines = capsys.readouterr().err.splitlines()
    assert lines == [
        f"embedding cache: {vec}: 1 vectors fail their checksum or are not finite vectors (a damaged shard); embedding them again"
    ]
    with ec.EmbeddingCache(folder, dim=8) as cache:  # the newest copy wins: nothing damaged is read again
        found = cache.get(keys(4))
    np.testing.assert_array_equal(np.stack([found[k] for k in keys(4)]), data)
    assert capsys.readouterr().err == ""
    report = ec.prune(folder, set(keys(4)), dim=8)  # prune keeps the sound copy, never the damaged one
    assert (report.kept, report.dropped) == (4, 1)
    with ec.EmbeddingCache(folder, dim=8) as cache:
        np.testing.assert_array_equal(np.stack([cache.get([k])[k] for k in keys(4)]), data)


def test_a_header_whose_dimension_was_edited_is_ignored(tmp_path, capsys):
    folder = tmp_path / "cache"
    with ec.EmbeddingCache(folder, dim=8) as cache:
        cache.put(keys(9), unit_vectors(9))
    vec = next(folder.glob("*.vec"))
    vec.write_bytes(vec.read_bytes().replace(b'"dim": 8', b'"dim": 7'))
    capsys.readouterr()
    with ec.EmbeddingCache(folder) as cache:  # even without the model's dimension: the header's CRC fails
        assert cache.get(keys(9)) == {}
    assert f"ignoring {vec.with_suffix('.keys')} (its .vec header fails its checksum)" in capsys.readouterr().err


def test_format1_shards_are_served_checked_by_value_and_prune_adds_checksums(tmp_path, capsys):
    folder = tmp_path / "cache"
    data = unit_vectors(5)
    vec = write_format1_shard(folder, keys(5), data)
    damage_row(vec, 3, 8, flip_exponent=True)
    with ec.EmbeddingCache(folder, dim=8) as cache:
        found = cache.get(keys(5))
    assert set(found) == {keys(5)[i] for i in (0, 1, 2, 4)}
    err = capsys.readouterr().err
    assert (
        "is a format-1 shard, without checksums" in err
        and "1 vectors fail their checksum or are not finite unit vectors" in err
    )
    with ec.EmbeddingCache(folder, dim=7) as cache:  # another dimension than the model's: ignored
        assert cache.get(keys(5)) == {}
    assert "its vectors have 8 dimensions, embed.model makes 7" in capsys.readouterr().err  # format 1: said
    report = ec.prune(folder, set(keys(5)), dim=8)
    assert report.rewritten and (report.kept, report.dropped) == (4, 1)
    assert not vec.exists() and all(shard.sums is not None for shard in ec.read_shards(folder))
    with ec.EmbeddingCache(folder, dim=8) as cache:
        found = cache.get(keys(5))
    np.testing.assert_array_equal(np.stack([found[keys(5)[i]] for i in (0, 1, 2, 4)]), data[[0, 1, 2, 4]])


@pytest.mark.parametrize("value", [np.nan, np.inf, 0.0])
def test_a_non_finite_or_zero_vector_is_never_cached(tmp_path, value):
    data = unit_vectors(3)
    data[2] = value
    with ec.EmbeddingCache(tmp_path / "cache") as cache:
        with pytest.raises(
            InputError,
            match="the encoder returned 1 vectors of 3 that are not finite or all zeros; they were not cached",
        ):
            cache.put(keys(3), data)
    assert ec.read_shards(tmp_path / "cache") == []


def test_a_batch_of_another_dimension_than_the_caches_is_never_cached(tmp_path):
    """The cache knows the model's dimension: even its first batch is checked against it."""
    with ec.EmbeddingCache(tmp_path / "cache", dim=8) as cache:
        with pytest.raises(
            InputError, match="the encoder returned 4-dimensional vectors, the model's are 8-dimensional; nothing"
        ):
            cache.put(keys(3), unit_vectors(3, dim=4))
    assert ec.read_shards(tmp_path / "cache") == []


def test_a_damaged_cached_vector_is_embedded_again_by_embed_texts(tmp_path, capsys):
    from retrieval_bench.embedding.embed import embed_texts

    texts = ["the write-ahead log", "a checkpoint copies pages back", "readers and writers"]
    settings = EmbedSettings.from_params({**DEFAULTS["embed"], "batch_size": 2})
    fresh, _ = embed_texts(texts, settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False))
    vec = next((tmp_path / "cache").glob("*.vec"))
    damage_row(vec, 1, 384, flip_exponent=True)
    again, stats = embed_texts(texts, settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False))
    assert (stats.cached, stats.embedded) == (2, 1) and np.isfinite(again).all()
    np.testing.assert_allclose(again, fresh, atol=1e-6)
    assert f"{vec}: 1 vectors fail their checksum" in capsys.readouterr().err
    _, stats = embed_texts(texts, settings, "", tmp_path / "cache", progress=EmbedProgress(bar=False))
    assert (stats.cached, stats.embedded) == (3, 0)


EMBED_CHILD = """
import sys, time
from pathlib import Path
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.embedding import embedding_cache
from retrieval_bench.embedding.embed import EmbedProgress, embed_texts
from retrieval_bench.embedding.settings import EmbedSettings

folder, signals, pause = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3] == "pause"
put = embedding_cache.EmbeddingCache.put

def put_then_wait(self, keys, vectors):  # the first batch is in the cache: say so, then wait for "go"
    put(self, keys, vectors)
    if pause and not (signals / "started").exists():
        (signals / "started").touch()
        while not (signals / "go").exists():
            time.sleep(0.02)

embedding_cache.EmbeddingCache.put = put_then_wait
texts = [f"Chunk {i}: the write-ahead log keeps page {i} until a checkpoint." for i in range(24)]
settings = EmbedSettings.from_params({**DEFAULTS["embed"], "batch_size": 4})
_, stats = embed_texts(texts, settings, "", folder, progress=EmbedProgress(bar=False))
print(stats.line("chunk"))
"""


def test_a_second_run_on_the_same_cache_waits_and_embeds_nothing_twice(tmp_path):
    """Two processes embed the same texts into one cache: the second waits for the first (its
    wait line is the signal, not a timer) and then embeds only what is missing: rows == keys."""
    script, folder, signals = tmp_path / "child.py", tmp_path / "cache", tmp_path / "signals"
    script.write_text(EMBED_CHILD)
    signals.mkdir()
    env = {**tool_env(), "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    first = subprocess.Popen(
        [sys.executable, str(script), str(folder), str(signals), "pause"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    while not (signals / "started").exists():
        assert first.poll() is None, first.communicate()
        time.sleep(0.02)
    log = tmp_path / "second.err"
    with open(log, "w") as err:
        second = subprocess.Popen(
            [sys.executable, str(script), str(folder), str(signals), "run"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        while "waiting for it to finish" not in log.read_text() and second.poll() is None:
            time.sleep(0.02)
    (signals / "go").touch()
    first_out, first_err = first.communicate()
    second_out, _ = second.communicate()
    assert first.returncode == 0 and second.returncode == 0, first_err + log.read_text()
    assert "another process is using the embedding cache" in log.read_text()
    assert _embedded(first_out) == (0, 24) and _embedded(second_out) == (24, 0)
    assert _cache_entries(folder) == 24  # one row per key


def test_cache_folders_lie_under_the_dvc_project_for_an_experiment_in_a_temporary_copy_too(tmp_path, monkeypatch):
    """DVC_ROOT (the project, whichever copy DVC runs the stage in) places a relative folder; outside
    DVC the working directory does; an absolute folder stays where it is."""
    copy = tmp_path / "copy"
    copy.mkdir()
    monkeypatch.chdir(copy)
    monkeypatch.delenv("DVC_ROOT", raising=False)
    assert ec.in_project(paths.CORPUS_EMBEDDING_CACHE).resolve() == copy / paths.CORPUS_EMBEDDING_CACHE
    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "project"))
    assert ec.in_project(paths.CORPUS_EMBEDDING_CACHE) == tmp_path / "project" / paths.CORPUS_EMBEDDING_CACHE
    assert ec.in_project(tmp_path / "elsewhere") == tmp_path / "elsewhere"


@pytest.mark.parametrize("old", range(len(paths.LEGACY_EMBEDDING_CACHES)))
def test_an_upgrade_copies_the_vectors_of_the_0_2_0_location_in_and_embeds_nothing(old, tmp_path, monkeypatch):
    """Up to 0.2.0 the caches were DVC outputs in data/embedding_cache (mirrored under
    .dvc/tmp/retrieval-bench/data): the first run after an upgrade serves their vectors, byte for
    byte, without loading an encoder, and copies them into the new cache, which serves them alone
    afterwards."""
    from retrieval_bench.embedding import embed
    from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model

    project = tmp_path / "project"
    monkeypatch.setenv("DVC_ROOT", str(project))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)  # the stage runs in a temporary copy: the folders are the project's
    settings = EmbedSettings.from_params(DEFAULTS["embed"])
    texts = [f"chunk {i}" for i in range(6)]
    fingerprint = model_fingerprint(resolve_model(settings.model))
    rows = vectors(6, dim=384, seed=old)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    legacy = paths.legacy_caches(paths.CORPUS_EMBEDDING_CACHE)
    with ec.EmbeddingCache(project / legacy[old]) as cache:
        cache.put(embed.cache_keys(texts, settings, settings.document_prompt, fingerprint), rows)

    def no_encoder(*args, **kwargs):
        raise AssertionError("an encoder was loaded: the old location's vectors were embedded again")

    monkeypatch.setattr(embed, "load_encoder", no_encoder)
    for sources, shared in ((legacy, 6), ((), 0)):  # the upgrade's first run, then the new cache alone
        found, stats = embed.embed_texts(
            texts, settings, settings.document_prompt, paths.CORPUS_EMBEDDING_CACHE, shared_caches=sources
        )
        np.testing.assert_array_equal(found, rows)
        assert (stats.cached, stats.shared, stats.embedded) == (6, shared, 0)
    assert _cache_entries(project / paths.CORPUS_EMBEDDING_CACHE) == 6


def test_prune_covers_every_pair_params_embeds_and_drops_the_caches_of_pairs_it_no_longer_does(
    tmp_path, monkeypatch, capsys
):
    """It pruned the default chunking's and embedder's caches alone: the other pairs' (4 of the
    sample's 6, 9.4 of 11.6 MB) were never pruned, nor those of pairs params.yaml dropped."""
    from retrieval_bench.core import paths
    from retrieval_bench.embedding.cache_prune import run_prune
    from retrieval_bench.embedding.embed import cache_keys
    from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    settings = EmbedSettings.from_params(DEFAULTS["embed"])
    fingerprint = model_fingerprint(resolve_model(settings.model))
    texts = {"default": ["chunk one", "chunk two"], "c400": ["chunk", "one", "two"]}
    for chunking, chunks in texts.items():
        Path(paths.chunks_of(chunking)).parent.mkdir(parents=True)
        pd.DataFrame({"chunk_id": [f"c{i}" for i in range(len(chunks))], "text": chunks}).to_parquet(
            paths.chunks_of(chunking)
        )
        with ec.EmbeddingCache(ec.in_project(paths.corpus_vectors(chunking, "default")[2])) as cache:
            needed = cache_keys(chunks, settings, settings.document_prompt, fingerprint)
            stale = cache_keys(["edited away"], settings, settings.document_prompt, fingerprint)
            cache.put([*needed, *stale], vectors(len(needed) + 1, dim=384))
    with ec.EmbeddingCache(ec.in_project(paths.corpus_vectors("c200", "default")[2])) as cache:
        cache.put(keys(3), vectors(3, dim=384))  # a chunking params.yaml has dropped
    Path(paths.GOLDENSET).write_text(json.dumps({"qid": "q0", "question": "question?"}) + "\n")
    panel = {
        "default": {"chunking": "default", "embedder": "default"},
        "small": {"chunking": "c400", "embedder": "default"},
    }
    (tmp_path / "params.yaml").write_text(
        yaml.safe_dump({"chunkings": {"default": {}, "c400": {"chars": 400, "overlap": 50}}, "panel": panel})
    )
    run_prune(type("Args", (), {"params": "params.yaml", "dry_run": True})())
    lines = capsys.readouterr().out.splitlines()
    said = {line.split(":")[0]: line for line in lines}
    assert "would keep 2 vectors and drop 1" in said[paths.corpus_vectors("default", "default")[2]]
    assert "would keep 3 vectors and drop 1" in said[paths.corpus_vectors("c400", "default")[2]]
    dropped = said[paths.corpus_vectors("c200", "default")[2]]
    assert "would keep 0 vectors and drop 3" in dropped and dropped.endswith("(params.yaml embeds no such pair)")


def test_another_models_shard_is_kept_without_a_warning(tmp_path, capsys):
    """Switching embed.model to mpnet and back said "ignoring 00...03-33e7f3d3.keys (its vectors have
    384 dimensions, embed.model makes 768); its vectors are embedded again" each way: a damage
    warning, for vectors kept and served again on the way back (and without the shard's folder)."""
    folder = tmp_path / "cache"
    with ec.EmbeddingCache(folder, dim=8) as cache:
        cache.put(keys(3), vectors(3))
    with ec.EmbeddingCache(folder, dim=16) as cache:  # the other model
        assert cache.get(keys(3)) == {}
    assert capsys.readouterr().err == ""
    with ec.EmbeddingCache(folder, dim=8) as cache:  # and back: served
        assert len(cache.get(keys(3))) == 3
