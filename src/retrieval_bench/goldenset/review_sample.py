"""Which golden-set questions people review: a seeded random sample, stratified by question set and
kind, in the order they are shown.

The prediction-powered estimates (evaluation) assume the reviewed questions are a uniformly random
sample of the golden set; the review page (retrieval_bench.review) shows, and its Label Studio
import accepts, only the questions `review_sample` draws with `review.sample` and `review.seed`.

How: the rows are grouped in strata (question set x kind); each stratum's question ids are shuffled
with the seed; then the sample is built one question at a time, each taken from the stratum with the
highest Sainte-Lague priority N_h / (2 n_h + 1) (N_h its questions, n_h those taken so far; a tie goes
to the stratum with fewer taken, then to a seeded order). So every stratum gets its proportional
share N_h x size / N to within rounding (Webster's apportionment), each stratum's questions are a
simple random sample of it, and every question's chance to be in the sample is size / N up to that
rounding: the sample is a uniform random one, as the estimator assumes, without a small set or kind
missing from it by chance. The method is house-monotone, so the sample of size m is the first m
questions of the sample of any larger size: a reviewer who stops early has reviewed a sample of
their own size, and raising `review.sample` keeps every question already reviewed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.core.question_sets import question_set_of

DEFAULT_KIND = "single"  # a row without `kind` is a single-evidence question (core.relevance)


def strata(golden: pd.DataFrame) -> dict[tuple[str, str], list[str]]:
    """(question set, kind) -> the question ids of that stratum, sorted (the file's order does not matter)."""
    groups: dict[tuple[str, str], list[str]] = {}
    for record in golden.to_dict("records"):
        row = {str(key): value for key, value in record.items()}
        kind = row.get("kind")
        key = (question_set_of(row), str(kind) if isinstance(kind, str) and kind else DEFAULT_KIND)
        groups.setdefault(key, []).append(str(row["qid"]))
    return {key: sorted(qids) for key, qids in sorted(groups.items())}


def review_sample(golden: pd.DataFrame, size: int, seed: int) -> list[str]:
    """The `size` question ids to review, in review order (every prefix is itself the sample of
    its length); every question when the golden set holds fewer than `size` (the default 100 of
    an 18-question golden set refused to start)."""
    size = min(size, len(golden))
    rng = np.random.default_rng(seed)
    groups = strata(golden)
    shuffled = [list(rng.permutation(qids)) for qids in groups.values()]
    tie_order = rng.permutation(len(shuffled))  # a seeded order among strata of equal priority
    totals = np.array([len(qids) for qids in shuffled], dtype=np.float64)
    taken = np.zeros(len(shuffled), dtype=np.int64)
    sample: list[str] = []
    for _ in range(size):
        priority = totals / (2 * taken + 1)
        # lexsort: the last key sorts first; highest priority, then fewest taken, then the seeded order
        best = int(np.lexsort((tie_order, taken, -priority))[0])
        sample.append(str(shuffled[best][taken[best]]))
        taken[best] += 1
    return sample
