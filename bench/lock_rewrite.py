"""What DVC spends rewriting dvc.lock after each stage it runs, for given lock files.

    python bench/lock_rewrite.py dvc.lock [OTHER.lock ...] [--rounds 3]
    git show 051fb3a:dvc.lock > /tmp/before.lock && python bench/lock_rewrite.py /tmp/before.lock dvc.lock

After every stage DVC 3 re-reads the whole lock with ruamel's round-trip parser and writes it back
(dvc.dvcfile.Lockfile.dump -> dvc.utils.serialize.modify_yaml), in pure Python. This times that
pair, parse_yaml_for_update then dumps_yaml, in CPU seconds (time.process_time), the files in
turn each round, and prints the fastest round of each: its per-stage cost at that lock's size.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("locks", nargs="+", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from dvc.utils.serialize import dumps_yaml, parse_yaml_for_update

    texts = {path: path.read_text() for path in args.locks}
    seconds: dict[Path, list[float]] = {path: [] for path in args.locks}
    for _ in range(args.rounds):
        for path, text in texts.items():  # in turn, so background load hits every file alike
            started = time.process_time()
            dumps_yaml(parse_yaml_for_update(text, str(path)))
            seconds[path].append(time.process_time() - started)
    print("| lock | lines | stages | rewrite per stage run (CPU-s, fastest of rounds) |")
    print("|---|---:|---:|---:|")
    for path, text in texts.items():
        stages = len(parse_yaml_for_update(text, str(path)).get("stages", {}))
        print(f"| {path} | {text.count(chr(10)):,} | {stages} | {min(seconds[path]):.2f} |")


if __name__ == "__main__":
    main()
