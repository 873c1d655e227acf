"""The Python API (a face, like cli.py): score a run against a golden set or qrels, compare two
scored runs, read the inputs, load params.yaml; the pipeline's own code, one import away.

    import retrieval_bench as rb

    chunks = "data/chunkings/default/chunks.parquet"  # the chunk table of the default chunking
    scores = rb.score("data/goldenset.jsonl", "data/panel/default/run.parquet", chunks=chunks)
    scores.metrics["ndcg@10"], scores.per_question.head()
    rb.score({"q1": {"c7": 1}}, {"q1": {"c7": 0.9, "c2": 0.4}}).metrics["mrr"]   # qrels and a run as dicts

Bad input raises retrieval_bench.core.errors.InputError with the one-line message the command line prints;
an argument of the wrong type or out of range too (_check_argument), never a TypeError from deep inside.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Union

import numpy as np
import pandas as pd

from retrieval_bench.core import params as _params
from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.files import read_jsonl, read_table
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.core.question_sets import UNANSWERABLE
from retrieval_bench.core.run_table import check_known_chunks, check_scores, checked_file, from_records, read_run_file
from retrieval_bench.core.values import checked_id
from retrieval_bench.corpus.load import checked_offset
from retrieval_bench.evaluation.compare import command as _compare
from retrieval_bench.evaluation.score.judged import MAX_GRADE, JudgedInputs
from retrieval_bench.evaluation.score.metrics import TIE_POLICIES
from retrieval_bench.evaluation.score.per_question import check_one_row_per_question, read_per_question
from retrieval_bench.evaluation.score.reviewed import REVIEW, kept, rejected_count
from retrieval_bench.evaluation.score.scoring import score_run, score_run_both_views, system_summary
from retrieval_bench.evaluation.score.segments import segments
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.evaluation.stats import MAX_RESAMPLES, Resampling
from retrieval_bench.goldenset.reviews import golden_reviews

if TYPE_CHECKING:
    from typing_extensions import TypeGuard, TypeIs

Comparison = _compare.Comparison
Labels = Union[str, Path, Sequence[Mapping[str, Any]], Mapping[str, Mapping[str, int]]]
RunInput = Union[str, Path, pd.DataFrame, Mapping[str, Mapping[str, float]]]
TableInput = Union[str, Path, pd.DataFrame]
SPAN_COLUMNS = ["doc_id", "start", "end"]
DEFAULT_K = tuple(DEFAULTS["score"]["k"])
DEFAULT_MIN_COVERAGE = DEFAULTS["score"]["min_coverage"]


@dataclass(frozen=True)
class Scores:
    """A scored run: `metrics` as in metrics/panel/<system>/metrics.json, `per_question` as its per_question.csv."""

    metrics: dict[str, Any]
    per_question: pd.DataFrame


def _check_argument(name: str, value: object, expected: str, valid: bool) -> None:
    """The API's one argument check: unless `valid`, an InputError naming the argument, what it
    must be and what it got. Callers test the type first (`_is_whole(v) and v >= 1`), so a wrong
    type is this line, not a TypeError from a comparison deep inside."""
    if not valid:
        raise InputError(f"{name} must be {expected}, got {quoted(value)}")


def _is_whole(value: object) -> TypeGuard[int | np.integer[Any]]:
    """An integer and not a bool (True is an int in Python, but no count)."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    """A finite real number and not a bool."""
    return (
        isinstance(value, (int, float, np.integer, np.floating))
        and not isinstance(value, (bool, np.bool_))
        and math.isfinite(value)
    )


def _is_path(value: object) -> TypeIs[str | Path]:
    return isinstance(value, (str, Path))


def _is_path_or_none(value: object) -> bool:
    return value is None or _is_path(value)


def load_params(path: str | Path = "params.yaml") -> dict[str, dict[str, Any]]:
    """params.yaml validated as the pipeline validates it, every section with its defaults filled in."""
    _check_argument("path", path, "the path of a params.yaml", _is_path(path))
    checked = checked_file(path, f"path {path}", "a params.yaml file")
    params = _params.load_all_params(checked)
    from retrieval_bench.llm.cost.settings import check_llm_sections  # here: `import retrieval_bench.api` stays light

    check_llm_sections(params, str(checked))
    return params


def read_golden(source: Labels) -> list[dict[str, Any]]:
    """Golden-set rows from a golden set (.jsonl, as data/goldenset.jsonl), a qrels file (TREC
    `qid 0 chunk_id grade`, or BEIR `query-id corpus-id score`), a list of rows, or a qrels dict
    {qid: {chunk_id: grade}}. Each row has a qid and either `relevant` {chunk_id: grade} (chunk
    labels) or doc_id, start and end (an evidence span)."""
    if _is_path(source):
        path = checked_file(source, f"labels {source}", "a golden set .jsonl or a qrels file")
        if path.suffix.lower() == ".jsonl":
            return _unique_qids(
                [_golden_row(row, f"{path}:{number}") for number, row in enumerate(read_jsonl(path), 1)], str(path)
            )
        from retrieval_bench.corpus.load import read_qrels

        qrels: dict[str, dict[str, int]] = {}
        for qid, chunk_id, grade in read_qrels(path):
            qrels.setdefault(qid, {})[chunk_id] = grade
        return _qrels_rows(qrels, str(path))
    if isinstance(source, Mapping):
        return _qrels_rows(source, "qrels")
    if isinstance(source, Sequence) and not isinstance(source, (str, bytes)):
        return _unique_qids(
            [_golden_row(row, f"golden row {number}") for number, row in enumerate(source, 1)], "labels"
        )
    raise InputError(
        f"labels: expected a path, a list of golden-set rows or a dict {{qid: {{chunk_id: grade}}}}, got {type(source).__name__}"
    )


def _unique_qids(rows: list[dict[str, Any]], where: str) -> list[dict[str, Any]]:
    """`rows`, at least one and each question once: two rows with one qid would score it twice
    (n_questions 2), and no row would leave nothing to score."""
    if not rows:
        raise InputError(
            f"{where}: no question; expected golden-set rows, each with a qid and relevant {{chunk_id: grade}} "
            "(or doc_id, start, end)"
        )
    check_one_row_per_question((row["qid"] for row in rows), where)
    return rows


def _qrels_rows(qrels: Mapping[Any, Any], where: str) -> list[dict[str, Any]]:
    rows = []
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            raise InputError(f"{where}[{qid!r}]: expected a dict {{chunk_id: grade}}, got {type(judged).__name__}")
        rows.append(_golden_row({"qid": qid, "relevant": judged}, f"{where}[{qid!r}]"))
    if not rows:
        raise InputError(f"{where}: no question")
    return rows


def _golden_row(row: Any, where: str) -> dict[str, Any]:
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
    if row.get("kind") == UNANSWERABLE:  # no evidence by design: scored by abstention, in no ranking mean
        return checked
    if any(row.get(column) is None for column in SPAN_COLUMNS):
        raise InputError(f"{where}: expected 'relevant' {{chunk_id: grade}} or an evidence span (doc_id, start, end)")
    start, end = (checked_offset(row[column], where, column) for column in ("start", "end"))
    if start >= end:  # an empty or reversed span covers nothing: every metric 0
        raise InputError(f"{where}: an evidence span ends after it starts, got start {start}, end {end}")
    return {**checked, "doc_id": checked_id(row["doc_id"], where, "doc_id"), "start": start, "end": end}


def _is_span_row(row: Mapping[str, Any]) -> bool:
    """A golden row (as _golden_row checked it) whose evidence is a span, not chunk labels: scoring
    it needs chunks= to judge which chunks hold the evidence."""
    return row.get("relevant") is None and row.get("kind") != UNANSWERABLE


def read_run(source: RunInput, depth: int | str | None = None) -> pd.DataFrame:
    """A run (columns qid, chunk_id, rank, score; ranked by score, then chunk id) from a DataFrame
    with qid, chunk_id and score, a run file (.parquet as data/panel/<system>/run.parquet, a TREC run, or .jsonl
    of qid/chunk_id/score), or a dict {qid: {chunk_id: score}} (ranx, ir_measures, pytrec_eval);
    `depth` keeps the best `depth` chunks per question (None or 'all': every chunk)."""
    _check_argument(
        "depth",
        depth,
        "a positive whole number of chunks, 'all' or None",
        bool(depth is None or (isinstance(depth, str) and depth == "all") or (_is_whole(depth) and depth >= 1)),
    )
    cut: int | None = None if depth is None or isinstance(depth, str) else depth  # a str here is "all"
    frame: pd.DataFrame
    if _is_path(source):
        path = checked_file(source, f"run {source}", "a run: .parquet, a TREC run or .jsonl")
        if path.suffix.lower() != ".parquet":
            return _checked_run(read_run_file(path, cut, "run"), str(path))
        frame, where = read_table(path), str(path)
    elif isinstance(source, Mapping):
        where = "run"
        for qid, scored in source.items():
            if not isinstance(scored, Mapping):
                raise InputError(f"run[{qid!r}]: expected a dict {{chunk_id: score}}, got {type(scored).__name__}")
        frame = pd.DataFrame(
            [(qid, chunk_id, score) for qid, scored in source.items() for chunk_id, score in scored.items()],
            columns=["qid", "chunk_id", "score"],
        )
    elif isinstance(source, pd.DataFrame):
        frame, where = source, "run DataFrame"
    else:
        raise InputError(
            f"run: expected a DataFrame, a run file path or a dict {{qid: {{chunk_id: score}}}}, got {type(source).__name__}"
        )
    return _checked_run(_run_from_frame(frame, where, cut), where)


def _run_from_frame(frame: pd.DataFrame, where: str, depth: int | None) -> pd.DataFrame:
    missing = [column for column in ("qid", "chunk_id", "score") if column not in frame.columns]
    if missing:
        raise InputError(f"{where}: expected columns qid, chunk_id and score; missing {', '.join(missing)}")
    repeated = sorted({str(c) for c in frame.columns[frame.columns.duplicated()] if c in ("qid", "chunk_id", "score")})
    if repeated:
        raise InputError(
            f"{where}: column {repeated[0]!r} appears more than once; expected one qid, chunk_id and score"
        )
    check_scores(frame, where)
    for column in ("qid", "chunk_id"):
        for value in frame[column].drop_duplicates():
            checked_id(value, where, column)
    scores = pd.to_numeric(frame["score"]).astype(np.float64)
    return from_records(zip(frame["qid"].astype(str), frame["chunk_id"].astype(str), scores, strict=True), depth, where)


def _checked_run(run: pd.DataFrame, where: str) -> pd.DataFrame:
    if run.empty:
        raise InputError(f"{where}: the run is empty")
    return run  # each chunk once per question: from_records, which made it, checked


def score(
    labels: Labels,
    run: RunInput,
    chunks: TableInput | None = None,
    k: Sequence[int] = DEFAULT_K,
    ties: str = "expected",
    min_coverage: float = DEFAULT_MIN_COVERAGE,
    duplicates: TableInput | None = None,
    judged_pool: str | Path | Sequence[Mapping[str, Any]] | None = None,
    min_grade: int = 2,
    ambiguous_at: int = 3,
    budgets: Sequence[int] | None = None,
    budget_unit: str = "chars",
    reviews: str | Path | None = None,
) -> Scores:
    """Score `run` against `labels` as the score stage does (score.k, score.ties,
    score.min_coverage). `chunks` (data/chunkings/default/chunks.parquet or a DataFrame) is needed
    for evidence spans; with chunk labels only it may be left out (n_chunks then counts the chunk
    ids the labels and the run name). `duplicates` (data/chunkings/default/duplicates.parquet) adds
    the judged view, with the pooled LLM grades of `judged_pool` (data/judged_pool.jsonl rows),
    judge.min_grade and judge.ambiguous_at.
    `budgets`, `budget_unit`: score.budgets and score.budget_unit (None: score.budgets' default
    when `chunks` has the length columns, start and end or text, else none). `reviews` (data/reviews,
    with `duplicates`): people's reviews, as the score stage reads them: rejected questions leave the
    figures, people's grades win over the judge's."""
    ks, budgets = _checked_ks(k), _checked_budgets(budgets, budget_unit, chunks)
    _check_argument("ties", ties, f"one of {', '.join(TIE_POLICIES)}", isinstance(ties, str) and ties in TIE_POLICIES)
    _check_argument("min_coverage", min_coverage, "in (0, 1]", _is_real(min_coverage) and 0 < min_coverage <= 1)
    _check_judged_arguments(min_grade, ambiguous_at, judged_pool, duplicates)
    _check_argument(
        "reviews", reviews, "None or the path of a reviews folder (data/reviews)", _is_path_or_none(reviews)
    )
    if reviews is not None and duplicates is None:
        raise InputError("reviews are read only with duplicates= (the judged view they grade): pass both, or neither")
    golden, run_frame = read_golden(labels), read_run(run)
    qids = [row["qid"] for row in golden]
    if not set(qids) & set(run_frame["qid"]):
        raise InputError(f"no question of the labels is in the run (qids such as {', '.join(qids[:3])})")
    table, budgets = _chunk_table(chunks, golden, run_frame, budgets, budget_unit)
    known = set(table["chunk_id"])
    if chunks is not None:
        if not known:
            raise InputError("chunks: no chunk; expected the chunk table the run was retrieved from")
        check_known_chunks(run_frame["chunk_id"], known, "the run")  # another chunking's run: every metric 0
    scoring = Scoring(
        ks=tuple(ks),
        min_coverage=min_coverage,
        ties=ties,
        budgets=tuple(budgets),
        budget_unit=budget_unit,
        min_grade=min_grade,
        ambiguous_at=ambiguous_at,
    )
    if duplicates is None:
        per_question = _with_segments(score_run(golden, table, run_frame, scoring), golden)
        return Scores(system_summary(per_question, len(table), scoring, None, graded=False), per_question)
    copies = _read_table(duplicates, ["group", "chunk_id"], "duplicates")
    if chunks is not None:
        check_known_chunks(copies["chunk_id"].astype(str), known, "duplicates")
    else:  # the table is the chunks the labels and the run name: copies of no other chunk change nothing
        copies = copies[copies["chunk_id"].astype(str).isin(known)]
    pool = _read_pool(judged_pool) if _is_path(judged_pool) else list(judged_pool or [])
    people = None if reviews is None else golden_reviews(_reviews_folder(reviews), set(qids))
    per_question = _with_segments(
        score_run_both_views(golden, table, run_frame, scoring, JudgedInputs(copies, pool, reviews=people)), golden
    )
    summary = system_summary(kept(per_question), len(table), scoring, copies, graded=bool(pool))
    if REVIEW in per_question:
        summary["n_rejected"] = rejected_count(per_question)
    return Scores(summary, per_question)


def _reviews_folder(path: str | Path) -> Path:
    """The reviews folder; none there means no reviews, as in the pipeline (no one has reviewed yet)."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise InputError(f"reviews {path}: not a folder; expected data/reviews, one .jsonl per reviewer")
    return folder


