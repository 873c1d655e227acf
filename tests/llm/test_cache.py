"""The question cache survives a crash mid-write: a torn last line is skipped and repaired."""

import json
from pathlib import Path

import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.llm.cache.replies import CacheWriter, cache_key, read_cache, read_journal


def test_torn_last_line_is_skipped_then_cut_before_the_next_append(tmp_path):
    path = tmp_path / "cache.jsonl"
    with CacheWriter(path) as writer:
        writer.append({"key": "k1", "question": "first?"})
    with open(path, "a") as handle:
        handle.write('{"key": "k2", "quest')  # the process died here
    assert list(read_cache(path)) == ["k1"]
    with CacheWriter(path) as writer:
        writer.append({"key": "k3", "question": "third?"})
    assert list(read_cache(path)) == ["k1", "k3"]
    assert path.read_text().count("\n") == 2


def test_a_bad_line_before_the_end_is_named_in_the_cache_and_an_error_in_the_journal(tmp_path):
    """A cache line that is not a record is ignored (tests/llm/test_bad_input_cache.py); a journal
    line is not: it may be the only trace of a paid batch."""
    path = tmp_path / "cache.jsonl"
    path.write_text('{"key": "k1", "question": "q?"}\nnot json\n{"key": "k2", "question": "q?"}\n')
    said = []
    assert list(read_cache(path, said.append)) == ["k1", "k2"]
    assert said == [f"{path}:2: invalid JSON; ignored, its question is asked again"]
    journal = tmp_path / "cache.batches.jsonl"
    journal.write_text('{"event": "intent", "batch_id": null}\nnot json\n{"event": "x", "batch_id": null}\n')
    with pytest.raises(InputError, match=r"cache.batches.jsonl:2: invalid JSON in the batch journal"):
        read_journal(journal)
    journal.write_text('{"question": "no event?"}\n')
    with pytest.raises(InputError, match=r"jsonl:1: not a record with 'event' and 'batch_id' in the batch journal"):
        read_journal(journal)
    assert read_cache(tmp_path / "absent.jsonl") == {} and read_journal(tmp_path / "absent.jsonl") == []


def test_key_changes_with_everything_that_changes_the_reply():
    base = ("anthropic", "claude-haiku-4-5", "p" * 64, "passage text")
    key = cache_key(*base)
    for index, other in enumerate(["openai-compatible", "other-model", "q" * 64, "passage text!"]):
        changed = list(base)
        changed[index] = other
        assert cache_key(*changed) != key
    assert cache_key(*base, attempt=0) == key != cache_key(*base, attempt=1)


def test_line_separator_characters_inside_a_record_do_not_split_it(tmp_path):
    path = tmp_path / "cache.jsonl"
    odd = "a reply with \x85 NEL, \u2028 LINE SEPARATOR and \u2029 inside?"
    with CacheWriter(path) as writer:
        writer.append({"key": "k1", "question": odd})
        writer.append({"key": "k2", "question": "plain?"})
    assert [record["question"] for record in read_cache(path).values()] == [odd, "plain?"]


def test_a_last_line_torn_inside_a_multibyte_character_is_skipped(tmp_path):
    path = tmp_path / "cache.jsonl"
    with CacheWriter(path) as writer:
        writer.append({"key": "k1", "question": "first?"})
    torn = '{"key": "k2", "question": "café?"}'.encode("utf-8")
    with open(path, "ab") as handle:
        handle.write(torn[: torn.index("é".encode("utf-8")) + 1])  # died between the two bytes of é
    assert list(read_cache(path)) == ["k1"]
    with CacheWriter(path) as writer:
        writer.append({"key": "k3", "question": "third?"})
    assert list(read_cache(path)) == ["k1", "k3"]


def test_bytes_that_are_not_utf8_before_the_end_are_named_by_line(tmp_path):
    path = tmp_path / "cache.jsonl"
    path.write_bytes(b'{"key": "k1", "question": "q?"}\n{"key": "k2", "question": "\xff?"}\n')
    said = []
    assert list(read_cache(path, said.append)) == ["k1"]
    assert said == [f"{path}:2: not UTF-8 text; ignored, its question is asked again"]


