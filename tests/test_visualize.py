import json

import torch

from aiayn import visualize
from aiayn.cli import main
from aiayn.config import DecodeConfig
from aiayn.decoding.translator import translate
from aiayn.translation import attention_view

PNG = b"\x89PNG\r\n\x1a\n"


def view_of(model, tokenizer, sentence, config=None):
    """The attention of the model's translation of `sentence`, as `Translator.translate` gives it."""
    best = translate(model, tokenizer, [sentence], config or DecodeConfig(), progress=False)[0][0]
    return attention_view(model, tokenizer, sentence, best)


def test_attention_view_weights_fit_the_tokens(reverse_model):
    model, tokenizer, sources = reverse_model
    view = view_of(model, tokenizer, sources[0], DecodeConfig(beam_size=2))
    assert view.translation and view.source[-1] == "</s>" and view.target_in[0] == "<s>"
    assert len(view.target_in) == len(view.target_out)
    for kind, layers in view.maps.items():
        queries, keys = view.labels(kind)
        assert len(layers) == 2
        for weights in layers:
            assert weights.shape == (4, len(queries), len(keys))
            assert torch.allclose(weights.sum(-1), torch.ones(4, len(queries)), atol=1e-5)
    for weights in view.maps["decoder"]:
        assert (weights.triu(diagonal=1) == 0).all()


def test_pictures_and_page_are_written(reverse_model, tmp_path):
    model, tokenizer, sources = reverse_model
    view = view_of(model, tokenizer, sources[1])
    for kind in ("encoder", "decoder", "cross"):
        png = visualize.attention_grid(view, kind, tmp_path / f"{kind}.png").read_bytes()
        assert png.startswith(PNG) and len(png) > 10_000
    page = visualize.attention_html(view, tmp_path / "a.html").read_text()
    assert page.startswith("<!doctype html>") and "__DATA__" not in page
    data = json.loads(page.split("const DATA = ", 1)[1].split(";\n", 1)[0])
    assert data["labels"]["cross"] == [view.target_in, view.source]
    assert len(data["maps"]["encoder"]) == 2 and len(data["maps"]["encoder"][0]) == 4


def test_attention_command_writes_every_picture(reverse_model, tmp_path, capsys):
    from aiayn import checkpoint
    from aiayn.config import DataConfig, TrainConfig

    model, tokenizer, sources = reverse_model
    ck = checkpoint.save(tmp_path / "ck", model, tokenizer, DataConfig(), TrainConfig())
    assert main(["attention", str(ck), sources[2], "--out", str(tmp_path / "pictures")]) == 0
    assert sorted(p.name for p in (tmp_path / "pictures").iterdir()) == [
        "attention.html", "cross.png", "decoder.png", "encoder.png"]


def test_positional_encoding_and_training_figures(tmp_path):
    assert main(["plot", "positional-encoding", "--d-model", "64", "--length", "50",
                 "--out", str(tmp_path / "pe.png")]) == 0
    assert (tmp_path / "pe.png").read_bytes().startswith(PNG)
    lines = [{"kind": "train", "step": s, "loss": 5 - s / 100, "nll": 4 - s / 100, "lr": 1e-4 * s}
             for s in range(10, 110, 10)]
    lines += [{"kind": "valid", "step": 100, "loss": 4.5, "nll": 3.5},
              {"kind": "bleu", "step": 100, "bleu": 12.3}]
    text = "".join(json.dumps(x) + "\n" for x in lines) + '{"kind": "train", "st'  # cut short by a kill
    (tmp_path / "metrics.jsonl").write_text(text)
    assert main(["plot", "training", str(tmp_path), "--out", str(tmp_path / "t.png")]) == 0
    assert (tmp_path / "t.png").read_bytes().startswith(PNG)


def test_attention_grids_have_a_colour_scale_axis_titles_and_the_right_sentence(reverse_model):
    """Problem 9: the PNGs had no colour bar or axis titles, and the encoder grid was titled with the
    German output instead of the sentence it encodes."""
    import matplotlib.pyplot as plt

    model, tokenizer, sources = reverse_model
    view = view_of(model, tokenizer, sources[2])
    for kind, query, key, title in (("encoder", "source piece", "source piece", view.sentence),
                                    ("decoder", "target position", "target piece", view.translation),
                                    ("cross", "target position", "source piece",
                                     f"{view.sentence} -> {view.translation}")):
        fig = visualize.attention_figure(view, kind)
        assert fig._suptitle.get_text() == f"{visualize.TITLES[kind]}: {title}"
        assert fig._supylabel.get_text().startswith(query) and fig._supxlabel.get_text().startswith(key)
        colorbars = [ax for ax in fig.axes if ax.get_label() == "<colorbar>"]
        assert len(colorbars) == 1 and colorbars[0].get_ylabel() == "attention weight"
        plt.close(fig)


def _drawn(text: str) -> bytes:
    """The pixels of `text` drawn as a title, inside `fonts_for`."""
    import matplotlib.pyplot as plt

    with visualize.fonts_for([text]):
        fig, ax = plt.subplots(figsize=(3, 1))
        ax.set_title(text)
        fig.canvas.draw()
        pixels = bytes(fig.canvas.buffer_rgba())
    plt.close(fig)
    return pixels


def test_without_a_cjk_font_chinese_tokens_cost_one_line_not_a_warning_each(monkeypatch, capsys, recwarn):
    monkeypatch.setattr(visualize, "cjk_font", lambda: None)
    monkeypatch.setattr(visualize, "_said", set())
    _drawn("我们去公园散步")
    _drawn("你好")
    said = capsys.readouterr().err.strip().splitlines()
    assert len(said) == 1 and "no font with Chinese" in said[0] and "fonts-noto-cjk" in said[0]
    assert not [w for w in recwarn if "missing from font" in str(w.message)]
    _drawn("a dog runs")  # Latin text: no font chosen, nothing said
    assert capsys.readouterr().err == ""


def test_a_cjk_font_installed_after_matplotlib_listed_the_fonts_is_found(monkeypatch):
    """matplotlib keeps its list of the system's fonts on disk: a font installed since is not in it."""
    import pytest
    from matplotlib import font_manager

    if not any(font.name in visualize.CJK_FONTS for font in font_manager.FontManager().ttflist):  # read now
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk)")
    cjk_files = {font.fname for font in font_manager.fontManager.ttflist if font.name in visualize.CJK_FONTS}
    # the list as it was before those files were installed (each face of a collection, .ttc, gone too)
    stale = [font for font in font_manager.fontManager.ttflist if font.fname not in cjk_files]
    monkeypatch.setattr(font_manager.fontManager, "ttflist", stale)
    visualize._fonts_installed_since.cache_clear()
    assert visualize.cjk_font() in visualize.CJK_FONTS
    visualize._fonts_installed_since.cache_clear()


def test_with_a_cjk_font_installed_chinese_is_drawn_with_it(monkeypatch):
    import pytest

    font = visualize.cjk_font()
    if font is None:
        pytest.skip("no CJK font installed (apt-get install fonts-noto-cjk)")
    with visualize.fonts_for(["你好"]):
        import matplotlib

        assert matplotlib.rcParams["font.family"][0] == font
    monkeypatch.setattr(visualize, "cjk_font", lambda: None)
    boxes = _drawn("你好")  # DejaVu Sans draws each character as the same box
    monkeypatch.undo()
    assert _drawn("你好") != boxes and _drawn("你好") != _drawn("好你")
