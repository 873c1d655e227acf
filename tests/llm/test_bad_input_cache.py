"""Bad input in and out of the question cache (issue 41): damaged records, oversize and deeply
nested replies, a file-size limit, a reply echoing the API key.

The real anthropic SDK talks to the stub server on 127.0.0.1 (tests/stub_llm.py); no network.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import set_params
from llm_helpers import jobs_for, settings
from stub_llm import StubLLM, default_reply, read_jsonl, run_stage_here, stage_env, stage_project

from retrieval_bench.core import paths
from retrieval_bench.llm.cache.replies import CHECKSUM, RAW_KEPT_CHARS, CacheWriter, read_cache
from retrieval_bench.llm.checks.hygiene import MAX_REPLY_CHARS, clean_reply
from retrieval_bench.llm.runs.paid import PaidWork, pay_for
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.sync import failures_to_stop
from retrieval_bench.llm.runs.tasks import QUESTIONS
from retrieval_bench.llm.transport.credentials import MASK
from retrieval_bench.llm.transport.errors import StopGeneration

CACHE, GOLDEN = paths.QUESTION_CACHE, paths.GOLDENSET


def edit_line(path: Path, number: int, edit) -> None:
    """Replace line `number` (1-based) of `path` by edit(its text)."""
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[number - 1] = edit(lines[number - 1])
    path.write_text("\n".join(lines), encoding="utf-8")


def nested(depth: int) -> str:
    """A JSON list `depth` deep around a question: [[[..."Why?"...]]]."""
    return "[" * depth + '"Why?"' + "]" * depth


# --- 1. checksums ----------------------------------------------------------------------------------
def test_an_edited_question_fails_its_checksum_and_is_asked_again_alone(stub, tmp_path):
    """Observed: a question edited inside the cache was used silently."""
    cache = tmp_path / "cache.jsonl"
    meta, jobs = jobs_for(3)
    run(QUESTIONS, jobs, meta, settings(), cache)
    records = read_jsonl(cache)
    assert all(record[CHECKSUM] for record in records)
    line = [record["key"] for record in records].index(jobs[1].key) + 1
    edit_line(cache, line, lambda text: text.replace("Where is topic", "Who planted topic"))
    said = []
    assert set(read_cache(cache, said.append)) == {jobs[0].key, jobs[2].key}
    assert said == [
        f"{cache}:{line}: key {jobs[1].key}: fails its checksum (edited or damaged); ignored, its question is asked again"
    ]
    stub.reset_counts()
    run(QUESTIONS, jobs[1:2], meta, settings(), cache)
    assert len(stub.generation_requests()) == 1  # the damaged one only
    said.clear()
    served = read_cache(cache, said.append)
    assert set(served) == {job.key for job in jobs} and "Who planted" not in served[jobs[1].key]["question"]
    assert said == [
        f"{cache}:{line}: key {jobs[1].key}: fails its checksum (edited or damaged); ignored, line 4 holds it soundly"
    ]


def test_the_first_sound_record_of_a_key_wins_and_a_different_one_is_named(tmp_path):
    """Observed: a later record with the same key won."""
    cache = tmp_path / "cache.jsonl"
    first = {"key": "k1", "question": "Which pragma turns on WAL?", "rejected": None, "created": "2026-01-01"}
    with CacheWriter(cache) as writer:
        writer.append(first)
        writer.append({**first, "created": "2026-02-02", "usage": {"input_tokens": 3}})  # the same reply again
        writer.append({**first, "question": "Which pragma turns WAL off?"})  # sound, but another reply
    said = []
    assert read_cache(cache, said.append)["k1"]["question"] == "Which pragma turns on WAL?"
    assert said == [f"{cache}:3: key k1: a second, different reply for this key; line 1's is used"]


def test_a_cache_written_before_checksums_is_served_unverified_and_new_records_are_checksummed(stub, tmp_path):
    """Caches shared through DVC remotes predate checksums: they must not be paid for again."""
    cache = tmp_path / "cache.jsonl"
    meta, jobs = jobs_for(3)
    run(QUESTIONS, jobs[:2], meta, settings(), cache)
    legacy = [{k: v for k, v in record.items() if k != CHECKSUM} for record in read_jsonl(cache)]
    cache.write_text("".join(json.dumps(record) + "\n" for record in legacy))
    stub.reset_counts()
    said = []
    assert set(read_cache(cache, said.append)) == {jobs[0].key, jobs[1].key} and not said
    run(QUESTIONS, jobs[2:], meta, settings(), cache)
    assert len(stub.generation_requests()) == 1
    assert [CHECKSUM in record for record in read_jsonl(cache)] == [False, False, True]


@pytest.mark.parametrize(
    ("field", "value", "said"),
    [
        ("question", None, "question null is not text"),  # an AttributeError in the stage, offline too
        ("question", 123, "question 123 is not text"),
        ("evidence", {"a": 1}, 'evidence {"a": 1} is not text or a list of texts'),
        ("grade", 7, "grade 7 is not null or a whole number from 0 to 3"),  # scored as relevant, silently
        ("grade", True, "grade true is not null or a whole number from 0 to 3"),
        ("grade", "2", 'grade "2" is not null or a whole number from 0 to 3'),  # a TypeError in the judge
    ],
)
def test_a_record_with_a_field_of_the_wrong_type_is_named_and_asked_again(stub, tmp_path, field, value, said):
    """Records of an older version carry no checksum, and a checksum is no type check: such a
    record crashed the stage or was used as it was."""
    cache = tmp_path / "cache.jsonl"
    meta, jobs = jobs_for(2)
    run(QUESTIONS, jobs, meta, settings(), cache)
    records = [{k: v for k, v in record.items() if k != CHECKSUM} for record in read_jsonl(cache)]
    records[1][field] = value
    cache.write_text("".join(json.dumps(record) + "\n" for record in records))
    lines: list[str] = []
    assert set(read_cache(cache, lines.append)) == {records[0]["key"]}  # the lines in the order replies came
    assert lines == [f"{cache}:2: key {records[1]['key']}: {said}; ignored, its question is asked again"]


def test_malformed_lines_are_named_one_by_one_and_only_their_questions_rebuilt(tmp_path):
    """Observed: a truncated line inside the cache stopped the stage with nothing rebuilt."""
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 4})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        cache = project / CACHE
        kept = read_jsonl(cache)
        assert len(kept) == 4
        edit_line(cache, 2, lambda text: text[: len(text) // 2])  # truncated JSON, then a newline
        edit_line(cache, 3, lambda text: "[" * 200_000 + "]" * 200_000)  # nested too deep for json
        with open(cache, "a", encoding="utf-8") as handle:
            handle.write("\x00garbage\n")
        stub.reset_counts()
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        assert len(stub.generation_requests()) == 2  # the two lost questions, nothing else
    said = [line for line in err.splitlines() if line.startswith("reply cache:")]
    assert said == [
        f"reply cache: {CACHE}:2: invalid JSON; ignored, its question is asked again",
        f"reply cache: {CACHE}:3: JSON nested too deep to read; ignored, its question is asked again",
        f"reply cache: {CACHE}:6: invalid JSON; ignored, its question is asked again",  # line 1: touch_jsonl
    ]
    assert "Traceback" not in err and len(read_jsonl(project / GOLDEN)) == 4
    assert set(read_cache(cache, lambda line: None)) == {r["key"] for r in kept}


def test_many_bad_lines_are_named_five_at_a_time_and_counted(tmp_path):
    cache = tmp_path / "cache.jsonl"
    cache.write_text("garbage\n" * 7 + json.dumps({"key": "k1", "question": "Why?"}) + "\n")
    said = []
    assert list(read_cache(cache, said.append)) == ["k1"]
    assert len(said) == 6 and said[-1] == f"{cache}: 2 more damaged lines ignored; their questions are asked again"


# --- 2. rejected replies are stored cut ------------------------------------------------------------------
def test_a_5_mb_reply_is_rejected_as_oversize_and_stored_cut(stub, tmp_path):
    """Observed: rejected as too_short (one 5 MB "word") and stored whole."""
    huge = "x" * 5_000_000
    assert clean_reply(huge, "end_turn").rejected == "oversize"
    assert clean_reply("Why? " * (MAX_REPLY_CHARS // 5 + 1), "end_turn").rejected == "oversize"
    stub.reply = lambda passage: huge
    cache = tmp_path / "cache.jsonl"
    meta, jobs = jobs_for(1)
    run(QUESTIONS, jobs, meta, settings(), cache)
    (record,) = read_cache(cache).values()
    assert record["rejected"] == "oversize" and record["raw"].startswith("x" * RAW_KEPT_CHARS)
    assert record["raw"].endswith("[cut: the reply was 5,000,000 characters, the first 4,096 are kept]")
    assert cache.stat().st_size < 3 * RAW_KEPT_CHARS
    accepted = default_reply("p")
    assert clean_reply(accepted, "end_turn").rejected is None  # an accepted reply is stored whole


# --- 3. deeply nested replies ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("depth", "reason", "provider"),
    [(5_000, "too_deep", "anthropic"), (200_000, "oversize", "anthropic"), (5_000, "too_deep", "anthropic-batch")],
)
def test_a_reply_nested_thousands_deep_is_one_line_and_the_run_keeps_every_reply(
    stub, tmp_path, capsys, depth, reason, provider
):
    """Observed: a RecursionError traceback, the run's other replies lost."""
    meta, jobs = jobs_for(4, provider=provider)
    deep = "Passage 2:"
    stub.reply = lambda passage: nested(depth) if passage.startswith(deep) else default_reply(passage)
    cache = tmp_path / "cache.jsonl"
    outcome = run(QUESTIONS, jobs, meta, settings(provider, concurrency=1), cache)
    records = read_cache(cache)
    assert set(records) == {job.key for job in jobs} and outcome.succeeded == 4
    assert records[jobs[2].key]["rejected"] == reason and outcome.rejected == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if jobs[2].key in line]
    assert len(lines) == 1 and f"is rejected as {reason}" in lines[0]