def _with_segments(per_question: pd.DataFrame, golden: list[dict[str, Any]]) -> pd.DataFrame:
    """The per-question rows with their segments (question set, document, folder, length bucket),
    as the score stage writes them; labels without question texts (bare qrels) have none."""
    if not all(isinstance(row.get("question"), str) for row in golden):
        return per_question
    return pd.concat([per_question, segments(golden)], axis=1)


def _check_judged_arguments(min_grade: int, ambiguous_at: int, judged_pool: Any, duplicates: Any) -> None:
    """score's judged-view arguments (judge.min_grade, judge.ambiguous_at, the pool)."""
    _check_argument(
        "min_grade",
        min_grade,
        f"a whole number 1-{MAX_GRADE} (grades run 0-{MAX_GRADE})",
        _is_whole(min_grade) and 1 <= min_grade <= MAX_GRADE,
    )
    _check_argument(
        "ambiguous_at", ambiguous_at, "a positive whole number", _is_whole(ambiguous_at) and ambiguous_at >= 1
    )
    _check_argument(
        "judged_pool",
        judged_pool,
        "None, a path (data/judged_pool.jsonl) or a list of its rows (dicts)",
        judged_pool is None
        or _is_path(judged_pool)
        or (
            isinstance(judged_pool, Sequence)
            and not isinstance(judged_pool, (str, bytes))
            and all(isinstance(row, Mapping) for row in judged_pool)
        ),
    )
    if judged_pool is not None and duplicates is None:
        raise InputError(
            "judged_pool is read only with duplicates= (data/chunkings/<chunking>/duplicates.parquet): pass both, or neither"
        )


