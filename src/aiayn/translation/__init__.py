"""The public translation API: load any model aiayn reads, and translate text with it.

    import aiayn

    translator = aiayn.load_translator("runs/quickstart")
    for translation in translator.translate(["A dog runs on the beach."], beam_size=4):
        print(translation.text, translation.score)

`load_translator` recognises what a path holds (an aiayn checkpoint or run directory, a
HuggingFace Marian directory, or a CTranslate2 export), loads it on a device and chooses how it
computes (`prepare`: dtype, int8, a compiled decoder step, and on a CPU weights packed for the
matmul kernels). A `Translator` translates a list of sentences (`translate`) or a stream of lines
of any length, holding only a chunk at a time (`translate_stream`); search options are the
fields of `DecodeConfig`. The command line, the benchmarks and the server load models for
translation only through this module.
"""

from aiayn.decoding.constrained import Steer
from aiayn.decoding.translator import Translation, whole_text
from aiayn.translation.attention import AttentionView, alignment, attention_view
from aiayn.translation.loading import (
    DTYPES,
    ENGINES,
    LoadedModel,
    load_model,
    load_translator,
    max_source_len,
    model_format,
    prepare,
)
from aiayn.translation.translator import CHUNK, CONFIGS, FIRST_CHUNK, Engine, Layout, Segments, Translator

__all__ = ["CHUNK", "CONFIGS", "DTYPES", "ENGINES", "FIRST_CHUNK", "AttentionView", "Engine", "Layout",
           "LoadedModel", "Segments", "Steer", "Translation", "Translator", "alignment", "attention_view",
           "load_model", "load_translator", "max_source_len", "model_format", "prepare", "whole_text"]
