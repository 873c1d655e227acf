"""The HTTP client under every SDK: <section>.timeout_s for the whole of each request and a short
connect timeout, the shared rate-limit pause, a
guard that stops a run naming the endpoint once it refuses (or cannot be resolved or reached
within CONNECT_TIMEOUT_S) a few connection attempts in a row, and no redirects: the SDKs follow
them (to any host, port or scheme), which would send the prompt, passages included, to a host the
user never named; a 3xx with a Location stops the run in one line naming where it pointed, and so
does a success that is not an API reply (a proxy's HTML page), naming the URL and content-type.

httpx's timeouts are per read, so a server trickling a byte a second (one long body, an endless
event stream) never trips them: each request runs under a deadline of <section>.timeout_s from its
first byte sent to its last byte read (the shared pause before it not counted). A streamed body
(batch results, read at the pace of the cache's writes) counts only the time spent waiting on the
network against what is left of it.

A request to a loopback server that runs past <section>.timeout_s fails at once (RequestTimedOut),
without the SDK's retries: a local server decodes one request at a time and keeps computing the
abandoned one, so each retry would queue behind it. Other endpoints keep the SDK's back-off."""

from __future__ import annotations

import asyncio
import functools
import json
import time
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any

from retrieval_bench.core.endpoints import is_loopback, origin
from retrieval_bench.llm.transport.credentials import Endpoint
from retrieval_bench.llm.transport.errors import EndpointUnreachable, origin_of, os_reason

if TYPE_CHECKING:
    from retrieval_bench.llm.transport.ratelimit import SharedPause

CONNECT_TIMEOUT_S = 3.0
# An endpoint is deemed unreachable after this many failed connection attempts in a row spanning
# at least this many seconds (so a momentary blip under high concurrency does not stop a run).
CONNECT_FAILURES = 3
CONNECT_FAILURE_SPAN_S = 1.0


class RequestTimedOut(Exception):
    """Mixed into an SDK error type (so the SDK neither wraps nor retries it): a request to a
    loopback server ran past <section>.timeout_s; the message names the endpoint and the key."""


_MIXED_TYPES: dict[tuple[type, type], type] = {}


def _sdk_error(marker: type, sdk_error: type, message: str) -> Exception:
    """`marker` mixed into the SDK's base error type: the SDK passes such an error through as it is."""
    cls = _MIXED_TYPES.get((marker, sdk_error))
    if cls is None:
        cls = _MIXED_TYPES[(marker, sdk_error)] = type(f"{marker.__name__}Error", (marker, sdk_error), {})
    return cls(message)


def _unreachable_error(sdk_error: type, message: str) -> Exception:
    return _sdk_error(EndpointUnreachable, sdk_error, message)


def timed_out(error: BaseException) -> bool:
    """Whether a failed request ran past its timeout (on a loopback server, or after the SDK's retries)."""
    return isinstance(error, RequestTimedOut) or type(error).__name__ == "APITimeoutError"


def loopback_endpoint(endpoint: Endpoint) -> bool:
    """Whether requests go to this machine (a local model server)."""
    return endpoint.url is not None and is_loopback(origin(endpoint.url)[1])


