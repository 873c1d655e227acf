"""The judged view: every metric again, counting what the golden set cannot see.

The strict view (evaluation.score.scoring) scores a run against the golden set's labels: one passage
per synthetic question. The judged view adds, per question:

- duplicates: a chunk duplicating a judged chunk (corpus.duplicates: the same normalised text,
  or a near-duplicate) is judged like it, with the same gain and, for span questions, covering the
  same stretch of the evidence;
- pooled LLM judgements (goldenset.judge, stage judge): a chunk graded >= judge.min_grade is
  relevant, with gain = grade / 3 x the question's best strict gain (1 for a span question whose
  evidence a chunk holds whole), and for a span question it counts as holding the whole evidence
  (it answers the question). Unjudged chunks are not relevant (trec_eval's convention), and a
  chunk that real labels judge keeps that judgement (a person's grade, 0 included, stands).

Copies are one answer: of the chunks of one duplicate group judged for a question, only the
best-placed in the run counts (with the group's best gain); the other copies are left out of that
question's ranking, as a retriever deduplicating its results would show them, so returning the
same text twice neither earns twice nor inflates an ideal ranking. Then every metric is computed
exactly as in the strict view (evaluation.score.metrics: same tie policy, same recall variants). With
no duplicate of a judged chunk and no judgement, the judged view equals the strict one.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError, quoted
from retrieval_bench.core.paths import DEFAULT as DEFAULT_CHUNKING
from retrieval_bench.core.relevance import Judgement
from retrieval_bench.core.run_table import positions
from retrieval_bench.corpus.duplicates import group_members
from retrieval_bench.evaluation.score.metrics import score_question, summary_names
from retrieval_bench.evaluation.score.settings import Scoring
from retrieval_bench.goldenset.reviews import Reviews

PREFIX = "judged_"
MAX_GRADE = 3


@dataclass
class Item:
    gain: float
    start: int | None
    end: int | None
    source: str  # gold (the golden set's own judgement), duplicate, judge


@dataclass(frozen=True)
class JudgedInputs:
    """What the judged view reads beside the golden set and the run: the chunk table's duplicates
    (corpus.duplicates), the pooled LLM grades (`pool_rows`, the rows of data/judged_pool.jsonl;
    `pool_path` names it in errors) and people's reviews (goldenset.reviews; None: none)."""

    duplicates: pd.DataFrame
    pool_rows: Sequence[Mapping[str, Any]] = ()
    pool_path: str = "judged pool"
    reviews: Reviews | None = None
    # The judge pools and grades the default chunking's chunks. False: the system is on another
    # chunking, and takes the grades of the chunks it shares with it (the same id: the same span
    # of the same document) and no others, where a chunk of the pool this table lacks is a stale pool.
    pooled_chunking: bool = True


@dataclass(frozen=True)
class ChunkCopies:
    """The chunk table's ids (by row), each id's row and each chunk's duplicates
    (corpus.duplicates.group_members): what judging a judged chunk's copies like it reads."""

    chunk_ids: np.ndarray
    index_of: dict[str, int]
    members: dict[str, list[str]]
    spans: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # each row's document, start and end

    @classmethod
    def of(cls, chunks: pd.DataFrame, duplicates: pd.DataFrame) -> ChunkCopies:
        chunk_ids = chunks["chunk_id"].to_numpy()
        spans = (
            (
                chunks["doc_id"].astype(str).to_numpy(),
                pd.to_numeric(chunks["start"], errors="coerce").to_numpy(float),
                pd.to_numeric(chunks["end"], errors="coerce").to_numpy(float),
            )
            if {"doc_id", "start", "end"} <= set(chunks.columns)
            else None
        )
        return cls(chunk_ids, {chunk_id: i for i, chunk_id in enumerate(chunk_ids)}, group_members(duplicates), spans)

    def copies_of(self, index: int) -> list[int]:
        """The rows that copy row `index`: its duplicate group but for itself and the windows of its
        own document that overlap it (a chunking with a large overlap makes those near-duplicates;
        counted as copies, a window holding none of a question's evidence was credited with it)."""
        rows = [self.index_of[m] for m in self.members.get(self.chunk_ids[index], ())]
        if self.spans is None:
            return [row for row in rows if row != index]
        docs, starts, ends = self.spans  # NaN (no offsets) overlaps nothing
        return [
            row
            for row in rows
            if row != index
            and not (docs[row] == docs[index] and starts[row] < ends[index] and starts[index] < ends[row])
        ]


