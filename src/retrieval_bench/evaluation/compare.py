"""`retrieval-bench compare [A] [B]`: did run B retrieve better than run A, question by question?

A and B are git revisions (branches, tags, commits), DVC experiment names, or `workspace` (the
working tree). Both runs' metrics/per_question.csv are paired by qid, and for each metric the
report gives the two means, the mean paired difference (B - A), a paired bootstrap confidence
interval of that difference, a two-sided paired randomization (sign-flip) test p-value,
wins/ties/losses, and the minimum detectable difference for this many questions. It also lists
the questions that flipped: first relevant chunk in the top k under one run and not the other.
When both runs carry the judged view (judged_<metric> columns: duplicates and pooled LLM
grades, evaluation.judged), the same statistics of the judged metrics, over the same paired
questions, are shown beside the strict ones, and the metrics whose verdict differs are marked.

The statistics live in retrieval_bench.evaluation.stats; pairing and formatting here are pure
(compare_tables); only the functions at the bottom touch git and files.
"""
from __future__ import annotations

import argparse
import io
import json
import math
import re
import sys
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.metrics import CUTOFF
from retrieval_bench.evaluation.stats import (
    MDD_FORMULA,
    min_detectable_delta,
    paired_bootstrap_ci,
    randomization_p_value,
    win_tie_loss,
)
from retrieval_bench.evaluation.revisions import WORKSPACE, _git, read_artefact, resolve_revision
from retrieval_bench.io import InputError
from retrieval_bench.paths import CHUNKS, DOCUMENTS, GOLDENSET, PER_QUESTION


# ---------------------------------------------------------------------------------------------
# Comparing two per-question tables (pure)
# ---------------------------------------------------------------------------------------------

@dataclass
class Comparison:
    a: str
    b: str
    n_questions: int
    metrics: dict[str, dict]
    flip_k: int | None
    flipped: list[dict]
    warnings: list[str] = field(default_factory=list)
    resamples: int = 10_000
    seed: int = 0
    level: float = 0.95
    a_commit: str | None = None
    b_commit: str | None = None
    n_unscorable_dropped: int = 0  # paired questions left out: no relevant chunk under one run or both
    judged: dict[str, dict] = field(default_factory=dict)  # the judged view's statistics, by metric (strict name)

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "a_commit": self.a_commit,
            "b_commit": self.b_commit,
            "n_questions": self.n_questions,
            "n_unscorable_dropped": self.n_unscorable_dropped,
            "resamples": self.resamples,
            "seed": self.seed,
            "ci_level": self.level,
            "metrics": self.metrics,
            "judged_metrics": self.judged,
            "flip_k": self.flip_k,
            "flipped": self.flipped,
            "min_detectable_delta": {name: m["min_detectable_delta"] for name, m in self.metrics.items()},
            "min_detectable_delta_formula": MDD_FORMULA,
            "warnings": self.warnings,
        }


def metric_columns(columns) -> list[tuple[str, str]]:
    """(reported name, per-question column) of the compared metrics present in `columns`:
    mrr, ndcg@10, then recall@k and hit@k by increasing k."""
    columns = set(columns)
    headline = (("mrr", "reciprocal_rank"), (f"ndcg@{CUTOFF}", f"ndcg@{CUTOFF}"))  # as in metrics.summary_names
    names = [(name, column) for name, column in headline if column in columns]
    for prefix in ("recall", "hit"):
        ks = sorted(int(match.group(1)) for c in columns if (match := re.fullmatch(rf"{prefix}@(\d+)", c)))
        names += [(f"{prefix}@{k}", f"{prefix}@{k}") for k in ks]
    return names


def hit_ks(columns) -> list[int]:
    return sorted(int(match.group(1)) for c in columns if (match := re.fullmatch(r"hit@(\d+)", c)))


