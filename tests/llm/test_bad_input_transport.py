"""Bad input at the LLM transport (issue 41), one section per observation:

1. a server trickling a byte a second (one long body, an endless event stream) ran past
   <section>.timeout_s, which bounded each read, not the request;
2. a retry-after of 100000, inf, 1e8 ms or an HTTP date next century paused the run forever;
3. a server echoing the request's key in an error body had it printed in full;
4. a reply with null token counts failed with a TypeError and was paid again on every rerun; a
   proxy's HTML page failed with "AttributeError ... 'choices'".

The real anthropic / openai SDKs talk to the stub server on 127.0.0.1 (tests/stub_llm.py); a
"remote" endpoint is the stub reached as an HTTP proxy, so nothing leaves the machine. The waits
that used to hang are run under GUARD_S: the trickle would take TRICKLE_BYTES seconds (a minute),
a retry-after of 100000 a day; each case here ends in a few seconds.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from conftest import set_params
from llm_helpers import jobs_for, settings
from stub_llm import TRICKLE_BYTES, StubLLM, read_jsonl, run_stage_here, stage_env, stage_project

from retrieval_bench.core import paths
from retrieval_bench.llm.cache.replies import read_cache
from retrieval_bench.llm.cost.settings import Settings
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.tasks import QUESTIONS
from retrieval_bench.llm.transport.errors import StopGeneration

GUARD_S = TRICKLE_BYTES / 2  # well before the trickle ends, far beyond what a capped run takes
KEY = "sk-ant-api03-LEAKCHECK-0123456789abcdefghij"


def within(seconds: float, call: Callable[[], Any]) -> Any:
    """call()'s result, or a failure once it has run `seconds` (it is left behind in its thread)."""
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["value"] = call()
        except BaseException as error:  # noqa: BLE001 - raised again in the test's thread
            done["error"] = error

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    thread.join(seconds)
    assert not thread.is_alive(), f"still running after {seconds:.0f}s"
    if "error" in done:
        raise done["error"]
    return done["value"]


def openai_settings(stub: StubLLM, **overrides: Any) -> Settings:
    return settings("openai-compatible", base_url=f"{stub.url}/v1", **overrides)


def provider_settings(provider: str, stub: StubLLM, **overrides: Any) -> Settings:
    if provider == "openai-compatible":
        return openai_settings(stub, **overrides)
    return settings(provider, **overrides)


# --- 1. timeout_s bounds the whole request ------------------------------------------------------
@pytest.mark.parametrize("fault", ["trickle", "event_stream"])
def test_a_trickling_loopback_server_is_cut_at_timeout_s(stub, tmp_path, fault):
    stub.faults = [fault]
    meta, jobs = jobs_for(1, provider="openai-compatible")
    outcome = within(
        GUARD_S,
        lambda: run(QUESTIONS, jobs, meta, openai_settings(stub, timeout_s=1, max_retries=0), tmp_path / "c.jsonl"),
    )
    assert outcome.timed_out == 1 and outcome.succeeded == 0 and read_cache(tmp_path / "c.jsonl") == {}
    [reason] = outcome.failed
    assert "\n" not in reason and f"127.0.0.1:{stub.port}" in reason and "generate.timeout_s 1s" in reason


@pytest.mark.parametrize("fault", ["trickle", "event_stream"])
def test_a_trickling_remote_server_is_cut_at_timeout_s_each_try(stub, tmp_path, monkeypatch, fault):
    """A remote endpoint keeps the SDK's retries: each try is cut at judge.timeout_s, the line names both."""
    monkeypatch.setenv("ANTHROPIC_BASE_URL", "http://llm.remote.example")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, stub.url)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    stub.faults = [fault, fault]
    meta, jobs = jobs_for(1)
    judge = Settings.from_params(dict(provider="anthropic", timeout_s=1, max_retries=1, concurrency=1), section="judge")
    outcome = within(GUARD_S, lambda: run(QUESTIONS, jobs, meta, judge, tmp_path / "c.jsonl"))
    assert outcome.timed_out == 1 and outcome.succeeded == 0
    [reason] = outcome.failed
    assert "llm.remote.example" in reason and "judge.timeout_s" in reason and "\n" not in reason
    assert [r.host for r in stub.generation_requests()] == ["llm.remote.example"] * 2  # tried again once


