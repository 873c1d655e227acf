"""Embed texts with a sentence-transformers model as unit-length float32 vectors, each text
once: `embed_texts` serves what the embedding cache holds and embeds the rest."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Generator, Iterator, Sequence
from contextlib import closing, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval_bench.core.files import atomic_open, write_json
from retrieval_bench.core.logs import Log, silent
from retrieval_bench.core.stage import progress as progress_of
from retrieval_bench.embedding.backends import Encoder, load_encoder, runtime_version, st_dimension
from retrieval_bench.embedding.embedding_cache import EmbeddingCache, in_project, read_shards, space_digest, text_keys
from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
from retrieval_bench.embedding.settings import EmbedSettings
from retrieval_bench.embedding.token_limit import TokenLimit, token_limit


def load_model(model: str, max_seq_length: int | None = None):
    """A SentenceTransformer on the CPU (or GPU when present), resolved offline first."""
    from sentence_transformers import SentenceTransformer

    loaded = SentenceTransformer(resolve_model(model), local_files_only=True)
    if max_seq_length:
        loaded.max_seq_length = max_seq_length
    return loaded


def encode(model, texts: list[str], batch_size: int, prompt: str = "", progress: bool = True) -> np.ndarray:
    """Unit-length float32 embeddings, one row per text, `prompt` prefixed (e5/bge-style models)."""
    if not texts:
        return np.zeros((0, st_dimension(model)), dtype=np.float32)
    vectors = model.encode(
        [prompt + text for text in texts],
        batch_size=batch_size,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=progress,
    )
    return np.asarray(vectors, dtype=np.float32).reshape(len(texts), -1)


SPACE_FORMAT = 1  # bump when the way vectors are computed changes


def embedding_space(fingerprint: str, settings: EmbedSettings, prompt: str) -> dict:
    """Everything besides the text that decides a vector: part of every cache key."""
    return {
        "format": SPACE_FORMAT,
        "model": fingerprint,
        "backend": settings.backend,
        "runtime": runtime_version(settings.backend),
        "quantize": settings.quantize,
        "precision": settings.precision,
        "max_seq_length": settings.max_seq_length,  # null = the model's own, fixed by its files
        "prompt": prompt,
    }


@dataclass(frozen=True)
class BatchTime:
    """One batch the local encoder embedded: its texts, and the encoder's wall and CPU seconds
    (this process, every thread) for it, writing it to the cache apart."""

    texts: int
    wall: float
    cpu: float


@dataclass(frozen=True)
class EmbedStats:
    """What an embed call did; `seconds`: from the engine's start (its start-up included) to the
    last vector."""

    texts: int
    unique: int
    cached: int
    embedded: int
    seconds: float
    encoder: str | None
    shared: int = 0  # of `cached`: found in another cache (another chunking's of the embedder, the 0.2.0 location)
    batch_times: tuple[BatchTime, ...] = ()  # the local encoder's batches in order (none on Ray: embed_cost)
    token_limit: TokenLimit | None = None  # how many texts the encoder cuts (None: not known)

    def line(self, unit: str) -> str:
        line = f"{self.texts} {unit}s ({self.unique} distinct): {self.cached} from the cache"
        if self.shared:
            line += f" ({self.shared} from another chunking's cache or the 0.2.0 one)"
        line += f", {self.embedded} embedded"
        if self.embedded:
            rate = self.embedded / self.seconds if self.seconds > 0 else float("inf")
            line += f" in {self.seconds:.1f}s ({rate:.1f} {unit}s/s; {self.encoder})"
        if self.token_limit is not None and self.token_limit.cut:
            line += f"; {self.token_limit.line(unit)}"
        return line


def cache_keys(texts: list[str], settings: EmbedSettings, prompt: str, fingerprint: str) -> list[bytes]:
    """The embedding-cache key of each text under `settings` and the model's `fingerprint`."""
    return text_keys(space_digest(embedding_space(fingerprint, settings, prompt)), texts)


