"""The run: the contract between retrieval and scoring, whatever produced it.

A run lists, for each question, the chunks a method retrieved with their scores, best first:
columns qid, chunk_id, rank (1-based, by score then chunk id), score; `retrieval.depth` rows per
question, and beyond them the rest of a tie group that straddles the cut (chunks scoring the same
as the depth-th): which of them made the cut is no chunk id's luck, so every metric at k <= depth
(score.ties expected included) is that of the full ranking. It is stored as data/panel/<system>/run.parquet and
exported as a TREC run on request.
Scoring reads a run and the judgements and never knows the method; a relevant chunk absent
from the run is not retrieved (trec_eval's convention).
"""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError, first_line, quoted
from retrieval_bench.core.files import atomic_open, file_state, open_regular, read_table
from retrieval_bench.core.values import checked_id, finite_score, trec_record

RUN_COLUMNS = ["qid", "chunk_id", "rank", "score"]
MAX_RUN_LINE = 1 << 16  # bytes: a run line holds two ids and two numbers; a longer one is no run (a binary file)


@dataclass(frozen=True)
class Positions:
    """Where one question's judged chunks stand in a ranking: for each, how many chunks scored
    strictly higher (`better`; inf for a chunk the run did not return) and how many scored the
    same, itself included (`tied`, >= 1)."""

    better: np.ndarray
    tied: np.ndarray


def cut_to_depth(run: pd.DataFrame, depth: int) -> pd.DataFrame:
    """A ranked run (from ranked) cut to `depth` rows per question, keeping the whole tie group
    that straddles the cut (the run contract)."""
    at_cut = run.loc[run["rank"] == depth, ["qid", "score"]].set_index("qid")["score"]
    cut_score = run["qid"].map(at_cut).astype(np.float64)  # NaN where a question has fewer rows: none kept past depth
    cut: pd.DataFrame = run[(run["rank"] <= depth) | (run["score"] >= cut_score)].reset_index(drop=True)
    return cut


def ranked(run: pd.DataFrame) -> pd.DataFrame:
    """Sort each question's rows by score (then chunk id) and number them 1, 2, ...; the question
    order of the input is kept."""
    order = {qid: i for i, qid in enumerate(dict.fromkeys(run["qid"]))}
    run = run.assign(_q=run["qid"].map(order)).sort_values(
        ["_q", "score", "chunk_id"], ascending=[True, False, True], kind="stable"
    )
    run["rank"] = run.groupby("_q").cumcount() + 1
    numbered: pd.DataFrame = run[RUN_COLUMNS].reset_index(drop=True)
    return numbered


def from_records(
    records: Iterable[tuple[str, str, float]], depth: int | None = None, where: str = "run"
) -> pd.DataFrame:
    """A run from (qid, chunk_id, score) triples in any order, each chunk once per question (else
    an InputError naming `where`), cut to `depth` per question (whole tie groups at the cut)."""
    run = ranked(
        pd.DataFrame(list(records), columns=["qid", "chunk_id", "score"]).astype(
            {"qid": str, "chunk_id": str, "score": float}
        )
    )
    check_unique(run, where)  # before any cut, which would keep the better of a chunk's two scores silently
    return cut_to_depth(run, depth) if depth is not None else run


def positions(run: pd.DataFrame, qids: list[str], judged_chunk_ids: list[list[str]]) -> list[Positions]:
    """For each question, where its judged chunks stand in the run: how many retrieved chunks
    scored higher and how many the same (itself included); a chunk not retrieved has better =
    inf. The judged chunks' scores come from a join of the run rows holding a judged chunk: no
    Python work per run row (a dict of every row took 6 s of 4 million)."""
    pairs = pd.DataFrame(  # str columns even when empty (no judged chunk at all): merged with str ones
        {
            "qid": pd.Series(
                [str(qid) for qid, judged in zip(qids, judged_chunk_ids, strict=True) for _ in judged], dtype=str
            ),
            "chunk_id": pd.Series([str(chunk_id) for judged in judged_chunk_ids for chunk_id in judged], dtype=str),
        }
    )
    holding = run.loc[run["chunk_id"].isin(pairs["chunk_id"].unique()), ["qid", "chunk_id", "score"]]
    holding = holding.astype({"qid": str, "chunk_id": str})
    merged = pairs.merge(holding, on=["qid", "chunk_id"], how="left", validate="many_to_one")
    score_of = merged["score"].to_numpy(dtype=np.float64)  # NaN: not retrieved
    rows_of = run.groupby("qid", sort=False).indices
    scores = run["score"].to_numpy(dtype=np.float64)
    placed, at = [], 0
    for qid, judged in zip(qids, judged_chunk_ids, strict=True):
        found = score_of[at : at + len(judged)]
        at += len(judged)
        better, tied = np.full(len(judged), math.inf), np.ones(len(judged), dtype=np.int64)
        hit = ~np.isnan(found)
        if hit.any():
            row = scores[rows_of[qid]][None, :]
            better[hit] = np.sum(row > found[hit][:, None], axis=1)
            tied[hit] = np.sum(row == found[hit][:, None], axis=1)
        placed.append(Positions(better, tied))
    return placed


