"""Pipeline stages: each reads its params.yaml section, does I/O, and calls retrieval_bench.

A stage runs the library beside it: an editable install points at one checkout's src/, so in a
copy of the project (a DVC experiment's temporary folder, a queued run) the stages imported the
workspace's library, not the code the experiment records and dvc.lock hashes."""

import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"
if (_SRC / "retrieval_bench").is_dir() and sys.path[:1] != [str(_SRC)]:
    sys.path.insert(0, str(_SRC))
