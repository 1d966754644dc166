"""`aiayn export ctranslate2|argos`: write a model in CTranslate2's format for fast CPU and GPU
inference, or as an Argos Translate package that LibreTranslate installs."""

from __future__ import annotations

import argparse

from aiayn.cli.options import positive_int
from aiayn.files import check_out
from aiayn.interop import ConversionError, argos, ctranslate2
from aiayn.translation import load_model, max_source_len


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="export a model to CTranslate2 or an Argos Translate package",
        description="Export a checkpoint (or Marian directory) to a CTranslate2 model directory, with "
                    "its tokenizer, for `aiayn translate --engine ctranslate2` (needs ctranslate2: pip "
                    "install 'aiayn[interop]'); or an aiayn model to an Argos Translate package "
                    "(OUT.argosmodel) that Argos Translate and LibreTranslate install (needs ctranslate2 "
                    "and spacy: pip install 'aiayn[argos]'; docs/libretranslate.md).")
    p.add_argument("format", choices=("ctranslate2", "argos"), help="the format to write")
    p.add_argument("checkpoint", help="checkpoint, run directory (its newest checkpoint) or Marian directory")
    p.add_argument("out", help="ctranslate2: a directory, new, empty or an earlier CTranslate2 export; "
                               "argos: a file NAME.argosmodel, new or an earlier package; a multilingual "
                               "model's: a directory, of one package per direction, SRC_TGT.argosmodel")
    p.add_argument("--force", action="store_true",
                   help="replace OUT even if it holds something else (never a training run)")
    p.add_argument("--quantization", default=None, metavar="TYPE",
                   help="store weights as int8, int8_float32, float16, ... (default: float32); "
                        "--compute-type at translation time can also quantize on load")
    p.add_argument("--max-positions", type=positive_int, default=1024, metavar="INT",
                   help="longest sequence the exported position table covers (default: 1024)")
    p.add_argument("--package-version", default="1.0", metavar="VERSION",
                   help="argos: the package's version, which Argos Translate compares when it updates "
                        "(default: 1.0)")


def run(args: argparse.Namespace) -> int:
    if args.format == "argos":
        if args.out.endswith(argos.SUFFIX):  # a multilingual model's directory is checked once loaded
            argos.check_out(args.out, args.force)  # before loading
    else:
        check_out(args.out, "CTranslate2 model", ctranslate2.is_ctranslate2_dir, args.force)
    loaded = load_model(args.checkpoint)
    languages = loaded.src_lang, loaded.tgt_lang
    if args.format == "argos" and loaded.data.pairs:
        if loaded.data.language_token == "source":
            pairs = ", ".join(loaded.data.pairs)
            raise ConversionError(f"{args.checkpoint} is a multilingual model ({pairs}) "
                                  "told its target language by a source token, which Argos Translate "
                                  "packages cannot add (their target prefix, --language-token target, they "
                                  "can): export it to CTranslate2, or serve it with `aiayn serve`")
        for path in argos.export_directions(loaded.model, loaded.tokenizer, args.out, loaded.data.pairs,
                                            args.package_version, args.quantization, args.max_positions,
                                            max_source_len(loaded), args.force):
            print(f"wrote {path}")
        return 0
    if args.format == "argos":
        out = argos.export(loaded.model, loaded.tokenizer, args.out, languages, args.package_version,
                           args.quantization, args.max_positions, max_source_len(loaded), args.force)
    else:
        out = ctranslate2.export(loaded.model, loaded.tokenizer, args.out, args.quantization,
                                 args.max_positions, languages, args.force, max_source_len(loaded),
                                 loaded.data.pairs, loaded.data.language_token)
    print(f"wrote {out}")
    return 0
