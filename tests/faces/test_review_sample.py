"""goldenset.review_sample: the sample people review and the PPI figures read, checked on randomized
golden sets against Webster's apportionment written as its divisor criterion."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pandas as pd
import pytest

from retrieval_bench.core.question_sets import question_set_of
from retrieval_bench.goldenset.review_sample import review_sample

SOURCES = ["hand-written", "qrels", "claude-haiku-4-5"]
KINDS = [None, "multi", "unanswerable", "keyword"]


def random_golden(rng: np.random.Generator) -> pd.DataFrame:
    rows = []
    for i in range(int(rng.integers(1, 120))):
        row = {"qid": f"q{rng.integers(1 << 40):x}-{i}", "question": "?", "source": str(rng.choice(SOURCES))}
        kind = KINDS[int(rng.integers(len(KINDS)))]
        if kind is not None:
            row["kind"] = kind
        if rng.random() < 0.1:
            row["question_set"] = "ragas"
        rows.append(row)
    return pd.DataFrame(rows)


def stratum(row: dict) -> tuple[str, str]:
    kind = row.get("kind")
    return question_set_of(row), kind if isinstance(kind, str) else "single"


@pytest.mark.parametrize("case", range(60))
def test_the_sample_is_a_webster_apportionment_of_simple_random_samples_and_nested(case):
    rng = np.random.default_rng(case)
    golden = random_golden(rng)
    size, seed = int(rng.integers(0, len(golden) + 1)), int(rng.integers(1000))
    sample = review_sample(golden, size, seed)
    assert len(sample) == size == len(set(sample)) and set(sample) <= set(golden["qid"])
    strata_of = {row["qid"]: stratum(row) for row in golden.to_dict("records")}
    totals, taken = Counter(strata_of.values()), Counter(strata_of[qid] for qid in sample)
    # Webster: some divisor d rounds every N_h / d to n_h, i.e. every N_h / (n_h + 1/2) <= every N_h / (n_h - 1/2)
    if size:
        lowest_upper = max(totals[h] / (taken[h] + 0.5) for h in totals)
        highest_lower = min((totals[h] / (taken[h] - 0.5) for h in totals if taken[h]), default=np.inf)
        assert lowest_upper <= highest_lower + 1e-12
    assert all(taken[h] <= totals[h] for h in totals)
    # nested: every prefix is the sample of its size; the file's row order does not matter; the seed does
    cut = int(rng.integers(0, size + 1))
    assert review_sample(golden, cut, seed) == sample[:cut]
    assert review_sample(golden.sample(frac=1.0, random_state=case), size, seed) == sample


def test_each_question_is_equally_likely_across_seeds_within_a_stratum():
    golden = pd.DataFrame(
        [{"qid": f"g{i}", "question": "?", "source": "gen"} for i in range(6)]
        + [{"qid": f"h{i}", "question": "?", "source": "hand-written"} for i in range(3)]
    )
    counts = Counter(qid for seed in range(3000) for qid in review_sample(golden, 3, seed))
    # 6 generated and 3 hand-written questions, 3 sampled: 2 generated and 1 hand-written every time
    assert sum(counts[f"g{i}"] for i in range(6)) == 2 * 3000 and sum(counts[f"h{i}"] for i in range(3)) == 3000
    shares = np.array([counts[f"g{i}"] for i in range(6)]) / 3000
    assert np.all(np.abs(shares - 1 / 3) < 0.05)  # binomial sd 0.0086: 5.8 sd


def test_a_sample_larger_than_the_golden_set_is_the_whole_golden_set():
    """The default review.sample 100 refused a golden set of 18 questions."""
    golden = pd.DataFrame([{"qid": "a", "question": "?"}, {"qid": "b", "question": "?"}])
    assert sorted(review_sample(golden, 3, 0)) == ["a", "b"] and review_sample(golden, 3, 0) == review_sample(
        golden, 2, 0
    )
