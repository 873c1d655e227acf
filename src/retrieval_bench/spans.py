"""Which chunks are relevant to a question, and how much: from chunk labels or evidence spans.

A chunk-labelled question (imported qrels) judges chunk ids with grades. A span-anchored question
judges every chunk of its document that overlaps the evidence span: it is relevant when it holds
at least min_coverage of the evidence, or when at least min_coverage of the chunk itself is
evidence (a small chunk inside a long evidence span); its gain is the share of the evidence it
holds. So a re-chunking finer than the evidence still leaves every question a relevant chunk.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass
class Judgement:
    """One question's judged chunks: row indices into the chunk table and their gains.

    For span questions `indices` holds every chunk overlapping the evidence (gain = coverage,
    0 for chunks below min_coverage), with their spans in `starts`/`ends` for coverage recall.
    """

    indices: np.ndarray
    gains: np.ndarray
    span: tuple[int, int] | None = None
    starts: np.ndarray | None = None
    ends: np.ndarray | None = None


def coverage(chunk_start: np.ndarray, chunk_end: np.ndarray, span_start: int, span_end: int) -> np.ndarray:
    """Share of [span_start, span_end) inside each chunk [chunk_start, chunk_end) of the same document."""
    covered = np.clip(np.minimum(chunk_end, span_end) - np.maximum(chunk_start, span_start), 0, None)
    return covered / max(span_end - span_start, 1)


def chunk_evidence_share(chunk_start: np.ndarray, chunk_end: np.ndarray, span_start: int, span_end: int) -> np.ndarray:
    """Share of each chunk's own characters that lie inside the evidence span."""
    inside = np.clip(np.minimum(chunk_end, span_end) - np.maximum(chunk_start, span_start), 0, None)
    return inside / np.maximum(chunk_end - chunk_start, 1)


def union_coverage(starts: np.ndarray, ends: np.ndarray, span_start: int, span_end: int) -> float:
    """Share of the span covered by the union of the given chunks (they may overlap each other)."""
    clipped = sorted(
        (max(s, span_start), min(e, span_end)) for s, e in zip(starts, ends) if min(e, span_end) > max(s, span_start)
    )
    covered, reach = 0, span_start
    for start, end in clipped:
        start = max(start, reach)
        if end > start:
            covered += end - start
            reach = end
    return covered / max(span_end - span_start, 1)


def judge(golden: list[dict], chunks: pd.DataFrame, min_coverage: float) -> list[Judgement]:
    """A Judgement per golden-set row, in order. `chunks` needs chunk_id, and doc_id, start and end
    when a row is span-anchored."""
    index_of = {chunk_id: i for i, chunk_id in enumerate(chunks["chunk_id"])}
    if all(row.get("relevant") is not None for row in golden):  # chunk labels only: a chunk id column is enough
        by_doc, starts, ends = {}, np.array([]), np.array([])
    else:
        by_doc = chunks.groupby("doc_id", sort=False).indices  # doc_id -> row indices
        starts, ends = chunks["start"].to_numpy(), chunks["end"].to_numpy()
    judgements = []
    for row in golden:
        if row.get("relevant") is not None:
            judged = [(index_of[c], g) for c, g in row["relevant"].items() if c in index_of and g > 0]
            indices = np.array([i for i, _ in judged], dtype=np.int64)
            judgements.append(Judgement(indices, np.array([g for _, g in judged], dtype=np.float64)))
            continue
        candidates = by_doc.get(row["doc_id"], np.array([], dtype=np.int64))
        share = coverage(starts[candidates], ends[candidates], row["start"], row["end"])
        overlapping = share > 0
        candidates, share = candidates[overlapping], share[overlapping]
        chunk_share = chunk_evidence_share(starts[candidates], ends[candidates], row["start"], row["end"])
        gains = np.where((share >= min_coverage) | (chunk_share >= min_coverage), share, 0.0)
        judgements.append(
            Judgement(candidates, gains, (row["start"], row["end"]), starts[candidates], ends[candidates])
        )
    return judgements
