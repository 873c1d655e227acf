"""Which hosts may receive a key from the user's environment: the one rule for LLM providers and
vector stores alike.

A key (OPENAI_API_KEY, QDRANT_API_KEY, ...) comes from the environment of whoever runs the pipeline;
the URL it would be sent to may come from params.yaml, which anyone who can open a pull request can
change. So a key is sent only to a host that cannot leave the machine (localhost, 127.0.0.0/8, ::1)
or to an endpoint the same user named outside git: an environment variable, or a line of the
user's config file ($XDG_CONFIG_HOME/retrieval-bench/endpoints, default
~/.config/retrieval-bench/endpoints: one URL per line, # comments), compared by scheme, host and port.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port defaulted by scheme: what two URLs must share."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: an origin nothing can equal
        return scheme, "", -1
    return scheme, (parts.hostname or "").lower().rstrip("."), port or {"http": 80, "https": 443}.get(scheme)


def is_loopback(host: str) -> bool:
    host = host.lower().rstrip(".").strip("[]")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def config_path(env: Mapping[str, str]) -> Path:
    base = env.get("XDG_CONFIG_HOME") or str(Path(env.get("HOME") or Path.home()) / ".config")
    return Path(base) / "retrieval-bench" / "endpoints"


def user_endpoints(env: Mapping[str, str]) -> list[str]:
    """The URLs listed in the user's config file (none when it is missing or unreadable)."""
    try:
        lines = config_path(env).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return []
    return [line.split("#", 1)[0].strip() for line in lines if line.split("#", 1)[0].strip()]


def is_vouched(url: str, user_urls: Iterable[str]) -> bool:
    """Whether a key may go to `url`: a loopback host, or the origin of a URL the user chose."""
    scheme, host, port = origin(url)
    if is_loopback(host):
        return True
    return any(origin(allowed) == (scheme, host, port) for allowed in user_urls if allowed)
