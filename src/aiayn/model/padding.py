"""Padding removal: the encoder computes on real source tokens only.

A batch pads its sentences to one length S, and in batches of unsorted sentences padding can be
close to half of all positions. Everything in an encoder layer but the attention itself sees one
position at a time: the linear maps W^Q W^K W^V and W^O, the feed-forward network, the residual
adds and LayerNorm. So those run on the N real tokens packed as (N, D), and only attention,
which needs the (B, S) grid and its padding mask, briefly has the padded shape. Real tokens get
the same results, since attention never lets them see padding; padding positions of the
encoder output are zeros.

Shapes: B batch, S source length, N real tokens, D d_model.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor


@dataclass
class Padder:
    """Where the real tokens of a padded (B, S) batch are: remove the padding and restore it."""

    index: Tensor  # (N,) flat positions b * S + s of the real tokens, in order
    batch: int  # B
    length: int  # S

    @classmethod
    def of(cls, ids: Tensor, pad_id: int) -> Padder:
        """For (B, S) ids."""
        return cls((ids != pad_id).flatten().nonzero().squeeze(1), ids.size(0), ids.size(1))

    @property
    def fraction(self) -> float:
        """Share of the B * S positions that are padding."""
        return 1.0 - len(self.index) / (self.batch * self.length)

    def remove(self, x: Tensor) -> Tensor:
        """(B, S, ...) -> (N, ...): the real tokens."""
        return x.flatten(0, 1).index_select(0, self.index)

    def restore(self, x: Tensor) -> Tensor:
        """(N, ...) -> (B, S, ...), zeros at the padding."""
        out = x.new_zeros(self.batch * self.length, *x.shape[1:])
        return out.index_copy_(0, self.index, x).view(self.batch, self.length, *x.shape[1:])
