"""How generated questions differ in style from real (or hand-written) ones: length, the share
phrased as questions, lexical overlap with their evidence (the echo gauge's content-word share,
stored on each golden row), and how well a classifier on those features tells the two apart
(cross-validated AUC: 0.5 = indistinguishable, 1.0 = always told apart), each feature's own AUC,
and the generated questions it finds most obviously generated. Above validity.max_style_auc a
set cannot be certified `agrees` (evaluation.certificate.verdict)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from retrieval_bench.core.question_form import reads_as_question

FEATURES = ("words", "question_form", "echo_content_share", "echo_longest_ngram")
FOLDS = 5
WORST = 5


def features(row: dict) -> list[float]:
    """The classifier's features of one golden row (NaN: an echo measure the row lacks)."""
    echo = [row.get(name) for name in FEATURES[2:]]
    return [
        float(len(row["question"].split())),
        float(reads_as_question(row["question"])),
        *(math.nan if value is None else float(value) for value in echo),
    ]


def imputed(x: np.ndarray) -> np.ndarray:
    """`x` with each missing value (NaN) the mean of its feature over both sets: a row without an
    echo measure says nothing about its set (as 0 it read as a question sharing no word with its
    evidence, which is what a real question looks like)."""
    present = ~np.isnan(x)
    means = np.array([col[keep].mean() if keep.any() else 0.0 for col, keep in zip(x.T, present.T, strict=True)])
    return np.where(present, x, means)


def rank_auc(scores: np.ndarray, labels: np.ndarray) -> float:
    """The area under the ROC curve by ranks (Mann-Whitney U / (n1 n0)), ties counted half."""
    positives, negatives = scores[labels == 1], scores[labels == 0]
    if len(positives) == 0 or len(negatives) == 0:
        return math.nan
    greater = (positives[:, None] > negatives[None, :]).sum()
    ties = (positives[:, None] == negatives[None, :]).sum()
    return float((greater + 0.5 * ties) / (len(positives) * len(negatives)))


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, steps: int = 50) -> np.ndarray:
    """Weights (bias first) of an L2-regularised logistic regression, by Newton's method."""
    design = np.hstack([np.ones((len(x), 1)), x])
    weights = np.zeros(design.shape[1])
    penalty = np.eye(design.shape[1]) * l2
    penalty[0, 0] = 0.0  # the bias is not shrunk
    for _ in range(steps):
        p = 1 / (1 + np.exp(-design @ weights))
        gradient = design.T @ (p - y) + penalty @ weights
        hessian = design.T @ (design * (p * (1 - p))[:, None]) + penalty
        step = np.linalg.solve(hessian, gradient)
        weights -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return weights


def cross_validated_scores(x: np.ndarray, y: np.ndarray, seed: int = 0) -> np.ndarray:
    """Each row's predicted log-odds of label 1 from a model fit without its fold (folds drawn at
    random, seeded, stratified by label; features standardised on the training folds)."""
    rng = np.random.default_rng(seed)
    fold = np.empty(len(y), dtype=int)
    for label in (0, 1):
        index = np.flatnonzero(y == label)
        fold[rng.permutation(index)] = np.arange(len(index)) % FOLDS
    scores = np.empty(len(y))
    for k in range(FOLDS):
        train, test = fold != k, fold == k
        if not test.any():
            continue
        mean, sd = x[train].mean(axis=0), x[train].std(axis=0)
        sd[sd == 0] = 1.0
        weights = fit_logistic((x[train] - mean) / sd, y[train].astype(float))
        scores[test] = weights[0] + ((x[test] - mean) / sd) @ weights[1:]
    return scores


def _describe(rows: list[dict]) -> dict:
    lengths = np.array([len(row["question"].split()) for row in rows], dtype=float)
    shares = [row["echo_content_share"] for row in rows if row.get("echo_content_share") is not None]
    return {
        "n_questions": len(rows),
        "words": {
            "mean": float(lengths.mean()),
            "p25": float(np.percentile(lengths, 25)),
            "median": float(np.median(lengths)),
            "p75": float(np.percentile(lengths, 75)),
        },
        "question_form_share": float(np.mean([reads_as_question(row["question"]) for row in rows])),
        "echo_content_share": float(np.mean(shares)) if shares else None,
    }


def style_gap(reference: list[dict], synthetic: list[dict], seed: int = 0) -> dict:
    """The style gap of `synthetic` golden rows from `reference` ones; the classifier needs
    FOLDS or more of each."""
    gap: dict[str, Any] = {
        "features": list(FEATURES),
        "reference": _describe(reference),
        "synthetic": _describe(synthetic),
        "classifier_auc": None,
        "feature_auc": {},
        "most_distinguishable": [],
    }
    if min(len(reference), len(synthetic)) < FOLDS:
        return gap
    raw = np.array([features(row) for row in reference + synthetic])
    x = imputed(raw)
    y = np.array([0] * len(reference) + [1] * len(synthetic))
    scores = cross_validated_scores(x, y, seed)
    gap["classifier_auc"] = rank_auc(scores, y)
    # each feature's own AUC: which of them gave the set away (0.5 none; far from 0.5 either way)
    gap["feature_auc"] = {name: rank_auc(x[:, i], y) for i, name in enumerate(FEATURES)}
    order = np.argsort(-scores[len(reference) :], kind="stable")[:WORST]
    gap["most_distinguishable"] = [
        {
            "qid": synthetic[i]["qid"],
            "question": synthetic[i]["question"],
            **{
                name: None if math.isnan(value) else value
                for name, value in zip(FEATURES, raw[len(reference) + i], strict=True)
            },
        }
        for i in order
    ]
    return gap


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.2f}"


def style_lines(gap: dict, names: tuple[str, str]) -> list[str]:
    """The style gap as markdown lines."""
    ref, syn = gap["reference"], gap["synthetic"]
    auc = "n/a (too few questions)" if gap["classifier_auc"] is None else f"{gap['classifier_auc']:.2f}"
    lines = [
        f"Style gap, {names[1]} against {names[0]}: classifier AUC {auc} (0.5 = indistinguishable)",
        "",
        f"| | {names[0]} | {names[1]} |",
        "|---|---|---|",
        f"| words (median [p25, p75]) | {ref['words']['median']:.0f} [{ref['words']['p25']:.0f}, {ref['words']['p75']:.0f}] | "
        f"{syn['words']['median']:.0f} [{syn['words']['p25']:.0f}, {syn['words']['p75']:.0f}] |",
        f"| phrased as a question | {ref['question_form_share']:.0%} | {syn['question_form_share']:.0%} |",
        f"| content words found in the evidence (echo) | {_share(ref['echo_content_share'])} | {_share(syn['echo_content_share'])} |",
    ]
    if gap["most_distinguishable"]:
        lines += ["", f"Most obviously {names[1]}:"] + [f"- {row['question']}" for row in gap["most_distinguishable"]]
    return lines
