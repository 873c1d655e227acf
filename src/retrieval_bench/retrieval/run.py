"""The run: the contract between retrieval and scoring, whatever produced it.

A run lists, for each question, the chunks a method retrieved with their scores, best first:
columns qid, chunk_id, rank (1-based, by score then chunk id), score; `retrieval.depth` rows per
question, and beyond them the rest of a tie group that straddles the cut (chunks scoring the same
as the depth-th): which of them made the cut is no chunk id's luck, so every metric at k <= depth
(score.ties expected included) is that of the full ranking. It is stored as data/run.parquet and
exported as a TREC run on request.
Scoring reads a run and the judgements and never knows the method; a relevant chunk absent
from the run is not retrieved (trec_eval's convention).
"""
from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.metrics import Positions
from retrieval_bench.io import InputError, atomic_open, quoted, read_table, read_text_lines

RUN_COLUMNS = ["qid", "chunk_id", "rank", "score"]
QUESTION_BLOCK = 1024  # questions scored at once
CHUNK_BLOCK = 16_384  # chunks scored at once: memory is bounded by QUESTION_BLOCK x CHUNK_BLOCK floats (64 MiB)


@dataclass(frozen=True)
class Questions:
    """What a method gets to ask: ids, texts and, for dense methods, unit vectors (row order)."""

    qids: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None


@dataclass(frozen=True)
class Corpus:
    """What a method searches: chunk ids, texts and, for dense methods, unit vectors (row order)."""

    chunk_ids: list[str]
    texts: list[str]
    vectors: np.ndarray | None = None


def resolve_depth(depth: int | str, n_chunks: int) -> int:
    """retrieval.depth: a positive number of chunks per question, or `all`."""
    return n_chunks if depth == "all" else min(int(depth), n_chunks)


def top_k_blocked(
    score_block: Callable[[slice, slice], np.ndarray], n_questions: int, n_chunks: int, depth: int, progress=None
) -> tuple[np.ndarray, np.ndarray]:
    """The `depth` best chunk indices and scores per question (best first; equal scores by chunk
    index), from scores computed block by block so memory stays bounded at any corpus size."""
    indices = np.empty((n_questions, depth), dtype=np.int64)
    scores = np.empty((n_questions, depth), dtype=np.float32)
    for q0 in range(0, n_questions, QUESTION_BLOCK):
        rows = slice(q0, min(q0 + QUESTION_BLOCK, n_questions))
        best_i = np.empty((rows.stop - q0, 0), dtype=np.int64)
        best_s = np.empty((rows.stop - q0, 0), dtype=np.float32)
        threshold = None  # per row, its depth-th best at the last sort
        for c0 in range(0, n_chunks, CHUNK_BLOCK):
            columns = slice(c0, min(c0 + CHUNK_BLOCK, n_chunks))
            block = np.asarray(score_block(rows, columns), dtype=np.float32)
            if threshold is not None:
                # Only chunks above a question's depth-th best so far can enter its top (a later
                # chunk with an equal score loses on the index): a comparison, not a partition.
                # They are sorted in only once they are as many as the best: a sort per block
                # would cost a third of the products.
                best_i, best_s = _append(best_i, best_s, *_above(block, c0, threshold, strict=True))
            elif min(depth, block.shape[1]) < block.shape[1]:
                best_i, best_s = _append(best_i, best_s, *_above(block, c0, _floor_of_best(block, depth), strict=False))
            else:
                best_i = np.concatenate([best_i, np.tile(np.arange(c0, columns.stop), (block.shape[0], 1))], axis=1)
                best_s = np.concatenate([best_s, block], axis=1)
            if best_i.shape[1] >= (2 * depth if threshold is not None else depth):
                best_i, best_s = _best(best_i, best_s, depth)
                threshold = best_s[:, -1:]
        indices[rows], scores[rows] = _best(best_i, best_s, depth)
        if progress is not None:
            progress.update(rows.stop - q0)
    return indices, scores


def _floor_of_best(block: np.ndarray, keep: int) -> np.ndarray:
    """Per row, a score that at least `keep` of its entries reach, so its `keep` best are all at or
    above it: the keep-th best of the maxima of 4 x keep disjoint groups of columns (each maximum
    is another entry). Two passes over the block, where a partition copies it first and costs
    over half its product; the margin leaves ~15% more candidates than `keep` to merge."""
    groups = min(4 * keep, block.shape[1])
    width = block.shape[1] // groups * groups
    maxima = block[:, :width].reshape(block.shape[0], groups, -1).max(axis=2)
    return np.partition(maxima, groups - keep, axis=1)[:, groups - keep, None]


