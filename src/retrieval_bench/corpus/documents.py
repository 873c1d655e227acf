"""A folder of documents: .md and .txt files as they are, .html pages as the text a reader sees."""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd

from retrieval_bench.core.errors import InputError

TEXT_SUFFIXES = (".md", ".txt")
HTML_SUFFIXES = (".html", ".htm")  # read as their text (html_text)
DOCUMENT_SUFFIXES = (*TEXT_SUFFIXES, *HTML_SUFFIXES)


class _HtmlText(HTMLParser):
    """The text of an HTML page as a reader sees it: no tags, no script, style or head, a line
    break at each block element, entities decoded."""

    HIDDEN = {"script", "style", "head", "template", "noscript"}
    BLOCKS = set(
        "p div br li ul ol tr table section article header footer pre blockquote h1 h2 h3 h4 h5 h6 dt dd hr main "
        "nav aside".split()
    )

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.hidden = 0  # depth inside HIDDEN elements

    def handle_starttag(self, tag: str, attrs: list) -> None:
        if tag in self.HIDDEN:
            self.hidden += 1
        elif tag in self.BLOCKS:
            self.pieces.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag in self.HIDDEN:
            self.hidden = max(0, self.hidden - 1)
        elif tag in self.BLOCKS:
            self.pieces.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.hidden:
            self.pieces.append(data)


def html_text(page: str) -> str:
    """The readable text of an HTML page (_HtmlText): runs of spaces within a line collapsed, at
    most one blank line between blocks, so chunks end at the page's paragraph breaks."""
    parser = _HtmlText()
    parser.feed(page)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.pieces).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()


def read_documents_folder(folder: Path, notes: list[str] | None = None) -> pd.DataFrame:
    """Every .md/.txt/.html file under `folder`, doc_id = its path relative to the folder; an HTML
    page's text is what a reader sees (html_text). Files of other kinds are skipped, and said so in
    `notes` once, by extension."""
    files = sorted(p for p in folder.rglob("*") if p.is_file())
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
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise InputError(f"{path}: not UTF-8 text (byte {error.start})") from None
        if path.suffix.lower() in HTML_SUFFIXES:
            text = html_text(text)
        rows.append({"doc_id": path.relative_to(folder).as_posix(), "text": text})
    return pd.DataFrame(rows, columns=["doc_id", "text"])


def _by_extension(counts: Counter) -> str:
    """'.pdf: 3, .docx: 1', the most frequent first."""
    return ", ".join(f"{suffix}: {n}" for suffix, n in counts.most_common())
