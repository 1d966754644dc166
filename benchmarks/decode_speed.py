"""Decoding speed, side by side in one run: aiayn (float32, int8 and bfloat16) against HuggingFace
MarianMTModel.generate and CTranslate2 (float32 and int8), greedy and beam 4, on the first 1,000
sentences of Multi30k test_2016_flickr (en) in batches of 32, every output forced to exactly 32
new tokens. (bfloat16 pays on CPUs with AMX or AVX512-BF16 units; on others it can be slower.)

All systems run the same weights (one random model, converted exactly), and eos is made
impossible by a -1e4 logit bias, so every system does 32 decoder steps per sentence and the
same work. Tokens/s counts output tokens (32 per sentence, whatever the beam), from the median
batch time.

    python benchmarks/decode_speed.py                  # small preset, all systems, a few minutes
    python benchmarks/decode_speed.py --record         # also append to benchmarks/RESULTS.md
    python benchmarks/decode_speed.py --smoke          # seconds: keeps the script working (CI)
    python benchmarks/decode_speed.py --device cuda    # on a GPU (no int8 there)
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from collections.abc import Callable

import torch
from common import (
    CPU,
    PeakMemory,
    machine,
    matmul_peak_gflops,
    peak_matrix_size,
    record,
    synchronize,
    training_data,
)
from common import parser as benchmark_parser

from aiayn.config import model_config
from aiayn.data.batching import pad
from aiayn.data.corpora import load_corpus
from aiayn.decoding import beam_search, greedy_search, max_output_lengths
from aiayn.inference import pack_for_cpu, packing_available, quantize_int8
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer

NO_EOS = -1e4  # logit bias that makes eos (practically) impossible


def batch_times(run: Callable[[torch.Tensor], object], batches: list[torch.Tensor],
                device: torch.device) -> list[float]:
    run(batches[0])  # warm-up
    times = []
    for src in batches:
        start = time.perf_counter()
        run(src)
        synchronize(device)
        times.append(time.perf_counter() - start)
    return times


def systems(model: Transformer, tokenizer: Tokenizer, new_tokens: int, beam: int, workdir: str,
            include: set[str], device: torch.device = CPU) -> dict[str, Callable[[torch.Tensor], object]]:
    """name -> function translating one (B, S) batch of ids with exactly `new_tokens` output steps.

    `model` is on the CPU, the batches on `device`; int8 (dynamic quantization) is for CPUs only."""
    c = model.config
    cap = new_tokens - 1  # aiayn's beam search: cap tokens, then the forced eos: new_tokens steps
    run: dict[str, Callable[[torch.Tensor], object]] = {}
    if device.type == "cpu":  # as `aiayn translate` runs there: packed weights where PyTorch has them
        ours = [(name, pack_for_cpu(model, t) if packing_available(t) else copy.deepcopy(model).to(t))
                for name, t in (("aiayn", torch.float32), ("aiayn bfloat16", torch.bfloat16))]
        ours.insert(1, ("aiayn int8", quantize_int8(model)))
    else:
        on_device = copy.deepcopy(model).to(device)
        ours = [("aiayn", on_device), ("aiayn bfloat16", copy.deepcopy(on_device).to(torch.bfloat16))]
    for name, m in ours:
        if beam == 1:
            run[name] = lambda src, m=m: greedy_search(m, src,
                                                       max_output_lengths(src, c.pad_id, fixed=new_tokens))
        else:
            run[name] = lambda src, m=m: beam_search(m, src, beam, 1, 0.6, "plain",
                                                     max_output_lengths(src, c.pad_id, fixed=cap))
    if "huggingface" in include:
        from aiayn.interop.marian import to_marian

        hf = to_marian(model).to(device)
        never = [[c.pad_id], [c.bos_id]]

        def generate(src: torch.Tensor) -> object:
            with torch.no_grad():
                # eos cannot win before the last step, where Marian's forced eos ends the output
                return hf.generate(input_ids=src, attention_mask=(src != c.pad_id).long(), num_beams=beam,
                                   do_sample=False, max_new_tokens=new_tokens, bad_words_ids=never,
                                   early_stopping=True)

        run["huggingface"] = generate
    if "ctranslate2" in include:
        import ctranslate2

        from aiayn.interop.ctranslate2 import export

        path = export(model, tokenizer, f"{workdir}/ct2")
        for compute_type in ("float32", "int8"):
            translator = ctranslate2.Translator(str(path), device=device.type, compute_type=compute_type,
                                                intra_threads=torch.get_num_threads())

            def translate(src: torch.Tensor, translator=translator) -> object:
                pieces = [tokenizer.pieces([t for t in row if t not in (c.pad_id, c.eos_id)])
                          for row in src.tolist()]
                return translator.translate_batch(pieces, beam_size=beam, max_decoding_length=new_tokens,
                                                  min_decoding_length=new_tokens, max_batch_size=len(pieces))

            run[f"ctranslate2 {compute_type}"] = translate
    return run


def decode_flops(config, batches: list[torch.Tensor], beam: int, new_tokens: int) -> float:
    """2 x weights x the tokens they process: the encoder and the cross-attention keys and values
    once per source token, every decoder layer and the output projection once per output token of
    every beam. Attention scores are left out (small at these lengths)."""
    d, f, v = config.d_model, config.d_ff, config.vocab_size
    encoder, cross_kv = (4 * d * d + 2 * d * f) * config.n_encoder_layers, 2 * d * d * config.n_decoder_layers
    per_source_token = 2 * (encoder + cross_kv)
    per_output_token = 2 * ((6 * d * d + 2 * d * f) * config.n_decoder_layers + v * d)
    return sum(per_source_token * src.numel() + per_output_token * src.size(0) * beam * new_tokens
               for src in batches)


def main() -> None:
    parser = benchmark_parser(__doc__)
    parser.add_argument("--preset", default="small", help="model preset (default: small)")
    parser.add_argument("--sentences", type=int, default=1000, help="sentences of test_2016_flickr")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch")
    parser.add_argument("--new-tokens", type=int, default=32, help="output tokens per sentence")
    parser.add_argument("--systems", nargs="+", default=["huggingface", "ctranslate2"],
                        help="peers to compare with (default: huggingface ctranslate2)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (default: cpu)")
    args = parser.parse_args()

    corpus, tokenizer = training_data(args.smoke)
    if args.smoke:
        preset, sentences, new_tokens, lines = "tiny", 64, 8, corpus.source
    else:
        preset, sentences, new_tokens = args.preset, args.sentences, args.new_tokens
        lines = load_corpus("multi30k:test_2016_flickr", "en", "de").source
    lines = lines[:sentences]
    ids = [s + [tokenizer.eos_id] for s in tokenizer.encode(lines)]
    batches = [pad(ids[start:start + args.batch_size], tokenizer.pad_id)
               for start in range(0, len(ids), args.batch_size)]

    torch.manual_seed(0)
    model = Transformer(model_config(preset, vocab_size=tokenizer.vocab_size, output_bias=True)).eval()
    with torch.no_grad():
        model.output_proj.bias[tokenizer.eos_id] = NO_EOS
    device = torch.device(args.device)
    batches = [b.to(device) for b in batches]
    size = peak_matrix_size(device)
    peak = matmul_peak_gflops(size, device=device)
    print(f"{machine(device)}\nfloat32 matmul peak: {peak:,.0f} GFLOP/s; {len(lines)} sentences in "
          f"batches of {args.batch_size}, {new_tokens} new tokens each")
    rows = ["| search | system | output tokens/s | model GFLOP/s (share of float32 peak) "
            "| aiayn float32 speed relative to it | aiayn int8 relative to it "
            "| aiayn bfloat16 relative to it | peak memory |",
            "|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as workdir:
        for beam in (1, 4):
            run = systems(model, tokenizer, new_tokens, beam, workdir, set(args.systems), device)
            gflop = decode_flops(model.config, batches, beam, new_tokens) / 1e9
            speed, memory = {}, {}
            for name, fn in run.items():
                with PeakMemory(device) as memory[name]:
                    seconds = statistics.median(batch_times(fn, batches, device))
                speed[name] = args.batch_size * new_tokens / seconds
            search = "greedy" if beam == 1 else f"beam {beam}"
            for name, tokens_per_s in speed.items():
                flops = gflop * tokens_per_s / (len(lines) * new_tokens)  # GFLOP/s
                relative = [f"{speed[ours] / tokens_per_s:.2f}x" if ours != name and ours in speed else ""
                            for ours in ("aiayn", "aiayn int8", "aiayn bfloat16")]
                rows.append(f"| {search} | {name} | {tokens_per_s:,.0f} | {flops:.1f} ({flops / peak:.0%}) | "
                            f"{' | '.join(relative)} | {memory[name]} |")
                print(rows[-1])
    if args.record and not args.smoke:
        record(f"Decoding speed ({preset}): aiayn vs HuggingFace and CTranslate2", "\n".join(rows),
               f"Matmul peak measured in the same run: {peak:,.0f} GFLOP/s (float32, {size}^3). Peak memory: "
               "the process's peak resident memory (on a GPU: PyTorch's peak allocation there) while the "
               "system ran, reset before each (in brackets: the growth over the memory held when it began).",
               device)


if __name__ == "__main__":
    main()
