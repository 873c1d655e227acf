"""A deterministic stand-in for an LLM server on 127.0.0.1: `retrieval-bench stub-llm` serves it, so
a new user can run the generation path offline and free, end to end; the test suite's scriptable
stub (tests/stub_llm.py: faults, batches, latency) builds on it, so both answer alike.

It speaks OpenAI chat completions (POST /v1/chat/completions, the openai-compatible provider) and
Anthropic Messages (POST /v1/messages). Its replies are placeholders made from the passage alone:
"Where is topic <hash> explained?", with the passage's first words as evidence. A pipeline check,
not questions to measure retrieval with. The other question kinds' prompts (goldenset.kinds) are
told by what they ask for and answered in their reply schema (kind_reply): several <passage>
blocks (multi: one excerpt from each), a `changed_fact` (unanswerable), a `query` (keyword); the
kind classifier's <question> block with a `kind` (stub_kind).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.stage import ctrl_c_stops

HOST = "127.0.0.1"  # loopback only: nothing off this machine reaches it, and it prices at $0 (llm.cost.prices)
DEFAULT_PORT = 8000
STUB_MODEL = "stub"  # the model name the docs suggest: it keeps the stub's replies apart in the question cache
_PASSAGE = re.compile(r"<passage>\n(.*)\n</passage>", re.DOTALL)
_PASSAGES = re.compile(r"<passage>\n(.*?)\n</passage>", re.DOTALL)
_QUESTION = re.compile(r"<question>\n(.*?)\n</question>", re.DOTALL)
_JOINING = re.compile(r"\b(?:compare|both|differ|versus|vs|and)\b", re.IGNORECASE)
_ESCAPED = re.compile(r"&(lt|#x[0-9a-f]{4});", re.IGNORECASE)


def passage_block(prompt: str) -> str | None:
    """The text between the prompt's <passage> and </passage> lines, as sent (escaped)."""
    match = _PASSAGE.search(prompt)
    return match.group(1) if match else None


def _unescaped(block: str) -> str:
    return _ESCAPED.sub(lambda m: "<" if m.group(1).lower() == "lt" else chr(int(m.group(1)[2:], 16)), block)


def passage_of(prompt: str) -> str:
    """The passage inside a rendered question prompt (the whole prompt if it has no markers), with
    the entities the generator escapes delimiter look-alikes with turned back into characters."""
    block = passage_block(prompt)
    return prompt if block is None else _unescaped(block)


def _tag(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def kind_reply(prompt: str) -> str | None:
    """The reply to another question kind's prompt (or the kind classifier's: stub_kind), in its
    schema, or None for a single question's. Like default_reply's, its questions share no run of
    words with the passages and its excerpts are each passage's first words; the near miss names a
    topic no passage holds."""
    classified = _QUESTION.search(prompt)
    if classified and '"kind"' in prompt:
        return json.dumps({"kind": stub_kind(_unescaped(classified.group(1)))})
    blocks = [_unescaped(block) for block in _PASSAGES.findall(prompt)]
    if len(blocks) > 1:
        tags = " and ".join(_tag(block) for block in blocks)
        pieces = [" ".join(block.split()[:8]) for block in blocks]
        return json.dumps({"question": f"How do topics {tags} work together?", "evidence": pieces})
    if not blocks:
        return None
    passage = blocks[0]
    evidence = " ".join(passage.split()[:8])
    if '"changed_fact"' in prompt:
        question = f"When was topic {_tag(passage)} retired?"
        return json.dumps({"question": question, "evidence": evidence, "changed_fact": "it was never retired"})
    if '"query"' in prompt:
        return json.dumps({"query": f"topic {_tag(passage)} overview", "evidence": evidence})
    return None


def stub_kind(question: str) -> str:
    """The stub's answer to the kind classifier (llm.runs.tasks.KIND_LABEL), by plain rules: keyword
    for 6 words or fewer without '?', multi for a question joining two things (compare, both,
    differ, versus, or ' and '), else single."""
    if len(question.split()) <= 6 and "?" not in question:
        return "keyword"
    if _JOINING.search(question):
        return "multi"
    return "single"


def passage_sha(prompt: str) -> str:
    return hashlib.sha256(passage_of(prompt).encode("utf-8")).hexdigest()


def default_reply(passage: str) -> str:
    """A well-formed reply: a paraphrase-like question unique to the passage (it shares no run
    of words with it) and a verbatim excerpt (the passage's first words) as evidence."""
    evidence = " ".join(passage.split()[:8])
    return json.dumps({"question": f"Where is topic {_tag(passage)} explained?", "evidence": evidence})


def prompt_of(body: dict) -> str:
    """The last message's text of a Messages or chat completions request body."""
    prompt = ((body.get("messages") or [{}])[-1] or {}).get("content") or ""
    if isinstance(prompt, list):
        prompt = "".join(part.get("text", "") for part in prompt)
    return prompt


def anthropic_message(model: str, prompt: str, text: str, stop_reason: str) -> dict:
    """A Messages API answer holding `text` (usage: about 4 characters a token)."""
    return {
        "id": "msg_" + hashlib.sha256(f"{time.time()}{prompt}".encode()).hexdigest()[:20],
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": stop_reason,
        "stop_sequence": None,
        "usage": {"input_tokens": max(1, len(prompt) // 4), "output_tokens": max(1, len(text) // 4)},
    }


def chat_completion(message: dict) -> dict:
    """anthropic_message's answer as OpenAI chat completions shapes it."""
    finish = {"max_tokens": "length", "refusal": "content_filter"}.get(message["stop_reason"], "stop")
    usage = message["usage"]
    return {
        "id": "chatcmpl-stub",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": message["model"],
        "choices": [
            {
                "index": 0,
                "finish_reason": finish,
                "logprobs": None,
                "message": {"role": "assistant", "content": message["content"][0]["text"]},
            }
        ],
        "usage": {
            "prompt_tokens": usage["input_tokens"],
            "completion_tokens": usage["output_tokens"],
            "total_tokens": usage["input_tokens"] + usage["output_tokens"],
        },
    }


class StubHandler(BaseHTTPRequestHandler):
    """Answers generation requests with the server's `message`; anything else is a 404."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out at once: no 40 ms delayed-ACK stall
    stub: StubServer  # set on the subclass each StubServer makes of its handler class

    def log_message(self, *args: object) -> None:  # quiet: the start-up lines say what it is
        pass

    def send_json(self, status: int, payload: object, headers: dict | None = None, raw: bytes | None = None) -> None:
        body = raw if raw is not None else json.dumps(payload).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("request-id", "req_stub")
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)

    def read_json(self) -> dict | None:
        """The request's JSON object; None when cut off or not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        data = self.rfile.read(length) if length else b""
        try:
            body = json.loads(data) if data else None
        except json.JSONDecodeError:
            return None
        return body if isinstance(body, dict) else None

    def not_found(self) -> None:
        self.send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}})

    def answer(self, body: dict) -> None:
        """The reply to a generation request, in the shape of the API its path names."""
        message = self.stub.message(body.get("model", "?"), prompt_of(body))
        self.send_json(200, chat_completion(message) if self.path == "/v1/chat/completions" else message)

    def do_POST(self) -> None:  # noqa: N802
        body = self.read_json()
        if body is None:
            return self.send_json(
                400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad body"}}
            )
        if self.path not in ("/v1/messages", "/v1/chat/completions"):
            return self.not_found()
        self.answer(body)


