"""Peak memory of the retrieve stage at scale: a synthetic project state of --chunks chunks x --dim
dimensions (seeded random unit float32 vectors saved as embed_corpus saves them, embed.save_embeddings;
a chunk table with ~800-character texts, distinct per chunk; a golden set of --questions questions and
their vectors), laid out under a temporary folder with the paths retrieval_bench.core.paths names, then the
real `python -m stages.retrieve` (retrieval.method --method, depth --depth) run there as a child
process. Reported: the child's peak RSS (VmHWM, read by the child as it exits: it starts afresh at
exec, so it is the stage's own), the corpus vectors' size, the peak per chunk and the stage's wall
time, as one JSON line and one human line.

The vectors are read from a memory map: their pages count in the RSS once searched (the floor, as
the search reads every vector). The stage's own run and run_info (3 timed passes over 256
questions) are both in the peak.

    .venv/bin/python bench/retrieve_memory.py --chunks 400000 --dim 384 --questions 1000 --depth 100
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from common import ROOT, machine, run_main, thread_env

# Runs the stage as `python -m stages.retrieve` does (runpy), and writes the process's VmHWM and
# VmRSS (kB) to argv[1] as it exits, whatever the stage's exit status.
WRAPPER = """
import atexit, json, runpy, sys
report = sys.argv[1]
def write_peak():
    status = dict(line.split(':', 1) for line in open('/proc/self/status').read().splitlines() if ':' in line)
    with open(report, 'w') as handle:
        json.dump({key: int(status[key].split()[0]) for key in ('VmHWM', 'VmRSS')}, handle)
atexit.register(write_peak)
sys.argv = [sys.argv[0], 'default']  # the panel's default system (params.yaml names no panel)
runpy.run_module('stages.retrieve', run_name='__main__', alter_sys=True)
"""


def unit_vectors(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    out = np.empty((n, dim), dtype=np.float32)
    for start in range(0, n, 65_536):  # in blocks: no full-size float64 temporaries
        block = out[start : start + 65_536]
        block[:] = rng.standard_normal(block.shape, dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    return out


def chunk_texts(rng: np.random.Generator, n: int, chars: int) -> list[str]:
    """n distinct texts of about `chars` characters: windows of one long string of random words."""
    letters = np.frombuffer(b"abcdefghijklmnopqrstuvwxyz", dtype=np.uint8)
    vocabulary = ["".join(map(chr, rng.choice(letters, size=rng.integers(2, 11)))) for _ in range(5000)]
    words = rng.choice(len(vocabulary), size=4 * chars * 64 // 6)
    source = " ".join(vocabulary[i] for i in words)
    starts = rng.integers(0, len(source) - 2 * chars, size=n)
    lengths = rng.integers(chars * 3 // 4, chars * 5 // 4, size=n)
    return [
        f"chunk {i}: {source[s : s + length]}" for i, (s, length) in enumerate(zip(starts.tolist(), lengths.tolist()))
    ]


def build_project(folder: Path, args) -> int:
    """The retrieve stage's inputs under `folder`; returns the corpus vectors' size in bytes."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from retrieval_bench.core import paths
    from retrieval_bench.embedding.embed import save_embeddings

    rng = np.random.default_rng(args.seed)
    (folder / "params.yaml").write_text(
        f"retrieval: {{method: {args.method}, depth: {args.depth}}}\n", encoding="utf-8"
    )
    chunk_ids = [f"doc{i // 20:06d}.md:{(i % 20) * 700}-{(i % 20) * 700 + 800}" for i in range(args.chunks)]
    texts = chunk_texts(rng, args.chunks, 800)
    table = pa.table(
        {
            "chunk_id": chunk_ids,
            "doc_id": [chunk_id.split(":")[0] for chunk_id in chunk_ids],
            "start": [(i % 20) * 700 for i in range(args.chunks)],
            "end": [(i % 20) * 700 + 800 for i in range(args.chunks)],
            "text": texts,
            "text_sha256": [hashlib.sha256(text.encode()).hexdigest() for text in texts],
        }
    )
    chunks_path = folder / paths.chunks_of(paths.DEFAULT)
    chunks_path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, chunks_path)
    del table, texts

    vectors = unit_vectors(rng, args.chunks, args.dim)
    vectors_path, ids_path, _ = paths.corpus_vectors(paths.DEFAULT, paths.DEFAULT)
    for path in (vectors_path, ids_path):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
    save_embeddings(vectors, chunk_ids, folder / vectors_path, folder / ids_path)
    vector_bytes = int(vectors.nbytes)

    # Questions near their gold chunk (a chunk plus noise): ranks that look like a real run's.
    gold = rng.integers(0, args.chunks, size=args.questions)
    asked = vectors[gold] + 0.5 * unit_vectors(rng, args.questions, args.dim)
    asked /= np.linalg.norm(asked, axis=1, keepdims=True)
    del vectors
    qids = [f"q{i:06d}" for i in range(args.questions)]
    vectors_path, ids_path, _ = paths.question_vectors(paths.DEFAULT)
    for path in (vectors_path, ids_path):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
    save_embeddings(asked.astype(np.float32), qids, folder / vectors_path, folder / ids_path)
    with open(folder / paths.GOLDENSET, "w", encoding="utf-8") as handle:
        for qid, chunk in zip(qids, gold.tolist()):
            row = {
                "qid": qid,
                "question": f"What does chunk {chunk} say about its topic?",
                "gold_chunk_id": chunk_ids[chunk],
            }
            handle.write(json.dumps(row) + "\n")
    return vector_bytes


