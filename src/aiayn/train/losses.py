"""Label-smoothed cross entropy (section 5.4).

The target distribution puts 1 - epsilon on the reference token and spreads epsilon uniformly
over the whole vocabulary (the form of torch.nn.CrossEntropyLoss(label_smoothing=epsilon)):

    loss = (1 - epsilon) * -log p(y) + epsilon / V * sum_v -log p(v)

Padding positions contribute nothing. Shapes: N target positions, V vocabulary.
"""

from __future__ import annotations

import torch.nn.functional as F
from torch import Tensor


def label_smoothed_nll(logits: Tensor, target: Tensor, epsilon: float, ignore_index: int,
                       ) -> tuple[Tensor, Tensor]:
    """(N, V) logits, (N,) target ids -> (summed smoothed loss, summed plain NLL) over non-pad positions.

    Sums, not means: the caller divides by the number of target tokens of the whole update.
    """
    log_probs = F.log_softmax(logits.float(), dim=-1)  # (N, V)
    keep = target != ignore_index  # (N,)
    nll = -log_probs.gather(-1, target[:, None]).squeeze(-1)  # (N,)
    smooth = -log_probs.mean(dim=-1)  # (N,) = 1/V * sum_v -log p(v)
    loss = (1.0 - epsilon) * nll + epsilon * smooth
    return loss[keep].sum(), nll[keep].sum()
