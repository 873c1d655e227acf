"""An HTML page as the text a reader sees: without the blocks load.html_skip selects (navigation,
page headers and footers), paragraph breaks kept so chunks end at them."""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass
from html.parser import HTMLParser

from retrieval_bench.core.errors import InputError
from retrieval_bench.core.params_schema import DEFAULTS

# What load.html_skip takes: simple selectors, comma-separated (no descendant or child combinators).
_SELECTOR = re.compile(
    r"(?P<tag>[a-zA-Z][\w-]*)?(?P<parts>(?:\.[\w-]+|#[\w-]+|\[[\w-]+(?:=[\"']?[^\"'\]]*[\"']?)?\])*)"
)
_PART = re.compile(r"\.(?P<cls>[\w-]+)|#(?P<id>[\w-]+)|\[(?P<attr>[\w-]+)(?:=[\"']?(?P<value>[^\"'\]]*)[\"']?)?\]")


@dataclass(frozen=True)
class Selector:
    """One simple selector: a tag, classes, an id and attributes ([role=navigation]), all optional."""

    tag: str | None
    classes: frozenset[str]
    attrs: tuple[tuple[str, str | None], ...]  # the id is attribute `id`

    def matches(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        given = {name: value or "" for name, value in attrs}
        return (
            (self.tag is None or self.tag == tag)
            and self.classes <= set(given.get("class", "").split())
            and all(name in given and (value is None or given[name] == value) for name, value in self.attrs)
        )


def parse_selectors(text: str, key: str = "load.html_skip") -> list[Selector]:
    """`text`'s comma-separated selectors (`nav`, `.navheader`, `div#menu`, `[role=navigation]`);
    anything else is an InputError naming `key`."""
    selectors = []
    for item in (part.strip() for part in text.split(",")):
        match = _SELECTOR.fullmatch(item)
        if not item or match is None:
            raise InputError(
                f"{key}: {item!r} is not a selector this reader takes: a tag, .class, #id or [attr=value], "
                "combined without spaces (div.navheader), comma-separated"
            )
        parts = list(_PART.finditer(match["parts"]))
        selectors.append(
            Selector(
                match["tag"] and match["tag"].lower(),  # the parser gives tag and attribute names in lower case
                frozenset(m["cls"] for m in parts if m["cls"]),
                tuple(("id", m["id"]) if m["id"] else (m["attr"].lower(), m["value"]) for m in parts if not m["cls"]),
            )
        )
    return selectors


class _HtmlText(HTMLParser):
    """The text of an HTML page as a reader sees it: no tags, no script, style, title or head, none
    of the blocks `skip` selects (navigation, page headers and footers), a line break at each block
    element and a space between table cells, entities decoded.

    Elements are tracked on a stack of the open ones, so that an element left open ends where its
    parent does (`<div><nav>...</div>` ends the nav, as a browser ends it) and the head ends at the
    first tag of the body even when `</head>` is left out, as HTML allows."""

    HIDDEN = {"script", "style", "head", "title", "template", "noscript"}
    HEAD_CONTENT = {"title", "meta", "link", "style", "script", "base", "noscript", "template"}
    BLOCKS = set(
        "p div br li ul ol tr table section article header footer pre blockquote h1 h2 h3 h4 h5 h6 dt dd dl hr main "
        "nav aside figure figcaption caption details summary form fieldset address".split()
    )
    CELLS = {"td", "th", "option"}
    VOID = set("area base br col embed hr img input link meta param source track wbr".split())
    # Elements whose end tag HTML lets a writer leave out, ended by the start of the next one as a
    # browser ends them: (the start tags that end them, the elements a search for them stops at).
    # Without this an unclosed <p> per paragraph piles up on the stack.
    _CLOSES_P = set(
        "address article aside blockquote details div dl fieldset figcaption figure footer form h1 h2 h3 h4 h5 h6 "
        "header hr main menu nav ol p pre section table ul".split()
    )
    # HTML's "special" elements but address, div and p: where a search for an open <li>, <dt> or
    # <dd> stops (a list item's <nav> starts a new context)
    _SPECIAL = set(
        "article aside blockquote body caption details dialog dir dl fieldset figcaption figure footer form h1 h2 h3 "
        "h4 h5 h6 header html main menu nav ol pre section summary table tbody td tfoot th thead tr ul".split()
    )
    IMPLIED = (
        (_CLOSES_P, {"p"}, {"table", "td", "th", "caption", "button", "template"}),
        ({"li"}, {"li"}, _SPECIAL),
        ({"dt", "dd"}, {"dt", "dd"}, _SPECIAL),
        ({"td", "th"}, {"td", "th"}, {"tr", "table"}),
        ({"tr"}, {"tr"}, {"table", "thead", "tbody", "tfoot"}),
        ({"option"}, {"option"}, {"select", "datalist", "optgroup"}),
    )

    def __init__(self, skip: list[Selector]) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self.skip = skip
        self.open: list[str] = []  # the open elements, outermost first
        # where on the stack each tag is open, innermost last: a lookup, not a scan (a page of 80,000
        # unclosed <font> took 30 s, and 20 MB of them minutes, when every end tag searched the stack)
        self.depths: dict[str, list[int]] = defaultdict(list)
        self.hidden_at: int | None = None  # where on the stack the outermost hidden element is
        self.skipping_at: int | None = None  # where the skipped block is

    @property
    def shown(self) -> bool:
        return self.hidden_at is None and self.skipping_at is None

    def _close(self, depth: int) -> None:
        """End every element from `depth` on the stack: the hidden or skipped ones among them too."""
        for tag in self.open[depth:]:
            self.depths[tag].pop()
        del self.open[depth:]
        if self.hidden_at is not None and self.hidden_at >= depth:
            self.hidden_at = None
        if self.skipping_at is not None and self.skipping_at >= depth:
            self.skipping_at = None
            self.pieces.append("\n")

    def _end_implied(self, tag: str) -> None:
        """End the open element `tag`'s start ends (an unclosed <p>, <li>, <td>, ...), if any, never
        one outside a hidden or skipped element the tag is in (a <p> in <noscript> ends no <p> around it)."""
        inside = max(at for at in (self.hidden_at, self.skipping_at, -1) if at is not None)
        for starts, ended, stops in self.IMPLIED:
            if tag in starts:
                # the innermost open element of `ended`, unless one of `stops` (or the hidden or
                # skipped element) is inside it
                innermost = self._innermost(ended)
                if innermost > max(self._innermost(stops), inside):
                    self._close(innermost)

    def _innermost(self, tags: set[str]) -> int:
        """The depth of the innermost open element among `tags`; -1 if none is open."""
        return max((self.depths[tag][-1] for tag in tags if self.depths.get(tag)), default=-1)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        head = self.hidden_at is not None and self.open[self.hidden_at] == "head"
        if head and tag not in self.HEAD_CONTENT:  # the body has begun
            self._close(self.hidden_at)  # type: ignore[arg-type]
        if tag == "body":
            return
        self._end_implied(tag)
        depth = len(self.open)
        if tag not in self.VOID:
            self.depths[tag].append(depth)
            self.open.append(tag)
        if not self.shown:
            return
        if tag in self.HIDDEN and tag not in self.VOID:
            self.hidden_at = depth
        elif tag not in self.VOID and any(selector.matches(tag, attrs) for selector in self.skip):
            self.skipping_at = depth
            self.pieces.append("\n")
        elif tag in self.BLOCKS:
            self.pieces.append("\n")
        elif tag in self.CELLS:
            self.pieces.append(" ")

    def handle_endtag(self, tag: str) -> None:
        shown = self.shown
        if self.depths.get(tag):
            self._close(self.depths[tag][-1])
        # an end tag with nothing open to end still separates what it stands between (</p>, </br>)
        if shown and tag in self.BLOCKS:
            self.pieces.append("\n")
        elif shown and tag in self.CELLS:
            self.pieces.append(" ")

    def handle_data(self, data: str) -> None:
        if self.shown:
            self.pieces.append(data)


def html_text(page: str, skip: list[Selector] | None = None) -> str:
    """The readable text of an HTML page (_HtmlText, dropping the blocks `skip` selects; default:
    load.html_skip's): runs of spaces within a line collapsed, at most one blank line between
    blocks, so chunks end at the page's paragraph breaks."""
    parser = _HtmlText(parse_selectors(DEFAULTS["load"]["html_skip"]) if skip is None else skip)
    parser.feed(page)
    parser.close()
    lines = [" ".join(line.split()) for line in "".join(parser.pieces).splitlines()]
    return re.sub(r"\n{3,}", "\n\n", "\n".join(lines)).strip()
