"""`aiayn evaluate`: translate a test set and score it with sacreBLEU (BLEU and chrF)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from aiayn import evaluate
from aiayn.cli.options import add_direction_options, add_inference_options, change_default, translator_for
from aiayn.data.corpora import load_corpus
from aiayn.data.readers import DataError, read_lines
from aiayn.files import check_writable


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="translate a test set and score it with sacreBLEU",
        description="Translate the source side of a test set and score the detokenised output against "
                    "its target side with sacreBLEU: BLEU and chrF, cased, each printed with its "
                    "signature. With --hypotheses, score that file instead (no model needed).")
    p.add_argument("checkpoint", nargs="?", help="checkpoint or run directory (not with --hypotheses)")
    p.add_argument("--test", default="multi30k:test_2016_flickr", metavar="SPEC",
                   help="test set, in the forms --train takes (default: multi30k:test_2016_flickr)")
    add_direction_options(p, "the model's; a multilingual model's: every direction it has, and with "
                             "--zero-shot the others too; with --hypotheses: en, de",
                          "the test set's languages, which a multilingual model translates")
    p.add_argument("--output", "-o", metavar="FILE", help="write the translations here, one per line "
                                                          "(FILE.SRC-TGT for each of several directions)")
    p.add_argument("--scores", metavar="FILE", help="also write the scores and settings as JSON here (and "
                                                    "each direction's under \"directions\")")
    p.add_argument("--hypotheses", metavar="FILE",
                   help="score this file of translations instead of translating")
    p.add_argument("--tokenize", choices=("auto", *evaluate.TOKENIZERS), default="auto",
                   help="sacreBLEU's tokeniser for BLEU; auto (default): by the target language, zh for "
                        "Chinese, ja-mecab and ko-mecab for Japanese and Korean, 13a for the others")
    add_inference_options(p, exclude=("nbest", "alternatives"))  # the best translation is scored
    # A test set is aligned by line: each line is one segment, as the references are.
    change_default(p, "split", False, "cut each line into its sentences, translate those and join them "
                                      "back; --no-split: each line is one segment, as its reference is")


def run(args: argparse.Namespace) -> int:
    for path in (args.output, args.scores):
        if path:
            check_writable(Path(path))  # before minutes of translating
    if args.hypotheses:
        tgt_lang = args.tgt_lang or "de"
        tokenize = _tokenizer(args.tokenize, tgt_lang)
        corpus = load_corpus(args.test, args.src_lang or "en", tgt_lang)
        record = _scored(read_lines(args.hypotheses), corpus, tokenize, {"hypotheses": args.hypotheses})
    elif args.checkpoint:
        translator = translator_for(args)
        every = translator.pairs and not (args.src_lang or args.tgt_lang)  # a multilingual model's all
        translators = translator.directions(args.zero_shot) if every else [translator]
        several = len(translators) > 1
        records = {f"{t.src_lang}-{t.tgt_lang}": _evaluated(t, args, several) for t in translators}
        record = _mean(args.test, records) if several else next(iter(records.values()))
    else:
        raise DataError("give a checkpoint to translate with, or --hypotheses to score")
    if args.scores:
        Path(args.scores).write_text(json.dumps(record, indent=2) + "\n", encoding="utf-8")
    return 0


def _evaluated(translator, args: argparse.Namespace, several: bool) -> dict:
    """Translate the test set in the translator's direction and score it (printed); -> the record.
    With `several` directions, --output FILE is written as FILE.SRC-TGT, one per direction."""
    decode, where = translator.defaults, translator.description
    src_lang, tgt_lang = args.src_lang or translator.src_lang, args.tgt_lang or translator.tgt_lang
    tokenize = _tokenizer(args.tokenize, tgt_lang)  # before minutes of translating
    corpus = load_corpus(args.test, src_lang, tgt_lang)
    start = time.perf_counter()
    hypotheses = [t.text for t in translator.translate(corpus.source, progress=True)]
    seconds = time.perf_counter() - start
    settings = {"checkpoint": args.checkpoint, "languages": f"{src_lang}-{tgt_lang}", "device": where,
                "seconds": round(seconds, 2), "zero_shot": translator.zero_shot, **vars(decode)}
    zero = " (zero-shot)" if translator.zero_shot else ""
    print(f"{corpus.name} {src_lang}->{tgt_lang}{zero}: {len(corpus):,} sentences in {seconds:.1f} s "
          f"({len(corpus) / seconds:.0f} sentences/s) on {where}; beam {decode.beam_size}, "
          f"length penalty {decode.length_penalty} ({decode.penalty_form})")
    if args.output:
        output = f"{args.output}.{src_lang}-{tgt_lang}" if several else args.output
        Path(output).write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    return _scored(hypotheses, corpus, tokenize, settings)


def _mean(test: str, records: dict[str, dict]) -> dict:
    """The record of several directions: BLEU and chrF averaged over them (printed), and each one's."""
    bleu, chrf = (sum(r[m] for r in records.values()) / len(records) for m in ("bleu", "chrf"))
    print(f"mean over {len(records)} directions: BLEU {bleu:.2f}, chrF {chrf:.2f}")
    return {"test": test, "bleu": bleu, "chrf": chrf, "directions": records}


def _scored(hypotheses: list[str], corpus, tokenize: str, settings: dict) -> dict:
    """The scores of `hypotheses` against `corpus`'s references (printed), with `settings`."""
    if len(hypotheses) != len(corpus):
        raise DataError(f"{len(hypotheses)} hypotheses for the {len(corpus)} sentences of {corpus.name}")
    scores = evaluate.score(hypotheses, corpus.target, tokenize)
    print("\n".join(scores.lines()))
    return {"test": corpus.name, **vars(scores), **settings}


def _tokenizer(choice: str, tgt_lang: str) -> str:
    """The BLEU tokeniser to use, checked to run here."""
    tokenize = evaluate.tokenizer_for(tgt_lang) if choice == "auto" else choice
    evaluate.bleu_metric(tokenize)
    return tokenize
