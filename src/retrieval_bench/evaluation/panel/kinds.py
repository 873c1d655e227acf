"""The leaderboard's section per question kind: each answerable kind ranked on the metrics that
fit it (a multi-evidence question's complete@k and evidence_recall@k; mrr, ndcg, recall for the
others), with the same intervals and Holm tests as the question sets; unanswerable questions by
each system's abstention figures: does its top-1 score fall when nothing answers?"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from retrieval_bench.evaluation.panel.leaderboard import entry_table, rank_systems
from retrieval_bench.evaluation.score.abstention import (
    KEEP_HITS,
    UNANSWERABLE,
    abstention_summary,
    contradicted,
    top_score_quantiles,
)
from retrieval_bench.evaluation.score.kinds import kinds_present
from retrieval_bench.evaluation.score.per_question import kind_metric_columns
from retrieval_bench.evaluation.stats import tie_level

QUARTILES = [0.25, 0.5, 0.75]
ABSTENTION_COLUMNS = ("abstention_auc", "false_hit_rate", "abstention_threshold")


def kind_sections(
    aligned: dict[str, pd.DataFrame],
    tables: dict[str, pd.DataFrame],
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> dict:
    """{kind: section} for every kind present, when there are two or more or unanswerable ones
    (else {}): an answerable kind's {n_questions, metrics} over the compared questions (`aligned`,
    as leaderboard.scorable gives them), unanswerable's {n_questions, n_answerable, systems:
    {system: abstention figures and top-1 score quartiles}, best} over the questions every
    system's table (`tables`) holds."""
    first = next(iter(tables.values()))
    kinds = kinds_present(first)
    if len(kinds) < 2 and UNANSWERABLE not in kinds:
        return {}
    compared = next(iter(aligned.values()))
    sections: dict[str, dict] = {}
    for kind in kinds:
        if kind == UNANSWERABLE:
            sections[kind] = abstention_section(tables)
            continue
        mask = (compared["kind"] == kind).to_numpy()
        if not mask.any():
            continue
        sections[kind] = {
            "n_questions": int(mask.sum()),
            "metrics": {
                name: rank_systems(
                    {s: t[column].to_numpy(dtype=float)[mask] for s, t in aligned.items()}, resamples, seed, level
                )
                for name, column in kind_metric_columns(kind, compared.columns)
            },
        }
    return sections


def abstention_section(tables: dict[str, pd.DataFrame]) -> dict:
    """Each system's abstention figures (abstention_summary) and the quartiles of its answerable
    and unanswerable questions' top-1 scores, on the questions every table holds less the
    unanswerable ones a judged chunk answers in any table (abstention.contradicted: the judge's or
    a reviewer's grades, per chunking) and the answerable ones without a relevant chunk in any
    table, so every system is read on the same questions
    (`n_contradicted` of them left out); the best system is the one with the highest abstention AUC."""
    common = set.intersection(*(set(t["qid"].astype(str)) for t in tables.values()))
    answered = set().union(*(set(t.loc[contradicted(t), "qid"].astype(str)) for t in tables.values()))
    # an answerable question some system's chunking holds no relevant chunk for is left out of all
    unscorable = set().union(
        *(set(t.loc[(t["kind"] != UNANSWERABLE) & (t["n_relevant"] <= 0), "qid"].astype(str)) for t in tables.values())
    )
    common -= answered | unscorable
    systems: dict[str, dict[str, Any]] = {}
    for name, table in tables.items():
        table = table[table["qid"].astype(str).isin(common)]
        unanswerable = (table["kind"] == UNANSWERABLE).to_numpy()
        answerable = ~unanswerable & (table["n_relevant"].to_numpy() > 0)
        scores = table["top_score"].to_numpy(dtype=float)
        systems[name] = {
            **abstention_summary(table),
            "top_score_answerable": top_score_quantiles(scores[answerable], QUARTILES),
            "top_score_unanswerable": top_score_quantiles(scores[unanswerable], QUARTILES),
        }
    first = next(iter(tables.values()))
    first = first[first["qid"].astype(str).isin(common)]
    aucs = {name: float(row.get("abstention_auc", math.nan)) for name, row in systems.items()}
    best = max(aucs, key=lambda name: -math.inf if math.isnan(aucs[name]) else tie_level(aucs[name]))
    return {
        "n_questions": int((first["kind"] == UNANSWERABLE).sum()),
        "n_contradicted": len(answered),
        "n_answerable": int(((first["kind"] != UNANSWERABLE) & (first["n_relevant"] > 0)).sum()),
        "keep_hits": KEEP_HITS,
        "systems": systems,
        "best": best,
    }


