"""The Ray engine (`embed.engine: ray`) for real: a local Ray instance with 2 CPUs, the bundled
model, Ray Data actors. It gives the local engine's vectors, sends Ray only what the cache lacks,
ships the model to a worker that lacks it, ends in one line when an actor is killed mid-run or
raises, with the cache intact (and a rerun embeds only the rest), and `dvc repro` with it gives
the local engine's vectors and metrics."""

from __future__ import annotations

import copy
import dataclasses
import gc
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
from conftest import dvc, read_metrics, set_params, tool_env
from store_helpers import own_address

from retrieval_bench.core import paths
from retrieval_bench.core.endpoints import RAY_ADDRESS_ENV
from retrieval_bench.core.errors import InputError, first_line
from retrieval_bench.core.files import read_jsonl
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.embedding import embed_ray
from retrieval_bench.embedding.embed import QUIET, EmbedProgress, cache_keys, embed_texts
from retrieval_bench.embedding.embedding_cache import EmbeddingCache, read_shards
from retrieval_bench.embedding.model_source import model_fingerprint, resolve_model
from retrieval_bench.embedding.settings import EmbedSettings

WORDS = (
    "page cache journal index btree vacuum checkpoint writer reader lock schema table column row query "
    "planner statistics trigger view transaction savepoint rollback commit pragma wal"
).split()


def corpus(n: int, words: tuple[int, int], seed: int) -> list[str]:
    rng = random.Random(seed)
    return [f"Note {i}: " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(*words))) + "." for i in range(n)]


def settings(engine: str, **ray_options) -> EmbedSettings:
    embed = copy.deepcopy(DEFAULTS["embed"])
    embed.update(engine=engine, batch_size=8)
    embed["ray"].update(batch_size=8, **ray_options)
    return EmbedSettings.from_params(embed)


def test_an_error_message_is_told_by_its_first_non_blank_line():
    """What the engine's one-line errors quote of Ray's exceptions, whose messages may open blank."""
    assert (
        first_line(RuntimeError("\n   The actor died unexpectedly.  \nTraceback ...")) == "The actor died unexpectedly."
    )
    assert first_line(RuntimeError("")) == "RuntimeError"


