"""Export to an Argos Translate package (.argosmodel), the format LibreTranslate installs.

A package is a zip archive of one directory, `translate-SRC_TGT-VERSION/`, holding:
- metadata.json: the languages and the package's version, as Argos Translate reads them;
- model/: the CTranslate2 model (`aiayn.interop.ctranslate2.export`, so it is also a directory that
  `aiayn translate --engine ctranslate2` runs);
- sentencepiece.model: the one SentencePiece model Argos Translate encodes the source and decodes the
  target with, so only models with one joint vocabulary export (aiayn's default);
- spacy/: a blank spaCy pipeline of the source language, to which Argos Translate adds spaCy's
  rule-based sentencizer when ARGOS_CHUNK_TYPE=SPACY: sentence splitting without a download.
  By default Argos Translate splits with MiniSBD instead and downloads its model of the source
  language once (LibreTranslate does that when it starts);
- README.md: what the package is and how it translates.

Argos Translate translates each line of a text, split into sentences, with beam 4 and a plain length
penalty of 0.2 (|Y|^0.2): `aiayn translate --beam-size 4 --length-penalty 0.2 --penalty-form plain`
gives the same translations (docs/libretranslate.md).
"""

from __future__ import annotations

import io
import json
import tempfile
import zipfile
from pathlib import Path

from aiayn import files
from aiayn.config import DataConfig
from aiayn.interop import ConversionError, ctranslate2, require
from aiayn.model import Transformer
from aiayn.text.detect import LANGUAGE_NAMES
from aiayn.tokenizer import Tokenizer

SUFFIX = ".argosmodel"
# How Argos Translate 1.11 searches (argostranslate/translate.py: apply_packaged_translation)
BEAM_SIZE, LENGTH_PENALTY = 4, 0.2


def package_name(languages: tuple[str, str], version: str) -> str:
    """The directory a package unpacks to, as Argos Translate names its own: translate-en_de-1_0."""
    return f"translate-{languages[0]}_{languages[1]}-{version.replace('.', '_')}"


def is_package(path: Path) -> bool:
    """`path` is an Argos Translate package: a zip archive with a metadata.json in its directory."""
    if not zipfile.is_zipfile(path):
        return False
    with zipfile.ZipFile(path) as z:
        return any(name.count("/") == 1 and name.endswith("/metadata.json") for name in z.namelist())


def check_out(out: str | Path, force: bool = False) -> None:
    """Refuse, before any work, to write a package anywhere but a new file or an earlier package
    (anything else too with `force`, but never a directory)."""
    out = Path(out)
    if out.suffix != SUFFIX:
        raise ConversionError(f"{out}: an Argos Translate package's name ends in {SUFFIX}")
    files.check_writable(out)
    if out.exists() and not force and not is_package(out):
        raise files.OutputError(f"{out} exists and is not an Argos Translate package: choose a new name, "
                                "or pass --force to replace it")


def export(model: Transformer, tokenizer: Tokenizer, out: str | Path, languages: tuple[str, str],
           version: str = "1.0", quantization: str | None = None, max_positions: int = 1024,
           max_source_len: int = DataConfig().max_len, force: bool = False, target_prefix: str = "") -> Path:
    """Write the Argos Translate package `out` (a .argosmodel file; an earlier one is replaced whole,
    never left half-written), its CTranslate2 weights stored as `quantization` (default float32).
    Anything else already at `out` is replaced only with `force`. `target_prefix`: the piece that
    starts the decoder, a multilingual model's target language (`export_directions`)."""
    out = Path(out)
    check_out(out, force)
    if not all(languages):
        raise ConversionError("the model does not say its languages, which an Argos Translate package needs")
    # Argos cuts text into pieces with one SentencePiece model, CTranslate2 maps the pieces to the
    # model's ids (its own vocabularies, one a side if the model has two), and Argos joins the target
    # pieces with the same SentencePiece model, which passes pieces it does not know through as their
    # text: the source side's model serves a model with a vocabulary per language too.
    spacy = require("spacy", "argos")
    name = package_name(languages, version)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / name
        told = {"pairs": ("-".join(languages),), "language_token": "target"} if target_prefix else {}
        ctranslate2.export(model, tokenizer, root / "model", quantization, max_positions, languages,
                           max_source_len=max_source_len, **told)
        (root / "sentencepiece.model").write_bytes(tokenizer.source_proto)
        spacy.blank(languages[0]).to_disk(root / "spacy")
        names = [LANGUAGE_NAMES.get(code, code) for code in languages]
        metadata = {"package_version": version, "argos_version": "1.0", "type": "translate",
                    "from_code": languages[0], "from_name": names[0],
                    "to_code": languages[1], "to_name": names[1], "links": [],
                    **({"target_prefix": target_prefix} if target_prefix else {})}
        (root / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
        (root / "README.md").write_text(_readme(names, model))
        archive = io.BytesIO()
        with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as z:
            for path in sorted(root.rglob("*")):
                z.write(path, path.relative_to(tmp))
    files.write_atomically(out, archive.getbuffer())  # not a copy of it
    return out


def export_directions(model: Transformer, tokenizer: Tokenizer, out: str | Path, pairs: tuple[str, ...],
                      version: str = "1.0", quantization: str | None = None, max_positions: int = 1024,
                      max_source_len: int = DataConfig().max_len, force: bool = False) -> list[Path]:
    """One package per direction of a multilingual model told its target language as the decoder's
    first token (`language_token` target): `out`/SRC_TGT.argosmodel, each the whole model with the
    direction's piece as its `target_prefix`, which Argos Translate gives CTranslate2 as the target's
    first token. `out` is a directory, made if new (in an existing one)."""
    out = Path(out)
    if out.suffix == SUFFIX or (out.exists() and not out.is_dir()):
        raise ConversionError(f"{out}: a multilingual model exports one package per direction: give a "
                              "directory")
    paths = [out / f"{pair.replace('-', '_')}{SUFFIX}" for pair in pairs]
    if out.is_dir():
        for path in paths:  # every one, before any work
            check_out(path, force)
    elif not out.parent.is_dir():
        raise files.OutputError(f"{out}: no such directory {out.parent}")
    out.mkdir(exist_ok=True)
    for pair, path in zip(pairs, paths, strict=True):
        src, tgt = pair.split("-")
        piece = tokenizer.pieces([tokenizer.language_id(tgt)])[0]
        export(model, tokenizer, path, (src, tgt), version, quantization, max_positions, max_source_len,
               force, target_prefix=piece)
    return paths


def _readme(names: list[str], model: Transformer) -> str:
    c = model.config
    return (f"# {names[0]} to {names[1]}\n\n"
            f"A Transformer (Vaswani et al., 2017) trained with aiayn: {c.n_encoder_layers} encoder and "
            f"{c.n_decoder_layers} decoder layers, d_model {c.d_model}, {c.n_heads} heads.\n\n"
            "model/ is a CTranslate2 model, sentencepiece.model its tokenizer. spacy/ splits sentences "
            "without a download when ARGOS_CHUNK_TYPE=SPACY; by default Argos Translate uses MiniSBD.\n")