def pool_grades(
    rows: Sequence[Mapping[str, Any]], qids: set[str], chunk_ids: set[str], where: str, pooled_chunking: bool = True
) -> dict[str, dict[str, int | None]]:
    """qid -> chunk id -> grade (None: pooled, not judged) from the rows of data/judged_pool.jsonl
    (on another chunking than the pooled one, `pooled_chunking` False: only the chunks it shares)."""
    grades: dict[str, dict[str, int | None]] = {}
    for number, row in enumerate(rows, 1):
        qid, chunk_id, grade = str(row.get("qid")), str(row.get("chunk_id")), row.get("grade")
        if chunk_id not in chunk_ids:
            if not pooled_chunking:
                continue
            raise InputError(
                f"{where}:{number}: chunk {quoted(chunk_id)} is not in the chunk table; rerun the judge stage"
            )
        if grade is not None and (isinstance(grade, bool) or not isinstance(grade, int) or not 0 <= grade <= MAX_GRADE):
            raise InputError(f"{where}:{number}: grade must be an integer 0-{MAX_GRADE} or null, got {quoted(grade)}")
        if qid in qids:
            grades.setdefault(qid, {})[chunk_id] = grade
    return grades


def _items(
    judgement: Judgement,
    grades: dict[str, int | None],
    copies: ChunkCopies,
    min_grade: int,
    *,
    labelled: set[str],
) -> dict[int, Item]:
    index_of = copies.index_of
    span = judgement.span
    _, starts, ends = judgement.evidence() if span is not None else (None, None, None)
    items: dict[int, Item] = {}
    for position, index in enumerate(judgement.indices.tolist()):
        start = int(starts[position]) if starts is not None else None
        end = int(ends[position]) if ends is not None else None
        items[index] = Item(float(judgement.gains[position]), start, end, "gold")
    best = float(judgement.gains.max()) if len(judgement.gains) and judgement.gains.max() > 0 else 1.0
    whole_start, whole_end = span if span is not None else (None, None)
    for chunk_id, grade in grades.items():
        if chunk_id in labelled:  # a person's judgement (real labels) stands
            continue
        index = index_of[chunk_id]
        old = items.get(index)
        if grade is not None and grade >= min_grade and (old is None or old.gain <= 0):
            items[index] = Item(best * grade / MAX_GRADE, whole_start, whole_end, "judge")
    for index, item in list(items.items()):  # the relevant chunks' copies are judged like them
        if item.gain <= 0:  # a chunk below min_coverage: its copies stay unjudged and in the run
            continue
        for other in copies.copies_of(index):
            if other not in items or items[other].gain < item.gain:
                relevant_before = other in items and items[other].gain > 0
                items[other] = Item(
                    item.gain, item.start, item.end, items[other].source if relevant_before else "duplicate"
                )
    return items


def _with_copies(pieces: tuple[np.ndarray, ...] | None, copies: ChunkCopies) -> tuple[np.ndarray, ...] | None:
    """A multi-evidence question's pieces with the copies of their chunks: a copy answers the piece
    its twin answers (a chunk the judge alone graded answers no piece: it is no piece's evidence)."""
    if pieces is None:
        return None
    return tuple(
        np.array(sorted({*piece.tolist(), *(row for i in piece.tolist() for row in copies.copies_of(i))}))
        for piece in pieces
    )


def _collapse(items: dict[int, Item], copies: ChunkCopies, rank_of: Mapping[Any, int]) -> list[str]:
    """Keep one member of each duplicate group among `items` (in place): the best-placed in the run,
    with the group's best gain and that member's stretch of the evidence. Returns the chunk ids of
    the copies left out."""
    chunk_ids = copies.chunk_ids
    dropped: list[str] = []
    seen: set[int] = set()
    for index in sorted(items):
        group = [index, *(other for other in copies.copies_of(index) if other in items)]
        if len(group) < 2 or index in seen or max(items[i].gain for i in group) <= 0:
            continue  # only copies of a relevant chunk collapse: the judged view differs from the strict one there alone
        seen.update(group)
        keep = min(group, key=lambda i: (rank_of.get(chunk_ids[i], math.inf), -items[i].gain, i))
        strongest = max(group, key=lambda i: (items[i].gain, items[i].source == "gold", i == keep))
        items[keep] = items[strongest]
        for other in group:
            if other != keep:
                dropped.append(chunk_ids[other])
                del items[other]
    return dropped


