"""Every retrieval metric of one question, and which variant applies. A reader finds all of them here.

Two kinds of label, two recall variants:

- chunk labels (real qrels, or chunk ids): every definition equals a trec_eval measure (checked
  against pytrec_eval in tests/evaluation/test_metrics.py); a relevant chunk has gain > 0.

Ranks are 1-based positions in the run (retrieval_bench.core.run_table: retrieval.depth deep, with the
whole tie group at the cut), which are the full ranking's for every rank <= depth, so every
metric at k <= depth is the full ranking's. A relevant chunk beyond the run is not retrieved
(rank inf, trec_eval's convention): `mrr` (reciprocal_rank) counts 0 for a question whose first
relevant chunk lies beyond the depth, so it is the full ranking's MRR less at most 1 / (depth + 1)
per question, and exactly it with retrieval.depth all.
- evidence spans (synthetic and hand-written questions): relevance and gain come from
  retrieval_bench.core.relevance (coverage of the evidence); recall@k is instead the share of the
  evidence covered by the top k chunks together (our extension; equal to trec_eval's recall when
  the evidence is exactly one chunk of the same chunking).

Ties (chunks with equal scores) follow score.ties, decided in `score_question`:
`expected` gives every metric's exact expected value over all orders of each tied group
(McSherry & Najork, ECIR 2008), `pessimistic`/`optimistic` put the judged chunks last/first in
their tied group and use the rank formulas below.

Multi-evidence questions (kind multi) have pieces of evidence, each with its own relevant chunks
(retrieval_bench.core.relevance): complete@k (every piece has a relevant chunk in the top k),
evidence_recall@k (the share of pieces that have one) and last_piece_rank (the rank at which the
last piece is first found; empty when a piece is not retrieved). Every other question is one
piece, its relevant chunks: complete@k and evidence_recall@k equal hit@k. Unanswerable questions
get no ranking metric (empty: left out of every mean); retrieval_bench.evaluation.score.abstention
scores them.

recall_budget@B, recall at an equal context budget (score.budgets: the chunks that fit in B
characters or words, in rank order), needs the chunks' lengths and the whole run rather than the
judged chunks' ranks: it lives in retrieval_bench.evaluation.score.budgets.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations

import numpy as np
import pandas as pd

from retrieval_bench.core.relevance import Judgement, union_coverage
from retrieval_bench.core.run_table import Positions

TIE_POLICIES = ("expected", "pessimistic", "optimistic")


def dcg(ranks: np.ndarray, gains: np.ndarray, k: int) -> float:
    """sum of gain / log2(rank + 1) over the relevant chunks ranked in the top k (trec_eval's)."""
    inside = ranks <= k
    return float(np.sum(gains[inside] / np.log2(ranks[inside] + 1.0)))


def ndcg_at(ranks: np.ndarray, gains: np.ndarray, k: int) -> float:
    """DCG@k over the ideal DCG@k, the relevant gains sorted best first (trec_eval ndcg_cut.k)."""
    ideal_dcg = _ideal_dcg(gains, k)
    # the same gains summed in another order can exceed the ideal in the last bit: a share, at most 1
    return min(dcg(ranks, gains, k) / ideal_dcg, 1.0) if ideal_dcg > 0 else 0.0


def average_precision_at(ranks: np.ndarray, k: int) -> float:
    """Mean over all relevant chunks of precision at its rank, 0 beyond k (trec_eval map_cut.k)."""
    if len(ranks) == 0:
        return 0.0
    inside = np.sort(ranks[ranks <= k])
    precisions = np.arange(1, len(inside) + 1) / inside
    return float(precisions.sum() / len(ranks))


@dataclass(frozen=True)
class Ranked:
    """One question's relevant chunks at concrete ranks (inf: not retrieved) with their gains, its
    first relevant rank, and recall per k where it is not the share of relevant chunks in the top k
    (evidence coverage; None for chunk labels)."""

    ranks: np.ndarray
    gains: np.ndarray
    first: float
    recall_at: dict[int, float] | None
    piece_firsts: np.ndarray  # each piece's first relevant rank (inf: not retrieved)


@dataclass(frozen=True)
class Tied:
    """One question's judged chunks by tied group, for exact expectations over the orders of each
    group: `groups` (chunks better, group size, relevant members) in rank order; the first of them
    (first_better chunks ahead, first_size chunks, first_relevant of them relevant), and for each
    of its places the chance that the first relevant chunk stands there, over the place."""

    groups: list
    gains: np.ndarray  # of every judged chunk (groups' members index it)
    relevant_gains: np.ndarray
    n_relevant: int
    first_better: int
    first_size: int
    first_relevant: int
    places: np.ndarray
    first_weights: np.ndarray
    pieces: list[frozenset[int]]  # each piece's relevant chunks (indices of `gains`)


def _recall(question: Ranked, k: int) -> float:
    if question.recall_at is not None:
        return question.recall_at[k]
    return float(np.mean(question.ranks <= k)) if len(question.ranks) else 0.0


def _expected_recall(tied: Tied, k: int) -> float:
    inside = sum(len(members) * min(max(k - better, 0), size) / size for better, size, members in tied.groups)
    return inside / tied.n_relevant


def _expected_hit(tied: Tied, k: int) -> float:
    return 1.0 - _none_in_first(tied.first_size, tied.first_relevant, k - tied.first_better)


def _none_found(tied: Tied, chunks: frozenset[int], k: int) -> float:
    """P(none of `chunks` is in the top k): the tied groups are ordered independently."""
    return math.prod(
        _none_in_first(size, len(chunks.intersection(members)), k - int(better))
        for better, size, members in tied.groups
    )


def _expected_complete(tied: Tied, k: int) -> float:
    """P(every piece has a chunk in the top k), by inclusion-exclusion over the sets of pieces
    none of whose chunks is in the top k (0 outright when a piece has no retrieved chunk: the sum
    would leave a rounding error where it cancels)."""
    placed = set().union(*(members for _, _, members in tied.groups))
    if any(not piece & placed for piece in tied.pieces):
        return 0.0
    total = 0.0
    for n in range(len(tied.pieces) + 1):
        for chosen in combinations(tied.pieces, n):
            total += (-1) ** n * _none_found(tied, frozenset().union(*chosen), k)
    return max(total, 0.0)


def _expected_evidence_recall(tied: Tied, k: int) -> float:
    return float(np.mean([1.0 - _none_found(tied, piece, k) for piece in tied.pieces])) if tied.pieces else 0.0


def _expected_ndcg(tied: Tied, k: int) -> float:
    return _expected_dcg(tied.groups, tied.gains, k) / _ideal_dcg(tied.relevant_gains, k)


@dataclass(frozen=True)
class AtCutoff:
    """A metric at a cut-off k: `name@k` in metrics.json, `column@k` in per_question.csv, its value
    at concrete ranks and its exact expectation under ties."""

    name: str
    column: str
    at_ranks: Callable[[Ranked, int], float]
    under_ties: Callable[[Tied, int], float]


# The one metric table: each metric at every cut-off k of score.k, beside mrr over the whole run
# (reciprocal_rank). question_metrics computes a question's row at concrete ranks, expected_metrics
# its exact expectation under ties; both are cross-checked against trec_eval at every k
# (tests/evaluation/test_metrics.py, test_ties.py).
AT_CUTOFF = (
    AtCutoff("recall", "recall", _recall, _expected_recall),
    AtCutoff("hit", "hit", lambda q, k: float(q.first <= k), _expected_hit),
    AtCutoff(
        "mrr",
        "reciprocal_rank",
        lambda q, k: 1.0 / q.first if q.first <= k else 0.0,
        lambda t, k: float(np.sum(t.first_weights[t.places <= k])),
    ),
    AtCutoff("ndcg", "ndcg", lambda q, k: ndcg_at(q.ranks, q.gains, k), _expected_ndcg),
    AtCutoff(
        "map",
        "map",
        lambda q, k: average_precision_at(q.ranks, k),
        lambda t, k: _expected_average_precision(t.groups, t.n_relevant, k),
    ),
    AtCutoff(
        "complete",
        "complete",
        lambda q, k: float(len(q.piece_firsts) > 0 and bool(np.all(q.piece_firsts <= k))),
        _expected_complete,
    ),
    AtCutoff(
        "evidence_recall",
        "evidence_recall",
        lambda q, k: float(np.mean(q.piece_firsts <= k)) if len(q.piece_firsts) else 0.0,
        _expected_evidence_recall,
    ),
)
# The metrics of multi-evidence questions (equal to hit@k for the others): the leaderboard shows
# them in the multi section only.
PIECE_METRICS = ("complete", "evidence_recall")


def question_metrics(
    ranks: np.ndarray,
    gains: np.ndarray,
    ks: list[int],
    recall_at: dict[int, float] | None = None,
    piece_firsts: np.ndarray | None = None,
) -> dict[str, float]:
    """All metrics of one question.

    ranks, gains: the rank and gain of each relevant chunk; a relevant chunk the retriever did not
    return has rank inf. recall_at: recall per k when it is not the share of relevant chunks in
    the top k (evidence coverage); None for chunk labels. piece_firsts: each piece's first
    relevant rank (a multi-evidence question); None: one piece, the relevant chunks.
    """
    ranks = np.asarray(ranks, dtype=np.float64)
    first = float(ranks.min()) if len(ranks) else math.inf
    if piece_firsts is None:
        piece_firsts = np.array([first])
    question = Ranked(ranks, np.asarray(gains, dtype=np.float64), first, recall_at, piece_firsts)
    last = float(piece_firsts.max()) if len(piece_firsts) else math.inf
    row = {
        "first_relevant_rank": first if math.isfinite(first) else math.nan,
        "last_piece_rank": last if math.isfinite(last) else math.nan,
        "reciprocal_rank": 1.0 / first,
    }
    for k in ks:
        row.update({f"{metric.column}@{k}": metric.at_ranks(question, k) for metric in AT_CUTOFF})
    return row


def concrete_ranks(
    positions: Positions, gains: np.ndarray, policy: str, covered: np.ndarray | None = None
) -> np.ndarray:
    """Ranks when the judged chunks of each tied group stand last (pessimistic) or first
    (optimistic) in it, the higher gains last (pessimistic) or first (optimistic), and among equal
    gains the more evidence `covered` (Judgement.covered) likewise: chunks below min_coverage have
    gain 0 yet count in coverage recall, and the chunk table's order must not place them."""
    ranks = np.full(len(gains), np.inf)
    covered = np.zeros(len(gains)) if covered is None else covered
    for (better, tied), members in _groups(positions).items():
        if not math.isfinite(better):
            continue
        order = sorted(members, key=lambda i: (gains[i], covered[i]), reverse=policy == "optimistic")
        first = better + 1 if policy == "optimistic" else better + tied - len(members) + 1
        ranks[order] = first + np.arange(len(members))
    return ranks


def _groups(positions: Positions) -> dict[tuple[float, int], list[int]]:
    """Judged chunk indices by tied group (chunks of one group share `better` and `tied`)."""
    groups: dict[tuple[float, int], list[int]] = defaultdict(list)
    for index, (better, tied) in enumerate(zip(positions.better.tolist(), positions.tied.tolist(), strict=True)):
        groups[(float(better), int(tied))].append(index)
    return dict(sorted(groups.items()))


def _none_in_first(n: int, s: int, m: int) -> float:
    """P(none of s marked items among the first m of n items in uniformly random order):
    C(n - s, m) / C(n, m)."""
    if s == 0 or m <= 0:
        return 1.0
    if m > n - s:
        return 0.0
    i = np.arange(m, dtype=np.float64)
    return float(np.prod((n - s - i) / (n - i)))


def expected_metrics(
    positions: Positions, gains: np.ndarray, ks: list[int], pieces: list[np.ndarray] | None = None
) -> dict[str, float]:
    """Every metric's expected value when each tied group is in uniformly random order, exactly.

    By linearity, a relevant chunk of a tied group of n chunks behind p better ones stands at each
    rank p+1..p+n with probability 1/n; that gives recall@k, DCG and AP. The first relevant chunk
    lies in the first group holding r >= 1 relevant chunks, at its j-th place with probability
    C(n-j, r-1) / C(n, r): that gives hit@k, the reciprocal rank and the expected first rank
    p + (n + 1) / (r + 1). `pieces` (masks over the judged chunks; None: one piece, the relevant
    ones): a piece is missed in the top k when each tied group leaves all of its chunks out,
    independently; complete@k by inclusion-exclusion over the pieces missed, and the last piece's
    expected rank as the sum over r of P(not complete at r)."""
    relevant = gains > 0
    gains = gains.astype(np.float64)
    n_relevant = int(relevant.sum())
    piece_sets = [frozenset(np.flatnonzero(mask).tolist()) for mask in (pieces or [relevant])]
    groups = [(b, n, [i for i in members if relevant[i]]) for (b, n), members in _groups(positions).items()]
    groups = [(b, n, members) for b, n, members in groups if members and math.isfinite(b)]
    row: dict[str, float] = {}
    if not groups:
        return question_metrics(
            np.full(n_relevant, np.inf), gains[relevant], ks, piece_firsts=np.full(len(piece_sets), np.inf)
        )
    p, n, first_members = groups[0]
    p, r = int(p), len(first_members)
    j = np.arange(1, n - r + 2, dtype=np.float64)
    p_first_at = np.empty_like(j)  # P(the first relevant chunk is the j-th of the group)
    p_first_at[0] = r / n
    if len(j) > 1:
        p_first_at[1:] = r / n * np.cumprod((n - j[:-1] - r + 1) / (n - j[:-1]))
    tied = Tied(groups, gains, gains[relevant], n_relevant, p, n, r, p + j, p_first_at / (p + j), piece_sets)
    row["first_relevant_rank"] = p + (n + 1) / (r + 1)
    row["last_piece_rank"] = _expected_last_piece_rank(tied)
    row["reciprocal_rank"] = float(np.sum(tied.first_weights))
    for k in ks:
        row.update({f"{metric.column}@{k}": metric.under_ties(tied, k) for metric in AT_CUTOFF})
    # every metric but the rank is a share: a sum that is exactly 1 may round to 1 + 2e-16 (seven
    # relevant chunks tied at the top: ndcg), which no reader of per_question.csv may be handed
    ranks = ("first_relevant_rank", "last_piece_rank")
    return {name: value if name in ranks else min(value, 1.0) for name, value in row.items()}


def _expected_last_piece_rank(tied: Tied) -> float:
    """E[the rank at which the last piece is first found] = sum over r >= 0 of P(not complete at
    r); NaN when a piece has no retrieved chunk (it is never found)."""
    placed = set().union(*(members for _, _, members in tied.groups))
    if not tied.pieces or any(not piece & placed for piece in tied.pieces):
        return math.nan
    deepest = max(int(better) + size for better, size, _ in tied.groups)
    return float(sum(1.0 - _expected_complete(tied, r) for r in range(deepest)))


def _ideal_dcg(gains: np.ndarray, k: int) -> float:
    ideal = np.sort(gains)[::-1][:k]
    return float(np.sum(ideal / np.log2(np.arange(2, len(ideal) + 2))))


def _expected_dcg(groups: list, gains: np.ndarray, k: int) -> float:
    total = 0.0
    for better, size, members in groups:
        places = np.arange(int(better) + 1, min(int(better) + size, k) + 1, dtype=np.float64)
        total += float(gains[members].sum()) * float(np.sum(1.0 / np.log2(places + 1))) / size
    return total


def _expected_average_precision(groups: list, n_relevant: int, k: int) -> float:
    """E[AP@k]: a relevant chunk at the j-th place of its group has, on average, R_before + 1 +
    (j - 1)(r - 1)/(n - 1) relevant chunks at or above it (hypergeometric)."""
    total, before = 0.0, 0
    for better, size, members in groups:
        r = len(members)
        j = np.arange(1, min(size, k - int(better)) + 1, dtype=np.float64)
        above = before + 1 + (j - 1) * (r - 1) / max(size - 1, 1)
        total += r * float(np.sum(above / (better + j))) / size
        before += r
    return total / n_relevant


def expected_span_recall(judgement: Judgement, positions: Positions, ks: list[int]) -> dict[int, float]:
    """E[share of the evidence covered by the top k chunks], exactly: each stretch of the span
    between chunk boundaries is covered unless none of the chunks over it is in the top k; only
    the tied group straddling rank k is uncertain, a random subset of it being inside."""
    (span_start, span_end), chunk_starts, chunk_ends = judgement.evidence()
    starts = np.clip(chunk_starts, span_start, span_end)
    ends = np.clip(chunk_ends, span_start, span_end)
    cuts = np.unique(np.concatenate([starts, ends, [span_start, span_end]]))
    better, tied = positions.better.astype(np.float64), positions.tied
    recall = {}
    for k in ks:
        inside = better + tied <= k  # the whole tied group is in the top k
        straddling = (better < k) & (better + tied > k)
        covered = 0.0
        for low, high in zip(cuts[:-1], cuts[1:], strict=True):
            over = (starts <= low) & (ends >= high)
            if inside[over].any():
                covered += high - low
            elif straddling[over].any():
                group = over & straddling  # one group straddles k: the same better and tied
                size, behind = int(tied[group][0]), int(better[group][0])
                covered += (high - low) * (1.0 - _none_in_first(size, int(group.sum()), k - behind))
        recall[k] = float(judgement.recall_of(covered / max(span_end - span_start, 1)))
    return recall


def score_question(judgement: Judgement, positions: Positions, ks: list[int], ties: str) -> dict[str, float]:
    """All metrics of one question under tie policy `ties`, with the recall variant of its labels
    (evidence coverage for span questions, the share of relevant chunks for chunk labels and
    multi-evidence questions; every metric empty for an unanswerable question), plus
    n_relevant and tie_group_size (chunks tied with its best-placed relevant chunk, itself
    included; 1 = no tie)."""
    relevant = judgement.gains > 0
    pieces = judgement.piece_masks()
    if not judgement.answerable:
        row = dict.fromkeys(question_metrics(np.array([]), np.array([]), ks), math.nan)
    elif ties == "expected":
        row = expected_metrics(positions, judgement.gains, ks, pieces)
        if judgement.span is not None:
            row.update({f"recall@{k}": value for k, value in expected_span_recall(judgement, positions, ks).items()})
    else:
        ranks = concrete_ranks(positions, judgement.gains, ties, judgement.covered())
        recall_at = span_recall(judgement, ranks, ks) if judgement.span is not None else None
        firsts = np.array([ranks[mask].min() if mask.any() else np.inf for mask in pieces])
        row = question_metrics(ranks[relevant], judgement.gains[relevant], ks, recall_at, firsts)
    placed = np.flatnonzero(relevant & np.isfinite(positions.better))
    tie_size = int(positions.tied[placed[np.argmin(positions.better[placed])]]) if len(placed) else 0
    return {
        **row,
        "n_relevant": int(relevant.sum()),
        "n_relevant_tied": int((positions.tied[placed] > 1).sum()),
        "tie_group_size": tie_size,
    }


def span_recall(judgement: Judgement, ranks: np.ndarray, ks: list[int]) -> dict[int, float]:
    """recall@k for a span question: share of the evidence (of what some chunk holds) covered by the
    top-k chunks together."""
    span, starts, ends = judgement.evidence()
    # of what some chunk holds (Judgement.held); a judged view's whole-span chunk counts it all: 1 at most
    return {k: float(judgement.recall_of(union_coverage(starts[ranks <= k], ends[ranks <= k], *span))) for k in ks}


def summary_names(ks: list[int], budgets: Sequence[int] = ()) -> list[tuple[str, str]]:
    """(metrics.json key, per-question column it averages), in the order they are reported: the
    metric table by metric, then by k; recall_budget@B (retrieval_bench.evaluation.score.budgets) next
    to recall@k, the whole run's mrr before mrr@k."""
    names = []
    for name, column in ((metric.name, metric.column) for metric in AT_CUTOFF):
        names += [("mrr", "reciprocal_rank")] if name == "mrr" else []
        names += [(f"{name}@{k}", f"{column}@{k}") for k in ks]
        names += [(f"recall_budget@{b}", f"recall_budget@{b}") for b in sorted(budgets)] if name == "recall" else []
    return names


def summarize(
    per_question: pd.DataFrame, ks: list[int], n_chunks: int, budgets: Sequence[int] = ()
) -> dict[str, float | int]:
    """metrics.json: the mean of every metric over the answerable questions (an unanswerable one
    has none), and the counts."""
    answerable = per_question["kind"] != "unanswerable" if "kind" in per_question else True
    summary: dict[str, float | int] = {
        name: float(per_question[column].mean()) for name, column in summary_names(ks, budgets)
    }
    summary.update(
        n_questions=len(per_question),
        n_chunks=n_chunks,
        n_questions_without_relevant_chunk=int(((per_question["n_relevant"] == 0) & answerable).sum())
        if "n_relevant" in per_question
        else int((per_question["first_relevant_rank"].isna() & answerable).sum()),
    )
    if "n_relevant_tied" in per_question:
        summary["n_questions_judged_tied"] = int((per_question["n_relevant_tied"] > 0).sum())
    return summary


RANK_BUCKETS = [(1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, None)]


def rank_histogram(first_relevant_ranks: pd.Series) -> pd.DataFrame:
    """Questions per bucket of first relevant rank (01, 02, 03, 04-05, ..., >100, none), for a bar plot.
    An expected rank under ties may be fractional: it falls in the bucket whose range holds it
    (2.5 counts under 2)."""
    rows = []
    lows = [low for low, _ in RANK_BUCKETS] + [np.inf]
    for (low, high), next_low in zip(RANK_BUCKETS, lows[1:], strict=True):
        inside = (first_relevant_ranks >= low) & (first_relevant_ranks < next_low)
        # Zero-padded so the bars sort in rank order as text (dvc plots sorts labels as strings).
        label = f"{low:02d}" if low == high else (f"{low:02d}-{high:02d}" if high is not None else f">{low - 1}")
        rows.append({"first_relevant_rank": label, "questions": int(inside.sum())})
    rows.append({"first_relevant_rank": "none", "questions": int(first_relevant_ranks.isna().sum())})
    return pd.DataFrame(rows)
