import io
import json
import os
import subprocess
import sys

import pytest
import torch

from aiayn import checkpoint
from aiayn.cli import main
from aiayn.data.corpora import load_corpus
from aiayn.translation import load_translator
from tests.conftest import TRAINED_STEPS


def test_python_dash_m_runs_the_cli():
    out = subprocess.run([sys.executable, "-m", "aiayn", "--help"], capture_output=True, text=True,
                         check=True)
    for command in ("info", "prepare", "train", "translate"):
        assert command in out.stdout


@pytest.mark.parametrize("unbuffered", ["", "1"])
def test_output_into_a_pipe_whose_reader_has_gone_stops_quietly(tmp_path, unbuffered):
    """`aiayn ... | head`: the first write fails (the read end is closed before the command starts)
    and the command ends as a writer killed by SIGPIPE would, with nothing on stderr, whether its
    output is buffered (written when flushed) or not."""
    read, write = os.pipe()
    os.close(read)
    env = {**{k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"},
           "AIAYN_CACHE_DIR": str(tmp_path), **({"PYTHONUNBUFFERED": "1"} if unbuffered else {})}
    done = subprocess.run([sys.executable, "-m", "aiayn", "cache", "info"], stdout=write,
                          stderr=subprocess.PIPE, text=True, env=env, timeout=120)
    os.close(write)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize("argv, environ, expected", [
    (["aiayn", "serve", "run"], {}, "10000"),
    (["aiayn", "translate", "run"], {}, None),
    (["aiayn", "serve", "run"], {"GOMP_SPINCOUNT": "300000"}, "300000"),  # the operator's own
    (["aiayn", "serve", "run"], {"OMP_WAIT_POLICY": "active"}, None),
])
def test_the_server_s_openmp_threads_spin_briefly_unless_the_operator_says(argv, environ, expected):
    from aiayn.cli import _server_threads_spin_briefly

    _server_threads_spin_briefly(argv, environ)
    assert environ.get("GOMP_SPINCOUNT") == expected


def test_aiayn_serve_sets_the_spin_count_before_torch_loads_openmp():
    code = """if True:
        import os, sys
        class Watch:  # prints the setting when torch (and with it libgomp) starts to load
            def find_spec(self, name, path=None, target=None):
                if name == "torch":
                    print(os.environ.get("GOMP_SPINCOUNT"))
                    sys.meta_path.remove(self)
        sys.meta_path.insert(0, Watch())
        sys.argv = ["aiayn", "serve"]
        import aiayn.cli
    """
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.split() == ["10000"]


def test_the_command_line_starts_without_matplotlib():
    """Only `aiayn plot`, `attention` and `experiments` draw: matplotlib (half a second to import) is
    loaded by them, not by every command's parser."""
    code = """if True:
        import sys
        from aiayn.cli import build_parser
        build_parser().parse_args(["translate", "run", "a sentence"])
        print(sorted(m for m in sys.modules if m.split(".")[0] == "matplotlib"))
    """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_info_prints_parameter_counts_per_part(capsys):
    assert main(["info", "--preset", "small", "--vocab-size", "8000"]) == 0
    out = capsys.readouterr().out
    assert "d_model              256" in out
    for part, count in (("source embedding", "2,048,000"), ("encoder", "2,369,280"),
                        ("decoder", "3,160,320"), ("total", "7,577,600")):
        assert part in out and count in out
    assert "tied to target embedding" in out


def test_every_train_option_has_help():
    from aiayn.cli import build_parser

    train = build_parser()._subparsers._group_actions[0].choices["train"]
    for action in train._actions:
        assert action.help, action.dest


def test_unknown_option_is_an_error(capsys):
    with pytest.raises(SystemExit) as e:
        main(["train", "--out", "x", "--d-modle", "4"])
    assert e.value.code == 2
    assert "unrecognized arguments: --d-modle" in capsys.readouterr().err


def test_train_translate_resume_and_their_errors(tmp_path, capsys):
    run = tmp_path / "run"
    common = ["--train", "synthetic:reverse", "--batch-tokens", "512", "--warmup-steps", "20",
              "--valid-every", "5", "--save-every", "5", "--log-every", "5"]
    assert main(["train", "--preset", "tiny", "--out", str(run), "--max-steps", "5", *common]) == 0
    out = capsys.readouterr().out
    assert "20,000 of 20,000 pairs kept" in out and "padding" in out and "step 5 | valid loss" in out
    assert main(["train", "--preset", "tiny", "--out", str(run), *common]) == 2
    assert "already holds checkpoints" in capsys.readouterr().err
    assert main(["train", "--out", str(run), "--resume", "--d-model", "32"]) == 2
    assert "cannot change d_model" in capsys.readouterr().err
    assert main(["train", "--out", str(run), "--resume", "--max-steps", "10"]) == 0
    assert checkpoint.resolve(run).name == "step_00000010"
    assert (run / "metrics.jsonl").read_text().count('"kind": "valid"') == 2

    capsys.readouterr()
    assert main(["translate", str(run), "a b c", "", "d e"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == ""  # three outputs, the empty one empty


def test_missing_data_file_is_reported_without_a_traceback(tmp_path, capsys):
    missing = str(tmp_path / "none")
    code = main(["train", "--preset", "tiny", "--out", str(tmp_path / "r"), "--train", missing])
    assert code == 2
    assert "none.en: no such file" in capsys.readouterr().err


def test_training_scores_validation_bleu_and_keeps_the_best_checkpoint(trained_run, capsys):
    records = [json.loads(line) for line in (trained_run / "metrics.jsonl").read_text().splitlines()]
    bleu = [r for r in records if r["kind"] == "bleu"]
    assert [r["step"] for r in bleu] == [TRAINED_STEPS // 2, TRAINED_STEPS]
    best = max(bleu, key=lambda r: r["bleu"])
    assert checkpoint.load(trained_run / "checkpoints" / "best").step == best["step"]
    assert checkpoint.resolve(trained_run).name == f"step_{TRAINED_STEPS:08d}"  # "best" is not the newest


def test_translate_reads_stdin_and_keeps_empty_lines(trained_run, capsys, monkeypatch):
    assert main(["translate", str(trained_run), "a b c", "d e f g", "--beam-size", "1"]) == 0
    from_arguments = capsys.readouterr().out.splitlines()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"a b c\n\nd e f g\n")))
    assert main(["translate", str(trained_run), "--beam-size", "1"]) == 0
    lines = capsys.readouterr().out.split("\n")
    assert len(lines) == 4 and lines[3] == ""  # three lines, each ended by a newline
    assert [lines[0], lines[2]] == from_arguments and lines[1] == ""


def test_options_may_come_between_the_checkpoint_and_the_sentences(trained_run, capsys):
    assert main(["translate", str(trained_run), "--beam-size", "1", "a b c", "d e f g"]) == 0
    intermixed = capsys.readouterr().out
    assert main(["translate", str(trained_run), "a b c", "d e f g", "--beam-size", "1"]) == 0
    assert intermixed == capsys.readouterr().out and len(intermixed.splitlines()) == 2
    with pytest.raises(SystemExit):
        main(["translate", str(trained_run), "--beam-size", "1", "a b c", "--no-such-option"])
    assert "unrecognized arguments: --no-such-option" in capsys.readouterr().err


def test_translate_nbest_writes_the_moses_format_best_first(trained_run, capsys):
    assert main(["translate", str(trained_run), "a b c", "q r", "--beam-size", "3", "--nbest", "3"]) == 0
    rows = [line.split(" ||| ") for line in capsys.readouterr().out.splitlines()]
    assert [r[0] for r in rows] == ["0", "0", "0", "1", "1", "1"]
    for first in (0, 3):
        scores = [float(r[2]) for r in rows[first:first + 3]]
        assert scores == sorted(scores, reverse=True)


def test_translate_in_bfloat16_and_its_errors(trained_run, capsys):
    assert main(["translate", str(trained_run), "a b c", "d e f g", "--dtype", "bfloat16"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 2
    assert main(["translate", str(trained_run), "a b c", "--dtype", "bfloat16", "--int8"]) == 2
    assert "alternatives" in capsys.readouterr().err


def test_translate_compiled_gives_the_translations_of_eager_search(trained_run, compiled_cache, capsys):
    """Beam search of one sentence at a time (--batch-size 1): its whole search as one graph, which
    tests/serve/test_warm_up.py shares (an int8 model searches on its steps: the test below; batches
    against eager, in tests/decoding)."""
    sentences = ["a b c", "d e f g h i"]
    flags = ["--beam-size", "2", "--batch-size", "1"]
    assert main(["translate", str(trained_run), *sentences, *flags, "--compile"]) == 0
    compiled, err = capsys.readouterr()
    assert "did not compile" not in err  # the whole search, not the steps
    assert main(["translate", str(trained_run), *sentences, *flags, "--no-compile"]) == 0
    assert compiled == capsys.readouterr().out and len(compiled.splitlines()) == 2


def test_translate_int8_compiled_gives_the_float_translations_of_a_confident_model(
        trained_run, compiled_cache, capsys):
    """An int8 model compiled, one sentence at a time: its compiled steps (faster for int8 than the
    whole search as one graph, which float models use; decoding/whole.py)."""
    sentences = ["a b c", "d e f g h i"]
    flags = ["--beam-size", "2", "--batch-size", "1"]
    assert main(["translate", str(trained_run), *sentences, *flags, "--int8", "--compile"]) == 0
    int8 = capsys.readouterr().out
    assert main(["translate", str(trained_run), *sentences, *flags, "--no-compile"]) == 0
    assert int8 == capsys.readouterr().out and len(int8.splitlines()) == 2
    # compiled before: --int8 alone is compiled too; int8 itself is never chosen without --int8
    assert "int8 compiled" in load_translator(trained_run, int8=True).description
    assert "int8" not in load_translator(trained_run).description


@pytest.mark.parametrize("options, message", [
    (["--engine", "ctranslate2", "--int8"], "--int8 is for --engine pytorch"),
    (["--engine", "ctranslate2", "--dtype", "bfloat16"], "--dtype bfloat16 is for --engine pytorch"),
    (["--engine", "pytorch", "--compute-type", "int8"], "--compute-type int8 is for --engine ctranslate2"),
    (["--engine", "ctranslate2", "--penalty-form", "gnmt"], "--penalty-form gnmt is for --engine pytorch"),
    (["--engine", "ctranslate2", "--compile", "--beam-size", "1"], "--compile is for --engine pytorch"),
])
def test_options_of_the_other_engine_are_errors(tmp_path, capsys, options, message):
    assert main(["translate", str(tmp_path), "a b c", *options]) == 2  # before anything is loaded
    assert message in capsys.readouterr().err


def test_translations_do_not_depend_on_the_batching(trained_run, tmp_path):
    lines = load_corpus("synthetic:reverse:val", "", "").source[:120]
    lines[5] = ""
    (tmp_path / "in.txt").write_text("\n".join(lines) + "\n")
    outputs = []
    for batching in (["--batch-size", "1"], ["--batch-size", "7"], ["--batch-size", "64"],
                     ["--batch-size", "100", "--batch-by", "tokens"]):
        out = tmp_path / f"out{len(outputs)}.txt"
        assert main(["translate", str(trained_run), "-i", str(tmp_path / "in.txt"), "-o", str(out),
                     *batching]) == 0
        outputs.append(out.read_text().split("\n"))
    assert len(outputs[0]) == 121 and outputs[0][5] == ""
    assert all(o == outputs[0] for o in outputs)


def test_an_input_longer_than_any_training_sentence_translates(trained_run, capsys):
    long_sentence = " ".join("abcdefghij"[i % 10] for i in range(300))  # training sentences: <= 10 symbols
    assert main(["translate", str(trained_run), long_sentence, "--beam-size", "2"]) == 0
    assert len(capsys.readouterr().out.splitlines()) == 1


def test_evaluate_scores_match_sacrebleus_own_command(tmp_path, capsys):
    refs = ["Ein Hund rennt über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest ein Buch."]
    hyps = ["Ein Hund läuft über die Wiese.", "Zwei Männer spielen Fußball.", "Eine Frau liest."]
    (tmp_path / "src.en").write_text("a\nb\nc\n")
    (tmp_path / "ref.de").write_text("\n".join(refs) + "\n")
    (tmp_path / "hyp.de").write_text("\n".join(hyps) + "\n")
    test = f"{tmp_path / 'src.en'},{tmp_path / 'ref.de'}"
    assert main(["evaluate", "--test", test, "--hypotheses", str(tmp_path / "hyp.de"),
                 "--scores", str(tmp_path / "s.json")]) == 0
    printed = capsys.readouterr().out
    command = [sys.executable, "-m", "sacrebleu", str(tmp_path / "ref.de"), "-i", str(tmp_path / "hyp.de"),
               "-m", "bleu", "chrf", "-b", "-w", "2"]
    theirs = subprocess.run(command, capture_output=True, text=True, check=True)
    their_bleu, their_chrf = (f"{x:.2f}" for x in json.loads(theirs.stdout))
    assert f"BLEU = {their_bleu}  nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:" in printed
    assert f"chrF2 = {their_chrf}  nrefs:1|case:mixed|eff:yes|nc:6|nw:0|space:no|version:" in printed
    saved = json.loads((tmp_path / "s.json").read_text())
    assert round(saved["bleu"], 2) == float(their_bleu)


def test_evaluate_translates_writes_hypotheses_and_scores_them(trained_run, tmp_path, capsys):
    hyp, scores = tmp_path / "hyp.txt", tmp_path / "scores.json"
    assert main(["evaluate", str(trained_run), "--test", "synthetic:reverse:val", "--beam-size", "2",
                 "-o", str(hyp), "--scores", str(scores), "--device", "cpu", "--no-compile"]) == 0
    assert "500 sentences" in capsys.readouterr().out
    written = hyp.read_text().splitlines()
    assert len(written) == 500
    from aiayn.evaluate import score

    record = json.loads(scores.read_text())
    assert record["bleu"] == score(written, load_corpus("synthetic:reverse:val", "", "").target).bleu
    assert record["beam_size"] == 2 and record["test"] == "synthetic:reverse:val"
    from aiayn.inference import packing_available

    if packing_available(torch.float32):  # eager float32 on the CPU translates with packed linear maps
        assert record["device"].startswith("pytorch float32 packed on cpu")


def test_evaluate_scores_the_test_set_of_the_models_training_corpus_by_default(trained_run, tmp_path):
    """trained on synthetic:reverse: its test split (tatoeba-zh: tatoeba-zh:test); a model that names
    none: multi30k:test_2016_flickr."""
    scores = tmp_path / "scores.json"
    assert main(["evaluate", str(trained_run), "--beam-size", "1", "--scores", str(scores), "--device", "cpu",
                 "--no-compile"]) == 0
    assert json.loads(scores.read_text())["test"] == "synthetic:reverse:test"


def test_average_of_checkpoints_is_the_mean_of_their_weights(trained_run, tmp_path, capsys):
    out = tmp_path / "avg"
    assert main(["average", str(trained_run), "--last", "2", "--out", str(out)]) == 0
    steps = checkpoint.step_checkpoints(trained_run)[-2:]
    a, b = (checkpoint.load(p).model.state_dict() for p in steps)
    averaged = checkpoint.load(out)
    assert averaged.state is None
    for name, value in averaged.model.state_dict().items():
        assert torch.allclose(value, (a[name] + b[name]) / 2, atol=1e-6)
    assert main(["average", str(trained_run), "--last", "9", "--out", str(tmp_path / "x")]) == 2
    assert "fewer than --last 9" in capsys.readouterr().err
