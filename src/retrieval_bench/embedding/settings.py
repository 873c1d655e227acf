"""EmbedSettings: params.yaml's embed section, or a named embedder (its keys over embed's), built
once from the validated params (as evaluation's Scoring is) and passed through the embedding
(embed_texts, the encoders, the Ray engine, the cache keys) instead of the raw section and the
params key that named its model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from retrieval_bench.core.params import from_section
from retrieval_bench.core.params_panel import embedder_key, named


@dataclass(frozen=True)
class RaySettings:
    """embed.ray: the Ray engine's cluster and actors (engine ray only)."""

    address: str | None  # None: start a private local Ray; auto; host:port
    num_actors: int
    num_cpus_per_actor: float
    num_gpus_per_actor: float
    batch_size: int  # texts per Ray batch sent to an actor
    timeout_s: float

    @classmethod
    def from_params(cls, ray: Mapping[str, Any]) -> RaySettings:
        return from_section(cls, ray)


@dataclass(frozen=True)
class EmbedSettings:
    """An embedder as the embedding reads it (a validated embed section or embedder: params.DEFAULTS),
    and the params keys an embedder set of its own (`own_keys`), which messages name (`key`)."""

    model: str
    batch_size: int
    max_seq_length: int | None  # None: the model's own
    query_prompt: str
    document_prompt: str
    backend: str  # torch | onnx | openvino
    quantize: str  # none | int8
    precision: str  # fp32 | bf16 | fp16
    device: str | None  # None: the best present (torch only)
    engine: str  # local | ray
    ray: RaySettings
    corpus_vectors: str  # embed | stored
    # (setting, embedders.NAME.setting) for each setting an embedder sets of its own: what messages name
    own_keys: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_params(cls, section: Mapping[str, Any], model_key: str = "embed.model") -> EmbedSettings:
        """From a validated embed section, or an embedder's merged settings (`model_key`: its model's key)."""
        own = () if model_key == "embed.model" else (("model", model_key),)
        return from_section(cls, section, ray=RaySettings.from_params(section["ray"]), own_keys=own)

    @classmethod
    def of_embedder(cls, params: dict[str, Any], embedder: str) -> EmbedSettings:
        """Embedder `embedder` of the checked params (load_all_params), a stage's argument: its keys
        are embedders.NAME.KEY where it sets a value of its own, else embed.KEY."""
        section = named(params, "embedders", embedder)
        own = tuple(
            (name, key)
            for name in ("model", "max_seq_length", "precision", "backend", "quantize")
            if (key := embedder_key(params, embedder, name)) != f"embed.{name}"
        )
        return from_section(cls, section, ray=RaySettings.from_params(section["ray"]), own_keys=own)

    @property
    def model_key(self) -> str:
        """The params key that set the model: embedders.NAME.model or embed.model."""
        return self.key("model")

    def key(self, name: str) -> str:
        """The params key setting `name` came from, for messages: embedders.NAME.name or embed.name."""
        return dict(self.own_keys).get(name, f"embed.{name}")
