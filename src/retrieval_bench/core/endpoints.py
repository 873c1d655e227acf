"""Which hosts may receive a key from the user's environment: the one rule for LLM providers,
vector stores and Ray clusters alike.

A key (OPENAI_API_KEY, QDRANT_API_KEY, a Ray token, ...) comes from the environment of whoever runs
the pipeline; the URL it would be sent to may come from params.yaml, which anyone who can open a
pull request can change. So a key is sent only to a host that cannot leave the machine (`localhost`
itself, 127.0.0.0/8, ::1; not `*.localhost` nor `localhost.`, which a resolver may send to DNS:
glibc reads /etc/hosts for `localhost` only, without the trailing dot) or to an endpoint
the same user named outside git: an environment variable, or a line of the user's config file
($XDG_CONFIG_HOME/retrieval-bench/endpoints, default ~/.config/retrieval-bench/endpoints: one URL
per line, # comments), compared by scheme, host and port (a Ray cluster as tcp://host:port).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping
from pathlib import Path
from urllib.parse import urlsplit

from retrieval_bench.core.errors import InputError

RAY_ADDRESS_ENV = "RETRIEVAL_BENCH_RAY_ADDRESS"  # the Ray cluster (host:port) the user vouches for outside git


def http_url_problem(url: str) -> str | None:
    """Why `url` is not the http(s) URL of a server (no scheme, no host, a port out of range,
    spaces around it), or None: said in one line before any request, not as a connection error
    after minutes of retries."""
    if url != url.strip():
        return "has spaces or a line break at its start or end"
    try:
        parts = urlsplit(url)
    except ValueError as error:  # an IPv6 host with its bracket unclosed, or not an address
        return f"is not a URL ({error})"
    if parts.scheme.lower() not in ("http", "https"):
        return "must start with http:// or https://"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "has a port that is not a number from 1 to 65535"
    if not parts.hostname:
        return "names no host"
    return None


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port defaulted by scheme: what two URLs must share."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: an origin nothing can equal
        return scheme, "", -1
    # The host as written (lower case): `localhost.` is another name than `localhost` (is_loopback).
    return scheme, (parts.hostname or "").lower(), port or {"http": 80, "https": 443}.get(scheme)


def is_loopback(host: str) -> bool:
    """Whether `host` names this machine whatever resolves names: exactly `localhost` (any case) or
    a loopback IP literal. Not `localhost.` or `localhost..`: glibc resolves those through DNS."""
    host = host.lower().strip("[]")
    if host == "localhost":
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


def may_receive_key(url: str, vouched: Iterable[str], official_hosts: Iterable[str] = ()) -> bool:
    """The one rule: whether a key from the environment may go to `url` (an http(s) URL, or a Ray
    cluster as tcp://host:port): its host is loopback, or one of `official_hosts` over https (an
    API's own host: api.openai.com for OPENAI_API_KEY), or its origin (scheme, host, port) is that
    of a URL the user named outside git (`vouched`: an environment variable, the config file)."""
    scheme, host, port = origin(url)
    if is_loopback(host) or (scheme == "https" and host in set(official_hosts)):
        return True
    return any(origin(allowed) == (scheme, host, port) for allowed in vouched if allowed)


def ray_url(address: str) -> str:
    """A Ray address (host:port, or tcp://host:port in the config file) as the URL the rule reads."""
    return "tcp://" + address.strip().removeprefix("tcp://").rstrip("/")


def check_ray_address(address: str, env: Mapping[str, str]) -> None:
    """A Ray cluster named by embed.ray.address (host:port) receives the corpus, the model and any Ray
    token, and the driver unpickles what it returns: it must be on a loopback host or be the one the
    user named outside git (RETRIEVAL_BENCH_RAY_ADDRESS, RAY_ADDRESS, or tcp://host:port in the
    endpoints file), else one InputError. `auto` reads RAY_ADDRESS, the user's own choice."""
    if address == "auto":  # (params.yaml's `local` is read as null: no address)
        return
    named = [env.get(RAY_ADDRESS_ENV, ""), env.get("RAY_ADDRESS", ""), *user_endpoints(env)]
    if may_receive_key(ray_url(address), [ray_url(url) for url in named if url.strip()]):
        return
    raise InputError(
        f"embed.ray.address {address!r}: the Ray cluster there would receive your corpus, the model and any Ray "
        "token, and anyone who can change params.yaml could otherwise point it at their own; to allow it, export "
        f"{RAY_ADDRESS_ENV}={address} (or add tcp://{address} to {config_path(env)}), or set RAY_ADDRESS and use address auto"
    )
