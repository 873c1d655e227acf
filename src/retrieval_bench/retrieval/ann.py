"""Approximate nearest neighbours: a FAISS index over the chunk vectors (inner product, i.e. cosine
on unit vectors), as vector databases search.

`retrieval.ann.index`: `hnsw` (IndexHNSWFlat: hnsw_m, ef_construction; searched with ef_search),
`ivf-flat` (IndexIVFFlat: nlist; nprobe) or `ivf-pq` (IndexIVFPQ: nlist, pq_m, pq_bits; nprobe).
The index is built once per corpus and kept in the user cache (ann/ under io.cache_root:
RETRIEVAL_BENCH_CACHE, else $XDG_CACHE_HOME or ~/.cache, then retrieval-bench/), keyed by the
sha256 of the chunk vectors, the index type, its build parameters and the FAISS version, and
written atomically; changing a query-time parameter (ef_search, nprobe) reuses it. The file ends
with the sha256 of the FAISS bytes before it, checked before FAISS reads them (FAISS reads flipped
vector bytes without complaint): an index whose bytes do not match, or with no checksum (truncated,
an older retrieval-bench's, another program's), is rebuilt, said in one line.

Determinism: searches are deterministic given an index. IVF training is seeded; an HNSW graph
built on several threads depends on their timing, so it is built on one thread unless
RETRIEVAL_BENCH_ANN_BUILD_THREADS says otherwise (then the cached index, not a rebuild, keeps
later runs identical). Search threads are FAISS's (OpenMP) default: OMP_NUM_THREADS applies.

The retrieve stage also reports the run's recall against exact dense search (run_info).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from retrieval_bench.core import locking
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import atomic_path, cache_root
from retrieval_bench.retrieval.flat import SEARCH_BLOCK, import_faiss
from retrieval_bench.retrieval.run import Corpus, Questions, from_top, resolve_depth
from retrieval_bench.retrieval.run_info import recall_against_exact
from retrieval_bench.retrieval.settings import AnnSettings, RetrievalSettings

BUILD_PARAMS = {"hnsw": ("hnsw_m", "ef_construction"), "ivf-flat": ("nlist",), "ivf-pq": ("nlist", "pq_m", "pq_bits")}
BUILD_THREADS_ENV = "RETRIEVAL_BENCH_ANN_BUILD_THREADS"
CHECKSUM_MAGIC = b"RBSHA256"  # then the sha256 of the bytes before it: the file's last 40 bytes
CHECKSUM_BYTES = len(CHECKSUM_MAGIC) + hashlib.sha256().digest_size


def cache_dir() -> Path:
    return cache_root() / "ann"


def vectors_sha256(vectors: np.ndarray) -> str:
    digest = hashlib.sha256(f"{vectors.dtype.str}{vectors.shape}".encode())
    digest.update(np.ascontiguousarray(vectors).data.cast("B"))
    return digest.hexdigest()


def index_key(vectors_hash: str, ann: AnnSettings, faiss_version: str) -> str:
    build = {key: getattr(ann, key) for key in BUILD_PARAMS[ann.index]}
    payload = json.dumps([faiss_version, ann.index, build, vectors_hash], sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()[:32]


def build_threads() -> int | None:
    value = os.environ.get(BUILD_THREADS_ENV, "").strip()
    if not value:
        return None
    if not value.isdigit() or int(value) < 1:
        raise InputError(f"{BUILD_THREADS_ENV} must be a positive number of threads, got {value!r}")
    return int(value)


def build_index(vectors: np.ndarray, ann: AnnSettings, threads: int | None = None, where: str = "retrieval"):
    """A FAISS index of `vectors` (float32, unit rows) for retrieval.ann; HNSW on one thread unless
    `threads` is given (IVF trains and adds on FAISS's default threads: the result is the same)."""
    faiss = import_faiss()
    n, dim = vectors.shape
    kind = ann.index
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dim, ann.hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ann.ef_construction
        previous = faiss.omp_get_max_threads()
        faiss.omp_set_num_threads(threads or 1)
        try:
            index.add(vectors)
        finally:
            faiss.omp_set_num_threads(previous)
        return index
    if ann.nlist > n:
        raise InputError(
            f"{where}.ann.nlist {ann.nlist} is more than the {n} chunks: lower it (about sqrt(chunks) to 4*sqrt(chunks) is usual)"
        )
    quantizer = faiss.IndexFlatIP(dim)
    if kind == "ivf-flat":
        index = faiss.IndexIVFFlat(quantizer, dim, ann.nlist, faiss.METRIC_INNER_PRODUCT)
    else:
        if dim % ann.pq_m:
            raise InputError(f"{where}.ann.pq_m {ann.pq_m} must divide the vector dimension {dim}")
        if n < 2**ann.pq_bits:
            raise InputError(
                f"{where}.ann.pq_bits {ann.pq_bits} needs at least {2**ann.pq_bits} chunks to train on, there are {n}"
            )
        index = faiss.IndexIVFPQ(quantizer, dim, ann.nlist, ann.pq_m, ann.pq_bits, faiss.METRIC_INNER_PRODUCT)
    index.train(vectors)
    index.add(vectors)
    return index  # FAISS's Python wrapper keeps the quantizer alive with the index


def _say(line: str) -> None:
    print(f"ann: {line}", file=sys.stderr)


def _lock_path(index_path: Path) -> Path:
    return index_path.with_name(f".{index_path.name}.lock")


def remove_stale_temporaries(folder: Path, building: Path) -> None:
    """Delete the temporary files (.<index>.faiss.<random>.tmp) of index writes that died (SIGKILL,
    power loss): those of `building`, whose lock this process holds, and any other whose index's
    lock nobody holds; a live writer holds its lock, so its temporary file is kept."""
    for tmp in folder.glob(".*.faiss.*.tmp"):
        target = folder / tmp.name[1:].removesuffix(".tmp").rsplit(".", 1)[0]
        if target == building:
            tmp.unlink(missing_ok=True)
            continue
        with locking.try_exclusive(_lock_path(target)) as nobody_writes:
            if nobody_writes:
                tmp.unlink(missing_ok=True)


def _sha256_of_start(path: Path, length: int) -> bytes:
    """The sha256 of the first `length` bytes of the file at `path`, hashed in place (mapped, not
    read into memory: an index can be gigabytes)."""
    if length == 0:  # an empty file cannot be mapped
        return hashlib.sha256().digest()
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped:
        with memoryview(mapped)[:length] as view:  # released before the map closes
            return hashlib.sha256(view).digest()


def _write(faiss, index, path: Path) -> None:
    """`index` at `path`, written atomically, followed by its checksum (see _read)."""
    with atomic_path(path) as tmp:  # a half-written index is never read
        faiss.write_index(index, str(tmp))
        digest = _sha256_of_start(tmp, tmp.stat().st_size)
        with open(tmp, "ab") as handle:
            handle.write(CHECKSUM_MAGIC + digest)


def _read(faiss, path: Path):
    """(the index at `path`, None), or (None, why not) where it is damaged or foreign: its
    checksum does not match, it has none, or FAISS cannot read it; (None, None) where there is no
    file. The checksum is checked first, so FAISS never reads damaged bytes."""
    if not path.is_file():
        return None, None
    try:
        size = path.stat().st_size
        with open(path, "rb") as handle:
            handle.seek(max(0, size - CHECKSUM_BYTES))
            trailer = handle.read()
        if size < CHECKSUM_BYTES or not trailer.startswith(CHECKSUM_MAGIC):
            return None, "no checksum at its end: truncated, or written by an older retrieval-bench or another program"
        if _sha256_of_start(path, size - CHECKSUM_BYTES) != trailer[len(CHECKSUM_MAGIC) :]:
            return None, "checksum mismatch"
        return faiss.read_index(str(path)), None  # FAISS stops at the index's end, before the checksum
    except OSError as error:
        return None, f"unreadable: {error.strerror or error}"
    except RuntimeError:  # a sound file that FAISS refuses (not one it wrote)
        return None, "FAISS cannot read it"


def cached_index_path(vectors: np.ndarray, ann: AnnSettings, folder: Path | None = None) -> Path:
    """Where the index of these vectors under these build parameters is cached."""
    key = index_key(vectors_sha256(vectors), ann, import_faiss().__version__)
    return (folder or cache_dir()) / f"{ann.index}-{key}.faiss"


def load_or_build(vectors: np.ndarray, ann: AnnSettings, folder: Path | None = None, where: str = "retrieval"):
    """The cached index for these vectors and build parameters, built (and cached) on a miss.
    Readers of a cached index share its lock, so two runs on it never wait for each other (nor
    fail under RETRIEVAL_BENCH_LOCK_WAIT=0); a build holds it alone, so a second process waits for
    the first's index instead of building it again. A damaged cached index is rebuilt, and said
    once. Returns (index, path, built)."""
    faiss = import_faiss()
    folder = folder or cache_dir()
    path = cached_index_path(vectors, ann, folder)
    folder.mkdir(parents=True, exist_ok=True)
    what = f"building the ANN index {path}"
    if path.is_file():
        with locking.shared(_lock_path(path), log=_say, what=what):
            remove_stale_temporaries(folder, path)  # no writer of this index is alive while we hold its lock
            index, _ = _read(faiss, path)
        if index is not None:
            return index, path, False
    with locking.exclusive(_lock_path(path), log=_say, what=what):
        remove_stale_temporaries(folder, path)
        index, damage = _read(faiss, path)  # afresh: the process we waited for may have rebuilt it
        if index is not None:
            return index, path, False
        index = build_index(vectors, ann, build_threads(), where)
        _write(faiss, index, path)
    if damage is not None:
        _say(f"the cached index {path} was damaged ({damage}): rebuilt")
    return index, path, True


def search(index, queries: np.ndarray, ann: AnnSettings, k: int, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """(scores, indices) of the k best per query under the query-time parameters; -1 = none."""
    faiss = import_faiss()
    if ann.index == "hnsw":
        params = faiss.SearchParametersHNSW(efSearch=ann.ef_search)
    else:
        params = faiss.SearchParametersIVF(nprobe=ann.nprobe)
    scores = np.empty((len(queries), k), dtype=np.float32)
    indices = np.empty((len(queries), k), dtype=np.int64)
    for start in range(0, len(queries), SEARCH_BLOCK):
        rows = slice(start, min(start + SEARCH_BLOCK, len(queries)))
        scores[rows], indices[rows] = index.search(queries[rows], k, params=params)
        if progress is not None:
            progress.update(rows.stop - rows.start)
    return scores, indices


def retrieve(
    questions: Questions, corpus: Corpus, settings: RetrievalSettings, depth: int, progress=None
) -> pd.DataFrame:
    ann = settings.ann
    vectors = np.ascontiguousarray(corpus.vectors, dtype=np.float32)
    index, _, _ = load_or_build(vectors, ann, where=settings.where)
    scores, indices = search(index, np.ascontiguousarray(questions.vectors, dtype=np.float32), ann, depth, progress)
    found = indices >= 0
    return from_top(questions.qids, corpus.chunk_ids, np.where(found, indices, 0), scores, keep=found)


def run_info(settings: RetrievalSettings, questions: Questions, corpus: Corpus, run: pd.DataFrame) -> dict:
    """The ANN run's recall against exact dense search at every k up to the depth."""
    depth = resolve_depth(settings.depth, len(corpus.chunk_ids))
    return {"index": settings.ann.index, "ann_recall": recall_against_exact(questions, corpus, run, depth)}
