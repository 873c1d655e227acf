"""A per_question.csv (the score stage's per-question results): reading it, one way for every
reader (`retrieval-bench compare`, the API, the leaderboard stage), and the metrics it carries."""

from __future__ import annotations

import io
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError, first_line, quoted
from retrieval_bench.core.files import file_state

JUDGED = "judged_"  # the judged view's prefix (evaluation.score.judged.PREFIX)
# The columns a comparison reads besides the metrics, with the values each may hold (empty: none).
RANK_RANGE = (1.0, math.inf, "a rank >= 1")  # first_relevant_rank: fractional under score.ties expected
COUNT_RANGE = (0.0, math.inf, "a count >= 0")
METRIC_RANGE = (0.0, 1.0, "a number in [0, 1]")  # every compared metric is a share or a reciprocal rank


def read_per_question(source: str | Path | bytes, label: str) -> pd.DataFrame:
    """A per_question.csv (a path, or its bytes as committed) with qids as text ("01" is not "1"),
    checked (checked_per_question), or a one-line InputError naming `label` when it is missing, not
    a regular file, not UTF-8, not a readable CSV or holds a value no metric takes."""
    state = None if isinstance(source, bytes) else file_state(source)  # reading a FIFO or a device would never end
    if state is not None:
        raise InputError(f"{label}: {state} (expected a per_question.csv)")
    try:
        raw = source if isinstance(source, bytes) else Path(source).read_bytes()
        table = pd.read_csv(io.StringIO(raw.decode("utf-8-sig")), dtype={"qid": str})
    except UnicodeDecodeError as error:
        raise InputError(f"{label}: not UTF-8 text (byte {error.start}); rewrite it as UTF-8") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"{label}: not a readable per_question.csv ({first_line(error)})") from None
    return checked_per_question(table, label)


def metric_columns(columns) -> list[tuple[str, str]]:
    """(reported name, per-question column) of the compared metrics present in `columns`:
    mrr, ndcg@k (the score stage writes one at every score.k), then recall@k and hit@k by increasing k. The
    names are read off the columns, not taken from metrics.py: a reader of the table must not
    rerun when a metric's definition changes."""
    columns = set(columns)
    names = [("mrr", "reciprocal_rank")] if "reciprocal_rank" in columns else []
    for prefix in ("ndcg", "recall", "hit"):
        ks = sorted(int(match.group(1)) for c in columns if (match := re.fullmatch(rf"{prefix}@(\d+)", c)))
        names += [(f"{prefix}@{k}", f"{prefix}@{k}") for k in ks]
    return names


def kind_metric_columns(kind: str, columns) -> list[tuple[str, str]]:
    """(name, per-question column) of the metrics that fit a question kind, those present: a
    multi-evidence question's complete@k and evidence_recall@k (every k) beside mrr; an
    answerable one's mrr, ndcg@k and recall@k at the headline cut-off; none for unanswerable
    questions (scored by abstention, evaluation.score.abstention)."""
    if kind == "unanswerable":
        return []
    names = [("mrr", "reciprocal_rank")] if "reciprocal_rank" in set(columns) else []
    if kind == "multi":
        for prefix in ("complete", "evidence_recall"):
            ks = sorted(int(m.group(1)) for c in columns if (m := re.fullmatch(rf"{prefix}@(\d+)", str(c))))
            names += [(f"{prefix}@{k}", f"{prefix}@{k}") for k in ks]
        return names
    for prefix in ("ndcg", "recall"):
        column = headline_column(columns, prefix, HEADLINE_CUTOFF)
        names += [(column, column)] if column else []
    return names


# The cut-off of the headline figures (ndcg@k, recall@k in metrics/headline.json) and of the one
# ndcg@k the leaderboard ranks by, and the context budget of the headline's recall_budget@B.
HEADLINE_CUTOFF = 10
HEADLINE_BUDGET = 4000


def headline_column(columns, prefix: str, preferred: int) -> str | None:
    """`prefix@preferred` where `columns` has it, else `prefix@` its largest cut-off, else None: the
    headline follows score.k and score.budgets instead of losing a figure they leave out."""
    cutoffs = [int(match.group(1)) for c in columns if (match := re.fullmatch(rf"{prefix}@(\d+)", str(c)))]
    if not cutoffs:
        return None
    return f"{prefix}@{preferred if preferred in cutoffs else max(cutoffs)}"


