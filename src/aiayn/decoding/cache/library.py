"""Loading and running a compiled step: on the CPU its shared library, through AOTInductor's
model container (`torch._C._aoti.AOTIModelContainerRunnerCpu`: a private entry point, the one seam
where aiayn uses one; tests/decoding/test_packages.py fails loudly if a torch upgrade removes it),
which lets the steps of one model share one copy of its weights (`Runner.use_constants`) and loads
the library where it lies; on a GPU its package, through the package loader. The public
`torch._inductor.aoti_load_package` takes a whole package, copies its library out in every process,
checks the CPU by compiling a probe program and flattens the call spec at every call (`Runner`).
"""

from __future__ import annotations

import _ctypes
import contextlib
import ctypes
import functools
import hashlib
import mmap
import os
import sys
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils._pytree import tree_leaves


class Runner:
    """A compiled step loaded (a CPU library, or a package), called with the step's inputs.
    (AOTInductor's Python loader would also check the CPU by compiling a probe program, a second
    here, which the entry's fields do already, and parse the package's call spec at every call.)"""

    def __init__(self, path: Path, device: torch.device) -> None:
        self.container = None  # a CPU library's, whose weights can be read and replaced
        if path.suffix == ".so":
            self.container = torch._C._aoti.AOTIModelContainerRunnerCpu(str(path), 1)
            self.run = self.container.run
            _forget_library_weights(path)
        else:
            index = (device.index or 0) if device.type == "cuda" else -1
            self.run = torch._C._aoti.AOTIModelPackageLoader(str(path), "model", False, 1, index).boxed_run

    def __call__(self, *inputs: Any) -> Tensor | tuple[Tensor, ...]:
        out = self.run(_tensors(inputs, []))
        return out[0] if len(out) == 1 else tuple(out)

    def constants(self) -> dict[str, Tensor]:
        """The step's weights (the model's and those freezing made), by name: views of its buffer,
        which live only as long as the runner."""
        return self.container.extract_constants_map(False)

    def use_constants(self, tensors: dict[str, Tensor]) -> None:
        """Use `tensors` (all of `constants()`'s names; the caller keeps them alive) as the step's
        weights, and free its own copy."""
        names = self.container.get_constant_names_to_original_fqns()  # name in the library -> name
        self.container.update_constant_buffer({inner: tensors[name] for inner, name in names.items()},
                                              True, True, True)  # the spare buffer, all names, not copied
        self.container.swap_constant_buffer()
        self.container.free_inactive_constant_buffer()


def _forget_library_weights(library: Path) -> None:
    """Loading a library copied its weights out of it: take the pages they were read from (29 MB for
    the quickstart model) out of the process's memory. Never read again, they would stay counted
    until the kernel needs the memory; if read, they come back from the file. Linux only."""
    if sys.platform != "linux":
        return
    with contextlib.suppress(OSError, ValueError, AttributeError):
        loaded = ctypes.CDLL(str(library), os.RTLD_NOLOAD | os.RTLD_LAZY)  # the runner's, never a copy
        try:
            start, end = (ctypes.addressof(ctypes.c_char.in_dll(loaded, f"_binary_constants_bin_{edge}"))
                          for edge in ("start", "end"))
        finally:
            _ctypes.dlclose(loaded._handle)
        page = mmap.PAGESIZE
        first, last = -(-start // page) * page, end // page * page  # whole pages inside only
        if last > first:
            _libc().madvise(first, last - first, mmap.MADV_DONTNEED)


@functools.cache
def _libc() -> ctypes.CDLL:
    libc = ctypes.CDLL(None)
    libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return libc


def constant_digests(library: Path) -> dict[str, str]:
    """A digest of each weight in a CPU step's library: its name's tensor's dtype, shape, layout
    (oneDNN's packed format included) and values. Empty if one cannot be read."""
    digests = {}
    try:
        runner = Runner(library, torch.device("cpu"))  # alive while its weights are read
        for name, t in runner.constants().items():
            h = hashlib.sha256(f"{t.dtype} {tuple(t.shape)} {t.layout}".encode())
            if t.is_mkldnn:
                h.update(torch.ops.mkldnn._get_mkldnn_serialized_md(t).numpy().tobytes())
                t = t.to_dense()
            else:
                h.update(f"{t.stride()}".encode())
            h.update(t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes())
            digests[name] = h.hexdigest()
    except Exception:  # any: a step that cannot share its weights still works
        return {}
    return digests


def _tensors(inputs: Any, flat: list[Tensor]) -> list[Tensor]:
    """The tensors among a step's inputs, in the order export flattened them (`tree_leaves`, which
    costs ten times as much per step for the lists and tuples a step takes)."""
    if isinstance(inputs, Tensor):
        flat.append(inputs)
    elif isinstance(inputs, list | tuple):
        for x in inputs:
            _tensors(x, flat)
    elif inputs is not None:
        flat.extend(x for x in tree_leaves(inputs) if isinstance(x, Tensor))
    return flat
