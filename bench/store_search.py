"""A vector store as the source and as the retriever, at 100,000 chunks: loading the chunks through
the real loader (time, peak RSS; against the same rows as a Parquet file), reusing the stored
vectors (read + the embed.model check) against embedding the chunks again, and the store's own
ANN search against exact search over the same vectors (time, recall@10 lost).

Synthetic data: texts of about 600 characters from a 5,000-word vocabulary, 25 chunks per document
with doc_id/start/end metadata; vectors from bench/dense_search.py's make_data (384-d, structured
like real embeddings; questions near a planted gold chunk). The 32 chunks the model check samples
get all-MiniLM-L6-v2's real vectors, so the check passes as on a real store. Re-embedding is timed
on --embed-sample chunks (torch, the default backend) and extrapolated linearly to all of them.
Every measurement runs in its own process, so its peak RSS is its own.

    .venv/bin/python bench/store_search.py --chunks 100000 --questions 1000 --engines lancedb,chroma
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import ChildFailed, add_child_arguments, failed_row, report_to_parent, run_child, run_main
from dense_search import make_data

CHUNKS_PER_DOCUMENT = 25
VOCABULARY = 5000
# The index each engine is built with, and the query settings each search row uses.
INDEX = {
    "lancedb": {"type": "IVF_PQ"},
    "chroma": None,
}  # LanceDB's default IVF_PQ; Chroma's default HNSW (M 16, ef 100)
SEARCHES = {"lancedb": [None, {"nprobes": 40, "refine_factor": 10}], "chroma": [None]}


def address(engine: str, workdir: Path) -> str:
    return {
        "lancedb": f"lancedb:{workdir}/store.lancedb?table=chunks",
        "chroma": f"chroma:{workdir}/chroma?collection=chunks",
    }[engine]


def make_chunks(n: int, seed: int = 0) -> pd.DataFrame:
    """chunk_id, doc_id, start, end, text: consecutive chunks of a document one character apart."""
    rng = np.random.default_rng(seed)
    words = np.array([f"w{rng.integers(36**3):x}{i % 97}" for i in range(VOCABULARY)])
    lengths = rng.integers(80, 110, size=n)
    picks = rng.integers(0, VOCABULARY, size=int(lengths.sum()))
    ends = np.cumsum(lengths)
    texts = [" ".join(words[picks[end - length : end]]) for end, length in zip(ends, lengths)]
    doc_ids = [f"doc{i // CHUNKS_PER_DOCUMENT:05d}.md" for i in range(n)]
    starts, position = [], 0
    for i, text in enumerate(texts):
        position = 0 if i % CHUNKS_PER_DOCUMENT == 0 else position
        starts.append(position)
        position += len(text) + 1
    frame = pd.DataFrame({"doc_id": doc_ids, "start": starts, "text": texts})
    frame["end"] = frame["start"] + frame["text"].str.len()
    frame.insert(0, "chunk_id", [f"{d}:{s}-{e}" for d, s, e in zip(frame["doc_id"], frame["start"], frame["end"])])
    return frame


def prepare(args, workdir: Path) -> list[str]:
    """Data files and the stores; returns lines describing the builds."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.core.store_address import parse_address
    from retrieval_bench.embedding.embed import QUIET, embed_texts
    from retrieval_bench.embedding.settings import EmbedSettings
    from retrieval_bench.embedding.stored_vectors import sample_rows
    from retrieval_bench.stores import registry

    chunks = make_chunks(args.chunks).sort_values(["doc_id", "start"], ignore_index=True)
    vectors, questions, gold = make_data(args.chunks, args.questions, 384)
    rows = sample_rows(chunks["chunk_id"].tolist())
    vectors[rows], _ = embed_texts(
        chunks["text"].iloc[rows].tolist(),
        EmbedSettings.from_params(DEFAULTS["embed"]),
        "",
        workdir / "cache",
        progress=QUIET,
    )
    chunks.to_parquet(workdir / "chunks.parquet", index=False)
    np.save(workdir / "vectors.npy", vectors)
    np.save(workdir / "questions.npy", questions)
    lines = []
    for engine in args.engines.split(","):
        start = time.perf_counter()
        registry.create_collection(
            parse_address(address(engine, workdir)),
            chunks["chunk_id"].tolist(),
            chunks["text"].tolist(),
            chunks[["doc_id", "start", "end"]].to_dict("records"),
            vectors,
            INDEX[engine],
        )
        size = sum(
            p.stat().st_size
            for p in (workdir / ("store.lancedb" if engine == "lancedb" else "chroma")).rglob("*")
            if p.is_file()
        )
        lines.append(
            f"{engine}: built in {time.perf_counter() - start:.0f} s with index {INDEX[engine] or 'default HNSW'}, {size / 2**20:.0f} MiB on disk"
        )
    return lines


