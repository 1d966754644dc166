"""Freed memory kept for the next allocation, for translating on the CPU (`keep_freed_memory`).

PyTorch's CPU tensors come from the C library's malloc, which keeps no cache of large blocks:
glibc maps a block above a threshold (at most 32 MiB) on its own and unmaps it when freed, and
gives back the top of its heap once more than twice that is free there. A beam search allocates
and frees blocks of megabytes at every step (a 512-row step's log-probabilities are 16 MB) and
per batch (its key and value caches), so the kernel hands out and zero-fills the same memory again
and again: 150,000-170,000 page faults and 0.35-0.4 s of system time per 1,000 sentences of the
quickstart model, a 4-9% longer translation (benchmarks/RESULTS.md). With blocks mapped only from
32 MiB and the heap trimmed only beyond 1 GiB, a search reuses what it freed (7,000-46,000 faults).
CTranslate2 keeps a caching allocator of its own on the CPU, Marian a preallocated workspace;
PyTorch's performance guide suggests preloading jemalloc or tcmalloc, which this does without.

glibc gives each thread that allocates an arena of its own (up to 8 per core), and each keeps its
freed memory: a server's event loop, search and preparing threads held 1.13-1.24 GB through a soak
of 8,000 mixed requests, creeping. With two arenas shared by all threads made after the model
loads, 1.16-1.17 GB from the second minute to the sixth, flat (MALLOC_ARENA_MAX=2 from the start:
1.01-1.05 GB; benchmarks/detail/serve_busy.md).

The settings are process-wide and cannot be undone: `translation.load_translator` makes them for a
CPU model. An operator's own malloc settings (MALLOC_*_ or GLIBC_TUNABLES in the environment) stay,
and other C libraries (musl, macOS) are left as they are.
"""

from __future__ import annotations

import ctypes
import functools
import os

_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8  # glibc's malloc.h
MAPPED_FROM = 32 << 20  # bytes: blocks at least this large are mapped on their own (glibc's ceiling)
TRIMMED_BEYOND = 1 << 30  # bytes free at the top of the heap before it is given back
ARENAS = 2  # arenas all threads share
_OPERATORS = ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_ARENA_MAX",
              "GLIBC_TUNABLES")


@functools.cache
def keep_freed_memory() -> bool:
    """Have glibc's malloc keep freed blocks for reuse (see the module's text). Whether it now does:
    False on another C library or where the environment sets malloc's behaviour already."""
    if any(name in os.environ for name in _OPERATORS):
        return False
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version  # noqa: B018 (glibc only)
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return False
    # The mapping threshold first: a trim threshold alone would fix the mapping threshold at its
    # starting 128 KiB, and every block above it would be mapped (ten times the page faults).
    settings = ((_M_MMAP_THRESHOLD, MAPPED_FROM), (_M_TRIM_THRESHOLD, TRIMMED_BEYOND), (_M_ARENA_MAX, ARENAS))
    return all(mallopt(option, value) for option, value in settings)
