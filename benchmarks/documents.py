"""Whole files against their text alone: the time and peak memory of translating a 100-slide
presentation (.pptx) and a 300-page e-book (.epub) with `Translator.translate_file`, against
translating the same paragraphs as plain texts with `Translator.translate`. The files are made here
from Multi30k's English sentences (a slide: a title, three paragraphs of two sentences with a bold
word, a note; a page of the book: five paragraphs of four sentences with an italic word, in chapters
of ten pages). Each measurement runs in a process of its own, so that its peak memory is its own,
after translating the paragraphs once untimed (a compiled step a batch needs is compiled then).

    python benchmarks/documents.py --model runs/quickstart
    python benchmarks/documents.py --model runs/quickstart --slides 100 --pages 300 --record
    python benchmarks/documents.py --smoke           # seconds: keeps the script working (CI)
"""

from __future__ import annotations

import html
import io
import itertools
import json
import resource
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

from common import data_dir, detail, record, smoke_model
from common import parser as benchmark_parser


def sentences(smoke: bool) -> itertools.cycle:
    from aiayn.data.corpora import load_corpus

    if smoke:
        return itertools.cycle(load_corpus("synthetic:reverse:val", "", "").source[:50])
    texts = [s for part in ("val", "test_2016_flickr", "test_2017_flickr")
             for s in load_corpus(f"multi30k:{part}", "en", "de").source]
    return itertools.cycle(texts)


def slides(n: int, source: itertools.cycle) -> tuple[bytes, list[str]]:
    """A presentation of `n` slides, and its paragraphs as plain text."""
    from pptx import Presentation
    from pptx.util import Inches

    deck, plain = Presentation(), []
    for _ in range(n):
        slide = deck.slides.add_slide(deck.slide_layouts[5])
        slide.shapes.title.text = title = next(source)
        plain.append(title)
        frame = slide.shapes.add_textbox(Inches(1), Inches(2), Inches(8), Inches(4)).text_frame
        for k in range(3):
            first, second = next(source), next(source)
            head, _, tail = first.partition(" ")
            paragraph = frame.paragraphs[0] if k == 0 else frame.add_paragraph()
            for text, bold in ((head, True), (f" {tail} {second}", False)):
                run = paragraph.add_run()
                run.text, run.font.bold = text, bold
            plain.append(f"{first} {second}")
        slide.notes_slide.notes_text_frame.text = note = next(source)
        plain.append(note)
    out = io.BytesIO()
    deck.save(out)
    return out.getvalue(), plain


def book(pages: int, source: itertools.cycle) -> tuple[bytes, list[str]]:
    """An EPUB of `pages` pages in chapters of ten, and its paragraphs as plain text."""
    chapters, plain = [], []
    for c in range(0, pages, 10):
        body = []
        for _ in range(min(10, pages - c) * 5):
            said = [next(source) for _ in range(4)]
            head, _, tail = said[0].partition(" ")
            body.append(f"<p><i>{html.escape(head)}</i> {html.escape(' '.join([tail, *said[1:]]))}</p>")
            plain.append(" ".join(said))
        title = f"<head><title>Chapter {c // 10 + 1}</title></head>"
        chapters.append('<?xml version="1.0" encoding="UTF-8"?>\n<html xmlns="http://www.w3.org/1999/xhtml">'
                        f"{title}<body>{''.join(body)}</body></html>")
    items = "".join(f'<item id="c{i}" href="c{i}.xhtml" media-type="application/xhtml+xml"/>'
                    for i in range(len(chapters)))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        archive.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns='
                         '"urn:oasis:names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path='
                         '"content.opf" media-type="application/oebps-package+xml"/></rootfiles></container>')
        archive.writestr("content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                         'version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>A '
                         f'book</dc:title></metadata><manifest>{items}</manifest><spine>{spine}</spine>'
                         '</package>')
        for i, chapter in enumerate(chapters):
            archive.writestr(f"c{i}.xhtml", chapter)
    return out.getvalue(), plain


def measure(model: str, path: str, mode: str) -> dict:
    """In this process: translate the file (`mode` "file") or its paragraphs (`mode` "text")."""
    from aiayn.translation import load_translator

    translator = load_translator(model, device="cpu")
    data = Path(path).read_bytes()
    plain = json.loads(Path(path + ".json").read_text())
    translator.translate(plain)  # untimed: any compiled step these sentences need is compiled or loaded
    start = time.perf_counter()
    if mode == "file":
        translator.translate_file(data, path)
    else:
        translator.translate(plain)
    seconds = time.perf_counter() - start
    return {"seconds": seconds, "peak_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--model", help="a run directory or checkpoint")
    parser.add_argument("--slides", type=int, default=100, help="slides of the presentation")
    parser.add_argument("--pages", type=int, default=300, help="pages of the book (20 sentences a page)")
    parser.add_argument("--measure", nargs=3, metavar=("MODEL", "FILE", "MODE"), help=argparse_hidden())
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(*args.measure)))
        return
    data_dir()
    if args.smoke:
        model, args.slides, args.pages = str(smoke_model()), 2, 2
    elif not args.model:
        parser.error("--model RUN is needed (or --smoke)")
    else:
        model = args.model
    source = sentences(args.smoke)
    folder = Path(tempfile.mkdtemp())
    rows = ["| file | paragraphs | sentences | the file (s) | its text alone (s) | ratio | peak RSS, file / "
            "text |", "|---|---|---|---|---|---|---|"]
    for name, (data, plain) in ((f"{args.slides}-slides.pptx", slides(args.slides, source)),
                                (f"{args.pages}-pages.epub", book(args.pages, source))):
        path = folder / name
        path.write_bytes(data)
        Path(f"{path}.json").write_text(json.dumps(plain))
        got = {mode: json.loads(subprocess.run(
            [sys.executable, __file__, "--measure", model, str(path), mode], check=True, capture_output=True,
            text=True).stdout.splitlines()[-1]) for mode in ("file", "text")}
        count = sum(p.count(".") for p in plain)
        rows.append(f"| {name} ({len(data) // 1024:,} kB) | {len(plain):,} | {count:,} | "
                    f"{got['file']['seconds']:.1f} | {got['text']['seconds']:.1f} | "
                    f"{got['file']['seconds'] / got['text']['seconds']:.2f}x | "
                    f"{got['file']['peak_mib']:,.0f} / {got['text']['peak_mib']:,.0f} MiB |")
        print(rows[-1], flush=True)
    table = "\n".join(rows)
    print(table)
    if args.record and not args.smoke:
        record(f"Whole files against their text alone ({model})", table, path=detail("documents"))


def argparse_hidden() -> str:
    import argparse

    return argparse.SUPPRESS


if __name__ == "__main__":
    main()
