"""Argos Translate packages: `aiayn export argos` writes a .argosmodel that argostranslate (PyPI)
installs and translates with exactly as aiayn does, without a network."""

import json
import os
import subprocess
import sys
import zipfile

import pytest

pytest.importorskip("argostranslate")
pytest.importorskip("spacy")

from aiayn.cli import main  # noqa: E402
from aiayn.data.corpora import load_corpus  # noqa: E402
from aiayn.interop import ConversionError, argos  # noqa: E402
from aiayn.tokenizer import Tokenizer  # noqa: E402
from aiayn.translation import load_translator  # noqa: E402
from tests.conftest import HANG_S  # noqa: E402

# Installs the package given, then translates the JSON list of texts on stdin from en to de.
ARGOS = """
import json, sys
from pathlib import Path
from argostranslate import package, translate
package.install_from_path(Path(sys.argv[1]))
translation = translate.get_translation_from_codes("en", "de")
print(json.dumps([translation.translate(text) for text in json.load(sys.stdin)]))
"""


@pytest.fixture(scope="module", params=["aiayn", "marian"])
def package(trained_run, tmp_path_factory, request):
    """The package of `trained_run`, or of the Marian directory it converts to (one vocabulary, its
    own ids): the path from an OPUS-MT-format model to LibreTranslate."""
    model, out = trained_run, tmp_path_factory.mktemp("argos") / "en_de.argosmodel"
    if request.param == "marian":
        pytest.importorskip("transformers")
        model = out.parent / "marian"
        assert main(["convert", "to-marian", str(trained_run), str(model)]) == 0
    assert main(["export", "argos", str(model), str(out)]) == 0
    return out


