"""Compiled decoder steps kept on disk: compiled once per model, row count and machine, then loaded
by every later process in a fraction of a second (`aiayn cache info|clear|prune`).

The compiled step (`decoding/compiled.py`) freezes the weights into its graph, which torch.compile's
own caches do not keep (its AOTAutograd cache refuses frozen graphs, its FX graph cache the weights
packed for MKL), so every process compiled again (benchmarks/detail/decode_speed.md). Here the step
is compiled ahead of time by AOTInductor into a shared library with the weights inside, kept in a
cache directory, and loaded from there. Its parts:

- `store`: the entries and the directory they lie in: what names an entry, its checks, listing and
  clearing, and who may write the cache;
- `compiling`: exporting, compiling and storing a step, one process at a time for each;
- `library`: loading and running a stored step (the private AOTInductor entry points, behind one seam);
- `verdict`: whether this torch loads compiled steps on this machine at all;
- `alongside`: the steps a search will need next, compiled in other processes meanwhile.

`decoding/packages.py` puts them together: a model's compiled step, one entry per kind.
"""
