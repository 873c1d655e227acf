"""GenerateSettings: params.yaml's generate section, built once from params (as evaluation's
Scoring is) and passed through the golden-set build (assemble, selection) instead of the raw
section and its companions. GenerationRun: where one run writes and what it says."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.logs import Log
from retrieval_bench.core.params_sections import KINDS_MATCH
from retrieval_bench.core.question_sets import QUESTION_KINDS
from retrieval_bench.corpus.load import chunk_documents
from retrieval_bench.goldenset.build import Hygiene

LLM = "llm"  # generate.kind_classifier's value that asks the LLM, and a row's kind_by when it answered


@dataclass(frozen=True)
class GenerateSettings:
    """The generate section as the golden-set build reads it (a validated section: params.DEFAULTS)."""

    section: Mapping[str, Any]  # the section as validated: the LLM layer's Settings and Meta read it
    provider: str
    seed: int
    max_questions: int  # hand-written + generated; 0: one question per passage
    max_attempts: int
    drop_echo: bool
    passage_chars: int
    passage_overlap: int
    handwritten: str
    imported: Mapping[str, str]
    kinds: tuple[tuple[str, float], ...]  # (kind, share) in QUESTION_KINDS order, shares > 0
    hygiene: Hygiene
    match: bool = False  # generate.kinds: match: the kinds come from the real (else hand-written) questions' mix
    kind_classifier: str = "rules"  # or llm: real and hand-written questions' kinds asked (goldenset.kind_classifier)
    spent_before: float = 0.0  # USD this run spent before generating (the kind classifier's): after_spending

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "GenerateSettings":
        """From a validated generate section (`generate.kinds: match`: no kinds until matched)."""
        kinds = params["kinds"]
        shares = {} if kinds == KINDS_MATCH else kinds
        return cls(
            section=params,
            provider=params["provider"],
            seed=params["seed"],
            max_questions=params["max_questions"],
            max_attempts=params["max_attempts"],
            drop_echo=bool(params["drop_echo"]),
            passage_chars=params["passages"]["chars"],
            passage_overlap=params["passages"]["overlap"],
            handwritten=params["handwritten"],
            imported=params["imported"],
            kinds=tuple((kind, float(shares[kind])) for kind in QUESTION_KINDS if shares.get(kind, 0) > 0),
            hygiene=Hygiene.from_params(params),
            match=kinds == KINDS_MATCH,
            kind_classifier=params["kind_classifier"],
        )

    def check_match(self, n_real: int, n_handwritten: int) -> None:
        """`generate.kinds: match` without real or hand-written questions (found in this corpus) is one
        line: no mix to match."""
        if self.match and not n_real and not n_handwritten:
            raise InputError(
                f"params.yaml: generate.kinds: {KINDS_MATCH} generates in the mix of the real or hand-written questions, "
                f"and there are none (no real labels, none of {self.handwritten} found in this corpus); name the shares "
                "instead, "
                "e.g. {single: 0.8, multi: 0.2}"
            )

    def matched(self, shares: tuple[tuple[str, float], ...]) -> "GenerateSettings":
        """These settings generating in the mix `shares` (goldenset.kinds.mix of the real, else the
        hand-written questions) when generate.kinds is match; else these settings."""
        return dataclasses.replace(self, kinds=shares) if self.match else self

    def after_spending(self, spent: float) -> "GenerateSettings":
        """These settings once `spent` USD more went under generate.max_cost_usd this run (the kind
        classifier's): the question kinds are guarded against the limit less it."""
        return dataclasses.replace(self, spent_before=self.spent_before + spent)

    @property
    def asks_kinds(self) -> bool:
        """generate.kind_classifier llm: real and hand-written questions' kinds are asked of the LLM."""
        return self.kind_classifier == LLM

    @property
    def prompt_kinds(self) -> tuple[str, ...]:
        """The kinds whose prompts are read: every kind for match (the mix is known later)."""
        return QUESTION_KINDS if self.match else self.kind_names

    @property
    def kind_names(self) -> tuple[str, ...]:
        return tuple(kind for kind, _ in self.kinds)

    @property
    def max_rounds(self) -> int:
        # Each round asks for the missing questions: first attempts, then regenerations and
        # replacements for rejected ones. More rounds than attempts only matter for replacements.
        return self.max_attempts + 2

    def passages(self, documents: pd.DataFrame) -> pd.DataFrame:
        """The reference passages questions are written from (generate.passages)."""
        return chunk_documents(documents, self.passage_chars, self.passage_overlap)


@dataclass(frozen=True)
class GenerationRun:
    """Where a run keeps its replies, whether it only plans (a dry run), and where its lines go."""

    cache_path: str
    dry_run: bool
    log: Log
