"""Pictures of the model: attention weights, positional encodings, training curves.

Attention weights come from the translation API (`Translator.translate(..., attention=True)`,
which runs `Transformer.attention_maps`): the weights the forward pass computed with, returned on
request, never read from module state.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import math
import re
import sys
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # files only, no screen
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from matplotlib import font_manager  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from aiayn.model.positional import sinusoids  # noqa: E402
from aiayn.train.logs import MetricsLog  # noqa: E402
from aiayn.translation import AttentionView  # noqa: E402

TITLES = {"encoder": "encoder self-attention", "decoder": "decoder masked self-attention",
          "cross": "encoder-decoder attention"}
# (query axis, key axis) of each kind: rows attend to columns.
AXES = {"encoder": ("source piece (query)", "source piece attended to (key)"),
        "decoder": ("target position (query)", "target piece attended to (key)"),
        "cross": ("target position (query)", "source piece attended to (key)")}


# Fonts that draw Chinese and Japanese tokens, the first installed is used: Linux (Noto, Source Han,
# WenQuanYi, Droid), macOS (PingFang, Hiragino), Windows (YaHei, SimHei). matplotlib's own DejaVu
# Sans has no CJK characters.
CJK_FONTS = ("Noto Sans CJK SC", "Noto Sans SC", "Source Han Sans SC", "WenQuanYi Micro Hei",
             "WenQuanYi Zen Hei", "Droid Sans Fallback", "PingFang SC", "Hiragino Sans GB",
             "Microsoft YaHei", "SimHei", "Arial Unicode MS")
_CJK = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef]")
_said: set[str] = set()


def cjk_font() -> str | None:
    """The first of CJK_FONTS that matplotlib finds installed, or None. matplotlib lists the system's
    fonts once and keeps the list on disk, so a font installed since is missing from it: without a CJK
    font there, the system's font files it has not read are added to it (once a process)."""
    def first() -> str | None:
        installed = {font.name for font in font_manager.fontManager.ttflist}
        return next((name for name in CJK_FONTS if name in installed), None)

    found = first()
    if found is None and _fonts_installed_since():
        found = first()
    return found


@functools.cache
def _fonts_installed_since() -> int:
    """Add the system's font files that matplotlib's font list lacks to it -> how many."""
    known = {font.fname for font in font_manager.fontManager.ttflist}
    added = 0
    for path in font_manager.findSystemFonts():
        if path not in known:
            with contextlib.suppress(Exception):  # a file FreeType cannot read is no font for us
                font_manager.fontManager.addfont(path)
                added += 1
    return added


@contextlib.contextmanager
def fonts_for(texts: Iterable[str]) -> Iterator[None]:
    """Draw and save figures inside this block with a font for the CJK characters of `texts`, when
    they have any: the first installed CJK font, glyph by glyph before matplotlib's own; with none
    installed, one line on stderr says so (and what to install) instead of a warning per character."""
    if not any(_CJK.search(text) for text in texts):
        yield
        return
    font = cjk_font()
    if font is None and "cjk" not in _said:
        _said.add("cjk")
        print("no font with Chinese or Japanese characters is installed: they are drawn as boxes; install "
              "one, e.g. apt-get install fonts-noto-cjk (or fonts-wqy-microhei)", file=sys.stderr)
    settings = {"font.family": [font, "DejaVu Sans"]} if font else {}
    with plt.rc_context(settings), warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"Glyph \d+ .* missing from font")
        yield


def attention_figure(view: AttentionView, kind: str) -> Figure:
    """A grid of heatmaps, one row per layer and one column per head; queries down, keys across, with
    one colour scale for all (the attention weight, 0 to 1). Chinese tokens: see `fonts_for`."""
    with fonts_for([view.sentence, view.translation]):
        return _attention_figure(view, kind)