@pytest.fixture(scope="module")
def ray_cluster(tmp_path_factory):
    """One local Ray instance (2 CPUs) for the module, its workers and this process writing models
    under a temporary cache root; embed_texts uses a connection already open in the process, and a
    stage subprocess joins it by its address (with Ray's token authentication). Yields the address."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path_factory.mktemp("cache-root")))
        patch.setenv("RAY_AUTH_MODE", "token")
        ray = embed_ray.import_ray()
        embed_ray.start_local(ray, settings("ray").ray)
        try:
            address = ray.get_runtime_context().gcs_address  # this machine's own IP, not loopback: vouched for
            patch.setenv(RAY_ADDRESS_ENV, address)
            yield address
        finally:
            ray.shutdown()


def test_ray_embeds_only_what_the_cache_lacks_and_gives_the_local_engines_vectors(ray_cluster, tmp_path):
    texts = corpus(64, (5, 60), seed=1)
    local, _ = embed_texts(texts, settings("local"), "", tmp_path / "local", progress=QUIET)
    cache = tmp_path / "cache"
    keys = cache_keys(texts, settings("ray"), "", model_fingerprint(resolve_model(settings("ray").model)))
    with EmbeddingCache(cache) as prefill:  # half the texts cached already, with the local engine's vectors
        prefill.put(keys[::2], local[::2])
    before = {shard.name for shard in read_shards(cache)}

    vectors, stats = embed_texts(texts, settings("ray"), "", cache, progress=EmbedProgress(bar=False))

    assert (stats.cached, stats.embedded) == (
        len(keys[::2]),
        len(keys[1::2]),
    ) and "on ray, 2 actors x 1 CPU" in stats.encoder
    new = [shard for shard in read_shards(cache) if shard.name not in before]
    assert len(new) == 1 and {key.tobytes() for key in new[0].keys} == set(
        keys[1::2]
    )  # what Ray returned, nothing more
    assert np.abs(vectors - local).max() <= 1e-5
    again, stats = embed_texts(texts, settings("ray"), "", cache, progress=EmbedProgress(bar=False))
    assert stats.embedded == 0 and np.array_equal(again, vectors)  # all cached now: nothing goes to Ray


def test_a_worker_without_the_model_gets_the_drivers_files_and_nothing_else(ray_cluster, tmp_path, monkeypatch):
    """What an actor runs first (called here, in this process, with a real object ref): a path it
    lacks means the shipped files, written under its cache root and checked by fingerprint."""
    ray = embed_ray.import_ray()
    model = resolve_model(DEFAULTS["embed"]["model"])
    monkeypatch.setenv("RETRIEVAL_BENCH_CACHE", str(tmp_path))  # this "worker's" cache root
    fingerprint = model_fingerprint(model)
    files = embed_ray.read_model_files(model)

    path = embed_ray.worker_model_path(str(tmp_path / "not-on-this-worker"), fingerprint, (ray.put(files),))
    assert Path(path).parent == tmp_path / "models" and model_fingerprint(path) == fingerprint
    assert (
        embed_ray.worker_model_path(model, fingerprint, None) == model
    )  # the same files at the driver's path: used as they are

    tampered = {**files, "config.json": files["config.json"] + b" "}
    with pytest.raises(
        InputError, match=r"files shipped to this Ray worker .* have fingerprint sha256:\w+, expected sha256:0+$"
    ):
        embed_ray.worker_model_path(str(tmp_path / "absent"), "sha256:" + "0" * 64, (ray.put(tampered),))
    # The refused copy never reached its place (only the lock files of the two targets are beside the good copy).
    assert sorted(folder.name for folder in (tmp_path / "models").iterdir() if folder.suffix != ".lock") == [
        Path(path).name
    ]
    with pytest.raises(InputError, match="is missing on this Ray worker or differs from the driver's"):
        embed_ray.worker_model_path(str(tmp_path / "absent"), "sha256:" + "1" * 64, None)


def test_an_actor_that_cannot_have_the_drivers_model_fails_in_one_line(ray_cluster, tmp_path):
    """In a real actor: the files differ from the fingerprint the driver asks for, so the actor
    refuses them, and its InputError reaches the driver as the one line, with nothing embedded."""
    model = resolve_model(DEFAULTS["embed"]["model"])
    batches = embed_ray.embed_batches(
        [(b"k" * 32, "a text")], model, "sha256:" + "0" * 64, settings("ray", num_actors=1)
    )
    with pytest.raises(InputError) as failed:
        next(batches)
    assert str(failed.value).startswith("embed.model: the files shipped to this Ray worker")
    assert "\n" not in str(failed.value)


def test_an_exception_raised_in_an_actors_call_is_one_line_and_the_cache_stays_intact(ray_cluster, tmp_path):
    """Ray 2.60 returns an exception raised in EmbedActor.__call__ as a RayTaskError(UserCodeException)
    whose text holds the actor's traceback: the run ends in one line naming the actor's own
    exception (Python's here: a batch size of 0, which params never let through, is a range() step
    of 0 when the actor splits its rows), not Ray's wrapper, and what the cache held is untouched
    and served."""
    local = settings("local")
    short = corpus(4, (3, 6), seed=3)
    cache = tmp_path / "cache"
    cached, _ = embed_texts(short, local, "", cache, progress=QUIET)
    before = {path.name: path.read_bytes() for path in cache.iterdir()}

    with pytest.raises(InputError) as failed:
        embed_texts(
            short + ["one more text"],
            dataclasses.replace(local, engine="ray", batch_size=0, ray=dataclasses.replace(local.ray, num_actors=1)),
            "",
            cache,
            progress=EmbedProgress(bar=False),
        )
    line = str(failed.value)
    assert "\n" not in line and "UserCodeException" not in line, line
    assert line.startswith("embed.engine ray: an actor failed: ValueError: "), line
    assert line.endswith(
        "; the 0 of 1 vectors returned before are in the embedding cache, and a rerun embeds only the rest"
    )
    assert {path.name: path.read_bytes() for path in cache.iterdir()} == before
    again, stats = embed_texts(short, local, "", cache, progress=QUIET)
    assert stats.embedded == 0 and np.array_equal(again, cached)
    # The failed run's Ray Data executor sits in a reference cycle (the exception's traceback) and
    # keeps its actor, and a CPU of this module's cluster, until collected: free them for the next test.
    del failed
    gc.collect()
    deadline = time.monotonic() + 60
    while actor_processes() and time.monotonic() < deadline:
        time.sleep(0.1)


def test_without_ray_installed_the_ray_engine_is_one_line_naming_the_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    with pytest.raises(
        InputError,
        match=r"^embed.engine ray needs the ray extra, which is not installed \(.*\): pip install -e '\.\[ray\]'$",
    ):
        embed_texts(["a text"], settings("ray"), "", tmp_path / "cache", progress=EmbedProgress(bar=False))


def test_an_address_that_cannot_work_fails_at_once_in_one_line(monkeypatch):
    with pytest.raises(InputError, match=r"^embed.ray.address '127.0.0.1:1': nothing answers at 127.0.0.1:1 \("):
        embed_ray.check_address("127.0.0.1:1", 5)
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:1")
    with pytest.raises(
        InputError, match=r"^embed.ray.address 'auto': nothing answers at 127.0.0.1:1 \(RAY_ADDRESS\) \("
    ):
        embed_ray.check_address("auto", 5)
    monkeypatch.setenv("RAY_ADDRESS", "ray://head:10001")  # Ray Data fails over Ray Client: refused before connecting
    with pytest.raises(InputError, match=r"^embed.ray.address 'auto': ray://head:10001 \(RAY_ADDRESS\) is Ray Client"):
        embed_ray.check_address("auto", 5)


@pytest.mark.parametrize("vouched", ["environment", "config file", "auto"])
def test_a_cluster_params_yaml_chose_must_be_vouched_for_outside_git(vouched, tmp_path, monkeypatch):
    """A cluster would receive the corpus, the model and the Ray token: one off this machine's loopback
    is refused in one line before anything connects to it, and accepted once the user named it
    (a listener that never answers: accepted, the check connects and waits out embed.ray.timeout_s)."""
    host = own_address()
    if host is None:
        pytest.skip("this machine has no non-loopback IPv4 address")
    config = tmp_path / "config" / "retrieval-bench" / "endpoints"
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    for name in (RAY_ADDRESS_ENV, "RAY_ADDRESS"):
        monkeypatch.delenv(name, raising=False)
    with socket.create_server((host, 0)) as listener:
        address = f"{host}:{listener.getsockname()[1]}"
        with pytest.raises(InputError) as refused:
            embed_ray.check_address(address, 5)
        assert str(refused.value) == (
            f"embed.ray.address '{address}': the Ray cluster there would receive your corpus, the model and any Ray "
            "token, and anyone who can change params.yaml could otherwise point it at their own; to allow it, export "
            f"{RAY_ADDRESS_ENV}={address} (or add tcp://{address} to {config}), or set RAY_ADDRESS and use address auto"
        )
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):  # nothing connected
            listener.accept()
        if vouched == "environment":
            monkeypatch.setenv(RAY_ADDRESS_ENV, address)
        elif vouched == "config file":
            config.parent.mkdir(parents=True)
            config.write_text(f"# my cluster\ntcp://{address}\n")
        else:
            monkeypatch.setenv("RAY_ADDRESS", address)
        named = "auto" if vouched == "auto" else address
        via = " (RAY_ADDRESS)" if vouched == "auto" else ""
        answered = f"embed.ray.address '{named}': {address}{via} did not answer within 0.2s"
        with pytest.raises(InputError, match="^" + re.escape(answered)):
            embed_ray.check_address(named, 0.2)


def test_an_address_that_accepts_and_never_answers_ends_after_embed_ray_timeout_s(tmp_path):
    """A port whose listener never accepts nor replies (the kernel completes the connection): the
    stage ends with one line naming the address and embed.ray.timeout_s. A process of its own, as
    a stage is: this one may already hold the module's Ray connection, which embed_texts would reuse."""
    with socket.create_server(("127.0.0.1", 0)) as silent:
        address = f"127.0.0.1:{silent.getsockname()[1]}"
        ray_settings = dataclasses.replace(settings("ray").ray, address=address, timeout_s=0.3)
        job = tmp_path / "job.json"
        job.write_text(
            json.dumps(
                {
                    "texts": ["a text"],
                    "settings": dataclasses.asdict(dataclasses.replace(settings("ray"), ray=ray_settings)),
                    "cache": str(tmp_path / "cache"),
                }
            )
        )
        result = subprocess.run(
            [sys.executable, "-c", STAGE, str(job)], capture_output=True, text=True, timeout=STAGE_TIMEOUT
        )
    assert result.returncode == 1, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"error: embed.ray.address '{address}': {address} did not answer within 0.3s (embed.ray.timeout_s); "
        "is it the cluster's GCS address (head:6379), and is the head node up?"
    ]


