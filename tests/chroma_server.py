"""A real Chroma server for tests: `chroma run` on a free 127.0.0.1 port, stopped afterwards."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

START_TIMEOUT_S = 60


def free_port() -> int:
    """A port nothing listens on now (the kernel's choice for an ephemeral bind)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def chroma_server(folder: Path) -> Iterator[str]:
    """Start `chroma run` storing under `folder` and yield its URL once its heartbeat answers."""
    folder.mkdir(parents=True, exist_ok=True)
    url = f"http://127.0.0.1:{free_port()}"
    command = [
        str(Path(sys.executable).parent / "chroma"),
        "run",
        "--path",
        str(folder / "data"),
        "--host",
        "127.0.0.1",
        "--port",
        url.rsplit(":", 1)[1],
    ]
    with open(folder / "server.log", "wb") as log:
        server = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        )
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1).close()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(
                        f"chroma run did not start: {(folder / 'server.log').read_text()[-2000:]}"
                    ) from None
                time.sleep(0.2)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
