"""The question cache: append-only JSON Lines, one record per generated question, keyed by content.

A record's key is the sha256 of what the question is asked about and with (provider family, model
or its alias, prompt, passage text, and the attempt number when a rejected reply is asked again),
so editing one passage regenerates one question and changing the prompt or the model
regenerates all; a finished question is never paid for twice. How it is asked (max_tokens,
temperature, concurrency, timeouts, retries, the server's URL) is recorded, not keyed: changing it
asks nothing again. Records written before max_tokens left the key (KEY_VERSION 1, without a
key_version field) are still found: EarlierKeys maps a job to the key it had then.

A record carries: key, passage_sha256, model, prompt_sha256, question, evidence (the excerpt the
generator quotes), and from retrieval_bench.llm.runs.tasks.Task.record also family, provider, max_tokens, attempt,
key_version, temperature and seed (null: not sent), model_alias and response_format (when set),
rejected (a reason, or null), stop_reason, raw (the reply as received; cut when rejected), usage
and created; and, written by CacheWriter, record_sha256.

The batch journal (question_cache.batches.jsonl, next to the cache) is append-only JSON Lines
too: an "intent" event (the requests and the sha256 of their keys) is written and fsynced before
a batch is created, a "submitted" event (batch id and its requests, created or adopted) once
its id is known, an "abandoned" event when an intent is known never to have become a batch, and
a "collected" event once its results are cached. A rerun resumes uncollected batches and
reconciles intents left without an outcome (see retrieval_bench.llm.runs.batch) before submitting
anything.

This machine's mirror (core.paths.PAID_MIRROR, under DVC_ROOT: the project even for an experiment
run in a temporary copy) gets every line a CacheWriter appends under `dvc repro` or `dvc exp run`,
and restore_from_mirror gives a cache the records it lacks before anything is paid for: a queued
or --temp experiment, a `dvc exp apply` or a checkout that replaced the cache (or the journal of a
batch still pending) would otherwise pay again for what another run on this machine paid for.

Appends are whole lines: a write or fsync that fails (a full disk, the file-size limit of
`ulimit -f`) cuts the file back to its last complete record and raises CacheWriteError, so the
cache stays consistent.

Integrity (read_cache): each record carries `record_sha256`, the sha256 of its other fields as
canonical JSON (record_checksum). A record that fails it (edited by hand, a flipped bit) and a line
that is not a record (truncated JSON, garbage, not UTF-8, nested too deep to read) are each said
in one line naming the file, line and key where there is one, and ignored: their question counts
as not cached and is asked again, unless a sound record for the same key follows. The first
sound record of a key is the one used: a later one with the same reply (created and usage
aside) is a harmless copy, a later one with a different reply is named and ignored, so an
appended line can never replace a question already used. Records written before checksums (no
`record_sha256`) are read as they are, unverified: caches are shared through DVC remotes, and
the file is append-only (its lock is on the file itself), so they are never rewritten; every
record written from now on is checksummed. A torn last line (a crash mid-write) is skipped
silently and cut by the next CacheWriter, as before.

A rejected reply is stored with its text cut to RAW_KEPT_CHARS (raw_for_cache), ending in a
marker that says how long it was: a rejected reply is kept so that it is not paid for again, not
to be read, and the cache is pushed to a shared remote.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from retrieval_bench.core.errors import InputError, describe_os_error
from retrieval_bench.core.files import end_last_line
from retrieval_bench.core.locking import exclusive
from retrieval_bench.core.logs import Log, silent
from retrieval_bench.core.paths import PAID_MIRROR

# Hashed into the key of a passage whose text had to be escaped to stay inside the prompt's
# <passage> delimiters (retrieval_bench.llm.checks.passage_escape.escape_passage): such a passage is sent
# differently from before, so it must not be served a reply cached for the unescaped prompt.
ESCAPED_MARKER = "passage-delimiters-escaped"


KEY_VERSION = 2  # 1: max_tokens was hashed into the key (legacy_cache_key)
CHECKSUM = "record_sha256"  # the field holding a record's checksum (record_checksum)
# The text a rejected reply is stored with is cut to this many characters (raw_for_cache).
RAW_KEPT_CHARS = 4096
# Fields two records of one reply may differ in: when the reply was stored and what it cost.
_CIRCUMSTANCES = frozenset({CHECKSUM, "created", "usage"})
SAID_PER_READ = 5  # bad lines named one by one per read; the rest are counted in one line


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


# What a reply's key hashes before the attempt: (provider family, model, prompt sha256, passage text).
KeyFields = tuple[str, str, str, str]


def legacy_cache_key(fields: KeyFields, max_tokens: int, attempt: int, *, escaped: bool) -> str:
    """The key a record of KEY_VERSION 1 has: cache_key's `fields`, max_tokens hashed after the passage."""
    return _key([*fields, max_tokens], attempt, escaped)


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
    a job whose earlier key is one of them is served that record (llm.runs.tasks), so a cache written
    before max_tokens left the key is paid for once, whatever max_tokens is now."""

    keys: frozenset[str] = frozenset()
    max_tokens: tuple[int, ...] = ()

    @classmethod
    def of(cls, records: Mapping[str, dict]) -> "EarlierKeys":
        earlier = [r for r in records.values() if r.get("key_version", 1) == 1 and isinstance(r.get("max_tokens"), int)]
        return cls(frozenset(r["key"] for r in earlier), tuple(sorted({r["max_tokens"] for r in earlier})))


def _lines(path: Path) -> list[tuple[int, bytes, bool]]:
    """(line number, bytes, torn) of each non-blank line of an append-only file; `torn`: the last
    line, with no newline after it (cut by a crash mid-write)."""
    if not path.exists():
        return []
    # Split the bytes on b"\n" alone, then decode each line: str.splitlines() would also split
    # inside a record at U+0085 or U+2028, and decoding the whole file would fail on a torn tail.
    lines = path.read_bytes().split(b"\n")
    return [(number, raw, number == len(lines)) for number, raw in enumerate(lines, 1) if raw.strip()]


def _parsed(raw: bytes, required: tuple[str, ...]) -> dict | str:
    """A line's record, or why it is not one."""
    try:
        record = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        return "not UTF-8 text"
    except json.JSONDecodeError:
        return "invalid JSON"
    except RecursionError:  # json's C decoder stops at Python's recursion limit, cleanly
        return "JSON nested too deep to read"
    if not isinstance(record, dict) or any(key not in record for key in required):
        return f"not a record with {' and '.join(map(repr, required))}"
    return record