def _checked_budgets(budgets: Sequence[int] | None, unit: str, chunks: TableInput | None) -> list[int] | None:
    _check_argument("budget_unit", unit, "chars or words", isinstance(unit, str) and unit in ("chars", "words"))
    if budgets is None:
        return None
    values: list[Any] = (
        list(budgets) if isinstance(budgets, Iterable) and not isinstance(budgets, (str, bytes)) else [None]
    )
    valid = all(_is_whole(v) and v > 0 for v in values) and len(set(values)) == len(values)
    _check_argument("budgets", budgets, "a list of distinct positive integers, or []", valid)
    if values and chunks is None:
        raise InputError(
            "budgets need chunks= (data/chunkings/default/chunks.parquet): the chunks' lengths come from it"
        )
    return sorted(int(v) for v in values)


def _checked_ks(k: Sequence[int]) -> list[int]:
    ks: list[Any] = (
        [k] if _is_whole(k) else list(k) if isinstance(k, Iterable) and not isinstance(k, (str, bytes)) else []
    )
    _check_argument(
        "k",
        k,
        "a non-empty list of distinct positive integers",
        bool(ks) and all(_is_whole(v) and v > 0 for v in ks) and len(set(ks)) == len(ks),
    )
    return sorted(int(v) for v in ks)


