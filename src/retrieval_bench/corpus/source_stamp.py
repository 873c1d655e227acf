"""What load_chunks depends on instead of the load.source path itself (data/source_stamp.json):
DVC can only depend on paths, and a source may be a vector store or a store server. embed_corpus
(embed.corpus_vectors stored) and retrieve (retrieval.method store) read a store too: they depend
on stamps of their own that are constant unless they use a store.

- a file or folder (documents, ready chunks, BEIR): a digest of every file's relative path and
  content, so an edit re-runs load_chunks and anything else does not. Like DVC's own state
  database, a memo keyed by the files' names, sizes and modification times spares re-reading an
  unchanged corpus on every repro;
- a vector store on a local path: every file's relative path, size and modification time (stores
  are large binary files rewritten in place; hashing them on every repro would cost minutes).
  Chroma is the exception: a client that only reads still rewrites chroma.sqlite3 and touches
  its index files, so its stamp is its write log's position instead (every add, update and delete
  takes the next sequence number) with its collections' rows, read from the sqlite file read-only;
- a store server (or a store on object storage, s3://...): nothing cheap tells whether it changed, so the stamp holds the time it was
  taken and load_chunks, embed_corpus and retrieve re-run on every repro; generate_goldenset,
  embed_questions and score re-run only when their inputs came out different.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import time
from collections.abc import Callable, Mapping
from contextlib import closing
from pathlib import Path
from typing import Any

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import check_regular, folder_entries, hash_file, write_json
from retrieval_bench.core.params_panel import external_inputs, method_settings, settings_key
from retrieval_bench.core.store_address import is_store_address, parse_address
from retrieval_bench.embedding.model_source import model_files


def _files(root: Path) -> list[Path]:
    """Every file of `root` (a folder) or root itself; not Python's bytecode, which an import writes."""
    if not root.is_dir():
        return [root]
    return sorted(p for p in folder_entries(root) if p.is_file() and "__pycache__" not in p.relative_to(root).parts)


def _relative(path: Path, root: Path) -> str:
    return path.relative_to(root).as_posix() if root.is_dir() else path.name


def content_digest(root: Path, listing: Callable[[Path], list[Path]] = _files) -> tuple[int, str]:
    """(files, md5 over every file's relative path and content) of a file or folder (its files as
    `listing` gives them)."""
    digest = hashlib.md5()
    files = listing(root)
    for path in files:
        digest.update(os.fsencode(_relative(path, root)) + b"\0")  # a name's own bytes: it may not be UTF-8
        hash_file(path, digest)
        digest.update(b"\0")
    return len(files), digest.hexdigest()