STAGE = """
import json, sys
from retrieval_bench.core.stage import run_stage
from retrieval_bench.embedding.embed import EmbedProgress, embed_texts
from retrieval_bench.embedding.settings import EmbedSettings
job = json.loads(open(sys.argv[1]).read())
def main():
    settings = EmbedSettings.from_params(job["settings"])
    _, stats = embed_texts(job["texts"], settings, "", job["cache"], progress=EmbedProgress(bar=False))
    print(stats.line("text"))
run_stage(main, own_arguments=True)
"""
FAULT_BATCHES = 2  # batches in the cache when an actor is killed
STAGE_TIMEOUT = 300


def actor_processes() -> list[psutil.Process]:
    """The EmbedActor processes among the workers of this test's Ray instance."""
    found = []
    for process in psutil.Process().children(recursive=True):
        try:
            if "EmbedActor" in " ".join(process.cmdline()):
                found.append(process)
        except psutil.Error:
            continue
    return found


def kill_an_actor_when_cached(cache: Path, rows: int, killed: list[int], spared: set[int] = frozenset()) -> None:
    """SIGKILL one EmbedActor process (a worker of this test's Ray instance, not one of `spared`)
    once `rows` vectors are in the cache: an actor dying mid-run, as the OOM killer or a lost node
    would do it."""
    deadline = time.monotonic() + STAGE_TIMEOUT  # a loaded machine may take minutes to get there
    while time.monotonic() < deadline:
        if sum(path.stat().st_size for path in cache.glob("*.keys")) >= rows * 32:
            for process in actor_processes():
                if process.pid in spared:
                    continue
                try:
                    process.send_signal(signal.SIGKILL)
                except psutil.Error:
                    continue
                killed.append(process.pid)
                return
        time.sleep(0.02)


