"""The Python API (a face, like cli.py): score a run against a golden set or qrels, compare two
scored runs, read the inputs, load params.yaml; the pipeline's own code, one import away.

    import retrieval_bench as rb

    scores = rb.score("data/goldenset.jsonl", "data/run.parquet", chunks="data/chunks.parquet")
    scores.metrics["ndcg@10"], scores.per_question.head()
    rb.score({"q1": {"c7": 1}}, {"q1": {"c7": 0.9, "c2": 0.4}}).metrics["mrr"]   # qrels and a run as dicts

Bad input raises retrieval_bench.io.InputError with the one-line message the command line prints.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Union

import numpy as np
import pandas as pd

from retrieval_bench import params as _params
from retrieval_bench.evaluation import compare as _compare
from retrieval_bench.evaluation.judged import judged_summary
from retrieval_bench.evaluation.metrics import TIE_POLICIES, summarize
from retrieval_bench.evaluation.per_question import read_per_question
from retrieval_bench.evaluation.scoring import score_run, score_run_both_views
from retrieval_bench.evaluation.segments import segments
from retrieval_bench.io import InputError, checked_id, read_jsonl, read_table
from retrieval_bench.run_contract import check_scores, check_unique, from_records, read_run_file

Comparison = _compare.Comparison
Labels = Union[str, Path, Sequence[Mapping[str, Any]], Mapping[str, Mapping[str, int]]]
RunInput = Union[str, Path, pd.DataFrame, Mapping[str, Mapping[str, float]]]
TableInput = Union[str, Path, pd.DataFrame]
SPAN_COLUMNS = ["doc_id", "start", "end"]
DEFAULT_K = tuple(_params.DEFAULTS["score"]["k"])
DEFAULT_MIN_COVERAGE = _params.DEFAULTS["score"]["min_coverage"]


@dataclass(frozen=True)
class Scores:
    """A scored run: `metrics` as in metrics/metrics.json, `per_question` as metrics/per_question.csv."""

    metrics: dict[str, Any]
    per_question: pd.DataFrame


def load_params(path: str | Path = "params.yaml") -> dict[str, dict[str, Any]]:
    """params.yaml validated as the pipeline validates it, every section with its defaults filled in."""
    return _params.load_all_params(path)


def read_golden(source: Labels) -> list[dict]:
    """Golden-set rows from a golden set (.jsonl, as data/goldenset.jsonl), a qrels file (TREC
    `qid 0 chunk_id grade`, or BEIR `query-id corpus-id score`), a list of rows, or a qrels dict
    {qid: {chunk_id: grade}}. Each row has a qid and either `relevant` {chunk_id: grade} (chunk
    labels) or doc_id, start and end (an evidence span)."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: not found (expected a golden set .jsonl or a qrels file)")
        if path.suffix.lower() == ".jsonl":
            return [_golden_row(row, f"{path}:{number}") for number, row in enumerate(read_jsonl(path), 1)]
        from retrieval_bench.corpus.load import read_qrels

        qrels: dict[str, dict[str, int]] = {}
        for qid, chunk_id, grade in read_qrels(path):
            qrels.setdefault(qid, {})[chunk_id] = grade
        return _qrels_rows(qrels, str(path))
    if isinstance(source, Mapping):
        return _qrels_rows(source, "qrels")
    if isinstance(source, Sequence):
        return [_golden_row(row, f"golden row {number}") for number, row in enumerate(source, 1)]
    raise InputError(
        f"labels: expected a path, a list of golden-set rows or a dict {{qid: {{chunk_id: grade}}}}, got {type(source).__name__}"
    )


def _qrels_rows(qrels: Mapping, where: str) -> list[dict]:
    rows = []
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise InputError(f"{where}[{qid!r}]: expected a dict {{chunk_id: grade}}, got {type(judged).__name__}")
        rows.append(_golden_row({"qid": qid, "relevant": judged}, f"{where}[{qid!r}]"))
    if not rows:
        raise InputError(f"{where}: no question")
    return rows


