"""Bad input on the store surfaces (load.source and retrieval.store.* addresses, options, engines,
collections, fields, ids, vectors): each is exit 1 with exactly one `error:` line naming the key or
address and what was expected, no traceback, and the outputs of the last good run left as they were."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from conftest import set_params
from stage_helpers import assert_one_line_error, stage_in_process
from store_helpers import unit

from retrieval_bench.core.store_address import parse_address
from retrieval_bench.stores import registry

ROWS, DIM = 6, 8


def _chunks(ids: list[str], vectors: np.ndarray | None = None):
    vectors = unit(np.random.default_rng(len(ids)).normal(size=(len(ids), DIM))) if vectors is None else vectors
    return (
        ids,
        [f"text of {chunk_id}" for chunk_id in ids],
        [{"doc_id": f"d{i % 2}.md"} for i in range(len(ids))],
        vectors,
    )


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> Path:
    """One folder of stores: `docs` in every engine, and the odd ones the cases below read."""
    root = tmp_path_factory.mktemp("stores")
    good = _chunks([f"c{i}" for i in range(ROWS)])
    nan, inf, zero = good[3].copy(), good[3].copy(), good[3].copy()
    nan[2, 0], inf[4, 1], zero[1] = np.nan, np.inf, 0.0
    built = {
        "chroma:{s}/chroma?collection=docs": good,
        "chroma:{s}/chroma?collection=empty": _chunks([]),
        "lancedb:{s}/store.lancedb?table=docs": good,
        "lancedb:{s}/store.lancedb?table=blank_id": _chunks(["c0", ""]),
        "qdrant:{s}/qdrant?collection=docs": good,
        "qdrant:{s}/qdrant?collection=empty": _chunks([]),
        "sqlite-vec:{s}/store.db?table=docs": good,
        "sqlite-vec:{s}/store.db?table=nan": (*good[:3], nan),
        "sqlite-vec:{s}/store.db?table=inf": (*good[:3], inf),
        "sqlite-vec:{s}/store.db?table=zero": (*good[:3], zero),
    }
    for text, chunks in built.items():
        registry.create_collection(parse_address(text.format(s=root)), *chunks, None)
    (root / "notadb.db").write_text("not an SQLite file\n")
    for engine, folder in (("chroma", "chroma"), ("lancedb", "store.lancedb"), ("qdrant", "qdrant")):
        shutil.copytree(root / folder, root / f"damaged-{folder}")
    (root / "damaged-qdrant" / "collection" / "docs" / "storage.sqlite").write_bytes(b"garbage")
    with open(root / "damaged-chroma" / "chroma.sqlite3", "r+b") as handle:  # past the header: a page
        handle.seek(8192)
        handle.write(bytes(range(256)) * 16)
    for data in (root / "damaged-store.lancedb" / "docs.lance" / "data").glob("*"):
        data.write_bytes(np.random.default_rng(0).bytes(100))
    return root


# (params changes with {s} for the stores folder, fragments of the one error line)
CASES = {
    # damaged stores (a review, 2026-12-06): each was the engine's traceback
    "damaged qdrant storage": (
        {"load.source": "qdrant:{s}/damaged-qdrant?collection=docs"},
        ["damaged-qdrant?collection=docs: ", "DatabaseError: file is not a database"],
    ),
    "damaged chroma database": (
        {"load.source": "chroma:{s}/damaged-chroma?collection=docs"},
        ["damaged-chroma?collection=docs: ", "chroma.sqlite3 is damaged (SQLite's check: ", "restore the store"],
    ),
    "damaged lancedb data": (
        {"load.source": "lancedb:{s}/damaged-store.lancedb?table=docs"},
        ["damaged-store.lancedb?collection=docs: cannot read the table (ArrowInvalid: "],
    ),
    "empty location": (
        {"load.source": "chroma:?collection=docs"},
        ["load.source 'chroma:': needs a path or URL and ?collection=<name>"],
    ),
    "no collection": (
        {"load.source": "qdrant:{s}/qdrant"},
        ["load.source", "needs a path or URL and ?collection=<name>"],
    ),
    "unknown option": (
        {"load.source": "lancedb:{s}/store.lancedb?table=docs&colour=red"},
        ["unknown option 'colour' (valid: collection, "],
    ),
    "credentials in the URL": (
        {"load.source": "chroma:http://me:pw@127.0.0.1:1?collection=docs"},
        ["load.source: credentials do not belong in a store address"],
    ),
    "zero timeout": (
        {"load.source": "qdrant:http://127.0.0.1:1?collection=docs&timeout=0"},
        ["?timeout= must be a positive number of seconds, got '0'"],
    ),
    "NaN timeout": (
        {"load.source": "chroma:http://127.0.0.1:1?collection=docs&timeout=nan"},
        ["?timeout= must be a positive number of seconds, got 'nan'"],
    ),
    "word timeout": (
        {"load.source": "chroma:http://127.0.0.1:1?collection=docs&timeout=soon"},
        ["?timeout= must be a positive number"],
    ),
    "negative timeout": (
        {"retrieval.store.address": "qdrant:{s}/qdrant?collection=docs&timeout=-1"},
        ["retrieval.store.address", "?timeout= must be a positive number of seconds, got '-1'"],
    ),
    "unknown engine": (
        {"retrieval.store.address": "mongo:{s}/m?collection=docs"},
        [
            "retrieval.store.address 'mongo:",
            "not a store address (expected chroma|lancedb|qdrant|sqlite-vec:<path or URL>",
        ],
    ),
    "address not text": (
        {"retrieval.store.address": 42},
        ["retrieval.store.address must be a store address or null (= load.source), got 42"],
    ),
    "store method without a store": (
        {"retrieval.method": "store"},
        ["retrieval.method store needs retrieval.store.address"],
    ),
    "stored vectors from a folder": (
        {"embed.corpus_vectors": "stored"},
        ["embed.corpus_vectors stored needs load.source to be a vector store address"],
    ),
    "search not a mapping": (
        {"retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs", "retrieval.store.search": "fast"},
        ["retrieval.store.search must be a mapping of the engine's query parameters or null, got 'fast'"],
    ),
    "negative nprobes": (
        {"retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs", "retrieval.store.search": {"nprobes": -1}},
        ["retrieval.store.search.nprobes must be a positive integer, got -1"],
    ),
    "zero refine_factor": (
        {
            "retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs",
            "retrieval.store.search": {"refine_factor": 0},
        },
        ["retrieval.store.search.refine_factor must be a positive integer, got 0"],
    ),
    "fractional ef": (
        {"retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs", "retrieval.store.search": {"ef": 1.5}},
        ["retrieval.store.search.ef must be a positive integer, got 1.5"],
    ),
    "boolean nprobes": (
        {
            "retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs",
            "retrieval.store.search": {"nprobes": True},
        },
        ["retrieval.store.search.nprobes must be a positive integer, got True"],
    ),
    "text switch": (
        {
            "retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs",
            "retrieval.store.search": {"fast_search": "yes"},
        },
        ["retrieval.store.search.fast_search must be true or false, got 'yes'"],
    ),
    "unknown LanceDB parameter": (
        {
            "retrieval.store.address": "lancedb:{s}/store.lancedb?table=docs",
            "retrieval.store.search": {"ef_search": 64},
        },
        ["retrieval.store.search: lancedb has no query parameter 'ef_search' (valid: nprobes, "],
    ),
    "Chroma search parameter": (
        {"retrieval.store.address": "chroma:{s}/chroma?collection=docs", "retrieval.store.search": {"ef": 10}},
        ["retrieval.store.search: chroma takes no query parameters"],
    ),
    "sqlite-vec search parameter": (
        {"retrieval.store.address": "sqlite-vec:{s}/store.db?table=docs", "retrieval.store.search": {"k": 10}},
        ["retrieval.store.search: sqlite-vec takes no query parameters"],
    ),
    "missing Chroma folder": (
        {"load.source": "chroma:{s}/nowhere?collection=docs"},
        ["/nowhere?collection=docs: no Chroma store in "],
    ),
    "missing LanceDB folder": ({"load.source": "lancedb:{s}/nowhere.lancedb?table=docs"}, ["no LanceDB database at "]),
    "missing Qdrant folder": ({"load.source": "qdrant:{s}/nowhere?collection=docs"}, ["no Qdrant local storage at "]),
    "missing SQLite file": ({"load.source": "sqlite-vec:{s}/nowhere.db?table=docs"}, ["no SQLite file at "]),
    "not an SQLite file": (
        {"load.source": "sqlite-vec:{s}/notadb.db?table=docs"},
        ["notadb.db?collection=docs: cannot read the table"],
    ),
    "missing Chroma collection": (
        {"load.source": "chroma:{s}/chroma?collection=nope"},
        ["no collection 'nope' (collections there: docs, empty)"],
    ),
    "missing LanceDB table": (
        {"load.source": "lancedb:{s}/store.lancedb?table=nope"},
        ["no table 'nope' (tables there: blank_id, docs)"],
    ),
    "missing Qdrant collection": (
        {"load.source": "qdrant:{s}/qdrant?collection=nope"},
        ["no collection 'nope' (collections there: docs, empty)"],
    ),
    "missing sqlite-vec table": (
        {"load.source": "sqlite-vec:{s}/store.db?table=nope"},
        ["no table 'nope' in the database"],
    ),
    "wrong LanceDB text column": (
        {"load.source": "lancedb:{s}/store.lancedb?table=docs&text=body"},
        ["no column 'body'; columns: id, text, doc_id, vector"],
    ),
    "wrong LanceDB id column": ({"load.source": "lancedb:{s}/store.lancedb?table=docs&id=key"}, ["no column 'key'"]),
    "wrong sqlite-vec text column": (
        {"load.source": "sqlite-vec:{s}/store.db?table=docs&text=body"},
        ["no text column 'body' (columns: "],
    ),
    "wrong sqlite-vec id column": (
        {"load.source": "sqlite-vec:{s}/store.db?table=docs&id=key"},
        ["no id column 'key' (columns: "],
    ),
    "wrong Qdrant text field": (
        {"load.source": "qdrant:{s}/qdrant?collection=docs&text=body"},
        ["has no text in payload field 'body'"],
    ),
    "wrong Chroma text field": (
        {"load.source": "chroma:{s}/chroma?collection=docs&text=body"},
        ["has no text in its metadata field 'body'"],
    ),
    "named vector on an unnamed one": (
        {"load.source": "qdrant:{s}/qdrant?collection=docs&vector=dense"},
        ["the collection has one unnamed vector; drop ?vector=dense"],
    ),
    "wrong sqlite-vec vector column": (
        {"load.source": "sqlite-vec:{s}/store.db?table=docs&vector=dense"},
        ["no vector column 'dense'"],
    ),
    "empty Qdrant collection": (
        {"load.source": "qdrant:{s}/qdrant?collection=empty"},
        ["?collection=empty: the collection holds no chunks"],
    ),
    "empty Chroma collection": (
        {"load.source": "chroma:{s}/chroma?collection=empty"},
        ["?collection=empty: the collection holds no chunks"],
    ),
    "blank chunk id": ({"load.source": "lancedb:{s}/store.lancedb?table=blank_id"}, ["chunk id", "non-empty string"]),
    "LanceDB at a server": (
        {"load.source": "lancedb:http://127.0.0.1:1?table=docs"},
        ["LanceDB is read from a database folder"],
    ),
    "sqlite-vec at a server": (
        {"load.source": "sqlite-vec:http://127.0.0.1:1?table=docs"},
        ["sqlite-vec has no server"],
    ),
    "Chroma server down": (
        {"load.source": "chroma:http://127.0.0.1:1?collection=docs"},
        ["chroma:http://127.0.0.1:1?collection=docs: cannot reach the Chroma server"],
    ),
    "Qdrant server down": (
        {"load.source": "qdrant:http://127.0.0.1:1?collection=docs"},
        ["qdrant:http://127.0.0.1:1?collection=docs: cannot reach the collection"],
    ),
}


PROGRESS = re.compile(
    r"^(load \S+|read \S+ vectors): .*(\d+%\||\d+chunk \[)"
)  # a store's progress bar, started before the error


def assert_one_error(result: subprocess.CompletedProcess, *fragments: str) -> None:
    """test_bad_input's one-line check on stderr without the progress bars of the reading that failed."""
    lines = [line for line in result.stderr.splitlines() if line.strip() and not PROGRESS.match(line)]
    assert "Traceback" not in result.stderr
    assert_one_line_error(
        subprocess.CompletedProcess(result.args, result.returncode, result.stdout, "\n".join(lines)), *fragments
    )


