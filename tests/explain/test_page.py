"""The explain page in a real browser (Debian's Chromium driven by Playwright), written by `aiayn explain`
and opened from the file system: every panel, every control, both languages, no page error, nothing
fetched. (The served page's Explain tab: tests/serve/test_explain.py.)"""

import json

from aiayn.cli import main
from aiayn.explain.page import page
from tests.serve.test_page import browser  # noqa: F401 (a fixture)

PANELS = ["input", "attention", "heads", "ffn", "decoder", "search"]


def step_through(page_, data):
    """Open every panel with the Next button and use its controls; the page must show what the data say."""
    for k, name in enumerate(PANELS):
        page_.wait_for_selector(f"section.panel[data-panel={name}]")
        panel = page_.locator("section.panel")
        if name == "attention":
            assert panel.locator("table.steps tr").count() == len(data["source"]["pieces"]) + 1
            page_.select_option("section.panel select >> nth=0", index=len(data["encoder"]) - 1)  # layer
            page_.select_option("section.panel select >> nth=1", index=1)  # head
            page_.select_option("section.panel select >> nth=2", index=2)  # word
            word = data["source"]["pieces"][2].replace("\u2581", "\u2423")
            lead = f"layer {len(data['encoder'])}, head 2, for the word “{word}”"
            assert lead in page_.inner_text("section.panel p.lead")
            assert page_.locator("table.steps tr.focus").count() == 1
        elif name in ("heads", "ffn"):
            page_.select_option("section.panel select >> nth=1", index=1)  # word
        elif name == "decoder":
            rows = len(data["target"]["pieces"]) - 1
            page_.select_option("section.panel select >> nth=2", index=rows - 1)  # the last output step
            assert page_.locator("table.top tr").count() == len(data["decoder"]["top"]["ids"][0])
            future = page_.locator("table.heat td.future").count()
            assert future == rows * (rows - 1) // 2  # masked self-attention: the future is hidden
        elif name == "search":
            assert page_.locator("svg.tree g.node").count() == len(data["search"]["nodes"])
            page_.locator("input.step-slider").fill("1")
            assert page_.locator("svg.tree g.node").count() == 1 + len(data["search"]["steps"][0])
            assert data["translation"] in page_.inner_text("p.result")
        if k < len(PANELS) - 1:
            page_.click("footer.panel-nav button.next")


def test_the_written_page_opens_from_the_file_system_and_every_panel_works(browser, trained_run, tmp_path):  # noqa: F811
    out = tmp_path / "explain"
    assert main(["explain", str(trained_run), "a b c d e", "--out", str(out), "--beam-size", "2"]) == 0
    html = (out / "index.html").read_text()
    data = json.loads(html.split('id="explain-data">')[1].split("</script>")[0].replace("<\\/", "</"))
    page_ = browser.new_page(viewport={"width": 1100, "height": 900})
    errors, requests = [], []
    page_.on("pageerror", lambda e: errors.append(str(e)))
    page_.on("request", lambda r: requests.append(r.url))
    page_.goto((out / "index.html").as_uri())
    step_through(page_, data)
    page_.click("button.lang")
    assert page_.inner_text("h2") == "Transformer 逐步演示"
    assert page_.inner_text("section.panel h3") == "6. 搜索"
    page_.click("nav.panels button[data-panel=input]")
    assert "句子被 SentencePiece 切成子词" in page_.inner_text("section.panel")
    assert not errors
    assert requests == [(out / "index.html").as_uri()]  # one file, nothing else: it works offline


def test_the_page_opens_in_chinese_with_lang_zh(browser, trained_run, tmp_path):  # noqa: F811
    out = tmp_path / "zh"
    assert main(["explain", str(trained_run), "a b c", "--out", str(out), "--lang", "zh"]) == 0
    page_ = browser.new_page()
    errors = []
    page_.on("pageerror", lambda e: errors.append(str(e)))
    page_.goto((out / "index.html").as_uri())
    assert page_.inner_text("section.panel h3") == "1. 输入"
    assert not errors


def test_a_sentence_with_markup_stays_text(browser, trained_run):  # noqa: F811
    from aiayn.explain import explain
    from aiayn.translation import load_translator

    sentence = "a </script><script>window.hacked = 1</script> b"
    data = explain(load_translator(trained_run, device="cpu", compile=False), sentence)
    page_ = browser.new_page()
    errors = []
    page_.on("pageerror", lambda e: errors.append(str(e)))
    page_.set_content(page(data))
    assert page_.evaluate("window.hacked") is None
    assert sentence in page_.inner_text("p.sentence")
    assert not errors
