"""Which chunks are relevant to a question, and how much: from chunk labels or evidence spans.

A chunk-labelled question (imported qrels) judges chunk ids with grades. A span-anchored question
judges every chunk of its document that overlaps the evidence span: it is relevant when it holds
at least min_coverage of the evidence, or when at least min_coverage of the chunk itself is
evidence (a small chunk inside a long evidence span); its gain is the share of the evidence it
holds. So a re-chunking finer than the evidence still leaves every question a relevant chunk.

Real labels carry where each labelled chunk lies, `relevant_spans` [[doc_id, start, end, grade], ...]
(with_label_spans). Under the chunking they label they are judged by their chunk ids, as trec_eval would;
under another chunking (a labelled id missing from the chunk table) by those spans, with the
evidence-span rule: a chunk is relevant when it holds at least min_coverage of a labelled span or at
least min_coverage of it lies inside one, with that label's grade (the highest, over several).

A question's `kind` (single, multi, unanswerable, keyword; absent: single) changes two things. A
multi-evidence question's `evidence_spans` are pieces, each judged by the evidence rule on its own:
its relevant chunks are those relevant to any piece, with a chunk's gain the sum of its coverage of
the pieces it is relevant to (a chunk may hold two pieces; a piece may span two chunks), and its
`pieces` say which chunks answer which piece (complete@k, evidence_recall@k). An unanswerable
question has no relevant chunk by definition (`answerable` false): it is left out of every
ranking metric and scored by abstention (retrieval_bench.evaluation.score.abstention).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from retrieval_bench.core.errors import InputError


@dataclass
class Judgement:
    """One question's judged chunks: row indices into the chunk table and their gains.

    For span questions `indices` holds every chunk overlapping the evidence (gain = coverage,
    0 for chunks below min_coverage), with their spans in `starts`/`ends` for coverage recall.
    `pieces` (multi-evidence questions): for each piece of evidence, the chunk-table indices of the
    chunks relevant to it; None: the question's relevant chunks are its one piece. `answerable`
    false: an unanswerable question (no relevant chunk, no ranking metric).
    """

    indices: np.ndarray
    gains: np.ndarray
    span: tuple[int, int] | None = None
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None
    pieces: tuple[np.ndarray, ...] | None = None
    answerable: bool = True
    # The share of a span question's evidence some chunk of this chunking holds (1 unless the span
    # crosses characters no chunk holds, the whitespace a chunker trims between chunks): coverage
    # recall counts against it, so that retrieving every chunk over the span is 1.
    held: float = 1.0

    def piece_masks(self) -> list[np.ndarray]:
        """For each piece of evidence, which of `indices` are relevant to it (one piece, the
        relevant chunks, when the question has no pieces)."""
        if self.pieces is None:
            return [self.gains > 0]
        return [np.isin(self.indices, piece) for piece in self.pieces]

    def covered(self) -> np.ndarray:
        """The characters of the evidence each judged chunk covers (a span question), else zeros:
        what orders chunks of equal gain, a chunk below min_coverage still adding coverage recall."""
        if self.span is None or self.starts is None or self.ends is None:
            return np.zeros(len(self.gains))
        span_start, span_end = self.span
        chars: np.ndarray = np.clip(np.minimum(self.ends, span_end) - np.maximum(self.starts, span_start), 0, None)
        return chars

    def recall_of(self, covered: Any) -> Any:
        """Coverage recall: the `covered` share of the span (a number or an array) against what the
        chunking holds, at most 1 (a judged view's chunk taking the whole span covers all of it)."""
        return np.minimum(1.0, np.asarray(covered, dtype=np.float64) / self.held)

    def evidence(self) -> tuple[tuple[int, int], np.ndarray, np.ndarray]:
        """A span question's evidence span and its chunks' starts and ends (set for every span question)."""
        assert self.span is not None and self.starts is not None and self.ends is not None, "not a span question"
        return self.span, self.starts, self.ends


def coverage(chunk_start: np.ndarray, chunk_end: np.ndarray, span_start: int, span_end: int) -> np.ndarray:
    """Share of [span_start, span_end) inside each chunk [chunk_start, chunk_end) of the same document."""
    covered = np.clip(np.minimum(chunk_end, span_end) - np.maximum(chunk_start, span_start), 0, None)
    share: np.ndarray = covered / max(span_end - span_start, 1)
    return share


def chunk_evidence_share(chunk_start: np.ndarray, chunk_end: np.ndarray, span_start: int, span_end: int) -> np.ndarray:
    """Share of each chunk's own characters that lie inside the evidence span."""
    inside = np.clip(np.minimum(chunk_end, span_end) - np.maximum(chunk_start, span_start), 0, None)
    share: np.ndarray = inside / np.maximum(chunk_end - chunk_start, 1)
    return share


def union_coverage(starts: np.ndarray, ends: np.ndarray, span_start: int, span_end: int) -> float:
    """Share of the span covered by the union of the given chunks (they may overlap each other)."""
    clipped = sorted(
        (max(s, span_start), min(e, span_end))
        for s, e in zip(starts, ends, strict=True)
        if min(e, span_end) > max(s, span_start)
    )
    covered, reach = 0, span_start
    for start, end in clipped:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered / max(span_end - span_start, 1)


def with_label_spans(labels: list[dict[str, Any]], chunks: pd.DataFrame) -> list[dict[str, Any]]:
    """`labels` (qid, question, relevant {chunk_id: grade}), each with relevant_spans: where each
    labelled chunk that `chunks` (chunk_id, doc_id, start, end) holds lies, [doc_id, start, end,
    grade] in the order of `relevant`."""
    where = {
        chunk_id: (str(doc_id), int(start), int(end))
        for chunk_id, doc_id, start, end in zip(
            chunks["chunk_id"], chunks["doc_id"], chunks["start"], chunks["end"], strict=True
        )
    }
    return [
        {**label, "relevant_spans": [[*where[c], int(g)] for c, g in label["relevant"].items() if c in where]}
        for label in labels
    ]


def by_label_spans(row: dict[str, Any], index_of: dict[Any, int], located: bool) -> bool:
    """Whether a chunk-labelled row is judged by its relevant_spans: it has them, the chunk table
    has doc_id/start/end (`located`), and some labelled id is not in the table. A table holding
    only some of the ids is another chunking too (a content-derived id such as doc#start-end
    survives where a document was cut alike): judging by the ids found would shrink the question's
    relevant set to the chunks that kept their id, so the whole row is judged by its spans."""
    return bool(row.get("relevant_spans")) and located and any(c not in index_of for c in row["relevant"])


def labels_without_spans(golden: list[dict[str, Any]], chunks: pd.DataFrame) -> list[str]:
    """qids of chunk-labelled rows naming a chunk id the table lacks and carrying no relevant_spans
    (a golden set from before them): judged by the ids found only, unscorable under another chunking."""
    ids = set(chunks["chunk_id"])
    return [
        row["qid"]
        for row in golden
        if row.get("relevant") is not None
        and not row.get("relevant_spans")
        and any(chunk_id not in ids for chunk_id in row["relevant"])
    ]


def judge(golden: list[dict[str, Any]], chunks: pd.DataFrame, min_coverage: float) -> list[Judgement]:
    """A Judgement per golden-set row, in order. `chunks` needs chunk_id, and doc_id, start and end
    when a row is span-anchored (or judged by its relevant_spans)."""
    index_of = {chunk_id: i for i, chunk_id in enumerate(chunks["chunk_id"])}
    located = {"doc_id", "start", "end"} <= set(chunks.columns)
    # A multi question's pieces are its evidence_spans; one relabelled multi without them (the kind
    # classifier, a real label) is judged on its one piece, as its span or labels say.
    pieced = [row.get("kind") == "multi" and bool(row.get("evidence_spans")) for row in golden]
    spans = [
        multi or row.get("relevant") is None or by_label_spans(row, index_of, located)
        for row, multi in zip(golden, pieced, strict=True)
    ]
    if not any(spans):  # chunk labels only: a chunk id column is enough
        by_doc: dict[Any, Any] = {}
        starts, ends = np.array([]), np.array([])
    else:
        by_doc = chunks.groupby("doc_id", sort=False).indices  # doc_id -> row indices
        starts, ends = chunks["start"].to_numpy(), chunks["end"].to_numpy()
    judgements = []
    for row, by_span, multi in zip(golden, spans, pieced, strict=True):
        if row.get("kind") == "unanswerable":
            judgements.append(Judgement(np.array([], dtype=np.int64), np.array([]), answerable=False))
            continue
        if multi:
            judgements.append(_pieces_judgement(row["evidence_spans"], by_doc, starts, ends, min_coverage))
            continue
        if row.get("relevant") is not None and by_span:
            judgements.append(_label_span_judgement(row["relevant_spans"], by_doc, starts, ends, min_coverage))
            continue
        if row.get("relevant") is not None:
            judged = [(index_of[c], g) for c, g in row["relevant"].items() if c in index_of and g > 0]
            indices = np.array([i for i, _ in judged], dtype=np.int64)
            judgements.append(Judgement(indices, np.array([g for _, g in judged], dtype=np.float64)))
            continue
        candidates, gains, held = _span_gains(
            by_doc, starts, ends, (row["doc_id"], row["start"], row["end"]), min_coverage=min_coverage
        )
        span = (row["start"], row["end"])
        judgements.append(Judgement(candidates, gains, span, starts[candidates], ends[candidates], held=held))
    return judgements


def _span_gains(
    by_doc: dict[Any, Any], starts: np.ndarray, ends: np.ndarray, span: tuple[Any, int, int], *, min_coverage: float
) -> tuple[np.ndarray, np.ndarray, float]:
    """The chunks overlapping one evidence span, their gains (the share of the span's characters
    held by some chunk that each holds, 0 below min_coverage unless min_coverage of the chunk itself
    is evidence) and that held share (Judgement.held)."""
    doc_id, start, end = span
    candidates = by_doc.get(doc_id, np.array([], dtype=np.int64))
    share = coverage(starts[candidates], ends[candidates], start, end)
    overlapping = share > 0
    candidates, share = candidates[overlapping], share[overlapping]
    held = union_coverage(starts[candidates], ends[candidates], start, end) or 1.0  # Judgement.held; 1: no chunk
    share = share / held
    chunk_share = chunk_evidence_share(starts[candidates], ends[candidates], start, end)
    return candidates, np.where((share >= min_coverage) | (chunk_share >= min_coverage), share, 0.0), held


def _pieces_judgement(
    evidence_spans: list[dict[str, Any]],
    by_doc: dict[Any, Any],
    starts: np.ndarray,
    ends: np.ndarray,
    min_coverage: float,
) -> Judgement:
    """A multi-evidence question: each piece judged by the evidence rule on its own; a chunk's gain
    is the sum of its coverage of the pieces it is relevant to; scored as chunk labels (its recall
    is the share of relevant chunks) with its pieces. A piece no chunk of this chunking holds makes
    the question unscorable here (no relevant chunk), as a single question's evidence would: else
    its complete@k would be 0 in this chunking alone, unfair to the chunking, not to the retriever."""
    gains: dict[int, float] = {}
    pieces = []
    for piece in evidence_spans:
        candidates, piece_gains, _ = _span_gains(
            by_doc, starts, ends, (piece["doc_id"], piece["start"], piece["end"]), min_coverage=min_coverage
        )
        if not (piece_gains > 0).any():
            return Judgement(np.array([], dtype=np.int64), np.array([], dtype=np.float64))
        for i, gain in zip(candidates.tolist(), piece_gains.tolist(), strict=True):
            gains[i] = gains.get(i, 0.0) + gain
        pieces.append(candidates[piece_gains > 0])
    indices = np.array(sorted(gains), dtype=np.int64)
    return Judgement(indices, np.array([gains[i] for i in indices.tolist()]), pieces=tuple(pieces))


def _label_span_judgement(
    relevant_spans: list[list[Any]], by_doc: dict[Any, Any], starts: np.ndarray, ends: np.ndarray, min_coverage: float
) -> Judgement:
    """Chunk labels re-drawn on this chunking: each chunk relevant to a labelled span (the evidence
    rule), with the highest grade of those spans; scored as chunk labels (no span recall)."""
    grades: dict[int, float] = {}
    for doc_id, start, end, grade in relevant_spans:
        if grade <= 0:
            continue
        candidates = by_doc.get(doc_id, np.array([], dtype=np.int64))
        share = coverage(starts[candidates], ends[candidates], start, end)
        chunk_share = chunk_evidence_share(starts[candidates], ends[candidates], start, end)
        for i in candidates[(share > 0) & ((share >= min_coverage) | (chunk_share >= min_coverage))]:
            grades[int(i)] = max(grades.get(int(i), 0.0), float(grade))
    indices = np.array(sorted(grades), dtype=np.int64)
    return Judgement(indices, np.array([grades[i] for i in indices.tolist()], dtype=np.float64))


def check_min_coverage(value: float, name: str = "--min-coverage") -> None:
    """A command's `name` option is score.min_coverage: a share of the chunk, in (0, 1]."""
    if not 0 < value <= 1:
        raise InputError(f"{name} must be a share in (0, 1], as score.min_coverage, got {value}")
