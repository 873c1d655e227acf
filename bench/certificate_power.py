"""The certificate's error rates, measured (issue 30; docs/explanation/golden-set-trust.md).

    python bench/certificate_power.py [--trials 400] [--scifact ../shared/data/scifact] [--no-scifact]

On a panel of 6 real systems (MiniLM at 256 and at 64 tokens, exact dense search; BM25 stemmed and
plain; hybrid RRF of each dense with stemmed BM25), scored by the library itself (retrieve,
score_run) on two corpora:

- the bundled sample (48 documents, 800-character chunks; the reference: its 180 hand-written
  questions, which rank dense above BM25);
- BEIR SciFact, when its folder is there (5,183 abstracts, one chunk each; the reference: its 300
  real test queries with their qrels).

Two kinds of trial, each `--trials` times per size, each judged by evaluation.certificate.verdict.decide over
every leaderboard metric, as the leaderboard stage judges a set:

- *false alarm*: the reference questions split at random into two disjoint halves of n, one
  playing the synthetic set: the share judged `disagrees` (target <= 5% at every size);
- *detection*: n reference questions against n questions that quote 8 to 12 consecutive words of
  their passage ("What does the documentation say about <quote>?", made here from random chunks):
  the share judged `disagrees` (target >= 80% at >= 100 a side on the sample; SciFact's as it
  comes out: BM25 is strong on its real queries, so agreement there can be genuine).

Prints one line per corpus, kind and size (with the share agrees / undetermined too) and the
machine. Seeded: a rerun prints the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd
from common import ROOT, SCIFACT, machine, scifact_folder
from tqdm import tqdm

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
from retrieval_bench.embedding.embed import encode, load_model
from retrieval_bench.evaluation.certificate.verdict import DISAGREES, decide
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.score.scoring import score_run
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.build import handwritten_rows, read_handwritten
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.run import Corpus, Questions

KS = [1, 3, 5, 10, 20]
# name -> (embedder's max_seq_length, retrieval overrides)
SYSTEMS = {
    "dense": (256, {"method": "dense"}),
    "dense-seq64": (64, {"method": "dense"}),
    "bm25": (256, {"method": "bm25"}),
    "bm25-plain": (256, {"method": "bm25", "bm25": {"stemmer": "none", "stopwords": "none"}}),
    "hybrid": (256, {"method": "hybrid"}),
    "hybrid-seq64": (64, {"method": "hybrid"}),
}


def quotes(chunks: pd.DataFrame, n: int, rng: np.random.Generator) -> list[dict]:
    """n questions quoting 8-12 consecutive words of a random chunk each, with that quote as evidence."""
    picked = []
    for index in rng.permutation(len(chunks)):
        words = chunks["text"].iloc[index].split()
        if len(words) < 20:
            continue
        length = int(rng.integers(8, 13))
        start = int(rng.integers(0, len(words) - length))
        quote = " ".join(words[start : start + length])
        picked.append({"question": f"What does the documentation say about {quote}?", "evidence": quote, "row": index})
        if len(picked) == n:
            break
    return picked


def scores(golden: list[dict], chunks: pd.DataFrame, vectors: dict, texts: list[str], models: dict) -> dict:
    """{metric: (systems x questions)} of the questions `golden` (texts `texts`) on the panel."""
    question_vectors = {seq: encode(model, texts, 64, progress=False) for seq, model in models.items()}
    tables = []
    for seq, overrides in SYSTEMS.values():
        corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist(), vectors[seq])
        questions = Questions([row["qid"] for row in golden], texts, question_vectors[seq])
        run = retrieve({**DEFAULTS["retrieval"], **overrides}, questions, corpus)
        tables.append(score_run(golden, chunks, run, Scoring(ks=tuple(KS))))
    return {
        name: np.vstack([table[column].to_numpy(dtype=float) for table in tables])
        for name, column in leaderboard_metrics(tables[0].columns)
    }


def sample_panel(models: dict, n_quotes: int, rng: np.random.Generator) -> tuple[dict, dict]:
    """(reference, quoting) score matrices on the bundled sample."""
    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    chunks = chunk_documents(documents, 800, 100)
    vectors = {seq: encode(model, chunks["text"].tolist(), 64) for seq, model in models.items()}
    hand, _ = handwritten_rows(read_handwritten(ROOT / "data" / "handwritten_questions.jsonl"), documents, chunks)
    made = quotes(chunks, n_quotes, rng)
    quoting, _ = handwritten_rows(
        [
            {"question": q["question"], "doc_id": chunks["doc_id"].iloc[q["row"]], "evidence": q["evidence"]}
            for q in made
        ],
        documents,
        chunks,
    )
    return (
        scores(hand, chunks, vectors, [row["question"] for row in hand], models),
        scores(quoting, chunks, vectors, [row["question"] for row in quoting], models),
    )


def scifact_panel(scifact: Path, models: dict, n_quotes: int, rng: np.random.Generator) -> tuple[dict, dict]:
    """(reference: the real test queries with their qrels, quoting) score matrices on SciFact, one
    chunk per abstract."""
    corpus = [json.loads(line) for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = [f"{row.get('title', '')} {row['text']}".strip() for row in corpus]
    chunks = pd.DataFrame({"chunk_id": [str(row["_id"]) for row in corpus], "text": texts})
    chunks = chunks.assign(doc_id=chunks["chunk_id"], start=0, end=chunks["text"].str.len())
    vectors = {seq: encode(model, texts, 32) for seq, model in models.items()}
    qrels = pd.read_csv(scifact / "qrels" / "test.tsv", sep="\t", dtype=str)
    queries = {
        str(row["_id"]): row["text"]
        for row in map(json.loads, (scifact / "queries.jsonl").read_text(encoding="utf-8").splitlines())
    }
    real = [
        {
            "qid": qid,
            "question": queries[qid],
            "relevant": {cid: int(g) for cid, g in zip(group["corpus-id"], group["score"])},
        }
        for qid, group in qrels.groupby("query-id", sort=False)
    ]
    made = quotes(chunks, n_quotes, rng)
    quoting = [
        {"qid": f"quote-{i}", "question": q["question"], "relevant": {chunks["chunk_id"].iloc[q["row"]]: 1}}
        for i, q in enumerate(made)
    ]
    return (
        scores(real, chunks, vectors, [row["question"] for row in real], models),
        scores(quoting, chunks, vectors, [row["question"] for row in quoting], models),
    )


def columns(matrices: dict, picked: np.ndarray) -> dict:
    return {name: matrix[:, picked] for name, matrix in matrices.items()}


def rates(verdicts: list[str]) -> str:
    share = {v: verdicts.count(v) / len(verdicts) for v in ("disagrees", "agrees", "undetermined")}
    return ", ".join(f"{name} {value:.1%}" for name, value in share.items())


def trials(corpus: str, reference: dict, quoting: dict, sizes: dict, n_trials: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n_ref, n_quotes = next(iter(reference.values())).shape[1], next(iter(quoting.values())).shape[1]
    for kind, kind_sizes in sizes.items():
        for n in kind_sizes:
            verdicts = []
            for _ in tqdm(range(n_trials), desc=f"{corpus} {kind} {n}", leave=False):
                order = rng.permutation(n_ref)
                if kind == "false alarm":
                    pair = columns(reference, order[:n]), columns(reference, order[n : 2 * n])
                else:
                    pair = columns(reference, order[:n]), columns(quoting, rng.permutation(n_quotes)[:n])
                verdicts.append(decide(*pair, seed=len(verdicts))["verdict"])
            target = (
                "<= 5%" if kind == "false alarm" else ">= 80%" if corpus == "sample" and n >= 100 else "as it comes"
            )
            share = verdicts.count(DISAGREES) / len(verdicts)
            print(
                f"{corpus}: {kind}, {n} a side, {len(SYSTEMS)} systems, {n_trials} trials: "
                f"disagrees {share:.1%} (target {target}); {rates(verdicts)}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=400)
    parser.add_argument("--scifact", default=str(SCIFACT))
    parser.add_argument("--no-scifact", action="store_true")
    args = parser.parse_args()
    started = time.perf_counter()
    rng = np.random.default_rng(0)
    models = {seq: load_model(DEFAULTS["embed"]["model"], seq) for seq in (256, 64)}
    reference, quoting = sample_panel(models, 300, rng)
    sizes = {"false alarm": [30, 60, 90], "detection": [50, 100, 150]}
    trials("sample", reference, quoting, sizes, args.trials, 1)
    scifact = None if args.no_scifact else scifact_folder(args.scifact, "certificate_power")
    if scifact is not None:
        reference, quoting = scifact_panel(scifact, models, 300, rng)
        trials("scifact", reference, quoting, {"false alarm": [50, 100, 150], "detection": [100, 150]}, args.trials, 2)
    print(f"{time.perf_counter() - started:.0f} s on {machine(os.cpu_count() or 1)}")


if __name__ == "__main__":
    main()
