"""A content-addressed store of embeddings: key -> unit vector, in append-only shards.

A cache is one folder (a persistent DVC output). Each run that embeds something writes one new
*shard* and never touches an existing one, so a DVC cache of hardlinks or symlinks is never
written through, and unchanged shards deduplicate in DVC's cache and remote:

    <name>.vec    a 128-byte JSON header (dtype, dim), then float32 rows, one per vector
    <name>.keys   32-byte keys, one per row, in row order (key i names row i)

A batch is appended to the .vec file and fsynced before its keys are appended and fsynced, so
a key always names a row that is on disk. A run killed at any point (SIGKILL, power loss) leaves
at most a torn tail: rows without keys, or a partial key; readers ignore both, so only the
batch in flight is lost. No pickle, no per-vector files.

Keys are sha256(space digest + sha256(text)): the space (model weights hash, backend, precision,
quantization, max_seq_length, prompt) is inside every key, so a vector computed under other
settings is never served. `prune` keeps the keys the current data needs, in one new shard.
"""
from __future__ import annotations

import hashlib
import json
import os
import secrets
import sys
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from retrieval_bench import locking

HEADER_BYTES = 128
KEY_BYTES = 32
DTYPE = np.dtype("<f4")
FORMAT = "retrieval-bench embedding shard"
VERSION = 1


def space_digest(space: dict) -> bytes:
    """The digest of everything besides the text that decides a vector."""
    return hashlib.sha256(json.dumps(space, sort_keys=True, ensure_ascii=False).encode()).digest()


def text_keys(space: bytes, texts: Iterable[str]) -> list[bytes]:
    """One 32-byte key per text: sha256(space digest + sha256(text))."""
    return [hashlib.sha256(space + hashlib.sha256(text.encode("utf-8")).digest()).digest() for text in texts]


def _header(dim: int) -> bytes:
    raw = json.dumps({"format": FORMAT, "version": VERSION, "dtype": DTYPE.str, "dim": dim}).encode()
    if len(raw) >= HEADER_BYTES:
        raise ValueError("embedding shard header too long")
    return raw + b" " * (HEADER_BYTES - 1 - len(raw)) + b"\n"


