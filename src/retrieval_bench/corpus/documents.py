"""A folder of documents: .md and .txt files as they are, .html pages as the text a reader sees (without
navigation, page headers and footers: load.html_skip)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.files import folder_entries
from retrieval_bench.core.params_schema import DEFAULTS
from retrieval_bench.corpus.html import html_text, parse_selectors

TEXT_SUFFIXES = (".md", ".txt")
HTML_SUFFIXES = (".html", ".htm")  # read as their text (html_text)
DOCUMENT_SUFFIXES = (*TEXT_SUFFIXES, *HTML_SUFFIXES)


def read_documents_folder(
    folder: Path, notes: list[str] | None = None, html_skip: str = DEFAULTS["load"]["html_skip"]
) -> pd.DataFrame:
    """Every .md/.txt/.html file under `folder`, doc_id = its path relative to the folder; an HTML
    page's text is what a reader sees, without the blocks `html_skip` selects (html_text). Files of
    other kinds are skipped, and said so in `notes` once, by extension."""
    skip = parse_selectors(html_skip) if html_skip.strip() else []
    entries = folder_entries(folder)  # a folder it cannot list: an error, not documents lost
    files = sorted(p for p in entries if p.is_file())
    # not followed, never silently: linked folders (a loop would never end) and links to nothing
    unread = sorted(str(p.relative_to(folder)) for p in entries if p.is_symlink() and (p.is_dir() or not p.exists()))
    # a pipe, a device or a socket (or a link to one): never opened (a pipe would wait, /dev/zero never end)
    special = sorted(str(p.relative_to(folder)) for p in entries if p.exists() and not (p.is_file() or p.is_dir()))
    for names, what in (
        (unread, "did not follow {n} links to folders or to nothing"),
        (special, "did not read {n} entries that are not regular files (pipes, devices, sockets, or links to them)"),
    ):
        if names and notes is not None:
            shown = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
            notes.append(f"{what.format(n=len(names))}: {shown}")
    paths = [p for p in files if p.suffix.lower() in DOCUMENT_SUFFIXES]
    skipped = Counter(p.suffix.lower() or "no extension" for p in files if p.suffix.lower() not in DOCUMENT_SUFFIXES)
    if not paths:
        found = f" (files found: {_by_extension(skipped)})" if skipped else ""
        raise InputError(f"{folder}: no {', '.join(DOCUMENT_SUFFIXES)} documents found{found}")
    if skipped and notes is not None:
        notes.append(
            f"skipped {sum(skipped.values())} files that are not {', '.join(DOCUMENT_SUFFIXES)} documents: "
            f"{_by_extension(skipped)}"
        )
    rows = []
    for path in paths:
        doc_id = path.relative_to(folder).as_posix()
        try:
            doc_id.encode("utf-8")
        except UnicodeEncodeError:  # the file system's bytes, not UTF-8: no Parquet table can hold the id
            raise InputError(
                f"{folder / ascii(doc_id)[1:-1]}: the file name is not UTF-8 (a name from another system's "
                "encoding, such as cp1252); rename it (e.g. `convmv -f cp1252 -t utf-8 --notest -r FOLDER`)"
            ) from None
        try:
            text = path.read_text(encoding="utf-8-sig")  # a byte-order mark is no part of the text
        except UnicodeDecodeError as error:
            raise InputError(f"{path}: not UTF-8 text (byte {error.start})") from None
        if path.suffix.lower() in HTML_SUFFIXES:
            text = html_text(text, skip)
        rows.append({"doc_id": doc_id, "text": text})
    return pd.DataFrame(rows, columns=["doc_id", "text"])


def _by_extension(counts: Counter) -> str:
    """'.pdf: 3, .docx: 1', the most frequent first."""
    return ", ".join(f"{suffix}: {n}" for suffix, n in counts.most_common())