def _chunk_table(
    chunks: TableInput | None, golden: list[dict[str, Any]], run: pd.DataFrame, budgets: list[int] | None, unit: str
) -> tuple[pd.DataFrame, list[int]]:
    """The chunks scoring judges against: the given table, or with chunk labels only, every chunk id
    the labels and the run name; and the budgets scored (None: score.budgets' default if the table
    has the columns of the chunks' lengths in `unit`, else none)."""
    spans = any(map(_is_span_row, golden))
    if chunks is None:
        if spans:
            raise InputError(
                "questions with an evidence span (doc_id, start, end) need chunks= "
                "(data/chunkings/default/chunks.parquet) to judge which chunks hold the evidence"
            )
        labelled = {chunk_id for row in golden for chunk_id in row["relevant"]}
        return pd.DataFrame({"chunk_id": sorted(labelled | set(run["chunk_id"]))}), []
    columns = ["chunk_id", *SPAN_COLUMNS] if spans else ["chunk_id"]
    lengths = [c for c in ({"chars": ["start", "end"], "words": ["text"]}[unit]) if c not in columns]
    try:
        table = _read_table(chunks, columns + lengths if budgets != [] else columns, "chunks")
    except InputError:
        if budgets is not None or not lengths:
            raise
        table = _read_table(chunks, columns, "chunks")  # no lengths: the default budgets are left out
    table = table.assign(chunk_id=table["chunk_id"].astype(str))
    if spans:  # ids are text, as _golden_row makes an evidence's doc_id: 7 and "7" are one document
        table = table.assign(doc_id=table["doc_id"].astype(str))
        _check_span_columns(table, golden)
    default = DEFAULTS["score"]["budgets"] if set(lengths) <= set(table.columns) else []
    return table, sorted(default if budgets is None else budgets)


