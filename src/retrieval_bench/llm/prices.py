"""What a model costs, and how an amount of money is printed.

`generate.price: null` (the default) takes the price from PRICES by `generate.model`: Anthropic's
list prices in US dollars per million input / output tokens, half price through the Message
Batches API. A dated snapshot (claude-sonnet-4-5-20250929) costs what its alias costs. An
openai-compatible server on a loopback address (vLLM, Ollama, llama.cpp on this machine) costs
nothing. Any other model is refused until `generate.price` states its price, so that
`generate.max_cost_usd` never guards a run with a price that is not the model's.

Every amount of money is printed by usd(), with as many decimals as it takes to be true: a limit
of $0.001 prints as $0.001, never as $0.00.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from retrieval_bench.core.endpoints import is_loopback
from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.credentials import DEFAULT_URLS

BATCH_DISCOUNT = 0.5  # Message Batches: half price
# USD per million (input, output) tokens.
PRICES: dict[str, tuple[float, float]] = {
    "claude-haiku-4-5": (1.0, 5.0),
    "claude-sonnet-4-5": (3.0, 15.0),
    "claude-opus-4-1": (15.0, 75.0),
}
_SNAPSHOT = re.compile(r"-\d{8}$")  # claude-haiku-4-5-20251001 -> claude-haiku-4-5


@dataclass(frozen=True)
class Price:
    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float
    source: str  # where it came from, for messages

    def __post_init__(self) -> None:
        # A NaN price makes every cost NaN, which no limit refuses (params.yaml refuses it first).
        if not all(
            math.isfinite(v) and v >= 0 for v in (self.input_per_mtok, self.output_per_mtok, self.batch_discount)
        ):
            raise InputError(
                f"{self.source}: prices must be finite numbers >= 0, got input_per_mtok {self.input_per_mtok!r}, "
                f"output_per_mtok {self.output_per_mtok!r}, batch_discount {self.batch_discount!r}"
            )


def usd(amount: float, against: float | None = None) -> str:
    """`amount` in US dollars, with at least two decimals and as many more as it takes to be within
    0.5% of the amount (and, given `against`, to print differently from it when they differ):
    $5.00, $0.0094, $0.001, $1,234.50."""
    decimals = 2
    while amount and decimals < 12:
        shown = round(amount, decimals)
        close = abs(shown - amount) <= 0.005 * abs(amount)
        distinct = against is None or against == amount or round(against, decimals) != shown
        if close and distinct:
            break
        decimals += 1
    return f"${amount:,.{decimals}f}"


def table_price(model: str) -> tuple[float, float] | None:
    return PRICES.get(model) or PRICES.get(_SNAPSHOT.sub("", model))


def describe_table() -> str:
    return ", ".join(f"{model} {usd(i)}/{usd(o)}" for model, (i, o) in PRICES.items())


def resolve(
    family: str | None,
    model: str,
    base_url: str | None,
    price: Mapping | None,
    env: Mapping[str, str] | None = None,
    section: str = "generate",
) -> Price:
    """The price a run is estimated and guarded with: <section>.price when set, else the table,
    else $0 for an openai-compatible server on a loopback address; an unknown model is an
    InputError (before anything is asked or shown) naming the params.yaml `section`'s keys."""
    if price is not None:
        return Price(
            float(price["input_per_mtok"]),
            float(price["output_per_mtok"]),
            float(price.get("batch_discount", BATCH_DISCOUNT)),
            f"{section}.price",
        )
    if family is None:
        return Price(0.0, 0.0, BATCH_DISCOUNT, "provider none: no calls")
    known = table_price(model)
    if known is not None:
        return Price(*known, BATCH_DISCOUNT, f"the price table for {model}")
    env = os.environ if env is None else env
    if family == "openai-compatible":
        url = base_url or env.get("OPENAI_BASE_URL") or DEFAULT_URLS["openai-compatible"]
        host = urlsplit(url).hostname or ""
        if is_loopback(host):
            return Price(0.0, 0.0, BATCH_DISCOUNT, f"a local server at {host}: free")
    raise InputError(
        f"{section}.model {model!r} has no known price (the table knows {describe_table()} per million input/output "
        f"tokens, and a loopback openai-compatible server is free): set {section}.price to its US dollars per million "
        "tokens, e.g. {input_per_mtok: 3.0, output_per_mtok: 15.0} (0 for a server of your own), "
        f"so that {section}.max_cost_usd guards the real cost"
    )
