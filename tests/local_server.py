"""A real OpenAI-compatible server for the suite: `transformers serve` (the `transformers[serving]`
extra of the test profile) on 127.0.0.1, serving a tiny causal LM built here offline.

The model is a two-layer Llama with seeded random weights (about 4 MB) over the bundled
all-MiniLM-L6-v2 tokenizer, given a plain chat template: it writes nonsense, which is what the
tests need (replies the pipeline must reject). The server is forced to that folder, so requests
name the folder's path as the model, and anything else is refused (HTTP 400).

Tests that need the server to hold a request (a timeout, requests in flight together) freeze it
with SIGSTOP: the kernel still accepts connections, nothing is answered until SIGCONT, so no test
waits on a clock.

`python tests/local_server.py [N] [MAX_TOKENS] [CONCURRENCY]` measures the tiny model's throughput
through the project's openai-compatible provider (docs/how-to/local-server.md quotes it).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The template the tiny model's tokenizer applies: role-prefixed turns, then the assistant's cue.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ message['role'] }}: {{ message['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)
# Only a server that never becomes healthy or a stage that never ends meets these: the tests wait
# on events (a health answer, a connection, an exit), not on these margins.
HANG_GUARD_S = 300.0
POLL_S = 0.1


def build_tiny_chat_model(folder: Path) -> Path:
    """A seeded random two-layer Llama (hidden size 32) with the bundled MiniLM tokenizer and
    CHAT_TEMPLATE, saved as a model folder."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from retrieval_bench.embedding.model_source import bundled_model_path

    # A BERT tokenizer also returns token_type_ids, which a Llama's generate() refuses.
    tokenizer = AutoTokenizer.from_pretrained(
        str(bundled_model_path()), model_input_names=["input_ids", "attention_mask"]
    )
    tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        pad_token_id=tokenizer.pad_token_id,
        tie_word_embeddings=True,
    )
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def wait_until(condition: Callable[[], bool], process: subprocess.Popen, what: str, log: Path | None = None) -> None:
    """Poll `condition` until it holds; fail at once, with `log`'s tail, if `process` ends first."""
    deadline = time.monotonic() + HANG_GUARD_S
    while not condition():
        if process.poll() is not None:
            tail = log.read_text(errors="replace")[-3000:] if log else ""
            raise AssertionError(f"{what}: the process exited {process.returncode} first\n{tail}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: nothing after {HANG_GUARD_S:.0f}s (hang guard)")
        time.sleep(POLL_S)


@dataclass
class LocalServer:
    process: subprocess.Popen
    port: int
    model: str  # the id the server answers to: the forced model folder's path
    log: Path  # the server's stdout and stderr

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")

    @contextlib.contextmanager
    def frozen(self) -> Iterator[None]:
        """The server stopped (SIGSTOP): connections are accepted by the kernel, none is answered
        until the block ends (SIGCONT)."""
        self.process.send_signal(signal.SIGSTOP)
        try:
            yield
        finally:
            self.process.send_signal(signal.SIGCONT)

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as answer:
                return answer.status == 200
        except OSError:
            return False


@contextlib.contextmanager
def serve(model: Path, log: Path) -> Iterator[LocalServer]:
    """`transformers serve <model>` on a free port of 127.0.0.1 until the block ends, once it
    answers GET /health."""
    port = free_port()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONUNBUFFERED": "1"}
    env["OMP_NUM_THREADS"] = "1"  # a 32-wide model gains nothing from threads; the suite runs two workers
    command = [str(Path(sys.executable).parent / "transformers"), "serve", str(model)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--device", "cpu", "--log-level", "info"]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    server = LocalServer(process, port, str(model), log)
    try:
        wait_until(server.healthy, process, f"transformers serve on port {port}", log)
        yield server
    finally:
        process.send_signal(signal.SIGCONT)  # a frozen server cannot act on SIGTERM
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def measure(n: int = 32, max_tokens: int = 64, concurrency: int = 1) -> None:
    """Send `n` question-sized prompts through the project's openai-compatible provider to a
    fresh server with the tiny model; print requests/s and output tokens/s."""
    import asyncio
    import tempfile

    from retrieval_bench.llm.cost.settings import Settings
    from retrieval_bench.llm.providers.openai_compatible import CHAT_COMPLETIONS
    from retrieval_bench.llm.transport.ratelimit import SharedPause

    prompt_text = (Path(__file__).resolve().parents[1] / "data" / "sample" / "sqlite" / "wal.md").read_text()[:1200]
    with (
        tempfile.TemporaryDirectory() as scratch,
        serve(build_tiny_chat_model(Path(scratch) / "m"), Path(scratch) / "log") as server,
    ):
        values = dict(provider="openai-compatible", model=server.model, base_url=server.base_url)
        settings = Settings.from_params({**values, "max_tokens": max_tokens, "concurrency": concurrency})

        async def run() -> list:
            client = CHAT_COMPLETIONS.client(settings, SharedPause())
            gate = asyncio.Semaphore(concurrency)

            async def one(i: int):
                async with gate:
                    return await CHAT_COMPLETIONS.send(client, settings, f"Write one question.\n{i}\n{prompt_text}")

            try:
                return await asyncio.gather(*(one(i) for i in range(n)))
            finally:
                await client.close()

        start = time.perf_counter()
        replies = asyncio.run(run())
        seconds = time.perf_counter() - start
    tokens_in, tokens_out = sum(r.input_tokens for r in replies), sum(r.output_tokens for r in replies)
    print(
        f"{n} requests at concurrency {concurrency}, max_tokens {max_tokens}: {seconds:.1f}s, "
        f"{n / seconds:.2f} requests/s, {tokens_out / seconds:.0f} output tokens/s "
        f"({tokens_in / n:.0f} input tokens per request) on {os.cpu_count()} CPUs"
    )


if __name__ == "__main__":
    measure(*(int(arg) for arg in sys.argv[1:]))
