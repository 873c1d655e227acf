"""One pause for all workers: after a 429, 529 or 503 every request of the client waits as long as
the API asked, instead of each worker retrying into the limit; and no server-asked wait longer than
<section>.timeout_s, whatever its retry-after says (100000, inf, an HTTP date next year)."""

from __future__ import annotations

import asyncio
import json
import math
import time
from collections import Counter
from collections.abc import Callable
from datetime import timezone
from email.utils import parsedate_to_datetime
from typing import Any

from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.llm.transport.errors import is_spend_limit


def retry_after_seconds(headers: Any) -> float | None:
    """The wait a response asks for, in seconds (retry-after-ms, else retry-after as seconds or an
    HTTP date; inf if it says so), or None if it asks for none readable."""
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        seconds: float | None
        try:
            seconds = float(value) / scale
        except ValueError:
            seconds = _until_http_date(value) if name == "retry-after" else None
        if seconds is not None and not math.isnan(seconds):
            return max(0.0, seconds)
    return None


def _until_http_date(value: str) -> float | None:
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    return when.timestamp() - time.time()


class SharedPause:
    """The shared wait (`wait`, before each request is sent) and the response hook that sets it.

    After a 429 (rate limit), 529 (overloaded) or 503, every request waits until the time the
    API asked for (retry-after-ms / retry-after, else DEFAULT_PAUSE seconds) before it is sent,
    so the workers back off together instead of each retrying into the limit. Any wait a response
    asks for is capped at `max_pause_s` (`cap_key`, the section's timeout_s) and the response's
    headers rewritten to say so, as the SDKs honour retry-after themselves (Anthropic's for up to
    49 days): the first capped wait is said in one line, every one is counted in the summary. A
    spend-limit or out-of-credit reply is marked not retryable (x-should-retry: false) so that no
    retry is wasted on it."""

    DEFAULT_PAUSE = 1.0

    def __init__(
        self,
        on_pause: Callable[[str], None] | None = None,
        max_pause_s: float = DEFAULTS["generate"]["timeout_s"],
        cap_key: str = "generate.timeout_s",
    ) -> None:
        self.until = 0.0
        self.pauses: Counter[int] = Counter()
        self.paused_s = 0.0
        self.capped = 0  # server-asked waits cut to max_pause_s
        self.spend_limited = False
        self.max_pause_s = max_pause_s
        self.cap_key = cap_key
        self._on_pause = on_pause

    async def wait(self) -> None:
        while True:
            delay = self.until - time.monotonic()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    def _capped(self, asked: float, status: int) -> float:
        if asked <= self.max_pause_s:
            return asked
        self.capped += 1
        if self.capped == 1 and self._on_pause:
            self._on_pause(
                f"HTTP {status} asked to wait {asked:g}s (retry-after); waiting {self.max_pause_s:g}s instead, "
                f"the most {self.cap_key} allows (every such wait is capped and counted in the closing summary)"
            )
        return self.max_pause_s

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
        asked = retry_after_seconds(response.headers)
        wait = None if asked is None else self._capped(asked, status)
        if wait is not None:  # what the SDK's own retry reads: the wait as capped
            response.headers["retry-after-ms"] = f"{wait * 1000:.0f}"
            if "retry-after" in response.headers:
                del response.headers["retry-after"]
        if status in (429, 503, 529):
            wait = self.DEFAULT_PAUSE if wait is None else wait
            now = time.monotonic()
            self.pauses[status] += 1
            if now + wait > self.until:
                self.paused_s += now + wait - max(self.until, now)
                self.until = now + wait
                if self._on_pause and wait >= 1.0:
                    self._on_pause(f"HTTP {status}: pausing all requests for {wait:.1f}s")

    def summary(self) -> str | None:
        if not (self.pauses or self.capped):
            return None
        names = {429: "rate limited (429)", 529: "overloaded (529)", 503: "unavailable (503)"}
        parts = []
        if self.pauses:
            what = ", ".join(f"{n}x {names.get(s, s)}" for s, n in sorted(self.pauses.items()))
            parts.append(f"the API answered {what}; all requests paused {self.paused_s:.1f}s in total")
        if self.capped:
            parts.append(f"{self.capped} server-asked waits capped at {self.cap_key} {self.max_pause_s:g}s")
        return "; ".join(parts)

    def report(self) -> None:
        """The summary, if any, written where the pauses were said (the run's closing lines)."""
        summary = self.summary()
        if summary and self._on_pause:
            self._on_pause(summary)