def embedding_dimension(model_path: str) -> int:
    """The dimension of the model's vectors: from its sentence-transformers files when they say it
    (modules.json, then the last Dense's out_features or the Pooling's width), else from the model
    loaded on the CPU (no encoder built: for a caller that builds none)."""
    declared = _declared_dimension(Path(model_path))
    if declared is not None:
        return declared
    from sentence_transformers import SentenceTransformer

    return st_dimension(SentenceTransformer(model_path, device="cpu", local_files_only=True))


def _declared_dimension(root: Path) -> int | None:
    try:
        if json.loads((root / "config_sentence_transformers.json").read_text(encoding="utf-8")).get("truncate_dim"):
            return None  # a Matryoshka truncation: the loaded model knows its width
    except FileNotFoundError:
        pass
    except (OSError, ValueError, AttributeError):
        return None
    try:
        modules = json.loads((root / "modules.json").read_text(encoding="utf-8"))
        dimension = None
        for module in modules:
            kind = module["type"].rsplit(".", 1)[-1]
            if kind not in ("Pooling", "Dense"):
                continue
            config = json.loads((root / module["path"] / "config.json").read_text(encoding="utf-8"))
            dimension = config["out_features"] if kind == "Dense" else _pooled_dimension(config)
            if dimension is None:
                return None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return dimension if isinstance(dimension, int) and dimension > 0 else None


def _pooled_dimension(config: dict) -> int | None:
    """A Pooling module's width from its config: sentence-transformers 6 writes embedding_dimension
    and pooling_mode, older versions word_embedding_dimension and a pooling_mode_* switch per mode.
    None for several modes concatenated, or keys this reading does not know."""
    if "pooling_mode" in config:
        mode = config["pooling_mode"]
        return config["embedding_dimension"] if isinstance(mode, str) or len(mode) == 1 else None
    if sum(bool(value) for key, value in config.items() if key.startswith("pooling_mode_")) == 1:
        return config["word_embedding_dimension"]
    return None


Batches = Generator[tuple[list[bytes], np.ndarray], None, None]  # closed when embedding ends (closing)


def embedding_engine(
    items: list[tuple[bytes, str]], model_path: str, fingerprint: str, settings: EmbedSettings, log: Log = print
) -> tuple[str, Batches]:
    """What embeds `items` ((cache key, text) pairs, in the order to embed them) under
    `settings.engine` and the (keys, vectors) batches it yields (Ray is imported only for
    engine ray: it is an optional extra)."""
    if settings.engine == "ray":
        from retrieval_bench.embedding.embed_ray import describe, embed_batches

        return describe(settings, len(items)), embed_batches(items, model_path, fingerprint, settings)
    encoder = local_encoder(model_path, fingerprint, settings, log)
    return encoder.description, encoder.batches(items, settings.batch_size)


# The encoders loaded inside a loading_once() scope, by what makes one encoder differ from another;
# None outside any scope, so nothing outlives the stage that asked for it (a test's patched
# load_encoder included). A context variable: a scope entered in one thread is not seen by another.
_loaded: ContextVar[dict[tuple, Encoder] | None] = ContextVar("loaded_encoders", default=None)


@contextmanager
def loading_once() -> Iterator[None]:
    """Within it, each local encoder is loaded once and reused: embed_corpus embeds its chunks, the
    golden set's questions ahead and its cost sample with one model load (MiniLM loaded again costs
    only 0.05 CPU-s, torch imported; a large model, or an ONNX / OpenVINO session, costs more)."""
    token = _loaded.set({} if _loaded.get() is None else _loaded.get())
    try:
        yield
    finally:
        _loaded.reset(token)


