"""Input tokens counted without a tokenizer: Claude's gives about 3.5-4 characters per token on
English prose and fewer on code, so ceil(chars / 3.5) + a small per-message overhead is a slightly
pessimistic count (the cost estimate's, and a reply's when a server reports no usage or null counts:
llm.providers.base.reported_tokens)."""

from __future__ import annotations

import math

CHARS_PER_TOKEN = 3.5
MESSAGE_OVERHEAD_TOKENS = 10


def estimate_input_tokens(prompt: str) -> int:
    return math.ceil(len(prompt) / CHARS_PER_TOKEN) + MESSAGE_OVERHEAD_TOKENS


def estimate_output_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)
