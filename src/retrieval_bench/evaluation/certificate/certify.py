"""The agreement certificate of a panel: would each synthetic question set (generated, or imported
from another tool) make the shipping decision the reference set (real queries, else hand-written
ones) makes? Per set: the verdict (evaluation.certificate.verdict: the same best system, the same
choice between the close candidates, the same difficulty, and a style the classifier cannot tell
apart), and when undetermined how many questions would decide it; per leaderboard metric the
decision's hypotheses, the same-winner probabilities, and Kendall tau, tau_AP and the pair-verdict
agreement with bootstrap intervals (evaluation.certificate.agreement, descriptive)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from retrieval_bench.core.question_sets import reference_set
from retrieval_bench.evaluation.certificate.agreement import RESAMPLES, certificate, pair_verdicts, resampled_means
from retrieval_bench.evaluation.certificate.style_gap import style_gap
from retrieval_bench.evaluation.certificate.verdict import (
    UNDETERMINED,
    Rule,
    Side,
    decide,
    headline_metric,
    questions_to_decide,
    side,
)
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.score.per_question import kind_metric_columns
from retrieval_bench.evaluation.score.reviewed import FINE, REVIEW
from retrieval_bench.evaluation.stats import ALPHA, Resampling

SHOWN = 3  # systems named as inflated, hypotheses named as beyond the margin
REVIEWED = "reviewed"  # the reference when no real queries exist: the questions people reviewed and kept


def choose_sets(table: pd.DataFrame) -> tuple[str, list[str]] | None:
    """(reference set, the synthetic sets in name order), or None without both. Without real or
    hand-written questions, the questions people reviewed and kept (REVIEWED) are the reference."""
    present = sorted(set(table["question_set"].dropna())) if "question_set" in table else []
    reference = reference_set(present)
    if reference is None and REVIEW in table and (table[REVIEW] == FINE).any():
        reference = REVIEWED
    synthetic = [name for name in present if name != reference]
    return (reference, synthetic) if reference and synthetic else None


def set_masks(table: pd.DataFrame, reference: str, synthetic: list[str]) -> dict[str, np.ndarray]:
    """Each set's rows of `table`. With REVIEWED as the reference, its rows are the kept reviewed
    questions and they leave the synthetic sets: the two sides of a verdict never share a question."""
    sets = table["question_set"].to_numpy()
    if reference != REVIEWED:
        return {name: sets == name for name in [reference, *synthetic]}
    reviewed = (table[REVIEW] == FINE).to_numpy()
    return {REVIEWED: reviewed, **{name: (sets == name) & ~reviewed for name in synthetic}}


def _set_rows(golden: list[dict], first: pd.DataFrame, masks: dict[str, np.ndarray]) -> dict[str, list[dict]]:
    """Each side's golden rows (the style gap's input): those of the questions its verdict scores,
    so the classifier compares the sets the verdict does (no unanswerable question, no question
    that left a side)."""
    by_qid = {str(row["qid"]): row for row in golden}
    return {name: [by_qid[str(qid)] for qid in first.index[mask] if str(qid) in by_qid] for name, mask in masks.items()}


def question_documents(golden: list[dict]) -> dict[str, str]:
    """qid -> the document its question was asked of (its cluster; the qid itself without one)."""
    return {str(row["qid"]): str(row.get("doc_id") or row["qid"]) for row in golden}


def _unavailable(aligned: dict[str, pd.DataFrame]) -> str | None:
    first = next(iter(aligned.values()))
    if choose_sets(first) is None:
        return (
            "needs real or hand-written (or reviewed) questions and a synthetic set (generated or imported) in the "
            "golden set"
        )
    return "needs 3 or more panel systems" if len(aligned) < 3 else None


def rule_of(validity: dict | None, systems: list[str]) -> Rule:
    """The decision rule from params validity (defaults where a key is absent); named candidate
    pairs of systems not in the panel are left out (the panel may be a subset in tests)."""
    validity = validity or {}
    default = Rule()
    index = {name: i for i, name in enumerate(systems)}
    pairs = tuple(
        (index[a], index[b]) for a, b in validity.get("candidates", []) if a in index and b in index and a != b
    )
    return Rule(
        margin=float(validity.get("margin", default.margin)),
        level_margin=float(validity.get("level_margin", default.level_margin)),
        candidates=pairs,
        max_style_auc=float(validity.get("max_style_auc", default.max_style_auc)),
    )


def panel_certificate(
    aligned: dict[str, pd.DataFrame],
    resamples: int = RESAMPLES,
    seed: int = 0,
    golden: list[dict] | None = None,
    validity: dict | None = None,
) -> dict:
    """The certificate for per-question tables (by system, aligned by qid as leaderboard.scorable
    makes them); `golden` rows give each question's document (its cluster) and the style gap;
    `validity` the params section. `available` false (with the reason) when it cannot be made."""
    reason = _unavailable(aligned)
    if reason:
        return {"available": False, "reason": reason}
    systems = list(aligned)
    first = next(iter(aligned.values()))
    chosen = choose_sets(first)
    assert chosen is not None  # else _unavailable gave the reason above
    reference, synthetic_sets = chosen
    masks = set_masks(first, reference, synthetic_sets)
    if masks[reference].sum() < MIN_SET_QUESTIONS:
        return {"available": False, "reason": _too_few(reference, int(masks[reference].sum()))}
    # a set left with fewer questions (all of them reviewed and kept, say) has no variance to test
    too_few = {
        name: _too_few(name, int(masks[name].sum()), reference)
        for name in synthetic_sets
        if masks[name].sum() < MIN_SET_QUESTIONS
    }
    synthetic_sets = [name for name in synthetic_sets if name not in too_few]
    masks = {name: mask for name, mask in masks.items() if name not in too_few}
    rule, resampling = rule_of(validity, systems), Resampling(resamples, seed)
    metrics = leaderboard_metrics(first.columns)
    documents = question_documents(golden or [])
    sides = {}
    for name, mask in masks.items():
        qids = [str(qid) for qid in first.index[mask]]
        sides[name] = side(
            {m: np.vstack([aligned[s][column].to_numpy(dtype=float)[mask] for s in systems]) for m, column in metrics},
            [documents.get(qid, qid) for qid in qids],
        )
    rows = _set_rows(golden, first, masks) if golden else {}
    sets = {
        name: set_certificate(
            (sides[reference], sides[name]),
            systems,
            (reference, name),
            rule,
            resampling=resampling,
            rows=(rows[reference], rows[name]) if rows else None,
        )
        for name in synthetic_sets
    }
    return {
        "available": True,
        "reference": reference,
        "systems": systems,
        "kinds": _kinds(aligned, (reference, synthetic_sets), golden, rule, resampling),
        "alpha": ALPHA,
        "rule": {
            "margin": rule.margin,
            "level_margin": rule.level_margin,
            "max_style_auc": rule.max_style_auc,
            "candidates": [[systems[a], systems[b]] for a, b in rule.candidates],
        },
        "n_questions": {name: one.n for name, one in sides.items()},
        "sets": sets,
        "not_certified": too_few,
    }


MIN_SET_QUESTIONS = 2  # questions a side needs for a verdict: one has no variance to test with


def _too_few(name: str, n: int, reference: str | None = None) -> str:
    """Why `name` (with `n` questions) gets no verdict; `reference`: the reference's name, for a synthetic set."""
    where = f" outside the {reference} questions" if reference else ""
    return f"{name} has {n} question{'' if n == 1 else 's'}{where} (a verdict needs {MIN_SET_QUESTIONS} on each side)"