def check_trec_ids(run: pd.DataFrame, where: str) -> None:
    """A TREC run is whitespace-separated (trec_eval splits its lines on blanks): an id holding
    whitespace cannot be written to one, so it is refused rather than written unreadable."""
    for column in ("qid", "chunk_id"):
        ids = pd.Series(run[column].unique(), dtype=object).astype(str)
        blank = ids[ids.str.contains(r"\s", regex=True) | (ids == "")]
        if len(blank):
            raise InputError(
                f"{where}: {column} {quoted(blank.iloc[0])} holds whitespace, which a TREC run (whitespace-separated "
                "fields) cannot carry; use ids without spaces, or leave retrieval.trec_export null"
            )


def write_trec(run: pd.DataFrame, path: str | Path, tag: str) -> None:
    """The run as a TREC run file: `qid Q0 chunk_id rank score tag` per line; ids holding
    whitespace are refused (check_trec_ids), so read_run_file reads back what was written."""
    check_trec_ids(run, f"retrieval.trec_export {path}")
    with atomic_open(path) as handle:
        for qid, chunk_id, rank, score in zip(run["qid"], run["chunk_id"], run["rank"], run["score"], strict=True):
            handle.write(f"{qid} Q0 {chunk_id} {int(rank)} {float(score)!r} {tag}\n")


def checked_file(path: str | Path, where: str, expected: str) -> Path:
    """`path` if it names a regular file, else an InputError naming `where`: a directory, a device
    such as /dev/zero or a FIFO is refused before it is opened (reading one would hang or never end)."""
    state = file_state(path)
    if state is not None:
        raise InputError(f"{where}: {state} (expected {expected})")
    return Path(path)


