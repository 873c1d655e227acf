"""What the docs promise about byte-identical outputs is what holds: a rerun on the machine that
wrote dvc.lock is byte-identical (tests/pipeline/test_committed_run.py), but float32 embeddings and scores
depend on the CPU's BLAS and torch kernels in their last bits, and rounding cannot remove that (a
value near a rounding boundary still flips; docs/explanation/limits.md has the measurement). So
every page that says `git status` stays clean after `make repro` must say on which CPU."""

from __future__ import annotations

import re

from conftest import ROOT

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
CLEAN_CLAIM = re.compile(r"`git status`[^.]*?\b(stays?|clean|shows only)\b", re.S)


def paragraphs(text: str) -> list[str]:
    return [part for part in re.split(r"\n\s*\n", text) if part.strip()]


def unqualified_claims() -> list[str]:
    """Paragraphs promising a clean `git status` (an unchanged dvc.lock) without naming the CPU."""
    return [
        f"{page.relative_to(ROOT)}: {' '.join(paragraph.split())[:120]}"
        for page in PAGES
        for paragraph in paragraphs(page.read_text(encoding="utf-8"))
        if CLEAN_CLAIM.search(paragraph) and "CPU" not in paragraph
    ]


def test_no_page_promises_a_clean_git_status_on_any_cpu():
    assert unqualified_claims() == []


def test_the_check_finds_the_claims_it_checks():
    """The README and the tutorial make the claim (qualified): the pattern sees them."""
    claims = [
        page
        for page in PAGES
        for paragraph in paragraphs(page.read_text(encoding="utf-8"))
        if CLEAN_CLAIM.search(paragraph)
    ]
    assert ROOT / "README.md" in claims and ROOT / "docs" / "tutorial" / "first-hour.md" in claims