def _kinds(
    aligned, sets: tuple[str, list[str]], golden: list[dict] | None, rule: Rule, resampling: Resampling
) -> dict[str, dict]:
    """_kind_certificates of every synthetic set that has some; `sets`: the reference and the
    synthetic sets."""
    reference, synthetic_sets = sets
    kinds = {
        name: _kind_certificates(aligned, (reference, name), golden=golden or [], rule=rule, resampling=resampling)
        for name in synthetic_sets
    }
    return {name: entry for name, entry in kinds.items() if entry}


MIN_KIND_QUESTIONS = 10  # reference questions of a kind below which it is not certified on its own


def _kind_certificates(
    aligned: dict[str, pd.DataFrame],
    names: tuple[str, str],
    *,
    golden: list[dict],
    rule: Rule,
    resampling: Resampling,
) -> dict[str, dict]:
    """A synthetic set certified per question kind against the reference's questions of the same
    kind ({kind: {verdict, line}}), or {kind: {verdict: None, reason}} where the reference has fewer
    than MIN_KIND_QUESTIONS of it; {} when the table has one kind. Unanswerable questions are not in
    `aligned` (they have no ranking metric): abstention is compared in the leaderboard instead."""
    first = next(iter(aligned.values()))
    if "kind" not in first or first["kind"].nunique() < 2:
        return {}
    systems = list(aligned)
    reference, synthetic = names
    in_set = set_masks(first, reference, [synthetic])  # with REVIEWED, its questions leave the synthetic side
    kinds = first["kind"].to_numpy()
    documents = question_documents(golden)
    out: dict[str, dict] = {}
    for kind in sorted(set(first.loc[in_set[synthetic], "kind"].dropna())):
        masks = [in_set[name] & (kinds == kind) for name in names]
        if masks[0].sum() < MIN_KIND_QUESTIONS or masks[1].sum() < MIN_SET_QUESTIONS:
            short, need = (0, MIN_KIND_QUESTIONS) if masks[0].sum() < MIN_KIND_QUESTIONS else (1, MIN_SET_QUESTIONS)
            out[kind] = {
                "verdict": None,
                "reason": f"{int(masks[short].sum())} {names[short]} questions of kind {kind} (certified from {need})",
            }
            continue
        metrics = kind_metric_columns(kind, first.columns)  # as the leaderboard ranks the kind: multi by complete@k
        sides = [
            side(
                {
                    m: np.vstack([aligned[s][column].to_numpy(dtype=float)[mask] for s in systems])
                    for m, column in metrics
                },
                [documents.get(str(qid), str(qid)) for qid in first.index[mask]],
            )
            for mask in masks
        ]
        # the style bar holds per kind too: a kind the classifier tells apart cannot agree
        rows = _set_rows(golden, first, dict(zip(names, masks, strict=True))) if golden else {}
        entry = set_decision(
            (sides[0], sides[1]),
            systems,
            names,
            rule,
            seed=resampling.seed,
            rows=(rows[reference], rows[synthetic]) if rows else None,
        )
        out[kind] = {"verdict": entry["verdict"], "line": entry["line"]}
    return out


