"""BM25 at scale, side by side: bm25s called directly (its README's way: tokenize to ids, index,
retrieve), the project's BM25 (retrieval.methods.retrieve with the default params) on cold
caches (it tokenizes and indexes, and numba compiles bm25s' search) and on warm ones (a second
run on the same corpus: it loads the index and the compiled search), and hybrid (RRF of dense and BM25 runs fusion_depth deep, BM25 index cached),
on synthetic texts with planted gold chunks.

Texts: words from a 50,000-word vocabulary with Zipf frequencies less the head (as text is after
stop-word removal), 120 words per chunk; each question is 4 words of its gold chunk and 4 random
words. Vectors: bench/dense_search.make_data. Each measurement runs in its own process (its
numba compile and peak RSS are its own), every engine on --threads threads, in interleaved rounds
(bm25s, bm25, bm25-cached, ..., again): the table gives each one's median. The time is split
into the corpus side (tokenizing and indexing the chunks, or loading the cached index) and the
question side (everything else: it grows linearly with the questions), so a run on fewer
questions extrapolates to --target-questions as corpus + question side x target / questions.
The BM25 index cache removes the corpus side only: a cached run's share of bm25s' time is about
(load + question side) / (corpus side + question side), small when the corpus is large next to
the questions and the numba backend searches (from retrieval.bm25.NUMBA_FROM_CHUNKS chunks, with
numba installed), larger below it, where bm25s' numpy search is most of both. Times are wall
clock and, beside them, the child's CPU time (process_time: every thread's), the steadier of the
two on a shared machine.
The project's top 10 is checked against bm25s' (the same chunks and scores; among equal scores
at the 10th the project keeps the whole tie group, so bm25s' pick must be in it).

    .venv/bin/python bench/lexical_search.py --chunks 100000 --questions 2000 --threads 1 --rounds 3
"""

from __future__ import annotations

import argparse
import tempfile
import time
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

VOCABULARY = 50_000
WORDS_PER_CHUNK = 120
METHODS = ["bm25s", "bm25", "bm25-cached", "hybrid"]


def make_texts(n_chunks: int, n_questions: int, gold: np.ndarray, seed: int = 1):
    rng = np.random.default_rng(seed)
    letters = np.array(list("bcdfghjklmnpqrstvwxz"))
    # Distinct pseudo-words of 6 consonant-vowel letters: no stop word, nothing a stemmer merges much.
    vowels = np.array(list("aeiou"))
    codes = rng.permutation(20**3 * 5**3)[:VOCABULARY]
    words = []
    for code in codes:
        c1, c2, c3 = code % 20, code // 20 % 20, code // 400 % 20
        v1, v2, v3 = code // 8000 % 5, code // 40000 % 5, code // 200000 % 5
        words.append(letters[c1] + vowels[v1] + letters[c2] + vowels[v2] + letters[c3] + vowels[v3])
    words = np.array(words, dtype=object)
    weights = 1.0 / (np.arange(1, VOCABULARY + 1) + 100) ** 1.05  # Zipf without its head: text after stop-word removal
    cumulative = np.cumsum(weights / weights.sum())
    texts = []
    for start in range(0, n_chunks, 100_000):
        count = min(100_000, n_chunks - start)
        ids = np.searchsorted(cumulative, rng.random((count, WORDS_PER_CHUNK)))
        texts.extend(" ".join(row) for row in words[np.minimum(ids, VOCABULARY - 1)])
    questions = []
    for g in gold:
        own = rng.choice(texts[g].split(), size=4, replace=False)
        other = words[rng.integers(0, VOCABULARY, size=4)]
        questions.append(" ".join(rng.permutation(np.concatenate([own, other]))))
    return texts, questions


