"""Pipeline stages: each reads its params.yaml section, does I/O, and calls retrieval_bench.

A stage runs the library beside it: an editable install points at one checkout's src/, so in a
copy of the project (a DVC experiment's temporary folder, a queued run) the stages imported the
workspace's library, not the code the experiment records and dvc.lock hashes; so did the
processes a stage starts (a local Ray instance's workers), which PYTHONPATH now points here too."""

import os
import sys
from pathlib import Path

_SRC = Path(__file__).resolve().parents[1] / "src"
if (_SRC / "retrieval_bench").is_dir() and sys.path[:1] != [str(_SRC)]:
    sys.path.insert(0, str(_SRC))
    # and in every process a stage starts (a local Ray instance's workers import the library too)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [str(_SRC), os.environ.get("PYTHONPATH")]))