def set_certificate(
    sides: tuple[Side, Side],
    systems: list[str],
    names: tuple[str, str],
    rule: Rule,
    *,
    resampling: Resampling,
    rows: tuple[list[dict], list[dict]] | None = None,
) -> dict:
    """One synthetic set against the reference (`sides`: the reference's verdict.Side, then the
    synthetic set's): set_decision's verdict, what would decide it and the style gap (with `rows`,
    each side's golden rows), and per metric, after its hypotheses and winners, its descriptive
    orderings (agreement.certificate)."""
    reference, synthetic = sides
    seed, resamples = resampling.seed, resampling.resamples
    out = set_decision(sides, systems, names, rule, seed=seed, rows=rows)
    rng, width = np.random.default_rng(seed), len(systems)
    # one set of bootstrap draws per set, shared by every metric's intervals
    shared = [resampled_means(np.vstack(list(one.matrices.values())), resamples, rng) for one in (reference, synthetic)]
    for i, metric in enumerate(reference.matrices):
        ref, syn = reference.matrices[metric], synthetic.matrices[metric]
        drawn = (shared[0][:, i * width : (i + 1) * width], shared[1][:, i * width : (i + 1) * width])
        verdicts = (pair_verdicts(ref, seed=seed), pair_verdicts(syn, seed=seed))
        out["metrics"][metric].update(certificate((ref, syn), verdicts, systems, names, resampling, drawn=drawn))
    return out


def set_decision(
    sides: tuple[Side, Side],
    systems: list[str],
    names: tuple[str, str],
    rule: Rule,
    *,
    seed: int,
    rows: tuple[list[dict], list[dict]] | None = None,
) -> dict:
    """The decision of one synthetic set against the reference and its line: the verdict, what
    would decide it, the style gap (with `rows`) and per metric its hypotheses and winners; what
    the per-kind verdicts need, without set_certificate's descriptive orderings (half the
    certificate's time, issue 45)."""
    reference, synthetic = sides
    gap = style_gap(*rows) if rows is not None and all(rows) else None  # no golden row of a side: no gap
    decision = decide(reference, synthetic, rule, gap["classifier_auc"] if gap else None, seed=seed)
    metrics = {}
    for metric in reference.matrices:
        winner = decision["winner"][metric]
        metrics[metric] = {
            "hypotheses": [
                {**h, "pair": h["pair"] and [systems[h["pair"][0]], systems[h["pair"][1]]]}
                for h in decision["hypotheses"]
                if h["metric"] == metric
            ],
            "winner": {
                **winner,
                "reference_best": systems[winner["reference_best"]],
                "synthetic_best": systems[winner["synthetic_best"]],
            },
            "shift": dict(zip(systems, decision["shifts"][metric], strict=True)),
        }
    out = {
        "verdict": decision["verdict"],
        "headline_metric": headline_metric(reference.matrices),
        "why_not_agrees": decision["why_not_agrees"],
        "permutations": decision["permutations"],
        "to_decide": None,
        "metrics": metrics,
        "style_gap": gap,
    }
    if decision["verdict"] == UNDETERMINED:
        out["to_decide"] = questions_to_decide(reference, synthetic, decision, rule, seed=seed)
    out["line"] = verdict_line(out, names, {names[0]: reference.n, names[1]: synthetic.n}, rule)
    if names[0] == REVIEWED:
        out["line"] += f" (reference: the questions people reviewed and kept, no real queries; {names[1]} without them)"
    return out


