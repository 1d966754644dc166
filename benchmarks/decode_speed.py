"""Decoding speed, side by side in one run: aiayn (float32, int8 and bfloat16, and float32 and int8
with its compiled decoder step) against HuggingFace
MarianMTModel.generate and CTranslate2 (float32 and int8), greedy and beam 4, on the first 1,000
sentences of Multi30k test_2016_flickr (en) in batches of 32, every output forced to exactly 32
new tokens. (bfloat16 pays on CPUs with AMX or AVX512-BF16 units; on others it can be slower.)

All systems run the same weights (one random model, converted exactly), and eos is made
impossible by a -1e4 logit bias, so every system does 32 decoder steps per sentence and the
same work. Tokens/s counts output tokens (32 per sentence, whatever the beam), from the median
batch time over 3 rounds; in each round every system translates all batches in turn, so that
drifts in the machine's speed (10% within minutes on shared virtual machines) hit all alike.

CTranslate2 runs in processes of its own (ctranslate2_worker.py), one per CPU setting: MKL or
oneDNN as its GEMM backend; as many threads as PyTorch, with idle OpenMP threads sleeping (its
default) or spinning (OMP_WAIT_POLICY=ACTIVE), or one thread. Each setting is tried on the first
4 batches and the fastest runs them all; its row names it. On small virtual machines the default
can be several times slower than the best (thread wake-ups are slow there), so one fixed setting
would understate CTranslate2.

    python benchmarks/decode_speed.py                  # small preset, all systems, a few minutes
    python benchmarks/decode_speed.py --record         # also append to benchmarks/detail/decode_speed.md
    python benchmarks/decode_speed.py --smoke          # seconds: keeps the script working (CI)
    python benchmarks/decode_speed.py --device cuda    # on a GPU (no int8 there)

With --model RUN (a trained model), it times the real file instead, end to end, text in and text
out, each system in processes of its own (benchmarks/real_file.py): the headline figure.

    python benchmarks/decode_speed.py --model runs/quickstart --record

With --single too, one sentence at a time instead (benchmarks/single_sentence.py): the latency of
`translator.translate([sentence])` in an application, beside CTranslate2's `translate_batch`.

    python benchmarks/decode_speed.py --model runs/quickstart --single --record
"""

from __future__ import annotations

import copy
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path

import real_file
import single_sentence
import torch
from common import (
    CPU,
    PeakMemory,
    batch_times,
    data_dir,
    detail,
    machine,
    matmul_peak_gflops,
    peak_matrix_size,
    record,
    training_data,
)
from common import parser as benchmark_parser

from aiayn.config import model_config
from aiayn.data.batching import pad
from aiayn.data.corpora import load_corpus
from aiayn.decoding import beam_search, greedy_search, max_output_lengths
from aiayn.decoding.compiled import CompiledStep
from aiayn.decoding.steps import Step
from aiayn.model import Transformer
from aiayn.translation import prepare

NO_EOS = -1e4  # logit bias that makes eos (practically) impossible

WORKER = Path(__file__).resolve().parent / "ctranslate2_worker.py"
CT2_SETTINGS = {  # CTranslate2's CPU settings: environment read when its library loads, intra_threads
    "its default": ({}, None),  # MKL on Intel CPUs, oneDNN on others; idle OpenMP threads soon sleep
    "MKL": ({"CT2_USE_MKL": "1"}, None),  # None: as many threads as PyTorch has
    "MKL, OpenMP threads spin": ({"CT2_USE_MKL": "1", "OMP_WAIT_POLICY": "ACTIVE"}, None),
    "MKL, 1 thread": ({"CT2_USE_MKL": "1"}, 1),
    "oneDNN": ({"CT2_USE_MKL": "0"}, None),
    "oneDNN, OpenMP threads spin": ({"CT2_USE_MKL": "0", "OMP_WAIT_POLICY": "ACTIVE"}, None),
    "oneDNN, 1 thread": ({"CT2_USE_MKL": "0"}, 1),
}
PROBE_BATCHES = 4  # batches each CPU setting of CTranslate2 is tried on before the full run


