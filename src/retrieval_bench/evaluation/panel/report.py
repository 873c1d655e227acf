"""Everything the leaderboard stage writes, from the panel systems' per-question tables, their
costs and the golden set: the leaderboard with the costs and the Pareto front, the agreement
certificate with the style gap, their markdown, the quality-vs-cost plot and the headline."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.question_sets import ALL
from retrieval_bench.evaluation.certificate.certify import (
    certificate_lines,
    certificate_summary,
    disagreeing_sets,
    panel_certificate,
)
from retrieval_bench.evaluation.certificate.style_gap import style_lines
from retrieval_bench.evaluation.panel.costs import MACHINE, cost_lines, load_text, plot_rows, with_pareto
from retrieval_bench.evaluation.panel.decision import decision_markdown
from retrieval_bench.evaluation.panel.headline import headline
from retrieval_bench.evaluation.panel.kinds import kind_rows, kind_sections, leaderboard_kind_lines
from retrieval_bench.evaluation.panel.leaderboard import flat_rows, leaderboard, left_out, markdown, scorable
from retrieval_bench.evaluation.panel.plots import rank_histograms, recall_curve
from retrieval_bench.evaluation.panel.reviewed import NO_REVIEWS, ReviewInputs, review_lines, reviews_entry
from retrieval_bench.evaluation.panel.reweighted import headline_entry, reweighted, reweighted_lines, weights_text
from retrieval_bench.evaluation.score.reviewed import has_reviews, kept
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.reviews import golden_reviews


@dataclass(frozen=True)
class PanelInputs:
    """What the leaderboard stage reads: the panel systems' per-question tables, the golden set's
    rows, the systems' cost rows (costs.cost_rows), the goldenset and judge reports whose headline
    numbers go to metrics/headline.json, what costs.measure says of its conditions (repeats, chunks
    embedded, load) and people's reviews (review_inputs)."""

    tables: dict[str, pd.DataFrame]
    golden: list[dict]
    costs: dict[str, dict] = field(default_factory=dict)
    reports: dict[str, dict | None] = field(default_factory=dict)
    measured: dict | None = None
    reviewed: ReviewInputs = ReviewInputs()


def panel_report(inputs: PanelInputs, validity: dict, *, budget_unit: str = "chars", weights: str = "none") -> dict:
    """{leaderboard, certificate, csv rows, markdown, plot (quality_vs_cost rows), recall_curve and
    rank_histograms (plot tables), headline, verdicts, failed}, and the measured ones (their
    figures differ run to run): costs, costs_markdown and decision (metrics/decision.md; "" without
    costs). `budget_unit`: score.budget_unit. `verdicts`: the certificate's line per synthetic set;
    `failed`: the line saying validity.fail_on is met, or None. With people's reviews
    (inputs.reviewed): rejected questions leave every figure, the board's `reviews` entry holds the
    rejections, the judge's agreement with people and the prediction-powered figures. `weights`
    (score.weights): real-mix adds the board's `reweighted` headline (panel.reweighted), which the
    Pareto front, the decision and the summary line then read."""
    tables, golden, costs, reports = inputs.tables, inputs.golden, inputs.costs, inputs.reports
    measured = inputs.measured
    every = scorable(tables)
    aligned = {name: kept(table) for name, table in every.items()}
    gone = left_out(tables, {name: row["chunking"] for name, row in costs.items()})
    if gone["n_questions"] and not gone["n_compared"]:  # else an empty board, said to be "no panel"
        lost = ", ".join(f"{name} {row['no_relevant_chunk']}" for name, row in gone["by_system"].items())
        raise InputError(
            f"no question can be compared: none of the {gone['n_questions']} answerable questions has a relevant chunk "
            f"under every system (questions without one, by system: {lost}); check each system's chunking and "
            "score.min_coverage"
        )
    if gone["n_compared"] and not any(len(table) for table in aligned.values()):
        raise InputError(
            f"no question can be compared: a reviewer rejected every one of the {gone['n_compared']} questions every "
            "system can score (data/reviews)"
        )
    board = leaderboard(aligned)
    board["left_out"] = gone
    board["kinds"] = kind_sections(aligned, {name: kept(table) for name, table in tables.items()})
    if weights == "real-mix" and (entry := reweighted(aligned, golden)) is not None:
        board["reweighted"] = entry
    mrr = headline_entry(board).get("metrics", {}).get("mrr", {}).get("systems", {})
    priced = with_pareto(costs, {name: row["mean"] for name, row in mrr.items()})
    on = "" if board["headline_set"] == ALL else f" of the reference set, {board['headline_set']}"
    if "reweighted" in board:
        on = f", {weights_text(board['reweighted'])}"
    quality = f"mrr over the compared questions{on}"
    measured = measured or {"repeats": 0, "embed_texts": 0, "load_before": None, "load_after": None}
    conditions = load_text(measured)
    figures = {"measured_on": MACHINE, "conditions": conditions, "quality": quality, "systems": priced}
    figures.update({key: measured[key] for key in ("repeats", "embed_texts", "load_before", "load_after")})
    cert = panel_certificate(aligned, golden=golden, validity=validity)
    lines = certificate_lines(cert)
    for name, entry in cert.get("sets", {}).items():
        if entry["style_gap"]:
            lines += ["", *style_lines(entry["style_gap"], (cert["reference"], name))]
    table = "\n".join(reweighted_lines(board)) + "\n" if "reweighted" in board else ""
    table += markdown(board) + "\n".join(["", *leaderboard_kind_lines(board)] if board["kinds"] else [])
    if has_reviews(inputs.reviewed.reviews):
        board["reviews"] = reviews_entry(every, board, golden, inputs.reviewed)
        table += "\n" + "\n".join(review_lines(board["reviews"])) + "\n"
    else:
        board["reviews"] = {"ppi": {"available": False, "note": NO_REVIEWS}}
    compared = on_set(aligned, board["headline_set"])
    decided = bool(priced) and set(priced) == set(mrr)
    again = {"reweighted": board["reweighted"]} if "reweighted" in board else {}  # leaderboard.csv's question_set
    # the headline's questions and weights: all of them reweighted to the real mix, else the headline set's
    headline_tables = aligned if again else compared
    mix = board["reweighted"]["weights"] if again else None
    return {
        "leaderboard": board,
        "costs": figures,
        "costs_markdown": "\n".join(cost_lines(priced, conditions)) + "\n" if priced else "",
        "decision": decision_markdown(board, priced, headline_tables, budget_unit, conditions) if decided else "",
        "certificate": cert,
        "rows": flat_rows(board) + kind_rows(board) + flat_rows({"question_sets": again}),
        "markdown": table + "\n" + "\n".join(lines) + "\n",
        "plot": plot_rows({name: row for name, row in priced.items() if name in mrr}, mrr),
        "recall_curve": recall_curve(compared),
        "rank_histograms": rank_histograms(compared),
        "headline": headline(
            headline_tables,
            reports.get("goldenset"),
            reports.get("judge"),
            cert,
            mix,
            board["reviews"].get("rejections"),
        ),
        "verdicts": certificate_summary(cert) if cert["available"] else [],
        "failed": failed_line(cert, validity["fail_on"]),
    }