def run_stage(folder: Path, threads: int) -> dict:
    """The retrieve stage in `folder`: its peak and final RSS (kB), wall seconds and last line."""
    report = folder / "peak.json"
    env = {
        **os.environ,
        **thread_env(threads),
        "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "src")]),
        "TQDM_DISABLE": "1",
    }
    started = time.perf_counter()
    result = subprocess.run(
        [sys.executable, "-c", WRAPPER, str(report)], cwd=folder, env=env, capture_output=True, text=True
    )
    seconds = time.perf_counter() - started
    if result.returncode:
        sys.exit(f"retrieve_memory: the stage failed ({result.returncode}): {result.stderr[-2000:]}")
    return {
        **json.loads(report.read_text()),
        "seconds": seconds,
        "said": result.stdout.strip().splitlines()[-1],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=400_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--method", default="dense", help="retrieval.method (one that needs no model or index: dense)")
    parser.add_argument("--threads", type=int, default=1, help="threads of BLAS and FAISS in the stage")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    print(machine(args.threads), flush=True)
    with tempfile.TemporaryDirectory(prefix="retrieve_memory.") as scratch:
        folder = Path(scratch)
        started = time.perf_counter()
        vector_bytes = build_project(folder, args)
        built = time.perf_counter() - started
        stage = run_stage(folder, args.threads)
    mib = 2**20
    figures = {
        "chunks": args.chunks,
        "dim": args.dim,
        "questions": args.questions,
        "method": args.method,
        "depth": args.depth,
        "threads": args.threads,
        "vectors_mib": round(vector_bytes / mib, 1),
        "peak_rss_mib": round(stage["VmHWM"] / 1024, 1),
        "final_rss_mib": round(stage["VmRSS"] / 1024, 1),
        "peak_kib_per_chunk": round(stage["VmHWM"] / args.chunks, 2),
        "vector_kib_per_chunk": round(vector_bytes / 1024 / args.chunks, 2),
        "stage_seconds": round(stage["seconds"], 1),
        "build_seconds": round(built, 1),
        "load": round(os.getloadavg()[0], 2),
    }
    print(json.dumps(figures), flush=True)
    print(
        f"retrieve ({args.method}, depth {args.depth}) at {args.chunks:,} chunks x {args.dim}: peak RSS "
        f"{figures['peak_rss_mib']:,.0f} MiB ({figures['peak_kib_per_chunk']} KiB/chunk) for "
        f"{figures['vectors_mib']:,.0f} MiB of vectors ({figures['vector_kib_per_chunk']} KiB/chunk); "
        f"stage {figures['stage_seconds']} s ({stage['said']})",
        flush=True,
    )


if __name__ == "__main__":
    run_main(main)