def load(engine: str, workdir: Path, args) -> tuple[float, str]:
    """load_chunks' work: the store (or the Parquet file) -> chunks and documents frames -> Parquet."""
    from retrieval_bench.corpus.load import LoadSettings, load_corpus
    from retrieval_bench.corpus.store_source import load_store_corpus

    start = time.perf_counter()
    corpus = (
        load_corpus(workdir / "chunks.parquet", LoadSettings(id_field="chunk_id"))
        if engine == "parquet"
        else load_store_corpus(address(engine, workdir))
    )
    corpus.chunks.to_parquet(workdir / f"loaded-{engine}.parquet", index=False)
    corpus.documents.to_parquet(workdir / f"documents-{engine}.parquet", index=False)
    seconds = time.perf_counter() - start
    same = pd.read_parquet(workdir / f"loaded-{engine}.parquet").equals(
        pd.read_parquet(workdir / "chunks.parquet").pipe(_with_sha)
    )
    return (
        seconds,
        f"{len(corpus.chunks):,} chunks, {len(corpus.documents):,} documents; chunks equal the Parquet file's: {same}",
    )


def _with_sha(frame: pd.DataFrame) -> pd.DataFrame:
    from retrieval_bench.corpus.load import CHUNK_COLUMNS, sha256_text

    return frame.assign(text_sha256=[sha256_text(t) for t in frame["text"]])[CHUNK_COLUMNS]