def _attention_figure(view: AttentionView, kind: str) -> Figure:
    layers = view.maps[kind]
    heads = layers[0].size(0)
    queries, keys = view.labels(kind)
    cell = max(2.0, 0.22 * max(len(queries), len(keys)))
    fig, axes = plt.subplots(len(layers), heads, figsize=(cell * heads + 1.5, cell * len(layers) + 1),
                             squeeze=False, layout="constrained")
    for layer, weights in enumerate(layers):
        for head in range(heads):
            ax = axes[layer][head]
            image = ax.imshow(weights[head].numpy(), cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
            ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=7)
            ax.set_yticks(range(len(queries)), queries, fontsize=7)
            ax.set_title(f"layer {layer + 1}, head {head + 1}", fontsize=9)
    fig.supylabel(AXES[kind][0], fontsize=10)
    fig.supxlabel(AXES[kind][1], fontsize=10)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    text = {"encoder": view.sentence, "decoder": view.translation,
            "cross": f"{view.sentence} -> {view.translation}"}[kind]
    fig.suptitle(f"{TITLES[kind]}: {text}", fontsize=11)
    return fig


def attention_grid(view: AttentionView, kind: str, path: str | Path) -> Path:
    """`attention_figure` as a PNG file."""
    with fonts_for([view.sentence, view.translation]):  # drawn and saved with one font choice
        fig = _attention_figure(view, kind)
        fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)


def attention_html(view: AttentionView, path: str | Path) -> Path:
    """One self-contained page: pick the attention, a layer and heads; hover a token to see what
    it attends to (the weights averaged over the chosen heads)."""
    data = {"translation": view.translation, "titles": TITLES,
            "labels": {kind: view.labels(kind) for kind in view.maps},
            "maps": {kind: [[[[round(x, 4) for x in row] for row in head] for head in layer.tolist()]
                            for layer in layers] for kind, layers in view.maps.items()}}
    page = HTML_PAGE.replace("__DATA__", json.dumps(data, ensure_ascii=False).replace("</", "<\\/"))
    page = page.replace("__TITLE__", html.escape(view.translation))
    Path(path).write_text(page, encoding="utf-8")
    return Path(path)


