"""The report of `retrieval-bench compare` (evaluation.compare.outcome.Comparison) as aligned text, Markdown
and JSON: one verdict line first, the paired statistics, the judged view beside the strict one
where the two differ, and the flipped questions. Pure functions."""

from __future__ import annotations

import json
import math

from retrieval_bench.core.files import without_nan
from retrieval_bench.evaluation.compare.kinds import compare_kind_lines
from retrieval_bench.evaluation.compare.outcome import Comparison, alpha, direction, level_text, num, verdict_line
from retrieval_bench.evaluation.stats import ALPHA, EXACT_MAX_NONZERO, MC_PERMUTATIONS, MDD_FORMULA


def _p(value: float, alpha: float | None = None) -> str:
    """A p-value, starred when below `alpha`."""
    if value is None or math.isnan(value):
        return "n/a"
    return (f"{value:.4f}" if value >= 0.001 else f"{value:.1e}") + ("*" if alpha and value < alpha else "")


def _rank_text(rank: float | None) -> str:
    """A rank as the run has it: an expected rank within a tie is a fraction (1.5), never cut to 1."""
    return "none" if rank is None else f"{rank:g}"


def _shorten(text: str, width: int = 100) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 3] + "..."


def _run_label(name: str, commit: str | None) -> str:
    return f"{name} ({commit[:7]})" if commit and not commit.startswith(name) else name


PARAMS_SHOWN = 8  # changed params listed in the report; --json lists all


def params_line(comparison: Comparison) -> str | None:
    """What the compared runs were made with differently: 'params that differ: key a -> b; ...'."""
    changed = comparison.params_changed
    if changed is None:
        return None
    if not changed:
        return "params that differ: none (params.yaml is the same at A and B; the corpus, questions or code may not be)"
    shown = "; ".join(f"{row['key']} {row['a']!r} -> {row['b']!r}" for row in changed[:PARAMS_SHOWN])
    more = f"; and {len(changed) - PARAMS_SHOWN} more (--json lists all)" if len(changed) > PARAMS_SHOWN else ""
    return f"params that differ: {shown}{more}"


def _rows(comparison: Comparison) -> list[list[str]]:
    level = level_text(comparison.level)
    header = ["metric", "A", "B", "delta", f"{level} CI", "p", "wins/ties/losses", "min detectable"]
    rows = [header]
    for name, m in comparison.metrics.items():
        rows.append(
            [
                name,
                num(m["a"]),
                num(m["b"]),
                num(m["delta"], sign=True),
                f"[{num(m['ci_low'], True)}, {num(m['ci_high'], True)}]",
                _p(m["p_value"], alpha(comparison)),
                f"{m['wins']}/{m['ties']}/{m['losses']}",
                num(m["min_detectable_delta"]),
            ]
        )
    return rows


def _side_by_side_rows(comparison: Comparison) -> list[list[str]]:
    """The strict and judged deltas side by side, one row per metric with both views."""
    level = level_text(comparison.level)
    rows = [
        [
            "metric",
            "strict A",
            "strict B",
            "strict delta",
            "p",
            "judged A",
            "judged B",
            "judged delta",
            f"{level} CI",
            "p",
            "",
        ]
    ]
    for name, j in comparison.judged.items():
        m = comparison.metrics[name]
        rows.append(
            [
                name,
                num(m["a"]),
                num(m["b"]),
                num(m["delta"], sign=True),
                _p(m["p_value"], alpha(comparison)),
                num(j["a"]),
                num(j["b"]),
                num(j["delta"], sign=True),
                f"[{num(j['ci_low'], True)}, {num(j['ci_high'], True)}]",
                _p(j["p_value"], alpha(comparison)),
                "<- views disagree" if direction(m, alpha(comparison)) != direction(j, alpha(comparison)) else "",
            ]
        )
    return rows


SIDE_BY_SIDE_TITLE = (
    "Strict (the golden set's labels) and judged (+ chunks duplicating a relevant one, + pooled LLM "
    "grades >= judge.min_grade; unjudged = not relevant) side by side, same paired questions:"
)
SIDE_BY_SIDE_NOTE = (
    "views disagree: B is significantly better or worse (p < {alpha:g}) in one view and not in the other, or in "
    "opposite directions; read docs/explanation/strict-vs-judged.md before trusting either."
)


# The corpus may hold duplicate chunks (metrics.json's n_duplicate_chunks) and the views still coincide:
# they differ only when a copy of a relevant chunk is retrieved (n_questions_gaining_duplicate).
VIEWS_COINCIDE = (
    "The judged view equals the strict one here (no duplicate of a relevant chunk was retrieved, no LLM "
    "grades): one table."
)


