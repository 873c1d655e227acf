"""What a run did (Outcome: replies, failures, tokens, spend, why it stopped) and the progress bar
that counts it as it goes (Meter): replies received, never attempts, so a run whose requests all
fail shows 0 done and its failures beside the bar."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

from retrieval_bench.core.stage import progress
from retrieval_bench.llm.cost.prices import usd
from retrieval_bench.llm.cost.settings import Settings
from retrieval_bench.llm.providers.base import Reply
from retrieval_bench.llm.transport.credentials import mask_keys


@dataclass
class Outcome:
    succeeded: int = 0
    rejected: int = 0
    failed: list[str] = field(default_factory=list)  # reasons
    timed_out: int = 0  # of the failed: requests that ran past <section>.timeout_s
    stop: str | None = None  # why the run stopped early
    input_tokens: int = 0
    output_tokens: int = 0
    cost: float = 0.0
    submitted_batches: int = 0  # batches created by this run
    adopted_batches: int = 0  # batches found by reconciliation (created by an earlier, interrupted attempt)
    unsaved: int = 0  # replies received (and paid) that could not be written to the cache
    kept: int = 0  # replies written to the cache by this run (counted as soon as written, even if interrupted)


class Meter:
    """The progress bar: replies received of those asked for, failures, tokens and spend so far."""

    def __init__(self, total: int, settings: Settings, desc: str, stage: str, batch: bool | None = None) -> None:
        self.settings = settings
        self.stage = stage  # what the lines written beside the bar start with
        self.batch = settings.batch if batch is None else batch
        self.outcome = Outcome()
        self.bar = progress(total, desc, unit="q")

    def _postfix(self) -> None:
        o = self.outcome
        failed = f"{len(o.failed)} failed, " if o.failed else ""
        failed += f"{o.timed_out} timed out, " if o.timed_out else ""
        self.bar.set_postfix_str(
            f"{failed}in {o.input_tokens:,} out {o.output_tokens:,} tok {usd(o.cost)}", refresh=False
        )

    def add(self, reply: Reply, rejected: bool, saved: bool = True, note: str | None = None) -> None:
        """One reply received (`saved`: written to the cache); `note`: a line to write beside the bar."""
        if note:
            self.write(note)
        o = self.outcome
        o.succeeded += int(saved)
        o.unsaved += int(not saved)
        o.rejected += int(rejected and saved)
        self._bill(reply)
        self._postfix()
        self.bar.update(int(saved))

    def fail(self, reason: str, timed_out: bool = False, paid: Reply | None = None) -> None:
        """A request that got no usable reply: counted beside the bar, not in it (its reason kept
        with any key a server echoed masked: it ends in the closing line). `paid`: a reply received
        but not kept (it held the API key), whose tokens were billed all the same."""
        self.outcome.failed.append(mask_keys(reason))
        self.outcome.timed_out += int(timed_out)
        if paid is not None:
            self._bill(paid)
        self._postfix()
        self.bar.refresh()

    def _bill(self, reply: Reply) -> None:
        """A reply's tokens, and the spend so far at the run's prices."""
        o = self.outcome
        o.input_tokens += reply.input_tokens
        o.output_tokens += reply.output_tokens
        o.cost = self.settings.cost(o.input_tokens, o.output_tokens, self.batch)

    def write(self, message: str) -> None:
        self.bar.write(f"{self.stage}: {mask_keys(message)}", file=sys.stderr)

    def close(self) -> None:
        self.bar.close()
