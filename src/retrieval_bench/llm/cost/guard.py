"""What a run will cost before it starts, and the guard that refuses to start above
generate.max_cost_usd.

Input tokens are counted as llm.providers.tokens does (about 3.5 characters per token). A reply (a JSON object with a question and a short excerpt) is about 60-100 tokens: the
estimate assumes EXPECTED_OUTPUT_TOKENS, the upper bound assumes generate.max_tokens.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.providers.registry import counterpart
from retrieval_bench.llm.providers.tokens import estimate_input_tokens

if TYPE_CHECKING:
    from retrieval_bench.llm.cost.settings import Settings

EXPECTED_OUTPUT_TOKENS = 100


@dataclass(frozen=True)
class Wording:
    """How one kind of paid work is named in the guard's and the run's lines."""

    noun: str  # what its requests make ("questions")
    fewer: str  # the setting that asks for fewer of them
    requests: str  # its requests, in the line a failed run ends with
    to_do: str  # the first round's missing work ("questions to generate")
    to_redo: str  # a later round's (replacements for rejected replies)
    done: str  # work the cache holds already ("cached")


QUESTIONS_WORDING = Wording(
    "questions",
    "generate.max_questions",
    "requests",
    "questions to generate",
    "more questions to replace rejected replies",
    "cached",
)
KIND_WORDING = Wording(
    "kind labels",
    "generate.max_questions, or set generate.kind_classifier: rules",
    "classifying requests",
    "questions to classify",
    "questions to classify again",
    "classified already",
)
JUDGE_WORDING = Wording(
    "judgements", "judge.depth", "judging requests", "pairs to grade", "pairs to grade", "graded already"
)


@dataclass(frozen=True)
class Estimate:
    requests: int
    input_tokens: int
    output_tokens: int  # expected
    output_tokens_max: int  # every reply at max_tokens
    usd: float
    usd_max: float
    batch: bool

    def describe(self, settings: Settings) -> str:
        mode = "batch, half price" if self.batch else "sync"
        return (
            f"{self.requests} requests to {settings.provider} {settings.model} ({mode}): about "
            f"{self.input_tokens:,} input + {self.output_tokens:,} output tokens ~ {usd(self.usd)} "
            f"(at most {usd(self.usd_max)} if every reply used max_tokens {settings.max_tokens}) "
            f"at {usd(settings.input_per_mtok)}/{usd(settings.output_per_mtok)} per million input/output tokens "
            f"({settings.price_source})"
        )


def estimate(prompts: Iterable[str], settings: Settings, batch: bool | None = None) -> Estimate:
    """Estimated tokens and USD for sending `prompts` (llm.providers.tokens: the method)."""
    batch = settings.batch if batch is None else batch
    prompts = list(prompts)
    n = len(prompts)
    input_tokens = sum(estimate_input_tokens(p) for p in prompts)
    output_tokens = n * min(EXPECTED_OUTPUT_TOKENS, settings.max_tokens)
    output_max = n * settings.max_tokens
    return Estimate(
        n,
        input_tokens,
        output_tokens,
        output_max,
        settings.cost(input_tokens, output_tokens, batch),
        settings.cost(input_tokens, output_max, batch),
        batch,
    )


def check_finite_cost(planned: float, limit: float, section: str) -> None:
    """Refuse a cost or limit that is not a finite number: NaN compares false with any limit, so
    a NaN price or limit would pass every guard and pay (params.yaml refuses them first; this is
    the guard's own check)."""
    if not (math.isfinite(planned) and math.isfinite(limit)):
        raise InputError(
            f"the cost guard got a cost of {planned!r} against {section}.max_cost_usd {limit!r}: "
            f"both must be finite numbers of US dollars (check {section}.price and {section}.max_cost_usd)"
        )


def check_cost(est: Estimate, settings: Settings, spent: float = 0.0, wording: Wording = QUESTIONS_WORDING) -> None:
    """Refuse to start above <section>.max_cost_usd. Sync runs are checked on the estimate and
    then stopped at the limit while they run; a batch cannot be stopped once submitted, so it is
    checked on its upper bound (every reply at max_tokens)."""
    limit = settings.max_cost_usd
    if limit is None:
        return
    planned = est.usd_max if est.batch else est.usd
    section = settings.section
    check_finite_cost(spent + planned, limit, section)
    if spent + planned > limit:
        what = "upper bound" if est.batch else "estimate"
        # a later round (rejected replies asked again): what this run paid is kept, and the limit is per run
        already = (
            f" ({usd(spent)} of it already spent by this run, its replies kept in the cache: a rerun pays only for "
            f"what is missing, under its own {section}.max_cost_usd)"
            if spent > 0
            else ""
        )
        raise InputError(
            f"the cost {what} {usd(spent + planned, against=limit)} for {est.requests} {wording.noun} is above "
            f"{section}.max_cost_usd {usd(limit, against=spent + planned)}{already}; raise {section}.max_cost_usd, "
            f"lower {wording.fewer}" + _cheaper_route(settings, est.batch)
        )


def _cheaper_route(settings: Settings, batch: bool) -> str:
    """The same family's batch API, where a sync run has one."""
    other = counterpart(settings.provider)
    if batch or other is None or not other.batch:
        return ""
    saving = "half price" if settings.batch_discount == 0.5 else f"{settings.batch_discount:g} of the price"
    return f", or use {settings.section}.provider {other.name} ({saving})"
