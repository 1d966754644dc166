"""The explain page of a Chinese sentence in Chromium: every token's characters are drawn with a font
that has them (the page's CSS lists CJK fonts before the generic family), not as the boxes a browser
draws for characters no font has. Compared against the same page in a Chromium that sees no CJK font
(fontconfig limited to DejaVu): there every character is the same box."""

import io
import json
import os
import random
import shutil
import subprocess

import pytest

from aiayn.cli import main
from tests.serve.test_page import CHROMIUM

CHARS = "我们你他她是的去公园散步吃饭喝水好不大小天今明年人中国学生老师书看"
SENTENCE = "我们今天去公园散步"


def has_cjk_font() -> bool:
    fc = shutil.which("fc-list")
    return bool(fc) and bool(subprocess.run([fc, ":lang=zh"], capture_output=True, text=True).stdout.strip())


@pytest.fixture(scope="module")
def explained(tmp_path_factory):
    """`aiayn explain` of a Chinese sentence, from a tiny zh->en model trained a few updates."""
    root = tmp_path_factory.mktemp("zh")
    rng = random.Random(1)
    lines = ["".join(rng.choices(CHARS, k=rng.randint(3, 9))) for _ in range(300)]
    (root / "train.tsv").write_text("".join(f"{s}\t{s}\n" for s in lines), encoding="utf-8")
    run = root / "run"
    assert main(["train", "--preset", "tiny", "--train", str(root / "train.tsv"), "--src-lang", "zh",
                 "--tgt-lang", "en", "--vocab-size", "320", "--out", str(run), "--max-steps", "2",
                 "--batch-tokens", "512", "--valid-every", "0", "--bleu-every", "0", "--threads", "1"]) == 0
    out = root / "explain"
    assert main(["explain", str(run), SENTENCE, "--out", str(out), "--beam-size", "1"]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    data = json.loads(html.split('id="explain-data">')[1].split("</script>")[0].replace("<\\/", "</"))
    return out / "index.html", data


def pieces_drawn(page_path, fontconfig=None):
    """Screenshots (PNG bytes) of the input panel's piece cells of the written page, one per piece."""
    playwright = pytest.importorskip("playwright.sync_api")
    env = {**os.environ, "FONTCONFIG_FILE": str(fontconfig)} if fontconfig else None
    with playwright.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], env=env)
        try:
            page = browser.new_page()
            page.goto(page_path.as_uri())
            page.wait_for_selector("table.pieces")
            cells = page.locator("table.pieces tr >> nth=0").locator("td")
            return [cells.nth(i).inner_text() for i in range(cells.count())], \
                [cells.nth(i).screenshot() for i in range(cells.count())]
        finally:
            browser.close()


def is_box(png: bytes) -> bool:
    """Whether the character in a piece's cell is drawn as a box (what a browser draws for a character
    no font has): all its ink on the edge of its bounding box. Real glyphs have strokes inside."""
    from PIL import Image

    image = Image.open(io.BytesIO(png)).convert("L")
    width, height = image.size
    pixels = image.load()
    ink = [(x, y) for x in range(3, width - 3) for y in range(3, height - 3) if pixels[x, y] < 140]
    xs, ys = [x for x, _ in ink], [y for _, y in ink]
    return bool(ink) and all(x in (min(xs), max(xs)) or y in (min(ys), max(ys)) for x, y in ink)


def test_every_chinese_token_is_drawn_with_its_glyphs(explained, tmp_path):
    if CHROMIUM is None:
        pytest.skip("no chromium (apt-get install -y chromium)")
    if not has_cjk_font():
        if os.environ.get("CI"):
            pytest.fail("no CJK font: .ci/run installs one (apt-get install -y fonts-wqy-microhei)")
        pytest.skip("no CJK font (apt-get install -y fonts-wqy-microhei)")
    page_path, data = explained
    texts, drawn = pieces_drawn(page_path)
    chinese = [i for i, t in enumerate(texts) if any("\u4e00" <= c <= "\u9fff" for c in t)]
    assert "".join(texts[i] for i in chinese).replace("\u2423", "") == SENTENCE  # every character shown
    assert not [texts[i] for i in chinese if is_box(drawn[i])]

    config = tmp_path / "fonts.conf"  # a Chromium that sees DejaVu alone draws boxes for them
    config.write_text("<?xml version='1.0'?><!DOCTYPE fontconfig SYSTEM 'fonts.dtd'><fontconfig>"
                      "<dir>/usr/share/fonts/truetype/dejavu</dir>"
                      f"<cachedir>{tmp_path / 'fc-cache'}</cachedir></fontconfig>")
    boxed_texts, boxed = pieces_drawn(page_path, config)
    assert boxed_texts == texts
    assert all(is_box(boxed[i]) for i in chinese if len(texts[i]) == 1)
