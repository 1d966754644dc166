"""Decoding: greedy, sampling and beam search over a batch, with the model's key/value cache."""

from aiayn.decoding.beam import beam_search, length_penalty
from aiayn.decoding.greedy import greedy_search, sample
from aiayn.decoding.steps import Hypothesis, max_output_lengths

__all__ = ["Hypothesis", "beam_search", "greedy_search", "length_penalty", "max_output_lengths", "sample"]
