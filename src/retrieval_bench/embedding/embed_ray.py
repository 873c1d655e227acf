"""The Ray engine (`embed.engine: ray`): embed the texts the cache lacks on a Ray cluster.

Ray Data batch inference: the missing (key, text) rows, longest first, one block per
`embed.ray.batch_size` rows -> `map_batches(EmbedActor)` over a fixed pool of
`embed.ray.num_actors` actors, each loading the model once -> the driver iterates the results as
they stream back and hands each batch to `embed_texts`, which appends it to the embedding cache at
once and moves the progress bar. Every row carries its cache key, so the order results come back
in does not matter. Only the driver writes: the cache and the .npy outputs are written where the
stage runs, as with the local engine, and nothing has to be copied back from the cluster.

The model: the driver resolves it (`resolve_model`, which never downloads under HF_HUB_OFFLINE)
and fingerprints it. An actor uses the same path when it holds the same files on its node (the
fingerprint is checked); otherwise, on a cluster joined through `embed.ray.address`, it writes
the files the driver put in Ray's object store under its own cache root, once per node (the
node's other actors wait for that copy, under a lock), checked against the same fingerprint; it
loads with `local_files_only`: a worker never downloads. The retrieval_bench package travels to a
joined cluster's workers too (runtime_env py_modules), so they run the driver's code; torch and
sentence-transformers must be installed there, in the versions of the driver's environment.

Addresses: null starts a private local instance (and shuts it down); `auto` joins the cluster of
RAY_ADDRESS or of this node (`ray start`); host:port joins the cluster whose GCS is there, from a
machine on its network. Ray Client (`ray://`) is refused in one line: Ray Data does not run over it.

Faults: actors are never restarted and their tasks never retried (`max_restarts=0`; Ray Data's
default restarts a dead actor and retries forever), so an actor that dies (its process killed, its
node lost) ends the run in one InputError line, as does an exception raised in an actor (Ray
2.60 returns one raised in `__call__` as a RayTaskError(UserCodeException) whose text holds the
actor's traceback; the line names the actor's own exception). Every batch that came back before is
already in the cache, and a rerun, with either engine, embeds only the rest. A driver that loses the cluster's
GCS is ended by Ray itself, after its 60 s reconnect window, with Ray's one line and exit status 1;
the cache is intact then too."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
import socket
import subprocess
import sys
import warnings
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from retrieval_bench.core.endpoints import check_ray_address
from retrieval_bench.core.errors import InputError, first_line, optional_extra
from retrieval_bench.core.files import cache_root
from retrieval_bench.core.locking import build_once
from retrieval_bench.core.logs import silent
from retrieval_bench.embedding.backends import encoder_label, load_encoder
from retrieval_bench.embedding.model_source import folder_fingerprint, model_files, model_fingerprint
from retrieval_bench.embedding.settings import EmbedSettings, RaySettings

# A local instance holds the texts and vectors in flight, nothing more (Ray spills beyond it to
# disk); Ray's default, 30% of the machine's memory, is reserved in /dev/shm for nothing.
LOCAL_OBJECT_STORE_BYTES = 512 << 20
PACKAGE_DIR = Path(__file__).resolve().parents[1]


def import_ray():
    """`import ray`, or a one-line InputError naming the extra to install."""
    os.environ.setdefault(
        "RAY_USAGE_STATS_ENABLED", "0"
    )  # no usage report to Ray's servers (a value the user set is kept)
    with optional_extra("ray", "embed.engine ray"):
        import ray
        import ray.data
    return ray


def actor_count(settings: EmbedSettings, texts: int) -> int:
    """`embed.ray.num_actors`, but never more actors than Ray batches: each loads the model."""
    return max(1, min(settings.ray.num_actors, -(-texts // settings.ray.batch_size)))


def describe(settings: EmbedSettings, texts: int) -> str:
    """What embeds `texts` texts, for the progress bar and the stage's summary line."""
    options = settings.ray
    each = (
        f"{options.num_gpus_per_actor:g} GPU" if options.num_gpus_per_actor else f"{options.num_cpus_per_actor:g} CPU"
    )
    actors = actor_count(settings, texts)
    return f"{encoder_label(settings)} on ray, {actors} actor{'s' if actors > 1 else ''} x {each}"


