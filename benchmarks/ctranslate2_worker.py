"""Times CTranslate2 in a process of its own, for `decode_speed.py`.

CTranslate2 reads its CPU settings once, when its library loads: the GEMM backend (`CT2_USE_MKL`)
and how its OpenMP threads wait for work (`OMP_WAIT_POLICY`). On a small virtual machine these
settings change its speed several times over, so `decode_speed.py` starts this script once per
setting, with that setting in the environment, and keeps the fastest. A process of its own also
keeps CTranslate2's OpenMP threads (its own libgomp) from competing with PyTorch's.

Reads a JSON request on stdin: {"model": directory, "device": "cpu" or "cuda", "threads": n,
"beam": k, "new_tokens": n, "compute_types": [...], "batches": [[[piece, ...], ...], ...]}.
Writes a JSON answer on stdout: {compute_type: {"times": [seconds per batch], "memory": "..."}}.
"""

from __future__ import annotations

import json
import sys

import ctranslate2
import torch
from common import PeakMemory, batch_times


def translate(translator: ctranslate2.Translator, beam: int, new_tokens: int):
    """A function translating one batch of pieces, every output exactly `new_tokens` long."""
    def run(batch: list[list[str]]) -> object:
        return translator.translate_batch(batch, beam_size=beam, max_batch_size=len(batch),
                                          max_decoding_length=new_tokens, min_decoding_length=new_tokens)

    return run


def main() -> None:
    request = json.load(sys.stdin)
    answer = {}
    for compute_type in request["compute_types"]:
        translator = ctranslate2.Translator(request["model"], device=request["device"],
                                            compute_type=compute_type, intra_threads=request["threads"])
        with PeakMemory() as memory:
            times = batch_times(translate(translator, request["beam"], request["new_tokens"]),
                                request["batches"], torch.device(request["device"]))
        answer[compute_type] = {"times": times, "memory": str(memory)}
        del translator
    json.dump(answer, sys.stdout)


if __name__ == "__main__":
    main()
