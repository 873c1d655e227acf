"""The review page's server: 127.0.0.1 only, the standard library's http.server. GET / is the page,
GET /state the sample and the reviewer's clicks so far, POST /click one click, appended to the
reviewer's file (flushed to disk) before it is acknowledged."""

from __future__ import annotations

import errno
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from retrieval_bench.core.errors import InputError, describe_os_error
from retrieval_bench.goldenset.reviews import (
    MARK_LABELS,
    Reviews,
    append_clicks,
    grade_click,
    question_click,
    read_reviews,
    reviews_path,
)
from retrieval_bench.review.items import Review, check_shown
from retrieval_bench.review.page import MARK_KEYS, PAGE, keys_legend

HOST = "127.0.0.1"
MAX_BODY = 1 << 16  # bytes: a click is a question id and a few chunk ids


def page_state(review: Review, reviews: Reviews, reviewer: str, folder: Path) -> dict[str, Any]:
    """What the page starts from: the sample, the keys, and `reviewer`'s last word on each question
    and chunk (so a reopened page resumes at the first question without a mark)."""
    questions = reviews.questions[reviews.questions["reviewer"] == reviewer]
    grades: dict[str, dict[str, int]] = {}
    own = reviews.grades[reviews.grades["reviewer"] == reviewer]
    for qid, chunk_id, grade in zip(own["qid"], own["chunk_id"], own["grade"], strict=True):
        grades.setdefault(qid, {})[chunk_id] = int(grade)
    return {
        "reviewer": reviewer,
        "file": str(reviews_path(folder, reviewer)),
        "items": review.items,
        "marks": dict(zip(questions["qid"], questions["mark"], strict=True)),
        "grades": grades,
        "mark_keys": MARK_KEYS,
        "mark_labels": MARK_LABELS,
        "keys": keys_legend(),
    }


def clicks_of(body: Any, reviewer: str) -> list[dict[str, Any]]:
    """The clicks a POST /click body stands for: {qid, mark} is one question click, {qid, chunk_ids,
    grade} one grade click per chunk id (a text several chunks share is graded once, for all)."""
    if not isinstance(body, dict) or not isinstance(body.get("qid"), str):
        raise InputError("a click is a JSON object with a qid")
    if "mark" in body:
        return [question_click(reviewer, body["qid"], body["mark"])]
    chunk_ids = body.get("chunk_ids")
    # the clicks differ only by chunk id: checked here, the first click's check stands for all of them
    if not isinstance(chunk_ids, list) or not chunk_ids or not all(isinstance(c, str) and c for c in chunk_ids):
        raise InputError("a grade click names its chunk_ids")
    grade = body.get("grade")  # append_clicks refuses anything but 0-3
    return [grade_click(reviewer, body["qid"], chunk_id, grade) for chunk_id in chunk_ids]  # type: ignore[arg-type]


def make_server(port: int, review: Review, reviewer: str, folder: Path) -> ThreadingHTTPServer:
    """A server on 127.0.0.1:`port` (0: a free one) serving the page over `review` for `reviewer`;
    a port in use is an InputError."""
    sample_qids = set(review.qids)
    page = PAGE.encode("utf-8")

    class Handler(BaseHTTPRequestHandler):
        def _foreign(self) -> str | None:
            """Why a request did not come from this page on this machine, or None: a Host other than
            this server's (a page elsewhere reaching it by DNS rebinding) or another page's Origin."""
            port = self.server.server_address[1]  # type: ignore[index]  # an (host, port) pair: AF_INET
            ours = {f"{HOST}:{port}", f"localhost:{port}"}
            if self.headers.get("Host") not in ours:
                return f"host {self.headers.get('Host')!r}: this server answers {HOST} only"
            origin = self.headers.get("Origin")
            if origin is not None and origin.removeprefix("http://") not in ours:
                return f"origin {origin!r}: only this server's own page may send clicks"
            return None

        def do_GET(self) -> None:  # noqa: N802 (http.server's name)
            if (why := self._foreign()) is not None:
                self._json(403, {"error": why})
                return
            if self.path in ("/", "/index.html"):
                self._send(200, page, "text/html; charset=utf-8")
            elif self.path == "/state":  # the file as it is now: a reloaded page resumes where it stopped
                try:
                    # a teammate's click on a question a regenerated golden set lacks: left out, as the pipeline does
                    reviews = read_reviews(folder, review.golden_qids, drop_unknown=True)
                    state = page_state(review, reviews, reviewer, folder)
                except InputError as error:
                    self._json(500, {"error": str(error)})
                    return
                self._json(200, state)
            elif self.path == "/favicon.ico":  # the browser asks on every load: no icon, and no console error
                self.send_response(204)
                self.end_headers()
            else:
                self._json(404, {"error": f"no page {self.path}"})

        def do_POST(self) -> None:  # noqa: N802
            if (why := self._foreign()) is not None:
                self._json(403, {"error": why})
                return
            if self.path != "/click":
                self._json(404, {"error": f"no page {self.path}"})
                return
            if self.headers.get("Content-Type", "").split(";")[0].strip() != "application/json":
                # a cross-site form or text/plain post skips the browser's CORS check; JSON does not
                self._json(415, {"error": "a click is sent as application/json"})
                return
            try:
                length = int(self.headers.get("Content-Length") or 0)
                if not 0 < length <= MAX_BODY:
                    raise InputError(f"a click of {length} bytes: expected 1 to {MAX_BODY}")
                clicks = clicks_of(json.loads(self.rfile.read(length)), reviewer)
                check_shown(clicks, review)
                append_clicks(folder, clicks, sample_qids, "review sample")  # each checked: mark, grade 0-3, qid
            except (InputError, ValueError) as error:  # ValueError: bad JSON, UTF-8 or Content-Length
                self._json(400, {"error": str(error)})
                return
            except OSError as error:  # a full disk, a read-only folder: nothing of the click is kept
                said = describe_os_error(error)
                print(f"review: a click was not saved: {said}", file=sys.stderr, flush=True)
                self._json(507 if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG) else 500, {"error": said})
                return
            except RecursionError:  # "[[[[..." deeper than the JSON parser goes: no click is that deep
                self._json(400, {"error": "a click nested deeper than Python's JSON parser reads"})
                return
            self._json(200, {"saved": len(clicks)})

        def log_message(self, format: str, *args: Any) -> None:  # one line per request would drown the console
            return

        def _json(self, status: int, data: Any) -> None:
            self._send(status, json.dumps(data, ensure_ascii=False).encode("utf-8"), "application/json")

        def _send(self, status: int, body: bytes, kind: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

    try:
        return ThreadingHTTPServer((HOST, port), Handler)
    except OSError as error:
        if error.errno == errno.EADDRINUSE:
            raise InputError(
                f"port {port} on {HOST} is in use: pass --port with another (0 picks a free one)"
            ) from None
        raise InputError(f"cannot serve on {HOST}:{port}: {error.strerror}") from None
