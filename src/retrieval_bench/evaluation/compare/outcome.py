"""The outcome of `retrieval-bench compare`: Comparison (what the report and the API return) and its
one-line verdict, which its dict carries; evaluation.compare.report renders the rest."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from retrieval_bench.evaluation.stats import ALPHA, MDD_FORMULA


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
    views_coincide: bool = False  # every judged column equals its strict one (no duplicates, no judgements)
    segments: dict | None = None  # segment regressions on the headline metric; None: the runs carry no segments
    params_changed: list[dict] | None = None  # params.yaml keys that differ, A's and B's value; None: unknown
    ppi: dict = field(default_factory=dict)  # paired PPI intervals of B - A by view and metric; {}: no reviews
    by_kind: dict[str, dict] = field(default_factory=dict)  # per question kind (evaluation.compare.kinds); {}: one kind

    def to_dict(self) -> dict:
        return {
            "a": self.a,
            "b": self.b,
            "a_commit": self.a_commit,
            "b_commit": self.b_commit,
            "params_changed": self.params_changed,
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
            "views_coincide": self.views_coincide,
            "segment_regressions": self.segments,
            **({"ppi_deltas": self.ppi} if self.ppi else {}),
            "by_kind": self.by_kind,
            "verdict": verdict_line(self),
        }


def level_text(level: float) -> str:
    """A confidence level as a percentage to the digits it has: 95%, 97.5%, 99.9% (not 98% or 100%)."""
    return f"{level * 100:.10g}%"


def num(value: float, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    return f"{value:+.4f}" if sign else f"{value:.4f}"


def _p_short(value: float) -> str:
    return "n/a" if value is None or math.isnan(value) else f"{value:.2g}" if value >= 0.001 else f"{value:.0e}"


def alpha(comparison: Comparison) -> float:
    """The significance level that goes with the confidence level (--level 0.95: p < 0.05), so a
    starred delta is one whose CI excludes 0, as near as a bootstrap and a permutation test agree."""
    return round(1 - comparison.level, 10)


def direction(m: dict, alpha: float = ALPHA) -> int:
    """+1 / -1: B significantly better / worse (p < alpha); 0: no significant difference."""
    return 0 if not m["p_value"] < alpha else (1 if m["delta"] > 0 else -1)


def _segment_clause(segments: dict | None) -> str:
    if segments is None:
        return "segments not compared (per_question.csv without segment columns)"
    regressed = segments["regressed"]
    if not regressed:
        return "no segment regressed"
    worst = ", ".join(
        f"{r['segment']}={r['value']} ({r['delta']:+.3f})" for r in sorted(regressed, key=lambda r: r["delta"])[:3]
    )
    more = f" and {len(regressed) - 3} more" if len(regressed) > 3 else ""
    return f"{len(regressed)} segment{'s' if len(regressed) > 1 else ''} regressed: {worst}{more}"


def _needed(bar: float) -> int:
    """The fewest differing questions whose exact sign-flip test can give p < `bar`: 2 / 2^m < bar."""
    return math.floor(1 - math.log2(bar)) + 1


def verdict_line(comparison: Comparison) -> str:
    """One line: is B better or worse on the headline metric (first compared), did any segment
    regress (Benjamini-Hochberg), and the smallest change this many questions can detect."""
    name, m = next(iter(comparison.metrics.items()))
    figures = (
        f"{num(m['delta'], True)}, {level_text(comparison.level)} CI [{num(m['ci_low'], True)}, {num(m['ci_high'], True)}], "
        f"p={_p_short(m['p_value'])}"
    )
    verdict = direction(m, alpha(comparison))
    head = (
        f"B is {'better' if verdict > 0 else 'worse'} on {name}" if verdict else f"No significant difference on {name}"
    )
    differing = int(m.get("wins", 0)) + int(m.get("losses", 0))
    if not verdict and differing and 2.0 ** (1 - differing) >= alpha(comparison):
        # the exact sign-flip test's smallest p over m differing questions is 2 / 2^m: it cannot decide
        head = (
            f"Too few questions to decide on {name}: {differing} differ, and the paired test needs "
            f"{_needed(alpha(comparison))} to reach p < {alpha(comparison):g}"
        )
    elif not verdict and (m["ci_low"] > 0 or m["ci_high"] < 0):
        head += " (borderline: the bootstrap CI excludes 0, the permutation test does not reach the bar)"
    elif verdict and m["ci_low"] <= 0 <= m["ci_high"]:  # "B is worse ... CI [-0.3592, +0.0145], p=0.047"
        head += " (borderline: the permutation test reaches the bar, the bootstrap CI still includes 0)"
    mdd = m["min_detectable_delta"]
    detectable = "n/a" if mdd is None or math.isnan(mdd) else f"{mdd:.2g}"
    return f"{head} ({figures}); {_segment_clause(comparison.segments)}; smallest detectable change {detectable}"
