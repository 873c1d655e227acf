"""The cost limit holds across rounds: llm.runs.paid.pay_for runs each round with what is left of
<section>.max_cost_usd, so the sync run's in-run guard counts what earlier rounds spent.

The real anthropic SDK talks to the stub server on 127.0.0.1 (tests/stub_llm.py)."""

from __future__ import annotations

import hashlib
import os
import signal

import pytest
from llm_helpers import TEMPLATE

from retrieval_bench.core.errors import InputError, Interrupted
from retrieval_bench.llm.cache.replies import read_cache
from retrieval_bench.llm.cost.guard import estimate
from retrieval_bench.llm.cost.settings import Meta, Settings
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.tasks import QUESTIONS, Job
from retrieval_bench.llm.transport.errors import StopGeneration


def haiku_usd(usage: dict) -> float:
    """What a reply cost at claude-haiku-4-5's list price, $1 / $5 per million input / output tokens:
    worked out here, not by the code under test."""
    return usage["input_tokens"] * 1e-6 + usage["output_tokens"] * 5e-6


MAX_TOKENS = 1000
LIMIT = 0.10


def jobs(meta: Meta, first: int, n: int, attempt: int) -> list[Job]:
    texts = [
        f"Passage {i}: the write-ahead log keeps page {i} until a checkpoint copies it back."
        for i in range(first, first + n)
    ]
    return [QUESTIONS.job(meta, TEMPLATE, t, hashlib.sha256(t.encode()).hexdigest(), attempt) for t in texts]


def test_a_later_round_spends_only_what_earlier_rounds_left_of_max_cost_usd(stub, tmp_path):
    # Every reply is cut at max_tokens (rejected as truncated) and uses all 1000 output tokens:
    # ~$0.0051 each at claude-haiku-4-5's $1/$5 per million, against an estimate of 100 tokens.
    stub.reply = lambda passage: "x" * (4 * MAX_TOKENS)
    stub.stop_reason = lambda passage: "max_tokens"
    settings = Settings.from_params(
        dict(provider="anthropic", model="claude-haiku-4-5", max_tokens=MAX_TOKENS, concurrency=1, max_cost_usd=LIMIT)
    )
    meta = Meta("anthropic", "anthropic", "claude-haiku-4-5", "p" * 64, MAX_TOKENS)
    # Round 1 pays ~$0.051 for 10 rejected replies; round 2's 20 replacements are estimated at
    # ~$0.012, so the guard lets it start, and only the in-run guard can keep it within the limit.
    rounds = [jobs(meta, 0, 10, 0), jobs(meta, 0, 10, 1) + jobs(meta, 10, 10, 1)]
    assert estimate([j.prompt for j in rounds[1]], settings).usd < LIMIT / 2
    lines: list[str] = []
    work = PaidWork(QUESTIONS, meta, settings, str(tmp_path / "cache.jsonl"), max_attempts=2)

    with pytest.raises(StopGeneration, match="max_cost_usd") as stopped:
        pay_for(work, lambda cache, round_number: (rounds[round_number], 0), 2, False, lines.append)

    records = read_cache(tmp_path / "cache.jsonl").values()
    spent = sum(haiku_usd(r["usage"]) for r in records)
    assert len(stub.generation_requests()) == len(records) > 10  # round 2 ran, and every paid reply is kept
    assert all(r["rejected"] == "truncated" for r in records)
    assert spent <= LIMIT, f"spent ${spent:.4f} against max_cost_usd ${LIMIT}"
    assert "\n" not in str(stopped.value) and "spent before this round" in str(stopped.value)


def test_ctrl_c_in_a_later_round_tells_what_earlier_rounds_spent(stub, tmp_path):
    """Ctrl-C during round 2 ends in one line that counts round 1's spend too (the round's own
    line knows only its own)."""
    # Python's own Ctrl-C handler (asyncio.run then cancels the run), whatever an earlier test in this
    # worker process left installed: the test failed in full runs only, never alone.
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        _ctrl_c_in_round_2(stub, tmp_path)
    finally:
        signal.signal(signal.SIGINT, previous)


def _ctrl_c_in_round_2(stub, tmp_path) -> None:
    calls = []

    def reply(passage: str) -> str:
        calls.append(passage)
        if len(calls) == 11:  # the first request of round 2: a real SIGINT, as a terminal sends it
            os.kill(os.getpid(), signal.SIGINT)
        return "x" * (4 * MAX_TOKENS)

    stub.reply = reply
    stub.stop_reason = lambda passage: "max_tokens"
    settings = Settings.from_params(
        dict(provider="anthropic", model="claude-haiku-4-5", max_tokens=MAX_TOKENS, concurrency=1, max_cost_usd=1.0)
    )
    meta = Meta("anthropic", "anthropic", "claude-haiku-4-5", "p" * 64, MAX_TOKENS)
    rounds = [jobs(meta, 0, 10, 0), jobs(meta, 0, 10, 1)]
    work = PaidWork(QUESTIONS, meta, settings, str(tmp_path / "cache.jsonl"), max_attempts=2)
    with pytest.raises(Interrupted) as stopped:
        pay_for(work, lambda cache, round_number: (rounds[round_number], 0), 2, False, lambda line: None)
    line = str(stopped.value)
    assert line.startswith("interrupted; ") and "\n" not in line
    assert "was spent before this round (earlier rounds, collected batches)" in line and "$0.05" in line