def argos_translate(package, texts, home) -> list[str]:
    """`texts` translated by argostranslate in a process of its own, its data and caches in `home`,
    sentences split by the package's spaCy pipeline, float32 (its default "auto" is int8 on CPUs)."""
    env = {**os.environ, "HOME": str(home), "XDG_DATA_HOME": str(home / "data"),
           "XDG_CACHE_HOME": str(home / "cache"), "ARGOS_CHUNK_TYPE": "SPACY",
           "ARGOS_COMPUTE_TYPE": "float32"}
    done = subprocess.run([sys.executable, "-c", ARGOS, str(package)], input=json.dumps(texts), env=env,
                          capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


def test_argostranslate_installs_the_package_and_translates_100_sentences_as_aiayn(package, tmp_path):
    sources = load_corpus("synthetic:reverse:val", "", "").source[:100]
    theirs = argos_translate(package, sources, tmp_path)
    # aiayn on the package's own model/ (a CTranslate2 export): the same engine, so the same numbers
    # on any CPU (aiayn's PyTorch engine equals CTranslate2 token for token: test_ctranslate2.py)
    with zipfile.ZipFile(package) as z:
        z.extractall(tmp_path / "unpacked")
    model = tmp_path / "unpacked" / "translate-en_de-1_0" / "model"
    aiayn = load_translator(model, beam_size=argos.BEAM_SIZE, length_penalty=argos.LENGTH_PENALTY,
                            compute_type="float32")
    assert theirs == [t.text for t in aiayn.translate(sources)]
    assert sum(out == " ".join(reversed(s.split())) for s, out in zip(sources, theirs, strict=True)) >= 80
    installed = list((tmp_path / "data" / "argos-translate" / "packages").iterdir())
    assert [p.name for p in installed] == ["translate-en_de-1_0"]


def test_the_package_holds_what_argostranslate_reads(package, trained_run):
    with zipfile.ZipFile(package) as z:
        names = z.namelist()
        assert {n.split("/")[0] for n in names} == {"translate-en_de-1_0"}
        metadata = json.loads(z.read("translate-en_de-1_0/metadata.json"))
        tokenizer = z.read("translate-en_de-1_0/sentencepiece.model")
    assert {"translate-en_de-1_0/model/model.bin", "translate-en_de-1_0/spacy/config.cfg",
            "translate-en_de-1_0/README.md"} <= set(names)
    assert metadata == {
        "package_version": "1.0", "argos_version": "1.0", "type": "translate", "from_code": "en",
        "from_name": "English", "to_code": "de", "to_name": "German", "links": []}
    assert Tokenizer(tokenizer) == Tokenizer.load(trained_run / "checkpoints" / "step_00000600")


def test_export_refuses_other_files_names_and_models_in_one_line(trained_run, separate_model, tmp_path,
                                                                 capsys):
    notes = tmp_path / "notes.argosmodel"
    notes.write_text("mine")
    assert main(["export", "argos", str(trained_run), str(notes)]) == 2
    assert "exists and is not an Argos Translate package" in capsys.readouterr().err
    assert notes.read_text() == "mine"
    assert main(["export", "argos", str(trained_run), str(tmp_path / "en_de.zip")]) == 2
    assert "name ends in .argosmodel" in capsys.readouterr().err
    assert not (tmp_path / "en_de.zip").exists()
    model, tokenizer, _ = separate_model
    with pytest.raises(ConversionError, match="one SentencePiece model for both languages"):
        argos.export(model, tokenizer, tmp_path / "separate.argosmodel", ("en", "de"))
    assert main(["export", "argos", str(trained_run), str(notes), "--force"]) == 0
    assert argos.is_package(notes)


# Installs every package given, then translates the JSON list of texts on stdin into each target.
ARGOS_EACH = """
import json, sys
from pathlib import Path
from argostranslate import package, translate
for path in sys.argv[1:]:
    package.install_from_path(Path(path))
texts, out = json.load(sys.stdin), {}
for pkg in package.get_installed_packages():
    translation = translate.get_translation_from_codes(pkg.from_code, pkg.to_code)
    out[f"{pkg.from_code}-{pkg.to_code}"] = [translation.translate(text) for text in texts]
print(json.dumps(out))
"""


def test_a_multilingual_model_exports_one_package_per_direction_that_argos_translates_as_aiayn(
        data_dir, tmp_path):
    """--language-token target: each package is the whole model with its direction's piece as the
    target prefix, which Argos Translate gives CTranslate2 to start the decoder with."""
    from tests.conftest import multiway_files

    corpus, run, out = str(multiway_files(tmp_path / "valid")), tmp_path / "run", tmp_path / "packages"
    assert main(["train", "--preset", "tiny", "--vocab-size", "700", "--batch-tokens", "1024",
                 "--threads", "1", "--train", corpus, "--valid", corpus, "--pairs", "en-de,en-cs",
                 "--language-token", "target", "--max-steps", "2", "--save-every", "0",
                 "--out", str(run)]) == 0
    assert main(["export", "argos", str(run), str(out)]) == 0
    packages = sorted(out.iterdir())
    assert [p.name for p in packages] == ["en_cs.argosmodel", "en_de.argosmodel"]
    with zipfile.ZipFile(packages[0]) as z:
        assert json.loads(z.read("translate-en_cs-1_0/metadata.json"))["target_prefix"] == ">>cs<<"
    sources = load_corpus(corpus, "en", "de").source[:10]
    env = {**os.environ, "HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data"),
           "XDG_CACHE_HOME": str(tmp_path / "cache"), "ARGOS_CHUNK_TYPE": "SPACY",
           "ARGOS_COMPUTE_TYPE": "float32"}
    done = subprocess.run([sys.executable, "-c", ARGOS_EACH, *map(str, packages)], input=json.dumps(sources),
                          env=env, capture_output=True, text=True, timeout=HANG_S)
    assert done.returncode == 0, done.stderr[-3000:]
    theirs = json.loads(done.stdout)
    for tgt, package in zip(("cs", "de"), packages, strict=True):  # aiayn on the package's own model/
        with zipfile.ZipFile(package) as z:
            z.extractall(tmp_path / "unpacked")
        model = tmp_path / "unpacked" / f"translate-en_{tgt}-1_0" / "model"
        ours = load_translator(model, tgt_lang=tgt, beam_size=argos.BEAM_SIZE, compute_type="float32",
                               length_penalty=argos.LENGTH_PENALTY, max_output_len=256)  # CTranslate2's
        assert (ours.pairs, ours.start) == ((f"en-{tgt}",), ours.tokenizer.language_id(tgt))
        assert theirs[f"en-{tgt}"] == [t.text for t in ours.translate(sources)]
