"""The `retrieval-bench` command: compare two runs, gauge a question set, export a golden set or its questions."""
from __future__ import annotations

import argparse
import os
import sys

from retrieval_bench.io import InputError


def main(argv: list[str] | None = None) -> int:
    from retrieval_bench.evaluation import compare, export
    from retrieval_bench.goldenset import gauge
    from retrieval_bench import show
    from retrieval_bench.retrieval import cache_prune, external

    parser = argparse.ArgumentParser(prog="retrieval-bench", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    compare.add_arguments(commands.add_parser("compare", help="did B retrieve better than A? paired statistics per question"))
    export.add_arguments(commands.add_parser("export-beir", help="write the golden set as a BEIR folder"))
    gauge.add_arguments(commands.add_parser("gauge", help="echo rate and BM25 ease of any question set against the chunks"))
    show.add_arguments(commands.add_parser("show", help="the current run's headline metrics, the change since HEAD, golden-set health"))
    external.add_export_arguments(commands.add_parser("export-questions", help="write the questions for an external system to run"))
    cache_prune.add_arguments(commands.add_parser("cache", help="the embedding caches: `cache prune` keeps what the current data needs"))
    args = parser.parse_args(argv)
    try:
        return args.run(args) or 0
    except InputError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


def run() -> None:
    """The `retrieval-bench` command: main(), then leave at once. Native thread pools loaded by the
    command (pyarrow's, reading through DVC's file objects) have aborted in their destructors at
    interpreter exit ("terminate called without an active exception") after the output was
    complete; the work is done and flushed, so their teardown is skipped."""
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    run()
