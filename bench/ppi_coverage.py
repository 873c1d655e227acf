"""Do the prediction-powered intervals (evaluation.ppi) keep their promise when the LLM judge is
biased? A simulation over real per-question tables: the bundled sample's panel systems
(metrics/panel/*/per_question.csv) and, where the workplace has it, BM25 on BEIR SciFact's test
queries (skipped without it).

People's truth is each question's reciprocal rank under its labels (first_relevant_rank, depth 20).
The simulated judge is biased the two ways Alaofi et al. (SIGIR-AP 2024) found: lenient (each
irrelevant chunk ranked above the first relevant one is graded relevant with probability p) and
fooled (on a share of the questions, the top-ranked irrelevant chunk, the one with the question's
words pasted in, is graded relevant). The model's figure is the reciprocal rank under the judge.
Each trial draws a golden set from the table (with replacement), a judge and a uniformly random
reviewed sample of n of its questions, and computes the
PPI++ 95% interval of the mean reciprocal rank, the people-only interval (the reviewed questions
alone) and the uncorrected figure (the judge's mean over every question). Reported per size n:
the coverage of the PPI interval (goal >= 93%), its mean width against the people-only one
(goal: narrower), and the uncorrected figure's bias. With --ablation, a second table: the coverage
and width of PPI++'s interval as published (ppi_py's ppi_mean_ci) with evaluation.ppi's
small-sample corrections added one at a time, on the same trials.

    python bench/ppi_coverage.py [--trials 1000] [--sizes 25 50 100 150] [--scifact PATH] [--ablation]
    python bench/ppi_coverage.py --binary --sizes 25 50 100   # a 0/1 figure near 1 (recall@10), lenient judge
"""

from __future__ import annotations

import argparse
import math
import os
import time
from pathlib import Path

import numpy as np
from common import ROOT, SCIFACT, run_main, scifact_folder
from scipy import stats

from retrieval_bench.evaluation.ppi import ppi_mean
from retrieval_bench.evaluation.score.per_question import read_per_question

DEPTH = 20
JUDGES = {"mild (p 0.1, fooled 5%)": (0.1, 0.05), "strong (p 0.3, fooled 20%)": (0.3, 0.2)}
# --ablation's steps: (Student's t, cross-fitted lambda) added to PPI++ as published; then evaluation.ppi
STEPS = {"published PPI++": (False, False), "+ Student t": (True, False), "+ cross-fitted lambda": (True, True)}


def sample_ranks() -> dict[str, np.ndarray]:
    """Each panel system's first relevant rank per question (inf: none in the top DEPTH)."""
    out = {}
    for path in sorted((ROOT / "metrics" / "panel").glob("*/per_question.csv")):
        table = read_per_question(path, str(path))
        ranks = table["first_relevant_rank"].to_numpy(dtype=float)
        out[path.parent.name] = np.where(np.isnan(ranks) | (ranks > DEPTH), math.inf, np.ceil(ranks))
    return out