def _above(block: np.ndarray, c0: int, threshold: np.ndarray, strict: bool) -> tuple[np.ndarray, np.ndarray]:
    """The chunks of `block` scoring above (or, not `strict`, at) each row's `threshold`: their
    indices and scores, row by row, padded to the longest row with entries that sort last."""
    above = block > threshold if strict else block >= threshold
    hit_rows, hit_cols = np.divmod(np.flatnonzero(above), block.shape[1])  # 10x faster than a 2-d nonzero
    counts = np.bincount(hit_rows, minlength=block.shape[0])
    slot = np.arange(len(hit_rows)) - (np.cumsum(counts) - counts)[hit_rows]
    new_i = np.full((block.shape[0], counts.max(initial=0)), np.iinfo(np.int64).max, dtype=np.int64)  # padding sorts last
    new_s = np.full(new_i.shape, -np.inf, dtype=np.float32)
    new_i[hit_rows, slot], new_s[hit_rows, slot] = hit_cols + c0, block[hit_rows, hit_cols]
    return new_i, new_s


def _append(best_i: np.ndarray, best_s: np.ndarray, new_i: np.ndarray, new_s: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if new_i.shape[1] == 0:
        return best_i, best_s
    return np.concatenate([best_i, new_i], axis=1), np.concatenate([best_s, new_s], axis=1)


def _best(best_i: np.ndarray, best_s: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's `depth` best, best first; lexsort breaks equal scores by chunk index."""
    order = np.lexsort((best_i, -best_s), axis=1)[:, :depth]
    return np.take_along_axis(best_i, order, 1), np.take_along_axis(best_s, order, 1)


def whole_ties(indices: np.ndarray, scores: np.ndarray, retrieved: np.ndarray, depth: int,
               row_scores: Callable[[int], np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """From each question's best `depth + 1` chunks (best first; `retrieved` a prefix of each row),
    its best `depth` and, where the next one scores the same as the depth-th, every chunk of that
    tie group, taken from the question's whole row of scores `row_scores(q)` (only such questions
    are scored again). Rows come back best first, equal scores by chunk index, padded at the end
    (retrieved False)."""
    if indices.shape[1] <= depth:  # the whole corpus is in: no cut
        return indices, scores, retrieved
    straddling = np.flatnonzero(retrieved[:, depth] & (scores[:, depth] == scores[:, depth - 1]))
    groups = {}
    for question in straddling.tolist():
        row = np.asarray(row_scores(question), dtype=scores.dtype)
        # The row's depth-th best is at least its lowest score of the depth chunks in hand, so it
        # is found among the chunks at or above that: a partition of a few, not of the corpus.
        candidates = np.flatnonzero(row >= row[indices[question, :depth]].min())
        kth_best = np.partition(row[candidates], len(candidates) - depth)[len(candidates) - depth]
        members = candidates[row[candidates] >= kth_best]
        order = np.lexsort((members, -row[members]))
        groups[question] = (members[order], row[members[order]])
    width = max([depth] + [len(members) for members, _ in groups.values()])
    out_i = np.zeros((len(indices), width), dtype=np.int64)
    out_s = np.zeros((len(indices), width), dtype=scores.dtype)
    out_r = np.zeros((len(indices), width), dtype=bool)
    out_i[:, :depth], out_s[:, :depth], out_r[:, :depth] = indices[:, :depth], scores[:, :depth], retrieved[:, :depth]
    for question, (members, values) in groups.items():
        out_i[question, :len(members)], out_s[question, :len(members)], out_r[question, :len(members)] = members, values, True
    return out_i, out_s, out_r


def cut_to_depth(run: pd.DataFrame, depth: int) -> pd.DataFrame:
    """A ranked run (from _ranked) cut to `depth` rows per question, keeping the whole tie group
    that straddles the cut (the run contract)."""
    at_cut = run.loc[run["rank"] == depth, ["qid", "score"]].set_index("qid")["score"]
    cut_score = run["qid"].map(at_cut).astype(np.float64)  # NaN where a question has fewer rows: none kept past depth
    return run[(run["rank"] <= depth) | (run["score"] >= cut_score)].reset_index(drop=True)


def from_top(qids: list[str], chunk_ids: list[str], indices: np.ndarray, scores: np.ndarray, keep=None) -> pd.DataFrame:
    """A run from per-question chunk indices and scores (rows in any order: they are ranked here); `keep`, a boolean
    mask of the same shape, drops entries (e.g. BM25 chunks sharing no word with the question)."""
    keep = np.ones(indices.shape, dtype=bool) if keep is None else keep
    ids = np.asarray(chunk_ids, dtype=object)
    question, column = np.nonzero(keep)  # row by row, as _ranked would keep them
    chunk, score = indices[question, column], scores[question, column].astype(np.float64)
    if len(set(qids)) < len(qids) or np.isnan(score).any():  # what only _ranked's pandas sort defines
        return _ranked(pd.DataFrame({"qid": np.asarray(qids, dtype=object)[question], "chunk_id": ids[chunk], "score": score}))
    # _ranked's order (question, score descending, chunk id) by integer keys: 10x faster than sorting the strings in pandas.
    used, position = np.unique(chunk, return_inverse=True)
    id_order = np.empty(len(used), dtype=np.int64)
    id_order[np.argsort(ids[used], kind="stable")] = np.arange(len(used))
    order = np.lexsort((id_order[position.ravel()], -score, question))
    question = question[order]
    first = np.searchsorted(question, question)  # each row's question's first row (question is sorted)
    return pd.DataFrame({
        "qid": np.asarray(qids, dtype=object)[question],
        "chunk_id": ids[chunk[order]],
        "rank": np.arange(len(order), dtype=np.int64) - first + 1,
        "score": score[order],
    })


def _ranked(run: pd.DataFrame) -> pd.DataFrame:
    """Sort each question's rows by score (then chunk id) and number them 1, 2, ...; the question
    order of the input is kept."""
    order = {qid: i for i, qid in enumerate(dict.fromkeys(run["qid"]))}
    run = run.assign(_q=run["qid"].map(order)).sort_values(["_q", "score", "chunk_id"], ascending=[True, False, True], kind="stable")
    run["rank"] = run.groupby("_q").cumcount() + 1
    return run[RUN_COLUMNS].reset_index(drop=True)


def from_records(records: Iterable[tuple[str, str, float]], depth: int | None = None) -> pd.DataFrame:
    """A run from (qid, chunk_id, score) triples in any order, cut to `depth` per question (whole
    tie groups at the cut)."""
    run = _ranked(pd.DataFrame(list(records), columns=["qid", "chunk_id", "score"]).astype({"qid": str, "chunk_id": str, "score": float}))
    return cut_to_depth(run, depth) if depth is not None else run


def positions(run: pd.DataFrame, qids: list[str], judged_chunk_ids: list[list[str]]) -> list[Positions]:
    """For each question, where its judged chunks stand in the run: how many retrieved chunks
    scored higher and how many the same (itself included); a chunk not retrieved has better =
    inf."""
    by_qid = {qid: group for qid, group in run.groupby("qid", sort=False)}
    placed = []
    for qid, judged in zip(qids, judged_chunk_ids):
        group = by_qid.get(qid)
        if group is None or not judged:
            placed.append(Positions(np.full(len(judged), math.inf), np.ones(len(judged), dtype=np.int64)))
            continue
        score_of = dict(zip(group["chunk_id"], group["score"]))
        scores = group["score"].to_numpy()
        better, tied = [], []
        for chunk_id in judged:
            score = score_of.get(chunk_id)
            if score is None:
                better.append(math.inf)
                tied.append(1)
            else:
                better.append(float(np.sum(scores > score)))
                tied.append(int(np.sum(scores == score)))
        placed.append(Positions(np.array(better, dtype=np.float64), np.array(tied, dtype=np.int64)))
    return placed


def check_trec_ids(run: pd.DataFrame, where: str) -> None:
    """A TREC run is whitespace-separated (trec_eval splits its lines on blanks): an id holding
    whitespace cannot be written to one, so it is refused rather than written unreadable."""
    for column in ("qid", "chunk_id"):
        ids = pd.Series(run[column].unique(), dtype=object).astype(str)
        blank = ids[ids.str.contains(r"\s", regex=True) | (ids == "")]
        if len(blank):
            raise InputError(f"{where}: {column} {quoted(blank.iloc[0])} holds whitespace, which a TREC run (whitespace-separated "
                             "fields) cannot carry; use ids without spaces, or leave retrieval.trec_export null")


def write_trec(run: pd.DataFrame, path: str | Path, tag: str) -> None:
    """The run as a TREC run file: `qid Q0 chunk_id rank score tag` per line; ids holding
    whitespace are refused (check_trec_ids), so read_run_file reads back what was written."""
    check_trec_ids(run, f"retrieval.trec_export {path}")
    with atomic_open(path) as handle:
        for qid, chunk_id, rank, score in zip(run["qid"], run["chunk_id"], run["rank"], run["score"]):
            handle.write(f"{qid} Q0 {chunk_id} {int(rank)} {float(score)!r} {tag}\n")


def read_run_file(path: str | Path, depth: int | None = None) -> pd.DataFrame:
    """A run produced by any system: a TREC run (`qid Q0 chunk_id rank score tag`, whitespace-
    separated) or JSONL with qid, chunk_id and score per line. Rank columns are ignored: rows are
    ordered by score, as trec_eval does."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"retrieval.run_file {path}: not found")
    records = []
    for number, line in enumerate(read_text_lines(path), 1):
        if not line.strip():
            continue
        if path.suffix.lower() == ".jsonl":
            try:
                row = json.loads(line)
                records.append((str(row["qid"]), str(row["chunk_id"]), float(row["score"])))
            except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                raise InputError(f"{path}:{number}: expected a JSON object with qid, chunk_id and a numeric score") from None
        else:
            fields = line.split()
            if len(fields) != 6:
                raise InputError(f"{path}:{number}: expected a TREC run line 'qid Q0 chunk_id rank score tag', got {len(fields)} fields")
            try:
                records.append((fields[0], fields[2], float(fields[4])))
            except ValueError:
                raise InputError(f"{path}:{number}: score must be a number, got {quoted(fields[4])}") from None
        if not math.isfinite(records[-1][2]):
            raise InputError(f"{path}:{number}: score must be a finite number, got {records[-1][2]!r}")
    if not records:
        raise InputError(f"{path}: the run is empty")
    return from_records(records, depth)


def check_run(run: pd.DataFrame, qids: list[str], chunk_ids: set[str], source: str) -> None:
    """A run from outside names only known questions and chunks, each chunk once per question."""
    unknown_chunks = sorted(set(run["chunk_id"]) - chunk_ids)
    if unknown_chunks:
        raise InputError(f"{source}: {len(unknown_chunks)} chunk ids are not in the chunk table, e.g. {', '.join(map(quoted, unknown_chunks[:3]))}")
    duplicated = run[run.duplicated(["qid", "chunk_id"])]
    if len(duplicated):
        raise InputError(f"{source}: question {quoted(duplicated['qid'].iloc[0])} lists chunk {quoted(duplicated['chunk_id'].iloc[0])} twice")
    present = set(run["qid"])  # once: a set per question made this quadratic (minutes at 1,000 questions x depth 100)
    missing = [qid for qid in qids if qid not in present]
    if len(missing) == len(qids):
        raise InputError(f"{source}: no question of the golden set is in the run (qids such as {', '.join(map(quoted, qids[:3]))})")


def check_scores(run: pd.DataFrame, source: str) -> None:
    """Every score of a run is a finite number: one NaN would tie with nothing and shift every
    metric of its question (and an expected value over its empty tie group is undefined)."""
    scores = pd.to_numeric(run["score"], errors="coerce").to_numpy(dtype=np.float64)
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        i = int(bad[0])
        score = run["score"].iloc[i]
        score = score.item() if isinstance(score, np.generic) else score  # nan, not np.float64(nan)
        raise InputError(f"{source}: row {i + 1} (question {quoted(run['qid'].iloc[i])}, chunk {quoted(run['chunk_id'].iloc[i])}) "
                         f"has score {quoted(score)}; every score must be a finite number ({len(bad)} are not)")


def read_run_table(source: str | Path | IO[bytes], name: str | None = None) -> pd.DataFrame:
    """A run as this pipeline stores it (data/run.parquet; a path or a binary handle, `name` naming
    it): readable, with RUN_COLUMNS, integer ranks and finite scores, else an InputError naming it."""
    name = name or str(source)
    run = read_table(source, RUN_COLUMNS, name)
    for column, kind, test in (("rank", "integers", pd.api.types.is_integer_dtype), ("score", "numbers", pd.api.types.is_numeric_dtype)):
        if not test(run[column]) or pd.api.types.is_bool_dtype(run[column]):
            raise InputError(f"{name}: column {column!r} must hold {kind}, got {run[column].dtype}; rerun the retrieve stage")
    check_scores(run, name)
    return run.astype({"qid": str, "chunk_id": str, "score": np.float64})
