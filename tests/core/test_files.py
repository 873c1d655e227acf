"""core.files.atomic_path: a write that fails for a reason of the place written (a full disk, a
read-only or forbidden folder) is one line naming the file, not its temporary, and changes nothing."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

import pytest

from retrieval_bench.core import files
from retrieval_bench.core.errors import InputError


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES, errno.ENOSPC])
def test_a_place_that_cannot_be_written_is_named_by_the_file(tmp_path, monkeypatch, code):
    target = tmp_path / "metrics" / "report.json"
    target.parent.mkdir()
    target.write_text("before")

    def refused(*args, **kwargs):
        raise OSError(code, os.strerror(code), str(tmp_path / "metrics" / ".report.json.x1.tmp"))

    monkeypatch.setattr(tempfile, "mkstemp", refused)
    with pytest.raises(InputError) as raised:
        files.write_json(target, {"after": 1})
    assert f"writing {target}; it was not changed" in str(raised.value) and ".tmp" not in str(raised.value)
    monkeypatch.undo()

    monkeypatch.setattr(os, "replace", refused)
    with pytest.raises(InputError, match=f"writing {target}; it was not changed"):
        files.write_json(target, {"after": 1})
    assert target.read_text() == "before" and os.listdir(target.parent) == ["report.json"]


def test_a_killed_writers_temporary_file_is_ignored_and_later_deleted(tmp_path):
    """A kill between a write and its rename left `.vectors.npy.<random>.tmp` (a full copy) that
    nothing deleted: inside a DVC output folder it changed the output's hash and reran stages, in
    metrics/ `git add metrics/` committed it."""
    import subprocess
    import time

    target = tmp_path / "vectors.npy"
    old, fresh = tmp_path / ".vectors.npy.a1b2c3.tmp", tmp_path / ".vectors.npy.d4e5f6.tmp"
    for leftover in (old, fresh):
        leftover.write_bytes(b"half a vectors file")
    long_ago = time.time() - files.STALE_TEMP_SECONDS - 60
    os.utime(old, (long_ago, long_ago))
    with files.atomic_open(target) as handle:
        handle.write("new")
    assert target.read_text() == "new" and not old.exists() and fresh.exists()  # a live writer's may be fresh
    root = Path(__file__).resolve().parents[2]
    for ignore_file in (".gitignore", ".dvcignore"):
        assert ".*.tmp" in (root / ignore_file).read_text().splitlines()
    ignored = subprocess.run(
        ["git", "check-ignore", "metrics/.leaderboard.json.x1y2.tmp"], cwd=root, capture_output=True
    )
    assert ignored.returncode == 0
