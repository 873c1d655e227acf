"""The store surfaces' guards: a store API key goes only to a host the user vouched for outside git
(a header collector on this machine, reached under its non-loopback address, never sees it); a
server that accepts and never answers is one line after the address's timeout; the README's
relative Chroma path passes check_params; Chroma's search says a run is one draw of it."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterator

import numpy as np
import pandas as pd
import pytest
from conftest import set_params
from stage_helpers import assert_one_line_error, stage, stage_in_process
from store_helpers import own_address, random_chunks

from retrieval_bench.core import paths
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.embedding.stored_vectors import read_vectors
from retrieval_bench.retrieval import store_search
from retrieval_bench.retrieval.run import Corpus, Questions
from retrieval_bench.retrieval.settings import RetrievalSettings
from retrieval_bench.stores import registry
from retrieval_bench.stores.base import STORE_URL_ENV, api_key

SECRET = "sk-store-secret-for-the-collector"
KEYS = {"chroma": ("CHROMA_API_KEY", "x-chroma-token"), "qdrant": ("QDRANT_API_KEY", "api-key")}


class Collector(ThreadingHTTPServer):
    """An HTTP server on every interface that records each request's headers and answers 404."""

    daemon_threads = True

    def __init__(self) -> None:
        self.headers: list[dict[str, str]] = []
        super().__init__(("0.0.0.0", 0), CollectingHandler)

    def received(self, header: str) -> list[str]:
        return [headers[header] for headers in self.headers if header in headers]


class CollectingHandler(BaseHTTPRequestHandler):
    def _collect(self) -> None:
        self.server.headers.append({name.lower(): value for name, value in self.headers.items()})
        body = b'{"error": "NotFound", "message": "a header collector"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _collect

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[Collector]:
    server = Collector()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def elsewhere(collector) -> str:
    """The collector's URL under this machine's non-loopback address: another host, as far as a rule goes."""
    host = own_address()
    if host is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    return f"http://{host}:{collector.server_address[1]}"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No store URL vouched for: no RETRIEVAL_BENCH_STORE_URL, an empty config folder."""
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    return tmp_path / "config" / "retrieval-bench" / "endpoints"


@pytest.mark.parametrize("engine", sorted(KEYS))
def test_a_store_key_is_not_sent_to_a_host_params_yaml_chose(
    workdir, collector, elsewhere, clean_env, engine, monkeypatch, capsys
):
    variable, header = KEYS[engine]
    monkeypatch.setenv(variable, SECRET)
    source = f"{engine}:{elsewhere}?collection=docs"
    set_params(workdir, **{"load.source": source})
    result = stage_in_process("load_chunks", workdir, monkeypatch, capsys)
    assert_one_line_error(
        result,
        f"error: {source}: {variable} is set, and a key from your environment is only sent to a loopback host",
        f"export {STORE_URL_ENV}={elsewhere} (or add it to {clean_env})",
        f"or unset {variable}",
    )
    assert collector.received(header) == [] and SECRET not in json.dumps(collector.headers)
    assert SECRET not in result.stdout + result.stderr
    assert not (workdir / paths.DOCUMENTS).exists() and not (workdir / paths.SOURCE_CHUNKS).exists()


def searching(address: str) -> RetrievalSettings:
    """Method store's settings, searching the store at `address` 10 deep."""
    store = {"address": address, "search": None, "filter": None}
    return RetrievalSettings.from_params({**DEFAULTS["retrieval"], "method": "store", "depth": 10, "store": store})


SURFACES = {
    "load.source": lambda address: registry.open_store(address),
    "embed stored vectors": lambda address: read_vectors(address, ["c0"]),
    "retrieval.store.address": lambda address: store_search.retrieve(
        Questions(["q1"], ["what"], np.ones((1, 8), dtype=np.float32)),
        Corpus(["c0"], ["text"]),
        searching(str(address)),
        10,
    ),
}


@pytest.mark.parametrize("surface", sorted(SURFACES))
@pytest.mark.parametrize("engine", sorted(KEYS))
def test_every_store_surface_keeps_the_key_from_an_unvouched_host(
    collector, elsewhere, clean_env, engine, surface, monkeypatch
):
    variable, header = KEYS[engine]
    monkeypatch.setenv(variable, SECRET)
    with pytest.raises(
        InputError, match=f"{variable} is set, and a key from your environment is only sent to a loopback host"
    ):
        SURFACES[surface](parse_address(f"{engine}:{elsewhere}?collection=docs"))
    assert collector.received(header) == []


