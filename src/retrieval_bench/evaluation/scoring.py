"""Score one retrieval method on the golden set: judge the chunks, place them, compute every
metric per question (retrieval_bench.evaluation.metrics) and the summary for metrics.json."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.metrics import score_question
from retrieval_bench.retrieval.rank import judged_ranks
from retrieval_bench.evaluation.relevance import judge

UNSCORABLE_EXAMPLES = 5


def score_questions(
    golden: list[dict],
    chunks: pd.DataFrame,
    score_batch: Callable[[slice], np.ndarray],
    ks: list[int],
    min_coverage: float,
    ties: str,
    progress=None,
) -> pd.DataFrame:
    """per_question.csv: one row per golden-set question, in order."""
    judgements = judge(golden, chunks, min_coverage)
    positions = judged_ranks(score_batch, len(golden), [j.indices for j in judgements], progress)
    rows = [
        {"qid": row["qid"], **score_question(judgement, placed, ks, ties)}
        for row, judgement, placed in zip(golden, judgements, positions)
    ]
    return pd.DataFrame(rows)


def unscorable_warning(per_question: pd.DataFrame) -> str | None:
    """A warning naming how many questions have no relevant chunk in this chunking, or None."""
    unscorable = per_question.loc[per_question["n_relevant"] == 0, "qid"].astype(str).tolist()
    if not unscorable:
        return None
    examples = ", ".join(unscorable[:UNSCORABLE_EXAMPLES]) + (", ..." if len(unscorable) > UNSCORABLE_EXAMPLES else "")
    return (
        f"{len(unscorable)} of {len(per_question)} questions have no relevant chunk in this chunking ({examples}): "
        "they score 0 on every metric; see score.min_coverage and the README's relevance rule"
    )