def judged_table(
    golden: list[dict],
    judgements: list[Judgement],
    run: pd.DataFrame,
    scoring: Scoring,
    *,
    copies: ChunkCopies,
    grades: dict[str, dict[str, int | None]],
) -> pd.DataFrame:
    """The judged view's per-question columns (judged_<metric>, judged_n_relevant,
    n_duplicate_relevant, n_judge_relevant, n_pooled, n_pooled_judged, n_pooled_relevant,
    ambiguous), one row per golden row in order; `judgements` are the strict ones, `copies` the
    chunk table's duplicates. LLM grades count from scoring.min_grade, a question is ambiguous
    from scoring.ambiguous_at."""
    ks, ties, min_grade, ambiguous_at = list(scoring.ks), scoring.ties, scoring.min_grade, scoring.ambiguous_at
    chunk_ids = copies.chunk_ids
    # where copies stand in the run, which _collapse alone reads: not a dict of every row (4 million: 4.5 s)
    copied = run[run["chunk_id"].isin(list(copies.members))] if copies.members else run.iloc[:0]
    ranks = {
        qid: dict(zip(group["chunk_id"], group["rank"], strict=True))
        for qid, group in copied.groupby("qid", sort=False)
    }
    judged, extras = [], []
    drop: list[tuple[str, str]] = []
    for row, strict in zip(golden, judgements, strict=True):
        qid = row["qid"]
        question_grades = grades.get(qid, {})
        items = _items(strict, question_grades, copies, min_grade, labelled=set(row.get("relevant") or {}))
        gained_by_copy = sum(
            item.gain > 0 and item.source == "duplicate" for item in items.values()
        )  # before _collapse
        drop.extend((qid, chunk_id) for chunk_id in _collapse(items, copies, ranks.get(qid, {})))
        order = sorted(items)
        judged.append(
            Judgement(
                np.array(order, dtype=np.int64),
                np.array([items[i].gain for i in order], dtype=np.float64),
                strict.span,
                np.array([items[i].start for i in order], dtype=np.int64) if strict.span is not None else None,
                np.array([items[i].end for i in order], dtype=np.int64) if strict.span is not None else None,
                _with_copies(strict.pieces, copies),
                strict.answerable,
                strict.held,  # the chunking's, not the judged items' (a judge-graded chunk spans it all)
            )
        )
        extras.append(_question_counts(items, question_grades, gained_by_copy, min_grade, ambiguous_at))
    if drop:
        left_out = pd.MultiIndex.from_tuples(drop)
        run = run[~pd.MultiIndex.from_frame(run[["qid", "chunk_id"]]).isin(left_out)]
    placed = positions(run, [row["qid"] for row in golden], [chunk_ids[j.indices].tolist() for j in judged])
    rows = []
    for row, judgement, where, extra in zip(golden, judged, placed, extras, strict=True):
        metrics = score_question(judgement, where, ks, ties)
        n_relevant = metrics.pop("n_relevant")
        for column in ("n_relevant_tied", "tie_group_size"):
            metrics.pop(column)
        rows.append(
            {f"{PREFIX}{name}": value for name, value in metrics.items()} | {f"{PREFIX}n_relevant": n_relevant, **extra}
        )
    return pd.DataFrame(rows)


def _question_counts(
    items: dict, question_grades: dict[str, int | None], gained_by_copy: int, min_grade: int, ambiguous_at: int
) -> dict[str, int]:
    """What one question's judged view gained (`gained_by_copy`: relevant copies, counted before
    _collapse; judge grades) and its pooled pairs."""
    n_judge = sum(item.gain > 0 and item.source == "judge" for item in items.values())
    values = [g for g in question_grades.values() if g is not None]
    return {
        "n_duplicate_relevant": int(gained_by_copy),
        "n_judge_relevant": int(n_judge),
        "n_pooled": len(question_grades),
        "n_pooled_judged": len(values),
        "n_pooled_relevant": sum(g >= min_grade for g in values),
        "ambiguous": int(n_judge >= ambiguous_at),
    }


