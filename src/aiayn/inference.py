"""Copies of a model for CPU translation whose linear maps run on faster kernels.

Each is made by replacing every linear map of a deep copy; the original is untouched, and the
copies translate only (they are not trained or saved):

- `quantize_int8`: int8 weights, activations quantized on the fly at each matmul; embeddings,
  LayerNorms and softmax stay in float32. Run eagerly, PyTorch's dynamic quantization (PyTorch
  marks its quantized tensors deprecated in favour of torchao; this path uses what torch 2.13
  ships). For the compiled decoder step (`--compile`), `Int8Linear` (activations quantized per
  row, `torch._int_mm`), and for the output layer `OneDNNInt8Linear`, which TorchInductor turns into
  oneDNN's int8 linear operation.
- `pack_for_cpu`: the same maths in float32 or bfloat16, with each weight packed once into the
  layout the matmul kernels read, instead of being repacked inside every matmul. Float32 uses
  MKL, whose packing serves one row count and costs about as much as 4-6 of the matmuls it
  speeds up, so a linear map packs for a row count once it has seen it in `PACK_AFTER` calls
  running (the steps of a decoding loop: B or B x beam rows, until sentences finish) and computes
  plainly otherwise (the encoder, whose rows are a batch's tokens); bfloat16 uses oneDNN, whose
  packing serves any row count. The gains are in benchmarks/detail/decode_speed.md.

Shapes: N rows (all leading dimensions together), I in features, O out features.
"""

from __future__ import annotations

import copy
import functools
import warnings
from collections.abc import Callable

import torch
import torch.ao.quantization.fx._decomposed  # noqa: F401 (defines torch.ops.quantized_decomposed)
import torch.nn.functional as F
from torch import Tensor, nn

from aiayn.decoding import kernels
from aiayn.model import Transformer
from aiayn.model.attention import QKVProjection

MakeLinear = Callable[[Tensor, Tensor | None], nn.Module]  # (weight (O, I), bias (O,)) -> linear map


def _int8_linear(weight: Tensor, bias: Tensor | None) -> nn.Module:
    linear = nn.Linear(weight.size(1), weight.size(0), bias=bias is not None)
    with torch.no_grad():
        linear.weight.copy_(weight)
        if bias is not None:
            linear.bias.copy_(bias)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r".*quantiz.*deprecated")
        return torch.ao.quantization.quantize_dynamic(nn.Sequential(linear), {nn.Linear},
                                                      dtype=torch.qint8)[0]


EPS = torch.finfo(torch.float32).eps  # smallest activation scale of OneDNNInt8Linear
TINY = torch.finfo(torch.float32).tiny


class _Int8Weight(nn.Module):
    """A linear map's weight W (O, I) in int8, symmetric with a scale per output feature (its
    largest magnitude maps to `top`), and its bias (O,) in float32."""

    def __init__(self, weight: Tensor, bias: Tensor | None, top: int = 127) -> None:
        super().__init__()
        self.weight_max = top
        scale = weight.abs().amax(dim=1).clamp(min=TINY) / top  # (O,)
        self.register_buffer("scale", scale)
        self.register_buffer("qweight", torch.round(weight / scale[:, None]).to(torch.int8))  # (O, I)
        self.register_buffer("bias", None if bias is None else bias.detach().clone())  # (O,)