def _judged_lines(comparison: Comparison, table, title: str) -> list[str]:
    """The side-by-side table of the two views (rendered by `table`), only where they differ; its
    legend only when a row is marked."""
    if not comparison.judged:
        return []
    if comparison.views_coincide:
        return [VIEWS_COINCIDE, ""]
    rows = _side_by_side_rows(comparison)
    marked = any(row[-1] for row in rows[1:])
    legend = [SIDE_BY_SIDE_NOTE.format(alpha=alpha(comparison)), ""] if marked else []
    return [title, "", *table(rows), "", *legend]


def _markdown_table(rows: list[list[str]]) -> list[str]:
    """A Markdown table: the first column left-aligned, the others right-aligned."""
    return [
        "| " + " | ".join(rows[0]) + " |",
        "|" + "|".join(["---"] + ["---:"] * (len(rows[0]) - 1)) + "|",
        *("| " + " | ".join(row) + " |" for row in rows[1:]),
    ]


def _markdown_verdicts(rows: list[list[str]]) -> list[str]:
    """The side-by-side table in Markdown: its last column headed "verdict", without the arrow."""
    return _markdown_table(
        [[*rows[0][:-1], "verdict"], *([cell.replace("<- ", "") for cell in row] for row in rows[1:])]
    )


def _footnotes(comparison: Comparison) -> list[str]:
    level = level_text(comparison.level)
    return [
        f"delta = mean(B - A) over the paired questions; {level} CI: paired bootstrap, "
        f"{comparison.resamples} resamples, seed {comparison.seed}.",
        "p: p-value of a two-sided paired randomization (sign-flip) test, exact over every sign flip where "
        f"at most {EXACT_MAX_NONZERO} differences are nonzero, else {max(comparison.resamples, MC_PERMUTATIONS)} "
        "random flips of that test's own; "
        f"* p < {alpha(comparison):g}, 1 - the CI's level (not corrected for testing several metrics).",
        f"min detectable: smallest true delta detected with 80% power at alpha {ALPHA} = {MDD_FORMULA.split('  ')[0]}.",
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


def ppi_lines(comparison: Comparison) -> list[str]:
    """The prediction-powered deltas B - A (people's reviews in both runs' tables), or nothing."""
    if not comparison.ppi:
        return []
    out = ["Prediction-powered delta B - A [95%], from the reviewed questions and the rest (docs/explanation/ppi.md):"]
    for view, metrics in comparison.ppi.items():
        for metric, entry in metrics.items():
            shown = "n/a" if entry is None else f"{entry['estimate']:+.4f} [{entry['low']:+.4f}, {entry['high']:+.4f}]"
            out.append(f"  {view} {metric}: {shown}")
    return [*out, ""]


def format_text(comparison: Comparison, limit: int = 10) -> str:
    """The report as an aligned plain-text table for a terminal."""
    out = [
        verdict_line(comparison),
        "",
        f"A: {_run_label(comparison.a, comparison.a_commit)}",
        f"B: {_run_label(comparison.b, comparison.b_commit)}",
        *filter(None, [params_line(comparison)]),
        f"{comparison.n_questions} questions paired by qid",
        "",
    ]
    out += [f"WARNING: {warning}" for warning in comparison.warnings]
    if comparison.warnings:
        out.append("")
    out += _aligned(_rows(comparison))
    out.append("")
    out += _judged_lines(comparison, _aligned, SIDE_BY_SIDE_TITLE)
    out += ppi_lines(comparison)
    out += _footnotes(comparison)
    out.append("")
    out += compare_kind_lines(comparison.by_kind)
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
        f"**{verdict_line(comparison)}**",
        "",
        *[text for line in filter(None, [params_line(comparison)]) for text in (f"{_md_escape(line)}.", "")],
        f"{comparison.n_questions} questions paired by qid.",
        "",
    ]
    out += [f"> **Warning:** {warning}" for warning in comparison.warnings]
    if comparison.warnings:
        out.append("")
    out += [*_markdown_table(_rows(comparison)), ""]
    out += _judged_lines(comparison, _markdown_verdicts, f"**{SIDE_BY_SIDE_TITLE}**")
    out += ppi_lines(comparison)
    out += [f"- {note}" for note in _footnotes(comparison)]
    out.append("")
    kind_lines = compare_kind_lines(comparison.by_kind)
    if kind_lines:  # fenced: indented after the footnotes' list, CommonMark ran it into the last item
        out += ["```text", *[line for line in kind_lines if line], "```", ""]
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


def format_json(comparison: Comparison) -> str:
    """The report as JSON (NaN written as null)."""
    return json.dumps(without_nan(comparison.to_dict()), indent=2, ensure_ascii=False) + "\n"
