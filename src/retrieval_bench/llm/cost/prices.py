"""What a model costs, and how an amount of money is printed.

`generate.price: null` (the default) takes the price from the list prices the providers' modules
declare (Provider.prices, US dollars per million input / output tokens; half price through a batch
API): the configured provider's first, then another's for a model it lists by name (served through
a gateway). A dated snapshot (claude-sonnet-4-5-20250929) costs what its alias costs. A provider's
server on a loopback address costs nothing where the provider says so (openai-compatible: vLLM,
Ollama, llama.cpp, `retrieval-bench stub-llm` on this machine), whatever the model is called there
(a local server answering to claude-haiku-4-5 is not Anthropic's). Any other model is refused until `generate.price` states its
price, so that `generate.max_cost_usd` never guards a run with a price that is not the model's.

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
from retrieval_bench.llm.providers.base import Provider
from retrieval_bench.llm.providers.registry import PROVIDERS
from retrieval_bench.llm.transport.credentials import chosen_url

BATCH_DISCOUNT = 0.5  # Message Batches: half price
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


def table_price(provider: Provider | None, model: str) -> tuple[float, float] | None:
    """`model`'s list price: `provider`'s own first, then any registered provider's."""
    tables = [provider.prices] if provider else []
    tables += [other.prices for other in PROVIDERS.values() if other is not provider]
    for name in (model, _SNAPSHOT.sub("", model)):
        known = next((table[name] for table in tables if name in table), None)
        if known is not None:
            return known
    return None


def describe_table() -> str:
    listed = {model: price for other in PROVIDERS.values() for model, price in other.prices.items()}
    return ", ".join(f"{model} {usd(i)}/{usd(o)}" for model, (i, o) in listed.items())


def resolve(
    provider: Provider | None,
    model: str,
    base_url: str | None,
    price: Mapping | None,
    env: Mapping[str, str] | None = None,
    section: str = "generate",
) -> Price:
    """The price a run is estimated and guarded with: <section>.price when set, else $0 for a server
    on a loopback address where the provider is free there, else the list prices; an unknown
    model is an InputError (before anything is asked or shown) naming the params.yaml `section`'s keys."""
    if price is not None:
        return Price(
            float(price["input_per_mtok"]),
            float(price["output_per_mtok"]),
            float(price.get("batch_discount", BATCH_DISCOUNT)),
            f"{section}.price",
        )
    if provider is None:
        return Price(0.0, 0.0, BATCH_DISCOUNT, "provider none: no calls")
    env = os.environ if env is None else env
    if provider.free_on_loopback:
        # Before the table: a local server may answer to a listed name (the default model's), and
        # is free whatever it is called.
        url = chosen_url(provider, base_url, env)[0] or provider.default_url
        host = urlsplit(url).hostname or ""
        if is_loopback(host):
            return Price(0.0, 0.0, BATCH_DISCOUNT, f"a local server at {host}: free")
    known = table_price(provider, model)
    if known is not None:
        return Price(*known, BATCH_DISCOUNT, f"the price table for {model}")
    raise InputError(
        f"{section}.model {model!r} has no known price (the table knows {describe_table()} per million input/output "
        f"tokens, and a loopback {' or '.join(free_on_loopback())} server is free): set {section}.price to its US dollars per million "
        "tokens, e.g. {input_per_mtok: 3.0, output_per_mtok: 15.0} (0 for a server of your own), "
        f"so that {section}.max_cost_usd guards the real cost"
    )


def free_on_loopback() -> list[str]:
    """The providers whose server on this machine costs nothing."""
    return [name for name, provider in PROVIDERS.items() if provider.free_on_loopback]