def _read_dim(vec_path: Path) -> int | None:
    """The vector dimension in a shard's header, or None if the header is torn or foreign."""
    try:
        with open(vec_path, "rb") as handle:
            head = handle.read(HEADER_BYTES)
        meta = json.loads(head.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if len(head) != HEADER_BYTES or not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return None
    if meta.get("version") != VERSION or meta.get("dtype") != DTYPE.str:
        return None
    dim = meta.get("dim")
    return dim if isinstance(dim, int) and dim > 0 else None


@dataclass(frozen=True)
class Shard:
    name: str
    vec_path: Path
    dim: int
    keys: np.ndarray  # (n, 32) uint8: the readable keys, in row order

    def rows(self, indices: np.ndarray) -> np.ndarray:
        rows = np.memmap(self.vec_path, dtype=DTYPE, mode="r", offset=HEADER_BYTES, shape=(len(self.keys), self.dim))
        return np.array(rows[indices])


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def read_shards(folder: Path) -> list[Shard]:
    """Every readable shard, oldest first; torn tails and unreadable shards are left out."""
    shards = []
    for keys_path in sorted(folder.glob("*.keys")):
        vec_path = keys_path.with_suffix(".vec")
        dim = _read_dim(vec_path)
        if dim is None:
            print(f"embedding cache: ignoring {keys_path.name} (its .vec header is missing or unreadable)", file=sys.stderr)
            continue
        rows = max(0, (vec_path.stat().st_size - HEADER_BYTES) // (dim * DTYPE.itemsize))
        raw = keys_path.read_bytes()
        n = min(len(raw) // KEY_BYTES, rows)
        keys = np.frombuffer(raw[: n * KEY_BYTES], dtype=np.uint8).reshape(n, KEY_BYTES)
        shards.append(Shard(keys_path.stem, vec_path, dim, keys))
    return shards


class ShardWriter:
    """Appends batches to one new shard, created on the first batch."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.name = f"{time.time_ns():020d}-{secrets.token_hex(4)}"
        self._vec = self._keys = None
        self.dim: int | None = None

    def append(self, keys: list[bytes], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=DTYPE)
        if vectors.ndim != 2 or len(keys) != len(vectors) or any(len(k) != KEY_BYTES for k in keys):
            raise ValueError("one 32-byte key per vector row")
        if not keys:
            return
        if self._vec is None:
            self.dim = vectors.shape[1]
            self.folder.mkdir(parents=True, exist_ok=True)
            self._vec = open(self.folder / f"{self.name}.vec", "xb")
            self._vec.write(_header(self.dim))
            self._keys = open(self.folder / f"{self.name}.keys", "xb")
            _fsync_dir(self.folder)
        elif vectors.shape[1] != self.dim:
            raise ValueError(f"vectors of dimension {vectors.shape[1]} in a shard of dimension {self.dim}")
        self._vec.write(vectors.tobytes())
        self._vec.flush()
        os.fsync(self._vec.fileno())  # the rows are on disk before any key names them
        self._keys.write(b"".join(keys))
        self._keys.flush()
        os.fsync(self._keys.fileno())

    def close(self) -> None:
        for handle in (self._vec, self._keys):
            if handle is not None:
                handle.close()
        self._vec = self._keys = None


@contextmanager
def _folder_lock(folder: Path, exclusive: bool) -> Iterator[None]:
    """Runs share the folder (each writes its own shard); prune holds it alone. A run waits for a
    prune and a prune for the runs, saying so (RETRIEVAL_BENCH_LOCK_WAIT applies, see locking)."""
    folder.mkdir(parents=True, exist_ok=True)
    hold = locking.exclusive if exclusive else locking.shared
    with hold(folder, log=_say, what=f"{'embedding into' if exclusive else 'pruning'} {folder}"):
        yield


def _say(line: str) -> None:
    print(f"embedding cache: {line}", file=sys.stderr)


class EmbeddingCache:
    """Look vectors up by key and append new ones; use as a context manager."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)
        self._lock = None
        self._index: dict[bytes, tuple[int, int]] = {}
        self._shards: list[Shard] = []
        self.writer = ShardWriter(self.folder)

    def __enter__(self) -> "EmbeddingCache":
        self._lock = _folder_lock(self.folder, exclusive=False)
        self._lock.__enter__()
        self._shards = read_shards(self.folder)
        for number, shard in enumerate(self._shards):
            for row, key in enumerate(shard.keys):
                self._index.setdefault(key.tobytes(), (number, row))
        return self

    def __exit__(self, *exc) -> None:
        self.writer.close()
        self._lock.__exit__(*exc)

    def get(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The cached vectors among `keys` (others are absent from the result)."""
        wanted: dict[int, list[tuple[bytes, int]]] = {}
        for key in dict.fromkeys(keys):
            where = self._index.get(key)
            if where is not None:
                wanted.setdefault(where[0], []).append((key, where[1]))
        found = {}
        for number, pairs in wanted.items():
            rows = self._shards[number].rows(np.array([row for _, row in pairs]))
            found.update({key: rows[i] for i, (key, _) in enumerate(pairs)})
        return found

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Append one batch durably (vectors fsynced, then keys)."""
        self.writer.append(keys, vectors)


@dataclass(frozen=True)
class PruneReport:
    folder: Path
    kept: int
    dropped: int
    bytes_before: int
    bytes_after: int
    rewritten: bool  # the shards were replaced by one (vectors dropped, or only shards merged)

    def line(self, dry_run: bool = False) -> str:
        if dry_run:
            return f"{self.folder}: would keep {self.kept} vectors and drop {self.dropped} ({self.bytes_before / 1e6:.1f} MB now)"
        if not self.rewritten:
            return f"{self.folder}: kept {self.kept} vectors, dropped 0 (unchanged, {self.bytes_after / 1e6:.1f} MB)"
        return (f"{self.folder}: kept {self.kept} vectors, dropped {self.dropped}, in one shard "
                f"({self.bytes_before / 1e6:.1f} MB -> {self.bytes_after / 1e6:.1f} MB)")


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in {".vec", ".keys"})


def prune(folder: str | Path, keep: set[bytes], dry_run: bool = False) -> PruneReport:
    """Keep only the vectors whose key is in `keep`, rewritten as one shard; the old shards are
    deleted only after the new one is fsynced, so a crash leaves duplicates, never a loss."""
    folder = Path(folder)
    with _folder_lock(folder, exclusive=True):
        before = _size(folder)
        shards = read_shards(folder)
        seen: set[bytes] = set()
        picked: list[tuple[int, list[int], list[bytes]]] = []
        total = 0
        for number, shard in enumerate(shards):
            rows, keys = [], []
            for row, raw in enumerate(shard.keys):
                key = raw.tobytes()
                total += 1
                if key in keep and key not in seen:
                    seen.add(key)
                    rows.append(row)
                    keys.append(key)
            picked.append((number, rows, keys))
        dropped = total - len(seen)
        stale = [p for p in folder.iterdir() if p.suffix in {".vec", ".keys"}]
        if dry_run or (dropped == 0 and len(shards) <= 1 and len(stale) == 2 * len(shards)):
            return PruneReport(folder, len(seen), dropped, before, before if dry_run else _size(folder), rewritten=False)
        writer = ShardWriter(folder)
        try:
            for number, rows, keys in picked:
                for start in range(0, len(rows), 65_536):
                    writer.append(keys[start:start + 65_536], shards[number].rows(np.array(rows[start:start + 65_536])))
        finally:
            writer.close()
        _fsync_dir(folder)
        for path in stale:
            path.unlink()
        _fsync_dir(folder)
        return PruneReport(folder, len(seen), dropped, before, _size(folder), rewritten=True)
