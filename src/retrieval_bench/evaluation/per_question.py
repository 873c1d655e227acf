"""A per_question.csv (the score stage's per-question results): reading it, one way for every
reader (`retrieval-bench compare`, the API, the leaderboard stage), and the metrics it carries."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pandas as pd

from retrieval_bench.io import InputError, first_line


def read_per_question(source: str | Path | bytes, label: str) -> pd.DataFrame:
    """A per_question.csv (a path, or its bytes as committed) with qids as text ("01" is not "1"),
    or a one-line InputError naming `label` when it is missing, not UTF-8 or not a readable CSV."""
    try:
        raw = source if isinstance(source, bytes) else Path(source).read_bytes()
        return pd.read_csv(io.StringIO(raw.decode("utf-8-sig")), dtype={"qid": str})
    except (FileNotFoundError, IsADirectoryError):
        raise InputError(f"{label}: not found (expected a per_question.csv)") from None
    except UnicodeDecodeError as error:
        raise InputError(f"{label}: not UTF-8 text (byte {error.start}); rewrite it as UTF-8") from None
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"{label}: not a readable per_question.csv ({first_line(error)})") from None


def metric_columns(columns) -> list[tuple[str, str]]:
    """(reported name, per-question column) of the compared metrics present in `columns`:
    mrr, ndcg@k (the score stage writes ndcg@10), then recall@k and hit@k by increasing k. The
    names are read off the columns, not taken from metrics.py: a reader of the table must not
    rerun when a metric's definition changes."""
    columns = set(columns)
    names = [("mrr", "reciprocal_rank")] if "reciprocal_rank" in columns else []
    for prefix in ("ndcg", "recall", "hit"):
        ks = sorted(int(match.group(1)) for c in columns if (match := re.fullmatch(rf"{prefix}@(\d+)", c)))
        names += [(f"{prefix}@{k}", f"{prefix}@{k}") for k in ks]
    return names