def _check_span_columns(table: pd.DataFrame, golden: list[dict[str, Any]]) -> None:
    """The chunk table's offsets are whole numbers, and every evidence span's document is in it
    (a span in a document the table lacks scored 0 silently)."""
    for column in ("start", "end"):
        if not pd.api.types.is_integer_dtype(table[column]):
            raise InputError(f"chunks: column {column!r} must hold whole character offsets, got {table[column].dtype}")
    documents = set(table["doc_id"])  # text already, as the golden rows' doc_id
    for row in golden:
        if _is_span_row(row) and row["doc_id"] not in documents:
            raise InputError(
                f"question {quoted(row['qid'])}: its evidence's doc_id {quoted(row['doc_id'])} is no document of chunks"
            )


def _read_table(source: TableInput, columns: list[str], what: str) -> pd.DataFrame:
    """The `columns` of a table given as a DataFrame or a .parquet path, or an InputError naming what is missing."""
    if _is_path(source):
        table: pd.DataFrame = read_table(
            checked_file(source, f"{what} {source}", "a .parquet table"), columns, f"{what} {source}"
        )
        return table
    if not isinstance(source, pd.DataFrame):
        raise InputError(f"{what}: expected a DataFrame or a .parquet path, got {type(source).__name__}")
    missing = [column for column in columns if column not in source.columns]
    if missing:
        raise InputError(f"{what} DataFrame: expected columns {', '.join(columns)}; missing {', '.join(missing)}")
    selected: pd.DataFrame = source[columns]
    return selected


