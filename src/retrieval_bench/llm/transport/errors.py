"""What a failed request means: a spend limit (stop, keep progress), a refused request (stop), or
a passing fault (count it, go on); EndpointUnreachable (what connection.py raises when an endpoint
cannot be used) and the words naming a failed connection; and StopGeneration, the clean stop that
ends a run in one line."""

from __future__ import annotations

import os
import re
import socket
import ssl
from typing import Any

from retrieval_bench.core.errors import InputError

SPEND_LIMIT_CODES = {
    "enforced_spend_limit_reached",
    "contract_spend_limit_reached",
    "linked_organization_spend_limit_reached",
    "linked_organization_billing_unavailable",
    "insufficient_quota",
    "billing_hard_limit_reached",
}
_SPEND_LIMIT_TEXT = re.compile(
    r"credit balance|spend(?:ing)? limit|usage limits?\b|insufficient[_ ]quota|exceeded your current quota|billing",
    re.IGNORECASE,
)


class EndpointUnreachable(Exception):
    """Mixed into an SDK error type (so the SDK neither wraps nor retries it): the endpoint cannot
    be used, as it refused or dropped connection.CONNECT_FAILURES connection attempts in a row, answered with
    a redirect (not followed), or answered a success with something other than an API reply (an
    HTML page); the message names it."""


def os_reason(error: BaseException) -> str:
    """The operating system's words for a failed connection ("Connection refused"), if any."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ssl.SSLError):  # errno is OpenSSL's code: os.strerror(1) said "Operation not permitted"
            reason = current.reason or current.strerror or type(current).__name__
            # what https to a plain http server gives: OpenSSL 3.0-3.1, then 3.2 on
            plain = reason in ("WRONG_VERSION_NUMBER", "RECORD_LAYER_FAILURE")
            return f"TLS failed ({reason})" + (": a plain http server? Its URL starts with http://" if plain else "")
        if isinstance(current, OSError) and (current.errno or current.strerror):
            # A DNS failure's errno is getaddrinfo's code (-2, "Unknown error -2" to os.strerror): its own words
            # then; asyncio's refusals carry "Connect call failed (...)" as theirs, the errno says it plainly.
            if current.errno and current.errno > 0 and not isinstance(current, socket.gaierror):
                return os.strerror(current.errno)
            return str(current.strerror) if current.strerror else os.strerror(current.errno or 0)
        current = current.__cause__ or current.__context__
    return str(error) or type(error).__name__


def origin_of(url: Any) -> str:
    try:
        scheme, host, port = url.scheme, url.host, url.port
    except AttributeError:
        return str(url)
    host = f"[{host}]" if ":" in host else host  # an IPv6 address, bracketed as in the URL
    return f"{scheme}://{host}" + (f":{port}" if port else "")


class StopGeneration(InputError):
    """A clean stop: progress is kept in the cache, the stage exits non-zero with one line."""


def error_body_fields(body: object) -> tuple[str | None, str]:
    """(error code, message) from an Anthropic- or OpenAI-shaped error body, or a FastAPI one
    (`{"detail": "..."}` or a list of validation errors: transformers serve, vLLM)."""
    if not isinstance(body, dict):
        return None, ""
    if "error" not in body and "detail" in body:
        detail = body["detail"]
        if isinstance(detail, list):
            detail = "; ".join(str(item.get("msg", item)) if isinstance(item, dict) else str(item) for item in detail)
        return None, str(detail)
    error = body.get("error", body)
    if not isinstance(error, dict):
        return None, str(error)
    details = error.get("details")
    if not isinstance(details, dict):
        details = {}
    code = (
        details.get("error_code")
        or error.get("code")
        or (error.get("type") if error.get("type") in SPEND_LIMIT_CODES else None)
    )
    return (code if isinstance(code, str) else None), str(error.get("message") or "")


def is_spend_limit(status: int, body: object) -> bool:
    if status == 402:
        return True
    if status not in (400, 403, 429):
        return False
    code, message = error_body_fields(body)
    return code in SPEND_LIMIT_CODES or bool(_SPEND_LIMIT_TEXT.search(message))


def classify_error(
    error: BaseException,
    status_error: type | None = None,
    connection_error: type | None = None,
    section: str = "generate",
) -> tuple[str, str]:
    """('spend_limit' | 'fatal' | 'transient', a one-line description without secrets), for an
    error raised through an SDK whose HTTP status and connection errors are the given types;
    `section` is the params.yaml section a wrong model is set in."""
    if isinstance(error, EndpointUnreachable):
        return "fatal", str(error)
    status = getattr(error, "status_code", None)
    if status_error is not None and isinstance(error, status_error) and status is not None:
        code, message = error_body_fields(getattr(error, "body", None))
        message = message or str(getattr(error, "message", "")) or type(error).__name__
        message = " ".join(message.split())[:300]
        if (
            is_spend_limit(status, getattr(error, "body", None))
            or getattr(error, "error_code", None) in SPEND_LIMIT_CODES
        ):
            return "spend_limit", f"HTTP {status}: {message}"
        if status in (401, 403):
            return (
                "fatal",
                f"HTTP {status} authentication/permission error: {message} (check the API key in the environment)",
            )
        request = getattr(error, "request", None)
        server = f" from {origin_of(request.url)}" if request is not None else ""
        if status == 404:
            return "fatal", f"HTTP 404{server}: {message} (check {section}.model and the base URL)"
        if status in (400, 413, 422):
            return "fatal", f"HTTP {status}{server}: {message} (check {section}.model and the request settings)"
        return "transient", f"HTTP {status}: {message}"
    if connection_error is not None and isinstance(error, connection_error):
        request = getattr(error, "request", None)
        where = origin_of(request.url) if request is not None else "the endpoint"
        if "timeout" not in type(error).__name__.lower():
            what = f"failed ({os_reason(error.__cause__ or error)})"
        elif type(error.__cause__).__name__ == "ConnectTimeout":
            what = "timed out connecting"
        else:  # the deadline of connection.guarded_http_client, after the SDK's retries
            what = f"gave no complete reply within {section}.timeout_s"
        return "transient", f"{type(error).__name__}: the connection to {where} {what}"
    return "transient", f"{type(error).__name__}: {str(error)[:200]}"