@pytest.mark.parametrize("vouched", ["loopback", "environment", "config file"])
@pytest.mark.parametrize("engine", sorted(KEYS))
def test_the_key_still_goes_where_the_user_vouched_for_it(
    collector, elsewhere, clean_env, engine, vouched, monkeypatch
):
    variable, header = KEYS[engine]
    monkeypatch.setenv(variable, SECRET)
    url = elsewhere
    if vouched == "loopback":
        url = f"http://127.0.0.1:{collector.server_address[1]}"
    elif vouched == "environment":
        monkeypatch.setenv(STORE_URL_ENV, url)
    else:
        clean_env.parent.mkdir(parents=True)
        clean_env.write_text(f"# my store\n{url}/  # the collector\n")
    with pytest.raises(InputError) as refused:  # a collector is no store: it answers 404
        registry.open_store(parse_address(f"{engine}:{url}?collection=docs"))
    assert "is set, and a key" not in str(refused.value) and SECRET not in str(refused.value)
    assert SECRET in collector.received(header)


# Chroma's own client auth, read by its Settings from the environment or a .env file: a bearer token.
CHROMA_AUTH = {
    "CHROMA_CLIENT_AUTH_PROVIDER": "chromadb.auth.token_authn.TokenAuthClientProvider",
    "CHROMA_CLIENT_AUTH_CREDENTIALS": SECRET,
}


@pytest.fixture
def no_chroma_env(monkeypatch) -> None:
    for name in ("CHROMA_API_KEY", *CHROMA_AUTH):
        monkeypatch.delenv(name, raising=False)


def test_chromas_own_auth_credentials_go_only_where_a_store_key_may(
    collector, elsewhere, clean_env, no_chroma_env, monkeypatch
):
    for name, value in CHROMA_AUTH.items():
        monkeypatch.setenv(name, value)
    address = parse_address(f"chroma:{elsewhere}?collection=docs")
    with pytest.raises(
        InputError,
        match="CHROMA_CLIENT_AUTH_CREDENTIALS is set, and a key from your environment is only sent to a loopback host",
    ):
        registry.open_store(address)
    assert SECRET not in json.dumps(collector.headers)
    monkeypatch.setenv(STORE_URL_ENV, elsewhere)
    with pytest.raises(InputError) as refused:  # a collector is no store: it answers 404
        registry.open_store(address)
    assert SECRET not in str(refused.value) and f"Bearer {SECRET}" in collector.received("authorization")