class Int8Linear(_Int8Weight):
    """y = x W^T + b with W in int8 (7 bits where `int8_saturates`) and each row of x quantized to
    int8 at each call (symmetric, a scale per row), multiplied by `torch._int_mm` into int32
    (oneDNN's int8 GEMM on the CPU, on AMX or VNNI units where it has them) and scaled back to
    float32.

    The same operations eagerly and in a compiled graph, where Inductor fuses the quantization of
    x into the operation before it and the scaling into the one after. At the row counts of
    decoding steps, `_int_mm` costs less a call than oneDNN's int8 linear operation
    (`OneDNNInt8Linear`), whose fixed cost dominates small maps; on wide weights such as the
    output layer's, the latter is faster (benchmarks/detail/decode_speed.md).
    """

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__(weight, bias, 63 if int8_saturates() else 127)

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        rows = x.reshape(-1, x.size(-1))  # (N, I)
        x_scale = rows.abs().amax(dim=1, keepdim=True).clamp(min=TINY) / 127  # (N, 1)
        quantized = torch.round(rows / x_scale).to(torch.int8)  # (N, I), in [-127, 127]
        # The two scales as one product: written as two products, Inductor would match the
        # pattern of a "smooth quant" linear map and call oneDNN's int8 linear op, slower here.
        out = torch._int_mm(quantized, self.qweight.t()).float() * (x_scale * self.scale)  # (N, O)
        if self.bias is not None:
            out = out + self.bias
        return out.view(*x.shape[:-1], -1)


@functools.cache
def int8_saturates() -> bool:
    """True where oneDNN's int8 kernels add pairs of 8-bit products in int16 and so saturate or wrap
    around (CPUs without VNNI or AMX, or ONEDNN_MAX_CPU_ISA=AVX2): found by two products whose
    exact answers such a kernel cannot give. There, the int8 layers keep one operand to 7 bits
    (|w| <= 63 for `Int8Linear`, 0 <= x <= 127 for `OneDNNInt8Linear`), which cannot overflow."""
    a, w = torch.full((32, 64), 127, dtype=torch.int8), torch.full((64, 32), 127, dtype=torch.int8)
    x = torch.full((1, 64), 255, dtype=torch.uint8)
    packed = torch.ops.onednn.qlinear_prepack(torch.full((1, 64), 127, dtype=torch.int8), None)
    out = torch.ops.onednn.qlinear_pointwise.tensor(
        x, torch.tensor(1.0), torch.tensor(0), packed, torch.ones(1), torch.zeros(1, dtype=torch.int64),
        None, 1.0, 0, torch.float32, "none", [], "")
    return torch._int_mm(a, w)[0, 0].item() != 127 * 127 * 64 or out.item() != 255 * 127 * 64


class OneDNNInt8Linear(_Int8Weight):
    """y = x W^T + b with W in int8 and x quantized to uint8 at each call (a scale and zero point
    from that call's range, on 0..255, or 0..127 where `int8_saturates`),
    multiplied by oneDNN's int8 linear operation.

    In a graph TorchInductor compiles with freezing (the compiled decoder step), it is written in
    PyTorch's `quantized_decomposed` operations: Inductor matches that pattern, prepacks the weight
    once and fuses the quantization of x into the operation before it. Run eagerly (the first
    decoder step), it quantizes x and calls oneDNN's int8 matmul itself, on a weight packed at the
    first call (copies and pickles drop the packed weight and pack anew).
    """

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__(weight, bias)
        self.register_buffer("zero_point", torch.zeros(weight.size(0), dtype=torch.int64))
        self.packed: Tensor | None = None
        self.quant_max = 127 if int8_saturates() else 255

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        rows = x.reshape(-1, x.size(-1))  # (N, I): Inductor matches the pattern on a 2-d matmul
        out = self._decomposed(rows) if torch.compiler.is_compiling() else self._eager(rows)
        return out.view(*x.shape[:-1], -1)

    def _decomposed(self, rows: Tensor) -> Tensor:
        qd = torch.ops.quantized_decomposed
        top = self.quant_max
        scale, zero = qd.choose_qparams.tensor(rows, 0, top, EPS, torch.uint8)
        quantized = qd.quantize_per_tensor.tensor(rows, scale, zero, 0, top, torch.uint8)
        rows = qd.dequantize_per_tensor.tensor(quantized, scale, zero, 0, top, torch.uint8)
        weight = qd.dequantize_per_channel(self.qweight, self.scale, self.zero_point, 0, -128, 127,
                                           torch.int8)
        return F.linear(rows, weight, self.bias)

    def _eager(self, rows: Tensor) -> Tensor:
        lo, hi = torch.aminmax(rows)
        lo, hi = lo.clamp(max=0), hi.clamp(min=0)  # the range holds 0, as choose_qparams's does
        scale = ((hi - lo) / self.quant_max).clamp(min=EPS)
        zero = torch.round(-lo / scale).to(torch.int64)
        quantized = torch.clamp(torch.round(rows / scale) + zero, 0, self.quant_max).to(torch.uint8)
        if self.packed is None:
            self.packed = torch.ops.onednn.qlinear_prepack(self.qweight, None)
        return torch.ops.onednn.qlinear_pointwise.tensor(
            quantized, scale, zero, self.packed, self.scale, self.zero_point, self.bias,
            1.0, 0, torch.float32, "none", [], "")

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "packed": None}