def local_encoder(model_path: str, fingerprint: str, settings: EmbedSettings, log: Log = print) -> Encoder:
    """The local encoder `settings` asks for: loaded here, or the one loaded before in the same
    loading_once() scope (prompts and batch size are not the encoder's: they may differ)."""
    encoder_settings = (
        settings.backend,
        settings.precision,
        settings.quantize,
        settings.device,
        settings.max_seq_length,
    )
    key, loaded = (model_path, fingerprint, *encoder_settings), _loaded.get()
    if loaded is None:
        return load_encoder(model_path, fingerprint, settings, log=log)
    if key not in loaded:
        loaded[key] = load_encoder(model_path, fingerprint, settings, log=log)
    return loaded[key]


def from_other_caches(folders: list[Path], keys: list[bytes], dim: int | None) -> dict[bytes, np.ndarray]:
    """The sound vectors of `keys` other caches hold (read only: another stage's cache, or the 0.2.0
    location), the first folder's copy first."""
    found: dict[bytes, np.ndarray] = {}
    for folder in folders:
        wanted = {key for key in keys if key not in found}
        if not wanted or not folder.is_dir():
            continue
        for shard in reversed(read_shards(folder, dim)):  # the newest copy of a key wins, as in the cache
            rows = [(raw.tobytes(), row) for row, raw in enumerate(shard.keys) if raw.tobytes() in wanted]
            if not rows:
                continue
            vectors, sound = shard.rows(np.array([row for _, row in rows]))
            for (key, _), vector, ok in zip(rows, vectors, sound, strict=True):
                if ok and key not in found:
                    found[key] = vector
            wanted -= found.keys()
    return found


def _copy_shared(cache: EmbeddingCache, folders: list[Path], keys: list[bytes], dim: int | None) -> dict:
    """The vectors of `keys` the other caches hold, copied into `cache` so that it alone serves its
    texts from then on (`retrieval-bench cache prune` reads it alone)."""
    shared = from_other_caches(folders, keys, dim)
    if shared:
        cache.put(list(shared), np.stack(list(shared.values())))
    return shared


def embedding_task(texts: list[str], settings: EmbedSettings, prompt: str, log: Log = print) -> Callable[[], int]:
    """A call that embeds `texts` (`prompt` prefixed; vectors unused; the leaderboard's sample) with
    the local encoder `settings` asks for, loaded here once, and returns how many it embedded (the
    unit of core.timing.interleaved: the leaderboard's seconds per 1,000 chunks)."""
    model_path = resolve_model(settings.model, settings.model_key)
    encoder = local_encoder(model_path, model_fingerprint(model_path), settings, log)
    sample = [(b"", prompt + text) for text in texts]

    def run() -> int:
        for _ in encoder.batches(sample, settings.batch_size):
            pass
        return len(sample)

    return run


@dataclass(frozen=True)
class EmbedProgress:
    """How an embed call reports: `unit` names the texts on its progress bar, `bar` shows the bar,
    `log` takes the encoder's lines (an ONNX export's), `tokens` counts the texts the encoder cuts
    (token_limit: a tokenizer pass over every distinct text, for a line a check or a benchmark
    never prints)."""

    unit: str = "text"
    bar: bool = True
    log: Log = print
    tokens: bool = True


QUIET = EmbedProgress(bar=False, log=silent, tokens=False)  # a check's or a benchmark's call


@dataclass(frozen=True)
class EmbeddedBatches:
    """What _embed_into embedded: the vectors by key, the engine's description, the seconds from its
    start-up, and the local encoder's batch times."""

    vectors: dict[bytes, np.ndarray]
    description: str
    seconds: float
    batch_times: tuple[BatchTime, ...]


