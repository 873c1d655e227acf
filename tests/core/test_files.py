"""core.files.atomic_path: a write that fails for a reason of the place written (a full disk, a
read-only or forbidden folder) is one line naming the file, not its temporary, and changes nothing."""

from __future__ import annotations

import errno
import os
import tempfile

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
