"""Rebuild data/sample/sqlite/ from Debian's sqlite3-doc package (public domain).

Run once by the maintainers (`apt-get install sqlite3-doc`, then
`python data/sample/convert_sqlite_doc.py`); the pipeline only reads the Markdown it writes.
"""
from __future__ import annotations

import html
import re
import sys
from html.parser import HTMLParser
from pathlib import Path

DOC_DIR = Path("/usr/share/doc/sqlite3")
OUT_DIR = Path(__file__).parent / "sqlite"
PAGES = """about appfileformat arch atomiccommit autoinc backup cintro datatype3 faq foreignkeys
json1 lang_corefunc lang_datefunc lockingv3 queryplanner tempfiles wal whentouse quickstart limits
isolation threadsafe lang_transaction lang_vacuum howtocorrupt inmemorydb uri loadext rtree expridx
gencol stricttables withoutrowid rowidtable nulls different serverless zeroconf selfcontained
transactional flextypegood quirks versionnumbers errlog csv dbstat lang_analyze lang_conflict""".split()

BLOCK = {"p", "div", "ul", "ol", "table", "tr", "blockquote", "dl", "dd", "dt", "br", "h1", "h2", "h3", "h4", "h5", "li", "pre"}
NAV_CLASSES = {"nosearch", "fancy_toc", "menu mainmenu", "searchmenu"}
SKIP = {"script", "style", "svg", "form", "select", "head"}


class MarkdownWriter(HTMLParser):
    """Turn one SQLite documentation page into plain Markdown (headings, lists, code, prose)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self.skip_depth = 0
        self.in_pre = False
        self.div_depth = 0
        self.nav_until_depth: int | None = None  # inside site navigation / table of contents

    def handle_starttag(self, tag: str, attrs: list) -> None:
        attrs_d = dict(attrs)
        if tag in SKIP:
            self.skip_depth += 1
            return
        if tag == "div":
            self.div_depth += 1
            if self.nav_until_depth is None and attrs_d.get("class") in NAV_CLASSES:
                self.nav_until_depth = self.div_depth
        if tag in {"h1", "h2", "h3", "h4"}:
            # The page title is level 1, so the page's own sections start at level 2.
            self.parts.append("\n\n" + "#" * (int(tag[1]) + 1) + " ")
        elif tag == "pre":
            self.in_pre = True
            self.parts.append("\n\n```\n")
        elif tag == "li":
            self.parts.append("\n- ")
        elif tag in {"td", "th"}:
            self.parts.append(" | ")
        elif tag in BLOCK:
            self.parts.append("\n\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "div":
            if self.nav_until_depth == self.div_depth:
                self.nav_until_depth = None
            self.div_depth -= 1
        if tag in SKIP:
            self.skip_depth = max(0, self.skip_depth - 1)
            return
        if tag == "pre":
            self.in_pre = False
            self.parts.append("\n```\n\n")
        elif tag in BLOCK:
            self.parts.append("\n\n")

    def handle_data(self, data: str) -> None:
        if self.skip_depth or self.nav_until_depth is not None:
            return
        self.parts.append(data if self.in_pre else re.sub(r"\s+", " ", data))

    def markdown(self) -> str:
        text = "".join(self.parts)
        text = re.sub(r"[ \t]+\n", "\n", text)
        text = re.sub(r"\n[ \t]+(?=\S)", lambda m: "\n" if not m.group(0).startswith("\n  ") else m.group(0), text)
        text = re.sub(r"\n{3,}", "\n\n", text)
        text = re.sub(r"\n[\w-]+: hide(?=\n)", "", text)  # syntax-diagram toggles
        text = re.sub(r"\n- *(?=\n)", "", text)  # list items that held only an image or a link icon
        text = re.sub(r"\n{3,}", "\n\n", text)
        return text.strip() + "\n"


def page_title(raw: str) -> str:
    match = re.search(r"<title>(.*?)</title>", raw, re.S)
    return html.unescape(match.group(1)).strip() if match else ""


def convert(name: str) -> str:
    raw = (DOC_DIR / f"{name}.html").read_text(encoding="utf-8", errors="replace")
    # Pages without a fancy title start the body at the first heading; those with one start there.
    writer = MarkdownWriter()
    writer.feed(raw)
    body = writer.markdown()
    title = page_title(raw)
    return f"# {title}\n\n{body}"


def main() -> None:
    if not DOC_DIR.is_dir():
        sys.exit(f"{DOC_DIR} not found: install Debian's sqlite3-doc package first")
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    for name in PAGES:
        (OUT_DIR / f"{name}.md").write_text(convert(name), encoding="utf-8")
    print(f"wrote {len(PAGES)} pages to {OUT_DIR}")


if __name__ == "__main__":
    main()