def positional_encoding_figure(d_model: int, length: int, path: str | Path) -> Path:
    """The encoding matrix (positions x dimensions), interleaved as in the paper and concatenated."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 5), sharey=True)
    for ax, layout in zip(axes, ("interleaved", "concatenated"), strict=True):
        pe = sinusoids(torch.arange(length), d_model, layout).float().numpy()
        image = ax.imshow(pe, cmap="RdBu", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
        ax.set_title("interleaved: sin on even, cos on odd dims (the paper)" if layout == "interleaved"
                     else "concatenated: [sin | cos] (tensor2tensor, fairseq, Marian)", fontsize=10)
        ax.set_xlabel("dimension")
    axes[0].set_ylabel("position")
    fig.colorbar(image, ax=axes, shrink=0.8)
    fig.suptitle(f"sinusoidal positional encoding, d_model = {d_model}, positions 0..{length - 1}")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)


def training_figure(run_dir: str | Path, path: str | Path) -> Path:
    """Loss, perplexity, learning rate and validation BLEU against the update step, from metrics.jsonl."""
    records = MetricsLog(Path(run_dir) / "metrics.jsonl").records()
    series = {kind: [r for r in records if r["kind"] == kind] for kind in ("train", "valid", "bleu")}
    fig, axes = plt.subplots(2, 2, figsize=(11, 7))
    (loss, ppl), (lr, bleu) = axes
    for kind, style in (("train", "-"), ("valid", "o-")):
        steps = [r["step"] for r in series[kind]]
        loss.plot(steps, [r["loss"] for r in series[kind]], style, label=f"{kind} (label-smoothed)")
        ppl.plot(steps, [math.exp(min(r["nll"], 50)) for r in series[kind]], style, label=kind)
    lr.plot([r["step"] for r in series["train"]], [r["lr"] for r in series["train"]])
    bleu.plot([r["step"] for r in series["bleu"]], [r["bleu"] for r in series["bleu"]], "o-")
    if not series["bleu"]:
        bleu.text(0.5, 0.5, "no validation BLEU in this run\n(train with --bleu-every N)",
                  ha="center", va="center", transform=bleu.transAxes)
    for ax, title in ((loss, "loss"), (ppl, "perplexity"), (lr, "learning rate"), (bleu, "validation BLEU")):
        ax.set_title(title)
        ax.set_xlabel("update")
        ax.grid(alpha=0.3)
    ppl.set_yscale("log")
    loss.legend()
    ppl.legend()
    fig.suptitle(str(run_dir))
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return Path(path)


HTML_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>attention: __TITLE__</title>
<style>
body { font-family: system-ui, "Noto Sans", "Noto Sans CJK SC", "Source Han Sans SC", "PingFang SC",
       "Microsoft YaHei", "WenQuanYi Micro Hei", sans-serif; margin: 2em; color: #222; }
.tokens span { display: inline-block; padding: 3px 5px; margin: 2px; border-radius: 4px;
               border: 1px solid #ccc; cursor: default; }
.tokens span.query { outline: 2px solid #d33; }
label { margin-right: 1em; }
#heads label { margin-right: 0.5em; }
.row { margin: 0.8em 0; }
.caption { color: #666; font-size: 0.9em; }
</style></head><body>
<h2>Attention</h2>
<p class="caption">Translation: <b id="translation"></b></p>
<div class="row">attention: <select id="kind"></select> layer: <select id="layer"></select>
 heads: <span id="heads"></span></div>
<p class="caption">Hover a query token (top); the key tokens (bottom) are shaded by the weight it gives
them, averaged over the chosen heads.</p>
<div class="row">queries: <div class="tokens" id="queries"></div></div>
<div class="row">keys: <div class="tokens" id="keys"></div></div>
<script>
const DATA = __DATA__;
const $ = (id) => document.getElementById(id);
$("translation").textContent = DATA.translation;
for (const kind of Object.keys(DATA.maps)) $("kind").add(new Option(DATA.titles[kind], kind));
function setup() {
  const layers = DATA.maps[$("kind").value];
  $("layer").innerHTML = "";
  layers.forEach((_, i) => $("layer").add(new Option(String(i + 1), i)));
  $("heads").innerHTML = "";
  layers[0].forEach((_, h) => {
    const box = document.createElement("label");
    box.innerHTML = `<input type="checkbox" value="${h}" checked> ${h + 1}`;
    $("heads").appendChild(box);
  });
  draw(null);
}
function tokens(el, labels, onHover) {
  el.innerHTML = "";
  labels.forEach((text, i) => {
    const span = document.createElement("span");
    span.textContent = text;
    if (onHover) { span.onmouseenter = () => onHover(i); }
    el.appendChild(span);
  });
}
function draw(query) {
  const kind = $("kind").value, layer = DATA.maps[kind][$("layer").value];
  const [queryLabels, keyLabels] = DATA.labels[kind];
  const heads = [...$("heads").querySelectorAll("input:checked")].map((b) => Number(b.value));
  tokens($("queries"), queryLabels, draw);
  tokens($("keys"), keyLabels, null);
  if (query === null || heads.length === 0) return;
  $("queries").children[query].className = "query";
  keyLabels.forEach((_, k) => {
    const w = heads.reduce((sum, h) => sum + layer[h][query][k], 0) / heads.length;
    const span = $("keys").children[k];
    span.style.background = `rgba(30, 100, 220, ${w})`;
    span.style.color = w > 0.5 ? "white" : "#222";
    span.title = w.toFixed(3);
  });
}
$("kind").onchange = setup;
$("layer").onchange = () => draw(null);
$("heads").onchange = () => draw(null);
setup();
</script></body></html>
"""
