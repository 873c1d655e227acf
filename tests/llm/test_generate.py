"""The LLM layer in-process: output hygiene, cost estimate, the provider registry, and every provider
driven through its real SDK against the stub server (retries, shared pause, spend limit, malformed bodies)."""

from __future__ import annotations

import re
import threading

import pytest
from llm_helpers import jobs_for, settings
from stub_llm import read_jsonl

from retrieval_bench.core.errors import InputError
from retrieval_bench.goldenset.build import normalise_question
from retrieval_bench.llm.cache.replies import cache_key, read_cache
from retrieval_bench.llm.checks.hygiene import clean_reply
from retrieval_bench.llm.cost.guard import check_cost, estimate
from retrieval_bench.llm.providers.anthropic_batch import MESSAGE_BATCHES
from retrieval_bench.llm.providers.registry import PROVIDERS, counterpart
from retrieval_bench.llm.runs.paid import of_task
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.tasks import JUDGE, KEYWORDS, MULTI, QUESTIONS
from retrieval_bench.llm.transport.errors import StopGeneration
from retrieval_bench.llm.transport.ratelimit import SharedPause


# --- output hygiene ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "raw",
    [
        '{"question": "How do I turn on WAL mode?", "evidence": "PRAGMA journal_mode=WAL"}',
        '```json\n{"question": "How do I turn on WAL mode?", "evidence": "PRAGMA journal_mode=WAL"}\n```',
        'Here is a question:\n"How do I turn on WAL mode?"',
        "Here's a question a user might type: 1. How do I turn on WAL mode?",
        "Sure! Question: “How do I turn on WAL mode?”",
        "**Question:** How do I turn on WAL mode?",
        "Q1) 'How do I turn on WAL mode?'",
        "How do I turn on WAL mode?\nThis tests knowledge of journal modes.",
        '{"question": "1. \\"How do I turn on WAL mode?\\"", "evidence": ""}',
        '<think>The passage is about {journal modes}.</think>\n{"question": "How do I turn on WAL mode?"}',
    ],
)
def test_hygiene_strips_preambles_quotes_and_numbering(raw):
    cleaned = clean_reply(raw, "end_turn")
    assert cleaned.rejected is None
    assert cleaned.question == "How do I turn on WAL mode?"


@pytest.mark.parametrize(
    ("raw", "stop_reason", "reason"),
    [
        ("", "end_turn", "empty"),
        ('{"question": "  "}', "end_turn", "empty"),
        ("How do I turn on WAL mode? And how do I turn it off again?", "end_turn", "several_questions"),
        ("1. How do I turn on WAL mode?\n2. What is a checkpoint?", "end_turn", "several_questions"),
        ('[{"question": "What is WAL?"}, {"question": "What is a checkpoint?"}]', "end_turn", "several_questions"),
        ("I'm sorry, but I can't write a question about this passage.", "end_turn", "refusal"),
        ('{"question": "The passage does not contain enough information for a question."}', "end_turn", "refusal"),
        ('{"question": "How do I turn on', "max_tokens", "truncated"),
        ('{"question": "How do I turn on WAL mode?"}', "refusal", "refusal"),
        ("WAL?", "end_turn", "too_short"),
        ("What does " + "x" * 6000 + " N mean in this setup?", "end_turn", "too_long"),  # 10 words, 6,034 characters
    ],
)
def test_hygiene_rejects_with_a_reason(raw, stop_reason, reason):
    assert clean_reply(raw, stop_reason).rejected == reason


def test_duplicates_compare_case_spacing_and_end_punctuation():
    assert normalise_question("How do I  turn on WAL mode?") == normalise_question("how do i turn on wal mode")


# --- cache keys ----------------------------------------------------------------------------------
def test_cache_key_is_a_valid_custom_id_and_first_attempts_keep_their_key():
    key = cache_key("anthropic", "m", "p", "text")
    assert len(key) == 64 and key == cache_key("anthropic", "m", "p", "text", 0)
    changed = {
        cache_key("anthropic", "m", "p", "text", 1),
        cache_key("anthropic", "m2", "p", "text"),
        cache_key("anthropic", "m", "p2", "text"),
        cache_key("anthropic", "m", "p", "text!"),
        cache_key("openai-compatible", "m", "p", "text"),
    }
    assert key not in changed and len(changed) == 5