def actor_device(settings: EmbedSettings) -> str:
    """`embed.device`, else cuda for an actor that holds a GPU and cpu for one that does not: an
    actor never takes a GPU Ray did not give it."""
    return settings.device or ("cuda" if settings.ray.num_gpus_per_actor else "cpu")


def read_model_files(model_path: str) -> dict[str, bytes]:
    """The model folder's files that decide its vectors (relative name -> bytes), to ship."""
    root = Path(model_path)
    return {path.relative_to(root).as_posix(): path.read_bytes() for path in model_files(model_path)}


def worker_model_path(model_path: str, fingerprint: str, shipped: tuple | None) -> str:
    """The driver's model on this worker: `model_path` when it holds the same files, else the
    shipped files (`shipped`: (an object ref of read_model_files,) or None), written once under
    this node's cache root (the node's other actors wait for that copy) and checked by fingerprint
    before they are put in place. Never a download; any other model is a one-line InputError."""
    if Path(model_path).is_dir() and model_fingerprint(model_path) == fingerprint:
        return model_path
    target = cache_root() / "models" / f"shipped-{fingerprint.removeprefix('sha256:')[:16]}"

    def holds_the_model(folder: Path) -> bool:  # hashed afresh: another actor may have just written it
        return folder.is_dir() and folder_fingerprint(str(folder)) == fingerprint

    if holds_the_model(target):  # the usual case after the first run on this node: one hash
        return str(target)
    if shipped is None:
        raise InputError(
            f"embed.model: {model_path} is missing on this Ray worker or differs from the driver's "
            f"({fingerprint}); install the same model there, or join the cluster by embed.ray.address"
        )

    def write(staging: Path) -> None:
        for name, data in import_ray().get(shipped[0]).items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            (staging / name).write_bytes(data)
        found = folder_fingerprint(str(staging))
        if found != fingerprint:  # never put in place for a later run to find
            raise InputError(
                f"embed.model: the files shipped to this Ray worker ({target}) have fingerprint {found}, expected {fingerprint}"
            )

    build_once(target, write, holds_the_model, what=f"writing the shipped model to {target}")
    return str(target)


class EmbedActor:
    """One model replica in a Ray actor: loaded once, then called with batches of rows {key, text};
    returns {key, vector}, the texts embedded in `embed.batch_size` pieces as the local engine does."""

    def __init__(self, model_path: str, fingerprint: str, settings: EmbedSettings, shipped: tuple | None):
        path = worker_model_path(model_path, fingerprint, shipped)
        self.encoder = load_encoder(
            path, fingerprint, dataclasses.replace(settings, device=actor_device(settings)), log=silent
        )
        self.batch_size = settings.batch_size

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        pieces = self.encoder.batches(list(zip(batch["key"], batch["text"].tolist(), strict=True)), self.batch_size)
        return {"key": batch["key"], "vector": np.concatenate([vectors for _, vectors in pieces])}


