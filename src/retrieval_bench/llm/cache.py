"""The question cache: append-only JSON Lines, one record per generated question, keyed by content.

A record's key is the sha256 of what the question is asked about and with (provider family, model
or its alias, prompt, passage text, and the attempt number when a rejected reply is asked again),
so editing one passage regenerates one question and changing the prompt or the model
regenerates all; a finished question is never paid for twice. How it is asked (max_tokens,
temperature, concurrency, timeouts, retries, the server's URL) is recorded, not keyed: changing it
asks nothing again. Records written before max_tokens left the key (KEY_VERSION 1, without a
key_version field) are still found: EarlierKeys maps a job to the key it had then.

A record carries: key, passage_sha256, model, prompt_sha256, question, evidence (the excerpt the
generator quotes), and from retrieval_bench.llm.tasks.Task.record also family, provider, max_tokens, attempt,
key_version, temperature and seed (null: not sent), model_alias and response_format (when set),
rejected (a reason, or null), stop_reason, raw (the reply as received), usage and created.

The batch journal (question_cache.batches.jsonl, next to the cache) is append-only JSON Lines
too: an "intent" event (the requests and the sha256 of their keys) is written and fsynced before
a batch is created, a "submitted" event (batch id and its requests, created or adopted) once
its id is known, an "abandoned" event when an intent is known never to have become a batch, and
a "collected" event once its results are cached. A rerun resumes uncollected batches and
reconciles intents left without an outcome (see retrieval_bench.llm.batch) before submitting
anything.

Appends are whole lines: a write or fsync that fails (a full disk) cuts the file back to its
last complete record and raises CacheWriteError, so the cache stays consistent.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from retrieval_bench.core.errors import InputError

# Hashed into the key of a passage whose text had to be escaped to stay inside the prompt's
# <passage> delimiters (retrieval_bench.llm.passage_escape.escape_passage): such a passage is sent
# differently from before, so it must not be served a reply cached for the unescaped prompt.
ESCAPED_MARKER = "passage-delimiters-escaped"


KEY_VERSION = 2  # 1: max_tokens was hashed into the key (legacy_cache_key)


def cache_key(
    family: str,
    model: str,
    prompt_sha256: str,
    passage_text: str,
    attempt: int = 0,
    escaped: bool = False,
) -> str:
    """A 64-character hex key (it doubles as a batch request's custom_id, at most 64 characters).
    Attempt 0 is the first request for a passage; the attempt number is hashed only above 0, so
    first attempts keep their key. Likewise `escaped` (the passage held text that looks like the
    prompt's delimiters) is hashed only when true: every other passage keeps its key."""
    return _key([family, model, prompt_sha256, passage_text], attempt, escaped)


def legacy_cache_key(
    family: str, model: str, prompt_sha256: str, passage_text: str, max_tokens: int, attempt: int, *, escaped: bool
) -> str:
    """The key a record of KEY_VERSION 1 has: max_tokens hashed after the passage."""
    return _key([family, model, prompt_sha256, passage_text, max_tokens], attempt, escaped)


def _key(fields: list, attempt: int, escaped: bool) -> str:
    if attempt:
        fields.append(attempt)
    if escaped:
        fields.append(ESCAPED_MARKER)
    payload = json.dumps(fields, ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EarlierKeys:
    """The keys of a cache's KEY_VERSION 1 records and the max_tokens values they were made with:
    a job whose earlier key is one of them is served that record (llm.tasks), so a cache written
    before max_tokens left the key is paid for once, whatever max_tokens is now."""

    keys: frozenset[str] = frozenset()
    max_tokens: tuple[int, ...] = ()

    @classmethod
    def of(cls, records: Mapping[str, dict]) -> "EarlierKeys":
        earlier = [r for r in records.values() if r.get("key_version", 1) == 1 and isinstance(r.get("max_tokens"), int)]
        return cls(frozenset(r["key"] for r in earlier), tuple(sorted({r["max_tokens"] for r in earlier})))


def _read_append_log(path: str | Path, what: str, required: tuple[str, ...]) -> list[dict]:
    """The records of an append-only JSONL file, in order; a missing file is empty and a torn
    last line (a crash mid-write, perhaps inside a multi-byte character) is skipped, while a bad
    line elsewhere is an InputError."""
    path = Path(path)
    if not path.exists():
        return []
    records = []
    # Split the bytes on b"\n" alone, then decode each line: str.splitlines() would also split
    # inside a record at U+0085 or U+2028, and decoding the whole file would fail on a torn tail.
    lines = path.read_bytes().split(b"\n")
    for line_number, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        torn = line_number == len(lines)  # no newline after it: cut by a crash mid-write
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError:
            if torn:
                continue
            raise InputError(f"{path}:{line_number}: not UTF-8 text in the {what}") from None
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if torn:
                continue
            raise InputError(f"{path}:{line_number}: invalid JSON in the {what}") from None
        if not isinstance(record, dict) or any(key not in record for key in required):
            raise InputError(f"{path}:{line_number}: a {what} record needs {' and '.join(map(repr, required))}")
        records.append(record)
    return records


def read_cache(path: str | Path) -> dict[str, dict]:
    """Cache records by key (a later record for the same key wins)."""
    return {record["key"]: record for record in _read_append_log(path, "question cache", ("key", "question"))}


def read_journal(path: str | Path) -> list[dict]:
    """The batch journal's events in order."""
    return _read_append_log(path, "batch journal", ("event", "batch_id"))


def pending_batches(events: list[dict]) -> list[dict]:
    """The "submitted" events with no "collected" event after them, in submission order."""
    pending: dict[str, dict] = {}
    for event in events:
        if event["event"] == "submitted":
            pending[event["batch_id"]] = event
        elif event["event"] == "collected":
            pending.pop(event["batch_id"], None)
    return list(pending.values())


def pending_intents(events: list[dict]) -> list[dict]:
    """The "intent" events with no outcome after them: no "submitted" (created or adopted) and no
    "abandoned" event naming the same intent. A batch may or may not exist for each of them."""
    pending: dict[str, dict] = {}
    for event in events:
        intent = event.get("intent")
        if not intent:
            continue
        if event["event"] == "intent":
            pending[intent] = event
        elif event["event"] in ("submitted", "abandoned"):
            pending.pop(intent, None)
    return list(pending.values())


def journal_path_for(cache_path: str | Path) -> Path:
    """The batch journal lives next to the cache: data/question_cache.batches.jsonl."""
    cache_path = Path(cache_path)
    return cache_path.with_name(cache_path.stem + ".batches.jsonl")


def journal_pending(cache_path: str | Path) -> tuple[list[dict], list[dict]]:
    """From one read of the batch journal: the batches submitted and not yet collected, and the
    intents with no known outcome (a batch may or may not exist for each)."""
    events = read_journal(journal_path_for(cache_path))
    return pending_batches(events), pending_intents(events)


class CacheWriteError(Exception):
    """An append that could not be written (disk full, quota, I/O error). The file was cut back to
    its last complete record, so it stays consistent."""

    def __init__(self, path: Path, error: OSError) -> None:
        self.path = path
        self.errno = error.errno
        self.disk_full = error.errno in (errno.ENOSPC, errno.EDQUOT)
        what = "no space left on the device" if self.disk_full else (error.strerror or str(error))
        super().__init__(f"{what} writing {path}")


def free_bytes(path: str | Path) -> int:
    """Free bytes on the file system holding `path` (its folder when it does not exist yet)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 1 << 62  # unknown: do not block on it


class CacheWriter:
    """Appends records, writing and fsyncing each whole line, so a crash loses only requests in
    flight. (Used for the batch journal too.)"""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        self._lock = threading.Lock()

    def _repair_torn_tail(self) -> None:
        """Cut a partial last record (a crash mid-write) so the next append starts a clean line;
        only the last byte is read when the file ends whole, as it almost always does."""
        if not self.path.exists():
            return
        with open(self.path, "r+b") as handle:
            size = handle.seek(0, os.SEEK_END)
            if size == 0:
                return
            handle.seek(size - 1)
            if handle.read(1) == b"\n":
                return
            handle.seek(0)
            handle.truncate(handle.read().rfind(b"\n") + 1)

    def append(self, record: dict) -> None:
        """Append one record as one line, durably; on failure cut the file back and raise
        CacheWriteError."""
        data = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
        with self._lock:  # whole lines, one writer at a time (appends may come from worker threads)
            size = os.fstat(self._fd).st_size
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self._fd, view)
                    view = view[written:]
                os.fsync(self._fd)  # a full disk may only say so here
            except OSError as error:
                try:
                    os.ftruncate(self._fd, size)  # no torn line: the cache stays consistent
                except OSError:
                    pass  # the next CacheWriter cuts a torn tail when it opens the file
                raise CacheWriteError(self.path, error) from None

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> "CacheWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