def review_inputs(scoring: Scoring) -> tuple[list[dict], ReviewInputs]:
    """The golden set's rows, and what the report reads of people's reviews: the reviews
    (data/reviews/, checked against the golden set), the judged pool's rows (read only with reviews)
    and scoring.min_grade (judge.min_grade)."""
    golden = read_jsonl(paths.GOLDENSET)
    reviews = golden_reviews(paths.REVIEWS, {str(row["qid"]) for row in golden})
    pool = Path(paths.JUDGED_POOL)
    judge_rows = read_jsonl(pool) if has_reviews(reviews) and pool.is_file() else []  # nothing to set against
    return golden, ReviewInputs(reviews, judge_rows, scoring.min_grade)


def on_set(aligned: dict[str, pd.DataFrame], set_name: str) -> dict[str, pd.DataFrame]:
    """The tables' rows of one question set (all of them for `all`)."""
    if set_name == ALL:
        return aligned
    return {name: table[table["question_set"] == set_name] for name, table in aligned.items()}


def failed_line(cert: dict, fail_on: str) -> str | None:
    """The line saying why validity.fail_on fails the stage (disagrees: a set disagrees;
    not-agrees: a set does not agree, or there is no certificate), or None."""
    if fail_on == "none":
        return None
    if not cert.get("available"):
        return None if fail_on == "disagrees" else f"no certificate ({cert.get('reason')})"
    if fail_on == "disagrees":
        bad = {name: "disagrees" for name in disagreeing_sets(cert)}
    else:  # a set too small for a verdict is not `agrees` either
        bad = {name: e["verdict"] for name, e in cert["sets"].items() if e["verdict"] != "agrees"}
        bad.update({name: f"not certified: {why}" for name, why in cert.get("not_certified", {}).items()})
    return f"{', '.join(bad)}: {', '.join(bad.values())} ({fail_on})" if bad else None


def summary_line(board: dict) -> str:
    """One line: the best system on mrr over all questions and those not significantly worse."""
    entry = headline_entry(board)
    if not entry or "mrr" not in entry["metrics"]:
        return "leaderboard: no panel"
    ranked = entry["metrics"]["mrr"]
    if len(ranked["systems"]) == 1:
        return f"leaderboard: one system: {ranked['best']} (mrr {ranked['systems'][ranked['best']]['mean']:.3f})"
    tied = [name for name, row in ranked["systems"].items() if name != ranked["best"] and not row["differs_from_best"]]
    also = (
        f"; not significantly different: {', '.join(tied)}" if tied else "; every other system is significantly worse"
    )
    on = "" if board.get("headline_set", ALL) == ALL else f" of {board['headline_set']}"
    if "reweighted" in board:
        on = f" ({weights_text(board['reweighted'])})"
    return (
        f"leaderboard: best on mrr{on}: {ranked['best']} ({ranked['systems'][ranked['best']]['mean']:.3f}){also} (Holm)"
    )
