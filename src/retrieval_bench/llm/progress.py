"""What a run did (Outcome: replies, failures, tokens, spend, why it stopped) and the progress bar
that counts it as it goes (Meter)."""
from __future__ import annotations

import sys
from dataclasses import dataclass, field

from retrieval_bench.llm.provider import Reply
from retrieval_bench.llm.settings import Settings


@dataclass
class Outcome:
    succeeded: int = 0
    rejected: int = 0
    failed: list[str] = field(default_factory=list)  # reasons
    stop: str | None = None  # why the run stopped early
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    submitted_batches: int = 0  # batches created by this run
    adopted_batches: int = 0  # batches found by reconciliation (created by an earlier, interrupted attempt)
    unsaved: int = 0  # replies received (and paid) that could not be written to the cache


class Meter:
    """The progress bar: done/total, tokens and spend so far."""

    def __init__(self, total: int, settings: Settings, desc: str, batch: bool | None = None) -> None:
        from tqdm import tqdm

        self.settings = settings
        self.batch = settings.batch if batch is None else batch
        self.outcome = Outcome()
        self.bar = tqdm(
            total=total, desc=desc, unit="q", file=sys.stderr, dynamic_ncols=True,
            mininterval=0.5 if sys.stderr.isatty() else 15.0,
        )

    def add(self, reply: Reply, rejected: bool, saved: bool = True) -> None:
        o = self.outcome
        o.succeeded += int(saved)
        o.unsaved += int(not saved)
        o.rejected += int(rejected and saved)
        o.input_tokens += reply.input_tokens
        o.output_tokens += reply.output_tokens
        o.cost = self.settings.cost(o.input_tokens, o.output_tokens, self.batch)
        self.bar.set_postfix_str(f"in {o.input_tokens:,} out {o.output_tokens:,} tok ${o.cost:.4f}", refresh=False)
        self.bar.update(1)

    def fail(self, reason: str) -> None:
        self.outcome.failed.append(reason)
        self.bar.update(1)

    def write(self, message: str) -> None:
        self.bar.write(f"generate_goldenset: {message}", file=sys.stderr)

    def close(self) -> None:
        self.bar.close()