def _golden_row(row: Any, where: str) -> dict:
    """A golden-set row with text ids and integer grades, or an InputError naming `where`."""
    if not isinstance(row, Mapping):
        raise InputError(
            f"{where}: expected a mapping with qid and relevant (or doc_id, start, end), got {type(row).__name__}"
        )
    checked = {**row, "qid": checked_id(row.get("qid"), where, "qid")}
    relevant = row.get("relevant")
    if relevant is not None:
        if not isinstance(relevant, Mapping):
            raise InputError(f"{where}: 'relevant' must map chunk ids to integer grades, got {type(relevant).__name__}")
        for chunk_id, grade in relevant.items():
            if isinstance(grade, (bool, np.bool_)) or not isinstance(grade, (int, np.integer)):
                raise InputError(f"{where}: the grade of chunk {chunk_id!r} must be an integer, got {grade!r}")
        checked["relevant"] = {checked_id(c, where, "chunk id"): int(g) for c, g in relevant.items()}
        return checked
    if any(row.get(column) is None for column in SPAN_COLUMNS):
        raise InputError(f"{where}: expected 'relevant' {{chunk_id: grade}} or an evidence span (doc_id, start, end)")
    return checked


def read_run(source: RunInput, depth: int | None = None) -> pd.DataFrame:
    """A run (columns qid, chunk_id, rank, score; ranked by score, then chunk id) from a DataFrame
    with qid, chunk_id and score, a run file (.parquet as data/run.parquet, a TREC run, or .jsonl
    of qid/chunk_id/score), or a dict {qid: {chunk_id: score}} (ranx, ir_measures, pytrec_eval);
    `depth` keeps the best `depth` chunks per question."""
    if isinstance(source, (str, Path)):
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: not found (expected a run: .parquet, a TREC run or .jsonl)")
        if path.suffix.lower() != ".parquet":
            return _checked_run(read_run_file(path, depth), str(path))
        source, where = read_table(path), str(path)
    elif isinstance(source, Mapping):
        where = "run"
        for qid, scored in source.items():
            if not isinstance(scored, Mapping):
                raise InputError(f"run[{qid!r}]: expected a dict {{chunk_id: score}}, got {type(scored).__name__}")
        source = pd.DataFrame(
            [(qid, chunk_id, score) for qid, scored in source.items() for chunk_id, score in scored.items()],
            columns=["qid", "chunk_id", "score"],
        )
    elif isinstance(source, pd.DataFrame):
        where = "run DataFrame"
    else:
        raise InputError(
            f"run: expected a DataFrame, a run file path or a dict {{qid: {{chunk_id: score}}}}, got {type(source).__name__}"
        )
    return _checked_run(_run_from_frame(source, where, depth), where)


def _run_from_frame(frame: pd.DataFrame, where: str, depth: int | None) -> pd.DataFrame:
    missing = [column for column in ("qid", "chunk_id", "score") if column not in frame.columns]
    if missing:
        raise InputError(f"{where}: expected columns qid, chunk_id and score; missing {', '.join(missing)}")
    check_scores(frame, where)
    for column in ("qid", "chunk_id"):
        for value in frame[column].drop_duplicates():
            checked_id(value, where, column)
    scores = pd.to_numeric(frame["score"]).astype(np.float64)
    return from_records(zip(frame["qid"].astype(str), frame["chunk_id"].astype(str), scores), depth)


def _checked_run(run: pd.DataFrame, where: str) -> pd.DataFrame:
    if run.empty:
        raise InputError(f"{where}: the run is empty")
    check_unique(run, where)
    return run


def score(
    labels: Labels,
    run: RunInput,
    chunks: TableInput | None = None,
    k: Sequence[int] = DEFAULT_K,
    ties: str = "expected",
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    duplicates: TableInput | None = None,
    judged_pool: str | Path | Sequence[Mapping] | None = None,
    min_grade: int = 2,
    ambiguous_at: int = 3,
) -> Scores:
    """Score `run` against `labels` as the score stage does (score.k, score.ties,
    score.min_coverage). `chunks` (data/chunks.parquet or a DataFrame) is needed for evidence spans;
    with chunk labels only it may be left out (n_chunks then counts the chunk ids the labels and
    the run name). `duplicates` (data/duplicates.parquet) adds the judged view, with the pooled LLM
    grades of `judged_pool` (data/judged_pool.jsonl rows), judge.min_grade and judge.ambiguous_at."""
    ks = _checked_ks(k)
    if ties not in TIE_POLICIES:
        raise InputError(f"ties must be one of {', '.join(TIE_POLICIES)}, got {ties!r}")
    if isinstance(min_coverage, bool) or not isinstance(min_coverage, (int, float)) or not 0 < min_coverage <= 1:
        raise InputError(f"min_coverage must be in (0, 1], got {min_coverage!r}")
    golden, run_frame = read_golden(labels), read_run(run)
    qids = [row["qid"] for row in golden]
    if not set(qids) & set(run_frame["qid"]):
        raise InputError(f"no question of the labels is in the run (qids such as {', '.join(qids[:3])})")
    table = _chunk_table(chunks, golden, run_frame)
    if duplicates is None:
        per_question = score_run(golden, table, run_frame, ks, min_coverage, ties)
        return Scores(summarize(per_question, ks, len(table)), _with_segments(per_question, golden))
    copies = _read_table(duplicates, ["group", "chunk_id"], "duplicates")
    pool = _read_pool(judged_pool) if isinstance(judged_pool, (str, Path)) else list(judged_pool or [])
    per_question = score_run_both_views(
        golden, table, run_frame, ks, min_coverage, ties, copies, pool, min_grade, ambiguous_at
    )
    return Scores(
        {**summarize(per_question, ks, len(table)), **judged_summary(per_question, ks, copies)},
        _with_segments(per_question, golden),
    )