def systems(model: Transformer, new_tokens: int, beam: int, huggingface: bool,
            device: torch.device = CPU, compiled: bool = True) -> dict[str, Callable[[torch.Tensor], object]]:
    """name -> function translating one (B, S) batch of ids with exactly `new_tokens` output steps,
    for the systems that run in this process: aiayn's and HuggingFace's.

    `model` is on the CPU, the batches on `device`; int8 is for CPUs only. Each variant is prepared as
    `aiayn translate` prepares it (`translation.prepare`: packed weights on a CPU, ...). `compiled`:
    also with the compiled decoder step."""
    c = model.config
    cap = new_tokens - 1  # aiayn's beam search: cap tokens, then the forced eos: new_tokens steps
    run: dict[str, Callable[[torch.Tensor], object]] = {}
    variants = [("aiayn", "float32", False, False), ("aiayn compiled", "float32", False, True)]
    if device.type == "cpu":
        variants += [("aiayn int8", "float32", True, False), ("aiayn int8 compiled", "float32", True, True)]
    variants.append(("aiayn bfloat16", "bfloat16", False, False))
    variants = [v for v in variants if compiled or not v[3]]
    ours = [(name, prepare(copy.deepcopy(model).to(device).eval(), device, dtype, int8, compiled)[0])
            for name, dtype, int8, compiled in variants]
    for name, m in ours:
        step = CompiledStep if name.endswith("compiled") else Step  # made per search, as translate does
        if beam == 1:
            run[name] = lambda src, m=m, step=step: greedy_search(
                m, src, max_output_lengths(src, c.pad_id, fixed=new_tokens), step=step(m))
        else:
            run[name] = lambda src, m=m, step=step: beam_search(
                m, src, beam, 1, 0.6, "plain", max_output_lengths(src, c.pad_id, fixed=cap), step=step(m))
    if huggingface:
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
    return run


