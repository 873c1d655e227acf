"""What the benchmark scripts share: the import path (importing this module puts src/ and bench/
first on sys.path), the peak RSS of a process, equal threads for compared engines and the machine
they ran on, interleaved rounds, the child-process protocol the per-method benches use, SciFact's
abstracts, and a throwaway copy of the project for `dvc repro`."""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCIFACT = ROOT.parent / "shared" / "data" / "scifact"  # BEIR SciFact, where the workplace keeps it
for _folder in (str(ROOT / "bench"), str(ROOT / "src")):  # src/ first, then bench/
    if _folder in sys.path:
        sys.path.remove(_folder)
    sys.path.insert(0, _folder)

from retrieval_bench.core.errors import InputError  # noqa: E402  (after src/ is on the path)


def peak_rss_gib() -> float:
    """This process's peak RSS in GiB (VmHWM: unlike ru_maxrss it starts afresh at exec, not at
    the parent's peak, and a bench's parent may hold the model and the data)."""
    status = Path("/proc/self/status").read_text()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmHWM:"))) / 2**20  # kB


# Equal threads, and the machine beside each figure.

THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "MKL_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "NUMBA_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
)


def thread_env(threads: int) -> dict[str, str]:
    """A child's environment that pins every engine (BLAS, OpenMP as FAISS uses it, numba) to
    `threads`: they read these variables when they start, so they go in before the child does."""
    return {name: str(threads) for name in THREAD_VARIABLES}


def pin_threads(threads: int) -> None:
    """In a child: pin the engines already loaded, or that ignore the variables, to `threads` too."""
    if "torch" in sys.modules:
        sys.modules["torch"].set_num_threads(threads)
    try:
        import faiss

        faiss.omp_set_num_threads(threads)
    except ImportError:
        pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(threads)  # numpy's BLAS, whatever it read at start
    except ImportError:
        pass


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_kernel() -> str:
    """numpy's BLAS: library, version, the kernel it picked for this CPU and its threads
    (threadpoolctl where installed; else numpy's build configuration)."""
    import numpy as np

    try:
        from threadpoolctl import threadpool_info

        blas = [pool for pool in threadpool_info() if pool.get("user_api") == "blas"]
        if blas:  # numpy's own, where other libraries (scipy, faiss) bring theirs
            pool = next((pool for pool in blas if "numpy" in pool.get("filepath", "")), blas[0])
            return f"{pool['internal_api']} {pool.get('version')} ({pool.get('architecture', '?')} kernel; {pool['num_threads']} threads in this process)"
    except ImportError:
        pass
    info = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
    return f"{info.get('name')} {info.get('version')}"


def machine(threads: int) -> str:
    """One line for the top of a table: where the figures come from."""
    return (
        f"CPU {cpu_model()}, {os.cpu_count()} cores (usable {len(os.sched_getaffinity(0)) if hasattr(os, 'sched_getaffinity') else '?'}); "
        f"BLAS {blas_kernel()}; every engine pinned to {threads} thread(s) where it is measured; load average {os.getloadavg()[0]:.2f} at the start"
    )


def interleaved(names: list[str], rounds: int, measure: Callable[[str, int], dict | None]) -> dict[str, list[dict]]:
    """measure(name, round) for each round A, B, A, B, ... (a load that comes and goes falls on
    every engine alike); None (a failure) is left out."""
    reports: dict[str, list[dict]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names:
            report = measure(name, round_)
            if report is not None:
                reports[name].append(report)
    return reports


def interleaved_children(
    script: str, names: list[str], rounds: int, workdir: str, columns: int, env_for: Callable[[str, int], dict]
) -> dict[str, list[dict]]:
    """interleaved() over child processes (run_child, env_for(name, round) set for each): a child
    that fails prints its table row of `columns` cells and is left out."""

    def measure(name: str, round_: int) -> dict | None:
        try:
            return run_child(script, name, "--workdir", workdir, env=env_for(name, round_))
        except ChildFailed as failure:
            print(failed_row([name, f"round {round_ + 1}"], failure, columns), flush=True)
            return None

    return interleaved(names, rounds, measure)


def median(reports: list[dict], key: str) -> float:
    return statistics.median(report[key] for report in reports)


# The child-process protocol: the parent reruns its own script with its own arguments plus
# `--child NAME` (and any extra arguments); the child does one measurement and prints its report
# as one JSON line, the last on its stdout. Each measurement in its own process: its peak RSS is
# its own, and one that fails (or is killed: -9 is the OOM killer) is a row, not the end.


class ChildFailed(Exception):
    """A child that exited non-zero; str() is the table cell: `failed (rc): <stderr tail>`."""

    def __init__(self, returncode: int, stderr: str):
        lines = [line.strip() for line in stderr.splitlines() if line.strip(" ^~")]  # without traceback markers
        tail = " ".join(" ".join(lines).split())[-300:].replace("|", "\\|")  # one line, safe in a Markdown cell
        super().__init__(f"failed ({returncode}): {tail}")
        self.returncode = returncode


def add_child_arguments(parser, choices: list[str] | None = None) -> None:
    """The hidden arguments run_child passes: which method the child measures, and its work folder."""
    parser.add_argument("--child", choices=choices, help=argparse.SUPPRESS)
    parser.add_argument("--workdir", help=argparse.SUPPRESS)


def add_side_by_side_arguments(parser, methods: list[str], rounds: int, engines: str) -> None:
    """Threads pinned for every engine, interleaved rounds, and the child hooks (run_child)."""
    parser.add_argument("--threads", type=int, default=1, help=f"threads of every engine ({engines})")
    parser.add_argument("--rounds", type=int, default=rounds, help="interleaved rounds; the table gives medians")
    add_child_arguments(parser, methods)


def methods_of(text: str, known: list[str], first: str | None = None) -> list[str]:
    """--methods as a list, each one of `known` (and `first` first where the others compare to
    it); else one InputError naming the flag."""
    methods = text.split(",")
    unknown = [method for method in methods if method not in known]
    if unknown:
        raise InputError(f"--methods {text}: {', '.join(unknown)} unknown (from {','.join(known)})")
    if first is not None and methods[0] != first:
        raise InputError(f"--methods {text}: {first} first (the others are compared to it)")
    return methods


def run_child(script: str, name: str, *extra: str, env: dict[str, str] | None = None) -> dict:
    """Run `sys.executable script <this process's arguments> --child NAME *extra` (env: variables
    set over this process's environment) and return the child's report; raise ChildFailed."""
    command = [sys.executable, script, *sys.argv[1:], "--child", name, *extra]
    result = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **(env or {})})
    if result.returncode:
        raise ChildFailed(result.returncode, result.stderr)
    lines = result.stdout.strip().splitlines()
    try:
        return json.loads(lines[-1])
    except (IndexError, json.JSONDecodeError):
        raise ChildFailed(
            result.returncode, f"no JSON report on stdout: {result.stdout[-200:]!r} {result.stderr}"
        ) from None