# --- 4. a file-size limit ----------------------------------------------------------------------------------
def _limit_file_size(limit: int):
    def limit_it() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead of killing
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    return limit_it


def _stage_under_limit(project: Path, stub: StubLLM, limit: int) -> subprocess.CompletedProcess:
    env = {**stage_env(stub), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "stages.generate_goldenset"],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=_limit_file_size(limit),
    )


def test_a_file_size_limit_is_one_line_naming_the_file_and_nothing_is_half_written(tmp_path):
    """`ulimit -f` reached while the cache grows, then while the golden set is written."""
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "anthropic", "generate.max_questions": 3, "generate.concurrency": 1})
    with StubLLM() as stub:
        status, out, err = run_stage_here(project, stub)
        assert status == 0, err
        cache, golden = project / CACHE, project / GOLDEN
        before, golden_before = cache.read_bytes(), golden.read_bytes()
        set_params(project, **{"generate.max_questions": 10})
        ran = _stage_under_limit(project, stub, len(before) + len(before) // 2)  # room for one more record or so
        assert ran.returncode == 1, ran.stderr
        (line,) = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
        assert "file too large" in line.lower() and f"writing {CACHE}" in line and "Traceback" not in ran.stderr
        after = cache.read_bytes()
        assert after.startswith(before) and after.endswith(b"\n")  # earlier records intact, whole lines only
        whole = [line for line in after.split(b"\n") if line.strip()]
        assert len(read_cache(cache)) == len(whole) > 3 and golden.read_bytes() == golden_before

        set_params(project, **{"generate.max_questions": len(read_cache(cache))})
        ran = _stage_under_limit(project, stub, 64)  # the cache is complete: the golden set hits the limit
        (line,) = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
        assert ran.returncode == 1 and "file too large" in line and f"writing {GOLDEN}; it was not changed" in line
    assert not [name for name in os.listdir(project / "data") if name.endswith(".tmp")]


# --- 5. a reply holding the API key ------------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["anthropic", "anthropic-batch"])
@pytest.mark.parametrize("echoed", ["whole", "all but its last character"])
def test_a_reply_echoing_the_api_key_is_not_stored(stub, tmp_path, monkeypatch, provider, echoed):
    """Observed: a server that echoed the key in a 200 reply had it written into the shared cache;
    then the key without its last character reached it, in three files."""
    key = "sk-ant-api03-ECHOED-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    meta, jobs = jobs_for(3, provider=provider)
    shown = key if echoed == "whole" else key[:-1]
    stub.reply = lambda passage: (
        json.dumps({"question": f"Is {shown} the key?", "evidence": ""})
        if passage.startswith("Passage 1:")
        else default_reply(passage)
    )
    cache = tmp_path / "cache.jsonl"
    outcome = run(QUESTIONS, jobs, meta, settings(provider), cache)
    assert shown not in cache.read_text() and set(read_cache(cache)) == {jobs[0].key, jobs[2].key}
    assert outcome.failed == [
        f"the reply contained the API key or a part of it ({MASK}): not stored, asked again by the next run"
    ]
    # billed all the same: the spend (and the cost limit) counts it; it showed $0.00 for 20 such replies
    echoing, stub.reply = stub.reply, default_reply
    clean = run(QUESTIONS, jobs, meta, settings(provider), tmp_path / "clean.jsonl")
    assert outcome.input_tokens == clean.input_tokens > 0 and outcome.cost > 0
    stub.reply = echoing
    with pytest.raises(StopGeneration) as stopped:  # the stage's closing line, through llm.runs.paid
        work = PaidWork(QUESTIONS, meta, settings(provider), str(cache), 1)
        pay_for(work, lambda records, n: ([j for j in jobs if j.key not in records], 0), 1, False, lambda line: None)
    message = str(stopped.value)
    assert "\n" not in message and f"a part of it ({MASK})" in message and shown not in message
    assert shown not in cache.read_text()


def test_a_server_echoing_the_key_on_every_reply_is_stopped_as_failing_requests_are(stub, tmp_path, monkeypatch):
    """Every reply holding the key was paid for and never counted as a failure in a row: the
    breaker never tripped, and each rerun paid for every planned request again."""
    key = "sk-ant-api03-ECHOED-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    meta, jobs = jobs_for(30, provider="anthropic")
    stub.reply = lambda passage: json.dumps({"question": f"Is {key} the key?", "evidence": ""})
    with pytest.raises(StopGeneration, match="requests in a row were replies holding the API key"):
        run(QUESTIONS, jobs, meta, settings("anthropic", concurrency=1), tmp_path / "cache.jsonl")
    assert len([r for r in stub.requests if r.passage_sha]) == failures_to_stop(1)  # the breaker, not all 30


# --- a reply the cache could not hold --------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["anthropic", "anthropic-batch", "openai-compatible"])
def test_a_reply_with_a_lone_surrogate_is_kept_and_never_paid_for_again(stub, tmp_path, provider):
    """JSON's "\\ud800" decodes to a string no UTF-8 file holds: the cache write raised
    UnicodeEncodeError, the run crashed (batch: its collection stopped there on every rerun) and
    every rerun paid for the same replies again: nothing had reached the cache)."""
    stub.reply = lambda passage: default_reply(passage).replace("Where", "Where \ud800")
    meta, jobs = jobs_for(3, provider=provider)
    cache = tmp_path / "cache.jsonl"
    extra = (
        {"base_url": f"{stub.url}/v1", "price": {"input_per_mtok": 1, "output_per_mtok": 5}}
        if provider == "openai-compatible"
        else {}
    )
    outcome = run(QUESTIONS, jobs, meta, settings(provider, **extra), cache)
    records = read_cache(cache)
    assert set(records) == {job.key for job in jobs} and outcome.succeeded == 3
    assert all("\ud800" not in json.dumps(record, ensure_ascii=False) for record in records.values())
    asked = stub.batch_creates() if provider == "anthropic-batch" else len(stub.generation_requests())
    assert asked == (1 if provider == "anthropic-batch" else 3)  # each cached: a rerun's plan asks for none


def test_reply_content_that_is_not_text_is_joined_or_a_failed_request():
    """An OpenAI-compatible server's content parts (a list) are joined; a number or a Messages-less
    body is a ValueError (a counted, retried failure), not a TypeError or AttributeError traceback."""
    from types import SimpleNamespace as NS

    from retrieval_bench.llm.providers.anthropic import MESSAGES
    from retrieval_bench.llm.providers.base import reply_text
    from retrieval_bench.llm.providers.openai_compatible import CHAT_COMPLETIONS

    parts = [{"type": "text", "text": '{"question": '}, {"type": "text", "text": '"Why?"}'}]
    answer = NS(choices=[NS(message=NS(content=parts), finish_reason="stop")], usage=None)
    assert CHAT_COMPLETIONS.reply(answer, "prompt").text == '{"question": "Why?"}'
    assert reply_text(None) == "" and reply_text("a\ud800b") == "a?b"
    for bad in (
        NS(choices=[NS(message=NS(content=7), finish_reason="stop")], usage=None),
        NS(choices=[NS(message=None)]),
    ):
        with pytest.raises(ValueError, match="content is a int|without a message"):
            CHAT_COMPLETIONS.reply(bad, "prompt")
    for bad in (NS(content=None, stop_reason="end_turn"), [1, 2]):
        with pytest.raises(ValueError, match="not a Messages reply"):
            MESSAGES.reply(bad, "prompt")
