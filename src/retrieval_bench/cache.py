"""The question cache: append-only JSON Lines, one record per generated question, keyed by content.

A record's key is the sha256 of everything that determines the answer (provider family, model,
prompt, passage text, max_tokens), so editing one passage regenerates one question and changing
the prompt or the model regenerates all; a finished question is never paid for twice.
"""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from retrieval_bench.io import InputError


def cache_key(family: str, model: str, prompt_sha256: str, passage_text: str, max_tokens: int) -> str:
    payload = json.dumps([family, model, prompt_sha256, passage_text, max_tokens], ensure_ascii=False)
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def read_cache(path: str | Path) -> dict[str, dict]:
    """Records by key; a missing file is an empty cache, a torn last line (crash mid-write) is skipped."""
    path = Path(path)
    if not path.exists():
        return {}
    records: dict[str, dict] = {}
    lines = path.read_text(encoding="utf-8").splitlines()
    for line_number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if line_number == len(lines):  # only the last line can be torn by a crash
                continue
            raise InputError(f"{path}:{line_number}: invalid JSON in the question cache") from None
        if "key" not in record or "question" not in record:
            raise InputError(f"{path}:{line_number}: a cache record needs 'key' and 'question'")
        records[record["key"]] = record
    return records


class CacheWriter:
    """Appends records, flushing and fsyncing each, so a crash loses only requests in flight."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._repair_torn_tail()
        self._handle = open(self.path, "a", encoding="utf-8")

    def _repair_torn_tail(self) -> None:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return
        data = self.path.read_bytes()
        if not data.endswith(b"\n"):
            # A crash mid-write left a partial record: cut it so the next append starts a clean line.
            with open(self.path, "r+b") as handle:
                handle.truncate(data.rfind(b"\n") + 1)

    def append(self, record: dict) -> None:
        self._handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        self._handle.flush()
        os.fsync(self._handle.fileno())

    def close(self) -> None:
        self._handle.close()

    def __enter__(self) -> "CacheWriter":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