def bm25s_direct(
    texts: list[str], question_texts: list[str], depth: int, threads: int
) -> tuple[dict, np.ndarray, np.ndarray]:
    """bm25s as its README calls it, with the project's tokenizer settings and backend."""
    import bm25s
    import Stemmer

    from retrieval_bench.retrieval.bm25 import backend_for

    stemmer = Stemmer.Stemmer("english")
    start, start_cpu = time.perf_counter(), time.process_time()
    backend = backend_for(len(texts))
    retriever = bm25s.BM25(backend=backend)
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    corpus_side, corpus_side_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    query_tokens = bm25s.tokenize(question_texts, stopwords="en", stemmer=stemmer, show_progress=False)
    found, scores = retriever.retrieve(query_tokens, k=depth, show_progress=False, n_threads=threads)
    total, total_cpu = time.perf_counter() - start, time.process_time() - start_cpu
    rows = np.broadcast_to(np.arange(len(found))[:, None], found.shape)
    kept = scores > 0  # bm25s also returns chunks sharing no word with the question (score 0)
    return (
        {
            "total": total,
            "corpus_side": corpus_side,
            "cpu": total_cpu,
            "corpus_side_cpu": corpus_side_cpu,
            "built": True,
            "backend": backend,
        },
        rows[kept],
        np.stack([found[kept], scores[kept]]),
    )


