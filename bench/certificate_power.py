"""The certificate's error rates, measured (issue 44; docs/explanation/golden-set-trust.md).

    python bench/certificate_power.py [--trials 200] [--seeds 5] [--sizes 20 40 80 150]
                                      [--scifact ../shared/data/scifact] [--no-scifact] [--no-sample]
                                      [--permutations 20000]

A panel of real systems (MiniLM at 256 and 64 tokens, exact dense search; BM25 stemmed and plain;
hybrid RRF of each dense with stemmed BM25), scored by the library itself (retrieve, score_run),
in two compositions: `strong` (those six) and `with weak` (plus MiniLM cut at 16 tokens, far
behind). Corpora: the bundled sample (800-character chunks; reference pool: its hand-written
questions) and BEIR SciFact when its folder is there (one chunk per abstract; its real test
queries). Per corpus, composition, size n (a side) and kind, `--trials` independent trials, each
judged by evaluation.certificate.verdict.decide over every leaderboard metric, clustered by
document, with the style gap's AUC, as the leaderboard stage judges a set:

- `split`: 2n reference questions drawn afresh, split in two (target: disagrees <= 5%; agrees
  >= 50% at 80 a side);
- `template`: n questions quoting 8-12 consecutive words of a random passage ("What does the
  documentation say about <quote>?"); `reworded`: a passage sentence of 8+ words, lightly
  reworded into a question; `inserted`: real questions (not the reference's) with 8-12 words of
  their own passage inserted; `mix 25%` / `mix 50%`: real questions with that share replaced by
  template quotes (target: agrees <= 5% for each at every size).

Every generated question is drawn afresh for its trial (random passage, random words): no fixed
pool of quotes. Reference questions come from a finite pool, so trials share questions (never
within a trial: the two sides are disjoint). Per line: the shares disagrees / agrees /
undetermined, agrees with a different winner (the synthetic set's best on mrr is not the best on
the whole reference pool), and the trials whose verdict flips over `--seeds` permutation seeds
(each such trial on stderr: every seed's verdict, smallest max-T p-value and draws). Seeded: a
rerun prints the same figures.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from common import ROOT, SCIFACT, machine, run_main, scifact_folder

from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.question_sets import SINGLE, kind_of
from retrieval_bench.corpus.load import chunk_documents, read_documents_folder
from retrieval_bench.embedding.embed import encode, load_model
from retrieval_bench.evaluation.certificate.style_gap import style_gap
from retrieval_bench.evaluation.certificate.verdict import AGREES, DISAGREES, PERMUTATIONS, UNDETERMINED, decide, side
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.score.scoring import score_run
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.build import handwritten_rows, read_handwritten
from retrieval_bench.goldenset.echo import measure
from retrieval_bench.retrieval.methods import retrieve
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings

KS = [1, 3, 5, 10, 20]
# name -> (embedder's max_seq_length, retrieval overrides)
SYSTEMS = {
    "dense": (256, {"method": "dense"}),
    "dense-seq64": (64, {"method": "dense"}),
    "bm25": (256, {"method": "bm25"}),
    "bm25-plain": (256, {"method": "bm25", "bm25": {"stemmer": "none", "stopwords": "none"}}),
    "hybrid": (256, {"method": "hybrid"}),
    "hybrid-seq64": (64, {"method": "hybrid"}),
    "dense-seq16": (16, {"method": "dense"}),  # the weak system: 16 tokens of each passage
}
COMPOSITIONS = {"strong": list(SYSTEMS)[:6], "with weak": list(SYSTEMS)}
KINDS = ("split", "template", "reworded", "inserted", "mix 25%", "mix 50%")


@dataclass
class Panel:
    """A corpus scored by every system: `score(rows)` gives {metric: (systems x questions)}."""

    name: str
    chunks: pd.DataFrame
    real: list[dict]  # golden rows with `evidence_text` (for the echo measures) and `doc_id`
    score: Callable[[list[dict]], dict[str, np.ndarray]]


def scorer(chunks: pd.DataFrame, models: dict) -> Callable[[list[dict]], dict[str, np.ndarray]]:
    vectors = {seq: encode(model, chunks["text"].tolist(), 64, progress=False) for seq, model in models.items()}

    def score(golden: list[dict]) -> dict[str, np.ndarray]:
        texts = [row["question"] for row in golden]
        question_vectors = {seq: encode(model, texts, 64, progress=False) for seq, model in models.items()}
        tables = []
        for seq, overrides in SYSTEMS.values():
            corpus = Corpus(chunks["chunk_id"].tolist(), chunks["text"].tolist(), vectors[seq])
            questions = Questions([row["qid"] for row in golden], texts, question_vectors[seq])
            run = retrieve(RetrievalSettings.from_params({**DEFAULTS["retrieval"], **overrides}), questions, corpus)
            tables.append(score_run(golden, chunks, run, Scoring(ks=tuple(KS))))
        return {
            name: np.vstack([table[column].to_numpy(dtype=float) for table in tables])
            for name, column in leaderboard_metrics(tables[0].columns)
        }

    return score


def with_echo(row: dict) -> dict:
    echo = measure(row["question"], row["evidence_text"])
    return {**row, "echo_content_share": echo.content_share, "echo_longest_ngram": echo.longest_ngram}


def quote(words: list[str], rng: np.random.Generator) -> str:
    length = min(int(rng.integers(8, 13)), len(words))
    start = int(rng.integers(0, len(words) - length + 1))
    return " ".join(words[start : start + length])


def template_question(text: str, rng: np.random.Generator) -> str:
    return f"What does the documentation say about {quote(text.split(), rng)}?"


def reworded_question(text: str, rng: np.random.Generator) -> str | None:
    """A passage sentence of 8+ words as a question, lightly reworded: one inner word dropped,
    lowercased, "Is it true that ...?"."""
    sentences = [s.split() for s in re.split(r"(?<=[.!?])\s+", text) if len(s.split()) >= 9]
    if not sentences:
        return None
    words = sentences[int(rng.integers(len(sentences)))]
    dropped = int(rng.integers(1, len(words) - 1))
    return "Is it true that " + " ".join(words[:dropped] + words[dropped + 1 :]).rstrip(".!?").lower() + "?"


def generated(panel: Panel, kind: str, n: int, rng: np.random.Generator, tag: str) -> list[dict]:
    """n fresh questions of a quoting kind, each on a random passage (20+ words)."""
    rows = []
    while len(rows) < n:
        index = int(rng.integers(len(panel.chunks)))
        text = panel.chunks["text"].iloc[index]
        if len(text.split()) < 20:
            continue
        question = template_question(text, rng) if kind == "template" else reworded_question(text, rng)
        if question is None:
            continue
        chunk = panel.chunks.iloc[index]
        rows.append(
            with_echo(
                {
                    "qid": f"{tag}-{len(rows)}",
                    "question": question,
                    "doc_id": str(chunk["doc_id"]),
                    "relevant": {str(chunk["chunk_id"]): 1},
                    "evidence_text": text,
                }
            )
        )
    return rows


def inserted(rows: list[dict], rng: np.random.Generator, tag: str) -> list[dict]:
    """The real questions with 8-12 words of their own passage (its chunk) inserted at the end."""
    return [
        with_echo(
            {**row, "qid": f"{tag}-{i}", "question": f"{row['question']} ({quote(row['passage_text'].split(), rng)})"}
        )
        for i, row in enumerate(rows)
    ]


def sample_panel(models: dict) -> Panel:
    documents = read_documents_folder(ROOT / "data" / "sample" / "sqlite")
    chunks = chunk_documents(documents, 800, 100)
    texts = dict(zip(documents["doc_id"], documents["text"]))
    hand, _ = handwritten_rows(read_handwritten(ROOT / "data" / "handwritten_questions.jsonl"), documents, chunks)
    passages = dict(zip(chunks["chunk_id"], chunks["text"]))
    real = [
        with_echo(
            {
                **row,
                "evidence_text": texts[row["doc_id"]][row["start"] : row["end"]],
                "passage_text": passages[row["gold_chunk_id"]],
            }
        )
        for row in hand
        if kind_of(row) == SINGLE  # the reference pool: single-passage questions (the synthetic kinds are too)
    ]
    return Panel("sample", chunks, real, scorer(chunks, models))


def scifact_panel(scifact: Path, models: dict) -> Panel:
    corpus = [json.loads(line) for line in (scifact / "corpus.jsonl").read_text(encoding="utf-8").splitlines()]
    texts = [f"{row.get('title', '')} {row['text']}".strip() for row in corpus]
    chunks = pd.DataFrame({"chunk_id": [str(row["_id"]) for row in corpus], "text": texts})
    chunks = chunks.assign(doc_id=chunks["chunk_id"], start=0, end=chunks["text"].str.len())
    by_id = dict(zip(chunks["chunk_id"], texts))
    qrels = pd.read_csv(scifact / "qrels" / "test.tsv", sep="\t", dtype=str)
    queries = {
        str(row["_id"]): row["text"]
        for row in map(json.loads, (scifact / "queries.jsonl").read_text(encoding="utf-8").splitlines())
    }
    real = [
        with_echo(
            {
                "qid": qid,
                "question": queries[qid],
                "relevant": {cid: int(g) for cid, g in zip(group["corpus-id"], group["score"])},
                "doc_id": str(group["corpus-id"].iloc[0]),
                "evidence_text": by_id[str(group["corpus-id"].iloc[0])],
                "passage_text": by_id[str(group["corpus-id"].iloc[0])],
            }
        )
        for qid, group in qrels.groupby("query-id", sort=False)
    ]
    return Panel("scifact", chunks, real, scorer(chunks, models))


def judged(
    reference: list[dict], synthetic: list[dict], scores: dict, rows: list[str], seeds: int, permutations: int
) -> list[dict]:
    """The decision of one trial at each seed (scores: {metric: (systems x questions)} of
    reference + synthetic, in that order; rows: the composition's systems' indexes; `permutations`:
    the max-T's first block)."""
    n = len(reference)
    sides = [
        side({m: x[rows][:, part] for m, x in scores.items()}, [row["doc_id"] for row in group])
        for part, group in ((slice(0, n), reference), (slice(n, None), synthetic))
    ]
    auc = style_gap(reference, synthetic)["classifier_auc"]
    return [decide(*sides, style_auc=auc, permutations=permutations, seed=seed) for seed in range(seeds)]


def trials(panel: Panel, sizes: list[int], n_trials: int, seeds: int, seed: int, permutations: int) -> None:
    rng = np.random.default_rng(seed)
    pool = len(panel.real)
    real_scores = panel.score(panel.real)
    for n in sizes:
        if 2 * n > pool:
            print(f"{panel.name}: {n} a side needs {2 * n} reference questions, the pool has {pool}: skipped")
            continue
        draws = [rng.permutation(pool) for _ in range(n_trials)]
        fresh = {
            kind: [generated(panel, kind, n, rng, f"{kind}-{t}") for t in range(n_trials)]
            for kind in ("template", "reworded")
        }
        fresh["inserted"] = [
            inserted([panel.real[i] for i in order[n : 2 * n]], rng, f"ins-{t}") for t, order in enumerate(draws)
        ]
        for share in (25, 50):
            quotes = round(n * share / 100)
            fresh[f"mix {share}%"] = [
                [panel.real[i] for i in order[n : 2 * n - quotes]] + fresh["template"][t][:quotes]
                for t, order in enumerate(draws)
            ]
        fresh["split"] = [[panel.real[i] for i in order[n : 2 * n]] for order in draws]
        scored = {}
        for kind in KINDS:  # one retrieval per kind for every trial: fresh questions, one batch
            batch = [row for rows in fresh[kind] for row in rows]
            scored[kind] = panel.score(batch) if kind in ("template", "reworded", "inserted") else None
        for name, systems in COMPOSITIONS.items():
            rows = [list(SYSTEMS).index(s) for s in systems]
            truth = int(np.argmax(real_scores["mrr"][rows].mean(axis=1)))  # the best on the whole pool
            for kind in KINDS:
                verdicts, flips, wrong_winner = [], 0, 0
                for t, order in enumerate(draws):
                    reference = [panel.real[i] for i in order[:n]]
                    synthetic = fresh[kind][t]
                    ref_part = {m: x[:, order[:n]] for m, x in real_scores.items()}
                    syn_part = synthetic_scores(kind, t, n, order, real_scores, scored)
                    both = {m: np.hstack([ref_part[m], syn_part[m]]) for m in real_scores}
                    runs = judged(reference, synthetic, both, rows, seeds, permutations)
                    verdict = runs[0]["verdict"]
                    verdicts.append(verdict)
                    if len({run["verdict"] for run in runs}) > 1:
                        flips += 1
                        print(f"flip: {panel.name} | {name} | {kind} | {n} | trial {t}: {seen(runs)}", file=sys.stderr)
                    wrong_winner += verdict == AGREES and runs[0]["winner"]["mrr"]["synthetic_best"] != truth
                share = {v: verdicts.count(v) / len(verdicts) for v in (DISAGREES, AGREES, UNDETERMINED)}
                print(
                    f"{panel.name} | {name} | {kind} | {n} | {n_trials} | {share[DISAGREES]:.1%} | {share[AGREES]:.1%} | "
                    f"{share[UNDETERMINED]:.1%} | {wrong_winner / n_trials:.1%} | {flips} of {n_trials} ({seeds} seeds)",
                    flush=True,
                )


def seen(runs: list[dict]) -> str:
    """Each seed's verdict, its smallest max-T p-value and its draws: a flip's p sits at the bar."""
    return "; ".join(
        f"{run['verdict']} p {min((h['p_beyond'] for h in run['hypotheses']), default=1.0):.5f} "
        f"({run['permutations']:,} draws)"
        for run in runs
    )


def synthetic_scores(kind: str, t: int, n: int, order: np.ndarray, real_scores: dict, scored: dict) -> dict:
    """{metric: (systems x n)} of trial t's synthetic set of this kind."""
    if kind == "split":
        return {m: x[:, order[n : 2 * n]] for m, x in real_scores.items()}
    if kind.startswith("mix"):
        quotes = round(n * int(kind.split()[1].rstrip("%")) / 100)
        return {
            m: np.hstack([x[:, order[n : 2 * n - quotes]], scored["template"][m][:, t * n : t * n + quotes]])
            for m, x in real_scores.items()
        }
    return {m: x[:, t * n : (t + 1) * n] for m, x in scored[kind].items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=200)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 80, 150])
    parser.add_argument("--scifact", default=str(SCIFACT))
    parser.add_argument("--no-scifact", action="store_true")
    parser.add_argument("--no-sample", action="store_true", help="SciFact's lines only")
    parser.add_argument(
        "--permutations",
        type=int,
        default=PERMUTATIONS,
        help=f"the max-T's first block per decision (default {PERMUTATIONS:,}, as the stage draws)",
    )
    args = parser.parse_args()
    started = time.perf_counter()
    models = {seq: load_model(DEFAULTS["embed"]["model"], seq) for seq in sorted({seq for seq, _ in SYSTEMS.values()})}
    print(
        "corpus | panel | kind | n a side | trials | disagrees | agrees | undetermined | agrees, other winner | flips"
    )
    if not args.no_sample:
        trials(sample_panel(models), args.sizes, args.trials, args.seeds, 1, args.permutations)
    scifact = None if args.no_scifact else scifact_folder(args.scifact, "certificate_power")
    if scifact is not None:
        trials(scifact_panel(scifact, models), args.sizes, args.trials, args.seeds, 2, args.permutations)
    print(f"{time.perf_counter() - started:.0f} s on {machine(os.cpu_count() or 1)}")


if __name__ == "__main__":
    run_main(main)