def _number(value: float | None) -> str:
    return "n/a" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{value:.3f}"


def _spread(quartiles: list[float | None]) -> str:
    return f"{_number(quartiles[1])} [{_number(quartiles[0])}, {_number(quartiles[2])}]" if quartiles else "n/a"


def leaderboard_kind_lines(board: dict) -> list[str]:
    """metrics/leaderboard.md's sections per kind (none when board has no kinds)."""
    sections = board.get("kinds") or {}
    if not sections:
        return []
    lines = ["## By question kind", ""]
    for kind, entry in sections.items():
        if kind == UNANSWERABLE:
            lines += abstention_lines(board["systems"], entry)
            continue
        lines += entry_table(board, entry, f"kind {kind}")
        if kind == "multi":
            lines += [
                "complete@k: every piece of evidence has a relevant chunk in the top k; evidence_recall@k: the share of pieces that have one.",
                "",
            ]
    return lines


def abstention_lines(systems: list[str], entry: dict) -> list[str]:
    """The unanswerable section: a row per system."""
    keep = round(entry["keep_hits"] * 100)
    left_out = entry.get("n_contradicted", 0)
    also = f"; {left_out} left out: a judged chunk answers them" if left_out else ""
    lines = [
        f"### kind unanswerable ({entry['n_questions']} questions, beside {entry['n_answerable']} answerable "
        f"ones{also}): does the system know when nothing answers?",
        "",
        "| system | abstention AUC | false-hit rate | threshold | top-1 score, answerable | top-1 score, unanswerable |",
        "|---|---|---|---|---|---|",
    ]
    for system in systems:
        row = entry["systems"][system]
        auc = _number(row.get("abstention_auc"))
        lines.append(
            f"| {system} | {f'**{auc}**' if system == entry['best'] else auc} | {_number(row.get('false_hit_rate'))} | "
            f"{_number(row.get('abstention_threshold'))} | {_spread(row['top_score_answerable'])} | "
            f"{_spread(row['top_score_unanswerable'])} |"
        )
    lines += [
        "",
        "abstention AUC: the chance an answerable question's top-1 score is above an unanswerable one's (0.5: no signal); "
        f"false-hit rate: the share of unanswerable questions whose top-1 score reaches the threshold that keeps {keep}% "
        "of the answerable questions' top-1 hits; top-1 scores: median [quartiles] (docs/reference/metrics.md).",
        "",
    ]
    return lines


def kind_rows(board: dict) -> list[dict]:
    """metrics/leaderboard.csv's rows of the kinds: question_set `kind:<kind>`; the abstention
    figures as metrics without an interval."""
    rows = []
    for kind, entry in (board.get("kinds") or {}).items():
        if kind == UNANSWERABLE:
            for system, row in entry["systems"].items():
                for metric in ABSTENTION_COLUMNS:
                    rows.append(
                        {
                            "question_set": f"kind:{kind}",
                            "metric": metric,
                            "system": system,
                            "best": metric == "abstention_auc" and system == entry["best"],
                            "mean": row.get(metric, math.nan),
                            **dict.fromkeys(("ci_low", "ci_high", "p_vs_best", "p_holm"), math.nan),
                            "differs_from_best": False,
                        }
                    )
            continue
        for metric, ranked in entry["metrics"].items():
            for system, row in ranked["systems"].items():
                rows.append(
                    {
                        "question_set": f"kind:{kind}",
                        "metric": metric,
                        "system": system,
                        "best": system == ranked["best"],
                        **{key: row.get(key, math.nan) for key in ("mean", "ci_low", "ci_high", "p_vs_best", "p_holm")},
                        "differs_from_best": row.get("differs_from_best", False),
                    }
                )
    return rows