def scifact_ranks(folder: Path) -> np.ndarray:
    """BM25 (bm25s, the project's tokenizer settings) on SciFact's test queries (common.scifact_folder's
    folder): the first relevant abstract's rank per query."""
    import json

    import bm25s
    import Stemmer

    ids, texts = [], []
    with open(folder / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            ids.append(str(row["_id"]))
            texts.append(f"{row.get('title', '')} {row['text']}".strip())
    relevant: dict[str, set[str]] = {}
    for line in (folder / "qrels" / "test.tsv").read_text(encoding="utf-8").splitlines()[1:]:
        qid, doc, score = line.split("\t")[:3]
        if int(score) > 0:
            relevant.setdefault(qid, set()).add(doc)
    queries = {}
    with open(folder / "queries.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if str(row["_id"]) in relevant:
                queries[str(row["_id"])] = row["text"]
    stemmer = Stemmer.Stemmer("english")
    retriever = bm25s.BM25()
    retriever.index(bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False)
    tokens = bm25s.tokenize(list(queries.values()), stopwords="en", stemmer=stemmer, show_progress=False)
    found, _ = retriever.retrieve(tokens, k=DEPTH, show_progress=False)
    ranks = []
    for qid, row in zip(queries, found, strict=True):
        hits = [rank for rank, index in enumerate(row, 1) if ids[index] in relevant[qid]]
        ranks.append(float(hits[0]) if hits else math.inf)
    return np.array(ranks)


def judged_ranks(ranks: np.ndarray, lenient: float, fooled: float, rng: np.random.Generator) -> np.ndarray:
    """The first rank the judge calls relevant: the true one, or an irrelevant chunk above it."""
    above = np.minimum(ranks - 1, DEPTH)  # irrelevant chunks above the first relevant one
    positions = np.arange(1, DEPTH + 1)
    false_relevant = (rng.random((len(ranks), DEPTH)) < lenient) & (positions[None, :] <= above[:, None])
    first_false = np.where(false_relevant.any(axis=1), false_relevant.argmax(axis=1) + 1.0, math.inf)
    fooled_first = np.where((rng.random(len(ranks)) < fooled) & (above >= 1), 1.0, math.inf)
    return np.minimum(ranks, np.minimum(first_false, fooled_first))


def published(y: np.ndarray, f_lab: np.ndarray, f_unl: np.ndarray, student: bool, cross_fit: bool):
    """PPI++'s mean interval as published (ppi_py's ppi_mean_ci: lambda tuned on all n reviewed
    questions, the plug-in variance, the normal's 1.96), with two of evaluation.ppi's corrections:
    `student` Student's t with n - 1 df (and the variance's ddof 1), `cross_fit` each reviewed
    question's lambda tuned on the others. Written here for the ablation only: no rejections."""
    n, big_n = len(y), len(f_unl)

    def tuned(rows: np.ndarray) -> float:
        ys, fs = y[rows], f_lab[rows]
        spread = float(np.var(np.concatenate([fs, f_unl]), ddof=1))
        covariance = float(np.mean((ys - ys.mean()) * (fs - fs.mean())))
        return 0.0 if spread <= 0 else float(np.clip(covariance / ((1 + len(ys) / big_n) * spread), 0, 1))

    every = np.arange(n)
    lams = np.array([tuned(every[every != i]) for i in every]) if cross_fit else np.full(n, tuned(every))
    theta = float(y.mean() + lams.mean() * f_unl.mean() - np.mean(lams * f_lab))
    variance = np.var(y - lams * f_lab, ddof=int(student)) / n + lams.mean() ** 2 * np.var(f_unl) / big_n
    quantile = stats.t.ppf(0.975, n - 1) if student else stats.norm.ppf(0.975)
    return theta - quantile * math.sqrt(variance), theta + quantile * math.sqrt(variance)


def simulate(
    ranks: np.ndarray, size: int, judge: tuple[float, float], trials: int, seed: int, ablation: bool = False
) -> dict:
    """Each trial: a golden set drawn from the table (with replacement, as a generator draws
    questions), a judge, and `size` of its questions reviewed at random. The target is the table's
    mean, the population the golden sets are drawn from: what the interval claims to cover, like
    the leaderboard's bootstrap intervals (over the questions one could have drawn). Per interval
    (ppi, people, and with `ablation` the STEPS) its coverage and mean width; the mean bias."""
    rng = np.random.default_rng(seed)
    target = float((1.0 / ranks).mean())  # inf -> 0: nothing relevant in the top DEPTH
    covered: dict[str, int] = {}
    widths: dict[str, float] = {}
    biases = []
    for _ in range(trials):
        drawn = ranks[rng.integers(0, len(ranks), len(ranks))]
        truth, model = 1.0 / drawn, 1.0 / judged_ranks(drawn, *judge, rng)
        reviewed = np.zeros(len(drawn), dtype=bool)
        reviewed[rng.choice(len(drawn), size, replace=False)] = True
        y, f_lab, f_unl = truth[reviewed], model[reviewed], model[~reviewed]
        ppi, people = ppi_mean(y, f_lab, f_unl), ppi_mean(y, f_lab, f_unl, lam=0.0)
        assert ppi is not None and people is not None
        intervals = {"ppi": (ppi.low, ppi.high), "people": (people.low, people.high)}
        if ablation:
            intervals |= {step: published(y, f_lab, f_unl, *how) for step, how in STEPS.items()}
        for name, (low, high) in intervals.items():
            covered[name] = covered.get(name, 0) + (low <= target <= high)
            widths[name] = widths.get(name, 0.0) + (high - low)
        biases.append(float(model.mean()) - target)
    out = {f"{name}_coverage": count / trials for name, count in covered.items()}
    return out | {f"{name}_width": total / trials for name, total in widths.items()} | {"bias": float(np.mean(biases))}


def binary_coverage(share: float, size: int, trials: int, seed: int) -> tuple[float, float]:
    """(PPI, people-only) coverage for a 0/1 figure (recall@10, hit@1) whose mean is `share`: a
    population of 200,000 questions, a lenient judge calling 30% of the misses hits, golden sets of
    400 questions, `size` of them reviewed."""
    rng = np.random.default_rng(seed)
    truth = (rng.random(200_000) < share).astype(float)
    judged = np.where(rng.random(len(truth)) < 0.3, 1.0, truth)
    covered, target = np.zeros(2), truth.mean()
    for _ in range(trials):
        picked = rng.choice(len(truth), 400, replace=False)
        reviewed = np.zeros(400, dtype=bool)
        reviewed[rng.permutation(400)[:size]] = True
        y, f = truth[picked], judged[picked]
        for i, lam in enumerate((None, 0.0)):
            got = ppi_mean(y[reviewed], f[reviewed], f[~reviewed], lam=lam)
            covered[i] += got.low <= target <= got.high
    return covered[0] / trials, covered[1] / trials


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--sizes", type=int, nargs="+", default=[25, 50, 100, 150])
    parser.add_argument("--scifact", default=str(SCIFACT))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--ablation", action="store_true", help="also the corrections' table (slower)")
    parser.add_argument("--binary", action="store_true", help="only the table of a 0/1 figure near 1")
    args = parser.parse_args()
    if args.binary:
        print("| mean of the 0/1 figure | reviewed | PPI coverage | people-only coverage |\n|---:|---:|---:|---:|")
        for share in (0.8, 0.9, 0.95):
            for size in args.sizes:
                ppi, people = binary_coverage(share, size, args.trials, args.seed)
                print(f"| {share} | {size} | {ppi:.1%} | {people:.1%} |", flush=True)
        return
    start, load = time.perf_counter(), os.getloadavg()[0]
    tables = {f"sample {name}": ranks for name, ranks in sample_ranks().items()}
    folder = scifact_folder(args.scifact, "ppi_coverage")  # absent where the workplace keeps it: skipped
    if folder is not None:
        tables["SciFact BM25"] = scifact_ranks(folder)
    print(f"tables: {', '.join(f'{name} ({len(r)} questions)' for name, r in tables.items())}")
    print(
        "| tables | judge | reviewed | coverage (PPI 95%) | worst table | people-only coverage | PPI width "
        "| people-only width | uncorrected bias |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    groups = {
        "sample (each system)": [n for n in tables if n.startswith("sample")],
        "SciFact BM25": [n for n in tables if n == "SciFact BM25"],
    }
    cells = []
    for group, names in groups.items():
        for judge, how in JUDGES.items():
            for size in args.sizes:
                runs = [
                    simulate(tables[name], size, how, args.trials, args.seed + i, args.ablation)
                    for i, name in enumerate(names)
                    if len(tables[name]) > size
                ]
                if not runs:
                    continue
                mean = {key: float(np.mean([run[key] for run in runs])) for key in runs[0]}
                worst = min(run["ppi_coverage"] for run in runs)
                cells.append((f"| {group} | {judge} | {size} |", mean))
                print(
                    f"{cells[-1][0]} {mean['ppi_coverage']:.1%} | {worst:.1%} | {mean['people_coverage']:.1%} | "
                    f"{mean['ppi_width']:.3f} | {mean['people_width']:.3f} | {mean['bias']:+.3f} |",
                    flush=True,
                )
    if args.ablation:
        print("\ncoverage (mean width), the same trials:")
        print(f"| tables | judge | reviewed | {' | '.join(STEPS)} | + jackknife (evaluation.ppi) |")
        print("|---|---|---:|" + "---:|" * (len(STEPS) + 1))
        for cell, mean in cells:
            steps = [*STEPS, "ppi"]
            print(cell, " | ".join(f"{mean[f'{s}_coverage']:.1%} ({mean[f'{s}_width']:.3f})" for s in steps), "|")
    print(
        f"{args.trials} trials per table and cell; {time.perf_counter() - start:.0f} s; "
        f"load average {load:.2f} before, {os.getloadavg()[0]:.2f} after"
    )


if __name__ == "__main__":
    run_main(main)
