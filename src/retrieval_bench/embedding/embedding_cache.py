"""A content-addressed store of embeddings: key -> unit vector, in append-only shards.

A cache is one folder, under the DVC project's .dvc/tmp (core.paths.EMBEDDING_CACHE; not a DVC
output, so DVC run-caches the embed stages). Each run that embeds something writes one new *shard*
and never touches an existing one:

    <name>.vec    a 128-byte JSON header (dtype, dim, the header's own CRC-32), then float32
                  rows, one per vector
    <name>.keys   36-byte records, one per row, in row order: the 32-byte key of row i, then the
                  CRC-32 (little-endian) of that key and the row's bytes

A batch is appended to the .vec file and fsynced before its keys are appended and fsynced, so
a key always names a row that is on disk. A run killed at any point (SIGKILL, power loss) leaves
at most a torn tail: rows without keys, or a partial key; readers ignore both, so only the
batch in flight is lost. No pickle, no per-vector files.

Integrity: a row is served only if its CRC-32 matches and it is finite and not all zeros; a shard
whose header fails its CRC, or whose dimension is not embed.model's, is ignored. Either is said in
one line naming the shard, and its vectors are embedded again (into the run's new shard, which
the index prefers: the newest copy of a key wins). Format-1 shards (before checksums) are read,
unverified, with their rows checked by value (finite unit vectors, the model's dimension), and
`prune` rewrites them with checksums. Runs hold the folder's lock exclusively from reading the
cache to their last append, so a second run on the same cache waits and then embeds only what the
first did not.

Where: `in_project` places a cache folder under DVC_ROOT (the project, for an experiment run in a
temporary copy too), so DVC's checkout never touches it and every experiment shares it.

Keys are sha256(space digest + sha256(text)): the space (model weights hash, backend, precision,
quantization, max_seq_length, prompt) is inside every key, so a vector computed under other
settings is never served. `prune` keeps the keys the current data needs, in one new shard.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import zlib
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from retrieval_bench.core import locking
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import fsync_folder

HEADER_BYTES = 128
KEY_BYTES = 32
DTYPE = np.dtype("<f4")
FORMAT = "retrieval-bench embedding shard"
VERSION = 2
RECORD_BYTES = {1: KEY_BYTES, 2: KEY_BYTES + 4}  # by format version: the key, then (from 2) its row's CRC-32
SUM = np.dtype("<u4")
UNIT_TOLERANCE = 1e-3  # format-1 rows, unverified: every vector is normalized in float32, so |norm - 1| is ~1e-7


def space_digest(space: dict) -> bytes:
    """The digest of everything besides the text that decides a vector."""
    return hashlib.sha256(json.dumps(space, sort_keys=True, ensure_ascii=False).encode()).digest()


def text_keys(space: bytes, texts: Iterable[str]) -> list[bytes]:
    """One 32-byte key per text: sha256(space digest + sha256(text))."""
    return [hashlib.sha256(space + hashlib.sha256(text.encode("utf-8")).digest()).digest() for text in texts]


def _header_crc(meta: dict) -> int:
    return zlib.crc32(json.dumps(meta, sort_keys=True).encode())


def _header(dim: int) -> bytes:
    meta = {"format": FORMAT, "version": VERSION, "dtype": DTYPE.str, "dim": dim}
    raw = json.dumps({**meta, "crc32": _header_crc(meta)}).encode()
    if len(raw) >= HEADER_BYTES:
        raise ValueError("embedding shard header too long")
    return raw + b" " * (HEADER_BYTES - 1 - len(raw)) + b"\n"


def _read_header(vec_path: Path) -> tuple[int, int] | str:
    """(dim, format version) from a shard's header, or why it cannot be used."""
    try:
        with open(vec_path, "rb") as handle:
            head = handle.read(HEADER_BYTES)
        meta = json.loads(head.decode("utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return "its .vec header is missing or unreadable"
    if len(head) != HEADER_BYTES or not isinstance(meta, dict) or meta.get("format") != FORMAT:
        return "its .vec header is missing or unreadable"
    version = meta.get("version")
    if version not in RECORD_BYTES or meta.get("dtype") != DTYPE.str:
        return f"its .vec header names format version {version!r}, dtype {meta.get('dtype')!r}; this version reads 1-{VERSION}, {DTYPE.str}"
    if version >= 2 and meta.pop("crc32", None) != _header_crc(meta):
        return "its .vec header fails its checksum"
    dim = meta.get("dim")
    if not (isinstance(dim, int) and not isinstance(dim, bool) and dim > 0):
        return "its .vec header has no valid dimension"
    return dim, version


@dataclass(frozen=True)
class Shard:
    name: str
    vec_path: Path
    dim: int
    keys: np.ndarray  # (n, 32) uint8: the readable keys, in row order
    sums: np.ndarray | None  # (n,) CRC-32 of each key and row; None in a format-1 shard

    def rows(self, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The rows at `indices`, and which of them are sound: their CRC-32 matches (format 1: they
        are unit vectors), they are finite and not all zeros."""
        stored = np.memmap(self.vec_path, dtype=DTYPE, mode="r", offset=HEADER_BYTES, shape=(len(self.keys), self.dim))
        rows = np.array(stored[indices])
        norms = np.empty(len(rows))
        with np.errstate(all="ignore"):
            for start in range(0, len(rows), BLOCK_ROWS):  # a float64 copy of a block, not of every row
                norms[start : start + BLOCK_ROWS] = np.linalg.norm(
                    rows[start : start + BLOCK_ROWS].astype(np.float64), axis=1
                )
        sound = np.isfinite(rows).all(axis=1) & (norms > 0)
        if self.sums is None:
            sound &= np.abs(norms - 1.0) <= UNIT_TOLERANCE
        else:
            sound &= np.array(
                [
                    zlib.crc32(self.keys[i].tobytes() + rows[at].tobytes()) == self.sums[i]
                    for at, i in enumerate(indices)
                ],
                dtype=bool,
            )
        return rows, sound


def read_shards(folder: Path, dim: int | None = None) -> list[Shard]:
    """Every readable shard, oldest first; torn tails and unreadable shards are left out, each said in
    one line, and (given `dim`, the model's) shards of another dimension: quietly when their header is
    checksummed (another model's), said for a format-1 one (its header may be damaged)."""
    shards = []
    for keys_path in sorted(folder.glob("*.keys")):
        vec_path = keys_path.with_suffix(".vec")
        if keys_path.stat().st_size == 0:  # a shard killed before its first batch: it names no vector, nothing lost
            continue
        header = _read_header(vec_path)
        if isinstance(header, tuple) and dim is not None and header[0] != dim:
            if header[1] >= 2:  # a checksummed header: another model's vectors (switched and back), kept for it
                continue
            header = f"its vectors have {header[0]} dimensions, embed.model makes {dim}"  # format 1: maybe damage
        if isinstance(header, str):
            _say(f"ignoring {keys_path} ({header}); its vectors are embedded again")
            continue
        shard_dim, version = header
        record = RECORD_BYTES[version]
        rows = max(0, (vec_path.stat().st_size - HEADER_BYTES) // (shard_dim * DTYPE.itemsize))
        raw = keys_path.read_bytes()
        n = min(len(raw) // record, rows)
        records = np.frombuffer(raw[: n * record], dtype=np.uint8).reshape(n, record)
        sums = records[:, KEY_BYTES:].copy().view(SUM).reshape(n) if version >= 2 else None
        if sums is None:
            _say(
                f"{keys_path.name} is a format-1 shard, without checksums: its vectors are served only if they are "
                "finite unit vectors; `retrieval-bench cache prune` rewrites it with checksums"
            )
        shards.append(Shard(keys_path.stem, vec_path, shard_dim, records[:, :KEY_BYTES], sums))
    return shards


def _next_shard_name(folder: Path, first_key: bytes) -> str:
    """The next shard's name: a sequence number one past every name in the folder (so names sort
    oldest first), then the start of its first key. Deterministic, unlike a clock or random name,
    so the same run writes the same folder and dvc.lock does not change on a rerun; unique because
    the folder lock admits one writer at a time."""
    numbers = [int(p.name.split("-", 1)[0]) for p in folder.iterdir() if p.name.split("-", 1)[0].isdigit()]
    return f"{max(numbers, default=0) + 1:020d}-{first_key.hex()[:8]}"


class ShardWriter:
    """Appends batches to one new shard, created (and named) on the first batch. `dim`: the
    vectors' dimension (None: the first batch's); a batch of another is refused."""

    def __init__(self, folder: Path, dim: int | None = None):
        self.folder = folder
        self.name: str | None = None
        self._vec: BinaryIO | None = None
        self._keys: BinaryIO | None = None
        self.dim = dim

    def append(self, keys: list[bytes], vectors: np.ndarray) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=DTYPE)
        if vectors.ndim != 2 or len(keys) != len(vectors) or any(len(k) != KEY_BYTES for k in keys):
            raise ValueError("one 32-byte key per vector row")
        if not keys:
            return
        with np.errstate(all="ignore"):
            unsound = ~np.isfinite(vectors).all(axis=1) | ~(np.abs(vectors).max(axis=1) > 0)
        if unsound.any():
            raise InputError(
                f"{self.folder}: the encoder returned {int(unsound.sum())} vectors of {len(vectors)} that are "
                "not finite or all zeros; they were not cached (check embed.backend, precision and device)"
            )
        if self.dim is not None and vectors.shape[1] != self.dim:
            raise InputError(
                f"{self.folder}: the encoder returned {vectors.shape[1]}-dimensional vectors, the model's are "
                f"{self.dim}-dimensional; nothing of this batch was cached"
            )
        if self._vec is None:
            self.dim = vectors.shape[1]
            self.folder.mkdir(parents=True, exist_ok=True)
            self.name = _next_shard_name(self.folder, keys[0])
            self._vec = open(self.folder / f"{self.name}.vec", "xb")
            self._vec.write(_header(self.dim))
            self._keys = open(self.folder / f"{self.name}.keys", "xb")
            fsync_folder(self.folder)
        assert self._keys is not None  # opened with _vec
        self._vec.write(vectors.tobytes())
        self._vec.flush()
        os.fsync(self._vec.fileno())  # the rows are on disk before any key names them
        sums = [zlib.crc32(key + row.tobytes()).to_bytes(4, "little") for key, row in zip(keys, vectors, strict=True)]
        self._keys.write(b"".join(key + crc for key, crc in zip(keys, sums, strict=True)))
        self._keys.flush()
        os.fsync(self._keys.fileno())

    def close(self) -> None:
        for handle in (self._vec, self._keys):
            if handle is not None:
                handle.close()
        self._vec = self._keys = None


@contextmanager
def _folder_lock(folder: Path) -> Iterator[None]:
    """One run or prune at a time on the folder: a run holds it from reading the cache to its last
    append, so a second run waits, then reads the cache afresh and embeds only what the first did
    not; saying so (RETRIEVAL_BENCH_LOCK_WAIT applies, see locking)."""
    folder.mkdir(parents=True, exist_ok=True)
    with locking.exclusive(
        folder, log=_say, what=f"using the embedding cache {folder} (embedding into it or pruning it)"
    ):
        yield


def _say(line: str) -> None:
    print(f"embedding cache: {line}", file=sys.stderr)


def in_project(folder: str | Path) -> Path:
    """`folder` under the DVC project: DVC_ROOT when DVC runs the stage, else the working
    directory (an absolute `folder` stays as it is)."""
    return Path(os.environ.get("DVC_ROOT", ".")) / folder


class EmbeddingCache:
    """Look vectors up by key and append new ones; use as a context manager. `dim`: the model's
    dimension (shards of another are ignored)."""

    def __init__(self, folder: str | Path, dim: int | None = None):
        self.folder = Path(folder)
        self.dim = dim
        self._lock: AbstractContextManager[None] | None = None
        self._index: dict[bytes, tuple[int, int]] = {}
        self._shards: list[Shard] = []
        self.writer = ShardWriter(self.folder, dim)

    def __enter__(self) -> "EmbeddingCache":
        self._lock = _folder_lock(self.folder)
        self._lock.__enter__()
        self._read()
        return self

    def _read(self) -> None:
        self._shards = read_shards(self.folder, self.dim)
        self._index = {}
        for number, shard in enumerate(self._shards):  # the newest copy of a key wins: it replaced a damaged one
            for row, key in enumerate(shard.keys):
                self._index[key.tobytes()] = (number, row)

    def __exit__(self, *exc: Any) -> None:
        assert self._lock is not None  # taken by __enter__
        try:
            self.writer.close()
        finally:
            self._lock.__exit__(*exc)

    def get(self, keys: list[bytes]) -> dict[bytes, np.ndarray]:
        """The sound cached vectors among `keys` (others are absent from the result: a damaged one
        is said, once per shard, and embedded again)."""
        wanted: dict[int, list[tuple[bytes, int]]] = {}
        for key in dict.fromkeys(keys):
            where = self._index.get(key)
            if where is not None:
                wanted.setdefault(where[0], []).append((key, where[1]))
        found = {}
        for number, pairs in wanted.items():
            shard = self._shards[number]
            rows, sound = shard.rows(np.array([row for _, row in pairs]))
            found.update({key: rows[i] for i, (key, _) in enumerate(pairs) if sound[i]})
            if not sound.all():
                _say(
                    f"{shard.vec_path}: {int((~sound).sum())} vectors fail their checksum or are not finite "
                    f"{'unit ' if shard.sums is None else ''}vectors (a damaged shard); embedding them again"
                )
        return found

    def put(self, keys: list[bytes], vectors: np.ndarray) -> None:
        """Append one batch durably (vectors fsynced, then keys); non-finite or zero vectors are refused."""
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
        return (
            f"{self.folder}: kept {self.kept} vectors, dropped {self.dropped}, in one shard "
            f"({self.bytes_before / 1e6:.1f} MB -> {self.bytes_after / 1e6:.1f} MB)"
        )


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.suffix in {".vec", ".keys"})


BLOCK_ROWS = 65_536  # rows read (and checked) at a time by prune


def _sound_blocks(shard: Shard, keep: set[bytes], seen: set[bytes]) -> Iterator[tuple[list[bytes], np.ndarray]]:
    """The rows of `shard` to keep, a block at a time, each read and checked once: a key in `keep`
    not `seen` yet (added to `seen`), a sound row."""
    wanted = [(row, raw.tobytes()) for row, raw in enumerate(shard.keys)]
    wanted = [(row, key) for row, key in wanted if key in keep and key not in seen]
    for start in range(0, len(wanted), BLOCK_ROWS):
        block = wanted[start : start + BLOCK_ROWS]
        rows, sound = shard.rows(np.array([row for row, _ in block], dtype=np.int64))
        picks = []
        for at, ((_, key), ok) in enumerate(zip(block, sound, strict=True)):
            if ok and key not in seen:
                seen.add(key)
                picks.append(at)
        if picks:
            yield [block[at][1] for at in picks], rows[picks]


def _kept(shards: list[Shard], keep: set[bytes], writer: ShardWriter | None) -> int:
    """How many sound vectors to keep (the newest copy of each key), appended to `writer` if any."""
    seen: set[bytes] = set()
    for shard in reversed(shards):
        for keys, rows in _sound_blocks(shard, keep, seen):
            if writer is not None:
                writer.append(keys, rows)
    return len(seen)


def prune(folder: str | Path, keep: set[bytes], dry_run: bool = False, dim: int | None = None) -> PruneReport:
    """Keep only the sound vectors whose key is in `keep` (the newest copy of each; given `dim`, of
    that dimension), rewritten as one shard with checksums; the old shards are deleted only after
    the new one is fsynced, so a crash leaves duplicates, never a loss."""
    folder = Path(folder)
    with _folder_lock(folder):
        before = _size(folder)
        shards = read_shards(folder, dim)
        total = sum(len(shard.keys) for shard in shards)
        stale = [p for p in folder.iterdir() if p.suffix in {".vec", ".keys"}]
        current = all(shard.sums is not None for shard in shards)  # a format-1 shard is rewritten with checksums
        # Left alone only if one current shard holds each kept key once and every row is sound: that
        # takes a read to tell. Otherwise the rows are read once, as they are written.
        keys = [raw.tobytes() for shard in shards for raw in shard.keys]
        whole = current and len(shards) <= 1 and len(stale) == 2 * len(shards) and len(keep.intersection(keys)) == total
        if dry_run or whole:
            kept = _kept(shards, keep, None)
            if dry_run or kept == total:
                return PruneReport(folder, kept, total - kept, before, before, rewritten=False)
        writer = ShardWriter(folder, dim)  # a damaged row in a whole shard: its sound ones are read once more
        try:
            kept = _kept(shards, keep, writer)
        finally:
            writer.close()
        fsync_folder(folder)
        for path in stale:
            path.unlink()
        fsync_folder(folder)
        return PruneReport(folder, kept, total - kept, before, _size(folder), rewritten=True)
