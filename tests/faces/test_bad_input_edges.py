"""Bad input on the edges (issue 28, items 4, 5, 6, 9 and 18): names that only look local, redirects,
paths that are not files, missing extras, and the messages a user acts on. Each ends in one line,
at once, with nothing sent where the user did not point it."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import warnings
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from conftest import run, set_params, tool_env
from llm_helpers import jobs_for, settings
from stub_llm import StubLLM

from retrieval_bench import stores as stores_package
from retrieval_bench.core.endpoints import check_ray_address, may_receive_key
from retrieval_bench.core.errors import InputError
from retrieval_bench.core.store_address import parse_address
from retrieval_bench.corpus.load import load_corpus
from retrieval_bench.goldenset.formats import read_question_set
from retrieval_bench.llm.providers.anthropic import MESSAGES
from retrieval_bench.llm.providers.openai_compatible import CHAT_COMPLETIONS
from retrieval_bench.llm.runs.runner import run as run_jobs
from retrieval_bench.llm.runs.tasks import QUESTIONS
from retrieval_bench.llm.transport.credentials import endpoint_for
from retrieval_bench.llm.transport.errors import StopGeneration
from retrieval_bench.stores import registry
from retrieval_bench.stores.base import STORE_URL_ENV, api_key

# A stage given one of these must stop within this many seconds; a hang is what is tested against,
# so the figure is generous: the check is the one-line error, never the time taken.
HANG_GUARD_S = 300


def one_line(error: pytest.ExceptionInfo) -> str:
    message = str(error.value)
    assert "\n" not in message, message
    return message


# --- item 4: a key goes only to `localhost` itself or a loopback IP literal ----------------------


@pytest.mark.parametrize(
    "url",
    [
        "http://localhost./v1",  # glibc does not read /etc/hosts for `localhost.`: the name goes to DNS
        "http://localhost../v1",
        "http://LOCALHOST.:8000/v1",
        "http://127.0.0.1.:8000/v1",  # not an IP literal: a name, resolved by whoever answers
        "http://[::ffff:127.0.0.1]:8000/v1",  # IPv4-mapped: not ::1, nor in 127.0.0.0/8 as written
    ],
)
def test_a_name_that_only_resolves_locally_by_luck_gets_no_key(url, tmp_path, monkeypatch):
    assert not may_receive_key(url, [])
    assert not may_receive_key(url, [], CHAT_COMPLETIONS.official_hosts)
    with pytest.raises(InputError) as refused:
        endpoint_for(CHAT_COMPLETIONS, url, {"OPENAI_API_KEY": "sk-never-sent", "HOME": str(tmp_path)})
    assert "OPENAI_BASE_URL=" in one_line(refused) and "sk-never-sent" not in str(refused.value)
    monkeypatch.setenv("QDRANT_API_KEY", "qdrant-never-sent")
    monkeypatch.delenv(STORE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    with pytest.raises(InputError, match=STORE_URL_ENV):
        api_key(parse_address(f"qdrant:{url.removesuffix('/v1')}?collection=c"))


@pytest.mark.parametrize("address", ["localhost.:6379", "localhost..:6379"])
def test_a_ray_cluster_at_a_dotted_localhost_is_not_taken_for_this_machine(address, tmp_path):
    with pytest.raises(InputError, match="RETRIEVAL_BENCH_RAY_ADDRESS"):
        check_ray_address(address, {"HOME": str(tmp_path)})
    check_ray_address("localhost:6379", {"HOME": str(tmp_path)})  # the name itself still is


def test_a_dotted_host_the_user_named_is_vouched_for_as_written(tmp_path):
    assert may_receive_key("http://localhost./v1", ["http://localhost./v1"])
    assert not may_receive_key("http://models.example./v1", ["http://models.example/v1"])


# --- item 4: no redirect is followed, so nothing reaches a host the user did not name ----------


class Redirector(ThreadingHTTPServer):
    """A server on 127.0.0.1 that answers every request with a 307 to `target` (same path)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.hits = 0
        super().__init__(("127.0.0.1", 0), _RedirectHandler)
        self.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server_address[1]}"


class _RedirectHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _redirect(self) -> None:
        self.server.hits += 1
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(307)
        self.send_header("Location", self.server.target + self.path)
        self.send_header("Content-Length", "0")
        self.end_headers()

    do_GET = do_POST = _redirect

    def log_message(self, *args) -> None:
        pass


