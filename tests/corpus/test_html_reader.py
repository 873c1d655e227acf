"""The HTML reader keeps a page's content and drops its navigation, page header and footer: <nav>,
<header>, <footer>, role=navigation and what load.html_skip selects (by default also
PostgreSQL's documentation's .navheader / .navfooter "Prev Up ... Home Next" tables)."""

from __future__ import annotations

from pathlib import Path

import pytest

from retrieval_bench.core.errors import InputError
from retrieval_bench.corpus.html import html_text, parse_selectors
from retrieval_bench.corpus.load import LoadSettings, load_corpus

PAGE = Path(__file__).parent / "pages" / "sql-vacuum.html"  # a PostgreSQL 17 reference page, cut short
NAVIGATION = ["Prev", "Next", "Home", "Up", "SQL Commands", "Supported Versions", "Download", "Privacy Policy", "1996"]


def test_a_postgresql_documentation_page_is_read_without_its_navigation(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "sql-vacuum.html").write_text(PAGE.read_text(encoding="utf-8"), encoding="utf-8")
    text = load_corpus(tmp_path / "docs").documents["text"][0]
    assert text.startswith("VACUUM\n\nVACUUM — garbage-collect and optionally analyze a database")
    assert text.endswith("Dead rows left by an INSERT, even one that was rolled back, are reclaimed the same way.")
    assert "Plain VACUUM (without FULL) simply reclaims space" in text
    assert [word for word in NAVIGATION if word in text] == []
    kept = html_text(PAGE.read_text(encoding="utf-8"), skip=[])  # nothing dropped: all of it is there
    assert [word for word in NAVIGATION if word not in kept] == []


def test_the_selector_is_a_param(tmp_path):
    page = (
        '<body><div id="menu"><a href="/">Home</a></div><aside class="toc side">Contents</aside>'
        "<header><h1>Title</h1></header><p>Body text.</p></body>"
    )
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "a.html").write_text(page)
    assert (
        load_corpus(tmp_path / "docs", LoadSettings(html_skip="#menu, aside.toc")).documents["text"][0]
        == "Title\n\nBody text."
    )
    assert (
        load_corpus(tmp_path / "docs", LoadSettings(html_skip="")).documents["text"][0]
        == "Home\n\nContents\n\nTitle\n\nBody text."
    )


def test_nested_and_unclosed_blocks_end_where_the_dropped_block_ends():
    page = (
        '<nav><ul><li>one<li>two</ul><nav class="inner"><p>deeper</nav><p>still nav</nav>'
        "<p>kept<footer><div>foot</div></footer><p>after"
    )
    assert html_text(page) == "kept\n\nafter"


@pytest.mark.parametrize("bad", ["div p", "nav > a", "nav,,footer", ".", "[role=navigation"])
def test_a_selector_the_reader_does_not_take_is_one_line_naming_the_key(bad):
    with pytest.raises(InputError, match=r"^load\.html_skip: .* is not a selector this reader takes"):
        parse_selectors(bad)


@pytest.mark.parametrize(
    ("page", "text"),
    [
        # </head> may be left out (minifiers do): the whole page was read as head and dropped
        (
            "<!doctype html><html><head><meta charset=utf-8><title>Widgets</title><body><p>Widgets are set in X.</p>",
            "Widgets are set in X.",
        ),
        ("<head><title>Widgets</title><p>Widgets are set in X.", "Widgets are set in X."),
        # a title without a head is no part of the text
        ("<title>T</title><p>Body text</p>", "Body text"),
        # a nav closed by its parent's end: everything after it was dropped
        ("<div><nav><ul><li>Home</li></ul></div><p>Main content here.</p>", "Main content here."),
        # table cells ran together ("work_mem4MB"): one token for BM25, evidence not found
        (
            "<table><tr><th>Name</th><th>Default</th></tr><tr><td>work_mem</td><td>4MB</td></tr></table>",
            "Name Default\n\nwork_mem 4MB",
        ),
    ],
)
def test_what_browsers_do_with_left_out_end_tags_keeps_the_text(page, text):
    assert html_text(page) == text


@pytest.mark.parametrize(
    ("page", "text"),
    [
        ("line one</p>line two</div>line three", "line one\nline two\nline three"),  # stray end tags separate
        ("gamma</li>delta", "gamma\ndelta"),
        ("<p>before<nav>menu</p>still menu?</nav>after", "before\n\nafter"),  # <nav> ends the <p>, not </p> the nav
        ("<ul><li>a<li>b</ul><p>one<p>two", "a\nb\n\none\ntwo"),
        ("<table><tr><td>a<td>b<tr><td>c<td>d</table>", "a b\nc d"),
        # what a hidden or skipped element holds stays hidden: an implied end never reaches outside it
        ("<p>Intro<noscript><div>Enable JavaScript</div></noscript> more</p><p>Next</p>", "Intro more\n\nNext"),
        ("<ul><li>a<template><li>tmpl</template></ul>", "a"),
        ("<ul><li>Intro<nav>Menu:<li>Home<li>About</nav></ul><p>Body", "Intro\n\nBody"),  # <nav> stops the <li> search
        ("<ul><li>a<ul><li>b</ul><li>c</ul>", "a\n\nb\n\nc"),
    ],
)
def test_end_tags_left_out_or_left_over_end_elements_as_a_browser_does(page, text):
    assert html_text(page) == text


def test_unclosed_paragraphs_do_not_pile_up():
    """Every <p> left open stayed on the stack and each end tag searched it: a 1 MB page took 12 s."""
    from retrieval_bench.corpus.html import _HtmlText

    parser = _HtmlText([])
    parser.feed("<div>" + "<p>para <b>bold</b> text" * 5000)
    assert parser.open == ["div", "p"] and "".join(parser.pieces).count("bold") == 5000


def test_elements_left_open_cost_a_lookup_not_a_scan_of_the_stack():
    """80,000 unclosed <font> (3 MB) took 30 s: each end tag copied the whole stack to find its
    element, and each <div> under an open <p> scanned it for a stop. Where each tag is open is kept
    per tag (`depths`): this checks it always says what the stack says, on tag soup, and that
    such pages read right."""
    import random

    from retrieval_bench.corpus.html import _HtmlText

    parser = _HtmlText([])
    parser.feed("<html><body>" + "<font size=2>line <a href='x'>link</a><br>\n" * 2000)
    assert parser.open.count("font") == 2000 and parser.depths["font"] == list(range(1, 2001))
    assert "".join(parser.pieces).count("link") == 2000
    assert html_text("<p>Intro <button>Menu" + "<div>item" * 2000) == "Intro Menu\n" + "\n".join(["item"] * 2000)
    rng = random.Random(7)
    tags = ["p", "div", "li", "ul", "td", "tr", "table", "b", "font", "nav", "dt", "dd", "option", "select", "button"]
    for _ in range(200):
        parser = _HtmlText([])
        for _ in range(60):
            tag = rng.choice(tags)
            parser.feed(f"</{tag}>" if rng.random() < 0.4 else f"<{tag}>x")
            assert {t: d for t, d in parser.depths.items() if d} == {
                t: [i for i, o in enumerate(parser.open) if o == t] for t in set(parser.open)
            }
