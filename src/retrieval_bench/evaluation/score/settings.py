"""How runs are scored, built once from params: a frozen object every scoring function takes
instead of a row of positional numbers (two of them adjacent ints: judge.min_grade, ambiguous_at)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from retrieval_bench.core import paths


@dataclass(frozen=True)
class Scoring:
    """score.k (sorted), score.min_coverage, score.ties, score.budgets (sorted) in budget_unit, and
    the judged view's judge.min_grade, judge.ambiguous_at and whether the judge graded (judge.enabled)."""

    ks: tuple[int, ...]
    min_coverage: float = 0.5
    ties: str = "expected"
    budgets: tuple[int, ...] = ()
    budget_unit: str = "chars"
    min_grade: int = 2
    ambiguous_at: int = 3
    judge_enabled: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "ks", tuple(sorted(self.ks)))
        object.__setattr__(self, "budgets", tuple(sorted(self.budgets)))

    @classmethod
    def from_params(cls, params: dict) -> Scoring:
        """From the checked params (load_all_params): the score and judge sections."""
        score, judge = params["score"], params["judge"]
        return cls(
            ks=tuple(score["k"]),
            min_coverage=score["min_coverage"],
            ties=score["ties"],
            budgets=tuple(score["budgets"]),
            budget_unit=score["budget_unit"],
            min_grade=judge["min_grade"],
            ambiguous_at=judge["ambiguous_at"],
            judge_enabled=judge["enabled"],
        )


def score_inputs(scoring: Scoring, system: str, chunking: str) -> tuple[list[str], dict[str, Any]]:
    """What panel system `system` is scored from, the key of its kept scores (core.item_memo): its
    run, the golden set, its chunking's chunks and duplicates, the judge's pool, people's reviews,
    and how it is scored."""
    files = [paths.run_of(system), paths.run_info_of(system), paths.GOLDENSET, paths.JUDGED_POOL, paths.REVIEWS]
    files += [paths.chunks_of(chunking), paths.duplicates_of(chunking)]
    return files, {"system": system, **asdict(scoring)}