@pytest.fixture
def redirect_to_stub():
    """(the redirector, the stub LLM it points at, on another port of 127.0.0.1)."""
    with StubLLM() as stub:
        server = Redirector(stub.url)
        thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        try:
            yield server, stub
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("provider", ["openai-compatible", "anthropic"])
def test_a_redirect_from_the_endpoint_is_not_followed_and_the_run_stops_naming_it(
    provider, redirect_to_stub, tmp_path, monkeypatch
):
    redirector, stub = redirect_to_stub
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    if provider == "anthropic":
        monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test")
        monkeypatch.setenv("ANTHROPIC_BASE_URL", redirector.url)
        chosen = settings("anthropic", max_retries=2)
    else:
        chosen = settings("openai-compatible", base_url=f"{redirector.url}/v1", max_retries=2)
    meta, jobs = jobs_for(2, provider=provider)
    with pytest.raises(StopGeneration) as stopped:
        run_jobs(QUESTIONS, jobs, meta, chosen, tmp_path / "cache.jsonl")
    message = one_line(stopped)
    assert f"redirecting to {stub.url}" in message and "not followed" in message
    assert redirector.hits >= 1
    assert not stub.requests, f"{len(stub.requests)} requests followed the redirect"


# --- item 5: a path that is not a regular file is refused at once ------------------------------


@pytest.fixture
def fifo(tmp_path) -> Path:
    path = tmp_path / "examples.jsonl"
    os.mkfifo(path)
    return path


@pytest.fixture
def unix_socket(tmp_path):
    path = tmp_path / "chunks.jsonl"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(path))
        yield path


READERS = {
    "hash_file": "retrieval_bench.core.files",
    "read_jsonl": "retrieval_bench.core.files",
    "load_corpus": "retrieval_bench.corpus.load",
    "read_question_set": "retrieval_bench.goldenset.formats",
}
# What a reader that does not check may take of /dev/zero before the guard stops it: a line of it
# grows without end, and it must not take the machine with it.
READER_MEMORY_BYTES = 4 << 30


def _limit_memory() -> None:
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (READER_MEMORY_BYTES, READER_MEMORY_BYTES))


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "unix_socket"])
def test_every_reader_refuses_a_path_that_is_not_a_file(special, request, tmp_path):
    """In a child process, so that a reader that waits on a FIFO or reads /dev/zero for good fails
    the test (at HANG_GUARD_S) instead of hanging the suite."""
    path = request.getfixturevalue(special) if special in ("fifo", "unix_socket") else Path(special)
    script = "import sys\nfrom retrieval_bench.core.errors import InputError\n"
    for reader, module in READERS.items():
        script += (
            f"from {module} import {reader}\ntry:\n    {reader}(sys.argv[1])\n    print({reader!r}, 'read it')\n"
            f"except InputError as error:\n    print({reader!r}, error)\n"
        )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path)],
        env={**tool_env(), "OPENBLAS_NUM_THREADS": "1"},
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
        preexec_fn=_limit_memory,
    )
    assert result.returncode == 0, result.stderr
    said = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert said.keys() == READERS.keys()
    for reader, message in said.items():
        assert message.startswith(f"{path}: expected a file"), f"{reader}: {message}"


def check_params_in(workdir: Path, **changes: object) -> subprocess.CompletedProcess:
    set_params(workdir, **changes)
    return subprocess.run(
        [sys.executable, "-m", "stages.check_params"],
        cwd=workdir,
        env=tool_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=HANG_GUARD_S,
    )


@pytest.mark.parametrize("key", ["generate.style_examples", "load.source"])
@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/stdin"])
def test_check_params_does_not_hang_on_a_fifo_or_a_device(key, special, workdir, request):
    """Observed: generate.style_examples at /dev/zero or a FIFO hung check_params for good."""
    path = str(request.getfixturevalue(special)) if special == "fifo" else special
    result = check_params_in(workdir, **{key: path})
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    assert "expected a file" in lines[0]


# --- item 6: a missing extra is one line naming it ----------------------------------------------


