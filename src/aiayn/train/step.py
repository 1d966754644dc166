"""One training update and one evaluation: the loss of a batch (label-smoothed, the output layer
computed with it), gradients accumulated over an update's batches, clipped, and the optimiser's step;
and the loss over validation batches. The model is a black box: `model(src, tgt_in) -> logits`.
"""

from __future__ import annotations

import contextlib
import math

import torch
from torch import nn

from aiayn.config import TrainConfig
from aiayn.data.batching import Batch
from aiayn.model import Transformer
from aiayn.train import distributed
from aiayn.train.losses import output_layer_nll
from aiayn.train.optim import set_learning_rate


def autocast(device: torch.device, precision: str = "auto") -> contextlib.AbstractContextManager:
    """bfloat16 autocast when `precision` asks for it ("auto": on CUDA only), else plain float32.

    Under autocast, matmuls run in bfloat16; weights, gradients, optimizer state, normalisations
    and the loss stay float32 (`output_layer_nll` chooses its own matmul precision: float32 on a
    CPU, bfloat16 on a GPU).
    """
    if precision == "bfloat16" or (precision == "auto" and device.type == "cuda"):
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def batch_loss(model: Transformer, batch: Batch, label_smoothing: float, pad_id: int):
    """Summed label-smoothed loss and NLL of one batch: teacher-forced decoder output, then the
    output layer and loss together, in chunks (no (B, T, V) logits tensor)."""
    hidden = model.decode(batch.tgt_in, model.encode(batch.src), batch.src)  # (B, T, D)
    proj = model.output_proj
    return output_layer_nll(hidden.flatten(0, 1), proj.weight, proj.bias, batch.tgt_out.flatten(),
                            label_smoothing, pad_id)


class Criterion(nn.Module):
    """The model and its training loss as one module: `criterion(batch) -> (loss, nll)`. This is
    what DistributedDataParallel wraps: it exchanges the gradients of what runs in `forward`."""

    def __init__(self, model: Transformer, label_smoothing: float, pad_id: int) -> None:
        super().__init__()
        self.model, self.label_smoothing, self.pad_id = model, label_smoothing, pad_id

    def forward(self, batch: Batch):
        return batch_loss(self.model, batch, self.label_smoothing, self.pad_id)


def train_step(criterion: nn.Module, batches: list[Batch], optimizer: torch.optim.Optimizer, lr: float,
               config: TrainConfig, device: torch.device, tokens: int | None = None,
               world: int = 1) -> dict[str, float]:
    """One update from `batches` (gradient accumulation), normalised per target token.

    Under data parallelism `batches` are this rank's share, `tokens` the target tokens of the whole
    update on all `world` ranks, and `criterion` is wrapped in DistributedDataParallel, which
    averages the ranks' gradients: scaled by `world`, that average is the sum one process would
    get from all the batches. A batch with no target tokens is a filler that only keeps this rank
    in step with the others. Returns this rank's summed loss and NLL per update token.
    """
    criterion.train()
    tokens = sum(b.n_tgt_tokens for b in batches) if tokens is None else tokens
    total_loss = total_nll = 0.0
    for i, batch in enumerate(batches):
        scale = world / tokens if batch.n_tgt_tokens else 0.0
        with distributed.no_sync(criterion) if i < len(batches) - 1 else contextlib.nullcontext():
            with autocast(device, config.precision):
                loss, nll = criterion(batch.to(device))
            (loss * scale).backward()
        if batch.n_tgt_tokens:
            total_loss += loss.item()
            total_nll += nll.item()
    if config.clip_norm > 0:
        nn.utils.clip_grad_norm_(criterion.parameters(), config.clip_norm)
    set_learning_rate(optimizer, lr)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return {"loss": total_loss / tokens, "nll": total_nll / tokens, "tokens": tokens}


@torch.no_grad()
def evaluate(model: Transformer, batches: list[Batch], label_smoothing: float, pad_id: int,
             device: torch.device, precision: str = "auto") -> dict[str, float]:
    """Loss, NLL and perplexity per target token over `batches`, without dropout."""
    model.eval()
    tokens, total_loss, total_nll = 0, 0.0, 0.0
    for batch in batches:
        batch = batch.to(device)
        with autocast(device, precision):
            loss, nll = batch_loss(model, batch, label_smoothing, pad_id)
        tokens += batch.n_tgt_tokens
        total_loss += loss.item()
        total_nll += nll.item()
    return {"loss": total_loss / tokens, "nll": total_nll / tokens,
            "ppl": math.exp(min(total_nll / tokens, 50.0)), "tokens": tokens}

