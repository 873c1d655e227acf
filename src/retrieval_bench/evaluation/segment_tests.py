"""The segments where a change regressed: a paired randomization test within every segment
(question set, document, folder, length), Benjamini-Hochberg over every segment tested."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.corrections import BH, bh_adjust
from retrieval_bench.evaluation.segments import SEGMENT_COLUMNS
from retrieval_bench.evaluation.stats import ALPHA, randomization_p_value


def segment_groups(frame: pd.DataFrame, min_questions: int = 2) -> list[tuple[str, str, np.ndarray]]:
    """(segment column, value, row positions) of every segment value with `min_questions` or more
    questions, for the SEGMENT_COLUMNS present in `frame`; a value every question shares (one
    folder, one question set) is the whole comparison, not a segment, and is left out; so is one
    with the same questions as an earlier segment (a folder of one document), which would be the
    same test counted twice in the correction."""
    groups, seen = [], set()
    for column in (c for c in SEGMENT_COLUMNS if c in frame):
        for value, index in frame.reset_index(drop=True).groupby(column, sort=True).indices.items():
            if min_questions <= len(index) < len(frame) and tuple(index) not in seen:
                seen.add(tuple(index))
                groups.append((column, str(value), index))
    return groups


def regressions(tests: list[dict], alpha: float = ALPHA) -> list[dict]:
    """The tests (dicts with delta and p) whose mean change is negative and significant after
    Benjamini-Hochberg over all of them, each with p_bh added."""
    adjusted = bh_adjust([test["p"] for test in tests])
    return [{**test, "p_bh": float(p)} for test, p in zip(tests, adjusted) if p < alpha and test["delta"] < 0]


def paired_segment_tests(
    a: pd.Series, b: pd.Series, frame: pd.DataFrame, permutations: int = 10_000, seed: int = 0
) -> list[dict]:
    """segment_tests of the per-question differences b - a (aligned with `frame`'s rows); a
    question without a value under either run is left out, neither a tie nor a NaN p-value."""
    diffs = pd.to_numeric(b, errors="coerce").to_numpy(dtype=float) - pd.to_numeric(a, errors="coerce").to_numpy(
        dtype=float
    )
    keep = ~np.isnan(diffs)
    return segment_tests(diffs[keep], frame[keep], permutations, seed)


def regression_report(tests: list[dict]) -> dict:
    """How many segment tests were run, their correction and the regressed segments."""
    return {"tests": len(tests), "correction": f"{BH}, alpha {ALPHA}", "regressed": regressions(tests)}


def segment_tests(diffs: np.ndarray, frame: pd.DataFrame, permutations: int = 10_000, seed: int = 0) -> list[dict]:
    """A paired randomization test of the per-question differences `diffs` (aligned with `frame`'s
    rows) within every segment: {segment, value, n_questions, delta, p}."""
    return [
        {
            "segment": column,
            "value": value,
            "n_questions": len(index),
            "delta": float(diffs[index].mean()),
            "p": randomization_p_value(diffs[index], permutations, seed),
        }
        for column, value, index in segment_groups(frame)
    ]