# --- 2. a server-asked wait is capped -----------------------------------------------------------
@pytest.mark.parametrize(
    ("provider", "headers"),
    [
        ("anthropic", {"retry-after": "100000"}),
        ("openai-compatible", {"retry-after": "100000"}),
        ("anthropic", {"retry-after": "inf"}),
        ("openai-compatible", {"retry-after-ms": "100000000"}),
        ("anthropic", {"retry-after": "Fri, 31 Dec 2100 23:59:59 GMT"}),
    ],
)
def test_a_server_asked_wait_is_capped_at_timeout_s_said_once_and_counted(stub, tmp_path, capsys, provider, headers):
    stub.retry_headers = headers
    stub.faults = ["rate_limit", "rate_limit"]
    meta, jobs = jobs_for(3, provider=provider)
    chosen = provider_settings(provider, stub, timeout_s=1, concurrency=1)
    outcome = within(GUARD_S, lambda: run(QUESTIONS, jobs, meta, chosen, tmp_path / "c.jsonl"))
    assert outcome.succeeded == 3 and not outcome.failed
    err = capsys.readouterr().err
    assert err.count("waiting 1s instead, the most generate.timeout_s allows") == 1, err
    assert "2x rate limited (429)" in err and "2 server-asked waits capped at generate.timeout_s 1s" in err


# --- 3. a key echoed by the server is masked ----------------------------------------------------
def texts_under(folder: Path) -> list[tuple[Path, str]]:
    return [(p, p.read_bytes().decode("utf-8", "replace")) for p in folder.rglob("*") if p.is_file()]


@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
@pytest.mark.parametrize("fault", ["echo_auth", "echo_error"])
def test_a_key_echoed_in_an_error_body_is_masked_everywhere(tmp_path, provider, fault):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": provider, "generate.max_questions": 2, "generate.max_retries": 1})
    with StubLLM() as stub:
        stub.faults = [fault] * 20
        env = stage_env(stub, key=KEY)
        if provider == "openai-compatible":
            set_params(project, **{"generate.base_url": f"{stub.url}/v1"})
            env = {**env, "OPENAI_API_KEY": KEY}
        status, out, err = run_stage_here(project, stub, env=env)
        sent = stub.generation_requests()[0].headers
    assert KEY in (sent.get("x-api-key"), sent.get("authorization", "").removeprefix("Bearer "))  # it was echoed
    assert status == 1
    [line] = [line for line in err.splitlines() if line.startswith("error:")]
    assert "[key hidden]" in line
    for where, text in [("stdout", out), ("stderr", err), *texts_under(project)]:
        for part in (KEY, KEY[:10], KEY[-12:]):
            assert part not in text, f"{part!r} in {where}"


# --- 4. misleading messages ---------------------------------------------------------------------
@pytest.mark.parametrize("provider", ["anthropic", "openai-compatible"])
@pytest.mark.parametrize(
    "usage",
    [
        "null_counts",
        "null",
        lambda usage: {**usage, "input_tokens": 1e308},  # an OverflowError in the cost, a traceback
        lambda usage: {**usage, "output_tokens": 10**30},
    ],
)
def test_a_reply_without_token_counts_is_kept_with_estimated_counts(stub, tmp_path, provider, usage):
    stub.usage = usage
    meta, jobs = jobs_for(2, provider=provider)
    cache = tmp_path / "c.jsonl"
    outcome = run(QUESTIONS, jobs, meta, provider_settings(provider, stub), cache)
    assert outcome.succeeded == 2 and not outcome.failed
    records = read_cache(cache)
    assert set(records) == {job.key for job in jobs}
    assert all(
        0 < r["usage"]["input_tokens"] < 10**6 and 0 < r["usage"]["output_tokens"] < 10**6 for r in records.values()
    )


