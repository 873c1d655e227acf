"""The panel's plot data (`dvc plots show`), one row per system and point, over the questions the
leaderboard's headline compares: recall at each score.k, and questions by first relevant rank."""

from __future__ import annotations

import re

import pandas as pd

from retrieval_bench.evaluation.score.metrics import rank_histogram

RECALL_COLUMN = re.compile(r"recall@(\d+)")  # the strict view's recall@k (judged_recall@k is the judged view's)


def recall_curve(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(system, k, recall): each system's mean recall@k at every cut-off of score.k."""
    rows = [
        {"system": system, "k": int(match.group(1)), "recall": float(table[column].mean())}
        for system, table in tables.items()
        for column in table.columns
        if (match := RECALL_COLUMN.fullmatch(column))
    ]
    return pd.DataFrame(rows, columns=["system", "k", "recall"])  # panel order, k ascending (score's columns)


def rank_histograms(tables: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """(system, first_relevant_rank, questions): each system's questions per bucket of first relevant rank."""
    frames = [
        rank_histogram(table["first_relevant_rank"]).assign(system=system)
        for system, table in tables.items()
        if "first_relevant_rank" in table  # a per-question table of another tool may lack it
    ]
    columns = ["system", "first_relevant_rank", "questions"]
    return pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