def metadata_digest(root: Path, listing: Callable[[Path], list[Path]] = _files) -> tuple[int, str]:
    """(files, md5 over every file's relative path, size and modification time)."""
    digest = hashlib.md5()
    files = listing(root)
    for path in files:
        stat = path.stat()
        digest.update(os.fsencode(_relative(path, root)) + f"\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return len(files), digest.hexdigest()


# What changes when a Chroma collection does, and never when it is only read.
CHROMA_VERSION_QUERIES = (
    "SELECT max(seq_id) FROM embeddings_queue",
    "SELECT segment_id, seq_id FROM max_seq_id ORDER BY segment_id",
    "SELECT count(*) FROM embeddings",
    "SELECT * FROM collections ORDER BY id",
    "SELECT * FROM collection_metadata ORDER BY collection_id, key",
)


def chroma_digest(root: Path) -> tuple[int, str] | None:
    """(collection rows, md5 over the rows of CHROMA_VERSION_QUERIES) of a Chroma folder (its file
    count is no version: the index files appear as the collection is used); None when its sqlite
    file cannot be read so (another Chroma version's schema)."""
    try:
        with closing(sqlite3.connect(f"{(root / 'chroma.sqlite3').resolve().as_uri()}?mode=ro", uri=True)) as database:
            rows = [database.execute(query).fetchall() for query in CHROMA_VERSION_QUERIES]
    except sqlite3.Error:
        return None
    return rows[2][0][0], hashlib.md5(json.dumps(rows, default=repr).encode()).hexdigest()


def _read_memo(memo: Path) -> dict:
    """The digest memo: {source path: {metadata, files, md5}}; empty when missing or unreadable."""
    try:
        known = json.loads(memo.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return known if isinstance(known, dict) else {}


def _memo_entry(known: dict, root: Path) -> dict | None:
    entry = known.get(str(root))
    return entry if isinstance(entry, dict) else None


def _memoized_content_digest(
    root: Path, memo: Path | None, listing: Callable[[Path], list[Path]] = _files
) -> tuple[int, str]:
    """content_digest(root), served from `memo` while the files' names, sizes and times are those
    it was computed for (the memo keeps one entry per source)."""
    if memo is None:
        return content_digest(root, listing)
    _, metadata = metadata_digest(root, listing)
    known = _read_memo(memo)
    entry = _memo_entry(known, root)
    if entry is not None and entry.get("metadata") == metadata:
        return entry["files"], entry["md5"]
    files, digest = content_digest(root, listing)
    known[str(root)] = {"metadata": metadata, "files": files, "md5": digest}
    try:  # a cache: losing it costs one re-read; outside a DVC project (no .dvc/) there is none
        memo.parent.mkdir(exist_ok=True)
        write_json(memo, known)  # whole or not at all: two repros at once never leave it torn
    except OSError:
        pass
    return files, digest


def edited_since_stamped(source: str, memo: Path) -> bool:
    """Whether the files of `source` (a path) differ in names, sizes or times from when check_params
    last stamped them (its `memo`, only read): a corpus edited in place since the last `make repro`,
    which plain `dvc repro` does not see. False for a store address, a missing path or no memo."""
    root = Path(source)
    if is_store_address(source) or not root.exists():
        return False
    entry = _memo_entry(_read_memo(memo), root)
    return entry is not None and entry.get("metadata") != metadata_digest(root)[1]


def source_stamp(source: str, memo: Path | None = None) -> dict:
    """The stamp of `source` (a path or a store address); a path that does not exist is stamped as
    missing and load_chunks reports it. `memo`: where content digests of paths are remembered."""
    if not is_store_address(source):
        root = Path(source)
        if not root.exists():
            return {"source": source, "kind": "path", "missing": True}
        files, digest = _memoized_content_digest(root, memo)
        return {"source": source, "kind": "path", "files": files, "md5": digest}
    address = parse_address(source)
    root = Path(address.location)
    anew = {"source": str(address), "kind": "store server", "read_at": time.time_ns()}
    if address.is_remote:  # no local file tells of a change
        return anew
    if not root.exists():
        return {"source": source, "kind": "local store", "missing": True}
    if address.engine != "chroma":
        files, digest = metadata_digest(root)
        return {"source": source, "kind": "local store", "files": files, "md5": digest}
    stamped = chroma_digest(root)
    if stamped is None:  # nothing readable tells of a change: re-read on every repro, as a server
        return {**anew, "kind": "local store, unreadable version"}
    return {"source": source, "kind": "local store", "rows": stamped[0], "md5": stamped[1]}


def style_examples_stamp(file: str | None, memo: Path | None = None) -> dict:
    """What generate_goldenset depends on for generate.style_examples, which may be null (DVC cannot
    depend on a null path): the file's content digest, remembered while its size and time stay (as
    load.source's); a missing one is generate_goldenset's error."""
    return {"file": None, "md5": None} if file is None else source_stamp(file, memo)


def imported_stamps(imported: dict[str, str], memo: Path | None = None) -> dict:
    """What generate_goldenset depends on for generate.imported ({NAME: FILE}): each file's or
    folder's stamp by name; a missing file, or one that is no regular file or folder (a FIFO), is
    one InputError naming generate.imported.NAME."""
    stamped = {}
    for name, file in sorted(imported.items()):
        try:
            check_regular(file, folder_ok=True)
        except FileNotFoundError:
            raise InputError(f"generate.imported.{name}: {file}: no such file or folder") from None
        except InputError as error:
            raise InputError(f"generate.imported.{name}: {error}") from None
        stamped[name] = source_stamp(file, memo)
    return stamped


def stamps(params: dict, memo: str | Path | None = None) -> tuple[dict, dict, dict]:
    """What check_params writes, each source stamped once:
    - data/source_stamp.json, what load_chunks depends on: load.source;
    - data/store_stamp.json, what retrieve depends on: each store that
      retrieval.method store searches, in the retrieval section or any panel system, by address, so
      a rebuilt index re-runs whoever searches it; constant where no system searches a store;
    - data/stored_vectors_stamp.json, what embed_corpus depends on besides the chunks: load.source
      when embed.corpus_vectors is stored; constant otherwise, so an edit to a source's queries or
      documents that leaves the chunks alone never re-runs embed_corpus."""
    unused, memo = {"source": None}, Path(memo) if memo else None
    source = params["load"]["source"]
    source_stamped = source_stamp(source, memo)
    systems = [params["retrieval"], *params.get("panel", {}).values()]
    searched = sorted({system["store"]["address"] for system in systems if system["method"] == "store"})
    store_stamped = {
        address: source_stamped if address == source else source_stamp(address, memo) for address in searched
    }
    vectors_stamped = source_stamped if params["embed"]["corpus_vectors"] == "stored" else unused
    return source_stamped, store_stamped or unused, vectors_stamped


def model_stamp(model: str, memo: Path | None = None) -> dict:
    """The stamp of a model named by a local folder: a digest of the files that decide its outputs
    (model_source.model_files), remembered while their names, sizes and times stay. A model named on
    the hub or bundled is stamped by name: its identity there does not change under the name."""
    root = Path(model)
    if not root.is_dir():
        return {"model": model, "kind": "by name"}
    files, digest = _memoized_content_digest(root, memo, lambda folder: model_files(str(folder)))
    return {"model": model, "kind": "local folder", "files": files, "md5": digest}


def model_stamps(params: Mapping[str, Any], memo: Path | None = None) -> dict[str, dict]:
    """data/model_stamps/<embedder>.json, what an embedder's embed stages depend on besides its
    settings: a local model folder retrained in place (new weights, the same path) changed no
    param, and the stages kept vectors of the old model unsaid."""
    return {paths.model_stamp_of(name): model_stamp(own["model"], memo) for name, own in params["embedders"].items()}


def panel_settings(params: Mapping[str, Any], memo: Path | None = None) -> dict[str, dict]:
    """data/panel_settings/<system>.json, what retrieve depends on per system: the resolved
    settings its method reads (method_settings) and the stamps of its external_inputs outside runs/ (DVC's dependency) that
    no system exports (retrieve writes those): edited in place, such a run file or module went
    stale unsaid. Each is a regular file or folder, or missing (retrieve says so), else one line
    naming the key the user wrote (retrieval.X, or panel.NAME.X)."""
    panel = params["panel"]
    exports = {os.path.normpath(s["trec_export"]) for s in panel.values() if s.get("trec_export")}
    out = {}
    for system, resolved in panel.items():
        stamped = {}
        for path in external_inputs(resolved):
            # `runs.plug:search` names runs/ itself (and runs.py, which the package shadows)
            inside = (
                os.path.normpath(path).split(os.sep)[0] == paths.EXTERNAL_RUNS or path == f"{paths.EXTERNAL_RUNS}.py"
            )
            if inside or os.path.normpath(path) in exports:
                continue
            try:  # a module may be a package folder; a run file is a file
                check_regular(path, folder_ok=resolved["method"] == "python")
            except FileNotFoundError:
                pass  # stamped missing: the module may be installed, the run file is retrieve's error
            except InputError as error:
                key = f"{settings_key(params, system)}.{resolved['method'].replace('-', '_')}"
                raise InputError(f"{key}: {error}") from None
            stamped[path] = source_stamp(path, memo)
        own = method_settings(resolved) | ({"external_inputs": stamped} if stamped else {})
        if resolved["method"] == "rerank" and Path(resolved["rerank"]["model"]).is_dir():  # retrained in place
            own["rerank_model_files"] = model_stamp(resolved["rerank"]["model"], memo)
        out[paths.settings_of(system)] = own
    return out