@pytest.mark.parametrize(
    ("engine", "blocked", "extra"),
    [
        ("qdrant", "httpx", "qdrant"),  # observed: ModuleNotFoundError: No module named 'httpx'
        ("qdrant", "qdrant_client", "qdrant"),
        ("chroma", "httpx", "chroma"),
        ("chroma", "chromadb", "chroma"),
        ("lancedb", "lancedb", "lancedb"),
        ("sqlite-vec", "pysqlite3", "sqlite-vec"),
        ("sqlite-vec", "sqlite_vec", "sqlite-vec"),
    ],
)
def test_a_store_without_its_extra_is_one_line_naming_the_extra(engine, blocked, extra, monkeypatch, tmp_path):
    adapter = engine.replace("-", "_")
    for name in [name for name in sys.modules if name == blocked or name.startswith(f"{blocked}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, blocked, None)  # `import <blocked>` fails as if not installed
    monkeypatch.delitem(sys.modules, f"retrieval_bench.stores.{adapter}", raising=False)
    monkeypatch.delattr(stores_package, adapter, raising=False)
    with pytest.raises(InputError) as refused:
        registry.open_store(parse_address(f"{engine}:{tmp_path}/store?collection=c"))
    assert f"a {engine} store needs the {extra} extra" in one_line(refused)
    assert f"pip install -e '.[{extra}]'" in str(refused.value)


@pytest.mark.parametrize(
    ("blocked", "call", "expected"),
    [
        ("onnxruntime", "retrieval_bench.embedding.onnx_export:import_onnxruntime", "the onnx extra"),
        ("openvino", "retrieval_bench.embedding.backends:import_openvino", "the openvino extra"),
        ("ray", "retrieval_bench.embedding.embed_ray:import_ray", "the ray extra"),
    ],
)
def test_an_embedding_extra_that_is_missing_is_one_line_in_a_fresh_process(blocked, call, expected, tmp_path):
    module, function = call.split(":")
    script = f"""
import sys
class NotInstalled:  # finds `{blocked}` as an environment without it does: not at all
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
sys.meta_path.insert(0, NotInstalled())
from retrieval_bench.core.stage import run_stage
from {module} import {function}
run_stage(lambda: {function}())
"""
    result = run([sys.executable, "-c", script], cwd=tmp_path, check=False)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 1 and len(lines) == 1, result.stderr
    assert expected in lines[0] and "pip install -e '.[" in lines[0]


def test_a_project_module_that_fails_to_import_is_not_blamed_on_an_extra(monkeypatch):
    from retrieval_bench.core.errors import optional_extra

    with pytest.raises(ImportError):
        with optional_extra("qdrant", "a qdrant store"):
            raise ImportError("a bug of ours", name="retrieval_bench.stores.base")


# --- item 9: messages that say what was found and what is expected -----------------------------


def test_many_rows_sharing_one_id_say_how_many_rows_and_ids(tmp_path):
    """Observed: "1 duplicate ids" for 100,000 rows sharing one id."""
    path = tmp_path / "chunks.jsonl"
    path.write_text("".join(f'{{"id": "x", "text": "chunk {i}"}}\n' for i in range(1000)))
    with pytest.raises(InputError) as refused:
        load_corpus(path)
    assert "1000 rows share 1 id: 'x' (1000 times)" in one_line(refused)
    path.write_text(
        '{"id": "a", "text": "1"}\n{"id": "b", "text": "2"}\n{"id": "a", "text": "3"}\n{"id": "b", "text": "4"}\n'
    )
    with pytest.raises(InputError, match=r"4 rows share 2 ids: 'a' \(2 times\), 'b' \(2 times\)"):
        load_corpus(path)


@pytest.mark.parametrize(
    ("name", "content", "expected"),
    [
        (
            "questions.csv",
            b"question,evidence\nhow?,here\n",
            [
                "questions.csv:1: not a known question set",
                "user_input and reference_contexts",
                "['question', 'evidence']",
            ],
        ),
        ("questions.csv", b"", ["questions.csv: empty; a question set holds at least one question"]),
        ("questions.csv", b"user_input,reference_contexts\ncaf\xe9,[]\n", ["questions.csv:2: not UTF-8 text"]),
        (
            "questions.json",
            b'{"questions": {}, "docs": {}}',
            ["a LlamaIndex EmbeddingQAFinetuneDataset", "keys found: ['questions', 'docs']"],
        ),
        ("questions.json", b"[1, 2]", ["queries, corpus, relevant_docs are mappings; got a list"]),
        ("questions.json", b'{"queries": "caf\xe9"}', ["questions.json:1: not UTF-8 text"]),
    ],
)
def test_a_question_set_of_an_unknown_shape_names_what_was_found(name, content, expected, tmp_path):
    path = tmp_path / name
    path.write_bytes(content)
    with pytest.raises(InputError) as refused:
        read_question_set(path)
    message = one_line(refused)
    for fragment in expected:
        assert fragment in message


def test_a_qdrant_refusal_with_a_key_over_http_is_one_line_and_no_warning(monkeypatch):
    """Observed: qdrant-client's "Api key is used with an insecure connection" beside the one line."""
    monkeypatch.setenv("QDRANT_API_KEY", "s3cret-qdrant-key")
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(InputError) as refused:
            registry.open_store(parse_address(f"qdrant:http://127.0.0.1:{port}?collection=chunks"))
    assert f"127.0.0.1:{port}" in one_line(refused)
    assert not [str(w.message) for w in caught if "qdrant" in (w.filename or "")], [str(w.message) for w in caught]


# --- item 18: HTML documents are read; other files are counted; free routes named -----------


def test_html_pages_are_read_as_their_text_and_other_files_are_counted(tmp_path):
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "a.md").write_text("Markdown page about the write-ahead log. " * 5)
    (docs / "b.html").write_text(
        "<html><head><title>T</title><style>p {color: red}</style></head><body>"
        "<h1>Checkpoints</h1><p>A checkpoint copies pages &amp; frees the log.</p>"
        "<script>var x = 1;</script><p>Second   paragraph.</p></body></html>"
    )
    (docs / "c.htm").write_text("<p>Short page.</p>")
    (docs / "d.pdf").write_bytes(b"%PDF-1.4")
    (docs / "e.pdf").write_bytes(b"%PDF-1.4")
    (docs / "f.docx").write_bytes(b"PK")
    corpus = load_corpus(docs)
    texts = dict(zip(corpus.documents["doc_id"], corpus.documents["text"]))
    assert texts["b.html"] == "Checkpoints\n\nA checkpoint copies pages & frees the log.\n\nSecond paragraph."
    assert texts["c.htm"] == "Short page."
    assert "skipped 3 files that are not .md, .txt, .html, .htm documents: .pdf: 2, .docx: 1" in corpus.notes


def test_a_folder_with_no_document_says_what_it_holds(tmp_path):
    (tmp_path / "x.pdf").write_bytes(b"%PDF")
    with pytest.raises(InputError, match=r"no \.md, \.txt, \.html, \.htm documents found \(files found: \.pdf: 1\)"):
        load_corpus(tmp_path)


@pytest.mark.parametrize(
    ("make", "section", "routes"),
    [
        (lambda env: endpoint_for(MESSAGES, None, env), "generate", ["generate.handwritten", "localhost:11434"]),
        (lambda env: endpoint_for(MESSAGES, None, env, "judge"), "judge", ["judge.provider none", "judge.base_url"]),
        (
            lambda env: endpoint_for(CHAT_COMPLETIONS, None, env),
            "generate",
            ["generate.provider none", "generate.base_url"],
        ),
    ],
)
def test_the_no_key_line_names_the_free_routes(make, section, routes, tmp_path):
    with pytest.raises(InputError) as refused:
        make({"HOME": str(tmp_path)})
    message = one_line(refused)
    assert "free routes" in message and f"{section}.provider openai-compatible" in message
    for route in routes:
        assert route in message


def test_check_params_refuses_a_bad_html_skip_whatever_the_corpus(workdir):
    """check_params passed `load.html_skip: "div p"`, and a corpus without HTML pages never said so."""
    result = check_params_in(workdir, **{"load.html_skip": "div p"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "error: load.html_skip: 'div p' is not a selector this reader takes: a tag, .class, #id or [attr=value], "
        "combined without spaces (div.navheader), comma-separated"
    )


def test_check_params_refuses_a_missing_hand_written_file_before_any_stage_runs(workdir):
    """check_params passed it; `dvc repro` then ran load_chunks and both chunk stages before
    generate_goldenset failed on "[Errno 2] No such file or directory"."""
    result = check_params_in(workdir, **{"generate.handwritten": "exports/empty.jsonl"})
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert result.stderr.strip() == (
        "error: generate.handwritten: exports/empty.jsonl: no such file (name an existing file; an empty one holds "
        "no questions)"
    )