# --- the provider registry ------------------------------------------------------------------------
def test_every_registered_provider_may_be_named_and_families_keep_their_cache_keys():
    families = {name: settings(name).family for name in ("none", *PROVIDERS)}
    assert families == {
        "none": None,
        "anthropic": "anthropic",
        "anthropic-batch": "anthropic",
        "openai-compatible": "openai-compatible",
    }
    assert [settings(name).batch for name in ("anthropic", "anthropic-batch", "openai-compatible")] == [
        False,
        True,
        False,
    ]
    assert counterpart("anthropic").name == "anthropic-batch" and counterpart("anthropic-batch").name == "anthropic"
    assert counterpart("openai-compatible") is None


# --- cost estimate and guard -----------------------------------------------------------------------
def test_estimate_counts_chars_and_halves_batch_prices():
    prompts = ["x" * 3500] * 10  # 1000 tokens + 10 overhead each
    sync = estimate(prompts, settings("anthropic"))
    assert (sync.input_tokens, sync.output_tokens, sync.output_tokens_max) == (10_100, 1_000, 3_000)
    assert sync.usd == pytest.approx(10_100 / 1e6 * 1 + 1_000 / 1e6 * 5)
    assert sync.usd_max == pytest.approx(10_100 / 1e6 * 1 + 3_000 / 1e6 * 5)
    batch = estimate(prompts, settings("anthropic-batch"))
    assert batch.usd == pytest.approx(sync.usd / 2) and batch.batch


def test_cost_guard_checks_sync_estimate_and_batch_upper_bound():
    prompts = ["x" * 3500] * 1000
    sync = estimate(prompts, settings("anthropic", max_cost_usd=1.6))  # ~$1.51 expected, $2.51 at most
    check_cost(sync, settings("anthropic", max_cost_usd=1.6))
    with pytest.raises(InputError, match="max_cost_usd"):
        check_cost(sync, settings("anthropic", max_cost_usd=1.4))
    batch = estimate(prompts, settings("anthropic-batch"))  # ~$0.76 expected, $1.26 at most
    with pytest.raises(InputError, match="upper bound"):
        check_cost(batch, settings("anthropic-batch", max_cost_usd=1.0))
    check_cost(batch, settings("anthropic-batch", max_cost_usd=None))


# --- anthropic, against the stub ---------------------------------------------------------------------
def test_anthropic_generates_and_caches_every_reply(stub, tmp_path):
    meta, jobs = jobs_for(12)
    outcome = run(QUESTIONS, jobs, meta, settings(), tmp_path / "cache.jsonl")
    cache = read_cache(tmp_path / "cache.jsonl")
    assert outcome.succeeded == 12 and not outcome.failed and set(cache) == {job.key for job in jobs}
    assert len(stub.generation_requests()) == 12
    record = cache[jobs[0].key]
    assert record["question"].startswith("Where is topic") and record["evidence"] and record["rejected"] is None
    assert record["usage"]["input_tokens"] > 0 and record["prompt_sha256"] == "p" * 64
    headers = stub.generation_requests()[0].headers
    assert "sk-ant-test" in (headers.get("x-api-key", "") + headers.get("authorization", ""))


def test_429_with_retry_after_ms_pauses_every_worker_then_succeeds(stub, tmp_path, monkeypatch):
    """No clock margins: the other workers' replies are held until the client has set its pause
    and the first wave is in; every request arriving after that wave went out after the pause
    (a request arriving after one sent at or after the pause's end arrives after it too)."""
    paused, pause = threading.Event(), {}
    original = SharedPause.after_response

    async def after_response(self, response):
        await original(self, response)
        if response.status_code == 429:
            pause["until"] = self.until
            paused.set()

    monkeypatch.setattr(SharedPause, "after_response", after_response)
    stub.retry_after_ms = 400
    stub.faults = ["rate_limit"]
    stub.gate = threading.Event()

    def open_gate() -> None:
        paused.wait(60)
        while len(stub.generation_requests()) < 4 and paused.is_set():
            stub.gate.wait(0.01)
        stub.gate.set()

    opener = threading.Thread(target=open_gate, daemon=True)
    opener.start()
    meta, jobs = jobs_for(12)
    outcome = run(QUESTIONS, jobs, meta, settings(concurrency=4), tmp_path / "cache.jsonl")
    opener.join()
    assert outcome.succeeded == 12 and not outcome.failed
    requests = stub.generation_requests()
    assert len(requests) == 13 and [r.outcome for r in requests].count("rate_limit") == 1  # one 429, retried once
    assert all(request.time >= pause["until"] for request in requests[4:]), "a request went out during the pause"