class CTranslate2Runs:
    """CTranslate2 float32 and int8 for one search, each timed in processes of its own
    (ctranslate2_worker.py), at the setting of CT2_SETTINGS that `choose` finds fastest."""

    compute_types = ("float32", "int8")

    def __init__(self, path: Path, batches: list[list[list[str]]], beam: int, new_tokens: int,
                 device: torch.device) -> None:
        self.path, self.batches, self.device = path, batches, device
        self.beam, self.new_tokens = beam, new_tokens
        self.best = dict.fromkeys(self.compute_types, "its default")  # compute type -> setting

    def choose(self, settings: list[str]) -> None:
        """Each compute type's fastest of `settings`, on the first PROBE_BATCHES batches."""
        if len(settings) == 1:
            self.best = dict.fromkeys(self.compute_types, settings[0])
            return
        probes = {setting: self._worker(setting, self.compute_types, self.batches[:PROBE_BATCHES])
                  for setting in settings}
        for t in self.compute_types:
            self.best[t] = min(settings, key=lambda setting: statistics.median(probes[setting][t]["times"]))

    def run(self) -> dict[str, tuple[list[float], str]]:
        """name -> (seconds per batch, peak memory of its process) over all batches."""
        runs = {}
        for setting in dict.fromkeys(self.best.values()):
            types = [t for t in self.compute_types if self.best[t] == setting]
            for t, answer in self._worker(setting, types, self.batches).items():
                runs[f"ctranslate2 {t} ({setting})"] = (answer["times"], answer["memory"])
        return runs

    def _worker(self, setting: str, types: list[str], batches: list[list[list[str]]]) -> dict:
        setting_env, threads = CT2_SETTINGS[setting]
        request = {"model": str(self.path), "device": self.device.type, "compute_types": list(types),
                   "threads": threads or torch.get_num_threads(), "beam": self.beam,
                   "new_tokens": self.new_tokens, "batches": batches}
        env = {k: v for k, v in os.environ.items() if k not in ("CT2_USE_MKL", "OMP_WAIT_POLICY")}
        done = subprocess.run([sys.executable, str(WORKER)], input=json.dumps(request), capture_output=True,
                              text=True, env=env | setting_env, cwd=WORKER.parent)
        if done.returncode != 0:
            raise RuntimeError(f"{WORKER.name} ({setting}) failed:\n{done.stderr[-2000:]}")
        return json.loads(done.stdout)


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
    parser.add_argument("--rounds", type=int, default=3,
                        help="passes over the batches per system, systems alternating (default: 3)")
    parser.add_argument("--model", metavar="RUN",
                        help="a trained model: translate the real test file end to end with `aiayn "
                             "translate` instead, each system in processes of its own (real_file.py)")
    parser.add_argument("--single", action="store_true",
                        help="with --model: one sentence at a time, beam 4, each system in a process of "
                             "its own (single_sentence.py): its latency")
    args = parser.parse_args()
    if args.single and not args.model:
        parser.error("--single times a trained model: give it with --model RUN")
    if args.model:
        return single_sentence_main(args) if args.single else real_file_main(args)

    corpus, tokenizer = training_data(args.smoke)
    if args.smoke:
        preset, sentences, new_tokens, lines, rounds = "tiny", 64, 8, corpus.source, 1
    else:
        preset, sentences, new_tokens, rounds = args.preset, args.sentences, args.new_tokens, args.rounds
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
    ours = ("aiayn", "aiayn compiled", "aiayn int8", "aiayn int8 compiled", "aiayn bfloat16")
    rows = ["| search | system | output tokens/s | model GFLOP/s (share of float32 peak) "
            "| aiayn float32 speed relative to it | aiayn compiled relative to it "
            "| aiayn int8 relative to it | aiayn int8 compiled relative to it "
            "| aiayn bfloat16 relative to it | peak memory |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    with tempfile.TemporaryDirectory() as workdir:
        if "ctranslate2" in args.systems:
            from aiayn.interop.ctranslate2 import export

            ct2_model = export(model, tokenizer, f"{workdir}/ct2")
            pieces = [[tokenizer.pieces([t for t in row if t not in (tokenizer.pad_id, tokenizer.eos_id)])
                       for row in src.tolist()] for src in batches]
            # on a CPU the fastest of CTranslate2's settings; on a GPU (or in a smoke run) its default
            ct2_settings = ["its default"] if device.type != "cpu" or args.smoke else list(CT2_SETTINGS)[1:]
        for beam in (1, 4):
            # smoke: no compiled step (a minute of compiling; tests/decoding checks it)
            run = systems(model, new_tokens, beam, "huggingface" in args.systems, device, not args.smoke)
            ct2 = None
            if "ctranslate2" in args.systems:
                ct2 = CTranslate2Runs(ct2_model, pieces, beam, new_tokens, device)
                ct2.choose(ct2_settings)
            gflop = decode_flops(model.config, batches, beam, new_tokens) / 1e9
            times, memory = defaultdict(list), {}
            for _ in range(rounds):  # alternate, so that drifts in machine speed hit every system alike
                for name, fn in run.items():
                    with PeakMemory(device) as peak_memory:
                        times[name] += batch_times(fn, batches, device)
                    memory.setdefault(name, peak_memory)
                for name, (seconds, peak_memory) in (ct2.run() if ct2 else {}).items():
                    times[name] += seconds
                    memory.setdefault(name, peak_memory)
            speed = {name: args.batch_size * new_tokens / statistics.median(t) for name, t in times.items()}
            search = "greedy" if beam == 1 else f"beam {beam}"
            for name, tokens_per_s in speed.items():
                flops = gflop * tokens_per_s / (len(lines) * new_tokens)  # GFLOP/s
                relative = [f"{speed[mine] / tokens_per_s:.2f}x" if mine != name and mine in speed else ""
                            for mine in ours]
                rows.append(f"| {search} | {name} | {tokens_per_s:,.0f} | {flops:.1f} ({flops / peak:.0%}) | "
                            f"{' | '.join(relative)} | {memory[name]} |")
                print(rows[-1])
    if args.record and not args.smoke:
        record(f"Decoding speed ({preset}): aiayn vs HuggingFace and CTranslate2", "\n".join(rows),
               f"Matmul peak measured in the same run: {peak:,.0f} GFLOP/s (float32, {size}^3). Peak memory: "
               "the process's peak resident memory (on a GPU: PyTorch's peak allocation there) while the "
               "system ran its first round, reset before each (in brackets: the growth over the memory held "
               "when it began); for CTranslate2, that of its own process (which loads PyTorch but no aiayn "
               "or HuggingFace model).",
               device, path=detail("decode_speed"))


def real_file_main(args) -> None:
    """The real file end to end (`real_file.py`); smoke: 20 synthetic sentences, two systems."""
    threads = torch.get_num_threads()
    data_dir()
    if args.smoke:
        source = load_corpus("synthetic:reverse:val", "", "").source[:20]
        rows = real_file.run(args.model, source, threads, 1, ["aiayn float32", "ctranslate2 float32"],
                             ("MKL (its default)",))
    else:
        source = load_corpus("multi30k:test_2016_flickr", "en", "de").source
        rows = real_file.run(args.model, source, threads, args.rounds, list(real_file.SYSTEMS))
    if args.record and not args.smoke:
        record(f"A real file end to end: {len(source):,} sentences of test_2016_flickr, {args.model}",
               "\n".join(rows),
               f"`aiayn translate RUN --input FILE --output OUT {' '.join(real_file.FLAGS)} --threads "
               f"{threads}`, each run a process of its own; translation = its time minus the median "
               "start-up (the same command on an empty file); median of the rounds. First run: the "
               "compiled step's first process, from an empty cache (it compiles).",
               path=detail("decode_speed"))


def single_sentence_main(args) -> None:
    """One sentence at a time (`single_sentence.py`): the first 110 sentences of test_2016_flickr (the
    first `WARM_UP` untimed); smoke: 20 synthetic sentences, two systems."""
    threads = torch.get_num_threads()
    data_dir()
    if args.smoke:
        source = load_corpus("synthetic:reverse:val", "", "").source[:single_sentence.WARM_UP + 10]
        rows = single_sentence.run(args.model, source, threads, 1, ["aiayn float32", "ctranslate2 float32"],
                                   ("MKL (its default)",))
    else:
        source = load_corpus("multi30k:test_2016_flickr", "en", "de").source[:single_sentence.WARM_UP + 100]
        rows = single_sentence.run(args.model, source, threads, args.rounds, list(single_sentence.SYSTEMS))
    if args.record and not args.smoke:
        record(f"One sentence at a time: 100 sentences of test_2016_flickr, {args.model}", "\n".join(rows),
               f"`translator.translate([sentence], beam_size={single_sentence.BEAM}, length_penalty="
               f"{single_sentence.LENGTH_PENALTY}, penalty_form='plain')` in a process of its own per system "
               f"and round, {threads} threads, after {single_sentence.WARM_UP} sentences untimed; "
               "CTranslate2: `translate_batch([pieces], beam_size=4, no_repeat_ngram_size="
               f"{single_sentence.NO_REPEAT})` (aiayn's default) with the export's SentencePiece "
               "model, at its fastest setting. p50 and p90 over every round's sentences. First run: a "
               "compiled system's first process, from an empty cache (it compiles what it needs).",
               path=detail("decode_speed"))


if __name__ == "__main__":
    main()
