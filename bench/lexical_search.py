"""BM25 and hybrid retrieval at scale through the project's own methods (retrieval.methods.retrieve
with the default params: BM25 with English stemming and stop words, hybrid = RRF of dense and BM25
runs fusion_depth deep), on synthetic texts with planted gold chunks.

Texts: words from a 50,000-word vocabulary with Zipf frequencies less the head (as text is after
stop-word removal), 120 words per chunk; each
question is 4 words of its gold chunk and 4 random words. Vectors: bench/dense_search.make_data.
Each method runs in its own process (peak RSS is its own). The time is split into the corpus
side (tokenizing and indexing the chunks: paid once per corpus, whatever the questions) and the
question side (everything else: it grows linearly with the questions), so a run on fewer
questions extrapolates to --target-questions as corpus + question side x target / questions.

    .venv/bin/python bench/lexical_search.py --chunks 1000000 --questions 2000 --target-questions 20000
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np
from common import ChildFailed, failed_row, report_to_parent, run_child

VOCABULARY = 50_000
WORDS_PER_CHUNK = 120


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


def child(args) -> None:
    from dense_search import make_data

    from retrieval_bench.params import DEFAULTS
    from retrieval_bench.retrieval import bm25
    from retrieval_bench.retrieval.methods import retrieve
    from retrieval_bench.retrieval.run import Corpus, Questions

    vectors, question_vectors, gold = (None, None, None)
    if args.child == "hybrid":
        vectors, question_vectors, gold = make_data(args.chunks, args.questions, args.dim)
    else:
        gold = np.random.default_rng(0).integers(0, args.chunks, size=args.questions)
    texts, question_texts = make_texts(args.chunks, args.questions, gold)
    corpus = Corpus([f"doc{i}:0-800" for i in range(args.chunks)], texts, vectors)
    questions = Questions([f"q{i}" for i in range(args.questions)], question_texts, question_vectors)
    corpus_side = 0.0

    def timed(fn, corpus_call=lambda *_, **__: True):
        """fn, adding its time to the corpus side when corpus_call(its arguments) says so."""
        def wrapper(*rest, **options):
            nonlocal corpus_side
            start = time.perf_counter()
            try:
                return fn(*rest, **options)
            finally:
                if corpus_call(*rest, **options):
                    corpus_side += time.perf_counter() - start
        return wrapper

    # Tokenizing the chunks (the very list the corpus holds; not the questions, even as many) and indexing.
    bm25.tokenize = timed(bm25.tokenize, lambda texts_, *_, **__: texts_ is corpus.texts)
    bm25.bm25s.BM25.index = timed(bm25.bm25s.BM25.index)
    settings = {**DEFAULTS["retrieval"], "method": args.child}
    start = time.perf_counter()
    run = retrieve(settings, questions, corpus)
    total = time.perf_counter() - start
    top = run[run["rank"] <= 10]
    hit = top["chunk_id"].to_numpy() == np.array([f"doc{g}:0-800" for g in gold], dtype=object)[top["qid"].str[1:].astype(int).to_numpy()]
    report_to_parent(total=total, corpus_side=corpus_side, rows=len(run), recall10=float(hit.sum() / args.questions))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=1_000_000)
    parser.add_argument("--questions", type=int, default=2_000)
    parser.add_argument("--target-questions", type=int, default=20_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--methods", default="bm25,hybrid")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args)
    print(f"{args.chunks:,} chunks (~{WORDS_PER_CHUNK} words) x {args.questions:,} questions measured, "
          f"extrapolated to {args.target_questions:,} questions; {os.cpu_count()} cores\n")
    print(f"| method | corpus side (s) | question side (s) | total (s) | total at {args.target_questions:,} questions (min) | peak RSS (GiB) | recall@10 of the planted chunk |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for method in args.methods.split(","):
        try:
            r = run_child(__file__, method)
        except ChildFailed as failure:
            print(failed_row([method], failure, 7), flush=True)
            continue
        question_side = r["total"] - r["corpus_side"]
        target = r["corpus_side"] + question_side * args.target_questions / args.questions
        print(f"| {method} | {r['corpus_side']:.1f} | {question_side:.1f} | {r['total']:.1f} | {target / 60:.1f} | {r['peak_gib']:.2f} | {r['recall10']:.3f} |", flush=True)


if __name__ == "__main__":
    main()