def _run_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(number, text) of each line of a run file, read at most MAX_RUN_LINE bytes at a time: a
    binary file (a NUL byte, bytes that are not UTF-8, a line of megabytes) is refused at its first
    bad line rather than read whole into memory or its ids taken as text."""
    binary = "expected a TREC run or JSONL text, not a binary file"
    with open_regular(path) as handle:
        for number, raw in enumerate(iter(lambda: handle.readline(MAX_RUN_LINE + 1), b""), 1):
            if len(raw) > MAX_RUN_LINE:
                raise InputError(f"{path}:{number}: a line longer than {MAX_RUN_LINE} bytes; {binary}")
            if b"\0" in raw:
                raise InputError(f"{path}:{number}: holds a NUL byte; {binary}")
            try:  # a byte-order mark on any line (two files joined by cat): no part of its qid
                yield number, raw.decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError:
                raise InputError(f"{path}:{number}: not UTF-8 text; {binary}") from None


def read_run_file(path: str | Path, depth: int | None = None, where: str = "retrieval.run_file") -> pd.DataFrame:
    """A run produced by any system: a TREC run (`qid Q0 chunk_id rank score tag`, whitespace-
    separated) or JSONL with qid, chunk_id and score per line. Rank columns are ignored: rows are
    ordered by score, as trec_eval does. `where` names the setting (or argument) that named it."""
    path = checked_file(path, f"{where} {path}", "a TREC run or .jsonl file")
    records = []
    for number, line in _run_lines(path):
        if not line.strip():
            continue
        at = f"{path}:{number}"
        if path.suffix.lower() == ".jsonl":
            records.append(_jsonl_record(line, at))
        else:
            records.append(trec_record(line, at))
        if not math.isfinite(records[-1][2]):
            raise InputError(f"{at}: score must be a finite number, got {records[-1][2]!r}")
    if not records:
        raise InputError(f"{path}: the run is empty (no line with a qid, a chunk id and a score)")
    return from_records(records, depth, str(path))


def _jsonl_record(line: str, at: str) -> tuple[str, str, float]:
    """(qid, chunk_id, score) of one JSONL run line: ids text or integers (null, 1.5 or a list is
    no id), the score a number (true is not one)."""
    expected = "expected a JSON object with qid, chunk_id and a numeric score"
    try:
        row = json.loads(line)
    except ValueError as error:  # JSONDecodeError, or an integer of over 4,300 digits
        raise InputError(f"{at}: {expected} (invalid JSON: {getattr(error, 'msg', first_line(error))})") from None
    if not isinstance(row, dict) or not {"qid", "chunk_id", "score"} <= row.keys():
        raise InputError(f"{at}: {expected}")
    score = finite_score(row["score"])
    if score is None:
        numeric = isinstance(row["score"], (int, float)) and not isinstance(row["score"], bool)
        raise InputError(
            f"{at}: score must be a finite number, got {quoted(row['score'])}"
            if numeric
            else f"{at}: {expected}, got score {quoted(row['score'])}"
        )
    return checked_id(row["qid"], at, "qid"), checked_id(row["chunk_id"], at, "chunk_id"), score


def check_known_chunks(chunk_ids: Iterable[str], known: set[str], source: str) -> None:
    """Every chunk id `source` names is one of `known` (the chunk table's): a run of another
    chunking scores 0 on every metric against it."""
    unknown = sorted(set(chunk_ids) - known)
    if unknown:
        raise InputError(
            f"{source}: {len(unknown)} chunk ids are not in the chunk table, e.g. {', '.join(map(quoted, unknown[:3]))}"
        )


def check_run(run: pd.DataFrame, qids: list[str], chunk_ids: set[str], source: str) -> pd.DataFrame:
    """A run from outside (made by from_records, which refuses a chunk listed twice) names only
    known chunks and some question of the golden set; returned without the rows naming no question
    of it, which one warning line counts (a qid with a stray character, or of another set, scored
    nothing unsaid)."""
    check_known_chunks(run["chunk_id"], chunk_ids, source)
    asked = set(qids)  # once: a set per question made this quadratic (minutes at 1,000 questions x depth 100)
    known = run["qid"].isin(asked).to_numpy()
    if not known.any():
        raise InputError(
            f"{source}: no question of the golden set is in the run (qids such as {', '.join(map(quoted, qids[:3]))})"
        )
    if not known.all():
        strays = run.loc[~known, "qid"].drop_duplicates().tolist()
        print(
            f"warning: {source}: {int((~known).sum())} results name no question of the golden set "
            f"({len(strays)} qids, e.g. {', '.join(map(quoted, strays[:3]))}): left out",
            file=sys.stderr,
        )
    return run[known].reset_index(drop=True)


def check_unique(run: pd.DataFrame, source: str) -> None:
    """Each chunk is listed once per question."""
    duplicated = run[run.duplicated(["qid", "chunk_id"])]
    if len(duplicated):
        raise InputError(
            f"{source}: question {quoted(duplicated['qid'].iloc[0])} lists chunk {quoted(duplicated['chunk_id'].iloc[0])} twice"
        )


def check_scores(run: pd.DataFrame, source: str) -> None:
    """Every score of a run is a finite number: one NaN would tie with nothing and shift every
    metric of its question (and an expected value over its empty tie group is undefined)."""
    scores = pd.to_numeric(run["score"], errors="coerce").to_numpy(dtype=np.float64)
    finite = np.isfinite(scores)
    if pd.api.types.is_bool_dtype(run["score"]):  # True is no score, though Python counts it as 1
        finite[:] = False
    elif not pd.api.types.is_numeric_dtype(run["score"]):  # a number only: not True, not "0.5" (as a .jsonl run)
        finite &= (
            run["score"]
            .map(lambda value: isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)))
            .to_numpy(dtype=bool)
        )
    bad = np.flatnonzero(~finite)
    if len(bad):
        i = int(bad[0])
        score = run["score"].iloc[i]
        score = score.item() if isinstance(score, np.generic) else score  # nan, not np.float64(nan)
        raise InputError(
            f"{source}: row {i + 1} (question {quoted(run['qid'].iloc[i])}, chunk {quoted(run['chunk_id'].iloc[i])}) "
            f"has score {quoted(score)}; every score must be a finite number ({len(bad)} are not)"
        )


def read_run_table(source: str | Path | IO[bytes], name: str | None = None) -> pd.DataFrame:
    """A run as this pipeline stores it (data/panel/<system>/run.parquet; a path or a binary handle, `name` naming
    it): readable, with RUN_COLUMNS, integer ranks and finite scores, else an InputError naming it."""
    name = name or str(source)
    run = read_table(source, RUN_COLUMNS, name)
    for column, kind, test in (
        ("rank", "integers", pd.api.types.is_integer_dtype),
        ("score", "numbers", pd.api.types.is_numeric_dtype),
    ):
        if not test(run[column]) or pd.api.types.is_bool_dtype(run[column]):
            raise InputError(
                f"{name}: column {column!r} must hold {kind}, got {run[column].dtype}; rerun the retrieve stage"
            )
    check_scores(run, name)
    typed: pd.DataFrame = run.astype({"qid": str, "chunk_id": str, "score": np.float64})
    return typed
