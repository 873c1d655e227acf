"""One pause for all workers: after a 429, 529 or 503 every request of the client waits as long as
the API asked, instead of each worker retrying into the limit."""

from __future__ import annotations

import asyncio
import json
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

from retrieval_bench.llm.errors import is_spend_limit


def _retry_after_seconds(headers: Any) -> float | None:
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is not None:
            try:
                return max(0.0, float(value) / scale)
            except ValueError:
                continue
    return None


class SharedPause:
    """httpx event hooks shared by every request of one client.

    After a 429 (rate limit), 529 (overloaded) or 503, every request waits until the time the
    API asked for (retry-after-ms / retry-after, else DEFAULT_PAUSE seconds) before it is sent,
    so the workers back off together instead of each retrying into the limit. The SDK's own
    retry of the failed request honours the same header. A spend-limit or out-of-credit reply is
    marked not retryable (x-should-retry: false) so that no retry is wasted on it."""

    DEFAULT_PAUSE = 1.0

    def __init__(self, on_pause: Callable[[str], None] | None = None) -> None:
        self.until = 0.0
        self.pauses: Counter[int] = Counter()
        self.paused_s = 0.0
        self.spend_limited = False
        self._on_pause = on_pause

    async def before_request(self, request: Any) -> None:
        while True:
            delay = self.until - time.monotonic()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    async def after_response(self, response: Any) -> None:
        status = response.status_code
        if status in (400, 402, 403, 429):
            await response.aread()
            try:
                body = json.loads(response.content or b"null")
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            if is_spend_limit(status, body):
                self.spend_limited = True
                response.headers["x-should-retry"] = "false"
                return
        if status in (429, 503, 529):
            wait = _retry_after_seconds(response.headers)
            wait = self.DEFAULT_PAUSE if wait is None else wait
            now = time.monotonic()
            self.pauses[status] += 1
            if now + wait > self.until:
                self.paused_s += now + wait - max(self.until, now)
                self.until = now + wait
                if self._on_pause and wait >= 1.0:
                    self._on_pause(f"HTTP {status}: pausing all requests for {wait:.1f}s")

    def hooks(self) -> dict[str, list]:
        return {"request": [self.before_request], "response": [self.after_response]}

    def summary(self) -> str | None:
        if not self.pauses:
            return None
        names = {429: "rate limited (429)", 529: "overloaded (529)", 503: "unavailable (503)"}
        what = ", ".join(f"{n}x {names.get(s, s)}" for s, n in sorted(self.pauses.items()))
        return f"the API answered {what}; all requests paused {self.paused_s:.1f}s in total"
