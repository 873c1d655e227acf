"""A provider is one module and one registry line (issue 32): with tests/llm/fake_provider.py listed
in llm/registry.PROVIDERS and nothing else changed, params.yaml may name it, its key goes only to
its own hosts, its list prices price the run, and a real run through its SDK pays at its price and caches
under its own family."""

from __future__ import annotations

import pytest
import yaml
from fake_provider import FAKE_CHAT
from llm_helpers import jobs_for
from stub_llm import read_jsonl

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import load_all_params
from retrieval_bench.llm.cost.guard import check_cost, estimate
from retrieval_bench.llm.cost.settings import Settings, check_llm_sections
from retrieval_bench.llm.providers import registry
from retrieval_bench.llm.runs.runner import run
from retrieval_bench.llm.runs.tasks import QUESTIONS
from retrieval_bench.llm.transport.credentials import endpoint_for

KEY = "fk-test-key"


@pytest.fixture
def registered(monkeypatch):
    """The one registry line."""
    monkeypatch.setitem(registry.PROVIDERS, FAKE_CHAT.name, FAKE_CHAT)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "FAKE_LLM_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(FAKE_CHAT.key_env, KEY)


def params_file(tmp_path, **generate) -> str:
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump({"generate": {"provider": "fake-llm", "model": "fake-small", **generate}}))
    return str(path)


def checked(path: str) -> dict:
    params = load_all_params(path)
    check_llm_sections(params, path)
    return params


def test_params_may_name_a_registered_provider_only(tmp_path, monkeypatch):
    path = params_file(tmp_path)
    with pytest.raises(InputError, match=r"generate\.provider must be one of anthropic, .*got 'fake-llm'"):
        checked(path)
    monkeypatch.setitem(registry.PROVIDERS, FAKE_CHAT.name, FAKE_CHAT)
    assert checked(path)["generate"]["provider"] == "fake-llm"
    with pytest.raises(InputError, match=r"must be one of .*fake-llm.*got 'fake-lm'"):
        checked(params_file(tmp_path, provider="fake-lm"))
    # What it takes is its own: it declares no temperature.
    with pytest.raises(InputError, match=r"generate\.temperature is for provider openai-compatible; the fake-llm API"):
        checked(params_file(tmp_path, temperature=0.2))


def test_its_list_prices_price_the_run_and_others_are_refused(registered):
    settings = Settings.from_params({"provider": "fake-llm", "model": "fake-small"})
    assert (settings.input_per_mtok, settings.output_per_mtok) == (2.0, 8.0)
    assert settings.family == "fake-llm" and not settings.batch
    dated = Settings.from_params({"provider": "fake-llm", "model": "fake-small-20260101"})
    assert (dated.input_per_mtok, dated.output_per_mtok) == (2.0, 8.0)
    # Not free on loopback: an unknown model on a local server still needs its price.
    with pytest.raises(
        InputError, match=r"'fake-large' has no known price \(the table knows .*fake-small \$2\.00/\$8\.00"
    ):
        Settings.from_params({"provider": "fake-llm", "model": "fake-large", "base_url": "http://127.0.0.1:9/v1"})
    # Its price guards the cost: 1,010 input and 100 output tokens a request at $2 / $8 per million.
    estimated = estimate(["x" * 3500] * 1000, settings)
    assert estimated.usd == pytest.approx(1000 * (1010 * 2.0 + 100 * 8.0) / 1e6)
    with pytest.raises(InputError, match=r"above generate\.max_cost_usd"):
        check_cost(estimated, Settings.from_params({"provider": "fake-llm", "model": "fake-small", "max_cost_usd": 2}))


def test_its_key_goes_to_its_own_hosts_only(registered, tmp_path):
    env = {FAKE_CHAT.key_env: KEY, "HOME": str(tmp_path), "OPENAI_API_KEY": "sk-not-this-one"}
    assert endpoint_for(FAKE_CHAT, "https://api.fake-llm.example/v1", env).key == KEY
    assert endpoint_for(FAKE_CHAT, None, env).shown == "https://api.fake-llm.example/v1"
    for refused in ("https://api.openai.com/v1", "http://api.fake-llm.example/v1", "https://evil.example/v1"):
        with pytest.raises(
            InputError, match=r"FAKE_LLM_API_KEY is set.*to api\.fake-llm\.example.*export FAKE_LLM_BASE_URL="
        ):
            endpoint_for(FAKE_CHAT, refused, env)
    vouched = {**env, FAKE_CHAT.url_env: "https://gateway.corp.example/v1"}
    assert endpoint_for(FAKE_CHAT, "https://gateway.corp.example/v1", vouched).key == KEY
    with pytest.raises(
        InputError,
        match=r"generate\.provider fake-llm needs generate\.base_url or, for https://api\.fake-llm\.example/v1 itself, FAKE_LLM_API_KEY",
    ):
        endpoint_for(FAKE_CHAT, None, {"HOME": str(tmp_path)})


def test_a_run_through_it_pays_once_and_caches_under_its_family(registered, stub, tmp_path):
    settings = Settings.from_params(
        {"provider": "fake-llm", "model": "fake-small", "base_url": f"{stub.url}/v1", "concurrency": 2}
    )
    meta, jobs = jobs_for(4, provider="fake-llm", model="fake-small")  # keyed by the registry's family
    cache = tmp_path / "c.jsonl"
    outcome = run(QUESTIONS, jobs, meta, settings, cache)
    assert outcome.succeeded == 4 and stub.count("POST", "/v1/chat/completions") == 4
    assert {request.headers["authorization"] for request in stub.generation_requests()} == {f"Bearer {KEY}"}
    records = read_jsonl(cache)
    assert {record["family"] for record in records} == {"fake-llm"}
    tokens = [(r["usage"]["input_tokens"], r["usage"]["output_tokens"]) for r in records]
    assert outcome.cost == pytest.approx(sum(i * 2.0 + o * 8.0 for i, o in tokens) / 1e6)
    assert KEY not in cache.read_text()
    # Its own family: the same passage asked of another API is another cache entry.
    other_keys = {job.key for job in jobs_for(4, provider="openai-compatible", model="fake-small")[1]}
    assert {record["key"] for record in records} == {job.key for job in jobs} and not other_keys & {
        job.key for job in jobs
    }
