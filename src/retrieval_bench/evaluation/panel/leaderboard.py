"""One leaderboard for a panel of systems scored on the same questions: per question set and
metric, each system's mean with its bootstrap interval, and which systems differ significantly
from the best (paired randomization tests, Holm-corrected over every pair of systems: the best is
picked from the same data, so the m - 1 comparisons with it are not the whole family).
Segments where a system regressed against the panel's first system (the baseline) are found with
Benjamini-Hochberg false-discovery-rate control. Pure functions of per-question tables."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.question_sets import ALL, reference_set
from retrieval_bench.evaluation.score.per_question import HEADLINE_CUTOFF, headline_column, metric_columns
from retrieval_bench.evaluation.score.reviewed import rejected_count
from retrieval_bench.evaluation.stats import (
    ALPHA,
    HOLM,
    holm_against_best,
    paired_bootstrap_ci,
    paired_segment_tests,
    randomization_p_value,
    regression_report,
    tie_level,
)

HEADLINE = ("mrr", "reciprocal_rank")


def leaderboard_metrics(columns) -> list[tuple[str, str]]:
    """(name, per-question column): the metrics compare reports (mrr, ndcg@k, recall@k by
    increasing k), those present, but hit@k and one ndcg@k alone (per_question.headline_column)."""
    metrics = [(name, column) for name, column in metric_columns(columns) if not name.startswith("hit@")]
    ndcg = headline_column([name for name, _ in metrics], "ndcg", HEADLINE_CUTOFF)
    return [(name, column) for name, column in metrics if not name.startswith("ndcg@") or name == ndcg]


def _relevant_qids(table: pd.DataFrame) -> pd.Series:
    """The qids of `table` that have a relevant chunk (all of them without n_relevant)."""
    qids = table["qid"].astype(str)
    return qids[table["n_relevant"].to_numpy() > 0] if "n_relevant" in table else qids


def _answerable(table: pd.DataFrame) -> pd.DataFrame:
    return table[table["kind"] != "unanswerable"] if "kind" in table else table


def scorable(tables: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    """The systems' tables on the questions every system can be scored on (a relevant chunk
    exists in each system's own chunking: n_relevant > 0 in every table), aligned by qid in the
    first table's order."""
    first = next(iter(tables.values()))
    keep = first["qid"].astype(str)
    for table in tables.values():
        keep = keep[keep.isin(set(_relevant_qids(table)))]
    return {
        name: table.assign(qid=table["qid"].astype(str)).set_index("qid").loc[keep.tolist()]
        for name, table in tables.items()
    }


def left_out(tables: dict[str, pd.DataFrame], chunkings: dict[str, str] | None = None) -> dict:
    """Which questions the comparison leaves out and why: {n_questions (every qid in any table),
    n_compared, n_left_out, n_rejected (of the compared ones, a reviewer rejected: they leave every
    figure too), by_system: {system: {no_relevant_chunk, missing, chunking}}}. A
    question is left out when any system cannot score it: no relevant chunk in that system's
    chunking (n_relevant 0), or absent from its table. Unanswerable questions (kind unanswerable)
    are not counted: they have no relevant chunk by definition and their own section (panel.kinds)."""
    tables = {name: _answerable(table) for name, table in tables.items()}
    every = pd.Index(pd.concat([table["qid"].astype(str) for table in tables.values()]).unique())
    compared = set(every)
    by_system = {}
    for name, table in tables.items():
        qids = set(table["qid"].astype(str))
        relevant = set(_relevant_qids(table))
        compared &= relevant
        by_system[name] = {
            "no_relevant_chunk": len(qids - relevant),
            "missing": len(set(every) - qids),
            "chunking": (chunkings or {}).get(name),
        }
    first = next(iter(tables.values()), pd.DataFrame({"qid": []}))
    return {
        "n_questions": len(every),
        "n_compared": len(compared),
        "n_left_out": len(every) - len(compared),
        "n_rejected": rejected_count(first[first["qid"].astype(str).isin(compared)]),
        "by_system": by_system,
    }