def embed_batches(
    items: list[tuple[bytes, str]], model_path: str, fingerprint: str, settings: EmbedSettings
) -> Generator[tuple[list[bytes], np.ndarray], None, None]:
    """(keys, vectors) for `items` ((cache key, text) pairs, in the order to embed them) as Ray's
    actors return them. A dead actor, an exception raised in one, or a lost cluster is a one-line
    InputError."""
    ray = import_ray()
    done = 0
    with _connected(ray, settings.ray) as started, _quiet_data(ray):
        # A local instance we started runs on this machine, where model_path is; a cluster may not have it.
        shipped = None if started else (ray.put(read_model_files(model_path)),)
        try:
            for batch in _dataset(ray, items, model_path, fingerprint, settings, shipped).iter_batches(
                batch_size=None, batch_format="numpy"
            ):
                keys = [bytes(key) for key in batch["key"]]
                yield keys, np.asarray(batch["vector"], dtype=np.float32)
                done += len(keys)
        except InputError:
            raise
        except Exception as error:  # noqa: BLE001 - whatever Ray raises here reports a failure on the cluster
            # Ray's own errors (RayError: a dead actor, an exception raised in an actor), a lost
            # connection, and Ray Data's wrappers that are no RayError (a SystemException cause,
            # ExecutionTimeoutError): one line each, the cache intact.
            raise InputError(failure_line(error, done, len(items))) from None


def _dataset(
    ray,
    items: list[tuple[bytes, str]],
    model_path: str,
    fingerprint: str,
    settings: EmbedSettings,
    shipped: tuple | None,
):
    import pyarrow as pa

    options = settings.ray
    size = options.batch_size
    # One block per Ray batch: the actors share the work batch by batch, and each result streams
    # back to the driver as soon as its batch is done.
    blocks = [
        pa.table(
            {
                "key": pa.array([key for key, _ in items[start : start + size]], pa.binary(32)),
                "text": pa.array([text for _, text in items[start : start + size]], pa.string()),
            }
        )
        for start in range(0, len(items), size)
    ]
    with warnings.catch_warnings():
        # max_restarts goes through map_batches' **ray_remote_args, deprecated from Ray 2.60 (removal
        # announced for 2.64; the extra pins 2.60.0) and the only way to turn the restarts off.
        warnings.filterwarnings("ignore", message=".*ray_remote_args.* is deprecated")
        return ray.data.from_arrow(blocks).map_batches(
            EmbedActor,
            fn_constructor_kwargs={
                "model_path": model_path,
                "fingerprint": fingerprint,
                "settings": settings,
                "shipped": shipped,
            },
            compute=ray.data.ActorPoolStrategy(size=actor_count(settings, len(items))),
            batch_size=size,
            batch_format="numpy",
            num_cpus=options.num_cpus_per_actor,
            num_gpus=options.num_gpus_per_actor or None,
            max_restarts=0,
            max_task_retries=0,
        )


@contextlib.contextmanager
def _connected(ray, options: RaySettings) -> Iterator[bool]:
    """Ray, connected for the block; yields whether it is a local instance started here. A
    connection already open in this process is used and left open; one opened here is closed (and
    a local instance started here shut down) whatever happens."""
    if ray.is_initialized():
        yield False
        return
    address = options.address
    try:
        if address is None:
            start_local(ray, options)
        else:
            check_address(address, options.timeout_s)
            ray.init(address=address, runtime_env=_runtime_env(remote=True), log_to_driver=False, logging_level="ERROR")
    except (ray.exceptions.RayError, ConnectionError, ValueError, RuntimeError) as error:
        ray.shutdown()
        raise InputError(
            f"embed.ray.address {address!r}: cannot join the Ray cluster ({first_line(error)}); is it "
            "running, and with token authentication, are RAY_AUTH_MODE=token and its token set here?"
        ) from None
    with contextlib.ExitStack() as cleanup:
        if address is None:  # its exit comes last, after the shutdown
            cleanup.enter_context(_tied_to_this_process())
        cleanup.callback(ray.shutdown)
        _check_resources(ray, options, local=address is None)
        yield address is None


WATCHDOG = """# retrieval-bench: the local Ray instance's watchdog
import sys
sys.path.insert(0, sys.argv[1])
import psutil
owned = []
for line in sys.stdin:  # until the driver's end closes the pipe, however it ended (SIGKILL too)
    pid, started = line.split()
    try:
        process = psutil.Process(int(pid))
        if repr(process.create_time()) == started:  # not a process that reused the id
            owned.append(process)
    except psutil.Error:
        pass
for process in owned:
    try:
        process.kill()
    except psutil.Error:
        pass
psutil.wait_procs(owned, timeout=10)
"""


