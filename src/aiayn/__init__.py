"""aiayn: the Transformer of "Attention Is All You Need" for neural machine translation.

    import aiayn

    translator = aiayn.load_translator("runs/quickstart")   # a checkpoint, Marian or CTranslate2 model
    print(translator.translate(["A dog runs on the beach."])[0].text)

The public API: `load_translator`, `Translator`, `Translation` and `load_model` (translation/);
`train_model` and `TrainingRun` (training.py); the model and its configs (`Transformer`,
`ModelConfig`, `DataConfig`, `TrainConfig`, `DecodeConfig`); `Tokenizer`; and `AiaynError`, the
base of every expected failure. Names are imported when first used, so `import aiayn` stays cheap.
"""

from importlib import import_module

__version__ = "0.1.0"

_EXPORTS = {
    "load_translator": "aiayn.translation", "load_model": "aiayn.translation",
    "Translator": "aiayn.translation", "Translation": "aiayn.translation",
    "train_model": "aiayn.training", "TrainingRun": "aiayn.training",
    "Transformer": "aiayn.model", "ModelConfig": "aiayn.config", "DataConfig": "aiayn.config",
    "TrainConfig": "aiayn.config", "DecodeConfig": "aiayn.config", "Tokenizer": "aiayn.tokenizer",
    "AiaynError": "aiayn.errors",
}
__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str):
    if name in _EXPORTS:
        return getattr(import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'aiayn' has no attribute {name!r}")
