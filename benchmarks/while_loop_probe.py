"""Probe: does a decoding loop compiled into one AOTInductor graph (`torch._higher_order_ops.while_loop`)
cost more per iteration than calling its body, compiled, once a step from Python?

The body is a lone sentence's step in miniature at the quickstart model's sizes: 4 rows, a 256 x 256
linear map and ReLU, the 256 x 8,000 output layer, log-softmax, the top 8, and one token written into
a fixed-size history (as a loop's carried state must keep its shapes). Both are exported, compiled
with freezing and loaded (`aoti_load_package`); the loop is asked for 1, 14 and 28 iterations.

    python benchmarks/while_loop_probe.py
"""

from __future__ import annotations

import tempfile
import time

import torch
from torch._higher_order_ops import while_loop

V, D, ROWS, WIDTH = 8000, 256, 4, 64


class Body(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.hidden, self.out = torch.nn.Linear(D, D), torch.nn.Linear(D, V)

    def forward(self, i: torch.Tensor, x: torch.Tensor, tokens: torch.Tensor) -> tuple[torch.Tensor, ...]:
        h = torch.relu(self.hidden(x))  # (ROWS, D)
        _, best = self.out(h).log_softmax(-1).topk(8, dim=-1)  # (ROWS, 8)
        return i + 1, h, tokens.index_copy(1, i.reshape(1), best[:, :1])  # (), (ROWS, D), (ROWS, WIDTH)


class Loop(torch.nn.Module):
    def __init__(self, body: Body) -> None:
        super().__init__()
        self.body = body

    def forward(self, x: torch.Tensor, steps: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        start = (torch.zeros((), dtype=torch.long), x, torch.zeros(ROWS, WIDTH, dtype=torch.long))
        _, x, tokens = while_loop(lambda i, x, tokens: i < steps, self.body, start)
        return x, tokens


def compiled(module: torch.nn.Module, inputs: tuple) -> object:
    exported = torch.export.export(module, inputs)
    with torch._inductor.config.patch(freezing=True):
        path = torch._inductor.aoti_compile_and_package(exported, package_path=tempfile.mkdtemp() + "/p.pt2")
    return torch._inductor.aoti_load_package(path)


def per_call(run, *inputs: torch.Tensor, calls: int = 200) -> float:
    for _ in range(20):
        run(*inputs)
    start = time.perf_counter()
    for _ in range(calls):
        run(*inputs)
    return (time.perf_counter() - start) / calls


@torch.no_grad()
def main() -> None:
    torch.manual_seed(0)
    body = Body().eval()
    x, history = torch.randn(ROWS, D), torch.zeros(ROWS, WIDTH, dtype=torch.long)
    loop = compiled(Loop(body), (x, torch.tensor(14)))
    step = compiled(body, (torch.zeros((), dtype=torch.long), x, history))
    same = torch.equal(loop(x, torch.tensor(14))[1], Loop(body)(x, torch.tensor(14))[1])
    print(f"loop's tokens equal eager's: {same}")
    times = {n: per_call(loop, x, torch.tensor(n)) for n in (1, 14, 28)}
    print("| iterations | one loop call (us) |\n|---|---|")
    for n, t in times.items():
        print(f"| {n} | {t * 1e6:,.0f} |")
    one = per_call(step, torch.zeros((), dtype=torch.long), x, history)
    print(f"loop, per iteration (14 against 1): {(times[14] - times[1]) / 13 * 1e6:,.0f} us; "
          f"the body compiled, one call from Python: {one * 1e6:,.0f} us")


if __name__ == "__main__":
    main()