class _PackedWeight(nn.Module):
    """A linear map's weight (O, I) and bias (O,), and a packed copy made by a kernel library.

    A packed weight must stay at the address it was made at: copies and pickles drop it and pack anew.
    """

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__()
        self.register_buffer("weight", weight.detach().contiguous())  # (O, I)
        self.register_buffer("bias", None if bias is None else bias.detach().contiguous())  # (O,)
        self.packed: tuple[int, Tensor] | None = None  # (the row count it was packed for, packed weight)

    def __getstate__(self) -> dict:
        return {**super().__getstate__(), "packed": None}


PACK_AFTER = 4  # calls running with one row count before MKL packs for it (beam search, whose
# rows shrink as sentences finish, was no faster with 2; greedy decoding gains as much with 4)


class MKLPackedLinear(_PackedWeight):
    """y = x W^T + b in float32, with W packed by MKL for the row count x keeps having."""

    def __init__(self, weight: Tensor, bias: Tensor | None) -> None:
        super().__init__(weight, bias)
        self.unpacked_rows, self.unpacked_calls = 0, 0  # the latest calls computed without packing

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        rows = x.numel() // x.size(-1)  # N
        packed = self.packed  # one read: another thread may replace it
        if packed is None or packed[0] != rows:
            same = rows == self.unpacked_rows
            self.unpacked_rows, self.unpacked_calls = rows, self.unpacked_calls + 1 if same else 1
            if self.unpacked_calls < PACK_AFTER:
                return F.linear(x, self.weight, self.bias)
            packed = self.packed = (rows, torch.ops.mkl._mkl_reorder_linear_weight(self.weight, rows))
        return torch.ops.mkl._mkl_linear(x, packed[1], self.weight, self.bias, rows)


class OneDNNPackedLinear(_PackedWeight):
    """y = x W^T + b in bfloat16 or float32, with W reordered by oneDNN (for the first call's row count,
    as a hint: the packing serves every row count)."""

    def forward(self, x: Tensor) -> Tensor:
        """(..., I) -> (..., O)."""
        packed = self.packed
        if packed is None:
            rows = x.numel() // x.size(-1)  # N
            packed = self.packed = (rows, torch.ops.mkldnn._reorder_linear_weight(self.weight, rows))
        return torch.ops.mkldnn._linear_pointwise(x, packed[1], self.bias, "none", [], "")


PACKED_LINEAR = {torch.float32: MKLPackedLinear, torch.bfloat16: OneDNNPackedLinear}