def choose_flip_k(columns, k: int | None = None) -> int | None:
    """The cutoff for flipped questions: `k` if given (it must have a hit@k column), else the
    smallest k >= 5 with a hit@k column, else the largest one; None when there are none."""
    ks = hit_ks(columns)
    if k is not None:
        if k not in ks:
            raise InputError(f"--k {k}: no hit@{k} column in both runs (have: {', '.join(map(str, ks)) or 'none'})")
        return k
    if not ks:
        return None
    at_least_5 = [value for value in ks if value >= 5]
    return at_least_5[0] if at_least_5 else ks[-1]


def _check_table(df: pd.DataFrame, label: str) -> pd.DataFrame:
    if "qid" not in df.columns:
        raise InputError(f"{label}: {PER_QUESTION} has no qid column")
    duplicated = df["qid"][df["qid"].duplicated()]
    if len(duplicated):
        raise InputError(f"{label}: {PER_QUESTION} lists qid {duplicated.iloc[0]} more than once")
    return df.assign(qid=df["qid"].astype(str)).set_index("qid")


def _rank(value) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else float(value)


def flipped_questions(a: pd.DataFrame, b: pd.DataFrame, k: int) -> list[dict]:
    """Questions (a and b indexed by the same qids) whose first relevant chunk is in the top k
    under exactly one run, worst first: the largest rank loss (B rank - A rank; no relevant chunk
    counts as an infinite rank) first, the largest gains last."""
    column = f"hit@{k}"
    hit_a = a[column].to_numpy(dtype=np.float64) > 0.5
    hit_b = b[column].to_numpy(dtype=np.float64) > 0.5
    rank_a = a["first_relevant_rank"].to_numpy(dtype=np.float64) if "first_relevant_rank" in a else np.full(len(a), np.nan)
    rank_b = b["first_relevant_rank"].to_numpy(dtype=np.float64) if "first_relevant_rank" in b else np.full(len(b), np.nan)
    rows = []
    for index in np.flatnonzero(hit_a != hit_b):
        ra, rb = rank_a[index], rank_b[index]
        loss = np.nan_to_num(rb, nan=np.inf) - np.nan_to_num(ra, nan=np.inf)
        rows.append({
            "qid": str(a.index[index]),
            "change": "lost" if hit_a[index] else "gained",
            "a_rank": _rank(ra),
            "b_rank": _rank(rb),
            "_loss": 0.0 if np.isnan(loss) else float(loss),
        })
    rows.sort(key=lambda row: (row["change"] != "lost", -row["_loss"], row["qid"]))
    for row in rows:
        del row["_loss"]
    return rows


def compare_tables(
    a_df: pd.DataFrame,
    b_df: pd.DataFrame,
    a_label: str = "A",
    b_label: str = "B",
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
    k: int | None = None,
) -> Comparison:
    """Pair two per-question tables by qid (the intersection, with a warning when the question
    sets differ) and compute every metric's statistics and the flipped questions."""
    if resamples < 1:
        raise InputError(f"--resamples must be at least 1, got {resamples}")
    a = _check_table(a_df, a_label)
    b = _check_table(b_df, b_label)
    warnings = []
    only_a = a.index.difference(b.index)
    only_b = b.index.difference(a.index)
    common = [qid for qid in a.index if qid in b.index]  # A's order
    if len(only_a) or len(only_b):
        warnings.append(
            f"the question sets differ: {len(only_a)} only in {a_label}, {len(only_b)} only in {b_label}; "
            f"comparing the {len(common)} in both"
        )
    if not common:
        raise InputError(f"{a_label} and {b_label} have no question (qid) in common")
    a, b = a.loc[common], b.loc[common]
    common, dropped = _scorable_in_both(a, b, a_label, b_label, warnings)
    if not common:
        raise InputError(f"no question is scorable (has a relevant chunk) under both {a_label} and {b_label}")
    a, b = a.loc[common], b.loc[common]
    names = metric_columns(set(a.columns) & set(b.columns))
    if not names:
        raise InputError(f"{a_label} and {b_label} share no metric column (reciprocal_rank, ndcg@10, recall@k, hit@k)")
    metrics = _statistics(a, b, names, resamples, seed, level, warnings)
    judged_names = [(name, JUDGED + column) for name, column in names if JUDGED + column in a.columns and JUDGED + column in b.columns]
    judged = _statistics(a, b, judged_names, resamples, seed, level, warnings, JUDGED) if judged_names else {}
    flip_k = choose_flip_k(set(a.columns) & set(b.columns), k)
    flipped = flipped_questions(a, b, flip_k) if flip_k is not None else []
    return Comparison(
        a=a_label, b=b_label, n_questions=len(common), metrics=metrics, flip_k=flip_k, flipped=flipped,
        warnings=warnings, resamples=resamples, seed=seed, level=level, n_unscorable_dropped=dropped, judged=judged,
    )


