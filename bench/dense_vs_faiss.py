"""Exact `dense` (retrieval.flat.top_k: FAISS finds candidates, then the fixed-order scores, the
contract's tie order) against FAISS IndexFlatIP.search called directly, in CPU seconds
(`time.process_time` of the search alone: index.add and making the data not timed), every engine
on --threads threads, the two interleaved in one process round by round, medians of --rounds; at
each size in --sizes (CHUNKS x QUESTIONS, 384-d data of bench/dense_search.py's make_data), after
an untimed run of both that checks they give the same chunk at the same rank (at least 99.9%
of the places). The last line is the ratio at every size.

    .venv/bin/python bench/dense_vs_faiss.py --sizes 300000x2000,1000000x2000 --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import datetime
import os
import statistics
import sys
import time

from common import machine, pin_threads, run_main, thread_env
from dense_search import make_data


def cpu_seconds(search) -> float:
    started = time.process_time()
    search()
    return time.process_time() - started


def measure(n_chunks: int, n_questions: int, args) -> float:
    """One size: each round's CPU seconds and load, then the ratio of the medians."""
    import faiss
    import numpy as np

    from retrieval_bench.retrieval.flat import top_k

    chunks, questions, _ = make_data(n_chunks, n_questions, args.dim)
    index = faiss.IndexFlatIP(args.dim)
    index.add(chunks)
    # the same answer, or the ratio compares two different computations (untimed: a warm-up too)
    same = float(np.mean(top_k(questions, chunks, args.depth)[0] == index.search(questions, args.depth)[1]))
    print(
        f"{n_chunks:,} x {n_questions:,}: the same chunk at the same rank in {same:.5f} of the places", file=sys.stderr
    )
    if same < 0.999:
        raise SystemExit(f"error: dense and FAISS flat agree on only {same:.5f} of the places (expected >= 0.999)")
    times: dict[str, list[float]] = {"dense": [], "faiss-flat": []}
    loads = []
    for round_ in range(args.rounds):
        times["dense"].append(cpu_seconds(lambda: top_k(questions, chunks, args.depth)))
        times["faiss-flat"].append(cpu_seconds(lambda: index.search(questions, args.depth)))
        loads.append(os.getloadavg()[0])
        print(  # progress on stderr: stdout is the Markdown table, whole
            f"{n_chunks:,} x {n_questions:,} round {round_ + 1}: dense {times['dense'][-1]:.2f} CPU-s, "
            f"faiss-flat {times['faiss-flat'][-1]:.2f} CPU-s, load average {loads[-1]:.2f}",
            file=sys.stderr,
            flush=True,
        )
    medians = {name: statistics.median(values) for name, values in times.items()}
    ratio = medians["dense"] / medians["faiss-flat"]
    each = "; ".join(f"{d:.2f} / {f:.2f}" for d, f in zip(times["dense"], times["faiss-flat"], strict=True))
    print(
        f"| {n_chunks:,} x {n_questions:,} | {medians['dense']:.2f} | {medians['faiss-flat']:.2f} | {ratio:.3f} "
        f"| {each} | {', '.join(f'{load:.1f}' for load in loads)} |",
        flush=True,
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="300000x2000,1000000x2000", help="comma-separated CHUNKSxQUESTIONS")
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--depth", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1, help="threads of every engine (BLAS, OpenMP, FAISS)")
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the medians are compared")
    args = parser.parse_args()
    os.environ.update(thread_env(args.threads))  # before FAISS and the BLAS start their pools
    pin_threads(args.threads)
    print(f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; depth {args.depth}, {args.dim}-d")
    print(machine(args.threads))
    print(
        "| chunks x questions | dense (CPU-s, median) | FAISS flat (CPU-s, median) | dense / FAISS "
        "| each round: dense / FAISS (CPU-s) | load average |"
    )
    print("|---|---:|---:|---:|---|---|")
    ratios = {}
    for size in args.sizes.split(","):
        n_chunks, n_questions = (int(part) for part in size.lower().split("x"))
        ratios[size] = measure(n_chunks, n_questions, args)
    print(
        f"dense / FAISS flat, CPU seconds, {args.threads} thread(s), median of {args.rounds}: "
        + "; ".join(f"{size}: {ratio:.3f}" for size, ratio in ratios.items())
    )


if __name__ == "__main__":
    run_main(main)
