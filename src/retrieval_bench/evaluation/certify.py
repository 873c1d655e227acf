"""The agreement certificate of a panel: do the generated questions order the systems as the
real (or, without real ones, the hand-written) questions do? Per leaderboard metric, Kendall tau,
tau_AP and the pair-verdict agreement with bootstrap intervals (evaluation.agreement), checked
against validity.threshold."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from retrieval_bench.evaluation.agreement import certificate
from retrieval_bench.evaluation.leaderboard import leaderboard_metrics
from retrieval_bench.evaluation.segments import GENERATED

REFERENCE_SETS = ("real", "hand-written")  # the first present is the reference


def choose_sets(table: pd.DataFrame) -> tuple[str, str] | None:
    """(reference set, synthetic set), or None without both."""
    present = set(table["question_set"]) if "question_set" in table else set()
    reference = next((name for name in REFERENCE_SETS if name in present), None)
    return (reference, GENERATED) if reference and GENERATED in present else None


def panel_certificate(aligned: dict[str, pd.DataFrame], threshold: float, resamples: int = 200, seed: int = 0) -> dict:
    """The certificate for per-question tables (by system, aligned by qid as leaderboard.scorable
    makes them); `available` false (with the reason) when it cannot be made."""
    systems = list(aligned)
    first = next(iter(aligned.values()))
    sets = choose_sets(first)
    if sets is None or len(systems) < 3:
        reason = (
            "needs 3 or more panel systems"
            if sets
            else "needs generated questions and real or hand-written ones in the golden set"
        )
        return {"available": False, "reason": reason, "threshold": threshold}
    masks = [(first["question_set"] == name).to_numpy() for name in sets]
    metrics = {}
    for name, column in leaderboard_metrics(first.columns):
        matrix = np.vstack([aligned[s][column].to_numpy(dtype=float) for s in systems])
        metrics[name] = certificate(
            matrix[:, masks[0]], matrix[:, masks[1]], systems, sets, resamples=resamples, seed=seed
        )
    # NaN: the reference set ties every system on that metric, so it orders nothing to agree with
    undetermined = [name for name, m in metrics.items() if math.isnan(m["kendall_tau"]["value"])]
    below = [name for name, m in metrics.items() if m["kendall_tau"]["value"] < threshold]
    return {
        "available": True,
        "reference": sets[0],
        "synthetic": sets[1],
        "systems": systems,
        "n_questions": {name: int(mask.sum()) for name, mask in zip(sets, masks)},
        "threshold": threshold,
        "below_threshold": below,
        "undetermined": undetermined,
        "metrics": metrics,
    }


def below_threshold_line(cert: dict) -> str | None:
    """One line naming the metrics whose Kendall tau is below validity.threshold, or None."""
    if not cert["available"] or not cert["below_threshold"]:
        return None
    taus = ", ".join(f"{name} {cert['metrics'][name]['kendall_tau']['value']:.2f}" for name in cert["below_threshold"])
    return (
        f"the {cert['synthetic']} questions order the panel unlike the {cert['reference']} ones: "
        f"Kendall tau {taus} < validity.threshold {cert['threshold']}"
    )


def _pair_text(pair: dict, reference: str, synthetic: str) -> str:
    flip = ", flipped" if pair["flip"] else ""
    return f"{pair['b']} vs {pair['a']}: {pair[reference]} ({reference}) / {pair[synthetic]} ({synthetic}){flip}"


def certificate_lines(cert: dict) -> list[str]:
    """The certificate as markdown lines."""
    if not cert["available"]:
        return [f"Agreement certificate: not available ({cert['reason']})."]
    n = cert["n_questions"]
    lines = [
        f"Agreement certificate: {cert['synthetic']} ({n[cert['synthetic']]} questions) against {cert['reference']} "
        f"({n[cert['reference']]} questions), {len(cert['systems'])} systems; 95% bootstrap CI over questions",
        "",
        "| metric | Kendall tau | tau_AP | pair agreement | differing pairs |",
        "|---|---|---|---|---|",
    ]
    for name, m in cert["metrics"].items():
        cells = [
            f"{m[key]['value']:.2f} [{m[key]['ci_low']:.2f}, {m[key]['ci_high']:.2f}]"
            for key in ("kendall_tau", "tau_ap", "pair_agreement")
        ]
        pairs = "; ".join(_pair_text(p, cert["reference"], cert["synthetic"]) for p in m["differing_pairs"]) or "none"
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {pairs} |")
    return lines