def metric_stream_seed(seed: int, name: str) -> int:
    """The seed of one metric's resampling: the user's seed and the metric's name (crc32), stable
    across runs and independent of which other metrics are compared."""
    return (seed * 1_000_003 + zlib.crc32(name.encode("utf-8"))) % 2**32


JUDGED = "judged_"  # per_question.csv's prefix of the judged view (evaluation.judged.PREFIX)


def _statistics(a: pd.DataFrame, b: pd.DataFrame, names: list[tuple[str, str]], resamples: int, seed: int, level: float,
                warnings: list[str], view: str = "") -> dict[str, dict]:
    """Every metric's paired statistics over the questions of `a` and `b` (same qids, same order)."""
    metrics = {}
    for name, column in names:
        # Each metric draws from its own stream, seeded by its name: adding a k changes no other figure.
        metric_seed = metric_stream_seed(seed, f"{view}{name}")
        va = pd.to_numeric(a[column], errors="coerce").to_numpy(dtype=np.float64)
        vb = pd.to_numeric(b[column], errors="coerce").to_numpy(dtype=np.float64)
        keep = ~(np.isnan(va) | np.isnan(vb))
        if not keep.all():
            warnings.append(f"{view}{name}: {int((~keep).sum())} questions without a value in one run left out")
        va, vb = va[keep], vb[keep]
        diffs = vb - va
        low, high = paired_bootstrap_ci(diffs, resamples, metric_seed, level)
        wins, ties, losses = win_tie_loss(va, vb)
        metrics[name] = {
            "column": column,
            "n": int(len(diffs)),
            "a": float(va.mean()) if len(va) else math.nan,
            "b": float(vb.mean()) if len(vb) else math.nan,
            "delta": float(diffs.mean()) if len(diffs) else math.nan,
            "ci_low": low,
            "ci_high": high,
            "p_value": randomization_p_value(diffs, resamples, metric_seed),
            "wins": wins,
            "ties": ties,
            "losses": losses,
            "min_detectable_delta": min_detectable_delta(diffs),
        }
    return metrics


def _scorable_in_both(a: pd.DataFrame, b: pd.DataFrame, a_label: str, b_label: str, warnings: list[str]) -> tuple[list[str], int]:
    """The paired qids with a relevant chunk under both runs, and how many were dropped. A
    question that lost its relevant chunk (e.g. to a re-chunking) would otherwise count as a
    retrieval loss; runs written before n_relevant existed count every question as scorable."""
    scorable_a = pd.to_numeric(a["n_relevant"], errors="coerce").fillna(1) > 0 if "n_relevant" in a else pd.Series(True, a.index)
    scorable_b = pd.to_numeric(b["n_relevant"], errors="coerce").fillna(1) > 0 if "n_relevant" in b else pd.Series(True, b.index)
    both = scorable_a & scorable_b
    only_a, only_b = int((scorable_a & ~scorable_b).sum()), int((scorable_b & ~scorable_a).sum())
    neither = int((~scorable_a & ~scorable_b).sum())
    if only_a or only_b:
        warnings.append(
            f"THE RUNS SCORE DIFFERENT QUESTIONS: {only_a} questions have a relevant chunk only under {a_label}, "
            f"{only_b} only under {b_label} (their chunking cannot hold the evidence); the figures below are paired "
            f"over the {int(both.sum())} questions scorable under both, {only_a + only_b + neither} left out"
        )
    elif neither:
        warnings.append(f"{neither} questions have no relevant chunk under either run and are left out")
    return [qid for qid in a.index if both[qid]], only_a + only_b + neither


