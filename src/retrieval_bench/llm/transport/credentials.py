"""Credentials follow the user, not the repository.

An API key comes from the environment of whoever runs the pipeline (a developer, a CI job);
`generate.base_url` comes from params.yaml, which anyone who can open a pull request can change.
So a key is sent only to an endpoint that the same user chose outside git, or that cannot leave
the machine:

- a loopback host (localhost, 127.0.0.0/8, ::1): vLLM, Ollama or llama.cpp on this machine;
- the provider's own API host over https (Provider.official_hosts: api.openai.com for OPENAI_API_KEY);
- the URL in the user's own environment (Provider.url_env: OPENAI_BASE_URL), or one listed in the
  user's config file (retrieval_bench.core.endpoints, the rule shared with the vector stores' keys).

A `generate.base_url` pointing anywhere else while a key is set is refused with one line saying
why and how to allow it. Without a key nothing secret is sent (a placeholder), so any URL is
allowed. A provider that does not take a base_url (Anthropic's) goes only where its url_env points.

A reply that holds the key (a server echoing it) is never stored: the question cache is pushed
to a shared remote (key_leak, checked by the runners before anything is written).

A server may echo the key back in an error body (a 401 quoting the Authorization header, a proxy's
500 dumping the request): every message the LLM layer makes of an error or prints goes through
mask_keys, which hides every key read here, whole or in part.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from retrieval_bench.core.endpoints import config_path, http_url_problem, may_receive_key, user_endpoints
from retrieval_bench.core.errors import InputError, quoted

PLACEHOLDER_KEY = "not-needed"
MASK = "[key hidden]"
# A word sharing this many characters in a row with a key is taken for a partial echo of it
# ("sk-proj-****abcd"): fewer would hide ordinary words of short test keys.
ECHO_MIN_CHARS = 8
STORED_ECHO_MIN_CHARS = 16  # a stored reply holding this much of a key in a row (and half of it) is not stored
MIN_GUARDED_KEY_CHARS = 8  # shorter "keys" ("EMPTY", "x" for a local server) are placeholders, not secrets
_KEYS_READ: set[str] = set()  # every key of MIN_GUARDED_KEY_CHARS or more endpoint_for handed out in this process
# a labelled value not already masked (the key's own text is replaced first: "Bearer [key hidden]")
_LABELLED = re.compile(
    r"(?i)\b((?:authorization|x-api-key|api[-_]key)[\s\"']*[:=][\s\"']*(?!(?:bearer\s+)?"
    + re.escape(MASK)
    + r")(?:bearer\s+)?)[^\s\"',;}]+"
)
_WORD = re.compile(r"[^\s\"'`,;:()\[\]{}<>=\\]+")


def mask_keys(text: str) -> str:
    """`text` with every key read by endpoint_for, and any value labelled Authorization, x-api-key
    or api_key, replaced by MASK; so is any word sharing ECHO_MIN_CHARS characters in a row with a
    key (a partial or starred echo)."""
    for key in sorted(_KEYS_READ, key=len, reverse=True):
        text = text.replace(key, MASK)
    text = _LABELLED.sub(lambda m: m.group(1) + MASK, text)
    pieces = {k[i : i + ECHO_MIN_CHARS] for k in _KEYS_READ for i in range(len(k) - ECHO_MIN_CHARS + 1)}
    if not pieces:
        return text

    def hide(match: re.Match[str]) -> str:
        word = match.group()
        echoed = any(word[i : i + ECHO_MIN_CHARS] in pieces for i in range(len(word) - ECHO_MIN_CHARS + 1))
        return MASK if echoed else word

    return _WORD.sub(hide, text)


class KeyedAPI(Protocol):
    """What the credentials read of a provider (llm.providers.base.Provider, which imports this module)."""

    name: str
    key_env: str
    url_env: str
    default_url: str
    official_hosts: frozenset[str]
    takes_base_url: bool


@dataclass(frozen=True)
class Endpoint:
    url: str | None  # None: the SDK's default (or its own environment variable)
    key: str
    shown: str  # the URL as named in messages
    source: str  # where the URL came from, for messages


def free_routes(section: str) -> str:
    """The ways on without a paid key, for the line that stops a run for the lack of one."""
    local = (
        f"a model server on this machine ({section}.provider openai-compatible with {section}.base_url "
        "http://localhost:11434/v1 for Ollama, http://localhost:8000/v1 for vLLM, http://localhost:8080/v1 for llama.cpp)"
    )
    if section != "generate":
        return f"{local}, or {section}.provider none"
    return (
        f"{local}, or your own questions for your documents: generate.provider none and the questions in "
        "generate.handwritten (see docs/how-to/your-corpus.md)"
    )


def _checked_key(key: str, name: str) -> str:
    """The key in `name`, or one InputError saying what is wrong with it (never the key itself): no
    HTTP header can carry a line break or a non-ASCII character, and the SDKs, failing to send it,
    retried as if the connection had dropped, for minutes, before blaming the connection."""
    if not key:
        return key
    if not key.strip():
        why = "is blank: unset it (a local server needs no key) or set the key"
    elif key != key.strip():
        why = "has spaces or a line break at its start or end (read from a file with its newline?)"
    elif (odd := next((i for i, c in enumerate(key) if c == " " or not (c.isascii() and c.isprintable())), -1)) >= 0:
        why = f"holds a character no key has at position {odd + 1} (a space, a control character or a non-ASCII one)"
    else:
        return key
    raise InputError(f"{name} {why}; nothing was sent")


def env_base_url(provider: KeyedAPI, env: Mapping[str, str]) -> str | None:
    """The provider's URL from the user's environment (its url_env, e.g. OPENAI_BASE_URL), checked
    as params.yaml's base_url is: read by the price (a local server is free) and by endpoint_for,
    so a URL with a space or no scheme is one line before either (it was priced free, then
    failed as a connection error after minutes)."""
    url = env.get(provider.url_env) or None
    if url and (problem := http_url_problem(url)):
        raise InputError(f"{provider.url_env} must be the http(s) URL of the server; it {problem}: got {quoted(url)}")
    return url


def chosen_url(
    provider: KeyedAPI, params_base_url: str | None, env: Mapping[str, str], section: str = "generate"
) -> tuple[str | None, str]:
    """The URL `provider` sends to (None: its default) and where it came from, in the one order the
    request and its price both follow: <section>.base_url where the provider takes one, else its
    url_env, else its default."""
    params_base_url = params_base_url if provider.takes_base_url else None
    if params_base_url:
        return params_base_url, f"{section}.base_url in params.yaml"
    env_url = env_base_url(provider, env)
    return (env_url, provider.url_env) if env_url else (None, f"the {provider.name} default")


def endpoint_for(
    provider: KeyedAPI, params_base_url: str | None, env: Mapping[str, str] | None = None, section: str = "generate"
) -> Endpoint:
    """Where `provider` sends its requests, and with which key: <section>.base_url where the
    provider takes one, else its url_env, else its default. Refuses a params.yaml base_url the
    user did not vouch for while the provider's key is set, and a run without the key it needs."""
    env = os.environ if env is None else env
    key = _checked_key(env.get(provider.key_env) or "", provider.key_env)
    env_url = env_base_url(provider, env)  # checked whichever URL is chosen: vouches for a base_url below
    params_base_url = params_base_url if provider.takes_base_url else None
    url, source = chosen_url(provider, params_base_url, env, section)
    if not key and not params_base_url:
        needs = (
            f"{section}.base_url or, for {provider.default_url} itself, {provider.key_env}"
            if provider.takes_base_url
            else f"{provider.key_env} in the environment"
        )
        raise InputError(f"{section}.provider {provider.name} needs {needs}; free routes: {free_routes(section)}")
    if key and params_base_url:
        vouched = [env_url or "", *user_endpoints(env)]
        if not may_receive_key(params_base_url, vouched, provider.official_hosts):
            hosts = ", ".join(sorted(provider.official_hosts))
            raise InputError(
                f"{section}.base_url in params.yaml is {params_base_url}, and {provider.key_env} is set: a key from your "
                f"environment is only sent to a loopback host, to {hosts}, or to an endpoint you chose outside "
                "the repository, because anyone who can change params.yaml could otherwise collect it; to allow this "
                f"endpoint, export {provider.url_env}={params_base_url} (or add it to {config_path(env)}), "
                f"or unset {provider.key_env} if the server needs no key"
            )
    if len(key) >= MIN_GUARDED_KEY_CHARS:
        _KEYS_READ.add(key)
    return Endpoint(url, key or PLACEHOLDER_KEY, url or provider.default_url, source)


def key_leak(record: Mapping, key: str) -> str | None:
    """Why a record about to be stored must not be (a field holds the API key `key`, or a run of
    half of it and at least STORED_ECHO_MIN_CHARS characters: all but its last character reached
    the cache, which a remote shares), or None; the key is named as mask_keys names it. (Error
    lines hide a shorter echo; a stored reply may quote a key's public prefix, sk-ant-api03-.)"""
    if key == PLACEHOLDER_KEY or len(key) < MIN_GUARDED_KEY_CHARS:
        return None
    text, run = json.dumps(record, ensure_ascii=False), min(len(key), max(STORED_ECHO_MIN_CHARS, len(key) // 2))
    if not any(key[start : start + run] in text for start in range(len(key) - run + 1)):
        return None
    return f"the reply contained the API key or a part of it ({MASK}): not stored, asked again by the next run"