def project(args, texts, question_texts) -> tuple[dict, np.ndarray, np.ndarray]:
    from dense_search import make_data

    from retrieval_bench.core.params import DEFAULTS
    from retrieval_bench.retrieval import bm25
    from retrieval_bench.retrieval.methods import retrieve
    from retrieval_bench.retrieval.run import Corpus, Questions
    from retrieval_bench.retrieval.settings import RetrievalSettings

    vectors, question_vectors = (
        make_data(args.chunks, args.questions, args.dim)[:2] if args.child == "hybrid" else (None, None)
    )
    corpus = Corpus([f"doc{i}:0-800" for i in range(args.chunks)], texts, vectors)
    questions = Questions([f"q{i}" for i in range(args.questions)], question_texts, question_vectors)
    load_or_build = bm25.load_or_build
    timing = {"corpus_side": 0.0, "corpus_side_cpu": 0.0, "built": False, "backend": bm25.backend_for(args.chunks)}

    def timed(*rest, **options):
        start, start_cpu = time.perf_counter(), time.process_time()
        index, built = load_or_build(*rest, **options)
        timing["corpus_side"] += time.perf_counter() - start
        timing["corpus_side_cpu"] += time.process_time() - start_cpu
        timing["built"] |= built
        return index, built

    bm25.load_or_build = timed
    start, start_cpu = time.perf_counter(), time.process_time()
    method = "hybrid" if args.child == "hybrid" else "bm25"
    run = retrieve(RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": method}), questions, corpus)
    timing["total"], timing["cpu"] = time.perf_counter() - start, time.process_time() - start_cpu
    rows = run["qid"].str[1:].astype(int).to_numpy()
    chunks = run["chunk_id"].str[3:-6].astype(int).to_numpy()
    return timing, rows, np.stack([chunks, run["score"].to_numpy()])


def child(args) -> None:
    pin_threads(args.threads)
    gold = np.random.default_rng(0).integers(0, args.chunks, size=args.questions)
    texts, question_texts = make_texts(args.chunks, args.questions, gold)
    if args.child == "bm25s":
        timing, rows, found = bm25s_direct(texts, question_texts, 100, args.threads)
    else:
        timing, rows, found = project(args, texts, question_texts)
    np.savez(Path(args.workdir) / f"{args.child}.npz", rows=rows, found=found)
    first = np.r_[True, rows[1:] != rows[:-1]]
    rank = np.arange(len(rows)) - np.maximum.accumulate(np.where(first, np.arange(len(rows)), 0))
    hit = (rank < 10) & (found[0] == gold[rows])
    report_to_parent(**timing, rows=len(rows), recall10=float(hit.sum() / args.questions))


def top10_as_bm25s(workdir: Path, n_questions: int) -> str:
    """Questions whose project top 10 is bm25s': the same scores at ranks 1-10, the same chunks
    above the 10th score, and bm25s' chunks at the 10th score inside the project's tie group."""

    def by_question(name: str) -> list[tuple[np.ndarray, np.ndarray]]:
        data = np.load(workdir / f"{name}.npz")
        rows, (chunks, scores) = data["rows"], data["found"]
        bounds = np.searchsorted(rows, np.arange(n_questions + 1))
        return [(chunks[a:b].astype(np.int64), scores[a:b].astype(np.float32)) for a, b in zip(bounds[:-1], bounds[1:])]

    same = 0
    for (theirs, their_scores), (ours, our_scores) in zip(by_question("bm25s"), by_question("bm25")):
        theirs, their_scores = theirs[:10], their_scores[:10]
        if len(theirs) == 0:
            same += len(ours) == 0
            continue
        cut = their_scores[-1]
        same += bool(
            np.array_equal(their_scores, our_scores[:10])
            and set(theirs[their_scores > cut]) == set(ours[:10][our_scores[:10] > cut])
            and set(theirs[their_scores == cut]) <= set(ours[our_scores == cut])
        )
    return f"{same}/{n_questions}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--questions", type=int, default=2_000)
    parser.add_argument("--target-questions", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument(
        "--methods", default="bm25s,bm25,bm25-cached", help=f"comma-separated, from {','.join(METHODS)}"
    )
    add_side_by_side_arguments(parser, METHODS, rounds=3, engines="numba, BLAS, OpenMP")
    args = parser.parse_args()
    if args.child:
        return child(args)
    methods = methods_of(args.methods, METHODS)
    pin_threads(args.threads)
    print(
        f"{args.chunks:,} chunks (~{WORDS_PER_CHUNK} words) x {args.questions:,} questions, {args.rounds} interleaved rounds, "
        f"extrapolated to {args.target_questions:,} questions\n{machine(args.threads)}\n"
    )
    with tempfile.TemporaryDirectory() as workdir:

        def env_for(method: str, round_: int) -> dict:
            # bm25: caches of its own each round (it indexes, numba compiles), but the first round's are
            # the warm ones the others load (a second run on the corpus); bm25s compiles every time.
            cache = Path(workdir) / ("warm" if method != "bm25" or round_ == 0 else f"cold-{round_}")
            return {
                **thread_env(args.threads),
                "RETRIEVAL_BENCH_CACHE": str(cache),
                "NUMBA_CACHE_DIR": str(cache / "numba"),
            }

        reports = interleaved_children(__file__, methods, args.rounds, workdir, 12, env_for)
        # the agreement reads both children's tops: a failed child (its row says why) has none
        compared = all(reports.get(name) for name in ("bm25s", "bm25"))
        agreement = top10_as_bm25s(Path(workdir), args.questions) if compared else "-"
    print(
        f"| method | backend | median total (s) | x bm25s | each round (s) | CPU (s) | x bm25s by CPU | corpus side (s) "
        f"| question side (s) | total at {args.target_questions:,} questions (min) "
        "| index | top 10 as bm25s' | recall@10 of the planted chunk | peak RSS (GiB) | load average |"
    )
    print("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|")
    base, base_cpu = (
        (median(reports["bm25s"], "total"), median(reports["bm25s"], "cpu")) if reports.get("bm25s") else (None, None)
    )
    for method, runs in reports.items():
        if not runs:
            continue
        total, corpus_side, cpu = median(runs, "total"), median(runs, "corpus_side"), median(runs, "cpu")
        target = corpus_side + (total - corpus_side) * args.target_questions / args.questions
        built = sum(run["built"] for run in runs)
        each, loads = ", ".join(f"{run['total']:.2f}" for run in runs), ", ".join(f"{run['load']:.1f}" for run in runs)
        index = (
            "built" if built == len(runs) else "loaded from the cache" if not built else f"built {built}/{len(runs)}"
        )
        print(
            f"| {method} | {runs[0]['backend']} | {total:.2f} | {f'{total / base:.2f}' if base else '-'} | {each} "
            f"| {cpu:.2f} | {f'{cpu / base_cpu:.2f}' if base_cpu else '-'} "
            f"| {corpus_side:.2f} | {total - corpus_side:.2f} | {target / 60:.1f} | {index} | {agreement if method == 'bm25' else '-'} "
            f"| {median(runs, 'recall10'):.3f} | {max(run['peak_gib'] for run in runs):.2f} | {loads} |",
            flush=True,
        )
    return 0 if any(reports.values()) else 1  # every child failed: nothing was measured


if __name__ == "__main__":
    run_main(main)
