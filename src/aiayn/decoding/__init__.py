"""Decoding: search over target sequences with the model's key/value cache."""

from aiayn.decoding.greedy import greedy_search, max_output_lengths

__all__ = ["greedy_search", "max_output_lengths"]