@pytest.fixture
def last_good(workdir, monkeypatch, capsys) -> dict[str, bytes]:
    """load_chunks run once on the folder corpus: the outputs a bad run must leave as they are."""
    assert stage_in_process("load_chunks", workdir, monkeypatch, capsys).returncode == 0
    return {path.name: path.read_bytes() for path in (workdir / "data").glob("*.parquet")}


def _formatted(value, stores: Path):
    if isinstance(value, str):
        return value.replace("{s}", str(stores))
    return value


@pytest.mark.parametrize("case", sorted(CASES))
def test_bad_store_input_is_one_line_and_keeps_the_last_good_outputs(
    case, stores, workdir, last_good, monkeypatch, capsys
):
    changes, fragments = CASES[case]
    set_params(workdir, **{key: _formatted(value, stores) for key, value in changes.items()})
    result = stage_in_process("load_chunks", workdir, monkeypatch, capsys)
    assert_one_error(result, *fragments)
    assert {path.name: path.read_bytes() for path in (workdir / "data").glob("*.parquet")} == last_good


@pytest.mark.parametrize(
    "table, fragments",
    [
        (
            "nan",
            [
                "embed.corpus_vectors stored: the vector of chunk 'c2' in sqlite-vec:",
                "is not finite (NaN or infinite values)",
            ],
        ),
        ("inf", ["embed.corpus_vectors stored: the vector of chunk 'c4' in sqlite-vec:", "is not finite"]),
        (
            "zero",
            [
                "the vector of chunk 'c1' in sqlite-vec:",
                "?collection=zero is all zeros; it cannot be compared by cosine",
            ],
        ),
    ],
)
def test_bad_stored_vectors_are_one_line_and_write_nothing(table, fragments, stores, workdir, monkeypatch, capsys):
    set_params(workdir, **{"load.source": f"sqlite-vec:{stores}/store.db?table={table}"})
    for name in ("load_chunks", "chunk"):
        assert stage_in_process(name, workdir, monkeypatch, capsys).returncode == 0
    set_params(workdir, **{"embed.corpus_vectors": "stored"})
    result = stage_in_process("embed_corpus", workdir, monkeypatch, capsys)
    assert_one_error(result, *fragments)
    assert not (workdir / "data" / "embeddings").exists()