class StubServer:
    """`with StubServer() as stub:` serves on 127.0.0.1 (port 0: a free one); `stub.url` is the base
    URL without /v1. `reply` (passage -> reply text) and `stop_reason` (passage -> Anthropic's
    name) decide every answer."""

    def __init__(self, port: int = 0) -> None:
        self.reply: Callable[[str], str] = default_reply
        self.stop_reason: Callable[[str], str] = lambda passage: "end_turn"
        handler = type("Handler", (self._handler_class(),), {"stub": self})
        self._server = ThreadingHTTPServer((HOST, port), handler)
        self._server.daemon_threads = True
        # Errors inside handler threads (a client that hung up) are expected; keep the output clean.
        self._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.port = self._server.server_address[1]
        self.url = f"http://{HOST}:{self.port}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> StubServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[StubHandler]:
        """The handler's class (a scripted stub answers more)."""
        return StubHandler

    def message(self, model: str, prompt: str) -> dict:
        """The Messages API answer to `prompt`: another kind's reply (kind_reply), else `reply` of
        its passage."""
        passage = passage_of(prompt)
        text = kind_reply(prompt)
        return anthropic_message(
            model, prompt, self.reply(passage) if text is None else text, self.stop_reason(passage)
        )


# --- the `retrieval-bench stub-llm` command --------------------------------------------------------------
def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve a deterministic stub LLM on 127.0.0.1 (OpenAI chat completions and Anthropic Messages) to run "
        "the generation path offline, free and without a key. A pipeline check only: its questions are "
        "placeholders, not meaningful. Ctrl-C stops it."
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT}; 0: a free one)"
    )
    parser.set_defaults(run=serve)


def startup_lines(url: str) -> list[str]:
    """What the command says on start: what it is, that its questions mean nothing, and what to set."""
    return [
        f"stub-llm: a deterministic stub LLM at {url}/v1 (OpenAI chat completions)",
        "stub-llm: PIPELINE CHECK ONLY: every question it writes is a placeholder "
        '("Where is topic <hash> explained?"), not a question to measure retrieval with',
        "stub-llm: point the generator at it (no key needed, priced $0 on this loopback address):",
        f"  generate.provider: openai-compatible, generate.base_url: {url}/v1, generate.model: {STUB_MODEL}",
        "  e.g. python -m stages.generate_goldenset --dry-run after setting them in params.yaml, or "
        f"dvc exp run -S generate.provider=openai-compatible -S generate.base_url={url}/v1 "
        f"-S generate.model={STUB_MODEL}",
        "stub-llm: Ctrl-C stops it",
    ]


def serve(args: argparse.Namespace) -> int:
    """Serve until Ctrl-C."""
    if not 0 <= args.port <= 65535:
        raise InputError(f"--port {args.port}: a port is 0 to 65535")
    try:
        stub = StubServer(args.port)
    except OSError as error:
        raise InputError(f"--port {args.port}: cannot listen on {HOST}:{args.port} ({error.strerror})") from None
    ctrl_c_stops()
    with stub:
        print("\n".join(startup_lines(stub.url)), flush=True)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            print("stub-llm: stopped", flush=True)
    return 0
