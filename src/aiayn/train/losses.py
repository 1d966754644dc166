"""Label-smoothed cross entropy (section 5.4).

The target distribution puts 1 - epsilon on the reference token and spreads epsilon uniformly
over the whole vocabulary (the form of torch.nn.CrossEntropyLoss(label_smoothing=epsilon)):

    loss = (1 - epsilon) * -log p(y) + epsilon / V * sum_v -log p(v)

Padding positions contribute nothing. Shapes: N target positions, V vocabulary.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float, ignore_index: int,
                       ) -> tuple[Tensor, Tensor]:
    """(N, V) logits, (N,) target ids -> (summed smoothed loss, summed plain NLL) over non-pad positions.

    Sums, not means: the caller divides by the number of target tokens of the whole update.
    """
    return _smoothed_nll(F.log_softmax(logits.float(), dim=-1), target, epsilon, ignore_index)


def _smoothed_nll(log_probs: Tensor, target: Tensor, epsilon: float, ignore_index: int,
                  ) -> tuple[Tensor, Tensor]:
    """`label_smoothed_nll` from (N, V) log-probabilities."""
    keep = target != ignore_index  # (N,)
    nll = -log_probs.gather(-1, target[:, None]).squeeze(-1)  # (N,)
    smooth = -log_probs.mean(dim=-1)  # (N,) = 1/V * sum_v -log p(v)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return loss[keep].sum(), nll[keep].sum()


def output_layer_nll(hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor,
                     epsilon: float, ignore_index: int, chunk: int | None = None,
                     matmul_dtype: torch.dtype | None = None) -> tuple[Tensor, Tensor]:
    """The final linear layer and `label_smoothed_nll` in one, `chunk` positions at a time.

    (N, D) decoder output, (V, D) weight, (V,) bias or None, (N,) target ids -> the same two sums
    as `label_smoothed_nll(F.linear(hidden, weight, bias), ...)`, but the (N, V) logits never
    exist at once: each chunk's logits are made, turned into the loss and, when gradients are
    wanted, straight into the gradients of hidden, weight and bias (the log-probabilities become
    the softmax in place), in two (chunk, V) buffers that every chunk reuses. Memory no longer
    grows with N x V.

    Precision and chunk size suit the device unless given. On a CPU the matmuls run in the
    weight's precision, in chunks of 256 positions whose scores stay in the CPU cache while they
    are read again. On a GPU under autocast they run in the autocast precision (bfloat16), as every
    other matmul there, in chunks of about 2^26 scores: a float32 matmul runs there at a sixteenth
    of the bfloat16 rate, and small chunks leave the GPU idle (benchmarks/detail/train_speed.md). The
    log-softmax and the sums are float32 always; the gradients of weight and bias keep their own
    precision.
    """
    on_gpu = hidden.device.type != "cpu"
    if matmul_dtype is None:
        lower = on_gpu and torch.is_autocast_enabled(hidden.device.type)
        matmul_dtype = torch.get_autocast_dtype(hidden.device.type) if lower else weight.dtype
    if chunk is None:
        chunk = max(256, 2**26 // weight.size(0)) if on_gpu else 256
    hidden = hidden.to(matmul_dtype)  # autocast may have made it lower precision
    with torch.autocast(hidden.device.type, enabled=False):  # computed in matmul_dtype, as chosen
        if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in (hidden, weight, bias)):
            return _OutputLayerNLL.apply(hidden, weight, bias, target, epsilon, ignore_index, chunk)
        return _output_layer_nll(hidden, weight, bias, target, epsilon, ignore_index, chunk, None)


def _output_layer_nll(hidden: Tensor, weight: Tensor, bias: Tensor | None, target: Tensor, epsilon: float,
                      ignore_index: int, chunk: int, grads: tuple[Tensor, Tensor, Tensor | None] | None,
                      ) -> tuple[Tensor, Tensor]:
    """The chunked loss; with `grads` = (d hidden, d weight, d bias) buffers, also the gradients of
    the summed smoothed loss, accumulated into them: d loss / d logits = softmax - q, where q is
    the smoothed target distribution ((1 - epsilon) on the reference token, epsilon / V on each).
    The matmuls run in hidden's precision; the weight is cast to it once."""
    n, v = target.size(0), weight.size(0)
    weight = weight.to(hidden.dtype)  # (V, D)
    loss = hidden.new_zeros((), dtype=torch.promote_types(hidden.dtype, torch.float32))
    nll = torch.zeros_like(loss)
    rows = min(chunk, n)  # every chunk's scores go to the same two buffers: fresh memory once
    logits_buffer = hidden.new_empty(rows, v, dtype=weight.dtype)  # (chunk, V)
    log_probs_buffer = hidden.new_empty(rows, v, dtype=torch.float32)  # (chunk, V)
    for start in range(0, n, chunk):
        h, t = hidden[start:start + chunk], target[start:start + chunk]  # (n, D), (n,)
        logits = torch.matmul(h, weight.t(), out=logits_buffer[:len(t)])  # (n, V)
        if bias is not None:
            logits += bias
        log_probs = torch.log_softmax(logits.float(), dim=-1, out=log_probs_buffer[:len(t)])  # (n, V)
        chunk_loss, chunk_nll = _smoothed_nll(log_probs, t, epsilon, ignore_index)
        loss += chunk_loss
        nll += chunk_nll
        if grads is None:
            continue
        grad_logits = log_probs.exp_().sub_(epsilon / v)  # softmax - epsilon/V, in place
        grad_logits[torch.arange(len(t)), t] -= 1.0 - epsilon
        grad_logits = grad_logits.mul_((t != ignore_index)[:, None])  # padding: no gradient
        grad_hidden, grad_weight, grad_bias = grads
        if grad_bias is not None:
            grad_bias += grad_logits.sum(dim=0)
        grad_logits = grad_logits.to(weight.dtype)
        torch.mm(grad_logits, weight, out=grad_hidden[start:start + chunk])  # (n, D)
        if grad_weight.dtype == h.dtype:
            grad_weight.addmm_(grad_logits.t(), h)  # (V, D)
        else:  # a lower-precision matmul, accumulated in float32
            grad_weight += grad_logits.t() @ h
    return loss, nll


class _OutputLayerNLL(torch.autograd.Function):
    """Gradients are computed in the forward pass, chunk by chunk (the loss is a scalar, so they
    are only scaled in backward): no (N, V) tensor is kept for the backward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, target, epsilon, ignore_index, chunk):
        grads = (torch.empty_like(hidden), torch.zeros_like(weight),
                 torch.zeros_like(bias) if bias is not None else None)
        loss, nll = _output_layer_nll(hidden, weight, bias, target, epsilon, ignore_index, chunk, grads)
        ctx.save_for_backward(*(g for g in grads if g is not None))
        ctx.mark_non_differentiable(nll)  # a figure to report; training follows the smoothed loss
        return loss, nll

    @staticmethod
    def backward(ctx, grad_loss, _grad_nll):
        grad_hidden, grad_weight, *grad_bias = ctx.saved_tensors
        scaled = [g * grad_loss for g in (grad_hidden, grad_weight, *grad_bias)]
        return scaled[0], scaled[1], scaled[2] if grad_bias else None, None, None, None, None