def test_a_reply_with_null_token_counts_is_not_paid_for_again(tmp_path):
    project = stage_project(tmp_path / "p")
    set_params(project, **{"generate.provider": "openai-compatible", "generate.max_questions": 3})
    with StubLLM() as stub:
        set_params(project, **{"generate.base_url": f"{stub.url}/v1"})
        stub.usage = "null_counts"
        first = run_stage_here(project, stub)
        asked = len(stub.generation_requests())
        second = run_stage_here(project, stub)
        assert len(stub.generation_requests()) == asked, "the rerun paid again"
    assert first[0] == 0 and second[0] == 0, (first, second)
    assert "Error" not in first[2] and len(read_jsonl(project / paths.GOLDENSET)) == 3


@pytest.mark.parametrize(
    ("provider", "path"), [("anthropic", "/v1/messages"), ("openai-compatible", "/v1/chat/completions")]
)
def test_an_html_page_instead_of_an_api_reply_is_one_line_naming_url_and_content_type(stub, tmp_path, provider, path):
    stub.faults = ["html"] * 10
    meta, jobs = jobs_for(2, provider=provider)
    with pytest.raises(StopGeneration) as stopped:
        run(QUESTIONS, jobs, meta, provider_settings(provider, stub), tmp_path / "c.jsonl")
    message = str(stopped.value)
    assert "\n" not in message and "Error" not in message, message
    assert f"127.0.0.1:{stub.port}{path} answered HTTP 200 with an HTML page" in message
    assert "content-type text/html" in message and "instead of an API reply" in message
    assert read_cache(tmp_path / "c.jsonl") == {}


def test_an_echoed_bearer_key_is_masked_once_and_a_dns_failure_named_in_words(monkeypatch):
    """A key masked in "Bearer <key>" was masked again by the labelled-value rule ("Bearer [key
    hidden] hidden] hidden]"); a host that does not resolve said "Unknown error -2" (getaddrinfo's
    code read as an errno)."""
    import socket

    from retrieval_bench.llm.transport import credentials
    from retrieval_bench.llm.transport.errors import os_reason

    monkeypatch.setattr(credentials, "_KEYS_READ", {"sk-ant-TESTKEY1234567890"})
    text = "the request had {'Authorization': 'Bearer sk-ant-TESTKEY1234567890'}; x-api-key: another-secret"
    assert credentials.mask_keys(text) == (
        f"the request had {{'Authorization': 'Bearer {credentials.MASK}'}}; x-api-key: {credentials.MASK}"
    )
    failure = socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    assert os_reason(ConnectionError("cannot connect")) == "cannot connect"
    try:
        raise ConnectionError("cannot connect") from failure
    except ConnectionError as error:
        assert os_reason(error) == "Name or service not known"
    assert os_reason(ConnectionRefusedError(111, "Connection refused")) == "Connection refused"


def test_https_to_a_plain_http_server_says_so_and_ipv6_keeps_its_brackets(stub):
    """https://127.0.0.1 to a plain http server said "Operation not permitted" (the TLS error's
    code read as an errno); http://[::1]:8000 was named http://::1:8000."""
    import httpx

    from retrieval_bench.llm.transport.errors import origin_of, os_reason

    with pytest.raises(httpx.ConnectError) as failed:
        httpx.get(stub.url.replace("http://", "https://"), verify=False)
    import ssl

    # OpenSSL 3.0-3.1 says WRONG_VERSION_NUMBER, 3.2 on RECORD_LAYER_FAILURE: the one this Python links
    code = "RECORD_LAYER_FAILURE" if ssl.OPENSSL_VERSION_INFO >= (3, 2) else "WRONG_VERSION_NUMBER"
    assert os_reason(failed.value) == f"TLS failed ({code}): a plain http server? Its URL starts with http://"
    assert origin_of(httpx.URL("http://[::1]:8000/v1")) == "http://[::1]:8000"
    assert origin_of(httpx.URL("http://127.0.0.1:8000/v1")) == "http://127.0.0.1:8000"


