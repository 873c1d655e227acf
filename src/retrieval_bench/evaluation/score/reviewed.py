"""What people's reviews (goldenset.reviews, data/reviews/) change in a system's scores: a question
a reviewer rejected leaves the summary, a person's grade of a (question, chunk) pair wins over the
judge's in the judged view, and per_question.csv says of each question what the reviewers said
(`review`) and keeps the judge-only judged figure (`judge_only_<metric>`): the model's figure the
prediction-powered intervals correct (evaluation.ppi). With no review, nothing here is used and
the stage's outputs are what they were."""

from __future__ import annotations

from collections.abc import Collection

import pandas as pd

from retrieval_bench.goldenset.reviews import Reviews

REVIEW = "review"  # per_question.csv's column: unreviewed, fine or the mark that rejected the question
UNREVIEWED, FINE = "unreviewed", "fine"
JUDGE_ONLY = "judge_only_"  # the judged view's metric before people's grades replace the judge's


def has_reviews(reviews: Reviews | None) -> bool:
    return reviews is not None and (len(reviews.questions) > 0 or len(reviews.grades) > 0)


def review_marks(reviews: Reviews, qids: list[str]) -> list[str]:
    """Per qid: the rejecting mark (Reviews.rejected), fine when every reviewer who marked it said
    so, else unreviewed. A question is reviewed when some reviewer marked it (grades alone do not
    make it reviewed: its sample membership is the mark)."""
    rejected = dict(zip(reviews.rejected()["qid"], reviews.rejected()["mark"], strict=True))
    marked = set(reviews.questions["qid"])
    return [rejected.get(qid, FINE if qid in marked else UNREVIEWED) for qid in qids]


def human_grades(reviews: Reviews, chunk_ids: Collection[str] | None = None) -> dict[str, dict[str, int]]:
    """qid -> chunk id -> the people's grade: with several reviewers, the lower median of their
    grades (an integer on the UMBRELA scale; the lower so a tie between relevant and not is not).
    With `chunk_ids`, only those chunks: the page shows chunks of every panel system's chunking,
    a system is scored on its own."""
    out: dict[str, dict[str, int]] = {}
    for (qid, chunk_id), group in reviews.grades.groupby(["qid", "chunk_id"], sort=True):
        if chunk_ids is not None and chunk_id not in chunk_ids:
            continue
        values = sorted(int(grade) for grade in group["grade"])
        out.setdefault(str(qid), {})[str(chunk_id)] = values[(len(values) - 1) // 2]
    return out


def with_human_grades(
    judge: dict[str, dict[str, int | None]], human: dict[str, dict[str, int]]
) -> dict[str, dict[str, int | None]]:
    """The judge's grades with a person's grade in place of the judge's for the same pair (and
    added where the judge graded none)."""
    merged = {qid: dict(chunks) for qid, chunks in judge.items()}
    for qid, chunks in human.items():
        merged.setdefault(qid, {}).update(chunks)
    return merged


def kept(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of `table` no reviewer rejected (all of them without a review column)."""
    if REVIEW not in table:
        return table
    return table[table[REVIEW].isin([UNREVIEWED, FINE])]


def rejected_count(table: pd.DataFrame) -> int:
    return len(table) - len(kept(table))