def stored(engine: str, workdir: Path, args) -> tuple[float, str]:
    """embed_corpus with corpus_vectors stored: read every vector in chunk order, then the model check."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.core.store_address import parse_address
    from retrieval_bench.embedding.settings import EmbedSettings
    from retrieval_bench.embedding.stored_vectors import check_model, read_vectors

    chunks = pd.read_parquet(workdir / "chunks.parquet", columns=["chunk_id", "text"])
    start = time.perf_counter()
    vectors = read_vectors(parse_address(address(engine, workdir)), chunks["chunk_id"].tolist())
    read = time.perf_counter() - start
    # A fresh cache: the first run's cost (a later one finds the sample's vectors in the corpus cache).
    lowest = check_model(
        parse_address(address(engine, workdir)),
        vectors,
        chunks,
        EmbedSettings.from_params(DEFAULTS["embed"]),
        workdir / f"check-cache-{engine}",
    )
    seconds = time.perf_counter() - start
    same = float(np.abs(vectors - np.load(workdir / "vectors.npy")).max())
    return (
        seconds,
        f"read {read:.1f} s + model check {seconds - read:.1f} s (lowest cosine {lowest:.5f}); max |stored - written| {same:.1e}",
    )


def embed(engine: str, workdir: Path, args) -> tuple[float, str]:
    """embed_corpus with corpus_vectors embed, on a sample, extrapolated to every chunk: the model
    load once (a fixed cost, timed apart on a few chunks) plus the sample's seconds per chunk."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.embedding.embed import QUIET, embed_texts
    from retrieval_bench.embedding.settings import EmbedSettings

    texts = (
        pd.read_parquet(workdir / "chunks.parquet", columns=["text"])["text"]
        .sample(args.embed_sample, random_state=0)
        .tolist()
    )
    few = texts[: max(1, len(texts) // 16)]

    def timed(batch: list[str]) -> float:  # a fresh cache each time: every text embedded, the model loaded
        start = time.perf_counter()
        embed_texts(
            batch,
            EmbedSettings.from_params(DEFAULTS["embed"]),
            "",
            workdir / f"embed-cache-{time.time_ns()}",
            progress=QUIET,
        )
        return time.perf_counter() - start

    timed(few)  # untimed: the imports and the model's fingerprint are paid once per process, not per load
    small, whole = timed(few), timed(texts)
    if whole <= small or len(texts) <= len(few):
        raise SystemExit(
            f"error: embedding {len(texts)} chunks took {whole:.2f} s, no longer than {len(few)} took ({small:.2f} s): "
            "too few to tell the model load from the per-chunk time; raise --embed-sample"
        )
    per_chunk = (whole - small) / (len(texts) - len(few))
    load = max(small - per_chunk * len(few), 0.0)
    return (
        load + per_chunk * args.chunks,
        f"{len(texts):,} chunks embedded in {whole:.0f} s: {1 / per_chunk:.1f}/s after a model load of {load:.0f} s "
        f"(the load timed on {len(few)} chunks), x{args.chunks / len(texts):.0f}",
    )


def search(engine: str, workdir: Path, args) -> tuple[float, str]:
    """retrieval.method store against dense over the same (stored) vectors, depth args.depth."""
    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.core.store_address import parse_address
    from retrieval_bench.embedding.stored_vectors import read_vectors
    from retrieval_bench.retrieval import store_search
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.run_info import recall_against_exact
    from retrieval_bench.retrieval.settings import RetrievalSettings

    engine, _, query = engine.partition("+")
    chunk_ids = pd.read_parquet(workdir / "chunks.parquet", columns=["chunk_id"])["chunk_id"].tolist()
    vectors = np.load(workdir / "questions.npy")
    questions = Questions([f"q{i}" for i in range(len(vectors))], [""] * len(vectors), vectors)
    corpus = Corpus(chunk_ids, [""] * len(chunk_ids), read_vectors(parse_address(address(engine, workdir)), chunk_ids))
    settings = RetrievalSettings.from_params(
        {
            **DEFAULTS["retrieval"],
            "method": "store",
            "depth": args.depth,
            "store": {
                "address": address(engine, workdir),
                "search": json.loads(query) if query else None,
                "filter": None,
            },
        }
    )
    start = time.perf_counter()
    run = store_search.retrieve(questions, corpus, settings, args.depth)
    seconds = time.perf_counter() - start
    start = time.perf_counter()
    curve = recall_against_exact(questions, corpus, run, args.depth)  # exact dense top-k, then the recall
    exact = time.perf_counter() - start
    return seconds, (
        f"search {query or 'defaults'}: {len(vectors) / seconds:,.0f} q/s; exact (dense) {exact:.1f} s; "
        f"recall@10 {curve['10']:.4f} (lost {1 - curve['10']:.4f}), recall@{args.depth} {curve[str(args.depth)]:.4f}"
    )


def child(args) -> None:
    kind, _, engine = args.child.partition(":")
    seconds, note = globals()[kind](engine, Path(args.workdir), args)
    report_to_parent(seconds=seconds, note=note)


def main() -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--engines", default="lancedb,chroma")
    parser.add_argument("--embed-sample", type=int, default=2000, help="chunks re-embedding is timed on")
    add_child_arguments(parser)
    args = parser.parse_args()
    if args.child:
        return child(args)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    print(
        f"{args.chunks:,} chunks, {args.questions:,} questions, 384-d, depth {args.depth}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f} at the start\n"
    )
    with tempfile.TemporaryDirectory() as folder:
        workdir = Path(folder)
        for line in prepare(args, workdir):
            print(line)
        engines = args.engines.split(",")
        steps = (
            [("load", "parquet")]
            + [("load", e) for e in engines]
            + [("stored", e) for e in engines]
            + [("embed", "torch")]
        )
        steps += [("search", f"{e}+{json.dumps(q)}" if q else e) for e in engines for q in SEARCHES[e]]
        print("\n| step | source | time (s) | peak RSS (GiB) | notes |")
        print("|---|---|---:|---:|---|", flush=True)
        measured = 0
        for kind, engine in steps:
            try:
                report = run_child(__file__, f"{kind}:{engine}", "--workdir", folder, env={"HF_HUB_OFFLINE": "1"})
            except ChildFailed as failure:
                print(failed_row([kind, engine], failure, 5), flush=True)
                continue
            measured += 1
            print(
                f"| {kind} | {engine.split('+')[0]} | {report['seconds']:,.1f} | {report['peak_gib']:.2f} | {report['note']} |",
                flush=True,
            )
    return 0 if measured else 1  # every step failed: nothing was measured


if __name__ == "__main__":
    run_main(main)
