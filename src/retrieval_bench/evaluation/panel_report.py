"""Everything the leaderboard stage writes, from the panel systems' per-question tables and the
golden set: the leaderboard, the agreement certificate with the style gap, and their markdown."""

from __future__ import annotations

import pandas as pd

from retrieval_bench.evaluation.certify import below_threshold_line, certificate_lines, panel_certificate
from retrieval_bench.evaluation.leaderboard import flat_rows, leaderboard, markdown, scorable
from retrieval_bench.evaluation.segments import question_set
from retrieval_bench.evaluation.style_gap import style_gap, style_lines

NO_PANEL = "No panel: params.yaml names no panel systems (the single system's scores are in metrics/metrics.json)."


def panel_report(tables: dict[str, pd.DataFrame], golden: list[dict], validity: dict) -> dict:
    """{leaderboard, certificate, csv rows, markdown, warning}: `warning` is the one line saying
    the certificate is below validity.threshold, or None."""
    if not tables:
        empty = {"systems": [], "question_sets": {}}
        return {
            "leaderboard": empty,
            "certificate": {"available": False, "reason": "no panel"},
            "rows": [],
            "markdown": NO_PANEL + "\n",
            "warning": None,
        }
    aligned = scorable(tables)
    board = leaderboard(aligned)
    cert = panel_certificate(aligned, validity["threshold"])
    lines = certificate_lines(cert)
    if cert["available"]:
        by_set = {
            name: [row for row in golden if question_set(row) == name]
            for name in (cert["reference"], cert["synthetic"])
        }
        cert["style_gap"] = style_gap(by_set[cert["reference"]], by_set[cert["synthetic"]])
        lines += ["", *style_lines(cert["style_gap"], (cert["reference"], cert["synthetic"]))]
    return {
        "leaderboard": board,
        "certificate": cert,
        "rows": flat_rows(board),
        "markdown": markdown(board) + "\n" + "\n".join(lines) + "\n",
        "warning": below_threshold_line(cert),
    }


def summary_line(board: dict) -> str:
    """One line: the best system on mrr over all questions and those not significantly worse."""
    entry = board["question_sets"].get("all")
    if not entry or "mrr" not in entry["metrics"]:
        return "leaderboard: no panel"
    ranked = entry["metrics"]["mrr"]
    if len(ranked["systems"]) == 1:
        return f"leaderboard: one system: {ranked['best']} (mrr {ranked['systems'][ranked['best']]['mean']:.3f})"
    tied = [name for name, row in ranked["systems"].items() if name != ranked["best"] and not row["differs_from_best"]]
    also = (
        f"; not significantly different: {', '.join(tied)}" if tied else "; every other system is significantly worse"
    )
    return f"leaderboard: best on mrr: {ranked['best']} ({ranked['systems'][ranked['best']]['mean']:.3f}){also} (Holm)"
