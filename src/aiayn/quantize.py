"""int8 weights for CPU inference: PyTorch dynamic quantization of every linear map.

Weights are stored as int8 and activations quantized on the fly, row by row of each matmul;
embeddings, LayerNorms and softmax stay in float32. Translation only: a quantized model is not
trained or saved. (PyTorch marks its quantized tensors deprecated in favour of torchao; this path
uses what torch 2.13 ships.)
"""

from __future__ import annotations

import copy
import warnings

import torch
from torch import Tensor, nn

from aiayn.model import Transformer
from aiayn.model.attention import QKVProjection


def _int8_linear(weight: Tensor, bias: Tensor | None) -> nn.Module:
    linear = nn.Linear(weight.size(1), weight.size(0), bias=bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    return torch.ao.quantization.quantize_dynamic(nn.Sequential(linear), {nn.Linear}, dtype=torch.qint8)[0]


class Int8QKVProjection(nn.Module):
    """QKVProjection with int8 weights: the full [W^Q; W^K; W^V] map and its q and kv parts."""

    def __init__(self, projection: QKVProjection) -> None:
        super().__init__()
        d, w, b = projection.d_model, projection.weight.detach(), projection.bias.detach()
        self.qkv = _int8_linear(w, b)
        self.q_part, self.kv_part = _int8_linear(w[:d], b[:d]), _int8_linear(w[d:], b[d:])

    def forward(self, x: Tensor) -> Tensor:
        return self.qkv(x)

    def q(self, x: Tensor) -> Tensor:
        return self.q_part(x)

    def kv(self, x: Tensor) -> Tensor:
        return self.kv_part(x)


@torch.no_grad()
def quantize_int8(model: Transformer) -> Transformer:
    """A copy of `model` for CPU translation with int8 weights in every linear map."""
    model = copy.deepcopy(model).cpu().eval()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*quantiz.*deprecated")
        for module in list(model.modules()):
            for name, child in module.named_children():
                if isinstance(child, QKVProjection):
                    setattr(module, name, Int8QKVProjection(child))
        torch.ao.quantization.quantize_dynamic(model, {nn.Linear}, dtype=torch.qint8, inplace=True)
    return model
