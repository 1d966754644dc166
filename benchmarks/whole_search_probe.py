"""Probe: a lone sentence's whole greedy search compiled as one AOTInductor graph, against the
model's own eager search: equal outputs, and the time of a call.

The graph holds the encoder, the cross-attention keys and values, and the decoding loop
(`torch._higher_order_ops.while_loop`) over fixed-size buffers: each layer's keys and values at a
capacity of `CAPACITY` positions (written functionally, self-attention masked to the filled
positions), the output tokens, the last token and whether eos came. The layers are the model's own
(`Decoder.forward`, through a cache slot that returns new buffers rather than writing in place: a
loop's body may not mutate its inputs). Greedy search: beam search would add the top-k over the
beams and the reordering of the histories in the same loop.

    python benchmarks/whole_search_probe.py --model runs/quickstart     # compiles once (about a minute)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch
from torch import Tensor
from torch._higher_order_ops import while_loop
from torch.export import Dim

from aiayn import checkpoint
from aiayn.data.corpora import load_corpus
from aiayn.decoding.greedy import greedy_search
from aiayn.decoding.steps import max_output_lengths
from aiayn.decoding.whole import _Slot, _Slots  # a layer's history carried by the loop
from aiayn.model.masks import padding_mask

CAPACITY = 128  # positions of the buffers: the longest output (the source's length + 50) and bos


class WholeGreedy(torch.nn.Module):
    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, src: Tensor, limit: Tensor) -> Tensor:
        """(1, S) source ids, () most output tokens -> (1, CAPACITY) output ids, eos and padding after."""
        m, c = self.model, self.model.config
        table = m.positions(CAPACITY, 0, torch.float32, src.device)  # (C, D), made for a static length
        mask = padding_mask(src, c.pad_id)
        memory = m.encoder(m.embed(src, m.src_embed, encodings=table[:src.size(1)]), mask, False, None)[0]
        cross = [tuple(t.clone() for t in layer.cross_attn.project_kv(memory))  # not views of one tensor:
                 for layer in m.decoder.layers]  # a loop's inputs may not alias each other
        n_layers, heads, d_k = len(m.decoder.layers), c.n_heads, c.d_model // c.n_heads
        v = c.vocab_size
        only_eos = torch.full((v,), float("-inf")).index_fill(0, torch.tensor([c.eos_id]), 0.0)
        never = torch.zeros(v, dtype=torch.bool).index_fill(0, torch.tensor([c.pad_id, c.bos_id]), True)
        positions = torch.arange(CAPACITY)

        def go_on(i: Tensor, last: Tensor, ended: Tensor, out: Tensor, *kv: Tensor) -> Tensor:
            return (i < limit + 1) & ~ended

        def step(i: Tensor, last: Tensor, ended: Tensor, out: Tensor, *kv: Tensor) -> tuple[Tensor, ...]:
            slots = [_Slot(kv[j], kv[n_layers + j], i) for j in range(n_layers)]
            x = m.embed(last[:, None], m.tgt_embed, encodings=table.index_select(0, i.reshape(1)))
            filled = (positions <= i)[None, None, None, :]  # (1, 1, 1, C)
            hidden, _ = m.decoder(x, filled, cross, mask, _Slots(slots), need_weights=True)
            logits = m.logits(hidden)[:, -1].float().masked_fill(never, float("-inf"))  # (1, V)
            token = (logits + torch.where(i >= limit, only_eos, 0.0)).argmax(-1)  # (1,)
            out = out.index_copy(1, i.reshape(1), token[:, None])
            carried = (i + 1, token, (token == c.eos_id).all(), out, *[s.k for s in slots],
                       *[s.v for s in slots])
            return tuple(t.clone() for t in carried)  # a loop's outputs may not alias its inputs

        start = (torch.zeros((), dtype=torch.long), torch.full((1,), c.bos_id),
                 torch.zeros((), dtype=torch.bool), torch.full((1, CAPACITY), c.pad_id),
                 *[memory.new_zeros(1, heads, CAPACITY, d_k) for _ in range(2 * n_layers)])
        return while_loop(go_on, step, start)[3]


@torch.no_grad()
def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="runs/quickstart", help="a trained model (default: runs/quickstart)")
    p.add_argument("--sentences", type=int, default=60, help="test_2016_flickr sentences (default: 60)")
    args = p.parse_args()
    torch.set_num_threads(2)
    loaded = checkpoint.load(checkpoint.resolve(args.model), "cpu", with_state=False)
    model, tokenizer = loaded.model.eval(), loaded.tokenizer
    lines = load_corpus("multi30k:test_2016_flickr", "en", "de").source[:args.sentences]
    sources = [torch.tensor([ids + [tokenizer.eos_id]]) for ids in tokenizer.encode(lines)]
    limits = [max_output_lengths(s, model.config.pad_id)[0] for s in sources]

    started = time.perf_counter()
    source_length = Dim.DYNAMIC(min=2, max=CAPACITY - 52)
    exported = torch.export.export(WholeGreedy(model), (sources[0], limits[0]),
                                   dynamic_shapes=({1: source_length}, None), strict=False)
    with torch._inductor.config.patch(freezing=True):
        package = torch._inductor.aoti_compile_and_package(
            exported, package_path=str(Path(tempfile.mkdtemp()) / "whole.pt2"))
    print(f"exported and compiled in {time.perf_counter() - started:.1f} s")
    run = torch._inductor.aoti_load_package(package)

    same, whole, eager = 0, [], []
    for src, limit in zip(sources, limits, strict=True):
        start = time.perf_counter()
        row = run(src, limit)[0].tolist()
        whole.append(time.perf_counter() - start)
        start = time.perf_counter()
        reference = greedy_search(model, src)[0].tokens
        eager.append(time.perf_counter() - start)
        row = row[:row.index(tokenizer.eos_id)] if tokenizer.eos_id in row else row
        same += row == reference
    print(f"outputs equal to the eager greedy search: {same} of {len(sources)}")
    print(f"p50 after 10: whole search as one graph {statistics.median(whole[10:]) * 1e3:.2f} ms, "
          f"eager greedy search {statistics.median(eager[10:]) * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