def test_an_actor_killed_mid_run_ends_in_one_line_and_the_rerun_embeds_only_the_rest(ray_cluster, tmp_path):
    """A stage process joins the cluster by its address (the model shipped through the object
    store, the package by runtime_env); an actor is killed after two batches came back."""
    texts = corpus(160, (60, 90), seed=2)
    cache = tmp_path / "cache"
    job = tmp_path / "job.json"
    job.write_text(
        json.dumps(
            {"texts": texts, "settings": dataclasses.asdict(settings("ray", address=ray_cluster)), "cache": str(cache)}
        )
    )
    killed: list[int] = []
    spared = {process.pid for process in actor_processes()}  # left by an earlier test: not this stage's
    killer = threading.Thread(
        target=kill_an_actor_when_cached, args=(cache, FAULT_BATCHES * 8, killed, spared), daemon=True
    )
    killer.start()
    stage = subprocess.run(
        [sys.executable, "-c", STAGE, str(job)],
        env={**tool_env(), "RAY_AUTH_MODE": "token"},
        capture_output=True,
        text=True,
        timeout=STAGE_TIMEOUT,
    )
    killer.join(timeout=1)

    assert killed, f"no actor was killed: {stage.stdout}{stage.stderr}"
    assert stage.returncode == 1, stage.stdout + stage.stderr
    lines = stage.stderr.splitlines()
    assert len(lines) == 1, stage.stderr
    assert lines[0].startswith(f"error: embed.engine ray: a Ray actor died (pid {killed[0]}, node ")
    keys = cache_keys(texts, settings("local"), "", model_fingerprint(resolve_model(settings("local").model)))
    with EmbeddingCache(cache) as kept:
        from_ray = kept.get(keys)
    saved, batch = len(from_ray), settings("ray").ray.batch_size
    assert FAULT_BATCHES * batch <= saved < len(texts) and saved % batch == 0  # whole batches only
    assert f"the {saved} of {len(texts)} vectors returned before are in the embedding cache" in lines[0]

    # The rerun (here with the local engine) embeds only what is missing ...
    _, stats = embed_texts(texts, settings("local"), "", cache, progress=QUIET)
    assert (stats.cached, stats.embedded) == (saved, len(texts) - saved)
    # ... and what the killed run kept is whole and right: the local engine's vectors for those texts.
    kept_texts = [text for text, key in zip(texts, keys) if key in from_ray]
    local, _ = embed_texts(kept_texts, settings("local"), "", tmp_path / "local", progress=QUIET)
    assert np.abs(np.stack([from_ray[key] for key in keys if key in from_ray]) - local).max() <= 1e-5


def embed_lines(output: str) -> dict[str, tuple[int, int, str]]:
    """stage line's start (e.g. `embed_corpus default with default`) -> (from the cache, embedded,
    encoder) as the embed stages printed them."""
    found = re.findall(
        r"^(embed_\w+(?: [\w-]+)? with [\w-]+): .*: (\d+) from the cache, (\d+) embedded in [\d.]+s \([\d.]+ \w+/s; (.+)\)$",
        output,
        re.MULTILINE,
    )
    return {stage: (int(cached), int(embedded), encoder) for stage, cached, embedded, encoder in found}


# What the two embed stages print first for the default chunking and embedder (the single system).
CORPUS_LINE, QUESTIONS_LINE = "embed_corpus default with default", "embed_questions with default"


