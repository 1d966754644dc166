"""Freed memory kept for the next allocation, for translating on the CPU (`keep_freed_memory`).

PyTorch's CPU tensors come from the C library's malloc, which keeps no cache of large blocks:
glibc maps a block above a threshold (at most 32 MiB) on its own and unmaps it when freed, and
gives back the top of its heap once more than twice that is free there. A beam search allocates
and frees blocks of megabytes at every step (a 512-row step's log-probabilities, 512 x 8,000
floats) and per batch (its key and value caches), so the kernel hands out and zero-fills the same
memory again and again: many page faults and seconds of system time, a longer translation
(benchmarks/detail/decode_speed.md). With blocks mapped only from 32 MiB and the heap trimmed only
beyond 1 GiB, a search reuses what it freed.
CTranslate2 keeps a caching allocator of its own on the CPU, Marian a preallocated workspace;
PyTorch's performance guide suggests preloading jemalloc or tcmalloc, which this does without.

glibc gives each thread that allocates an arena of its own (up to 8 per core), and each keeps its
freed memory: a server's event loop, search and preparing threads held ever more through a soak of
mixed requests. With two arenas shared by all threads made after the model loads, the memory held
stays flat (benchmarks/detail/serve_busy.md).

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
