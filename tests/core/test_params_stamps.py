"""check_params' stamp of generate.style_examples: a content digest, remembered between repros
while the file's size and time stay, as load.source's is."""

from __future__ import annotations

import os

from retrieval_bench.corpus import source_stamp
from stages import check_params


def test_the_style_examples_stamp_hashes_an_unchanged_file_once(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".dvc").mkdir()
    examples = tmp_path / "examples.jsonl"
    examples.write_text('{"question": "How do I enable WAL?"}\n')
    hashed, digest = [], source_stamp.content_digest
    monkeypatch.setattr(source_stamp, "content_digest", lambda root: hashed.append(root) or digest(root))
    monkeypatch.setattr(check_params, "content_digest", source_stamp.content_digest, raising=False)
    first = check_params.style_examples_stamp("examples.jsonl")
    assert check_params.style_examples_stamp("examples.jsonl") == first and len(hashed) == 1
    examples.write_text('{"question": "What is a checkpoint?"}\n')
    os.utime(examples, ns=(1, 2))
    assert check_params.style_examples_stamp("examples.jsonl")["md5"] != first["md5"] and len(hashed) == 2
    assert check_params.style_examples_stamp(None) == {"file": None, "md5": None}  # the sample's: unchanged bytes
