"""Parallel text: readers, named datasets, token-budget batches."""