@pytest.mark.pipeline
def test_dvc_repro_with_the_ray_engine_gives_the_local_engines_vectors_and_metrics(reproduced, reproduced_template):
    """A fresh clone run with the local engine (the reproduced template's), then with `embed.engine:
    ray` (a local Ray instance per embed stage) from empty caches: the same vectors (within 1e-5)
    and metrics. The engine is not a result param: switching it reruns nothing."""
    project = reproduced
    local = embed_lines(reproduced_template.output)
    # Each distinct text is embedded once.
    chunks = pd.read_parquet(project / paths.CHUNKS, columns=["text"])["text"].nunique()
    questions = len({row["question"] for row in read_jsonl(project / paths.GOLDENSET)})
    # The questions were embedded by embed_corpus, with the model it had loaded (embedding.questions).
    assert local == {CORPUS_LINE: (0, chunks, "torch fp32 on cpu")}
    served = rf"^{QUESTIONS_LINE}: \d+ questions \({questions} distinct\): {questions} from the cache, 0 embedded$"
    assert re.search(served, reproduced_template.output, re.MULTILINE)
    metrics_local = read_metrics(project)
    outputs = [project / paths.CORPUS_VECTORS, project / paths.QUESTION_VECTORS]
    vectors_local = [np.load(output) for output in outputs]

    set_params(project, **{"embed.engine": "ray"})
    assert embed_lines(dvc("repro", cwd=project).stdout) == {}  # not a result param: nothing reruns
    caches = [project / paths.CORPUS_EMBEDDING_CACHE, project / paths.QUESTION_EMBEDDING_CACHE]
    for shard in (shard for cache in caches for shard in cache.iterdir()):
        shard.unlink()  # nothing served from the embedding cache: Ray embeds every text
    forced = dvc("repro", "--force", "--single-item", "embed_corpus", "embed_questions", cwd=project).stdout
    on_ray = embed_lines(forced)  # forced: DVC would restore the unchanged stages' outputs from its cache
    dvc("repro", cwd=project)
    assert on_ray == {
        CORPUS_LINE: (0, chunks, "torch fp32 on ray, 1 actor x 1 CPU"),
        QUESTIONS_LINE: (0, questions, "torch fp32 on ray, 1 actor x 1 CPU"),
    }
    for output, local_vectors in zip(outputs, vectors_local):
        vectors = np.load(output)
        assert vectors.shape == local_vectors.shape and np.abs(vectors - local_vectors).max() <= 1e-5, output.name
    assert read_metrics(project) == metrics_local


KILLED_DRIVER = """
import json, os, signal, sys
from retrieval_bench.core.params import DEFAULTS
from retrieval_bench.core import paths
from retrieval_bench.embedding import embed_ray
from retrieval_bench.embedding.settings import RaySettings

ray = embed_ray.import_ray()
import psutil  # noqa: E402 - Ray's copy when no other is installed

with embed_ray._connected(ray, RaySettings.from_params(DEFAULTS["embed"]["ray"])):
    children = psutil.Process().children(recursive=True)
    watchdogs = [p.pid for p in children if "the local Ray instance's watchdog" in " ".join(p.cmdline())]
    ray_processes = [[p.pid, repr(p.create_time())] for p in children if p.pid not in watchdogs]
    with open(sys.argv[1], "w") as handle:
        json.dump({"ray": ray_processes, "watchdogs": watchdogs}, handle)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_a_local_ray_instance_ends_with_its_driver_even_one_killed_by_sigkill(tmp_path):
    """The driver is SIGKILLed inside the block that holds its local Ray instance: its watchdog (one,
    in its own session) ends, and by then every Ray process the driver had is gone (Ray's own agents
    would outlive it by about a minute)."""
    script, record = tmp_path / "driver.py", tmp_path / "processes.json"
    script.write_text(KILLED_DRIVER)
    driver = subprocess.run(
        [sys.executable, str(script), str(record)],
        env={**tool_env(), "RAY_USAGE_STATS_ENABLED": "0"},
        capture_output=True,
        text=True,
    )
    assert driver.returncode == -signal.SIGKILL, driver.stderr
    found = json.loads(record.read_text())
    assert len(found["watchdogs"]) == 1 and found["ray"], found
    try:
        psutil.Process(found["watchdogs"][0]).wait()
    except psutil.NoSuchProcess:
        pass

    def running(pid: int, started: str) -> bool:
        try:
            process = psutil.Process(pid)
            return repr(process.create_time()) == started and process.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    assert [pid for pid, started in found["ray"] if running(pid, started)] == []
