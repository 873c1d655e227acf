"""The `retrieval-bench` command: compare two runs, gauge a question set, review a sample of the golden
set, export it or its questions, serve a stub LLM to check the generation path with."""

from __future__ import annotations

import importlib
import os
import sys

# name: (module, its function that adds the command's arguments, help). A command's module (pandas,
# scipy, DVC behind it) is imported only when that command runs: `retrieval-bench --help` imports none.
COMMANDS = {
    "compare": (
        "retrieval_bench.evaluation.compare.command",
        "add_arguments",
        "did B retrieve better than A? paired statistics per question",
    ),
    "export-beir": ("retrieval_bench.goldenset.beir_export", "add_arguments", "write the golden set as a BEIR folder"),
    "gauge": (
        "retrieval_bench.goldenset.gauge",
        "add_arguments",
        "echo rate and BM25 ease of any question set against the chunks",
    ),
    "show": (
        "retrieval_bench.show",
        "add_arguments",
        "the current run's headline metrics, the change since HEAD, golden-set health",
    ),
    "export-questions": (
        "retrieval_bench.retrieval.external",
        "add_export_arguments",
        "write the questions for an external system to run",
    ),
    "cache": (
        "retrieval_bench.embedding.cache_prune",
        "add_arguments",
        "the embedding caches: `cache prune` keeps what the current data needs",
    ),
    "lock": (
        "retrieval_bench.lockfile",
        "add_arguments",
        "dvc.lock: `lock prune` drops the entries of stages dvc.yaml no longer has",
    ),
    "review": (
        "retrieval_bench.review.command",
        "add_arguments",
        "review a sample of the golden set in a local page: mark questions, grade retrieved chunks 0-3",
    ),
    "stub-llm": (
        "retrieval_bench.llm.providers.stub_server",
        "add_arguments",
        "serve a deterministic stub LLM on 127.0.0.1: a no-key pipeline check, its questions are placeholders",
    ),
}


def main(argv: list[str] | None = None) -> int:
    try:
        return _main(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt as error:  # anywhere, the imports included: one line, as a stage says it
        from retrieval_bench.core.errors import INTERRUPTED_EXIT, Interrupted

        print(f"\n{error if isinstance(error, Interrupted) else 'interrupted'}", file=sys.stderr)
        return INTERRUPTED_EXIT


def _main(argv: list[str]) -> int:
    from retrieval_bench.core.errors import InputError, OneLineArguments, describe_os_error

    parser = OneLineArguments(prog="retrieval-bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)  # of OneLineArguments too
    chosen = next((arg for arg in argv if not arg.startswith("-")), None)  # the command: the first word
    for name, (module, adder, help_text) in COMMANDS.items():
        command = commands.add_parser(name, help=help_text)
        if name == chosen:
            getattr(importlib.import_module(module), adder)(command)
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except InputError as error:
        print(f"error: {error}{_outside_root(args.command)}", file=sys.stderr)
        return 1
    except OSError as error:  # a path that is a folder, a full disk: one line, as the stages say it
        if isinstance(error, BrokenPipeError):
            raise
        print(f"error: {describe_os_error(error)}", file=sys.stderr)
        return 1


def _outside_root(command: str) -> str:
    """Where a project command ran in a folder of the project below its root (whose paths it reads
    relative to the working directory), the root to run it from: its "not found" said `dvc repro`
    had not run, or nothing was committed."""
    if command not in ("show", "compare", "review", "cache") or os.path.isfile("dvc.yaml"):
        return ""
    here = os.path.abspath(".")
    parent = os.path.dirname(here)
    while parent != here:
        if os.path.isfile(os.path.join(parent, "dvc.yaml")):
            return f" (this is {here}, below the project root {parent}: run `retrieval-bench {command}` there)"
        here, parent = parent, os.path.dirname(parent)
    return ""


def run() -> None:
    """The `retrieval-bench` command: main(), then leave at once. Native thread pools loaded by the
    command (pyarrow's, reading through DVC's file objects) have aborted in their destructors at
    interpreter exit ("terminate called without an active exception") after the output was
    complete; the work is done and flushed, so their teardown is skipped."""
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader left (`retrieval-bench gauge ... | head`): as `cat` does, quietly
        os._exit(141)  # 128 + SIGPIPE, what the shell reports for a command its pipe's reader closed
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