def without_repeated_twins(strict: dict, judged: dict, graded: bool) -> dict:
    """The judged view's summary for metrics.json: without its judged_<metric> twins where no LLM
    grade was used (`graded` false) and each twin equals its metric, so `dvc metrics diff` does not
    list every metric twice; per_question.csv keeps the columns."""
    twins = [name for name in judged if name.startswith(PREFIX) and name.removeprefix(PREFIX) in strict]
    if graded or any(judged[name] != strict[name.removeprefix(PREFIX)] for name in twins):
        return judged
    return {name: value for name, value in judged.items() if name not in twins}


def judged_summary(
    per_question: pd.DataFrame, ks: list[int], duplicates: pd.DataFrame
) -> dict[str, float | int | None]:
    """The judged view's keys of metrics.json, after the strict ones: judged_<metric> for every
    metric, then what the golden set could not see."""
    summary: dict[str, float | int | None] = {
        f"{PREFIX}{name}": float(per_question[f"{PREFIX}{column}"].mean()) for name, column in summary_names(ks)
    }
    pooled_judged = int(per_question["n_pooled_judged"].sum())
    pooled_relevant = int(per_question["n_pooled_relevant"].sum())
    summary.update(
        n_duplicate_chunks=int(len(duplicates) - duplicates["group"].nunique()) if len(duplicates) else 0,
        n_questions_gaining_duplicate=int((per_question["n_duplicate_relevant"] > 0).sum()),
        judge_pooled=int(per_question["n_pooled"].sum()),
        judge_judged=pooled_judged,
        judge_unjudged=int(per_question["n_pooled"].sum())
        - pooled_judged,  # counted as not relevant: see unjudged_warning
        judge_relevant=pooled_relevant,
        n_questions_gaining_judged=int((per_question["n_judge_relevant"] > 0).sum()),
        n_questions_ambiguous=int(per_question["ambiguous"].sum()),
    )
    if pooled_judged:  # else no share: a declared DVC metric holds numbers only (no null)
        summary["judge_relevant_share"] = round(pooled_relevant / pooled_judged, 4)
    return summary


def unjudged_warning(per_question: pd.DataFrame) -> str | None:
    """A warning when pooled pairs have no grade (the judge refused them every time): the judged
    metrics count them as not relevant, so they are a lower bound, not the judged value."""
    pooled, judged = int(per_question["n_pooled"].sum()), int(per_question["n_pooled_judged"].sum())
    if pooled == judged:
        return None
    questions = int((per_question["n_pooled"] > per_question["n_pooled_judged"]).sum())
    return (
        f"{pooled - judged} of {pooled} pooled pairs are unjudged ({questions} questions): the {PREFIX}* metrics count "
        "them as not relevant (a lower bound; judge_unjudged in metrics.json); see metrics/judge.json's rejected_by_reason"
    )


def unpooled_warning(judge: Mapping[str, Any], run_path: str, system: Mapping[str, Any]) -> str | None:
    """A warning when the judge is on and the system's run is not in judge.pool, neither as
    `run_path` nor as the run file it reads or the TREC file it exports (`system`: its resolved
    settings): its top chunks went ungraded, so its judged figures count only what other runs'
    pools graded (a pooled bm25's judged mrr moved from 0.565 to 0.828 on one sample; strict 0.430)."""
    if not judge.get("enabled") or judge.get("provider") == "none":  # the judge off: no pool at all
        return None
    if system.get("chunking", DEFAULT_CHUNKING) != DEFAULT_CHUNKING:  # the judge reads the default chunk table
        return (
            f"it is on chunking {system['chunking']}, and the judge grades chunks of the {DEFAULT_CHUNKING} chunking "
            f"only: its {PREFIX}* metrics count only the chunks the two chunkings share"
        )
    pool = {os.path.abspath(str(entry)) for entry in judge.get("pool") or []}
    own = [run_path, system.get("run_file") if system.get("method") == "run-file" else None, system.get("trec_export")]
    if any(path and os.path.abspath(str(path)) in pool for path in own):
        return None
    return (
        f"its run ({run_path}) is not in judge.pool: its own top chunks were not graded, so its {PREFIX}* "
        "metrics count only chunks other runs' pools graded (biased low); add it to judge.pool to compare judged figures"
    )