def _read_append_log(path: str | Path, what: str, required: tuple[str, ...]) -> list[dict]:
    """The records of an append-only JSONL file, in order; a missing file is empty and a torn
    last line is skipped, while a bad line elsewhere is an InputError."""
    records = []
    for number, raw, torn in _lines(Path(path)):
        record = _parsed(raw, required)
        if isinstance(record, str):
            if torn:
                continue
            raise InputError(f"{path}:{number}: {record} in the {what}")
        records.append(record)
    return records


def _is_texts(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(item, str) for item in value))


# What each field a record may hold must be, whoever wrote it (an older version's record has no
# checksum to catch a hand edit): a question of null crashed the stage, a grade of 7 was scored.
_FIELD_RULES: dict[str, tuple[str, Callable[[object], bool]]] = {
    "key": ("text", lambda value: isinstance(value, str)),
    "question": ("text", lambda value: isinstance(value, str)),
    "evidence": ("text or a list of texts", lambda value: value is None or _is_texts(value)),
    "rejected": ("null or a reason", lambda value: value is None or isinstance(value, str)),
    "kind": ("null or text", lambda value: value is None or isinstance(value, str)),
    "grade": (
        "null or a whole number from 0 to 3",
        lambda value: value is None or (type(value) is int and 0 <= value <= 3),
    ),
}


def _wrong_field(record: Mapping) -> str | None:
    """Why a record's fields cannot be read as a reply (the first field of the wrong type), or None."""
    for field, (expected, fits) in _FIELD_RULES.items():
        if field in record and not fits(record[field]):
            return f"{field} {json.dumps(record[field])[:40]} is not {expected}"
    return None


