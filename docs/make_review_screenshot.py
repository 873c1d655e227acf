"""Take docs/img/review.png: the review page over the bundled sample (after `make repro`), one
question marked and two chunks graded, in headless Chromium driven by Playwright.

    python docs/make_review_screenshot.py     # needs /usr/bin/chromium (or chromium on PATH) and playwright

The page runs in a temporary copy of the project (its outputs linked, not copied), so the clicks the
screenshot makes never reach data/reviews/.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
LINKED = ["data/goldenset.jsonl", "data/documents.parquet", "data/chunkings", "data/panel"]
PICTURE = ROOT / "docs" / "img" / "review.png"


def main() -> int:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        print("error: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as folder:
        project = Path(folder)
        shutil.copy(ROOT / "params.yaml", project)
        (project / "data").mkdir()
        for name in LINKED:
            (project / name).symlink_to(ROOT / name)
        env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
        server = subprocess.Popen(
            [sys.executable, "-m", "retrieval_bench.cli", "review", "--reviewer", "ana", "--port", "0"],
            cwd=project,
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            address = server.stdout.readline().split(" at ")[1].split()[0]  # type: ignore[union-attr]
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
                page = browser.new_page(viewport={"width": 1280, "height": 1000}, bypass_csp=True)
                page.goto(address)
                page.wait_for_selector("body[data-ready='1']")
                for key in ["f", "3", "1"]:
                    page.keyboard.press(key)
                page.wait_for_function("document.body.dataset.saved === '3'")
                page.keyboard.press("k")  # back to the second chunk, the first in view with the question
                PICTURE.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(PICTURE))
                browser.close()
        finally:
            server.terminate()
            server.wait()
    print(f"wrote {PICTURE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
