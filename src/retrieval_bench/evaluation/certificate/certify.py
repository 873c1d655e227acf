"""The agreement certificate of a panel: does each synthetic question set (generated, or imported
from another tool) order the systems as the reference set (real queries, else hand-written ones)
does? Per set: the verdict (evaluation.certificate.verdict) with the noise floor ("as consistent as N real
queries") and, when undetermined, how many questions would decide it; per leaderboard metric the
verdict, its pairs, and Kendall tau, tau_AP and the pair-verdict agreement with bootstrap
intervals (evaluation.certificate.agreement)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from retrieval_bench.core.question_sets import reference_set
from retrieval_bench.evaluation.certificate.agreement import RESAMPLES, certificate, pair_verdict
from retrieval_bench.evaluation.certificate.verdict import (
    UNDETERMINED,
    decide,
    headline_metric,
    noise_floor,
    questions_to_decide,
)
from retrieval_bench.evaluation.panel.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.stats import ALPHA


def choose_sets(table: pd.DataFrame) -> tuple[str, list[str]] | None:
    """(reference set, the synthetic sets in name order), or None without both."""
    present = sorted(set(table["question_set"].dropna())) if "question_set" in table else []
    reference = reference_set(present)
    synthetic = [name for name in present if name != reference]
    return (reference, synthetic) if reference and synthetic else None


def _unavailable(aligned: dict[str, pd.DataFrame]) -> str | None:
    first = next(iter(aligned.values()))
    if choose_sets(first) is None:
        return "needs real or hand-written questions and a synthetic set (generated or imported) in the golden set"
    return "needs 3 or more panel systems" if len(aligned) < 3 else None


def panel_certificate(aligned: dict[str, pd.DataFrame], resamples: int = RESAMPLES, seed: int = 0) -> dict:
    """The certificate for per-question tables (by system, aligned by qid as leaderboard.scorable
    makes them); `available` false (with the reason) when it cannot be made."""
    reason = _unavailable(aligned)
    if reason:
        return {"available": False, "reason": reason}
    systems = list(aligned)
    first = next(iter(aligned.values()))
    reference, synthetic_sets = choose_sets(first)
    metrics = leaderboard_metrics(first.columns)
    matrices = {
        name: {m: np.vstack([aligned[s][column].to_numpy(dtype=float) for s in systems]) for m, column in metrics}
        for name in [reference, *synthetic_sets]
    }
    for name, by_metric in matrices.items():
        mask = (first["question_set"] == name).to_numpy()
        matrices[name] = {m: matrix[:, mask] for m, matrix in by_metric.items()}
    sets = {
        name: set_certificate(matrices[reference], matrices[name], systems, (reference, name), resamples, seed)
        for name in synthetic_sets
    }
    return {
        "available": True,
        "reference": reference,
        "systems": systems,
        "alpha": ALPHA,
        "n_questions": {name: int(next(iter(m.values())).shape[1]) for name, m in matrices.items()},
        "sets": sets,
    }


def set_certificate(
    reference: dict[str, np.ndarray],
    synthetic: dict[str, np.ndarray],
    systems: list[str],
    names: tuple[str, str],
    resamples: int,
    seed: int,
) -> dict:
    """One synthetic set against the reference: verdict, noise floor, what would decide it, and per
    metric the verdict with its pairs (by system name) and the descriptive statistics."""
    decision = decide(reference, synthetic, seed=seed)
    metrics = {}
    for metric, judged in decision["metrics"].items():
        calls = [{**call, "a": systems[call["a"]], "b": systems[call["b"]]} for call in judged["calls"]]
        verdicts = tuple(
            np.array([pair_verdict(call[f"{side}_diff"], call[f"p_{side}"]) for call in judged["calls"]], dtype=np.int8)
            for side in ("reference", "synthetic")
        )
        described = certificate(reference[metric], synthetic[metric], verdicts, systems, names, resamples, seed=seed)
        metrics[metric] = {**{k: v for k, v in judged.items() if k != "calls"}, **described, "pair_calls": calls}
    headline = headline_metric(reference)
    out = {
        "verdict": decision["verdict"],
        "headline_metric": headline,
        "noise_floor": noise_floor(reference[headline], synthetic[headline], seed=seed),
        "to_decide": None,
        "metrics": metrics,
    }
    if decision["verdict"] == UNDETERMINED:
        out["to_decide"] = questions_to_decide(reference, synthetic, seed=seed)
    out["line"] = verdict_line(
        out, names, {names[0]: reference[headline].shape[1], names[1]: synthetic[headline].shape[1]}
    )
    return out


def _floor_text(floor: dict, reference: str) -> str:
    if floor["as_consistent_as"] is None:
        return f"no noise floor ({floor['why']})"
    return f"as consistent as {floor['bound']} {floor['as_consistent_as']} {reference} questions"


def _contradicted_text(cert: dict, names: tuple[str, str]) -> str:
    found = [
        f"{call['b']} vs {call['a']} on {metric} ({names[0]} {call['reference_diff']:+.3f}, {names[1]} {call['synthetic_diff']:+.3f})"
        for metric, m in cert["metrics"].items()
        for call in m["pair_calls"]
        if call.get("status") == "contradicted"
    ]
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return "; ".join(found[:3]) + more


def verdict_line(cert: dict, names: tuple[str, str], sizes: dict[str, int]) -> str:
    """One line: the set's verdict, why, and its noise floor, e.g. "generated (300) agrees with
    real (120) on the panel's order: as consistent as about 95 real questions; 14 of 14 separable
    pairs reproduced on mrr (1 not separable with these questions)"."""
    reference, synthetic = names
    head = cert["metrics"][cert["headline_metric"]]
    pairs = (
        f"{head['reproduced']} of {head['separable']} separable pairs reproduced on {cert['headline_metric']}"
        f" ({head['pairs'] - head['separable']} not separable with these questions)"
    )
    who = f"{synthetic} ({sizes[synthetic]}) {{}} {reference} ({sizes[reference]}) on the panel's order"
    floor = _floor_text(cert["noise_floor"], reference)
    if cert["verdict"] == "disagrees":
        return f"{who.format('disagrees with')}: contradicted: {_contradicted_text(cert, names)}; {floor}"
    if cert["verdict"] == "agrees":
        return f"{who.format('agrees with')}: {floor}; {pairs}"
    estimate, named = cert["to_decide"], {"reference": reference, "synthetic": synthetic}
    if estimate["n"] is not None:
        wanted = " and ".join(f"{n} {named[name]}" for name, n in estimate["n"].items())
        decide_text = f"; about {wanted} questions would decide it (resampled)"
    elif "too_few" in estimate:
        name = named[estimate["too_few"]["set"]]
        decide_text = f"; too few {name} questions ({estimate['too_few']['n']}) to estimate how many would decide it"
    elif "factor" in estimate:
        decide_text = (
            f"; not even {estimate['factor']} times as many {reference} and {synthetic} questions would decide it "
            "(resampled)"
        )
    else:  # a certificate written before the estimate said why in parts
        decide_text = f"; {estimate['why']}"
    return f"{who.format('undetermined against')}: {pairs}, {head['unsettled']} unsettled{decide_text}; {floor}"


