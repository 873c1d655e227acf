"""Each question kind scored by the metrics that fit it (metrics.json's by_kind): a
multi-evidence question by complete@k and evidence_recall@k, an answerable one by mrr, ndcg and
recall at the headline cut-off, an unanswerable one by abstention (evaluation.score.abstention).
The kinds are the golden rows' (core.question_sets.QUESTION_KINDS)."""

from __future__ import annotations

import pandas as pd

from retrieval_bench.core.question_sets import QUESTION_KINDS as KINDS
from retrieval_bench.evaluation.score.abstention import abstention_summary
from retrieval_bench.evaluation.score.per_question import kind_metric_columns


def kinds_present(per_question: pd.DataFrame) -> list[str]:
    """The kinds of a per-question table's questions, in KINDS order (single for a table scored
    before kinds)."""
    if "kind" not in per_question:
        return ["single"]
    found = set(per_question["kind"].dropna().astype(str))
    return [kind for kind in KINDS if kind in found] + sorted(found - set(KINDS))


def by_kind(per_question: pd.DataFrame) -> dict[str, dict[str, float | int]]:
    """{kind: {n_questions, its metrics' means over its questions}} with the abstention figures
    under unanswerable; empty when every question is of one answerable kind (the summary's
    figures are then that kind's). A question without a relevant chunk scores 0 here as in the
    summary: the kinds' means and the overall one are over the same questions."""
    kinds = kinds_present(per_question)
    if len(kinds) < 2 and "unanswerable" not in kinds:
        return {}
    summary: dict[str, dict[str, float | int]] = {}
    for kind in kinds:
        rows = per_question[per_question["kind"] == kind]
        entry: dict[str, float | int] = {"n_questions": len(rows)}
        if kind == "unanswerable":
            entry.update({k: v for k, v in abstention_summary(per_question).items() if k != "n_unanswerable"})
        else:
            entry.update(
                {
                    name: float(rows[column].mean())
                    for name, column in kind_metric_columns(kind, rows.columns)
                    if len(rows)
                }
            )
        summary[kind] = entry
    return summary