def left_out_lines(report: dict) -> list[str]:
    """What left_out found, a line per system that lost questions."""
    rejected = report.get("n_rejected", 0)
    if not report["n_left_out"]:
        kept = f"; {rejected} of them rejected by reviewers leave every figure" if rejected else ""
        return [f"Every system is compared on all {report['n_questions']} questions{kept}."]
    kept = f"; of the {report['n_compared']} compared, {rejected} rejected by reviewers leave every figure"
    lines = [
        f"{report['n_left_out']} of {report['n_questions']} questions are left out of the comparison "
        f"(a system cannot score them){kept if rejected else ''}:"
    ]
    for name, row in report["by_system"].items():
        where = f"chunking {row['chunking']}" if row["chunking"] else "its chunking"
        if row["no_relevant_chunk"]:
            lines.append(f"- {name}: {row['no_relevant_chunk']} questions have no relevant chunk in {where}")
        if row["missing"]:
            lines.append(f"- {name}: {row['missing']} questions are missing from its per-question table")
    return lines


def question_sets(table: pd.DataFrame) -> dict[str, np.ndarray]:
    """Row masks by question set: all, then each set present (hand-written, real, generated)."""
    sets = {ALL: np.ones(len(table), dtype=bool)}
    if "question_set" in table:
        for name in sorted(table["question_set"].dropna().unique()):
            sets[str(name)] = (table["question_set"] == name).to_numpy()
    return sets


def rank_systems(scores: dict[str, np.ndarray], resamples: int, seed: int, level: float) -> dict:
    """One metric on one question set: each system's mean and interval, the best system, and each
    other system's p-value against it, raw (paired randomization test) and Holm-adjusted over every
    pair of systems (stats.holm_against_best)."""
    means = {name: float(values.mean()) for name, values in scores.items()}
    best = max(means, key=lambda name: (tie_level(means[name]), -list(means).index(name)))
    tested = holm_against_best(
        best, list(scores), lambda a, b: randomization_p_value(scores[b] - scores[a], resamples, seed)
    )
    rows = {}
    for name, values in scores.items():
        low, high = paired_bootstrap_ci(values, resamples, seed, level)
        row = {"mean": means[name], "ci_low": low, "ci_high": high}
        if name in tested:
            p_raw, p_holm = tested[name]
            row.update(p_vs_best=p_raw, p_holm=p_holm, differs_from_best=bool(p_holm < ALPHA))
        rows[name] = row
    return {"best": best, "systems": rows}


def leaderboard(aligned: dict[str, pd.DataFrame], resamples: int = 10_000, seed: int = 0, level: float = 0.95) -> dict:
    """The leaderboard of `aligned` (per-question tables by system, in panel order, as scorable
    aligns them)."""
    first = next(iter(aligned.values()))
    metrics = leaderboard_metrics(first.columns)
    sets: dict[str, dict[str, Any]] = {}
    for set_name, mask in question_sets(first).items():
        if mask.sum() == 0:
            continue
        if set_name != ALL and mask.all():  # the only question set: the same figures as "all", not resampled twice
            sets[set_name] = sets[ALL]
            continue
        sets[set_name] = {
            "n_questions": int(mask.sum()),
            "metrics": {
                name: rank_systems(
                    {s: t[column].to_numpy(dtype=float)[mask] for s, t in aligned.items()}, resamples, seed, level
                )
                for name, column in metrics
            },
        }
    reference = reference_set(sets)
    return {
        "systems": list(aligned),
        # the set "best" is read from: the reference when there is one (generated questions may favour
        # a system, docs/explanation/golden-set-trust.md), else all questions
        "headline_set": reference if reference and len(sets) > 2 else ALL,
        "ci_level": level,
        "correction": f"{HOLM} over every pair of systems, per question set and metric, alpha {ALPHA}",
        "question_sets": sets,
        "segment_regressions": segment_regressions(aligned, resamples, seed),
    }


