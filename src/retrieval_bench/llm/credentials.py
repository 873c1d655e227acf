"""Credentials follow the user, not the repository.

An API key comes from the environment of whoever runs the pipeline (a developer, a CI job);
`generate.base_url` comes from params.yaml, which anyone who can open a pull request can change.
So a key is sent only to an endpoint that the same user chose outside git, or that cannot leave
the machine:

- a loopback host (localhost, 127.0.0.0/8, ::1): vLLM, Ollama or llama.cpp on this machine;
- the provider's own API host over https (api.openai.com for OPENAI_API_KEY);
- the URL in the user's own environment (OPENAI_BASE_URL), or one listed in the user's config
  file (retrieval_bench.core.endpoints, the rule shared with the vector stores' keys).

A `generate.base_url` pointing anywhere else while a key is set is refused with one line saying
why and how to allow it. Without a key nothing secret is sent (a placeholder), so any URL is
allowed. Anthropic's endpoint can only come from ANTHROPIC_BASE_URL, the user's environment.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from retrieval_bench.core.endpoints import config_path, may_receive_key, user_endpoints
from retrieval_bench.core.errors import InputError

OFFICIAL_HOSTS = {"openai-compatible": {"api.openai.com"}, "anthropic": {"api.anthropic.com"}}
DEFAULT_URLS = {"openai-compatible": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
PLACEHOLDER_KEY = "not-needed"


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


def openai_endpoint(
    params_base_url: str | None, env: Mapping[str, str] | None = None, section: str = "generate"
) -> Endpoint:
    """Where the openai-compatible provider sends its requests, and with which key; refuses a
    params.yaml base_url (<section>.base_url) that the user did not vouch for while OPENAI_API_KEY
    is set."""
    env = os.environ if env is None else env
    key = env.get("OPENAI_API_KEY") or ""
    env_url = env.get("OPENAI_BASE_URL") or None
    if params_base_url:
        url, source = params_base_url, f"{section}.base_url in params.yaml"
    elif env_url:
        url, source = env_url, "OPENAI_BASE_URL"
    else:
        url, source = None, "the OpenAI default"
    if not params_base_url and not key:
        raise InputError(
            f"{section}.provider openai-compatible needs {section}.base_url or, for OpenAI itself, OPENAI_API_KEY; "
            f"free routes: {free_routes(section)}"
        )
    if key and params_base_url:
        vouched = [env_url or "", *user_endpoints(env)]
        if not may_receive_key(params_base_url, vouched, OFFICIAL_HOSTS["openai-compatible"]):
            raise InputError(
                f"{section}.base_url in params.yaml is {params_base_url}, and OPENAI_API_KEY is set: a key from your "
                "environment is only sent to a loopback host, to api.openai.com, or to an endpoint you chose outside "
                "the repository, because anyone who can change params.yaml could otherwise collect it; to allow this "
                f"endpoint, export OPENAI_BASE_URL={params_base_url} (or add it to {config_path(env)}), "
                "or unset OPENAI_API_KEY if the server needs no key"
            )
    return Endpoint(url, key or PLACEHOLDER_KEY, url or DEFAULT_URLS["openai-compatible"], source)


def anthropic_endpoint(provider: str, env: Mapping[str, str] | None = None, section: str = "generate") -> Endpoint:
    """The Anthropic endpoint: ANTHROPIC_BASE_URL (the user's environment) or the SDK default."""
    env = os.environ if env is None else env
    key = env.get("ANTHROPIC_API_KEY")
    if not key:
        raise InputError(
            f"{section}.provider {provider} needs ANTHROPIC_API_KEY in the environment; free routes: {free_routes(section)}"
        )
    url = env.get("ANTHROPIC_BASE_URL") or None
    return Endpoint(
        url, key, url or DEFAULT_URLS["anthropic"], "ANTHROPIC_BASE_URL" if url else "the Anthropic default"
    )