@pytest.mark.parametrize(
    ("key", "why"),
    [
        ("sk-ant-TESTKEY1234567890\n", "has spaces or a line break at its start or end"),
        ("   ", "is blank: unset it"),
        ("sk-ant-TESTKEY-é€-1234567890", "holds a character no key has at position 16"),
        ("sk-ant-TEST KEY1234567890", "holds a character no key has at position 12"),
    ],
)
def test_a_key_no_header_can_carry_is_one_line_before_any_request(stub, tmp_path, monkeypatch, key, why):
    """A trailing newline sat 141 s at 0% and ended "10 requests in a row failed ... Illegal header
    value"; a non-ASCII key was blamed on the server's reply ("malformed reply (UnicodeEncodeError)")."""
    from retrieval_bench.core.errors import InputError

    meta, jobs = jobs_for(2, provider="openai-compatible")
    monkeypatch.setenv("OPENAI_API_KEY", key)
    with pytest.raises(InputError) as refused:
        within(GUARD_S, lambda: run(QUESTIONS, jobs, meta, openai_settings(stub), tmp_path / "c.jsonl"))
    message = str(refused.value)
    assert message.startswith(f"OPENAI_API_KEY {why}") and message.endswith("; nothing was sent")
    assert "\n" not in message and (not key.strip() or key.strip() not in message)
    assert stub.generation_requests() == []


def test_a_base_url_from_the_environment_is_checked_like_params_and_short_keys_are_not_masked(monkeypatch):
    """OPENAI_BASE_URL=' http://...' (a leading space) was called a free local server, then failed
    as "the connection to :// failed" after 2.5 min; a key of one letter ("e", as local servers
    take) turned every line into "cannot conn[key hidden]ct"."""
    from retrieval_bench.core.errors import InputError
    from retrieval_bench.llm.providers.registry import named
    from retrieval_bench.llm.transport import credentials

    openai = named("openai-compatible", "generate")
    with pytest.raises(InputError, match=r"^OPENAI_BASE_URL must be the http\(s\) URL of the server; it has spaces"):
        credentials.endpoint_for(
            openai, None, {"OPENAI_API_KEY": "sk-x" * 4, "OPENAI_BASE_URL": " http://127.0.0.1/v1"}
        )
    with pytest.raises(InputError, match=r"^OPENAI_BASE_URL .* it must start with http:// or https://"):
        credentials.endpoint_for(openai, None, {"OPENAI_BASE_URL": "127.0.0.1:18765/v1"})
    # the price reads it first: it called ' http://127.0.0.1' a free local server, and no scheme "no known price"
    from retrieval_bench.llm.cost import prices

    for url, problem in ((" http://127.0.0.1/v1", "has spaces"), ("127.0.0.1:18765/v1", "must start with http://")):
        with pytest.raises(
            InputError, match=rf"^OPENAI_BASE_URL must be the http\(s\) URL of the server; it {problem}"
        ):
            prices.resolve(openai, "qwen2.5:7b", None, None, {"OPENAI_BASE_URL": url})
    monkeypatch.setattr(credentials, "_KEYS_READ", set())
    credentials.endpoint_for(openai, "http://127.0.0.1:8000/v1", {"OPENAI_API_KEY": "e"})
    assert credentials.mask_keys("cannot connect to http://127.0.0.1:8000 (Connection refused)") == (
        "cannot connect to http://127.0.0.1:8000 (Connection refused)"
    )


def test_a_batch_whose_every_poll_fails_stops_the_run_instead_of_polling_forever(stub, tmp_path, monkeypatch):
    """A server failing every status poll with a passing fault was polled every batch_poll_seconds,
    forever; the run now stops after MAX_POLL_FAILURES in a row, the batch kept for a rerun."""
    from retrieval_bench.llm.providers.anthropic_batch import MessageBatches
    from retrieval_bench.llm.runs.batch import MAX_POLL_FAILURES

    async def failing(self, client, batch_id):
        raise ConnectionError("502 from a proxy")

    monkeypatch.setattr(MessageBatches, "status", failing)
    meta, jobs = jobs_for(2, provider="anthropic-batch")
    with pytest.raises(StopGeneration, match=f"failed {MAX_POLL_FAILURES} times in a row") as stopped:
        run(QUESTIONS, jobs, meta, settings("anthropic-batch"), tmp_path / "cache.jsonl")
    assert "rerun to resume it" in str(stopped.value) and stub.batch_creates() == 1