def check_one_row_per_question(qids: Iterable[str], where: str) -> None:
    """Each question once: a second row for a qid would count it twice in every mean."""
    counts = pd.Series(list(qids), dtype=object).value_counts(sort=False)
    shared = counts[counts > 1]
    if len(shared):
        more = f"; {len(shared) - 1} more qids are listed more than once too" if len(shared) > 1 else ""
        raise InputError(
            f"{where}: {int(shared.iloc[0])} rows share qid {quoted(shared.index[0])} (a question listed more than "
            f"once would count twice in every mean){more}"
        )


# every figure at a cutoff or budget (metrics.AT_CUTOFF's, recall_budget@B, their judged twins) lies in
# [0, 1]: one rule, not a second list of metric names beside metric_columns'
BOUNDED_FIGURE = re.compile(r"\w+@\d+")


def checked_per_question(table: pd.DataFrame, label: str) -> pd.DataFrame:
    """`table` with qids as text, one row per question, the columns a comparison reads as floats:
    each compared metric (and its judged twin) empty or a number in [0, 1], first_relevant_rank
    empty or >= 1, n_relevant a count; else a one-line InputError naming `label`, the column, the
    qid and the value. An empty value is left out of its metric (with a warning); a text, an
    infinity or a reciprocal rank of 5 would be a silently wrong mean."""
    if "qid" not in table.columns:
        raise InputError(f"{label}: no qid column (expected a per_question.csv)")
    if table["qid"].isna().any():
        raise InputError(f"{label}: row {int(np.flatnonzero(table['qid'].isna())[0]) + 1} has no qid")
    qids = table["qid"].astype(str)
    check_one_row_per_question(qids, label)
    ranges = {column: METRIC_RANGE for _, column in metric_columns(table.columns)}
    # the per-kind and budget figures compare reports too (a complete@5 of 7 was a delta of +6.5)
    ranges |= {str(c): METRIC_RANGE for c in table.columns if BOUNDED_FIGURE.fullmatch(str(c))}
    ranges |= {JUDGED + column: METRIC_RANGE for column in list(ranges) if JUDGED + column in table.columns}
    ranges |= {"first_relevant_rank": RANK_RANGE, "n_relevant": COUNT_RANGE}
    named = table.set_index(qids)  # errors name the qid
    numbers = {
        column: _checked_values(named[column], column, *limits, label).to_numpy()
        for column, limits in ranges.items()
        if column in table.columns
    }
    # One frame of the checked columns laid over the rest, in the table's order: assign() replaces
    # them one by one, leaving a wide table (reviews, judged twins) in 100+ blocks (a PerformanceWarning).
    checked = pd.DataFrame({"qid": qids.to_numpy(), **numbers}, index=table.index)
    rest = table.drop(columns=list(checked.columns))
    return pd.concat([rest, checked], axis=1)[list(table.columns)].copy()


def _checked_values(values: pd.Series, column: str, low: float, high: float, expected: str, label: str) -> pd.Series:
    """`values` as floats (NaN where empty), or an InputError naming the first that is text or
    outside [low, high] (an infinity never inside)."""
    numbers = pd.to_numeric(values, errors="coerce").astype(np.float64)
    empty = values.isna().to_numpy()
    inside = np.isfinite(numbers.to_numpy()) & (numbers.to_numpy() >= low) & (numbers.to_numpy() <= high)
    bad = np.flatnonzero(~(inside | empty))
    if len(bad):
        value = values.iloc[bad[0]]
        value = value.item() if isinstance(value, np.generic) else value
        raise InputError(
            f"{label}: column {column!r}, qid {quoted(values.index[bad[0]])}: {quoted(value)} is not {expected} "
            f"or empty (bad values in the column: {len(bad)} of {len(values)})"
        )
    return numbers


def weighted_mean(values: np.ndarray, kinds: np.ndarray, weights: Mapping[str, float]) -> float:
    """sum_k weights[k] x mean of `values` of kind k (weights over the kinds present, summing to 1)."""
    return float(sum(weight * values[kinds == kind].mean() for kind, weight in weights.items()))


def kinds_of(table: pd.DataFrame) -> np.ndarray:
    """A per-question table's kinds (single for a table scored before kinds)."""
    return table["kind"].astype(str).to_numpy() if "kind" in table else np.full(len(table), "single")
