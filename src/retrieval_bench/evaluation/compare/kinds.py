"""`retrieval-bench compare` per question kind: for each answerable kind, A's and B's means of the
metrics that fit it over its paired questions, the difference and its randomization p-value; for
unanswerable questions, each run's abstention AUC and false-hit rate (on its own table: abstention
needs no pairing of relevant chunks)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.score.abstention import UNANSWERABLE, abstention_summary
from retrieval_bench.evaluation.score.kinds import kinds_present
from retrieval_bench.evaluation.score.per_question import kind_metric_columns
from retrieval_bench.evaluation.stats import randomization_p_value


def kind_comparison(
    whole: tuple[pd.DataFrame, pd.DataFrame],
    paired: tuple[pd.DataFrame, pd.DataFrame],
    resamples: int,
    seed: int,
    warnings: list[str] | None = None,
) -> dict[str, dict]:
    """{kind: figures} when the runs carry kinds and hold two or more of them or unanswerable
    questions (else {}). `whole`: A's and B's whole tables (a qid column); `paired`: their paired
    scorable questions (same qids, same order). Every figure is over the questions both runs hold
    with the same kind (a question one run lacks, or calls another kind, would compare other
    questions as if paired); how many were left out for another kind is said in `warnings`."""
    (a_all, b_all), (a, b) = whole, paired
    if "kind" not in a_all or "kind" not in b_all:
        return {}
    kinds = kinds_present(pd.concat([a_all, b_all]))  # an unanswerable question in either run counts
    if len(kinds) < 2 and UNANSWERABLE not in kinds:
        return {}
    kind_of = [t.assign(qid=t["qid"].astype(str)).set_index("qid")["kind"] for t in (a_all, b_all)]
    common = kind_of[0].index.intersection(kind_of[1].index)
    same = common[(kind_of[0][common] == kind_of[1][common]).to_numpy()]
    if len(same) < len(common) and warnings is not None:
        n = len(common) - len(same)
        said = "1 question has" if n == 1 else f"{n} questions have"
        warnings.append(f"{said} another kind in B than in A: left out of the per-kind figures")
    out: dict[str, dict] = {}
    for kind in kinds:
        if kind == UNANSWERABLE:
            tables = [t[t["qid"].astype(str).isin(same)] for t in (a_all, b_all)]
            figures = {
                side: {
                    name: abstention_summary(table).get(name, math.nan) for name in ("abstention_auc", "false_hit_rate")
                }
                for side, table in zip(("a", "b"), tables, strict=True)
            }
            out[kind] = {"n": int((tables[1]["kind"] == kind).sum()), **figures}
            continue
        mask = ((a["kind"] == kind) & (b["kind"] == kind)).to_numpy()
        if not mask.any():
            continue
        metrics = {}
        for name, column in kind_metric_columns(kind, set(a.columns) & set(b.columns)):
            va, vb = (pd.to_numeric(t[column], errors="coerce").to_numpy(dtype=np.float64)[mask] for t in (a, b))
            metrics[name] = {
                "a": _mean(va),
                "b": _mean(vb),
                "delta": _mean(vb - va),
                "p_value": randomization_p_value((vb - va)[~np.isnan(vb - va)], resamples, seed),
            }
        out[kind] = {"n": int(mask.sum()), "metrics": metrics}
    return out


def _figure(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.4f}"


def compare_kind_lines(by_kind: dict[str, dict]) -> list[str]:
    """The per-kind part of the report, a line per kind and metric (none without kinds)."""
    if not by_kind:
        return []
    out = ["By question kind (A -> B):"]
    for kind, entry in by_kind.items():
        if kind == UNANSWERABLE:
            out.append(
                f"  unanswerable ({entry['n']} questions; abstention, higher AUC and lower false-hit rate are better):"
            )
            for name in ("abstention_auc", "false_hit_rate"):
                out.append(f"    {name}: {_figure(entry['a'][name])} -> {_figure(entry['b'][name])}")
            continue
        out.append(f"  {kind} ({entry['n']} paired questions):")
        for name, row in entry["metrics"].items():
            out.append(
                f"    {name}: {_figure(row['a'])} -> {_figure(row['b'])} ({row['delta']:+.4f}, p = {row['p_value']:.3g})"
            )
    return [*out, ""]


def _mean(values: np.ndarray) -> float:
    """The mean of the values that are numbers; NaN (no numpy warning) when none is."""
    values = values[~np.isnan(values)]
    return float(values.mean()) if len(values) else float("nan")