def segment_regressions(aligned: dict[str, pd.DataFrame], permutations: int = 10_000, seed: int = 0) -> dict:
    """Segments (SEGMENT_COLUMNS values with 2+ questions) where a system scores lower on mrr than
    the baseline (the first system), significantly after Benjamini-Hochberg over every test."""
    names = list(aligned)
    baseline, column = names[0], HEADLINE[1]
    base = aligned[baseline]
    tests = [
        {"system": system, **test}
        for system in names[1:]
        for test in paired_segment_tests(base[column], aligned[system][column], base, permutations, seed)
    ]
    return {"baseline": baseline, "metric": HEADLINE[0], **regression_report(tests)}


def cell(row: dict) -> str:
    text = f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]"
    return text + (" *" if row.get("differs_from_best") else "")


def flat_rows(board: dict) -> list[dict]:
    """metrics/leaderboard.csv: one row per question set, metric and system."""
    rows = []
    for set_name, entry in board["question_sets"].items():
        for metric, ranked in entry["metrics"].items():
            for system, row in ranked["systems"].items():
                rows.append(
                    {
                        "question_set": set_name,
                        "metric": metric,
                        "system": system,
                        "best": system == ranked["best"],
                        **{key: row.get(key, math.nan) for key in ("mean", "ci_low", "ci_high", "p_vs_best", "p_holm")},
                        "differs_from_best": row.get("differs_from_best", False),
                    }
                )
    return rows


def markdown(board: dict) -> str:
    """metrics/leaderboard.md: a table per question set, systems by rows, metrics by columns."""
    lines = []
    for set_name in set_order(board):
        lines += entry_table(board, board["question_sets"][set_name], set_title(board, set_name))
    level = round(board["ci_level"] * 100)
    lines.append(
        f"Mean [{level}% bootstrap CI]; bold: the best; *: differs significantly from the best ({board['correction']})."
    )
    if "left_out" in board:
        lines += ["", *left_out_lines(board["left_out"])]
    lines += ["", *segment_lines(board["segment_regressions"])]
    return "\n".join(lines) + "\n"


def entry_table(board: dict, entry: dict, title: str) -> list[str]:
    """One entry's ({n_questions, metrics}) markdown table under its heading, systems by rows."""
    metrics = list(entry["metrics"])
    lines = [
        f"### {title} ({entry['n_questions']} questions)",
        "",
        "| system | " + " | ".join(metrics) + " |",
        "|---" * (len(metrics) + 1) + "|",
    ]
    for system in board["systems"]:
        cells = []
        for metric in metrics:
            ranked = entry["metrics"][metric]
            text = cell(ranked["systems"][system])
            cells.append(f"**{text}**" if system == ranked["best"] else text)
        lines.append(f"| {system} | " + " | ".join(cells) + " |")
    return lines + [""]


def set_order(board: dict) -> list[str]:
    """The question sets, the headline set first."""
    first = board.get("headline_set", ALL)
    rest = [name for name in board["question_sets"] if name != first]
    return [first, *rest] if first in board["question_sets"] else rest


def set_title(board: dict, set_name: str) -> str:
    """A set's heading: the reference is marked as the headline, and `all` as mixed when it mixes sets."""
    if set_name == board.get("headline_set", ALL) and set_name != ALL:
        # score.weights real-mix: the headline is the reweighted table above
        return f"{set_name} (the reference)" if "reweighted" in board else f"{set_name} (the reference: the headline)"
    if set_name == ALL and len(board["question_sets"]) > 2:
        return "all, mixed question sets"
    return set_name


def segment_lines(regressions: dict) -> list[str]:
    if not regressions["regressed"]:
        return [
            f"No segment regressed against {regressions['baseline']} on {regressions['metric']} "
            f"({regressions['tests']} segment tests, {regressions['correction']})."
        ]
    lines = [
        f"Segments that regressed against {regressions['baseline']} on {regressions['metric']} ({regressions['correction']}):"
    ]
    lines += [
        f"- {r['system']}: {r['segment']} = {r['value']} ({r['n_questions']} questions): {r['delta']:+.3f}, p(BH) = {r['p_bh']:.3g}"
        for r in regressions["regressed"]
    ]
    return lines
