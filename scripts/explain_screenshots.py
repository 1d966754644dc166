"""Screenshots of three panels of `aiayn explain`'s page, for the README (regenerated, not drawn by hand).

    aiayn explain runs/quickstart "A man in a blue shirt is riding a bicycle." --out runs/explain
    python scripts/explain_screenshots.py runs/explain/index.html docs/images/explain

Writes OUT/attention.png (self-attention's six steps), OUT/decoder.png (the decoder and its output
distribution) and OUT/search.png (beam search as a tree), and prints how long the page took to open.
Needs playwright (pip) and a Chromium (Debian: apt-get install -y chromium).
"""

import shutil
import sys
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

SHOTS = {"attention": {"word": 4}, "decoder": {}, "search": {}}  # panel -> its word (the attention panel)
HEIGHT = 1000  # pixels of a panel shown at most


def main(page_path: str, out: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    Path(out).mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1100, "height": 900})
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))
        started = time.perf_counter()
        page.goto(Path(page_path).resolve().as_uri(), wait_until="load")
        page.wait_for_selector("section.panel")
        size = Path(page_path).stat().st_size / 1e6
        print(f"opened in {time.perf_counter() - started:.2f} s ({size:.2f} MB)")
        for panel, choices in SHOTS.items():
            page.click(f"nav.panels button[data-panel={panel}]")
            if "word" in choices:
                page.select_option("section.panel select >> nth=2", index=choices["word"])
            box = page.locator("section.panel").bounding_box()  # its top, at most HEIGHT pixels
            page.screenshot(path=f"{out}/{panel}.png", full_page=True, clip={
                "x": box["x"], "y": box["y"], "width": box["width"], "height": min(box["height"], HEIGHT)})
            print(f"{out}/{panel}.png")
        browser.close()
    if errors:
        raise SystemExit(f"page errors: {errors}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
