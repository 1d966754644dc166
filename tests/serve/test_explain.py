"""`POST /v1/explain` and the served page's Explain tab: the same view as `aiayn explain`'s page, in a
real browser (Debian's Chromium driven by Playwright)."""

import httpx
import pytest

from tests.conftest import HANG_S
from tests.explain.test_page import step_through
from tests.serve.test_page import browser  # noqa: F401 (a fixture)

from .conftest import serving


def test_the_served_page_has_the_same_view_as_a_tab(browser, en_de):  # noqa: F811
    with serving([en_de]) as url:
        body = {"text": "a b c d", "beam_size": 2}
        expected = httpx.post(f"{url}/v1/explain", json=body, timeout=HANG_S).json()
        assert expected["translation"] == en_de.translate(["a b c d"], beam_size=2, split=False)[0].text
        page_ = browser.new_page(viewport={"width": 1100, "height": 900})
        errors = []
        page_.on("pageerror", lambda e: errors.append(str(e)))
        page_.goto(url)
        page_.wait_for_selector("#explain-pair option", state="attached")
        page_.click("nav.tabs button[data-tab=explain-tab]")
        page_.fill("#explain-text", "a b c d")
        page_.fill("#explain-beam", "2")
        page_.click("#explain-button")
        page_.wait_for_selector("#explain section.panel", timeout=HANG_S * 1000)
        step_through(page_, expected)
        page_.click("#explain button.lang")
        assert page_.inner_text("#explain h2") == "Transformer 逐步演示"
        assert not errors


@pytest.mark.parametrize("body, status, message", [
    ({"text": ""}, 400, "the sentence is empty"),
    ({"text": "a " * 300}, 400, "this model takes at most"),
    ({"text": "a", "beam_size": 99}, 422, "beam_size=99 is more than this server allows"),
])
def test_explain_requests_it_cannot_answer_get_one_line_errors(en_de, body, status, message):
    with serving([en_de]) as url:
        answer = httpx.post(f"{url}/v1/explain", json=body, timeout=HANG_S)
        assert answer.status_code == status and message in answer.json()["error"]


def test_the_api_key_field_serves_both_tabs(browser, en_de):  # noqa: F811
    with serving([en_de], api_keys=["secret"]) as url:
        page_ = browser.new_page()
        errors = []
        page_.on("pageerror", lambda e: errors.append(str(e)))
        page_.goto(url)
        page_.wait_for_selector("#explain-pair option", state="attached")
        page_.click("nav.tabs button[data-tab=explain-tab]")
        assert page_.is_visible("#key")  # above the tabs, not inside the Translate tab
        page_.fill("#explain-text", "a b c")
        page_.click("#explain-button")
        page_.wait_for_selector("#explain-status.error")
        assert "API key is required" in page_.inner_text("#explain-status")
        page_.fill("#key", "secret")
        page_.click("#explain-button")
        page_.wait_for_selector("#explain section.panel", timeout=HANG_S * 1000)
        assert not errors
