"""What embedding a chunking costs, measured by the embed stage that embeds it (the leaderboard's
cost columns read it: evaluation.panel.costs): seconds per 1,000 chunks, wall and CPU (this
process, every thread), each the median of `rounds` repeats with their range (the noise).

Measured on the stage's own work where it is enough: the local encoder's batches after the first
(the warm-up: kernels, allocations) dealt into `rounds` groups in turn (batch 1 to group 1, 2 to
2, ..., batch rounds + 1 to group 1 again), one repeat each. Texts are embedded longest first, so
dealing, not cutting into runs, gives every group the same mix of lengths, and a load burst lands
on several groups. Enough: at least rounds + 1 batches and rounds x sample chunks in the groups,
never fewer than a sample would time. Otherwise (a rerun that found its vectors in the embedding
cache, a few new chunks, the Ray engine, whose batches are timed on its actors) the local
encoder is loaded and `rounds` calls on the chunking's first `sample` chunks are timed after an
untimed one (core.timing.interleaved), as measured the same way every time."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from retrieval_bench.core.logs import Log, silent
from retrieval_bench.core.stage import progress
from retrieval_bench.core.timing import interleaved, machine_load, summary
from retrieval_bench.embedding.embed import BatchTime, embedding_task
from retrieval_bench.embedding.settings import EmbedSettings


@dataclass(frozen=True)
class CostSettings:
    """params costs: the repeats a cost is the median of, and the chunks a sampled call embeds."""

    rounds: int
    sample: int

    @classmethod
    def from_params(cls, costs: dict[str, Any]) -> CostSettings:
        return cls(costs["rounds"], costs["embed_texts"])


def dealt_rounds(batches: Sequence[BatchTime], costs: CostSettings) -> dict[str, list[float]] | None:
    """{"wall": [...], "cpu": [...]}: seconds per chunk of each group of batches (the module's
    rule: the first batch a warm-up, the rest dealt into costs.rounds groups); None when the
    batches are not enough for it."""
    timed = batches[1:]
    if len(timed) < costs.rounds or sum(batch.texts for batch in timed) < costs.rounds * costs.sample:
        return None
    groups = [timed[start :: costs.rounds] for start in range(costs.rounds)]
    return {
        clock: [sum(getattr(batch, clock) for batch in group) / sum(batch.texts for batch in group) for group in groups]
        for clock in ("wall", "cpu")
    }


def embedding_cost(
    batches: Sequence[BatchTime],
    texts: list[str],
    settings: EmbedSettings,
    costs: CostSettings,
    log: Log = print,
) -> dict[str, Any]:
    """The cost of embedding with `settings`, from the stage's `batches` (embed_texts's
    batch_times) when they are enough, else timed on the first costs.sample of `texts` (the
    chunking's, in file order): {wall, cpu: {median, low, high} seconds per 1,000 chunks, timed_on,
    repeats, chunks_timed, batch_size, device, load (the machine's after the timed work, whose last
    minute its 1-minute average covers), measured_at}; {} for no text."""
    repeats = dealt_rounds(batches, costs)
    timed_on, chunks = "the stage's own batches", sum(batch.texts for batch in batches[1:])
    if repeats is None:
        if not texts:
            return {}
        sample = texts[: costs.sample]
        # seconds of embedding the stage did not need (its vectors were cached): said, not silent
        embedded = sum(batch.texts for batch in batches)
        why = "its vectors came from the cache" if not embedded else f"the {embedded} it embedded are too few to time"
        log(
            f"{why}: timing the embedding cost on a sample of the first {len(sample)} chunks instead "
            f"({costs.rounds} rounds after a warm-up, {len(sample) * (costs.rounds + 1)} chunks embedded)"
        )
        task = embedding_task(sample, settings, settings.document_prompt, log=silent)
        with progress(costs.rounds + 1, "time the embedding", unit="round") as bar:  # a warm-up, then the rounds
            repeats = interleaved({"embed": task}, costs.rounds, after=lambda: bar.update(1))["embed"]
        timed_on, chunks = f"a sample of the first {len(sample)} chunks", len(sample) * costs.rounds
    return {
        **{clock: summary(values, 1000) for clock, values in repeats.items()},
        "timed_on": timed_on,
        "repeats": costs.rounds,
        "chunks_timed": chunks,
        "batch_size": settings.batch_size,
        "device": settings.device or "auto",
        "load": machine_load(),
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