def _hypothesis_text(h: dict, names: tuple[str, str]) -> str:
    if h["kind"] == "level":
        return f"level on {h['metric']} {h['diff']:+.3f} (margin {h['margin']:.2f})"
    pair = f"{h['pair'][1]} - {h['pair'][0]} on {h['metric']}"
    return f"{pair}: {names[1]} differs from {names[0]} by {h['diff']:+.3f} (margin {h['margin']:.2f})"


def _inflated(shift: dict[str, float]) -> str:
    """The systems the set flatters most (largest shift up), else, when it flatters none, those it
    makes look worst."""
    up = sorted(((n, v) for n, v in shift.items() if v > 0), key=lambda item: -item[1])[:SHOWN]
    if up:
        return "most inflated: " + ", ".join(f"{name} {value:+.3f}" for name, value in up)
    down = sorted(shift.items(), key=lambda item: item[1])[:SHOWN]
    return "none inflated, most deflated: " + ", ".join(f"{name} {value:+.3f}" for name, value in down)


def _style_text(gap: dict, rule: Rule) -> str:
    given = sorted(gap["feature_auc"].items(), key=lambda item: -abs(item[1] - 0.5))[:2]
    features = ", ".join(f"{name} (AUC {auc:.2f})" for name, auc in given)
    shown = "; ".join(f'"{row["question"]}"' for row in gap["most_distinguishable"][:2])
    return (
        f"a classifier tells it apart from the reference (AUC {gap['classifier_auc']:.2f} > {rule.max_style_auc:.2f}), "
        f"given away by {features}; most obviously generated: {shown}"
    )


def _decide_text(estimate: dict, names: tuple[str, str]) -> str:
    if estimate["n"] is not None:
        n = estimate["n"]
        return (
            f"about {n['reference']} {names[0]} and {n['synthetic']} {names[1]} questions would decide it (resampled)"
        )
    if "too_few" in estimate:
        name = names[0] if estimate["too_few"]["set"] == "reference" else names[1]
        return f"too few {name} questions ({estimate['too_few']['n']}) to estimate how many would decide it"
    return (
        f"not even {estimate['factor']} times as many {names[0]} and {names[1]} questions would decide it (resampled)"
    )


def verdict_line(cert: dict, names: tuple[str, str], sizes: dict[str, int], rule: Rule) -> str:
    """One line: the verdict on the decision and why, e.g. "generated (300) agrees with real (120)
    on the decision (mrr): the same best, dense (P 0.91; reverse 0.88); 2 of 2 close pairs
    equivalent within 0.03; level +0.012 within 0.10"."""
    reference, synthetic = names
    metric = cert["headline_metric"]
    head = cert["metrics"][metric]
    winner = head["winner"]
    pairs = [h for h in head["hypotheses"] if h["kind"] == "pair"]
    level = next(h for h in head["hypotheses"] if h["kind"] == "level")
    best = (
        f"the same best, {winner['reference_best']}"
        if winner["reference_best"] == winner["synthetic_best"]
        else f"best {winner['synthetic_best']} where {reference} has {winner['reference_best']}"
    )
    summary = (
        f"{best} (P {winner['p_synthetic_picks_reference_best']:.2f}; "
        f"reverse {winner['p_reference_picks_synthetic_best']:.2f}); "
        f"{sum(h['equivalent'] for h in pairs)} of {len(pairs)} decision pairs equivalent within {rule.margin:.2f}; "
        f"level {level['diff']:+.3f} [{level['tost_low']:+.3f}, {level['tost_high']:+.3f}] "
        f"(margin {rule.level_margin:.2f}), "
        f"{_inflated(head['shift'])}"
    )
    who = f"{synthetic} ({sizes[synthetic]}) {{}} {reference} ({sizes[reference]}) on the decision ({metric})"
    if cert["verdict"] == "disagrees":
        beyond = [h for m in cert["metrics"].values() for h in m["hypotheses"] if h["beyond"]]
        more = f" and {len(beyond) - SHOWN} more" if len(beyond) > SHOWN else ""
        found = "; ".join(_hypothesis_text(h, names) for h in beyond[:SHOWN]) + more
        return f"{who.format('disagrees with')}: beyond the margin: {found}; {summary}"
    if cert["verdict"] == "agrees":
        return f"{who.format('agrees with')}: {summary}"
    reasons = []
    if "style" in cert["why_not_agrees"]:
        reasons.append(_style_text(cert["style_gap"], rule))
    why = "; cannot agree: " + "; ".join(reasons) if reasons else ""
    return f"{who.format('undetermined against')}: {summary}{why}; {_decide_text(cert['to_decide'], names)}"


