"""`make repro`'s view of `dvc repro`'s output (`dvc repro | python -m retrieval_bench.repro_log`):
each line passed on the moment it arrives, every stage DVC reaches numbered against the pipeline's
stages ("[5/29] Running stage 'embed_corpus@c400-default':"), after one line of what a first run
costs; and with --no-remote, DVC's closing advice to `dvc push` (nowhere to push) left out."""

from __future__ import annotations

import argparse
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

# What DVC 3 says of each stage it reaches: runs it, finds it unchanged, restores it from the run-cache,
# or (`dvc repro --pull`) pulls its outputs from the remote.
# A stage whose pull fails is run after its "Pulling" line: numbered once, by name.
STAGE_LINE = re.compile(
    r"^(?:Running stage '(?P<run>[^']+)':|Stage '(?P<same>[^']+)' didn't change, skipping"
    r"|Stage '(?P<cached>[^']+)' is cached - skipping run, checking out outputs|Pulling data for stage: '(?P<pull>[^']+)')$"
)
PUSH_ADVICE = "Use `dvc push` to send your updates to remote storage."
# The sample's first run, every stage, on 2 CPU cores with a light load: 4 min 42 s (docs/benchmarks.md,
# "`make repro`'s first run"); other core counts scaled from it (embedding is CPU-bound).
FIRST_RUN_MINUTES, MEASURED_CORES = 5, 2


def expected_time(stages: int, cores: int, first_run: bool = True) -> str:
    """One line: the pipeline's size and, for a first run (an empty DVC cache), what one of the sample
    takes on `cores` CPU cores (scaled from the measured run, embedding being CPU-bound)."""
    if not first_run:
        return f"{stages} stages; those whose inputs changed since the last run (dvc.lock) run again"
    minutes = max(1, round(FIRST_RUN_MINUTES * MEASURED_CORES / max(cores, 1)))
    return (
        f"{stages} stages; a first run of the sample takes about {minutes} min on {cores} CPU core(s) "
        f"(measured: {FIRST_RUN_MINUTES} min on {MEASURED_CORES}); a rerun only what changed"
    )


def relay(lines: Iterable[str], total: int, out: TextIO, no_remote: bool) -> None:
    """Write each of `lines` to `out` and flush it at once, each stage line numbered against `total`."""
    reached: dict[str, int] = {}  # stage -> its number
    for line in lines:
        text = line.rstrip("\n")
        if no_remote and text == PUSH_ADVICE:
            continue
        if stage := STAGE_LINE.match(text):
            name = next(found for found in stage.groups() if found)
            line = f"[{reached.setdefault(name, len(reached) + 1)}/{total}] {line}"
        out.write(line)
        out.flush()


def pipeline_stages() -> int:
    """How many stages `dvc repro` reaches (every foreach and matrix item counted)."""
    listed = subprocess.run(["dvc", "stage", "list", "--name-only"], capture_output=True, text=True, check=True)
    return len(listed.stdout.split())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-remote", action="store_true", help="drop DVC's advice to `dvc push`")
    arguments = parser.parse_args(argv)
    total = pipeline_stages()
    # dvc.lock is in git, so a fresh clone has one: its first run is the one with an empty DVC cache
    first_run = not any(Path(".dvc", "cache").glob("*"))
    print(expected_time(total, os.cpu_count() or 1, first_run=first_run), flush=True)
    relay(iter(sys.stdin.readline, ""), total, sys.stdout, arguments.no_remote)


if __name__ == "__main__":
    # Ctrl-C reaches every process of `dvc repro | repro_log`: this one relays until DVC's output
    # ends (the stage's "interrupted; ..." line included) rather than die with a traceback
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    main()
