"""Screenshot the web page of a running `aiayn serve` after translating a sentence (for the README).

    aiayn serve runs/quickstart &
    python scripts/page_screenshot.py http://127.0.0.1:8000 page.png "A man in a blue shirt is riding a bike."

Needs playwright (pip) and a Chromium (Debian: apt-get install -y chromium).
"""

import shutil
import sys

from playwright.sync_api import sync_playwright


def main(url: str, out: str, sentence: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1000, "height": 900})
        page.goto(url)
        page.fill("#text", sentence)
        page.click("#translate")
        page.wait_for_selector("table.heat td", timeout=60_000)
        page.hover("table.heat tbody tr:nth-child(5) th")
        page.screenshot(path=out, full_page=True)
        browser.close()


if __name__ == "__main__":
    main(*sys.argv[1:4])