def record_checksum(record: Mapping) -> str:
    """The sha256 of a record's fields but its checksum, as canonical JSON (sorted keys, no
    spaces): what it was written with, whatever JSON spacing or key order a copy has."""
    fields = {key: value for key, value in record.items() if key != CHECKSUM}
    canonical = json.dumps(fields, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def _same_reply(first: Mapping, other: Mapping) -> bool:
    return {k: v for k, v in first.items() if k not in _CIRCUMSTANCES} == {
        k: v for k, v in other.items() if k not in _CIRCUMSTANCES
    }


def read_cache(path: str | Path, say: Log | None = None) -> dict[str, dict]:
    """Sound cache records by key, the first of each key (see the module's docstring); the lines
    ignored are said through `say` (default: one `reply cache:` line each on stderr, each
    said once per process, however often the cache is read)."""
    say = say or partial(_say_once, Path(path).resolve())
    records: dict[str, dict] = {}
    lines_of: dict[str, int] = {}
    damaged: list[tuple[int, str, str | None]] = []  # (line, why, key)
    for number, raw, torn in _lines(Path(path)):
        record = _parsed(raw, ("key", "question"))
        if isinstance(record, str):
            if not torn:
                damaged.append((number, record, None))
            continue
        key = str(record["key"])
        if _fails_checksum(record):
            damaged.append((number, "fails its checksum (edited or damaged)", key))
        elif (wrong := _wrong_field(record)) is not None:
            damaged.append((number, wrong, key))
        elif key not in records:
            records[key], lines_of[key] = record, number
        elif not _same_reply(records[key], record):
            say(f"{path}:{number}: key {key}: a second, different reply for this key; line {lines_of[key]}'s is used")
    for number, why, damaged_key in damaged[:SAID_PER_READ]:
        named = f" key {damaged_key}:" if damaged_key else ""
        fate = (
            f"line {lines_of[damaged_key]} holds it soundly"
            if damaged_key is not None and damaged_key in lines_of
            else "its question is asked again"
        )
        say(f"{path}:{number}:{named} {why}; ignored, {fate}")
    if len(damaged) > SAID_PER_READ:
        say(f"{path}: {len(damaged) - SAID_PER_READ} more damaged lines ignored; their questions are asked again")
    return records


_said: set[tuple[Path, str]] = set()


def _say_once(where: Path, line: str) -> None:
    if (where, line) not in _said:  # the cache is read several times a run: each problem is said once
        _said.add((where, line))
        print(f"reply cache: {line}", file=sys.stderr, flush=True)


def raw_for_cache(text: str) -> str:
    """A rejected reply's text as stored: at most RAW_KEPT_CHARS characters, and when cut, a
    marker saying so and how long it was."""
    if len(text) <= RAW_KEPT_CHARS:
        return text
    return (
        f"{text[:RAW_KEPT_CHARS]}\n[cut: the reply was {len(text):,} characters, the first {RAW_KEPT_CHARS:,} are kept]"
    )


JOURNAL_FIELDS = ("event", "batch_id")


def read_journal(path: str | Path) -> list[dict]:
    """The batch journal's events in order."""
    return _read_append_log(path, "batch journal", JOURNAL_FIELDS)


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
        super().__init__(f"{describe_os_error(error, with_file=False)} writing {path}")


def free_bytes(path: str | Path) -> int:
    """Free bytes on the file system holding `path` (its folder when it does not exist yet)."""
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    try:
        return shutil.disk_usage(folder).free
    except OSError:
        return 1 << 62  # unknown: do not block on it


def mirror_of(path: str | Path) -> Path | None:
    """This machine's copy of the append log at `path` (PAID_MIRROR under DVC_ROOT, the same
    relative path); None outside `dvc repro` / `dvc exp run` (a stage run by hand, a test)."""
    root = os.environ.get("DVC_ROOT")
    if not root:
        return None
    path = Path(path)
    return Path(root) / PAID_MIRROR / (path.name if path.is_absolute() else path)


def _repair_torn_tail(path: Path) -> None:
    """Cut a partial last record (a crash mid-write), or end a whole one that only lacks its
    newline (core.files.end_last_line), so the next append starts a clean line."""
    if path.exists():
        with open(path, "r+b") as handle:
            end_last_line(handle)


def _open_append(path: Path) -> int:
    path.parent.mkdir(parents=True, exist_ok=True)
    _repair_torn_tail(path)
    return os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)


