"""A scriptable stand-in for the LLM APIs, served on 127.0.0.1 so the real SDKs talk to it: the
library's deterministic stub (retrieval_bench.llm.providers.stub_server, what `retrieval-bench stub-llm`
serves: its replies, its passage parsing, its answers' shapes) with a test's controls added.

Speaks enough of three APIs for the providers of retrieval_bench.llm:

- Anthropic Messages: POST /v1/messages
- Anthropic Message Batches: POST /v1/messages/batches, GET /v1/messages/batches (the list, most
  recent first, paginated with limit / after_id / before_id and has_more / first_id / last_id as
  the real API shapes it), GET /v1/messages/batches/{id},
  GET /v1/messages/batches/{id}/results (JSON Lines, at the batch's results_url)
- OpenAI chat completions: POST /v1/chat/completions

Requests in absolute form (`POST http://elsewhere.example/v1/...`, as an HTTP proxy receives
them) are answered too, and their host is recorded: a test can point HTTP_PROXY here to see
what a client would have sent to another host, without any network.

FaultProxy sits in front of a StubLLM and passes requests through, with scripted faults of its
own: answer a batch create with a 500 after passing it through (the batch exists, the client
cannot know), or before (nothing was created).

It counts every request and can be scripted: a fixed latency, a queue of faults applied to the
next generation requests (429 with retry-after-ms or any retry headers, 529 overloaded, 500,
connection reset, malformed body, spend-limit 429, a proxy's HTML page, a body trickled a byte a
second, an endless event stream, a 401 or 500 echoing the request's key headers), replies whose
usage has null counts or is null, a spend limit that trips after N successful replies, a reply
function (prompt passage -> reply text), batch processing time and per-request batch outcomes.
Tests that must not race a clock use the event-driven controls instead: batches that end after a
number of looks (batch_views, add_batch(views=...), end_batches), a gate every reply waits on,
and answer_then_hold (n replies, then every request waits for an event).

Nothing is written to disk: requests are kept in memory (the API key header included, so a
test can check it arrived and then that it was written nowhere else).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import re
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

from retrieval_bench.llm.providers.stub_server import (  # noqa: F401  (default_reply, passage_block: the tests' too)
    StubHandler,
    StubServer,
    chat_completion,
    default_reply,
    passage_block,
    passage_of,
    prompt_of,
)


@dataclass
class Request:
    method: str
    path: str
    time: float
    body: dict | None = None
    headers: dict = field(default_factory=dict)
    passage_sha: str | None = None  # generation requests only
    outcome: str = "ok"
    host: str | None = None  # the host named by an absolute-form request (sent through a proxy)


FAULTS = {
    "rate_limit",
    "overloaded",
    "server_error",
    "reset",
    "malformed",
    "spend_limit",
    "auth",
    "html",
    "trickle",
    "event_stream",
    "echo_auth",
    "echo_error",
}
TRICKLE_BYTES = 60  # a trickled body: this many bytes, one per trickle_s (a minute at the default)


class StubLLM(StubServer):
    """Start with `with StubLLM() as stub:`; `stub.url` is the base URL (no /v1)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[Request] = []
        self.faults: list[str] = []  # consumed one per generation request, in arrival order
        self.latency = 0.0  # seconds before each generation reply
        self.retry_after_ms = 50  # on scripted 429s
        self.retry_headers: dict[str, str] | None = None  # on scripted 429s instead of retry-after-ms
        self.trickle_s = 1.0  # seconds between the bytes of a trickled body or event stream
        self.usage: str | Callable | None = None  # "null_counts" (each count null), "null" (none), usage -> usage
        self._closing = threading.Event()  # ends the trickles when the stub stops
        self.spend_limit_after: int | None = None  # successes before every request hits the spend limit
        self.batch_seconds = 0.0  # time a batch takes to end
        # Instead of a time: a batch created from now on ends once it has been looked at (listed, or
        # its status read) this many times, so a test decides what a client sees, not the clock.
        self.batch_views: int | None = None
        # While set and not open, every generation request waits here before its reply: a test
        # opens it when what it waits for (another process waiting on a lock) has happened.
        self.gate: threading.Event | None = None
        self.batch_outcome: Callable[[str, int], str] = lambda custom_id, index: "succeeded"
        self.batches: dict[str, dict] = {}
        self.create_hold = 0.0  # seconds a batch create waits, after the batch exists, before answering
        self.create_faults: list[str] = []  # per create: "server_error" (500, nothing created), "rate_limit"
        self.after_create: Callable[["StubLLM"], None] | None = None  # e.g. other users' batches appearing
        self.successes = 0
        super().__init__()  # reply and stop_reason: the library's defaults, replaced by a test at will

    def __exit__(self, *exc: object) -> None:
        self._closing.set()
        super().__exit__(*exc)

    def _usage(self, usage: dict) -> dict | None:
        """A reply's usage as scripted (self.usage): as given, every count null, null, or what a
        function of it returns."""
        if callable(self.usage):
            return self.usage(usage)
        if self.usage == "null":
            return None
        return {name: None for name in usage} if self.usage == "null_counts" else usage

    # --- what was asked --------------------------------------------------------------------
    def generation_requests(self) -> list[Request]:
        with self.lock:
            return [r for r in self.requests if r.passage_sha is not None]

    def count(self, method: str, path_prefix: str) -> int:
        with self.lock:
            return sum(r.method == method and r.path.startswith(path_prefix) for r in self.requests)

    def batch_creates(self) -> int:
        """Create requests received (whether or not they created a batch)."""
        with self.lock:
            return sum(r.method == "POST" and r.path == "/v1/messages/batches" for r in self.requests)

    def created_batches(self, custom_ids: set[str] | None = None) -> list[dict]:
        """Batches that exist, other than add_batch's (optionally: only those holding these custom_ids)."""
        with self.lock:
            batches = [b for b in self.batches.values() if not b.get("foreign")]
        if custom_ids is not None:
            batches = [b for b in batches if {r["custom_id"] for r in b["requests"]} & custom_ids]
        return batches

    def add_batch(self, n_requests: int, ended: bool = True, prefix: str = "other", views: int | None = None) -> str:
        """A batch someone else created on the same account (for listing and reconciliation); with
        `views`, it is processing for that many looks at it and ended from the next (batch_views)."""
        with self.lock:
            batch_id = f"msgbatch_{prefix}{len(self.batches) + 1:04d}"
            requests = [
                {
                    "custom_id": f"{prefix}-{batch_id}-{i}",
                    "params": {"model": "m", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]},
                }
                for i in range(n_requests)
            ]
            self.batches[batch_id] = {
                "id": batch_id,
                "requests": requests,
                "foreign": True,
                "started": time.monotonic()
                - (self.batch_seconds + 1 if ended else 0),  # else: ends after batch_seconds
                "created_at": datetime.now(timezone.utc),
                "seq": len(self.batches),
                "outcomes": ["succeeded"] * n_requests,
                "views_left": views,
            }
        return batch_id

    def end_batches(self) -> None:
        """Every batch counted in looks (batch_views) ends at its next look."""
        with self.lock:
            for batch in self.batches.values():
                if batch.get("views_left") is not None:
                    batch["views_left"] = 0

    def reset_counts(self) -> None:
        with self.lock:
            self.requests.clear()

    # --- behaviour -------------------------------------------------------------------------
    def _next_fault(self) -> str | None:
        with self.lock:
            if self.spend_limit_after is not None and self.successes >= self.spend_limit_after:
                return "spend_limit"
            return self.faults.pop(0) if self.faults else None

    def _ended(self, batch: dict, look: bool) -> bool:
        """Whether a batch has ended at this look (a `look` counts against its looks left, if it
        has a count; else the clock decides)."""
        with self.lock:
            views_left = batch.get("views_left")
            if views_left is None:
                return time.monotonic() - batch["started"] >= self.batch_seconds
            batch["views_left"] = max(0, views_left - int(look))
            return views_left == 0

    def _batch_view(self, batch: dict, look: bool = True) -> dict:
        ended = self._ended(batch, look)
        n = len(batch["requests"])
        counts = {"processing": n, "succeeded": 0, "errored": 0, "canceled": 0, "expired": 0}
        if ended:
            counts["processing"] = 0
            for outcome in batch["outcomes"]:
                counts[outcome] += 1
        created = batch["created_at"]
        return {
            "id": batch["id"],
            "type": "message_batch",
            "processing_status": "ended" if ended else "in_progress",
            "request_counts": counts,
            "created_at": created.isoformat(),
            "expires_at": (created + timedelta(hours=24)).isoformat(),
            "ended_at": datetime.now(timezone.utc).isoformat() if ended else None,
            "archived_at": None,
            "cancel_initiated_at": None,
            "results_url": f"{self.url}/v1/messages/batches/{batch['id']}/results" if ended else None,
        }

    def _handler_class(self) -> type[StubHandler]:
        stub = self

        class Handler(StubHandler):
            def _reset(self) -> None:
                # An abrupt close (RST), as a dropped connection looks to the client.
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.close_connection = True
                self.connection.close()

            def _route(self) -> None:
                """Absolute-form request lines (through a proxy): keep the path, note the host."""
                self.proxied_host = None
                if self.path.startswith(("http://", "https://")):
                    parts = urlsplit(self.path)
                    self.proxied_host = parts.netloc
                    self.path = parts.path + (f"?{parts.query}" if parts.query else "")

            def _record(self, body: dict | None, passage: str | None) -> Request:
                request = Request(
                    self.command,
                    self.path,
                    time.monotonic(),
                    body,
                    {k.lower(): v for k, v in self.headers.items()},
                    hashlib.sha256(passage.encode("utf-8")).hexdigest() if passage is not None else None,
                    host=self.proxied_host,
                )
                with stub.lock:
                    stub.requests.append(request)
                return request

            def _trickle(self, content_type: str, body: bytes | None) -> None:
                """`body` (else an endless event stream) one byte per stub.trickle_s, until the
                client hangs up or the stub stops."""
                self.send_response(200)
                self.send_header("Content-Type", content_type)
                if body is not None:
                    self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                endless = itertools.cycle(b'event: ping\ndata: {"type": "ping"}\n\n')
                for byte in body if body is not None else endless:
                    if stub._closing.wait(stub.trickle_s):
                        break
                    try:
                        self.wfile.write(bytes([byte]))
                        self.wfile.flush()
                    except OSError:  # the client gave up: what the test waits for
                        break
                self.close_connection = True

            def _echo_key(self, status: int) -> None:
                """An error body quoting the request's key headers, as a careless server or proxy does."""
                seen = {k: v for k, v in self.headers.items() if k.lower() in ("authorization", "x-api-key")}
                key = next(iter(seen.values()), "").removeprefix("Bearer ")
                message = f"invalid key {key}; the request had {seen}; hint: {key[:10]}****{key[-4:]}"
                self.send_json(status, {"type": "error", "error": {"type": "api_error", "message": message}})

            def _fault(self, fault: str, openai: bool) -> None:
                if fault == "reset":
                    self._reset()
                elif fault == "malformed":
                    self.send_json(200, None, raw=b'{"id": "msg_broken", "content": [{"type": "te')
                elif fault == "rate_limit":
                    error = {
                        "type": "rate_limit_error",
                        "message": "Number of request tokens has exceeded your per-minute rate limit",
                    }
                    if openai:
                        error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
                    headers = stub.retry_headers or {"retry-after-ms": str(stub.retry_after_ms)}
                    self.send_json(429, {"type": "error", "error": error}, headers)
                elif fault == "spend_limit":
                    if openai:
                        error = {
                            "message": "You exceeded your current quota, please check your plan and billing details.",
                            "type": "insufficient_quota",
                            "code": "insufficient_quota",
                        }
                        self.send_json(429, {"error": error})
                    else:
                        error = {
                            "type": "rate_limit_error",
                            "message": "You have reached your specified API usage limits (spend limit). "
                            "You will regain access on the first of next month.",
                            "details": {"error_code": "enforced_spend_limit_reached"},
                        }
                        self.send_json(429, {"type": "error", "error": error})
                elif fault == "overloaded":
                    self.send_json(
                        529, {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
                    )
                elif fault == "server_error":
                    self.send_json(
                        500, {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
                    )
                elif fault == "auth":
                    self.send_json(
                        401,
                        {"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
                    )
                elif fault == "html":
                    page = b"<!DOCTYPE html><html><body><h1>Sign in to the corporate proxy</h1></body></html>"
                    self.send_response(200)
                    self.send_header("Content-Type", "text/html; charset=utf-8")
                    self.send_header("Content-Length", str(len(page)))
                    self.end_headers()
                    self.wfile.write(page)
                elif fault == "trickle":
                    self._trickle("application/json", b" " * (TRICKLE_BYTES - 2) + b"{}")
                elif fault == "event_stream":
                    self._trickle("text/event-stream", None)
                elif fault == "echo_auth":
                    self._echo_key(401)
                elif fault == "echo_error":
                    self._echo_key(500)
                else:
                    raise ValueError(f"unknown fault {fault!r}")

            def do_POST(self) -> None:  # noqa: N802
                self._route()
                body = self.read_json()
                if body is None:  # cut off (a client killed while sending) or not JSON: the API bills nothing
                    self._record(None, None).outcome = "bad_request"
                    return self.send_json(
                        400, {"type": "error", "error": {"type": "invalid_request_error", "message": "bad body"}}
                    )
                if self.path == "/v1/messages/batches":
                    self._record(body, None)
                    return self._create_batch(body)
                if self.path not in ("/v1/messages", "/v1/chat/completions"):
                    self._record(body, None)
                    return self.send_json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
                    )
                openai = self.path == "/v1/chat/completions"
                prompt = prompt_of(body)
                request = self._record(body, passage_of(prompt))
                fault = stub._next_fault()
                if fault:
                    request.outcome = fault
                    return self._fault(fault, openai)
                if stub.gate is not None:
                    stub.gate.wait()
                if stub.latency:
                    time.sleep(stub.latency)
                message = stub.message(body.get("model", "?"), prompt)
                with stub.lock:
                    stub.successes += 1
                reply = chat_completion(message) if openai else message
                self.send_json(200, {**reply, "usage": stub._usage(reply["usage"])})

            def _create_batch(self, body: dict) -> None:
                fault = stub._next_fault() if stub.spend_limit_after is not None else None
                with stub.lock:
                    fault = fault or (stub.create_faults.pop(0) if stub.create_faults else None)
                if fault:
                    return self._fault(fault, False)
                with stub.lock:
                    batch_id = f"msgbatch_stub{len(stub.batches) + 1:04d}"
                    requests = body.get("requests") or []
                    batch = {
                        "id": batch_id,
                        "requests": requests,
                        "started": time.monotonic(),
                        "created_at": datetime.now(timezone.utc),
                        "seq": len(stub.batches),
                        "outcomes": [stub.batch_outcome(r["custom_id"], i) for i, r in enumerate(requests)],
                        "views_left": stub.batch_views,
                    }
                    stub.batches[batch_id] = batch
                if stub.after_create is not None:
                    stub.after_create(stub)
                if stub.create_hold:
                    time.sleep(stub.create_hold)  # the batch exists; the answer is late (a kill lands here)
                self.send_json(200, stub._batch_view(batch, look=False))  # the create's answer is not a look

            def _list_batches(self) -> None:
                """The account's batches, most recently created first, one page (the real API's shape)."""
                query = parse_qs(urlsplit(self.path).query)
                limit = max(1, min(1000, int((query.get("limit") or ["20"])[0])))
                with stub.lock:
                    ordered = sorted(stub.batches.values(), key=lambda b: (b["created_at"], b["seq"]), reverse=True)
                ids = [b["id"] for b in ordered]
                after, before = (query.get("after_id") or [None])[0], (query.get("before_id") or [None])[0]
                if after is not None:
                    start = ids.index(after) + 1 if after in ids else len(ids)
                    page = ordered[start : start + limit]
                    has_more = start + limit < len(ordered)
                elif before is not None:
                    end = ids.index(before) if before in ids else 0
                    page = ordered[max(0, end - limit) : end]
                    has_more = end - limit > 0
                else:
                    page, has_more = ordered[:limit], limit < len(ordered)
                views = [stub._batch_view(b) for b in page]
                self.send_json(
                    200,
                    {
                        "data": views,
                        "has_more": has_more,
                        "first_id": views[0]["id"] if views else None,
                        "last_id": views[-1]["id"] if views else None,
                    },
                )

            def do_GET(self) -> None:  # noqa: N802
                self._route()
                self._record(None, None)
                if self.path.split("?")[0] == "/v1/messages/batches":
                    return self._list_batches()
                match = re.fullmatch(r"/v1/messages/batches/([^/]+)(/results)?", self.path.split("?")[0])
                batch = stub.batches.get(match.group(1)) if match else None
                if batch is None:
                    return self.send_json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": self.path}}
                    )
                view = stub._batch_view(batch)
                if not match.group(2):
                    return self.send_json(200, view)
                if view["processing_status"] != "ended":
                    return self.send_json(
                        404, {"type": "error", "error": {"type": "not_found_error", "message": "not ended"}}
                    )
                lines = []
                for request, outcome in zip(batch["requests"], batch["outcomes"]):
                    params = request["params"]
                    if outcome == "succeeded":
                        result = {
                            "type": "succeeded",
                            "message": stub.message(params["model"], params["messages"][-1]["content"]),
                        }
                    elif outcome == "errored":
                        result = {
                            "type": "errored",
                            "error": {
                                "type": "error",
                                "error": {"type": "api_error", "message": "Internal server error"},
                            },
                        }
                    else:
                        result = {"type": outcome}
                    lines.append(json.dumps({"custom_id": request["custom_id"], "result": result}))
                data = ("\n".join(lines) + "\n").encode("utf-8")
                self.send_response(200)
                self.send_header("Content-Type", "application/binary")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler


class FaultProxy:
    """An HTTP server in front of `upstream` that passes every request through, except that the
    next batch creates can be answered with a fault of the proxy's own:

    - "500_after": pass the create through (the batch now exists), then answer 500, as a proxy or
      load balancer that lost the upstream answer would;
    - "500_before": answer 500 without passing it through (nothing is created).

    `with FaultProxy(stub) as proxy:`; `proxy.url` replaces `stub.url`."""

    def __init__(self, upstream: StubLLM) -> None:
        self.upstream = upstream
        self.create_faults: list[str] = []
        self.passed: list[tuple[str, str, int]] = []  # (method, path, upstream status)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self._server.daemon_threads = True
        self._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> "FaultProxy":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def log_message(self, *args: object) -> None:
                pass

            def _reply(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
                self.send_response(status)
                for key, value in headers:
                    if key.lower() not in ("content-length", "transfer-encoding", "connection", "date", "server"):
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def _pass(self) -> None:
                import http.client

                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                fault = None
                if self.command == "POST" and self.path.split("?")[0] == "/v1/messages/batches" and proxy.create_faults:
                    fault = proxy.create_faults.pop(0)
                error = json.dumps(
                    {"type": "error", "error": {"type": "api_error", "message": "Internal server error"}}
                ).encode()
                if fault == "500_before":
                    return self._reply(500, [("Content-Type", "application/json")], error)
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length", "connection")
                }
                connection = http.client.HTTPConnection("127.0.0.1", proxy.upstream.port, timeout=30)
                try:
                    connection.request(self.command, self.path, body=body, headers=headers)
                    response = connection.getresponse()
                    data = response.read()
                    proxy.passed.append((self.command, self.path, response.status))
                    if fault == "500_after":
                        return self._reply(500, [("Content-Type", "application/json")], error)
                    self._reply(response.status, response.getheaders(), data)
                finally:
                    connection.close()

            do_GET = do_POST = _pass  # noqa: N815

        return Handler


def answer_then_hold(n: int, reply: Callable[[str], str], held: threading.Event) -> Callable[[str], str]:
    """A stub reply function: `n` replies, then every request waits for `held` (in flight for as
    long as the test wants: a kill lands with exactly `n` replies cached, whatever the machine's load)."""
    answered = itertools.count()

    def answer(passage: str) -> str:
        if next(answered) >= n:
            held.wait()
        return reply(passage)

    return answer


# --- running the generate stage against the stub -------------------------------------------
def stage_project(dest, docs: list[str] | None = None):
    """A minimal project to run `python -m stages.generate_goldenset` in, without git or DVC:
    stages/, params.yaml, the prompts, and data/documents.parquet of a slice of the sample.
    Hand-written questions are off (generate.handwritten names an empty file), so every
    question is generated."""
    import shutil
    from pathlib import Path

    import pandas as pd
    import yaml

    root = Path(__file__).resolve().parents[1]
    dest = Path(dest)
    shutil.copytree(root / "stages", dest / "stages", ignore=shutil.ignore_patterns("__pycache__"))
    (dest / "data").mkdir(parents=True)
    for prompt in [
        *(root / "data").glob("question_prompt*.txt"),
        root / "data" / "kind_prompt.txt",
    ]:  # every kind's, the classifier's
        shutil.copy2(prompt, dest / "data" / prompt.name)
    sample = root / "data" / "sample" / "sqlite"
    names = docs or ["wal.md", "autoinc.md", "inmemorydb.md"]
    frame = pd.DataFrame({"doc_id": names, "text": [(sample / name).read_text(encoding="utf-8") for name in names]})
    frame.to_parquet(dest / "data" / "documents.parquet", index=False)
    (dest / "data" / "labels.jsonl").write_text("")
    (dest / "data" / "no_handwritten_questions.jsonl").write_text("")
    params = yaml.safe_load((root / "params.yaml").read_text())
    params["generate"].update(
        handwritten="data/no_handwritten_questions.jsonl",
        max_questions=10,
        max_retries=2,
        batch_poll_seconds=0.1,
        concurrency=4,
    )
    (dest / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return dest


def stage_env(stub: "StubLLM", key: str = "sk-ant-test-key") -> dict:
    import os
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env.update(ANTHROPIC_API_KEY=key, ANTHROPIC_BASE_URL=stub.url, PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1")
    return env


def start_stage(project, stub: "StubLLM", *args: str, env: dict | None = None):
    import subprocess
    import sys

    return subprocess.Popen(
        [sys.executable, "-m", "stages.generate_goldenset", *args],
        cwd=project,
        env=env or stage_env(stub),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # Ctrl-C as a terminal delivers it, even when the suite runs in a background shell (which
        # starts its commands with SIGINT ignored, and a child inherits that).
        preexec_fn=_default_sigint,
    )


def _default_sigint() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def run_stage(project, stub: "StubLLM", *args: str, env: dict | None = None, timeout: float = 120):
    """Run the stage to the end: (exit status, stdout, stderr)."""
    process = start_stage(project, stub, *args, env=env)
    out, err = process.communicate(timeout=timeout)
    return process.returncode, out, err


def wait_for(condition, process, timeout: float = 600.0) -> None:
    """Until `condition`; the stage ending first fails at once, the timeout only guards a hang (a loaded
    2-core machine may take minutes to import and start)."""
    import time

    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the stage ended early: {process.communicate()}"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def run_stage_here(project, stub: "StubLLM", *args: str, env: dict | None = None, stage: str = "generate_goldenset"):
    """A paying stage in this process, as `python -m stages.<stage>` runs it (working folder,
    environment, one-line errors, exit status): (exit status, stdout, stderr). For tests of what
    the stage does; start_stage and run_stage for those of the process itself (a kill, two runs at
    once, what the process leaks)."""
    import contextlib
    import importlib
    import io
    import os

    from retrieval_bench.core.stage import run_stage as run_main

    main = importlib.import_module(f"stages.{stage}").main

    # The stage's environment is made from this process's before it is cleared (stage_env reads it).
    saved_env, saved_cwd, stage_environment = dict(os.environ), os.getcwd(), env or stage_env(stub)
    out, err = io.StringIO(), io.StringIO()
    os.environ.clear()
    os.environ.update(stage_environment)
    os.chdir(project)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                run_main(lambda: main(list(args)))
                status = 0
            except SystemExit as exited:
                status = exited.code
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
    return status, out.getvalue(), err.getvalue()


def run_stage_on_openai(project, stub: "StubLLM", model: str = "stub"):
    """run_stage_here through the openai-compatible provider (the openai SDK) at the stub, `model`
    the one it asks for, and no Anthropic key in the stage's environment."""
    from conftest import set_params

    set_params(
        project,
        **{"generate.provider": "openai-compatible", "generate.model": model, "generate.base_url": f"{stub.url}/v1"},
    )
    env = {k: v for k, v in stage_env(stub).items() if k != "ANTHROPIC_API_KEY"}
    return run_stage_here(project, stub, env=env)


def read_jsonl(path) -> list[dict]:
    from pathlib import Path

    path = Path(path)
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass  # a line torn by a kill
    return rows
