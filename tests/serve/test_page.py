"""The web page in a real browser (Debian's Chromium driven by Playwright): type, translate, and see
the translation, its alternatives and the attention heat map."""

import os
import shutil
from pathlib import Path

import pytest

from tests.conftest import HANG_S

from .conftest import serving

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser():
    playwright = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        if os.environ.get("CI"):
            pytest.fail("no chromium: .ci/run installs it (apt-get install -y chromium)")
        pytest.skip("no chromium (apt-get install -y chromium)")
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield browser
        browser.close()


def opened(browser, url):
    """The page at `url`, once it lists the models; -> (page, the page errors it will report)."""
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(url)
    page.wait_for_selector("#pair option", state="attached")
    return page, errors


def test_translate_in_the_page_and_see_the_attention(browser, en_de, tmp_path):
    with serving([en_de]) as url:
        page, errors = opened(browser, url)
        assert page.inner_text("#pair") == "en → de"
        page.fill("#text", "a b c d e")
        page.fill("#beam", "4")
        page.fill("#nbest", "3")
        page.click("#translate")
        page.wait_for_selector("table.heat td", timeout=HANG_S * 1000)
        expected = en_de.translate(["a b c d e"], beam_size=4, nbest=3)[0]
        assert page.inner_text("#translation").startswith(expected.text)
        assert page.locator("#alternatives li").count() == len(expected.alternatives) == 2
        view = expected.attention or en_de.translate(["a b c d e"], attention=True)[0].attention
        cells = page.locator("table.heat tbody td").count()
        assert cells == len(view.target_out) * len(view.source)  # one cell per (target, source) pair
        assert page.locator("#layer option").count() == len(view.maps["cross"])
        assert page.locator("#head option").count() == view.maps["cross"][0].shape[0]
        page.select_option("#head", "1")
        page.hover("table.heat tbody tr:nth-child(2) th")
        assert "attends most to" in page.inner_text("#focus")
        assert not errors
        shot = Path(os.environ.get("AIAYN_SCREENSHOT") or tmp_path / "page.png")
        page.screenshot(path=str(shot), full_page=True)
        assert shot.stat().st_size > 10_000


def test_translate_html_and_a_file_in_the_page(browser, en_de, tmp_path):
    """HTML in the page: the translated markup shown as text and drawn in a sandboxed frame; a file
    sent with the file picker comes back as a download of the same kind."""
    with serving([en_de]) as url:
        page, errors = opened(browser, url)
        html = '<p>a b c. <b>d e</b> f g.</p><ul><li>h i j</li></ul>'
        page.select_option("#format", "html")
        page.fill("#text", html)
        page.click("#translate")
        page.wait_for_selector("#preview:not([hidden])", timeout=HANG_S * 1000)
        expected = en_de.translate([html], format="html")[0].text
        assert page.inner_text("#translation").startswith(expected)
        frame = page.frame_locator("#preview")
        assert frame.locator("li").count() == 1 and frame.locator("p").count() == 1
        assert page.get_attribute("#preview", "sandbox") == ""  # no scripts in translated pages

        notes = tmp_path / "notes.txt"
        notes.write_text("a b c\nd e f g\n")
        page.set_input_files("#file", str(notes))
        page.click("#translate-file")
        page.wait_for_selector("#download:not([hidden])", timeout=HANG_S * 1000)
        with page.expect_download() as download:
            page.click("#download")
        saved = tmp_path / "translated.txt"
        download.value.save_as(saved)
        lines = [t.text for t in en_de.translate(["a b c", "d e f g"])]
        assert saved.read_text() == "\n".join(lines) + "\n"
        assert download.value.suggested_filename == "notes.txt"

        page.set_input_files("#file", {"name": "slides.key", "mimeType": "application/octet-stream",
                                        "buffer": b"x"})
        page.click("#translate-file")
        page.wait_for_selector("#file-status.error")
        assert page.inner_text("#file-status") == "Invalid request: file format not supported"
        assert not errors