@contextlib.contextmanager
def _tied_to_this_process() -> Iterator[None]:
    """The processes of the local Ray instance just started end with this process, even if it is
    killed by SIGKILL (Ray's own agents would outlive it by a minute): a watchdog in a session of its
    own is handed their ids and start times now, and kills those still running when this process's
    end closes its pipe. (Workers Ray starts later end by themselves within seconds of the raylet.)"""
    import psutil  # Ray's own copy (ray/thirdparty_files) when no other is installed

    owned = psutil.Process().children(recursive=True)
    watchdog = subprocess.Popen(
        [sys.executable, "-c", WATCHDOG, str(Path(psutil.__file__).parents[1])],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    pipe = watchdog.stdin
    assert pipe is not None  # stdin=PIPE
    try:
        pipe.write("".join(f"{process.pid} {process.create_time()!r}\n" for process in owned))
        pipe.flush()
        yield
    finally:
        pipe.close()
        watchdog.wait()


# An HTTP/2 client preface and an empty SETTINGS frame: a Ray GCS (a gRPC server) answers at once.
GRPC_HELLO = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00"


def check_address(address: str, timeout: float) -> None:
    """A one-line InputError at once for an address this engine cannot use: Ray Client (ray://),
    which Ray Data does not run over (Ray 2.60 fails inside its executor), one not vouched for
    (endpoints.check_ray_address), one where nothing answers, or one silent for `timeout` seconds
    (embed.ray.timeout_s; Ray itself would wait for minutes). `auto` is checked as RAY_ADDRESS when set."""
    target = os.environ.get("RAY_ADDRESS", "") if address == "auto" else address
    via = " (RAY_ADDRESS)" if target != address else ""
    if target.startswith("ray://"):
        raise InputError(
            f"embed.ray.address {address!r}: {target}{via} is Ray Client, which Ray Data does not run over; "
            "run the stage on a node of the cluster with address auto, or give the cluster's GCS address "
            "(head:6379) from a machine on its network"
        )
    check_ray_address(address, os.environ)  # before anything is sent there
    found = re.fullmatch(r"\[?([^\]]+?)\]?:(\d+)", target)
    if not found:
        return
    silent = (
        f"embed.ray.address {address!r}: {target}{via} did not answer within {timeout:g}s (embed.ray.timeout_s); "
        "is it the cluster's GCS address (head:6379), and is the head node up?"
    )
    try:
        connection = socket.create_connection((found[1], int(found[2])), timeout=timeout)
    except TimeoutError:
        raise InputError(silent) from None
    except OSError as error:
        raise InputError(
            f"embed.ray.address {address!r}: nothing answers at {target}{via} ({error.strerror or error}); "
            "start the cluster or fix the address"
        ) from None
    with connection:
        try:
            connection.sendall(GRPC_HELLO)
            connection.recv(9)
        except TimeoutError:
            raise InputError(silent) from None
        except OSError:  # reset or closed: something answered (a TLS cluster may refuse the hello); Ray says the rest
            pass


def start_local(ray, options: RaySettings) -> None:
    """A private local Ray instance sized to the actors (`address: local` never joins a running
    cluster nor RAY_ADDRESS); no dashboard, no worker logs on the driver's terminal."""
    os.environ.setdefault("RAY_gcs_server_port_wait_time_s", "120")  # Ray's 20 s GCS wait fails on busy machines
    ray.init(
        address="local",
        num_cpus=max(1, int(np.ceil(options.num_actors * options.num_cpus_per_actor))),
        object_store_memory=LOCAL_OBJECT_STORE_BYTES,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="ERROR",
        runtime_env=_runtime_env(remote=False),
    )


def _runtime_env(remote: bool) -> dict[str, Any]:
    """Workers never download a model; on a joined cluster they import the driver's retrieval_bench."""
    env: dict[str, Any] = {
        "env_vars": {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    }
    if remote:
        env["py_modules"] = [str(PACKAGE_DIR)]
    return env


def _check_resources(ray, options: RaySettings, local: bool) -> None:
    """A local instance that cannot hold one actor would wait forever: say so at once. (A cluster
    may be autoscaling, so there Ray Data waits for the nodes.)"""
    gpus = options.num_gpus_per_actor
    if local and gpus > ray.cluster_resources().get("GPU", 0):
        raise InputError(
            f"embed.ray.num_gpus_per_actor {gpus:g}: this machine has "
            f"{ray.cluster_resources().get('GPU', 0):g} GPUs for a local Ray; set it to 0 or join a cluster with GPUs"
        )


@contextlib.contextmanager
def _quiet_data(ray) -> Iterator[None]:
    """Ray Data without its progress bars and console log for the block (its log file under the
    Ray session keeps everything): the driver's bar counts the batches written to the cache, and
    a failure is the stage's one line."""
    import logging

    context = ray.data.DataContext.get_current()
    saved = (context.enable_progress_bars, context.print_on_execution_start)
    context.enable_progress_bars, context.print_on_execution_start = False, False
    consoles = [handler for handler in logging.getLogger("ray.data").handlers if "File" not in type(handler).__name__]
    levels = [handler.level for handler in consoles]
    for handler in consoles:
        handler.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        context.enable_progress_bars, context.print_on_execution_start = saved
        for handler, level in zip(consoles, levels, strict=True):
            handler.setLevel(level)


def failure_line(error: BaseException, done: int, total: int) -> str:
    """One line for a Ray failure: an InputError raised in an actor as it is, else what failed,
    and what the cache kept."""
    from ray.exceptions import RayActorError

    chain = _chain(error)
    text = "\n".join(str(link) for link in chain)
    # An exception raised in an actor comes back as text: its traceback inside an ActorDiedError
    # (raised in __init__) or a RayTaskError(UserCodeException) (raised in __call__), followed
    # there by Ray's own "ray.exceptions.UserCodeException: UDF failed ..." line.
    raised = [
        (name, message)
        for name, message in re.findall(r"^([\w.]*(?:Error|Exception)): (.+)$", text, re.MULTILINE)
        if not name.startswith("ray.")
    ]
    own = [str(link) for link in chain if isinstance(link, InputError)] + [
        message for name, message in raised if name.endswith("InputError")
    ]
    if own:
        return own[-1]
    told = [link for link in chain if str(link).strip()] or chain
    if raised:
        what = f"an actor failed: {raised[-1][0].rsplit('.', 1)[-1]}: {raised[-1][1]}"
    elif any(isinstance(link, RayActorError) for link in chain):
        facts = [
            f"{name} {found[1]}"
            for name, pattern in (
                ("pid", r"\bpid: (\d+)"),
                ("node", r"\bip: (\S+)"),
                ("exit", r"Worker exit type: (\w+)"),
            )
            if (found := re.search(pattern, text))
        ]
        what = f"a Ray actor died ({', '.join(facts) or first_line(told[-1])}; its node's Ray logs say why)"
    else:
        what = f"{type(told[-1]).__name__}: {first_line(told[-1])}"
    return (
        f"embed.engine ray: {what}; the {done} of {total} vectors returned before are in the embedding "
        "cache, and a rerun embeds only the rest"
    )


def _chain(error: BaseException) -> list[BaseException]:
    """`error` and the exceptions behind it (Ray's `cause`, then __cause__), outermost first."""
    chain: list[BaseException] = []
    current: object = error
    while isinstance(current, BaseException) and all(current is not seen for seen in chain):
        chain.append(current)
        current = getattr(current, "cause", None) or current.__cause__
    return chain
