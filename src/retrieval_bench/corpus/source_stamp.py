"""What load_chunks depends on instead of the load.source path itself (data/source_stamp.json):
DVC can only depend on paths, and a source may be a vector store or a store server. embed_corpus
(embed.corpus_vectors stored) and retrieve (retrieval.method store) read a store too: they depend
on stamps of their own that are constant unless they use a store.

- a file or folder (documents, ready chunks, BEIR): a digest of every file's relative path and
  content, so an edit re-runs load_chunks and anything else does not;
- a vector store on a local path: every file's relative path, size and modification time (stores
  are large binary files rewritten in place; hashing them on every repro would cost minutes);
- a store server: nothing cheap tells whether it changed, so the stamp holds the time it was
  taken and load_chunks, embed_corpus and retrieve re-run on every repro; generate_goldenset,
  embed_questions and score re-run only when their inputs came out different.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path

from retrieval_bench.stores.base import is_store_address, parse_address

BLOCK = 1 << 20


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else [root]


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if root.is_dir() else path.name


def content_digest(root: Path) -> tuple[int, str]:
    """(files, md5 over every file's relative path and content) of a file or folder."""
    digest = hashlib.md5()
    files = _files(root)
    for path in files:
        digest.update(f"{_relative(path, root)}\0".encode())
        with open(path, "rb") as handle:
            for block in iter(lambda: handle.read(BLOCK), b""):
                digest.update(block)
        digest.update(b"\0")
    return len(files), digest.hexdigest()


def metadata_digest(root: Path) -> tuple[int, str]:
    """(files, md5 over every file's relative path, size and modification time)."""
    digest = hashlib.md5()
    files = _files(root)
    for path in files:
        stat = path.stat()
        digest.update(f"{_relative(path, root)}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return len(files), digest.hexdigest()


def source_stamp(source: str) -> dict:
    """The stamp of `source` (load.source); a path that does not exist is stamped as missing and
    load_chunks reports it."""
    if is_store_address(source):
        address = parse_address(source)
        if address.is_server:
            return {"source": str(address), "kind": "store server", "read_at": time.time_ns()}
        root, kind, digest_of = Path(address.location), "local store", metadata_digest
    else:
        root, kind, digest_of = Path(source), "path", content_digest
    if not root.exists():
        return {"source": source, "kind": kind, "missing": True}
    files, digest = digest_of(root)
    return {"source": source, "kind": kind, "files": files, "md5": digest}


def store_stamp(params: dict) -> dict:
    """data/store_stamp.json, what retrieve depends on: the stamp of the store retrieval.method
    store searches (retrieval.store.address, else load.source), so a rebuilt index re-runs
    retrieve; constant for every other method, so nothing else re-runs it."""
    if params["retrieval"]["method"] == "store":
        return source_stamp(params["retrieval"]["store"]["address"] or params["load"]["source"])
    return {"source": None}


def stored_vectors_stamp(params: dict) -> dict:
    """data/stored_vectors_stamp.json, what embed_corpus depends on besides the chunks: the stamp
    of load.source when embed.corpus_vectors is stored (re-embedded vectors in the store re-run
    it); constant otherwise, so an edit to a source's queries or documents that leaves the chunks
    alone never re-runs embed_corpus."""
    if params["embed"]["corpus_vectors"] == "stored":
        return source_stamp(params["load"]["source"])
    return {"source": None}
