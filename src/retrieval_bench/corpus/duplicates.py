"""Chunks that repeat each other: exact duplicates (the same normalised text) and near-duplicates
(word-shingle Jaccard similarity >= load.duplicates.min_jaccard, found through MinHash).

Real corpora repeat themselves (FAQ entries, changelogs, boilerplate, pages copied between
sections); a golden set labels one passage per question, so a retriever returning the other copy
would be scored as a miss. The judged view of the metrics (evaluation.score.judged) counts a chunk
duplicating a relevant one as relevant with the same grade.

- Normalised text: Unicode NFKC, case-folded, whitespace runs made one space. Equal normalised
  texts are exact duplicates.
- Near-duplicates: each chunk is the set of its SHINGLE_WORDS-word shingles (word = letters and
  digits; a text shorter than that is one shingle). MinHash signatures (NUM_PERM hash functions,
  banded for locality-sensitive hashing) propose candidate pairs; every candidate's exact Jaccard
  similarity of the shingle sets decides. The banding is the one of the fewest candidates that
  proposes a pair at min_jaccard with probability >= PROPOSED (banding): 16 bands of 4 rows from
  0.77 (the default 0.8: 0.9998), 32 of 2 from 0.45, 64 of 1 down to MIN_JACCARD (0.103), below
  which 64 hashes cannot promise it (fixed bands of 4 rows missed 102 of 114 chunks in pairs at
  0.1). What is found is exact and what is missed is rare.
  Deterministic: the hash functions come from a fixed seed.

Groups are the connected components of the duplicate pairs (so a near-duplicate of a
near-duplicate is in the group too); the group id is the chunk id of its first member in table
order. The result (data/chunkings/<chunking>/duplicates.parquet) lists only chunks in a group of two or more.
Windows of one document that overlap may share a group (a chunking with a large overlap makes them
near-duplicates): the judged view never counts one as the other's copy (evaluation.score.judged).
"""

from __future__ import annotations

import re
import unicodedata
import zlib
from collections import defaultdict
from collections.abc import Iterator

import numpy as np
import pandas as pd

from retrieval_bench.core.params_sections import MIN_JACCARD, NEAR_DUPLICATE_HASHES, NEAR_DUPLICATE_PROPOSED

SHINGLE_WORDS = 5
NUM_PERM, PROPOSED = NEAR_DUPLICATE_HASHES, NEAR_DUPLICATE_PROPOSED


def banding(min_jaccard: float) -> tuple[int, int]:
    """(bands, rows), bands x rows = NUM_PERM: the most rows per band (the fewest candidates to
    compare) with which a pair of Jaccard similarity min_jaccard is proposed with probability at
    least PROPOSED (1 - (1 - s^rows)^bands); a pair more alike is proposed more surely."""
    for rows in (4, 2, 1):
        bands = NUM_PERM // rows
        if 1 - (1 - min_jaccard**rows) ** bands >= PROPOSED:
            return bands, rows
    raise ValueError(
        f"min_jaccard {min_jaccard} is below {MIN_JACCARD:.3f}: no banding of {NUM_PERM} hashes finds its pairs"
    )


_WORD = re.compile(r"[^\W_]+")
DUPLICATE_COLUMNS = ["chunk_id", "group", "kind", "similarity"]