def test_a_later_batch_round_is_refused_when_its_upper_bound_passes_what_is_left(stub, tmp_path):
    # A batch cannot be stopped once submitted: its round is checked on its upper bound against
    # what the earlier rounds left. Round 1 pays ~$0.025 (half price) for 10 rejected replies;
    # round 2's bound, ~$0.05, fits the $0.07 limit alone but not what is left of it.
    stub.reply = lambda passage: "x" * (4 * MAX_TOKENS)
    stub.stop_reason = lambda passage: "max_tokens"
    limit = 0.07
    settings = Settings.from_params(
        dict(
            provider="anthropic-batch",
            model="claude-haiku-4-5",
            max_tokens=MAX_TOKENS,
            batch_poll_seconds=0.05,
            max_cost_usd=limit,
        )
    )
    meta = Meta("anthropic-batch", "anthropic", "claude-haiku-4-5", "p" * 64, MAX_TOKENS)
    rounds = [jobs(meta, 0, 10, 0), jobs(meta, 0, 10, 1) + jobs(meta, 10, 10, 1)]
    assert estimate([j.prompt for j in rounds[1]], settings).usd_max < limit
    work = PaidWork(QUESTIONS, meta, settings, str(tmp_path / "cache.jsonl"), max_attempts=2)

    with pytest.raises(InputError, match="cost upper bound .* is above generate.max_cost_usd") as refused:
        pay_for(work, lambda cache, round_number: (rounds[round_number], 0), 2, False, lambda line: None)

    records = read_cache(tmp_path / "cache.jsonl").values()
    spent = sum(haiku_usd(r["usage"]) / 2 for r in records)  # the Batches API's half price
    assert stub.batch_creates() == 1 and len(records) == 10 and spent <= limit
    assert "\n" not in str(refused.value)
    # what this run paid for is said, and that a rerun does not pay for it again
    assert "already spent by this run, its replies kept in the cache: a rerun pays only for what is missing" in str(
        refused.value
    )


def test_the_batch_journal_is_read_once_to_resume_and_once_per_round(tmp_path, monkeypatch):
    import retrieval_bench.llm.cache.replies as cache

    reads = []
    read_journal = cache.read_journal
    monkeypatch.setattr(cache, "read_journal", lambda path: reads.append(path) or read_journal(path))
    settings = Settings.from_params(dict(provider="anthropic", model="claude-haiku-4-5", max_tokens=MAX_TOKENS))
    meta = Meta("anthropic", "anthropic", "claude-haiku-4-5", "p" * 64, MAX_TOKENS)
    work = PaidWork(QUESTIONS, meta, settings, str(tmp_path / "cache.jsonl"), max_attempts=2)
    paid = pay_for(work, lambda cache, round_number: (jobs(meta, 0, 3, 0), 0), 2, True, lambda line: None)
    assert paid.planned and len(reads) == 2  # a dry run: the resume's look, then its one round's


def test_a_text_of_more_tokens_than_estimated_stops_before_passing_the_limit(stub, tmp_path):
    """The API counts 2 tokens a character (code, CJK text), 7 times the 3.5-characters-a-token
    estimate: the in-run guard counted each request in flight at the estimate and passed
    max_cost_usd (by a quarter, at concurrency 8). Once a reply says how many tokens it took, the
    worst case of every request grows by that ratio."""
    from retrieval_bench.llm.runs.runner import run

    stub.usage = lambda usage: {**usage, "input_tokens": usage["input_tokens"] * 8}
    limit = 0.02
    settings = Settings.from_params(
        dict(provider="anthropic", model="claude-haiku-4-5", max_tokens=50, concurrency=1, max_cost_usd=limit)
    )
    meta = Meta("anthropic", "anthropic", "claude-haiku-4-5", "p" * 64, 50)
    texts = [f"Passage {i}: " + "the write-ahead log keeps pages until a checkpoint. " * 40 for i in range(12)]
    work = [QUESTIONS.job(meta, TEMPLATE, t, hashlib.sha256(t.encode()).hexdigest(), 0) for t in texts]
    try:
        run(QUESTIONS, work, meta, settings, tmp_path / "cache.jsonl")
    except StopGeneration as stopped:
        assert "max_cost_usd" in str(stopped)
    records = read_cache(tmp_path / "cache.jsonl").values()
    spent = sum(haiku_usd(r["usage"]) for r in records)
    assert 0 < len(records) < 12 and spent <= limit, f"spent ${spent:.4f} against max_cost_usd ${limit}"