class CacheWriter:
    """Appends records, writing and fsyncing each whole line, so a crash loses only requests in
    flight, and each line to this machine's mirror too (mirror_of; best effort: the cache is
    the record); with `checksum`, each record gets its record_sha256 (the question cache's; the
    batch journal is written without)."""

    def __init__(self, path: str | Path, checksum: bool = True) -> None:
        self.path = Path(path)
        self.checksum = checksum
        self._fd = _open_append(self.path)
        self._mirror_fd = -1
        if (mirror := mirror_of(self.path)) is not None:
            try:
                self._mirror_fd = _open_append(mirror)
            except OSError:
                pass  # no mirror: every run still keeps what it paid for in its own cache
        self._lock = threading.Lock()

    def append(self, record: dict) -> None:
        """Append one record as one line, durably; on failure cut the file back and raise
        CacheWriteError."""
        if self.checksum:
            record = {**record, CHECKSUM: record_checksum(record)}
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
            if self._mirror_fd >= 0:
                try:
                    os.write(self._mirror_fd, data)  # one write of a line under O_APPEND: whole, or torn at the end
                    os.fsync(self._mirror_fd)
                except OSError:
                    pass  # a torn last line is cut when the mirror is next opened

    def close(self) -> None:
        for fd in (self._fd, self._mirror_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._mirror_fd = -1

    def __enter__(self) -> "CacheWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def merge(path: str | Path, data: bytes, keyed: bool) -> int:
    """Append to `path` the sound records of `data` it lacks (a cache record by key, checksum
    verified, when `keyed`; else a batch journal event by line), each once; a line that is no sound
    record is never copied (the next merge would copy it again, and a journal would stop every
    run). A torn last line of `path` (a run killed mid-write) is cut first, as CacheWriter cuts it,
    so no appended record follows a fragment. Returns the number of records added."""
    path = Path(path)
    _repair_torn_tail(path)  # the file now ends with a newline, or is empty
    have: set[str | bytes] = set(read_cache(path)) if keyed else {raw for _, raw, _ in _lines(path)}
    new = []
    for line in data.split(b"\n"):
        identity = _sound_key(line) if keyed else (line if isinstance(_parsed(line, JOURNAL_FIELDS), dict) else None)
        if identity is not None and identity not in have:  # a key two experiments paid for: restored once
            have.add(identity)
            new.append(line)
    if new:
        with open(path, "ab") as handle:  # appended in place: the lock held on this file stays valid
            handle.write(b"\n".join(new) + b"\n")
            handle.flush()
            os.fsync(handle.fileno())
    return len(new)


def _sound_key(line: bytes) -> str | None:
    """The key of a line that read_cache would take (a record with a key and a question, whose
    checksum, where it has one, holds); None for anything else."""
    record = _parsed(line, ("key", "question")) if line.strip() else None
    return str(record["key"]) if isinstance(record, dict) and not _fails_checksum(record) else None


def _fails_checksum(record: Mapping) -> bool:
    return CHECKSUM in record and record[CHECKSUM] != record_checksum(record)


def restore_from_mirror(cache_path: str | Path, what: str, log: Log, dry_run: bool = False) -> None:
    """Before anything is paid for: append to the cache at `cache_path` and to its batch journal
    the records this machine's mirror of each holds and they lack (`what`: what a cache record is,
    for the log line). A torn last line of a mirror is no sound record: merge leaves it out. A dry run writes nothing and says
    how many questions the real run will restore rather than pay for."""
    logs = {Path(cache_path): True, journal_path_for(cache_path): False}
    mirrored = {path: mirror for path in logs if (mirror := mirror_of(path)) is not None and mirror.is_file()}
    if not mirrored:
        return
    if dry_run:
        mirror = mirrored.get(Path(cache_path))
        if mirror is None:
            return
        # no word of damaged lines here: the real run reads the mirror and says it
        lacking = len(set(read_cache(mirror, say=silent)) - set(read_cache(cache_path, say=silent)))
        if lacking:
            log(
                f"{cache_path}: this machine's copy ({PAID_MIRROR}) holds {lacking} records the cache lacks (of any "
                f"model or prompt); a real run restores them first, so this estimate may count {what} as to pay for"
            )
        return
    with exclusive(cache_path, log):  # no other run appends meanwhile
        for path, mirror in mirrored.items():
            added = merge(path, mirror.read_bytes(), keyed=logs[path])  # a torn last line is no sound record
            if added:
                kind = what if logs[path] else "batch journal events"
                log(
                    f"{path}: restored {added} {kind} from this machine's copy ({PAID_MIRROR}: paid for by "
                    "another experiment, or replaced by `dvc exp apply` or a checkout), before asking for any"
                )
