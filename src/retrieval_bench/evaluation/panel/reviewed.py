"""What the panel's report says of people's reviews (goldenset.reviews): the questions rejected, by
reason, question set and kind, as the rejection rate of each generator; how the LLM judge agrees
with people on the pairs both graded; and the prediction-powered figures (evaluation.ppi) of every
system beside its uncorrected one, with the paired interval of each system's delta to the best.

The reviewed questions (those a reviewer marked) are taken for a uniformly random sample of the
golden set, as `retrieval-bench review` draws it; reviewing questions picked by hand breaks the
intervals' promise (docs/explanation/ppi.md)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.question_sets import ALL
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.ppi import Estimate, ReviewSample, ppi_mean, ppi_paired
from retrieval_bench.evaluation.score.judged import PREFIX
from retrieval_bench.evaluation.score.per_question import HEADLINE_CUTOFF, headline_column
from retrieval_bench.evaluation.score.reviewed import FINE, JUDGE_ONLY, REVIEW, UNREVIEWED, human_grades
from retrieval_bench.evaluation.stats import ALPHA, cohen_kappa, holm_against_best
from retrieval_bench.goldenset.reviews import GRADES, Reviews, rejections

NO_REVIEWS = "no reviews yet: review a sample (retrieval-bench review) for prediction-powered intervals"
# Below this many reviewed questions the 95% intervals are wide and a review may hold none of a
# rarely wrong judge's mistakes (docs/explanation/ppi.md): said beside the figures.
ENOUGH_REVIEWED = 50


@dataclass(frozen=True)
class ReviewInputs:
    """What the report reads of people's reviews: the reviews (goldenset.reviews; None: none), the
    judged pool's rows (the judge's grades to set against people's) and judge.min_grade (relevant
    from it)."""

    reviews: Reviews | None = None
    judge_rows: Sequence[Mapping[str, Any]] = ()
    min_grade: int = 2


def judge_agreement(reviews: Reviews, judge_rows: Sequence[Mapping[str, Any]], min_grade: int) -> dict:
    """The judge against people on the (question, chunk) pairs both graded: Cohen's kappa on the
    0-3 grades, the confusion matrix (rows the people's grade, columns the judge's), and the judge's
    leniency P(judge relevant | people not relevant), relevant meaning a grade >= judge.min_grade
    (the judged view's threshold). Figures are null without such pairs."""
    human = human_grades(reviews)
    pairs = [
        (human[str(row["qid"])][str(row["chunk_id"])], int(row["grade"]))
        for row in judge_rows
        if row.get("grade") is not None and str(row["chunk_id"]) in human.get(str(row["qid"]), {})
    ]
    people = np.array([p for p, _ in pairs], dtype=np.int64)
    judge = np.array([j for _, j in pairs], dtype=np.int64)
    confusion = [[int(((people == a) & (judge == b)).sum()) for b in GRADES] for a in GRADES]
    not_relevant = people < min_grade
    kappa = cohen_kappa(people, judge) if pairs else float("nan")
    return {
        "n_pairs": len(pairs),
        "kappa": None if np.isnan(kappa) else round(float(kappa), 4),
        "confusion": {"rows": "people's grade 0-3", "columns": "judge's grade 0-3", "counts": confusion},
        "relevant_from_grade": min_grade,
        "leniency": round(float((judge[not_relevant] >= min_grade).mean()), 4) if not_relevant.any() else None,
        "n_people_not_relevant": int(not_relevant.sum()),
    }


def _views(columns) -> list[tuple[str, str, str, str]]:
    """(view, metric, human-truth column, model-truth column) of the headline metrics (mrr, the
    leaderboard's ndcg@k, recall@10 or its nearest cut-off): the strict view (the same labels;
    people only reject questions) and the judged view (people's grades against the judge's)."""
    metrics = leaderboard_metrics(columns)
    recall = headline_column([name for name, _ in metrics], "recall", HEADLINE_CUTOFF)
    out = []
    for name, column in metrics:
        if name.startswith("recall@") and name != recall:
            continue
        out.append(("strict", name, column, column))
        if JUDGE_ONLY + column in columns:
            out.append(("judged", name, PREFIX + column, JUDGE_ONLY + column))
    return out


def _parts(table: pd.DataFrame):
    marks = table[REVIEW].astype(str).to_numpy()
    reviewed = marks != UNREVIEWED
    return reviewed, (marks[reviewed] == FINE).astype(np.float64)


def ppi_figures(aligned: dict[str, pd.DataFrame], best: Mapping[str, str] | None = None) -> dict:
    """{available, note} without reviews; else {available, n_reviewed, n_unreviewed, views: {view:
    {metric: {system: {uncorrected, ppi, human_only, delta_to_best}}}}} over the compared questions
    (aligned as leaderboard.scorable makes them): `uncorrected` the mean of the model's figure over
    every question, `ppi` the PPI++ estimate and 95% interval, `human_only` the reviewed questions'
    interval alone, `delta_to_best` the paired PPI interval of this system minus the best (in the
    strict view `best`: metric -> the leaderboard's best; in the judged view, and without `best`, the
    highest PPI estimate), and as the leaderboard marks
    its systems, `p_holm` (its t test, Holm-adjusted over every pair of systems: holm_against_best) and
    `differs_from_best` (p_holm < alpha)."""
    first = next(iter(aligned.values()))
    if REVIEW not in first or not (first[REVIEW].astype(str) != UNREVIEWED).any():
        return {"available": False, "note": NO_REVIEWS}
    reviewed, keep = _parts(first)
    views: dict[str, dict[str, dict]] = {}
    for view, metric, truth, model in _views(first.columns):
        rows: dict[str, dict] = {}
        for system, table in aligned.items():
            y, f = table[truth].to_numpy(dtype=float), table[model].to_numpy(dtype=float)
            rows[system] = {
                "uncorrected": round(float(f.mean()), 4),
                "ppi": _dict(ppi_mean(y[reviewed], f[reviewed], f[~reviewed], keep)),
                "human_only": _dict(ppi_mean(y[reviewed], f[reviewed], f[~reviewed], keep, lam=0.0)),
            }
        # the leaderboard's best is the strict view's: the judged view's is its own highest estimate
        named = (best or {}).get(metric) if view == "strict" else None
        # the highest PPI estimate; without one (too few reviewed), the highest uncorrected mean, not the first listed
        leader = named or max(
            rows, key=lambda s: ((rows[s]["ppi"] or {}).get("estimate", -1.0), rows[s]["uncorrected"])
        )
        deltas = {s: paired_delta(aligned[leader], t, truth, model) for s, t in aligned.items() if s != leader}

        def p_of_pair(a: str, b: str) -> float | None:
            delta = deltas[b] if a == leader else paired_delta(aligned[a], aligned[b], truth, model)
            return None if delta is None else delta.p_value()

        tested = holm_against_best(leader, list(aligned), p_of_pair)
        for system, delta in deltas.items():
            rows[system]["delta_to_best"] = _dict(delta)
            if system in tested:
                p_holm = tested[system][1]
                rows[system].update(p_holm=round(p_holm, 4), differs_from_best=bool(p_holm < ALPHA))
        views.setdefault(view, {})[metric] = {"best": leader, "systems": rows}
    return {
        "available": True,
        "n_reviewed": int(reviewed.sum()),
        "n_kept": int(keep.sum()),
        "n_unreviewed": int((~reviewed).sum()),
        "assumes": "the reviewed questions are a uniformly random sample of the golden set",
        "too_few": _too_few(int(reviewed.sum())),
        "views": views,
    }


def _too_few(n_reviewed: int) -> str | None:
    if n_reviewed >= ENOUGH_REVIEWED:
        return None
    return (
        f"only {n_reviewed} reviewed questions: below {ENOUGH_REVIEWED} the 95% intervals are wide and may miss "
        "a rarely wrong judge's bias (docs/explanation/ppi.md); review more"
    )


def paired_delta(a: pd.DataFrame, b: pd.DataFrame, truth: str, model: str) -> Estimate | None:
    """The paired PPI interval of B - A on one metric (`truth` the people's column, `model` the
    model's) over the questions of two aligned tables (the same qids in the same order; A's marks)."""
    reviewed, keep = _parts(a)
    y_a, y_b = (t[truth].to_numpy(dtype=float)[reviewed] for t in (a, b))
    f_a, f_b = (t[model].to_numpy(dtype=float) for t in (a, b))
    return ppi_paired(y_a, y_b, f_a, f_b, ReviewSample(reviewed, keep))


def paired_deltas(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """compare's prediction-powered deltas: {view: {metric: the paired PPI interval of B - A}}
    when both tables carry people's reviews, else {} (a reviewed question is one of A's marks)."""
    if REVIEW not in a or REVIEW not in b or not (a[REVIEW].astype(str) != UNREVIEWED).any():
        return {}
    columns = set(a.columns) & set(b.columns)
    out: dict[str, dict] = {}
    for view, metric, truth, model in _views(columns):
        out.setdefault(view, {})[metric] = _dict(paired_delta(a, b, truth, model))
    return out


def reviews_entry(
    every: dict[str, pd.DataFrame],
    board: dict,
    golden: Sequence[Mapping[str, Any]],
    inputs: ReviewInputs,
) -> dict:
    """The leaderboard's `reviews` entry (with inputs.reviews): rejections, the judge's agreement
    (inputs.judge_rows, relevant from inputs.min_grade), and the PPI figures of the compared
    questions (`every`, rejected ones included), each system's delta taken to the board's best over
    all questions."""
    reviews = inputs.reviews
    assert reviews is not None  # the report asks for the entry only with reviews
    best = {metric: ranked["best"] for metric, ranked in board["question_sets"][ALL]["metrics"].items()}
    return {
        "rejections": rejections(golden, reviews),
        "agreement": judge_agreement(reviews, inputs.judge_rows, inputs.min_grade),
        "ppi": ppi_figures(every, best),
    }


def _dict(estimate: Estimate | None) -> dict | None:
    return None if estimate is None else estimate.to_dict()


def _interval(entry: dict | None) -> str:
    return "n/a" if entry is None else f"{entry['estimate']:.3f} [{entry['low']:.3f}, {entry['high']:.3f}]"


def review_lines(report: dict) -> list[str]:
    """The leaderboard's markdown section on reviews: rejections, the judge's agreement, and the
    PPI table per view and metric (or the line saying there are no reviews yet)."""
    figures = report["ppi"]
    lines = ["## Reviews and prediction-powered intervals", ""]
    if not report.get("rejections"):
        return [*lines, figures.get("note", NO_REVIEWS)]
    rejected = report["rejections"]
    reasons = ", ".join(f"{reason} {count}" for reason, count in rejected["by_reason"].items() if count) or "none"
    lines.append(
        f"{rejected['n_reviewed']} questions reviewed, {rejected['n_rejected']} rejected ({reasons}); "
        "rejected questions leave every figure above."
    )
    lines += ["", "| question set | kind | reviewed | rejected | rejection rate |", "|---|---|---:|---:|---:|"]
    for set_name, kinds in rejected["by_set"].items():
        for kind, cell in kinds.items():
            lines.append(
                f"| {set_name} | {kind} | {cell['n_reviewed']} | {cell['n_rejected']} | {cell['rejection_rate']:.1%} |"
            )
    agreement = report["agreement"]
    if agreement["n_pairs"]:
        leniency = "n/a" if agreement["leniency"] is None else f"{agreement['leniency']:.1%}"
        kappa = "n/a" if agreement["kappa"] is None else f"{agreement['kappa']:.3f}"
        lines += [
            "",
            f"Judge against people on {agreement['n_pairs']} pairs: Cohen's kappa {kappa}; leniency "
            f"P(judge relevant | people not, relevant from grade {agreement['relevant_from_grade']}) {leniency}.",
        ]
    if not figures["available"]:
        return [*lines, "", figures["note"]]
    lines += [
        "",
        f"PPI++ estimates and 95% intervals from {figures['n_reviewed']} reviewed questions "
        f"({figures['n_kept']} kept) and {figures['n_unreviewed']} unreviewed; {figures['assumes']}.",
        *([f"Warning: {figures['too_few']}."] if figures["too_few"] else []),
    ]
    for view, metrics in figures["views"].items():
        for metric, entry in metrics.items():
            lines += [
                "",
                f"{view} {metric} (best: {entry['best']})",
                "",
                f"| system | uncorrected | PPI [95%] | people only [95%] | delta to best, PPI [95%] (*: Holm over every pair, p < {ALPHA}) |",
                "|---|---:|---:|---:|---:|",
            ]
            for system, row in entry["systems"].items():
                delta = _interval(row["delta_to_best"]) if "delta_to_best" in row else "best"
                delta += " *" if row.get("differs_from_best") else ""
                lines.append(
                    f"| {system} | {row['uncorrected']:.3f} | {_interval(row['ppi'])} | "
                    f"{_interval(row['human_only'])} | {delta} |"
                )
    return lines


def show_lines(entry: dict, metric: str = "mrr") -> list[str]:
    """`retrieval-bench show`'s lines on reviews: the leaderboard's `reviews` entry in a few lines
    (rejections by reason, rejection rates, the judge's agreement, each system's PPI on `metric`)."""
    if not entry.get("rejections"):
        return [f"reviews: {entry.get('ppi', {}).get('note', NO_REVIEWS)}"]
    rejected, agreement, figures = entry["rejections"], entry["agreement"], entry["ppi"]
    reasons = ", ".join(f"{reason} {count}" for reason, count in rejected["by_reason"].items() if count) or "none"
    rates = "; ".join(
        f"{set_name}/{kind} {cell['rejection_rate']:.0%} of {cell['n_reviewed']}"
        for set_name, kinds in rejected["by_set"].items()
        for kind, cell in kinds.items()
    )
    out = (
        [
            f"reviews: {rejected['n_reviewed']} questions reviewed, {rejected['n_rejected']} rejected ({reasons}), "
            f"left out of every figure; rejection rate: {rates}"
        ]
        if rejected["n_reviewed"]  # chunks graded, no question marked yet: no rate, no interval
        else [f"reviews: chunks graded but no question marked yet; {figures.get('note', NO_REVIEWS)}"]
    )
    if agreement["n_pairs"]:
        kappa = "n/a" if agreement["kappa"] is None else f"{agreement['kappa']:.2f}"
        leniency = "n/a" if agreement["leniency"] is None else f"{agreement['leniency']:.0%}"
        out.append(f"  judge against people ({agreement['n_pairs']} pairs): kappa {kappa}, leniency {leniency}")
    if figures.get("too_few"):
        out.append(f"  warning: {figures['too_few']}")
    for view, metrics in figures.get("views", {}).items():
        if metric not in metrics:
            continue
        for system, row in metrics[metric]["systems"].items():
            out.append(f"  {view} {metric} {system}: {row['uncorrected']:.3f} uncorrected, PPI {_interval(row['ppi'])}")
    return out