def normalise(text: str) -> str:
    """The form exact duplicates are compared in: NFKC, case-folded, whitespace runs as one space."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def shingles(text: str, width: int = SHINGLE_WORDS) -> frozenset[str]:
    """The set of `width`-word shingles of a normalised text (the whole text if it is shorter)."""
    words = _WORD.findall(normalise(text))
    if len(words) <= width:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + width]) for i in range(len(words) - width + 1))


def jaccard(a: frozenset, b: frozenset) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def _signatures(sets: list[frozenset[str]]) -> np.ndarray:
    """Each set's MinHash signature: per permutation, the least multiply-add-shift hash of its
    shingles' crc32 (h(x) = ((a x + b) mod 2^64) >> 32, a odd: a 2-universal family for 32-bit
    keys, Dietzfelbinger 1996). The hash (a x + b) mod p with a, b < 2^29 that it replaces never
    wrapped (a x + b < p), so it grew with x and every permutation picked the same shingle, the
    one of least crc32: two chunks became candidates with chance J, not LSH's 1 - (1 - J^4)^16
    (a fifth of the pairs at J = 0.8 went unseen)."""
    rng = np.random.default_rng(20240515)
    a = rng.integers(0, 1 << 63, NUM_PERM, dtype=np.uint64) * np.uint64(2) + np.uint64(1)  # odd
    b = rng.integers(0, 1 << 63, NUM_PERM, dtype=np.uint64)
    shift = np.uint64(32)
    signatures = np.full((len(sets), NUM_PERM), np.iinfo(np.uint64).max, dtype=np.uint64)
    for row, shingle_set in enumerate(sets):
        if not shingle_set:
            continue
        hashed = np.fromiter(
            (zlib.crc32(s.encode("utf-8")) for s in shingle_set), dtype=np.uint64, count=len(shingle_set)
        )
        # uint64 arithmetic wraps: the mod 2^64 of the family
        signatures[row] = ((hashed[:, None] * a[None, :] + b[None, :]) >> shift).min(axis=0)
    return signatures


def _candidate_buckets(signatures: np.ndarray, min_jaccard: float) -> Iterator[list[int]]:
    """Each band's buckets of two or more rows (rows whose signatures agree on the band): the
    candidate near-duplicates, band by band, rows in order."""
    bands, rows = banding(min_jaccard)
    for band in range(bands):
        buckets: dict[bytes, list[int]] = defaultdict(list)
        block = np.ascontiguousarray(signatures[:, band * rows : (band + 1) * rows])
        for row in range(len(block)):
            buckets[block[row].tobytes()].append(row)
        yield from (members for members in buckets.values() if len(members) > 1)


def find_duplicates(chunks: pd.DataFrame, near: bool = True, min_jaccard: float = 0.8) -> pd.DataFrame:
    """Duplicate groups of `chunks` (chunk_id, text): one row per chunk in a group of two or more,
    with its group (the first member's chunk id), kind (`exact`: another member has the same
    normalised text; else `near`) and similarity (the highest Jaccard similarity to another member
    it was linked with: a pair of candidates already in one group is not compared; 1.0 for exact
    duplicates), in chunk-table order."""
    ids = chunks["chunk_id"].tolist()
    texts = [normalise(text) for text in chunks["text"]]
    parent = list(range(len(ids)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def link(i: int, j: int) -> None:
        ri, rj = root(i), root(j)
        if ri != rj:
            parent[max(ri, rj)] = min(ri, rj)

    best = np.zeros(len(ids))
    first_with_text: dict[str, int] = {}
    exact = np.zeros(len(ids), dtype=bool)
    for index, text in enumerate(texts):
        if text in first_with_text:
            link(first_with_text[text], index)
            exact[[first_with_text[text], index]] = True
        else:
            first_with_text[text] = index
    best[exact] = 1.0
    if near and len(first_with_text) > 1:
        # a chunk without a word has no shingle and no near-duplicate (jaccard): left out of the
        # buckets, where all such chunks met and were compared pair by pair
        worded = [(i, found) for i in sorted(first_with_text.values()) if (found := shingles(texts[i]))]
        distinct, sets = [i for i, _ in worded], [found for _, found in worded]
        below: set[tuple[int, int]] = set()  # pairs compared and found apart: not compared again in another band
        for members in _candidate_buckets(_signatures(sets), min_jaccard):
            in_table = [distinct[x] for x in members]
            for position, x in enumerate(members):
                # a pair already in one group is not compared: a bucket of 3,000 templated pages
                # took 97 s comparing every pair (quadratic), now its first member's pass
                if len({root(i) for i in in_table[position:]}) == 1:
                    break
                for y in members[position + 1 :]:
                    i, j = distinct[x], distinct[y]
                    if root(i) == root(j) or (x, y) in below:
                        continue
                    similarity = jaccard(sets[x], sets[y])
                    if similarity >= min_jaccard:
                        link(i, j)
                        best[i], best[j] = max(best[i], similarity), max(best[j], similarity)
                    else:
                        below.add((x, y))
    roots = [root(i) for i in range(len(ids))]
    sizes = pd.Series(roots).value_counts()
    rows = [
        {
            "chunk_id": ids[i],
            "group": ids[r],
            "kind": "exact" if exact[i] else "near",
            "similarity": round(float(best[i]), 4),
        }
        for i, r in enumerate(roots)
        if sizes[r] > 1
    ]
    return pd.DataFrame(rows, columns=DUPLICATE_COLUMNS)


def describe(duplicates: pd.DataFrame) -> str:
    """One line for the load stage: how many chunks repeat another, exactly or nearly."""
    if duplicates.empty:
        return "no duplicate chunks"
    n_groups = duplicates["group"].nunique()
    extra = len(duplicates) - n_groups
    by_kind = duplicates.groupby("group")["kind"].apply(lambda kinds: "near" if (kinds == "near").any() else "exact")
    return (
        f"{extra} chunks duplicate another ({len(duplicates)} chunks in {n_groups} groups: "
        f"{int((by_kind == 'exact').sum())} of identical normalised text, {int((by_kind == 'near').sum())} with near-duplicates)"
    )


def group_members(duplicates: pd.DataFrame) -> dict[str, list[str]]:
    """chunk id -> the chunk ids of its group (itself included), for chunks in a group."""
    members: dict[str, list[str]] = {}
    for _, group in duplicates.groupby("group", sort=False):
        ids = group["chunk_id"].tolist()
        for chunk_id in ids:
            members[chunk_id] = ids
    return members