def _read_pool(path: str | Path) -> list[dict[str, Any]]:
    return read_jsonl(checked_file(path, f"judged_pool {path}", "data/judged_pool.jsonl rows"))


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
    for name, label in (("a_label", a_label), ("b_label", b_label)):
        _check_argument(name, label, "a string", isinstance(label, str))
    _check_argument(
        "resamples",
        resamples,
        f"a whole number from 1 to {MAX_RESAMPLES}",
        _is_whole(resamples) and 1 <= resamples <= MAX_RESAMPLES,
    )
    _check_argument("seed", seed, "a whole number >= 0", _is_whole(seed) and seed >= 0)
    _check_argument("level", level, "a confidence level between 0 and 1 (e.g. 0.95)", _is_real(level) and 0 < level < 1)
    _check_argument(
        "k", k, "None or a positive whole number (a hit@k column)", bool(k is None or (_is_whole(k) and k >= 1))
    )
    a_table, b_table = _per_question(a, a_label), _per_question(b, b_label)
    if k is not None:
        have = sorted(set(_compare.hit_ks(a_table.columns)) & set(_compare.hit_ks(b_table.columns)))
        _check_argument(
            "k", k, f"a k with a hit@k column in both (have: {', '.join(map(str, have)) or 'none'})", k in have
        )
    return _compare.compare_tables(a_table, b_table, a_label, b_label, Resampling(resamples, seed, level), k=k)


def _per_question(side: Scores | TableInput, label: str) -> pd.DataFrame:
    if isinstance(side, Scores):
        return side.per_question
    if isinstance(side, pd.DataFrame):
        return side
    if _is_path(side):
        return read_per_question(side, f"{label} {side}")
    raise InputError(
        f"{label}: expected Scores, a per-question DataFrame or a per_question.csv path, got {type(side).__name__}"
    )
