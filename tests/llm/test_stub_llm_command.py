"""`retrieval-bench stub-llm`: the no-key path. The command serves the library's deterministic stub
on 127.0.0.1; the generate stage, through the real openai SDK, gets its questions from it, and a
loopback openai-compatible server is priced $0 in the dry run, the guard and the run's report,
whatever the model is called (the default model's name included)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from conftest import set_params
from stub_llm import read_jsonl, run_stage_here, stage_project

from retrieval_bench.core import paths
from retrieval_bench.llm.cost.prices import resolve
from retrieval_bench.llm.providers.registry import PROVIDERS


@pytest.fixture
def stub_command():
    """The command on a free port (--port 0): (process, base URL with /v1, its start-up lines)."""
    process = subprocess.Popen(
        [sys.executable, "-m", "retrieval_bench.cli", "stub-llm", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = [process.stdout.readline() for _ in range(6)]
    url = lines[0].split(" at ")[1].split()[0]
    try:
        yield process, url, "".join(lines)
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = process.communicate(timeout=30)
        assert process.returncode == 0 and "stub-llm: stopped" in out and "Traceback" not in err


def no_key_env() -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    return {**env, "PYTHONUNBUFFERED": "1", "HF_HUB_OFFLINE": "1"}


def test_the_stub_command_serves_a_generation_run_offline_at_no_cost(stub_command, tmp_path):
    process, url, startup = stub_command
    assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
    assert "PIPELINE CHECK ONLY" in startup and "placeholder" in startup
    assert f"generate.provider: openai-compatible, generate.base_url: {url}" in startup
    project = stage_project(tmp_path / "p")
    # The default model's name (a paid one in the price table): a loopback server is free all the same.
    set_params(
        project, **{"generate.provider": "openai-compatible", "generate.base_url": url, "generate.max_questions": 3}
    )
    status, out, err = run_stage_here(project, None, "--dry-run", env=no_key_env())
    assert status == 0, err
    assert "~ $0.00" in out and "a local server at 127.0.0.1: free" in out and "$0.276" not in out
    set_params(project, **{"generate.max_cost_usd": 0.0001})  # below what 3 paid questions cost: the guard passes
    status, out, err = run_stage_here(project, None, env=no_key_env())
    assert status == 0, err
    assert "3 replies (0 rejected)" in out and ", $0.00" in out
    questions = read_jsonl(project / paths.GOLDENSET)
    assert len(questions) == 3 and all(q["question"].startswith("Where is topic ") for q in questions)
    assert process.poll() is None  # still serving


@pytest.mark.parametrize("model", ["claude-haiku-4-5", "gpt-4o", "qwen2.5:7b"])
def test_a_loopback_openai_compatible_server_is_free_whatever_the_model(model):
    provider = PROVIDERS["openai-compatible"]
    price = resolve(provider, model, "http://localhost:8000/v1", None, env={})
    assert (price.input_per_mtok, price.output_per_mtok) == (0.0, 0.0)
    stated = resolve(provider, model, "http://localhost:8000/v1", {"input_per_mtok": 1, "output_per_mtok": 2}, env={})
    assert (stated.input_per_mtok, stated.output_per_mtok) == (1.0, 2.0)  # a stated price still wins


def test_a_remote_openai_compatible_server_keeps_the_list_price():
    price = resolve(PROVIDERS["openai-compatible"], "claude-haiku-4-5", "https://gateway.example/v1", None, env={})
    assert (price.input_per_mtok, price.output_per_mtok) == (1.0, 5.0)


def test_a_port_in_use_is_one_error_line(stub_command):
    port = stub_command[1].rsplit(":", 1)[1].split("/")[0]
    done = subprocess.run(
        [sys.executable, "-m", "retrieval_bench.cli", "stub-llm", "--port", port],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and done.stderr.startswith(f"error: --port {port}: cannot listen on 127.0.0.1:{port}")
    assert len(done.stderr.strip().splitlines()) == 1