def test_opening_a_writer_on_a_whole_cache_reads_only_its_last_byte(tmp_path, monkeypatch):
    import pathlib

    import retrieval_bench.llm.cache.replies as cache

    path = tmp_path / "cache.jsonl"
    with CacheWriter(path) as writer:
        for index in range(1000):
            writer.append({"key": f"k{index}", "question": "q?"})
    bytes_read = []

    class CountingHandle:
        def __init__(self, handle):
            self._handle = handle

        def read(self, *size):
            data = self._handle.read(*size)
            bytes_read.append(len(data))
            return data

        def __getattr__(self, name):
            return getattr(self._handle, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self._handle.close()

    def refuse(*args, **kwargs):
        raise AssertionError("the whole file was read")

    monkeypatch.setattr(pathlib.Path, "read_bytes", refuse)
    monkeypatch.setattr(cache, "open", lambda *args: CountingHandle(open(*args)), raising=False)
    with CacheWriter(path) as writer:
        writer.append({"key": "last", "question": "q?"})
    assert sum(bytes_read) <= 1
    monkeypatch.undo()
    assert len(read_cache(path)) == 1001


def _record(key: str, question: str) -> dict:
    return {
        "key": key,
        "question": question,
        "evidence": "e",
        "passage_sha256": "p",
        "model": "m",
        "prompt_sha256": "s",
    }


def test_the_mirror_restores_each_lacking_record_once_after_a_torn_tail_and_a_dry_run_writes_nothing(
    tmp_path, monkeypatch
):
    """A review's cases: a torn last line of the cache (a run killed mid-write) stayed in the middle
    once records were appended after it (an invalid line for every later run, fatal in a journal);
    a key two experiments paid for was restored twice; a dry run quoted money the run would not pay."""
    from retrieval_bench.llm.cache.replies import journal_path_for, mirror_of, restore_from_mirror

    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "project"))
    monkeypatch.chdir(tmp_path)
    cache = Path("data/question_cache.jsonl")
    for key in ("k1", "k2", "k2"):  # k2 paid twice by experiments running at once
        with CacheWriter(cache) as writer:
            writer.append(_record(key, f"question {key}"))
        cache.unlink()
        journal_path_for(cache).unlink(missing_ok=True)
    mirror = mirror_of(cache)
    assert mirror == tmp_path / "project/.dvc/tmp/retrieval-bench/paid/data/question_cache.jsonl"
    assert mirror.read_text().count('"key": "k2"') == 2
    cache.parent.mkdir(exist_ok=True)
    cache.write_bytes(json.dumps(_record("k0", "mine")).encode() + b"\n" + b'{"key": "k9", "quest')  # torn tail
    said: list[str] = []
    restore_from_mirror(cache, "questions already paid for", said.append, dry_run=True)
    assert cache.read_bytes().endswith(b'"quest') and "holds 2 records the cache lacks" in said[0]
    restore_from_mirror(cache, "questions already paid for", said.append)
    assert "restored 2 questions already paid for" in said[-1]
    assert list(read_cache(cache)) == ["k0", "k1", "k2"] and cache.read_text().count("\n") == 3
    # a whole last record that only lacks its newline (a hand edit) is kept, not cut as torn
    cache.write_bytes(json.dumps(_record("k0", "mine")).encode())
    restore_from_mirror(cache, "questions already paid for", said.append)
    assert list(read_cache(cache)) == ["k0", "k1", "k2"]


def test_a_line_of_the_mirror_that_is_no_sound_record_is_never_copied(tmp_path, monkeypatch):
    """A damaged line (a torn write mid-file, a failing checksum) has no key read_cache takes: it
    was copied on every run and, through dvc.lock's version, doubled each time (1, 3, 7, 15)."""
    from retrieval_bench.llm.cache.replies import journal_path_for, merge, mirror_of, restore_from_mirror

    monkeypatch.setenv("DVC_ROOT", str(tmp_path / "project"))
    monkeypatch.chdir(tmp_path)
    cache = Path("data/question_cache.jsonl")
    with CacheWriter(cache) as writer:
        writer.append(_record("k1", "question k1"))
    mirror = mirror_of(cache)
    edited = json.loads(mirror.read_text().splitlines()[0]) | {"question": "edited"}  # fails its checksum
    with open(mirror, "ab") as handle:
        handle.write(b'{"key": "k2", "quest\n' + json.dumps(edited).encode() + b"\n")
    cache.write_text("")
    for _ in range(3):
        restore_from_mirror(cache, "questions", lambda line: None)
    assert list(read_cache(cache)) == ["k1"] and cache.read_text().count("\n") == 1
    journal = journal_path_for(cache)
    assert merge(journal, b'{"event": "submitted", "batch_id": "b1"}\n{not json\n', keyed=False) == 1
    assert merge(journal, b'{"event": "submitted", "batch_id": "b1"}\n', keyed=False) == 0
    assert [event["batch_id"] for event in read_journal(journal)] == ["b1"]