def packing_available(dtype: torch.dtype) -> bool:
    """Whether this PyTorch and CPU have the packed matmul `pack_for_cpu` uses for `dtype`."""
    if dtype == torch.float32:
        return torch._C.has_mkl and hasattr(torch.ops.mkl, "_mkl_linear")
    if dtype == torch.bfloat16:
        return (torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")
                and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    return False


class QKVParts(nn.Module):
    """QKVProjection on other kernels: the full [W^Q; W^K; W^V] map and its q and kv parts."""

    def __init__(self, projection: QKVProjection, make_linear: MakeLinear) -> None:
        super().__init__()
        d, w, b = projection.d_model, projection.weight.detach(), projection.bias.detach()
        self.qkv = make_linear(w, b)
        self.q_part, self.kv_part = make_linear(w[:d], b[:d]), make_linear(w[d:], b[d:])

    def forward(self, x: Tensor) -> Tensor:
        return self.qkv(x)

    def q(self, x: Tensor) -> Tensor:
        return self.q_part(x)

    def kv(self, x: Tensor) -> Tensor:
        return self.kv_part(x)


@torch.no_grad()
def _with_linear_maps(model: Transformer, make_linear: MakeLinear, dtype: torch.dtype = torch.float32,
                      make_output: MakeLinear | None = None) -> Transformer:
    """A CPU copy of `model` in `dtype` and eval mode with every linear map rebuilt by `make_linear`,
    the output layer by `make_output` if given."""
    model = copy.deepcopy(model).to("cpu", dtype).eval()
    for module in list(model.modules()):
        for name, child in module.named_children():
            make = make_output if make_output and child is model.output_proj else make_linear
            if isinstance(child, QKVProjection):
                setattr(module, name, QKVParts(child, make))
            elif isinstance(child, nn.Linear):
                bias = None if child.bias is None else child.bias.detach()
                setattr(module, name, make(child.weight.detach(), bias))
    return model


def quantize_int8(model: Transformer, compiled: bool = False) -> Transformer:
    """A copy of `model` for CPU translation with int8 weights in every linear map: PyTorch's dynamic
    quantization, or, `compiled`, for searches with the compiled decoder step, `Int8Linear` maps and
    an output layer that TorchInductor turns into oneDNN's int8 linear operation (`OneDNNInt8Linear`),
    the faster of the two on a vocabulary-wide layer.
    """
    if compiled:
        if not int8_compilable():
            raise RuntimeError("this PyTorch build or CPU has no oneDNN int8 matmul: use --int8 without "
                               "--compile")
        # Inductor's int8 lowering copies a tensor the way PyTorch warns against: its affair
        warnings.filterwarnings("ignore", message="To copy construct from a tensor",
                                module="torch._inductor.mkldnn_lowerings")
        return _with_linear_maps(model, Int8Linear, make_output=OneDNNInt8Linear)
    return _with_linear_maps(model, _int8_linear)


def int8_compilable() -> bool:
    """Whether this PyTorch build and CPU have oneDNN's int8 matmul, which the compiled int8 step needs."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.onednn, "qlinear_pointwise")


def pack_for_cpu(model: Transformer, dtype: torch.dtype = torch.float32) -> Transformer:
    """A copy of `model` for CPU translation in `dtype` (float32 or bfloat16) with packed linear maps:
    the results of `model.to(dtype)` (in another order of floating-point operations), faster. In
    float32, packed for MKL or for oneDNN, whichever was timed faster on this machine
    (`kernels.eager_packing`)."""
    if not packing_available(dtype):
        raise RuntimeError(f"this PyTorch build or CPU has no packed {dtype} matmul")
    make = PACKED_LINEAR[dtype]
    if dtype == torch.float32 and kernels.eager_packing(model) == "onednn":
        make = OneDNNPackedLinear
    return _with_linear_maps(model, make, dtype)


@torch.no_grad()
def weights_by_column(model: Transformer) -> Transformer:
    """`model`, changed in place: the decoder's weight matrices and the output layer's stored transposed
    (column-major), the same values. A linear map y = x W^T then multiplies by W^T read row by row, a
    plain product rather than one by a transposed matrix, which MKL computes faster at the few rows of
    a lone sentence's decoder steps: its whole search compiled as one graph takes about 0.9x the time
    (benchmarks/detail/decode_speed.md). The encoder's, which run at many rows, stay as they are.
    Results are those of the rows' layout, in another order of floating-point operations."""
    for parameter in [*model.decoder.parameters(), model.output_proj.weight]:  # not the encoder's:
        if parameter.dim() == 2 and parameter.is_contiguous():  # at a file's many rows, slower by column
            parameter.data = parameter.data.t().contiguous().t()
    return model