def test_529_overloaded_is_retried(stub, tmp_path):
    stub.faults = ["overloaded", "overloaded"]
    meta, jobs = jobs_for(3)
    outcome = run(QUESTIONS, jobs, meta, settings(concurrency=1), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 3 and len(stub.generation_requests()) == 5


def test_connection_reset_is_retried(stub, tmp_path):
    stub.faults = ["reset"]
    meta, jobs = jobs_for(3)
    outcome = run(QUESTIONS, jobs, meta, settings(concurrency=1), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 3 and len(read_cache(tmp_path / "cache.jsonl")) == 3
    assert [r.outcome for r in stub.generation_requests()].count("reset") == 1


def test_malformed_body_is_asked_again(stub, tmp_path):
    stub.faults = ["malformed"]
    meta, jobs = jobs_for(3)
    outcome = run(QUESTIONS, jobs, meta, settings(concurrency=1), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 3 and not outcome.failed
    assert len(stub.generation_requests()) == 4


def test_a_request_failing_every_retry_stays_uncached(stub, tmp_path):
    stub.faults = ["server_error"] * 3  # max_retries 2: three attempts, all 500
    meta, jobs = jobs_for(3)
    outcome = run(QUESTIONS, jobs, meta, settings(concurrency=1, max_retries=2), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 2 and len(outcome.failed) == 1 and "500" in outcome.failed[0]
    assert len(read_cache(tmp_path / "cache.jsonl")) == 2


def test_spend_limit_stops_cleanly_keeping_progress(stub, tmp_path):
    stub.spend_limit_after = 5
    meta, jobs = jobs_for(20)
    with pytest.raises(StopGeneration, match="spend limit") as stopped:
        run(QUESTIONS, jobs, meta, settings(concurrency=2, max_retries=4), tmp_path / "cache.jsonl")
    assert "5 replies from this run are kept" in str(stopped.value)
    assert len(read_cache(tmp_path / "cache.jsonl")) == 5
    limited = [r for r in stub.generation_requests() if r.outcome == "spend_limit"]
    assert 1 <= len(limited) <= 2  # no retries of a spend-limit reply, no new requests after it


def test_authentication_error_stops_at_once(stub, tmp_path):
    stub.faults = ["auth"]
    meta, jobs = jobs_for(6)
    with pytest.raises(StopGeneration, match="401"):
        run(QUESTIONS, jobs, meta, settings(concurrency=1), tmp_path / "cache.jsonl")
    assert len(stub.generation_requests()) == 1


def test_runtime_stop_at_max_cost(stub, tmp_path):
    meta, jobs = jobs_for(60)
    # A request costs at most ~$0.0016 (max_tokens 300) and the stub's replies ~$0.00012 each:
    # with $0.004 the run stops after about 20, before the next one could pass the limit.
    with pytest.raises(StopGeneration, match="max_cost_usd") as stopped:
        run(QUESTIONS, jobs, meta, settings(concurrency=1, max_cost_usd=0.004), tmp_path / "cache.jsonl")
    assert 5 < len(read_cache(tmp_path / "cache.jsonl")) < 40
    # The next request is held back while none is in flight (concurrency 1): what was spent is all there is.
    said = re.search(
        r"with \$(\S+) spent and 0 requests in flight .* the next could pass the \$0\.004 ", str(stopped.value)
    )
    kept = re.search(r"\(\$(\S+) spent\)", str(stopped.value))
    assert said and kept and said.group(1) == kept.group(1), str(stopped.value)


def test_a_reply_waiting_for_its_write_still_counts_against_max_cost(stub, tmp_path, monkeypatch):
    """A reply left the requests in flight when it arrived, and reached the spent total only once
    written: while its write waited, other workers saw neither and paid past max_cost_usd (a $0.08
    limit: $0.104 kept). Each reply now counts in flight until it is billed."""
    from retrieval_bench.llm.runs import sync

    in_flight: list[int] = []
    keep = sync._SyncRun.keep

    def keeping(self, record: dict) -> None:  # what may_pay counts in flight while this write waits
        in_flight.append(self.in_flight)
        keep(self, record)

    monkeypatch.setattr(sync._SyncRun, "keep", keeping)
    meta, jobs = jobs_for(8)
    run(QUESTIONS, jobs, meta, settings(concurrency=1, max_cost_usd=1.0), tmp_path / "cache.jsonl")
    assert in_flight == [1] * 8  # concurrency 1: the reply being written is the one in flight


def test_missing_api_key_is_a_one_line_error(stub, tmp_path, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    meta, jobs = jobs_for(1)
    with pytest.raises(InputError, match="ANTHROPIC_API_KEY"):
        run(QUESTIONS, jobs, meta, settings(), tmp_path / "cache.jsonl")
    assert not stub.requests


# --- openai-compatible ---------------------------------------------------------------------------------
def test_openai_compatible_with_base_url_and_no_key(stub, tmp_path):
    stub.faults = ["rate_limit"]
    meta, jobs = jobs_for(5, provider="openai-compatible", model="llama3.1:8b")
    outcome = run(
        QUESTIONS,
        jobs,
        meta,
        settings("openai-compatible", model="llama3.1:8b", base_url=f"{stub.url}/v1"),
        tmp_path / "c.jsonl",
    )
    assert outcome.succeeded == 5
    assert stub.count("POST", "/v1/chat/completions") == 6
    assert {r["family"] for r in read_cache(tmp_path / "c.jsonl").values()} == {"openai-compatible"}


def test_openai_insufficient_quota_is_a_spend_limit(stub, tmp_path):
    stub.spend_limit_after = 2
    meta, jobs = jobs_for(6, provider="openai-compatible")
    with pytest.raises(StopGeneration, match="spend limit"):
        run(
            QUESTIONS,
            jobs,
            meta,
            settings("openai-compatible", concurrency=1, base_url=f"{stub.url}/v1"),
            tmp_path / "c.jsonl",
        )
    assert len(read_cache(tmp_path / "c.jsonl")) == 2
    assert stub.count("POST", "/v1/chat/completions") == 3


def test_openai_truncated_reply_is_cached_as_rejected(stub, tmp_path):
    stub.stop_reason = lambda passage: "max_tokens"
    meta, jobs = jobs_for(2, provider="openai-compatible")
    run(QUESTIONS, jobs, meta, settings("openai-compatible", base_url=f"{stub.url}/v1"), tmp_path / "c.jsonl")
    assert {r["rejected"] for r in read_cache(tmp_path / "c.jsonl").values()} == {"truncated"}


# --- anthropic-batch -------------------------------------------------------------------------------------
def test_batch_submits_journals_and_collects(stub, tmp_path, monkeypatch):
    monkeypatch.setattr(MESSAGE_BATCHES, "max_requests", 4)  # 10 requests -> 3 batches
    stub.batch_seconds = 0.2
    meta, jobs = jobs_for(10, provider="anthropic-batch")
    outcome = run(QUESTIONS, jobs, meta, settings("anthropic-batch"), tmp_path / "cache.jsonl")
    assert outcome.succeeded == 10 and outcome.submitted_batches == 3 and stub.batch_creates() == 3
    assert set(read_cache(tmp_path / "cache.jsonl")) == {job.key for job in jobs}
    events = read_jsonl(tmp_path / "cache.batches.jsonl")
    assert [e["event"] for e in events].count("submitted") == 3 and [e["event"] for e in events].count("collected") == 3
    submitted = [r["key"] for e in events if e["event"] == "submitted" for r in e["requests"]]
    assert sorted(submitted) == sorted(job.key for job in jobs)
    custom_ids = [r["custom_id"] for b in stub.batches.values() for r in b["requests"]]
    assert sorted(custom_ids) == sorted(submitted) and all(len(c) <= 64 for c in custom_ids)
    assert outcome.cost == pytest.approx(settings().cost(outcome.input_tokens, outcome.output_tokens) / 2)


def test_each_task_resumes_its_own_journalled_batches_and_unnamed_ones_are_the_questions_or_the_judges():
    events = [
        {"batch_id": "a", "task": "questions"},
        {"batch_id": "b", "task": "multi"},
        {"batch_id": "c"},  # written before batches named their task: one task's journal
        {"batch_id": "d", "task": "keywords"},
    ]
    assert [e["batch_id"] for e in of_task(events, QUESTIONS)] == ["a", "c"]
    assert [e["batch_id"] for e in of_task(events, MULTI)] == ["b"]
    assert [e["batch_id"] for e in of_task(events, KEYWORDS)] == ["d"]
    assert [e["batch_id"] for e in of_task(events, JUDGE)] == ["c"]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        # a \ud800 escape without its pair: a lone surrogate, which crashed the cache's checksum on every rerun
        ('{"question": "Where is topic \\ud800 explained today?", "evidence": "topic"}', "malformed_json"),
        (
            '{"question": "Where is\\u0000 topic\\u001b[31m red\\u0007 explained?", "evidence": "topic"}',
            "control_characters",
        ),
    ],
)
def test_a_reply_that_is_not_text_is_rejected_with_a_reason(reply, reason):
    assert clean_reply(reply).rejected == reason
    assert clean_reply('{"question": "Where is the topic explained today?", "evidence": "topic"}').rejected is None
