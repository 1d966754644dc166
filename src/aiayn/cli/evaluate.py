"""`aiayn evaluate`: translate a test set and score it with sacreBLEU (BLEU and chrF)."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from aiayn import checkpoint, evaluate
from aiayn.cli.options import (
    add_direction_options,
    add_inference_options,
    change_default,
    float_list,
    translator_for,
)
from aiayn.config import ConfigError
from aiayn.data.corpora import default_test, default_valid, load_corpus
from aiayn.data.readers import DataError, read_lines
from aiayn.files import check_writable


def add_parser(commands: argparse._SubParsersAction, name: str) -> None:
    p = commands.add_parser(
        name, help="translate a test set and score it with sacreBLEU",
        description="Translate the source side of a test set and score the detokenised output against "
                    "its target side with sacreBLEU: BLEU and chrF, cased, each printed with its "
                    "signature. With --hypotheses, score that file instead (no model needed).")
    p.add_argument("checkpoint", nargs="?", help="checkpoint or run directory (not with --hypotheses)")
    p.add_argument("--test", metavar="SPEC",
                   help="test set, in the forms --train takes (default: the test set of the model's training "
                        "corpus, such as tatoeba-zh:test, else multi30k:test_2016_flickr; with --sweep: the "
                        "model's validation set)")
    add_direction_options(p, "the model's; a multilingual model's: every direction it has, and with "
                             "--zero-shot the others too; with --hypotheses: en, de",
                          "the test set's languages, which a multilingual model translates")
    p.add_argument("--output", "-o", metavar="FILE", help="write the translations here, one per line "
                                                          "(FILE.SRC-TGT for each of several directions)")
    p.add_argument("--scores", metavar="FILE", help="also write the scores and settings as JSON here (and "
                                                    "each direction's under \"directions\")")
    p.add_argument("--hypotheses", metavar="FILE",
                   help="score this file of translations instead of translating")
    p.add_argument("--sweep", action="store_true",
                   help="choose the search settings on this set, which should be a validation set, never "
                        "the test set: translate it with every --sweep-beams size and --sweep-penalties "
                        "length penalty, and keep the best by BLEU in the checkpoint (decoding.json; a "
                        "multilingual model's for the direction swept), where translating with the model "
                        "(the CLI, the Python API, the server) finds them unless told otherwise")
    p.add_argument("--sweep-beams", type=int_list, default=(4, 8), metavar="B,B,...",
                   help="beam sizes to try (default: 4,8)")
    p.add_argument("--sweep-penalties", type=float_list, default=(0.6, 1.0, 1.4, 1.8, 2.2, 2.6, 3.0),
                   metavar="A,A,...", help="length penalties to try (default: 0.6,1,1.4,1.8,2.2,2.6,3; small "
                                           "models often stop too early, and a larger penalty lengthens)")
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
        args.test = args.test or "multi30k:test_2016_flickr"
        tgt_lang = args.tgt_lang or "de"
        tokenize = _tokenizer(args.tokenize, tgt_lang)
        corpus = load_corpus(args.test, args.src_lang or "en", tgt_lang)
        record = _scored(read_lines(args.hypotheses), corpus, tokenize, {"hypotheses": args.hypotheses})
    elif args.checkpoint and args.sweep:
        record = _swept(translator_for(args), args)
    elif args.checkpoint:
        args.test = args.test or _test_set(args.checkpoint)
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


def _swept(translator, args: argparse.Namespace) -> dict:
    """Choose the beam size and length penalty on the set (--sweep) and keep them in the checkpoint;
    -> the record of every trial."""
    kept = _swept_checkpoint(args.checkpoint, translator, bool(args.src_lang or args.tgt_lang))
    test = args.test or _validation_set(kept)
    tokenize = _tokenizer(args.tokenize, translator.tgt_lang)
    corpus = load_corpus(test, translator.src_lang, translator.tgt_lang)
    print(f"choosing the search settings on {corpus.name} ({len(corpus):,} sentences): beams "
          f"{','.join(map(str, args.sweep_beams))} x length penalties "
          f"{','.join(f'{a:g}' for a in args.sweep_penalties)} ({translator.defaults.penalty_form})")

    def translate(beam: int, penalty: float) -> list[str]:
        return [t.text for t in translator.translate(corpus.source, beam_size=beam, length_penalty=penalty)]

    def say(trial: evaluate.Trial) -> None:
        print(f"  beam {trial.beam_size}, length penalty {trial.length_penalty:g}: BLEU {trial.bleu:.2f}, "
              f"chrF {trial.chrf:.2f}")

    start = time.perf_counter()
    trials = evaluate.sweep(translate, corpus.target, args.sweep_beams, args.sweep_penalties, tokenize, say)
    best = trials[0]
    chosen = {"beam_size": best.beam_size, "length_penalty": best.length_penalty,
              "penalty_form": translator.defaults.penalty_form}
    about = {"on": test, "bleu": best.bleu, "chrf": best.chrf, "tokenize": tokenize,
             "trials": [vars(t) for t in trials]}
    direction = f"{translator.src_lang}-{translator.tgt_lang}" if translator.pairs else None
    where = checkpoint.save_decoding(kept, chosen, about, direction)
    print(f"chose beam {best.beam_size}, length penalty {best.length_penalty:g} (BLEU {best.bleu:.2f} on "
          f"{corpus.name}, {time.perf_counter() - start:.0f} s); kept in {where}, used when translating "
          f"{f'{direction} ' if direction else ''}with this model unless told otherwise")
    return {"test": corpus.name, **chosen, **about}


def _swept_checkpoint(path: str, translator, one_direction: bool) -> Path:
    """The aiayn checkpoint whose search settings a sweep chooses (a run directory's newest)."""
    if translator.model is None or not _aiayn_checkpoint(path):
        raise ConfigError(f"{path}: --sweep keeps its choice in an aiayn checkpoint; this is not one")
    if translator.pairs and not one_direction:
        raise ConfigError("--sweep chooses the settings of one direction of a multilingual model (each "
                          "keeps its own): give it by --src-lang and --tgt-lang")
    return checkpoint.resolve(path)


def _aiayn_checkpoint(path: str) -> bool:
    """Whether `path` is an aiayn checkpoint or run directory (not a Marian or CTranslate2 model)."""
    return checkpoint.is_checkpoint(Path(path)) or bool(checkpoint.step_checkpoints(path))


def _test_set(path: str) -> str:
    """The test set of the corpus an aiayn model was trained on, else multi30k:test_2016_flickr."""
    if _aiayn_checkpoint(path):
        data = checkpoint.data_of(checkpoint.resolve(path))
        if data.train and (test := default_test(data.train[0])):
            return test
    return "multi30k:test_2016_flickr"


def _validation_set(path: Path) -> str:
    """The validation set the model at `path` was trained with, as a spec `load_corpus` reads."""
    data = checkpoint.data_of(path)
    spec = data.valid or default_valid(data.train[0])
    if not spec or Path(spec, "corpus.json").exists():  # none, or tokenized by `aiayn prepare`: no text
        raise ConfigError(f"{path} keeps no validation text to choose the search settings on: give "
                          "--test SPEC (a validation set, not the test set)")
    return spec


def int_list(text: str) -> tuple[int, ...]:
    """argparse type: positive integers joined by commas (4,6)."""
    try:
        values = tuple(int(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not integers joined by commas (4,6)") from None
    if min(values) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: every beam size is at least 1")
    return values


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
    loops = sum(evaluate.looping(h, tokenize) for h in hypotheses)
    print("\n".join(scores.lines()))
    hint = "; --no-repeat-ngram-size or --repetition-penalty keep a search out of them" if loops else ""
    print(f"repetition loops: {loops} of {len(hypotheses):,} translations (1 to 3 words, 4 or more times "
          f"in a row){hint}")
    return {"test": corpus.name, **vars(scores), "loops": loops, **settings}


def _tokenizer(choice: str, tgt_lang: str) -> str:
    """The BLEU tokeniser to use, checked to run here."""
    tokenize = evaluate.tokenizer_for(tgt_lang) if choice == "auto" else choice
    evaluate.bleu_metric(tokenize)
    return tokenize
