"""aiayn: the Transformer of "Attention Is All You Need" for neural machine translation."""

__version__ = "0.1.0"