def test_a_dot_env_file_in_the_working_directory_reaches_no_chroma_client(
    collector, elsewhere, clean_env, no_chroma_env, tmp_path, monkeypatch
):
    """A .env in the project (a pull request can add one) neither sends credentials to the server
    params.yaml names nor turns a store written to a folder into one sent to a server."""
    host, port = elsewhere.removeprefix("http://").split(":")
    server = {"CHROMA_API_IMPL": "chromadb.api.fastapi.FastAPI", "CHROMA_SERVER_HOST": host}
    lines = {**CHROMA_AUTH, **server, "CHROMA_SERVER_HTTP_PORT": port}
    (tmp_path / ".env").write_text("".join(f"{name}={value}\n" for name, value in lines.items()))
    monkeypatch.chdir(tmp_path)
    with pytest.raises(InputError):  # a collector is no store: it answers 404
        registry.open_store(parse_address(f"chroma:{elsewhere}?collection=docs"))
    assert collector.headers and SECRET not in json.dumps(collector.headers)
    collector.headers.clear()
    ids, texts, metadata, vectors, _ = random_chunks(3)
    folder = tmp_path / "store"
    registry.create_collection(parse_address(f"chroma:{folder}?collection=docs"), ids, texts, metadata, vectors, None)
    assert collector.headers == [] and (folder / "chroma.sqlite3").is_file()


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A port that accepts connections (the kernel's backlog) and never answers a request."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize("engine", ["chroma", "qdrant"])
def test_a_server_that_never_answers_is_one_line_after_the_timeout(workdir, silent_server, engine):
    source = f"{engine}:{silent_server}?collection=docs&timeout=0.5"
    set_params(workdir, **{"load.source": source})
    result = stage("load_chunks", workdir)  # a subprocess: exit status and stderr as a user sees them
    assert_one_line_error(result, f"error: {parse_address(source)}: ")
    assert "Traceback" not in result.stderr
    assert not (workdir / paths.DOCUMENTS).exists() and not (workdir / paths.SOURCE_CHUNKS).exists()
    waited = {
        "chroma": "the Chroma server did not answer within 0.5 s",
        "qdrant": "the Qdrant server did not answer within 1 s",
    }[engine]
    assert f"{waited} (for a slow server, raise ?timeout=<seconds> in the address)" in result.stderr


def test_the_readme_relative_chroma_path_passes_check_params(workdir, monkeypatch, capsys):
    ids, texts, metadata, vectors, _ = random_chunks(1)
    documents = [
        {"doc_id": record["doc_id"]} for record in metadata
    ]  # no offsets: each chunk stands in its document alone
    registry.create_collection(
        parse_address(f"chroma:{workdir}/stores/chroma?collection=docs"), ids, texts, documents, vectors, None
    )
    set_params(workdir, **{"load.source": "chroma:stores/chroma?collection=docs"})
    for name in ("check_params", "load_chunks"):
        result = stage_in_process(name, workdir, monkeypatch, capsys)
        assert result.returncode == 0, result.stderr
    stamp = json.loads((workdir / paths.SOURCE_STAMP).read_text())
    assert stamp["kind"] == "local store" and stamp["rows"] == len(ids)


@pytest.mark.parametrize("engine", ["chroma", "lancedb"])
def test_a_chroma_store_run_says_it_is_one_draw(engine, tmp_path, capsys):
    ids, texts, metadata, vectors, queries = random_chunks(2)
    key = "collection" if engine == "chroma" else "table"
    address = f"{engine}:{tmp_path / engine}?{key}=docs"
    registry.create_collection(parse_address(address), ids, texts, metadata, vectors, None)
    settings = searching(address)
    questions, corpus = (
        Questions([f"q{i}" for i in range(len(queries))], ["?"] * len(queries), queries),
        Corpus(ids, texts, vectors),
    )
    capsys.readouterr()
    run = store_search.retrieve(questions, corpus, settings, 10)
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    info = store_search.run_info(settings, questions, corpus, run)
    if engine == "chroma":
        assert (
            len(warnings) == 1 and "differs between processes" in warnings[0] and "this run is one draw" in warnings[0]
        )
        assert "this run is one draw" in info["one_draw"]
    else:
        assert warnings == [] and "one_draw" not in info


@pytest.mark.parametrize(("engine", "port"), [("qdrant", 6333), ("chroma", 8000)])
def test_a_server_url_without_a_port_is_vouched_for_at_the_port_the_client_uses(clean_env, engine, port, monkeypatch):
    """The client connects to the engine's port (Qdrant 6333, Chroma 8000), not the scheme's 80: the
    user vouching for http://store.internal vouches for nothing there, http://store.internal:<port> does."""
    variable, _ = KEYS[engine]
    monkeypatch.setenv(variable, SECRET)
    address = parse_address(f"{engine}:http://store.internal?collection=c")
    assert address.location == f"http://store.internal:{port}"
    monkeypatch.setenv(STORE_URL_ENV, "http://store.internal")
    with pytest.raises(InputError, match=f"export {STORE_URL_ENV}=http://store.internal:{port} "):
        api_key(address)
    monkeypatch.setenv(STORE_URL_ENV, f"http://store.internal:{port}")
    assert api_key(address) == SECRET


def test_a_stores_chunks_without_offsets_join_their_document_in_numeric_id_order_and_it_is_said(tmp_path):
    """ids manual-1 .. manual-11 of one document were joined 1, 10, 11, 2, ...: the document the
    other chunkings and the generated questions are cut from was shuffled without a word."""
    from retrieval_bench.corpus.store_source import load_store_corpus

    n = 11
    ids = [f"manual-{i}" for i in range(1, n + 1)]
    texts = [f"Step {i} of the manual." for i in range(1, n + 1)]
    vectors = np.eye(n, 16, dtype=np.float32)
    address = f"sqlite-vec:{tmp_path / 'chunks.db'}?collection=manual"
    registry.create_collection(parse_address(address), ids, texts, [{"doc_id": "manual.md"}] * n, vectors, None)
    corpus = load_store_corpus(address)
    assert corpus.documents["text"][0] == "\n\n".join(texts)
    assert any("no offsets" in note and "numeric order" in note for note in corpus.notes)
    # a total order, whatever order the store pages them in, numbers of any length
    from retrieval_bench.corpus.store_source import _natural

    ids = pd.Series(["p-1" + "0" * 25, "doc-1", "doc-01", "p-" + "9" * 25])
    assert [ids[i] for i in _natural(ids).argsort()] == ["doc-01", "doc-1", "p-" + "9" * 25, "p-1" + "0" * 25]