def _embed_into(
    cache: EmbeddingCache,
    items: list[tuple[bytes, str]],
    model_path: str,
    fingerprint: str,
    settings: EmbedSettings,
    progress: EmbedProgress,
) -> EmbeddedBatches:
    """Embed `items` ((key, text) pairs) into `cache`, batch by batch."""
    started = time.monotonic()  # start-up (model load, export, Ray actors) counts, for either engine
    description, batches = embedding_engine(items, model_path, fingerprint, settings, progress.log)
    embedded: dict[bytes, np.ndarray] = {}
    times: list[BatchTime] = []
    with (
        closing(batches),
        progress_of(len(items), f"embed ({description})", progress.unit, show=progress.bar) as bar,
    ):
        while True:
            wall, cpu = time.perf_counter(), time.process_time()
            try:
                batch, vectors = next(batches)  # the local engine encodes the batch here
            except StopIteration:
                break
            times.append(BatchTime(len(batch), time.perf_counter() - wall, time.process_time() - cpu))
            cache.put(batch, vectors)  # a batch of another dimension than the model's is refused
            embedded.update(zip(batch, vectors, strict=True))
            bar.update(len(batch))
    local = tuple(times) if settings.engine == "local" else ()  # Ray's batches arrive from actors, timed there
    return EmbeddedBatches(embedded, description, time.monotonic() - started, local)


def embed_texts(
    texts: list[str],
    settings: EmbedSettings,
    prompt: str,
    cache_dir: str | Path,
    *,
    shared_caches: Sequence[str | Path] = (),
    progress: EmbedProgress = EmbedProgress(),
) -> tuple[np.ndarray, EmbedStats]:
    """Unit-length float32 vectors for `texts` (one row each, in order), `prompt` prefixed.
    Vectors in the cache (or in `shared_caches`, read only, then copied into it) are served; the
    others are embedded, longest first in batches, by `settings.engine` (here, or on Ray), and
    each batch is durably appended to the cache as it arrives, so a crash loses only the batches in
    flight and a rerun embeds only the rest. Relative cache folders lie under the DVC project
    (embedding_cache.in_project). A model that cannot be found is reported under
    `settings.model_key` (an embedder's own: embedders.NAME.model)."""

    model_path = resolve_model(settings.model, settings.model_key)
    cache_dir, sources = in_project(cache_dir), [in_project(folder) for folder in shared_caches]
    if not texts:  # no encoder, nor an export: only the dimension is needed
        return np.zeros((0, embedding_dimension(model_path)), dtype=np.float32), EmbedStats(0, 0, 0, 0, 0.0, None)
    fingerprint = model_fingerprint(model_path)
    keys = cache_keys(texts, settings, prompt, fingerprint)
    unique = dict(zip(keys, texts, strict=True))
    description, seconds = None, 0.0
    batch_times: tuple[BatchTime, ...] = ()
    # Undeclared (no model load just for it): the cache reads shards of any width, their keys name
    # this model, and the first batch the encoder returns sets the width of the shard written.
    dim = _declared_dimension(Path(model_path))
    with EmbeddingCache(cache_dir, dim) as cache:
        found = cache.get(list(unique))
        shared = _copy_shared(cache, sources, [key for key in unique if key not in found], dim)
        found.update(shared)
        missing = [key for key in unique if key not in found]
        if missing:
            order = np.argsort([-len(unique[key]) for key in missing])  # as sentence-transformers sorts
            items = [(missing[i], prompt + unique[missing[i]]) for i in order]
            done = _embed_into(cache, items, model_path, fingerprint, settings, progress)
            found.update(done.vectors)
            description, seconds, batch_times = done.description, done.seconds, done.batch_times
    stats = EmbedStats(
        len(texts),
        len(unique),
        len(unique) - len(missing),
        len(missing),
        seconds,
        description,
        len(shared),
        batch_times,
        token_limit(list(unique.values()), model_path, settings.max_seq_length, prompt) if progress.tokens else None,
    )
    return np.stack([found[key] for key in keys]).astype(np.float32, copy=False), stats


def save_embeddings(vectors: np.ndarray, ids: list, vectors_path: str | Path, ids_path: str | Path) -> None:
    """An embed stage's outputs: the vectors as .npy and their ids, in row order, as JSON; each
    file written whole or not at all."""
    with atomic_open(vectors_path, "wb") as handle:
        np.save(handle, vectors)
    write_json(ids_path, ids)
