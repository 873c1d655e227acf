"""metrics/decision.md: one table a team decides with (per system its chunking, embedder, method,
mrr with its interval and Holm mark, recall at k and at the equal context budget, its costs and
the Pareto mark) and one line naming the systems to consider, by an explicit rule (RULE): the
best on the headline metric; among the systems not significantly worse than it (Holm), those no
other of them undercuts on cost beyond noise (evaluation.panel.pareto); of these the best is shipped,
the others are named with what they save. Pure functions of the leaderboard, the priced rows
(panel_costs.with_pareto) and the compared per-question tables."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd

from retrieval_bench.evaluation.panel.costs import COSTS, cost_point
from retrieval_bench.evaluation.panel.pareto import dominates, lower_beyond_noise
from retrieval_bench.evaluation.panel.reweighted import headline_entry, weights_text
from retrieval_bench.evaluation.score.per_question import HEADLINE_CUTOFF, headline_column, kinds_of, weighted_mean
from retrieval_bench.evaluation.stats import tie_level

RULE = (
    "Rule: the best system on mrr ({over}); the systems not significantly worse than it "
    "(Holm) are as good; of those, the ones no other as-good system undercuts on cost beyond noise (no cost "
    "higher beyond noise, one lower) are worth considering, and the best of them by mrr is the one to ship."
)
WORDS = {  # a cost lower / higher than another's, beyond noise
    "search_ms_per_question": ("cheaper to search", "dearer to search"),
    "embed_seconds_per_1000": ("cheaper to embed", "dearer to embed"),
    "index_mb": ("smaller index", "larger index"),
}


def _cheaper(a: dict, b: dict) -> bool:
    """Whether row `a` undercuts row `b` on cost beyond noise, quality aside."""
    return dominates({"quality": 0.0, "costs": cost_point(a)}, {"quality": 0.0, "costs": cost_point(b)})


def _lower(row: dict, than: dict, cost: str) -> bool:
    mine, theirs = cost_point(row)[cost], cost_point(than)[cost]
    return mine is not None and theirs is not None and lower_beyond_noise(mine, theirs)


def differences(row: dict, than: dict) -> list[str]:
    """How `row`'s costs differ from `than`'s beyond noise, e.g. "3.1x cheaper to search"."""
    out = []
    for cost in COSTS:
        lower = _lower(row, than, cost)
        if not (lower or _lower(than, row, cost)):
            continue
        small, large = sorted((row[cost], than[cost]))
        if small > 0:
            out.append(f"{large / small:.1f}x {WORDS[cost][0 if lower else 1]}")
        elif cost == "embed_seconds_per_1000":  # 0: a system that searches no vectors
            out.append("nothing to embed" if lower else "an embedding to pay for")
        else:
            out.append(WORDS[cost][0 if lower else 1])
    return out


def recommendation(ranked: dict, rows: dict[str, dict]) -> dict:
    """{best, as_good, ship, consider, line} by RULE. `ranked`: the leaderboard's mrr entry of
    its headline set ({best, systems: {name: {mean, differs_from_best}}}); `rows`: priced rows."""
    best, systems = ranked["best"], ranked["systems"]
    as_good = [name for name in systems if name != best and not systems[name].get("differs_from_best")]
    candidates = [best, *as_good]
    cheapest = [c for c in candidates if not any(_cheaper(rows[o], rows[c]) for o in candidates if o != c)]
    ship = max(cheapest, key=lambda name: (tie_level(systems[name]["mean"]), -candidates.index(name)))
    consider = [c for c in cheapest if c != ship and any(_lower(rows[c], rows[ship], cost) for cost in COSTS)]
    why = f"the best mrr, {systems[best]['mean']:.3f}"
    if ship != best:
        why = f"as good as {best} (not significantly worse, Holm) and {', '.join(differences(rows[ship], rows[best]))}"
    line = f"Ship {ship} ({why})"
    if consider:
        also = "; ".join(f"{name}, {', '.join(differences(rows[name], rows[ship]))}" for name in consider)
        line += f"; also as good (not significantly worse, Holm) and cheaper beyond noise on a cost: {also}"
    if rest := [c for c in candidates if c != ship and c not in consider]:
        line += f"; as good (not significantly worse, Holm) but no cheaper: {', '.join(rest)}"
    if len(systems) == 1:
        line += "; the panel has no other system to compare it with"
    elif len(candidates) == 1:
        line += "; every other system is significantly worse (Holm)"
    elif len(candidates) == len(systems):  # nothing told apart: "as good" is no evidence of quality here
        line += (
            "; no system is significantly worse than the best, so these questions do not tell the systems "
            "apart and the choice rests on cost: add questions before trusting it"
        )
    return {"best": best, "as_good": as_good, "ship": ship, "consider": consider, "line": line + "."}


def _means(
    tables: dict[str, pd.DataFrame], column: str | None, weights: Mapping[str, float] | None = None
) -> dict[str, float | None]:
    """Each table's mean of `column` (None where it lacks it); with `weights` (score.weights
    real-mix), reweighted by kind (score.per_question.weighted_mean)."""
    return {
        name: (
            None
            if column not in t
            else float(t[column].astype(float).mean())
            if weights is None
            else weighted_mean(t[column].to_numpy(dtype=float), kinds_of(t), weights)
        )
        for name, t in tables.items()
    }


def _embedder(row: dict) -> str:
    if not row["searches_vectors"]:
        return "—"
    model = str(row["model"]).rstrip("/").rsplit("/", 1)[-1]
    return model if row["max_seq_length"] is None else f"{model}, {row['max_seq_length']} tokens"


def _figure(value, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def table_lines(
    ranked: dict,
    rows: dict[str, dict],
    compared: dict[str, pd.DataFrame],
    unit: str,
    weights: Mapping[str, float] | None = None,
) -> list[str]:
    """The decision table (and the README's sample table): a row per system; `weights`: its
    recalls reweighted by kind, as `ranked` is (score.weights real-mix)."""
    columns = next(iter(compared.values())).columns
    recall = headline_column(columns, "recall", HEADLINE_CUTOFF)
    assert recall is not None  # score.k is never empty: some recall@k is always scored
    budgets = sorted(int(c.split("@")[1]) for c in columns if str(c).startswith("recall_budget@"))
    budget = f"recall_budget@{budgets[0]}" if budgets else None
    heads = ["system", "chunk chars", "embedder", "method", "mrr [95% CI]", recall]
    heads += [f"recall in {budgets[0]:,} {unit}"] if budget else []
    heads += ["search ms / question", "embedding s / 1,000 chunks", "index MB", "Pareto"]
    recalls, within = _means(compared, recall, weights), _means(compared, budget, weights)
    lines = ["| " + " | ".join(heads) + " |", "|---|---:|---|---|---|---:|" + "---:|" * (len(heads) - 7) + "---|"]
    for name, row in rows.items():
        mrr = ranked["systems"][name]
        cells = [
            name,
            "source's" if row["chunk_chars"] is None else _figure(row["chunk_chars"], 0),  # ready chunks
            _embedder(row),
            row["method"],
            f"{mrr['mean']:.3f} [{mrr['ci_low']:.3f}, {mrr['ci_high']:.3f}]"
            + (" *" if mrr.get("differs_from_best") else ""),
            _figure(recalls[name], 3),
            *([_figure(within[name], 3)] if budget else []),
            _figure(row["search_ms_per_question"], 3),
            _figure(row["embed_seconds_per_1000"], 2) if row["searches_vectors"] else "—",
            _figure(row["index_mb"], 2),
            "yes" if row["pareto"] else "no",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def decision_markdown(board: dict, rows: dict[str, dict], compared: dict, unit: str, conditions: str) -> str:
    """metrics/decision.md: the line, the table and how to read them. `rows`: priced rows;
    `compared`: the per-question tables of the headline set (all of them with `reweighted`);
    `conditions`: how the costs were measured."""
    entry = headline_entry(board)
    ranked = entry["metrics"]["mrr"]
    decided = recommendation(ranked, rows)
    again = board.get("reweighted")
    over = f"{board['headline_set']}" if again is None else f"all; {weights_text(again)}"
    lines = [
        f"**{decided['line']}**",
        "",
        *table_lines(ranked, rows, compared, unit, None if again is None else again["weights"]),
        "",
        f"mrr [{round(board['ci_level'] * 100)}% bootstrap CI] and recall over the {entry['n_questions']} compared "
        f"questions ({over}); *: significantly worse than the best ({board['correction']}). "
        f"Costs measured on this machine ({conditions}): medians in wall time; their ranges, the CPU time and "
        "the chunk counts are in metrics/costs.md. Pareto: no other system is as good on mrr and no dearer "
        "beyond noise, and better on one of them (metrics/costs.md says how).",
        "",
        RULE.format(over="of the headline question set" if again is None else weights_text(again)),
    ]
    return "\n".join(lines) + "\n"
