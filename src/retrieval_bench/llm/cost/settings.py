"""What a run is set up with: Settings (the API-call part of params.yaml's generate section,
prices included) and Meta (what a cache record says about how it was made)."""

from __future__ import annotations

from dataclasses import dataclass, field

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.llm.cache.replies import EarlierKeys
from retrieval_bench.llm.cost.prices import resolve
from retrieval_bench.llm.providers.base import Provider
from retrieval_bench.llm.providers.registry import PROVIDERS, named

LLM_SECTIONS = ("generate", "judge")


def check_provider(settings: dict, section: str, path: str = "params.yaml") -> Provider | None:
    """The provider a validated LLM section names, checked against the registry (params.yaml's
    ground layer checks the shape only: it cannot read this layer), with what it takes."""
    api = named(settings["provider"], section, path)
    temperature = settings["temperature"]
    if temperature is not None and api is not None and not api.takes_temperature:
        raise InputError(
            f"{path}: {section}.temperature is for provider "
            f"{' or '.join(name for name, p in PROVIDERS.items() if p.takes_temperature)}; the {api.name} API takes "
            f"none: leave it null (got {temperature!r})"
        )
    return api


def check_llm_sections(params: dict, path: str = "params.yaml") -> None:
    """The providers of every LLM section of validated params (check_params runs this on every repro)."""
    for section in LLM_SECTIONS:
        check_provider(params[section], section, path)


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
    timeout_s: float = DEFAULTS["generate"]["timeout_s"]  # seconds per request
    response_format: str = "text"  # or json_schema: the task's reply schema is sent with each request
    temperature: float | None = None  # None: the server's default (not sent)
    price_source: str = "generate.price"  # where the prices came from (llm.cost.prices), for messages
    section: str = "generate"  # the params.yaml section it came from, named in messages (judge: "judge")

    @classmethod
    def from_params(cls, params: dict, section: str = "generate") -> "Settings":
        """From a validated generate (or judge) section; keys it lacks take their params.DEFAULTS
        value. The provider is checked against the registry; the prices: <section>.price, else the
        providers' list prices (llm.cost.prices); an unknown paid model is an InputError."""
        params = {**DEFAULTS["generate"], **params}
        api = check_provider(params, section)
        price = resolve(api, params["model"], params["base_url"], params["price"], section=section)
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
            timeout_s=float(params["timeout_s"]),
            response_format=params["response_format"],
            temperature=params["temperature"],
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
    """What a cache record says about how it was made (besides the passage), and how its key is made."""

    provider: str
    family: str
    model: str  # the model requests name
    prompt_sha256: str
    max_tokens: int  # recorded, not in the key: a reply is not asked again because max_tokens changed
    model_alias: str | None = None  # the model's name in the key instead of `model` (a local model folder)
    temperature: float | None = None  # sent and recorded; None: the server's default
    seed: int | None = None  # each job's seed derives from it (llm.runs.tasks); None: the API takes no seed
    response_format: str = "text"  # json_schema: every reply is held to the task's schema
    earlier: EarlierKeys = field(default_factory=EarlierKeys)  # records keyed the old way (max_tokens hashed)

    @classmethod
    def from_params(
        cls, params: dict, settings: Settings, prompt_sha256: str, earlier: EarlierKeys, seed: int | None = None
    ) -> "Meta":
        """The Meta of an LLM section's (validated) `params`; `seed` is sent only where the provider
        takes one."""
        return cls(
            params["provider"],
            settings.family or "",
            params["model"],
            prompt_sha256,
            params["max_tokens"],
            model_alias=params["model_alias"],
            temperature=params["temperature"],
            seed=seed if settings.api is not None and settings.api.sends_seed else None,
            response_format=params["response_format"],
            earlier=earlier,
        )

    def journal_fields(self) -> dict:
        """What a batch journal's intent says of how its requests are made (from_journal reads it back)."""
        return {
            "family": self.family,
            "provider": self.provider,
            "model": self.model,
            "prompt_sha256": self.prompt_sha256,
            "max_tokens": self.max_tokens,
            "model_alias": self.model_alias,
            "temperature": self.temperature,
            "response_format": self.response_format,
        }

    @classmethod
    def from_journal(cls, event: dict, provider: str) -> "Meta":
        """The Meta a journalled batch's requests were made with (events before these fields: text, no
        alias), its records naming `provider`: the batch API that answered."""
        return cls(
            provider,
            event["family"],
            event["model"],
            event["prompt_sha256"],
            event["max_tokens"],
            model_alias=event.get("model_alias"),
            temperature=event.get("temperature"),
            response_format=event.get("response_format", "text"),
        )

    @property
    def cache_model(self) -> str:
        """The model's name in cache keys: the alias when one is set."""
        return self.model_alias or self.model