class ConnectionGuard:
    """Failed connection attempts to one endpoint (refused, unresolvable, no answer within
    CONNECT_TIMEOUT_S). After CONNECT_FAILURES in a row spanning at least CONNECT_FAILURE_SPAN_S
    the endpoint is deemed unreachable: every request then fails at once with one message naming
    it, instead of each one retrying with backoff (which took ~47 s before stopping)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.failures = 0
        self.first_failure = 0.0
        self.unreachable: str | None = None

    def failed(self, request: Any, error: BaseException) -> None:
        now = time.monotonic()
        if self.failures == 0:
            self.first_failure = now
        self.failures += 1
        if self.failures >= CONNECT_FAILURES and now - self.first_failure >= CONNECT_FAILURE_SPAN_S:
            where = origin_of(getattr(request, "url", None)) if request is not None else self.endpoint.shown
            reason = (
                "no answer within the connect timeout"
                if "timeout" in type(error).__name__.lower()
                else os_reason(error)
            )
            self.unreachable = (
                f"cannot connect to {where} ({reason}; {self.failures} attempts in "
                f"{now - self.first_failure:.1f}s); the endpoint comes from {self.endpoint.source}: "
                "check that the server is running and the URL is right"
            )

    def succeeded(self) -> None:
        self.failures = 0

    def redirected(self, request: Any, response: Any) -> str:
        """The line a redirect stops the run with: where it came from and where it pointed."""
        target = request.url.join(response.headers["location"])
        return (
            f"{origin_of(request.url)} answered HTTP {response.status_code} redirecting to {origin_of(target)}, "
            "which is not followed (the request, passages included, would go to a host you did not name); "
            f"the endpoint comes from {self.endpoint.source}: set it to the URL that answers without a redirect"
        )


def not_an_api_reply(request: Any, response: Any, endpoint: Endpoint) -> str | None:
    """The line a read success that is no API reply stops the run with (a proxy's or login page
    answering 200 in text/html), naming the URL and content-type; None for JSON, or a body that
    parses as JSON whatever its content-type. A malformed JSON reply is the SDK's to report (and is
    asked again): its content-type says JSON."""
    kind = response.headers.get("content-type", "")
    if not response.is_success or response.status_code == 204 or "json" in kind.lower():
        return None
    try:
        json.loads(response.content)
        return None
    except ValueError:
        pass
    what = "an HTML page" if "html" in kind.lower() else "a body that is not JSON"
    return (
        f"{origin_of(request.url)}{request.url.path} answered HTTP {response.status_code} with {what} "
        f"(content-type {kind or 'none'}) instead of an API reply, as a proxy's or login page does; "
        f"the endpoint comes from {endpoint.source}: point it at the API itself"
    )


@functools.cache
def _deadline_stream_type() -> type:
    """DeadlineStream, an httpx2.AsyncByteStream (httpx2 is imported when the first client is made)."""
    import httpx2

    class DeadlineStream(httpx2.AsyncByteStream):
        """A streamed body read within `budget_s` more seconds of waiting on the network: the time
        the reader spends between chunks is its own (batch results are read at the pace of the
        cache's writes), a trickling server's is not."""

        def __init__(self, stream: Any, budget_s: float, expired: Callable[[], Exception]) -> None:
            self.stream, self.budget_s, self.expired = stream, budget_s, expired

        async def __aiter__(self) -> AsyncIterator[bytes]:
            chunks = self.stream.__aiter__()
            while True:
                started = time.monotonic()
                try:
                    async with asyncio.timeout(max(self.budget_s, 0.0)):
                        chunk = await chunks.__anext__()
                except StopAsyncIteration:
                    return
                except TimeoutError:
                    raise self.expired() from None
                self.budget_s -= time.monotonic() - started
                yield chunk

        async def aclose(self) -> None:
            await self.stream.aclose()

    return DeadlineStream


def guarded_http_client(
    sdk: Any,
    sdk_error: type,
    pause: SharedPause,
    guard: ConnectionGuard,
    timeout_s: float,
    section: str,
    **kwargs: Any,
) -> Any:
    """The SDK's default async HTTP client: `pause` (ratelimit.SharedPause) waited for before each
    request and fed each response, `timeout_s` (`section`.timeout_s) as a deadline on the whole
    request and a short connect timeout, `guard` watching connection failures, a redirect or a
    success that is no API reply stopping the run, and a loopback server's timeout not retried."""
    import httpx2

    loopback = loopback_endpoint(guard.endpoint)

    def expired(request: Any) -> Exception:
        """What a request past its deadline raises: on a loopback server an error the SDK does not
        retry, elsewhere an httpx timeout, which the SDK retries with back-off."""
        line = f"no complete reply from {origin_of(request.url)} within {section}.timeout_s {timeout_s:g}s"
        if not loopback:
            return httpx2.ReadTimeout(line, request=request)
        return _sdk_error(
            RequestTimedOut, sdk_error, f"{line} (not retried: a local server keeps computing an abandoned request)"
        )

    class GuardedHttpClient(sdk.DefaultAsyncHttpxClient):
        async def send(self, request: Any, *, stream: bool = False, **options: Any) -> Any:
            if guard.unreachable:
                raise _unreachable_error(sdk_error, guard.unreachable)
            await pause.wait()  # before the deadline starts: a pause is not the server's time
            started = time.monotonic()
            try:
                async with asyncio.timeout(timeout_s):
                    response = await super().send(request, stream=stream, **{**options, "follow_redirects": False})
            except (httpx2.ConnectError, httpx2.ConnectTimeout) as error:
                guard.failed(request, error)
                if guard.unreachable:
                    raise _unreachable_error(sdk_error, guard.unreachable) from None
                raise
            except (httpx2.TimeoutException, TimeoutError):
                raise expired(request) from None
            guard.succeeded()
            if response.has_redirect_location:
                await response.aclose()
                raise _unreachable_error(sdk_error, guard.redirected(request, response))
            if stream:
                left = timeout_s - (time.monotonic() - started)
                response.stream = _deadline_stream_type()(response.stream, left, lambda: expired(request))
            elif line := not_an_api_reply(request, response, guard.endpoint):
                raise _unreachable_error(sdk_error, line)
            return response

    return GuardedHttpClient(
        event_hooks={"response": [pause.after_response]},
        timeout=httpx2.Timeout(timeout_s, connect=CONNECT_TIMEOUT_S),
        follow_redirects=False,
        **kwargs,
    )
