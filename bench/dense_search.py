"""Exact dense top-k at scale, side by side: the project's dense search (retrieval.flat.top_k: FAISS's
flat kernels, always on BLAS, equal scores by chunk index, whole rows where FAISS's cut splits a tie),
numpy's bare matrix products (`gemm`: the floor), FAISS IndexFlatIP called directly, the seed's
per-question argsort loop (timed on a subset, extrapolated linearly), and FAISS HNSW (build, search,
recall@10 against exact). Every engine runs on --threads threads (BLAS, OpenMP, FAISS), in
interleaved rounds (each method once per round); the table gives each one's median.

Synthetic data (make_data): seeded unit vectors with a low-dimensional structure, as real
embeddings have; each question is its gold chunk plus a random chunk-like vector of random weight,
so gold ranks spread from 1 to thousands. Each method
runs in its own process (same seed, same data) so its peak RSS is its own; the time excludes
making the data.

    .venv/bin/python bench/dense_search.py --chunks 1000000 --questions 2000 --methods dense,gemm,faiss-flat --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from common import (
    add_side_by_side_arguments,
    interleaved_children,
    machine,
    median,
    methods_of,
    pin_threads,
    report_to_parent,
    run_main,
    thread_env,
)

METHODS = ["dense", "gemm", "faiss-flat", "argsort-loop", "hnsw"]


def make_data(n_chunks: int, n_questions: int, dim: int, seed: int = 0, latent: int = 48):
    """Unit vectors with the structure of real embeddings (a 48-d latent topic space mapped to
    `dim`, plus 20% isotropic noise; uniform random vectors have no neighbourhoods for an index to
    find), and questions = their gold chunk + another chunk-like vector of random weight."""
    rng = np.random.default_rng(seed)
    mixing = rng.standard_normal((latent, dim), dtype=np.float32) / np.float32(np.sqrt(latent))

    def sample(out: np.ndarray) -> None:
        out[:] = rng.standard_normal((len(out), latent), dtype=np.float32) @ mixing
        out += np.float32(0.5) * rng.standard_normal(out.shape, dtype=np.float32)

    chunks = np.empty((n_chunks, dim), dtype=np.float32)
    for start in range(0, n_chunks, 65_536):  # in place, in blocks: no full-size temporaries
        block = chunks[start : start + 65_536]
        sample(block)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
    gold = rng.integers(0, n_chunks, size=n_questions)
    questions = np.empty((n_questions, dim), dtype=np.float32)
    sample(questions)
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    questions *= rng.uniform(0.5, 3.0, size=(n_questions, 1)).astype(np.float32)
    questions += chunks[gold]
    questions /= np.linalg.norm(questions, axis=1, keepdims=True)
    return chunks, questions, gold


def dense(chunks, questions, gold, args):
    from retrieval_bench.retrieval.flat import top_k

    start = time.perf_counter()
    indices, _ = top_k(questions, chunks, args.depth)
    seconds = time.perf_counter() - start
    np.save(Path(args.workdir) / "exact.npy", indices)
    return seconds, len(questions), "retrieval.flat.top_k (the dense method's search): the run only"


GEMM_BLOCK = (4096, 1024)  # questions x chunks per product: FAISS's own blocks


def gemm(chunks, questions, gold, args):
    """numpy's matrix products of every question with every chunk (written, never read): a floor
    for any exact search that scores every chunk."""
    rows, cols = GEMM_BLOCK
    out = np.empty((rows, cols), dtype=np.float32)
    start = time.perf_counter()
    for q0 in range(0, len(questions), rows):
        block = questions[q0 : q0 + rows]
        for c0 in range(0, len(chunks), cols):
            part = chunks[c0 : c0 + cols]
            np.matmul(block, part.T, out=out[: len(block), : len(part)])
    return time.perf_counter() - start, len(questions), f"{rows} x {cols} blocks, products only"


def faiss_flat(chunks, questions, gold, args):
    import faiss

    index = faiss.IndexFlatIP(chunks.shape[1])
    index.add(chunks)
    start = time.perf_counter()
    _, indices = index.search(questions, args.depth)
    seconds = time.perf_counter() - start
    exact = np.load(Path(args.workdir) / "exact.npy")
    same = float((indices == exact).mean())
    return (
        seconds,
        len(questions),
        f"same chunk at the same rank as dense: {same:.5f} (index.add not timed; {faiss.omp_get_max_threads()} threads)",
    )


def argsort_loop(chunks, questions, gold, args):
    """The seed: scores for 256 questions at once, then a full stable argsort per question."""
    n = min(args.argsort_questions, len(questions))
    start = time.perf_counter()
    top = []
    for q0 in range(0, n, 256):
        scores = questions[q0 : min(q0 + 256, n)] @ chunks.T
        for row in scores:
            top.append(np.argsort(-row, kind="stable")[: args.depth])
    seconds = time.perf_counter() - start
    exact = np.load(Path(args.workdir) / "exact.npy")[:n]
    same = float((np.array(top) == exact).mean())
    return seconds, n, f"timed on {n} questions, x{len(questions) / n:.1f} for all; same as dense: {same:.5f}"


def hnsw(chunks, questions, gold, args):
    """The project's ann method (retrieval.ann's build_index and search), timed apart."""
    import faiss

    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.retrieval import ann
    from retrieval_bench.retrieval.run_info import recall_curve
    from retrieval_bench.retrieval.settings import AnnSettings

    settings = replace(
        AnnSettings(**DEFAULTS["retrieval"]["ann"]),
        index="hnsw",
        hnsw_m=args.hnsw_m,
        ef_construction=args.ef_construction,
        ef_search=args.ef_search,
    )
    start = time.perf_counter()
    index = ann.build_index(chunks, settings, threads=args.threads)
    build = time.perf_counter() - start
    start = time.perf_counter()
    _, indices = ann.search(index, questions, settings, args.depth)
    seconds = time.perf_counter() - start
    curve = recall_curve(indices, np.load(Path(args.workdir) / "exact.npy"))
    note = (
        f"build {build:.0f} s ({faiss.omp_get_max_threads()} threads, M={args.hnsw_m}, efConstruction={args.ef_construction}); "
        f"efSearch={args.ef_search}: recall@10 {curve[9]:.4f}, recall@{args.depth} {curve[-1]:.4f} against exact"
    )
    return seconds, len(questions), note


def child(args) -> None:
    pin_threads(args.threads)
    chunks, questions, gold = make_data(args.chunks, args.questions, args.dim)
    data_gib = (chunks.nbytes + questions.nbytes) / 2**30
    seconds, timed, note = globals()[args.child.replace("-", "_")](chunks, questions, gold, args)
    report_to_parent(seconds=seconds, timed=timed, data_gib=data_gib, note=note)


def main() -> int | None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--argsort-questions", type=int, default=256, help="questions the argsort loop is timed on")
    parser.add_argument(
        "--methods",
        default=",".join(METHODS),
        help=f"comma-separated, from {','.join(METHODS)} (dense first: the others compare to it)",
    )
    add_side_by_side_arguments(parser, METHODS, rounds=1, engines="BLAS, OpenMP, FAISS")
    parser.add_argument("--hnsw-m", type=int, default=32)
    parser.add_argument("--ef-construction", type=int, default=200)
    parser.add_argument("--ef-search", type=int, default=64)
    args = parser.parse_args()
    if args.child:
        return child(args)
    methods = methods_of(args.methods, METHODS, first="dense")  # every other method reads dense's exact top
    pin_threads(args.threads)
    print(
        f"{args.chunks:,} chunks x {args.questions:,} questions, {args.dim}-d, depth {args.depth}, {args.rounds} interleaved rounds; "
        f"data (both matrices) {(args.chunks + args.questions) * args.dim * 4 / 2**30:.2f} GiB\n{machine(args.threads)}\n"
    )
    with tempfile.TemporaryDirectory() as workdir:
        reports = interleaved_children(
            __file__, methods, args.rounds, workdir, 10, lambda method, round_: thread_env(args.threads)
        )
    totals = {
        method: median(runs, "seconds") * args.questions / runs[0]["timed"] for method, runs in reports.items() if runs
    }
    print(
        "| method | search time (s) | x dense | x faiss-flat | each round (s) | questions/s | peak RSS (GiB) | peak - data (GiB) | load average | notes |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|---|---|")
    for method, runs in reports.items():
        if not runs:
            continue
        total = totals[method]
        ratios = [f"{total / totals[base]:.2f}" if base in totals else "-" for base in ("dense", "faiss-flat")]
        each = ", ".join(f"{run['seconds'] * args.questions / run['timed']:,.1f}" for run in runs)
        loads = ", ".join(f"{run['load']:.1f}" for run in runs)
        peak = max(run["peak_gib"] for run in runs)
        print(
            f"| {method} | {total:,.2f} | {ratios[0]} | {ratios[1]} | {each} | {args.questions / total:,.0f} | {peak:.2f} | "
            f"{peak - runs[0]['data_gib']:.2f} | {loads} | {runs[0]['note']} |",
            flush=True,
        )
    return 0 if totals else 1  # every child failed: nothing was measured


if __name__ == "__main__":
    run_main(main)