def attach_question_text(flipped: list[dict], golden: list[dict] | None, gold_text: dict[str, str] | None) -> None:
    """Add each flipped question's text, gold chunk id and the first non-empty line of its gold
    text (keyed by qid: the evidence span, else the gold chunk), where known (in place)."""
    by_qid = {str(row.get("qid")): row for row in golden or []}
    for row in flipped:
        question = by_qid.get(row["qid"])
        if question is None:
            continue
        row["question"] = question.get("question")
        gold = question.get("gold_chunk_id")
        if gold is not None:
            row["gold_chunk_id"] = str(gold)
            text = (gold_text or {}).get(row["qid"])
            if text is not None:
                row["gold_first_line"] = next((line.strip() for line in text.splitlines() if line.strip()), "")


# ---------------------------------------------------------------------------------------------
# Formatting (pure)
# ---------------------------------------------------------------------------------------------

def _num(value: float, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:+.4f}" if sign else f"{value:.4f}"


def _p(value: float) -> str:
    if value is None or math.isnan(value):
        return "n/a"
    return f"{value:.4f}" if value >= 0.001 else f"{value:.1e}"


def _rank_text(rank: float | None) -> str:
    return "none" if rank is None else str(int(rank))


def _shorten(text: str, width: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _run_label(name: str, commit: str | None) -> str:
    return f"{name} ({commit[:7]})" if commit and not commit.startswith(name) else name


def _rows(comparison: Comparison) -> list[list[str]]:
    level = f"{comparison.level:.0%}"
    header = ["metric", "A", "B", "delta", f"{level} CI", "p", "wins/ties/losses", "min detectable"]
    rows = [header]
    for name, m in comparison.metrics.items():
        rows.append([
            name, _num(m["a"]), _num(m["b"]), _num(m["delta"], sign=True),
            f"[{_num(m['ci_low'], True)}, {_num(m['ci_high'], True)}]",
            _p(m["p_value"]) + ("*" if m["p_value"] < 0.05 else ""),
            f"{m['wins']}/{m['ties']}/{m['losses']}",
            _num(m["min_detectable_delta"]),
        ])
    return rows


def _verdict(m: dict) -> int:
    """+1 / -1: B significantly better / worse (p < 0.05); 0: no significant difference."""
    return 0 if not m["p_value"] < 0.05 else (1 if m["delta"] > 0 else -1)


def _side_by_side_rows(comparison: Comparison) -> list[list[str]]:
    """The strict and judged deltas side by side, one row per metric with both views."""
    level = f"{comparison.level:.0%}"
    rows = [["metric", "strict A", "strict B", "strict delta", "p", "judged A", "judged B", "judged delta", f"{level} CI", "p", ""]]
    for name, j in comparison.judged.items():
        m = comparison.metrics[name]
        rows.append([
            name, _num(m["a"]), _num(m["b"]), _num(m["delta"], sign=True), _p(m["p_value"]) + ("*" if m["p_value"] < 0.05 else ""),
            _num(j["a"]), _num(j["b"]), _num(j["delta"], sign=True), f"[{_num(j['ci_low'], True)}, {_num(j['ci_high'], True)}]",
            _p(j["p_value"]) + ("*" if j["p_value"] < 0.05 else ""), "<- views disagree" if _verdict(m) != _verdict(j) else "",
        ])
    return rows


SIDE_BY_SIDE_TITLE = ("Strict (the golden set's labels) and judged (+ chunks duplicating a relevant one, + pooled LLM "
                      "grades >= judge.min_grade; unjudged = not relevant) side by side, same paired questions:")
SIDE_BY_SIDE_NOTE = ("views disagree: B is significantly better or worse (p < 0.05) in one view and not in the other, or in "
                     "opposite directions; read the README's \"Strict and judged\" before trusting either.")


def _footnotes(comparison: Comparison) -> list[str]:
    level = f"{comparison.level:.0%}"
    return [
        f"delta = mean(B - A) over the paired questions; {level} CI: paired bootstrap, "
        f"{comparison.resamples} resamples, seed {comparison.seed}.",
        f"p: p-value of a two-sided paired randomization (sign-flip) test, {comparison.resamples} permutations; "
        "* p < 0.05 (not corrected for testing several metrics).",
        f"min detectable: smallest true delta detected with 80% power at alpha 0.05 = {MDD_FORMULA.split('  ')[0]}.",
        "wins/ties/losses: questions where B scored higher / the same / lower than A.",
    ]


def shown_flips(flipped: list[dict], limit: int) -> tuple[list[dict], int]:
    """The `limit` worst losses and the `limit` largest gains (already sorted worst first), and
    how many flipped questions that leaves out."""
    lost = [row for row in flipped if row["change"] == "lost"][:limit]
    gained = [row for row in flipped if row["change"] != "lost"][::-1][:limit][::-1]
    return lost + gained, len(flipped) - len(lost) - len(gained)


def _aligned(rows: list[list[str]]) -> list[str]:
    """A table as aligned lines: the first column left-aligned, the others right-aligned."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    out = []
    for index, row in enumerate(rows):
        cells = [cell.ljust(widths[0]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(row)]
        out.append("  ".join(cells).rstrip())
        if index == 0:
            out.append("  ".join("-" * width for width in widths if width).rstrip())
    return out


def format_text(comparison: Comparison, limit: int = 10) -> str:
    """The report as an aligned plain-text table for a terminal."""
    out = [
        f"A: {_run_label(comparison.a, comparison.a_commit)}",
        f"B: {_run_label(comparison.b, comparison.b_commit)}",
        f"{comparison.n_questions} questions paired by qid",
        "",
    ]
    out += [f"WARNING: {warning}" for warning in comparison.warnings]
    if comparison.warnings:
        out.append("")
    out += _aligned(_rows(comparison))
    out.append("")
    if comparison.judged:
        out += [SIDE_BY_SIDE_TITLE, ""]
        out += _aligned(_side_by_side_rows(comparison))
        out += ["", SIDE_BY_SIDE_NOTE, ""]
    out += _footnotes(comparison)
    out.append("")
    if comparison.flip_k is None:
        out.append("Flipped questions: no hit@k column to judge them by.")
    elif not comparison.flipped:
        out.append(f"Flipped questions (first relevant chunk in the top {comparison.flip_k} under one run only): none.")
    else:
        lost = sum(row["change"] == "lost" for row in comparison.flipped)
        out.append(
            f"Flipped questions (first relevant chunk in the top {comparison.flip_k} under one run only): "
            f"{lost} lost, {len(comparison.flipped) - lost} gained by B; worst first"
        )
        shown, left_out = shown_flips(comparison.flipped, limit)
        for row in shown:
            ranks = f"rank {_rank_text(row['a_rank'])} -> {_rank_text(row['b_rank'])}"
            out.append(f"  {row['change']:<6} {row['qid']}  {ranks}")
            if row.get("question"):
                out.append(f"         Q: {_shorten(row['question'])}")
            if row.get("gold_first_line") is not None:
                out.append(f"         gold {row.get('gold_chunk_id', '')}: {_shorten(row['gold_first_line'])}")
        if left_out:
            out.append(f"  ... and {left_out} more (--show N lists more; --json lists all)")
    return "\n".join(out) + "\n"


def _md_escape(text: str) -> str:
    return _shorten(text, 200).replace("|", "\\|").replace("`", "'")


def format_markdown(comparison: Comparison, limit: int = 10) -> str:
    """The report as Markdown for a pull-request comment: a table and the flipped questions."""
    a = _run_label(comparison.a, comparison.a_commit)
    b = _run_label(comparison.b, comparison.b_commit)
    out = [
        f"### Retrieval comparison: `{a}` (A) vs `{b}` (B)",
        "",
        f"{comparison.n_questions} questions paired by qid.",
        "",
    ]
    out += [f"> **Warning:** {warning}" for warning in comparison.warnings]
    if comparison.warnings:
        out.append("")
    rows = _rows(comparison)
    out.append("| " + " | ".join(rows[0]) + " |")
    out.append("|" + "|".join(["---"] + ["---:"] * (len(rows[0]) - 1)) + "|")
    for row in rows[1:]:
        out.append("| " + " | ".join(row) + " |")
    out.append("")
    if comparison.judged:
        side = _side_by_side_rows(comparison)
        side[0][-1] = "verdict"
        out += [f"**{SIDE_BY_SIDE_TITLE}**", "", "| " + " | ".join(side[0]) + " |", "|" + "|".join(["---"] + ["---:"] * (len(side[0]) - 1)) + "|"]
        out += ["| " + " | ".join(cell.replace("<- ", "") for cell in row) + " |" for row in side[1:]]
        out += ["", SIDE_BY_SIDE_NOTE, ""]
    out += [f"- {note}" for note in _footnotes(comparison)]
    out.append("")
    if comparison.flip_k is None:
        out.append("No hit@k column to find flipped questions by.")
    else:
        out.append(f"#### Flipped questions (first relevant chunk in the top {comparison.flip_k} under one run only)")
        out.append("")
        if not comparison.flipped:
            out.append("None.")
        shown, left_out = shown_flips(comparison.flipped, limit)
        for row in shown:
            mark = "lost" if row["change"] == "lost" else "gained"
            line = f"- **{mark}** `{row['qid']}` rank {_rank_text(row['a_rank'])} → {_rank_text(row['b_rank'])}"
            if row.get("question"):
                line += f": {_md_escape(row['question'])}"
            out.append(line)
            if row.get("gold_first_line") is not None:
                out.append(f"  - gold `{row.get('gold_chunk_id', '')}`: {_md_escape(row['gold_first_line'])}")
        if left_out:
            out.append(f"- … and {left_out} more")
    return "\n".join(out) + "\n"


def _json_safe(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_safe(item) for item in value]
    return value


def format_json(comparison: Comparison) -> str:
    """The report as JSON (NaN written as null)."""
    return json.dumps(_json_safe(comparison.to_dict()), indent=2, ensure_ascii=False) + "\n"


# ---------------------------------------------------------------------------------------------
# Reading runs from git, DVC experiments and the working tree
# ---------------------------------------------------------------------------------------------

def read_run(rev: str, cwd: Path) -> tuple[pd.DataFrame, str | None]:
    """metrics/per_question.csv at a revision/experiment (or the working tree) and its commit."""
    if rev == WORKSPACE:
        path = cwd / PER_QUESTION
        if not path.is_file():
            raise InputError(f"{PER_QUESTION} not found in the workspace; run `dvc repro` first")
        return _read_csv(path.read_text(encoding="utf-8"), f"{WORKSPACE}:{PER_QUESTION}"), None
    commit = resolve_revision(rev, cwd)
    shown = _git(["show", f"{commit}:./{PER_QUESTION}"], cwd)
    if shown.returncode != 0:
        raise InputError(f"{rev}: no {PER_QUESTION} committed there (run `dvc repro` and commit its outputs)")
    return _read_csv(shown.stdout, f"{rev}:{PER_QUESTION}"), commit


def _read_csv(text: str, label: str) -> pd.DataFrame:
    try:
        df = pd.read_csv(io.StringIO(text), dtype={"qid": str})
    except (pd.errors.ParserError, pd.errors.EmptyDataError) as error:
        raise InputError(f"{label}: not a readable CSV ({str(error).splitlines()[0] if str(error) else 'empty'})") from None
    return df


def question_context(cwd: Path, commits: list[str | None]) -> tuple[list[dict] | None, dict[str, str] | None]:
    """The golden set and each question's gold text (the evidence span of a span-anchored question,
    else its gold chunk) as they were in the compared runs (`commits`, None = the working tree;
    the later run wins where both know a question); None where unavailable."""
    golden: list[dict] = []
    gold_text: dict[str, str] = {}
    for commit in commits:
        try:
            rows, texts = _context_at(cwd, commit)
        except Exception:  # a missing column or a broken file only costs the context lines
            continue
        golden += rows
        gold_text.update(texts)
    return golden or None, gold_text or None


def _context_at(cwd: Path, commit: str | None) -> tuple[list[dict], dict[str, str]]:
    raw = read_artefact(GOLDENSET, commit, cwd)
    if raw is None:
        return [], {}
    golden = [json.loads(line) for line in raw.decode("utf-8").split("\n") if line.strip()]
    gold_text: dict[str, str] = {}
    spans = [row for row in golden if row.get("doc_id") is not None and row.get("start") is not None]
    documents_raw = read_artefact(DOCUMENTS, commit, cwd) if spans else None
    if documents_raw is not None:
        documents = pd.read_parquet(io.BytesIO(documents_raw), columns=["doc_id", "text"])
        texts = dict(zip(documents["doc_id"].astype(str), documents["text"]))
        for row in spans:
            if str(row["doc_id"]) in texts:
                gold_text[str(row["qid"])] = texts[str(row["doc_id"])][int(row["start"]):int(row["end"])]
    chunks_raw = read_artefact(CHUNKS, commit, cwd) if len(gold_text) < len(golden) else None
    if chunks_raw is not None:
        chunks = pd.read_parquet(io.BytesIO(chunks_raw), columns=["chunk_id", "text"])
        chunk_text = dict(zip(chunks["chunk_id"].astype(str), chunks["text"].astype(str)))
        for row in golden:
            qid, gold = str(row.get("qid")), str(row.get("gold_chunk_id"))
            if qid not in gold_text and gold in chunk_text:
                gold_text[qid] = chunk_text[gold]
    return golden, gold_text


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = __doc__.split("\n\n")[0]
    parser.add_argument("a", nargs="?", default="main", help="baseline: git revision, DVC experiment or 'workspace' (default: main)")
    parser.add_argument("b", nargs="?", default=WORKSPACE, help="candidate: git revision, DVC experiment or 'workspace' (default: workspace)")
    output = parser.add_mutually_exclusive_group()
    output.add_argument("--md", action="store_true", help="print a Markdown report (for a pull-request comment)")
    output.add_argument("--json", action="store_true", help="print machine-readable JSON")
    parser.add_argument("--resamples", type=int, default=10_000, help="bootstrap resamples and sign-flip permutations (default: 10000)")
    parser.add_argument("--seed", type=int, default=0, help="random seed of the bootstrap and the permutations (default: 0)")
    parser.add_argument("--show", type=int, default=10, help="flipped questions listed per direction in text and Markdown (default: 10)")
    parser.add_argument("--k", type=int, default=None, help="cutoff for flipped questions (default: the smallest k >= 5 with a hit@k column)")
    parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    cwd = Path.cwd()
    a_df, a_commit = read_run(args.a, cwd)
    b_df, b_commit = read_run(args.b, cwd)
    comparison = compare_tables(a_df, b_df, args.a, args.b, resamples=args.resamples, seed=args.seed, k=args.k)
    comparison.a_commit, comparison.b_commit = a_commit, b_commit
    if comparison.flipped:
        attach_question_text(comparison.flipped, *question_context(cwd, [a_commit, b_commit]))
    if args.json:
        for warning in comparison.warnings:
            print(f"warning: {warning}", file=sys.stderr)
        sys.stdout.write(format_json(comparison))
    elif args.md:
        sys.stdout.write(format_markdown(comparison, args.show))
    else:
        sys.stdout.write(format_text(comparison, args.show))
    return 0