def certificate_summary(cert: dict) -> list[str]:
    """The verdict line of every synthetic set, or the reason there is none."""
    if not cert.get("available"):
        return [f"certificate: not available ({cert.get('reason', 'no panel')})"]
    if "sets" not in cert:  # written before verdicts existed
        return ["certificate: metrics/certificate.json predates verdicts; run `dvc repro` to decide"]
    return [f"certificate: {entry['line']}" for entry in cert["sets"].values()]


def disagreeing_sets(cert: dict) -> list[str]:
    """The synthetic sets whose verdict is disagrees."""
    return [name for name, entry in cert.get("sets", {}).items() if entry["verdict"] == "disagrees"]


def certificate_lines(cert: dict) -> list[str]:
    """The certificate as markdown lines."""
    if not cert["available"]:
        return [f"Agreement certificate: not available ({cert['reason']})."]
    lines = [f"Agreement certificate against {cert['reference']}, {len(cert['systems'])} systems:", ""]
    for name, entry in cert["sets"].items():
        lines += [
            f"**{name}: {entry['verdict']}.** {entry['line']}",
            "",
            "| metric | verdict | separable pairs | reproduced | contradicted | Kendall tau | tau_AP | pair agreement |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for metric, m in entry["metrics"].items():
            cells = [
                f"{m[key]['value']:.2f} [{m[key]['ci_low']:.2f}, {m[key]['ci_high']:.2f}]"
                for key in ("kendall_tau", "tau_ap")
            ] + [f"{m['pair_agreement']['value']:.2f}"]
            counts = f"{m['separable']} of {m['pairs']} | {m['reproduced']} | {m['contradicted']}"
            lines.append(f"| {metric} | {m['verdict']} | {counts} | " + " | ".join(cells) + " |")
        lines.append("")
    lines.append(
        f"Separable: the {cert['reference']} questions tell the pair apart (paired randomization test, Holm, "
        f"alpha {cert['alpha']}); reproduced: the synthetic set does too, the same way; contradicted: it does not "
        "and its difference is significantly smaller (Welch, Holm over the set). 95% bootstrap CIs over questions."
    )
    return lines
