"""What a run is set up with: Settings (the API-call part of params.yaml's generate section,
prices included) and Meta (what a cache record says about how it was made)."""

from __future__ import annotations

from dataclasses import dataclass

from retrieval_bench.llm.prices import resolve
from retrieval_bench.llm.provider import Provider
from retrieval_bench.llm.registry import PROVIDERS
from retrieval_bench.params import DEFAULTS


@dataclass(frozen=True)
class Settings:
    """The generate section of params.yaml that concerns the API calls (defaults: params.DEFAULTS)."""

    provider: str
    model: str
    max_tokens: int
    concurrency: int
    max_retries: int
    base_url: str | None
    input_per_mtok: float
    output_per_mtok: float
    batch_discount: float
    max_cost_usd: float | None
    batch_poll_seconds: float
    price_source: str = "generate.price"  # where the prices came from (llm.prices), for messages
    section: str = "generate"  # the params.yaml section it came from, named in messages (judge: "judge")

    @classmethod
    def from_params(cls, params: dict, section: str = "generate") -> "Settings":
        """From a validated generate (or judge) section; keys it lacks take their params.DEFAULTS
        value. The prices: <section>.price, else llm.prices' table; an unknown paid model is an
        InputError."""
        params = {**DEFAULTS["generate"], **params}
        api = PROVIDERS.get(params["provider"])
        price = resolve(
            api.family if api else None, params["model"], params["base_url"], params["price"], section=section
        )
        return cls(
            provider=params["provider"],
            model=params["model"],
            max_tokens=params["max_tokens"],
            concurrency=params["concurrency"],
            max_retries=params["max_retries"],
            base_url=params["base_url"],
            input_per_mtok=price.input_per_mtok,
            output_per_mtok=price.output_per_mtok,
            batch_discount=price.batch_discount,
            max_cost_usd=params["max_cost_usd"],
            batch_poll_seconds=float(params["batch_poll_seconds"]),
            price_source=price.source,
            section=section,
        )

    @property
    def api(self) -> Provider | None:
        """The provider named by <section>.provider; None for `none` (no calls)."""
        return PROVIDERS.get(self.provider)

    @property
    def family(self) -> str | None:
        """What goes into the cache key for this provider (None: no provider)."""
        return self.api.family if self.api else None

    @property
    def batch(self) -> bool:
        return bool(self.api and self.api.batch)

    def price_factor(self, batch: bool | None = None) -> float:
        return self.batch_discount if (self.batch if batch is None else batch) else 1.0

    def cost(self, input_tokens: float, output_tokens: float, batch: bool | None = None) -> float:
        usd = input_tokens * self.input_per_mtok / 1e6 + output_tokens * self.output_per_mtok / 1e6
        return usd * self.price_factor(batch)


@dataclass(frozen=True)
class Meta:
    """What a cache record says about how it was made (besides the passage)."""

    provider: str
    family: str
    model: str
    prompt_sha256: str
    max_tokens: int