def report_to_parent(**fields) -> None:
    """The child's side: its report, with its peak RSS (`peak_gib`) and the load average as it
    ends (`load`), as the last line of stdout."""
    print(json.dumps({**fields, "peak_gib": peak_rss_gib(), "load": os.getloadavg()[0]}), flush=True)


def failed_row(cells: list[str], failure: ChildFailed, columns: int) -> str:
    """A table row of `columns` cells: the given leading cells, the failure, then empty cells."""
    return "| " + " | ".join([*cells, str(failure)] + [""] * (columns - len(cells) - 1)) + " |"


# SciFact.


def scifact_folder(path: str | Path, script: str) -> Path | None:
    """The BEIR SciFact folder, resolved. Where the workplace keeps it (SCIFACT) and it is absent:
    None, after printing the one-line skip (the bench then exits 0: the data is the workplace's, not
    the project's, and a user's clone lacks it). A folder the user named that has no corpus.jsonl
    is an error: a mistyped path must not pass as a skip."""
    if not (Path(path) / "corpus.jsonl").is_file():
        if Path(path).resolve() != SCIFACT.resolve():
            raise InputError(f"{path}: no corpus.jsonl here; expected a BEIR SciFact folder")
        print(f"{script}: skipped: {path} has no corpus.jsonl (BEIR SciFact)", flush=True)
        return None
    return Path(path).resolve()


def run_main(main: Callable[[], int | None]) -> None:
    """Run a bench's main() as a script: its exit status, and a bad argument, a missing extra, an
    unusable device (InputError, ImportError) or a failed command it ran as one line on stderr and
    exit status 1."""
    try:
        sys.exit(main())
    except InputError as error:
        sys.exit(f"error: {error}")
    except ImportError as error:
        sys.exit(f"error: {error} (install the project's extras: make install-test)")
    except subprocess.CalledProcessError as error:  # its own output, above, says why
        command = " ".join(map(str, error.cmd)) if isinstance(error.cmd, list) else str(error.cmd)
        sys.exit(f"error: `{command}` failed (exit status {error.returncode}); its output above says why")


def abstracts(scifact: Path, n: int | None = None) -> list[str]:
    """The first n SciFact abstracts (all when n is None or 0), title + " " + text as BEIR embeds them."""
    texts = []
    with open(scifact / "corpus.jsonl", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            texts.append(f"{row.get('title', '')} {row['text']}".strip())
            if n and len(texts) == n:
                break
    return texts


# A throwaway copy of the project, for benches that run the real `dvc repro`.


def project_env(**extra: str) -> dict[str, str]:
    """This environment with this interpreter's bin/ first on PATH (so `dvc repro`'s `python -m
    stages.…` runs in the same venv), plus `extra`."""
    return dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}", **extra)


def copy_project(dest: Path, env: dict[str, str]) -> None:
    """Copy the project's files (tracked, and untracked but not ignored; without tests/, bench/,
    the sample corpus, metrics/ and DVC's state) into `dest`, then `git init` and `dvc init` there.
    The caller writes its own params.yaml and data."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    if listing.returncode != 0:  # an extracted archive: which files are the project's is git's answer
        raise InputError(f"{ROOT}: not a git checkout; the benchmark copies the project's git-listed files")
    listed = listing.stdout
    for name in filter(None, listed.split("\0")):
        if name.startswith((".dvc/", "tests/", "bench/", "data/sample/", "metrics/")) or name in {
            "dvc.lock",
            ".dvcignore",
        }:
            continue
        if not (ROOT / name).is_file():  # deleted in the working tree, not yet in git
            continue
        if name.startswith("data/reviews/") and name != "data/reviews/README.md":
            continue  # people's reviews of this project (a `.dvc` file without its data stops `dvc repro`)
        (dest / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, dest / name)
    for command in (["git", "init", "-q"], [sys.executable, "-m", "dvc", "init", "-q"]):
        subprocess.run(command, cwd=dest, check=True, env=env)