def certificate_summary(cert: dict) -> list[str]:
    """The verdict line of every synthetic set, or the reason there is none."""
    if not cert.get("available"):
        return [f"certificate: not available ({cert.get('reason', 'no panel')})"]
    if "sets" not in cert:  # written before verdicts existed
        return ["certificate: metrics/certificate.json predates verdicts; run `dvc repro` to decide"]
    return [f"certificate: {entry['line']}" for entry in cert["sets"].values()] + [
        f"certificate: {name}: not certified: {reason}" for name, reason in cert.get("not_certified", {}).items()
    ]


def disagreeing_sets(cert: dict) -> list[str]:
    """The synthetic sets whose verdict is disagrees."""
    return [name for name, entry in cert.get("sets", {}).items() if entry["verdict"] == "disagrees"]


def certificate_lines(cert: dict) -> list[str]:
    """The certificate as markdown lines."""
    if not cert["available"]:
        return [f"Agreement certificate: not available ({cert['reason']})."]
    rule = cert["rule"]
    lines = [f"Agreement certificate against {cert['reference']}, {len(cert['systems'])} systems:", ""]
    for name, entry in cert["sets"].items():
        lines += [
            f"**{name}: {entry['verdict']}.** {entry['line']}",
            "",
            "| metric | best (reference / synthetic) | P same best | decision pairs equivalent | beyond the margin "
            "| level shift [90%] | Kendall tau | tau_AP | pair agreement |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        for metric, m in entry["metrics"].items():
            pairs = [h for h in m["hypotheses"] if h["kind"] == "pair"]
            level = next(h for h in m["hypotheses"] if h["kind"] == "level")
            winner = m["winner"]
            cells = [
                f"{winner['reference_best']} / {winner['synthetic_best']}",
                f"{winner['p_synthetic_picks_reference_best']:.2f}",
                f"{sum(h['equivalent'] for h in pairs)} of {len(pairs)}",
                str(sum(h["beyond"] for h in m["hypotheses"])),
                f"{level['diff']:+.3f} [{level['tost_low']:+.3f}, {level['tost_high']:+.3f}]",
                *(
                    f"{m[key]['value']:.2f} [{m[key]['ci_low']:.2f}, {m[key]['ci_high']:.2f}]"
                    if m[key]["value"] is not None and math.isfinite(m[key]["value"])
                    else "undefined (the systems tie)"  # no order to agree with: it showed nan [nan, nan]
                    for key in ("kendall_tau", "tau_ap")
                ),
                f"{m['pair_agreement']['value']:.2f}",
            ]
            lines.append(f"| {metric} | " + " | ".join(cells) + " |")
        lines.append("")
        for kind, verdict in cert.get("kinds", {}).get(name, {}).items():
            said = (
                f"{verdict['verdict']}. {verdict['line']}"
                if verdict["verdict"]
                else f"not certified: {verdict['reason']}"
            )
            lines.append(f"- {name}, kind {kind} against the {cert['reference']} questions of that kind: {said}")
        lines += [""] if cert.get("kinds", {}).get(name) else []
    lines += [f"**{name}: not certified.** {reason}." for name, reason in cert.get("not_certified", {}).items()]
    lines += [""] if cert.get("not_certified") else []
    lines.append(
        f"Decision pairs: the {cert['reference']} set's best system against each system within {rule['margin']} of "
        "it and against the synthetic set's best, and the pairs named in validity.candidates. disagrees: a decision "
        f"pair's difference or the level differs beyond its margin (margin {rule['margin']}, level "
        f"{rule['level_margin']}; one max-T permutation test over "
        f"every pair and level of every metric, clustered by document, family-wise alpha {cert['alpha']}); agrees: "
        f"every decision pair and the level of the headline metric are equivalent within the margins (TOST, alpha "
        f"{cert['alpha']}), no metric disagrees and the style classifier's AUC is at most "
        f"{rule['max_style_auc']}. Kendall tau, tau_AP (95% bootstrap CIs) and pair agreement are descriptive."
    )
    return lines