def _with_segments(per_question: pd.DataFrame, golden: list[dict]) -> pd.DataFrame:
    """The per-question rows with their segments (question set, document, folder, length bucket),
    as the score stage writes them; labels without question texts (bare qrels) have none."""
    if not all(isinstance(row.get("question"), str) for row in golden):
        return per_question
    return pd.concat([per_question, segments(golden)], axis=1)


def _checked_ks(k: Sequence[int]) -> list[int]:
    ks = [k] if isinstance(k, int) else list(k)
    if (
        not ks
        or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in ks)
        or len(set(ks)) != len(ks)
    ):
        raise InputError(f"k must be a non-empty list of distinct positive integers, got {k!r}")
    return sorted(ks)


def _chunk_table(chunks: TableInput | None, golden: list[dict], run: pd.DataFrame) -> pd.DataFrame:
    """The chunks scoring judges against: the given table, or with chunk labels only, every chunk id
    the labels and the run name."""
    spans = any(row.get("relevant") is None for row in golden)
    if chunks is None:
        if spans:
            raise InputError(
                "questions with an evidence span (doc_id, start, end) need chunks= (data/chunks.parquet) "
                "to judge which chunks hold the evidence"
            )
        labelled = {chunk_id for row in golden for chunk_id in row["relevant"]}
        return pd.DataFrame({"chunk_id": sorted(labelled | set(run["chunk_id"]))})
    table = _read_table(chunks, ["chunk_id", *SPAN_COLUMNS] if spans else ["chunk_id"], "chunks")
    return table.assign(chunk_id=table["chunk_id"].astype(str))


def _read_table(source: TableInput, columns: list[str], what: str) -> pd.DataFrame:
    """The `columns` of a table given as a DataFrame or a .parquet path, or an InputError naming what is missing."""
    if isinstance(source, (str, Path)):
        if not Path(source).is_file():
            raise InputError(f"{what} {source}: not found")
        return read_table(source, columns, f"{what} {source}")
    if not isinstance(source, pd.DataFrame):
        raise InputError(f"{what}: expected a DataFrame or a .parquet path, got {type(source).__name__}")
    missing = [column for column in columns if column not in source.columns]
    if missing:
        raise InputError(f"{what} DataFrame: expected columns {', '.join(columns)}; missing {', '.join(missing)}")
    return source[columns]


def _read_pool(path: str | Path) -> list[dict]:
    if not Path(path).is_file():
        raise InputError(f"judged_pool {path}: not found (expected data/judged_pool.jsonl rows)")
    return read_jsonl(path)


def compare(
    a: Scores | TableInput,
    b: Scores | TableInput,
    a_label: str = "A",
    b_label: str = "B",
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    k: int | None = None,
) -> Comparison:
    """Did B retrieve better than A, question by question: what `retrieval-bench compare` computes
    (paired deltas, bootstrap CI, randomization p-values, wins/ties/losses, flipped questions), from
    two Scores, per-question DataFrames or per_question.csv paths. `comparison.metrics` holds each
    metric's figures; `comparison.to_dict()` is the command's --json report."""
    return _compare.compare_tables(
        _per_question(a, a_label),
        _per_question(b, b_label),
        a_label,
        b_label,
        resamples=resamples,
        seed=seed,
        level=level,
        k=k,
    )


def _per_question(side: Scores | TableInput, label: str) -> pd.DataFrame:
    if isinstance(side, Scores):
        return side.per_question
    if isinstance(side, pd.DataFrame):
        return side
    if isinstance(side, (str, Path)):
        return read_per_question(side, f"{label} {side}")
    raise InputError(
        f"{label}: expected Scores, a per-question DataFrame or a per_question.csv path, got {type(side).__name__}"
    )
