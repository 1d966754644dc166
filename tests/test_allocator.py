"""Freed memory kept for reuse: a beam search on the CPU stops making the kernel zero-fill the same
pages at every step. Each check runs in a fresh process: malloc's settings are process-wide."""

import ctypes
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _glibc() -> bool:
    try:
        return hasattr(ctypes.CDLL(None), "gnu_get_libc_version")
    except OSError:
        return False


needs_glibc = pytest.mark.skipif(not _glibc(), reason="malloc's settings are glibc's")

# A search whose log-probabilities (256 rows x 16,000 tokens, 16 MB a step) and caches are large
# blocks: the median faults of five identical searches, before and after the call (each after two
# searches to warm up: the heap takes a search or two to settle).
SEARCH = """
import resource, statistics, torch
from aiayn import allocator
from aiayn.decoding.beam import beam_search
from tests.conftest import random_ids, tiny_model

model, src = tiny_model(vocab_size=16000), random_ids(64, 12, vocab=16000)
def faults_of_a_search():
    faults = []
    for _ in range(7):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        beam_search(model, src, 4, max_lengths=torch.full((64,), 10))
        faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
    return statistics.median(faults[2:])
alone = faults_of_a_search()
kept = allocator.keep_freed_memory()
print(alone, kept, faults_of_a_search())
"""


def _run(code: str, **environ: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                          env={**env, **environ})
    return done.stdout.split()


@needs_glibc
def test_a_search_reuses_the_memory_it_freed_once_it_is_kept():
    alone, kept, after = _run(SEARCH)
    assert kept == "True"
    # 16 MB of log-probabilities alone is 4,096 pages; a search that reuses its memory touches no new
    # pages once warm. (With glibc's defaults, about 40,000 faults a search: `alone`.)
    assert float(after) < 500, (alone, after)


# Six threads alive at once, each allocating: glibc gives each an arena of its own unless they are
# capped. malloc_info lists the arenas (<heap nr=...>).
THREADS = """
import ctypes, sys, threading
from aiayn import allocator
if sys.argv[1:] == ["kept"]:
    allocator.keep_freed_memory()
barrier, held = threading.Barrier(6), []
def allocate():
    barrier.wait()
    held.append([bytearray(1 << 20) for _ in range(4)])
    barrier.wait()
threads = [threading.Thread(target=allocate) for _ in range(6)]
for t in threads: t.start()
for t in threads: t.join()
libc = ctypes.CDLL(None)
libc.open_memstream.restype = ctypes.c_void_p
text, size = ctypes.c_char_p(), ctypes.c_size_t()
stream = ctypes.c_void_p(libc.open_memstream(ctypes.byref(text), ctypes.byref(size)))
libc.malloc_info(0, stream)
libc.fclose(stream)
print(text.value.decode().count("<heap nr="))
"""


@needs_glibc
def test_threads_share_two_arenas_once_freed_memory_is_kept():
    alone = int(_run(THREADS.replace("sys.argv[1:]", '["alone"]'))[0])
    kept = int(_run(THREADS.replace("sys.argv[1:]", '["kept"]'))[0])
    assert kept <= 2 < alone, (alone, kept)


@needs_glibc
def test_an_operators_own_malloc_settings_stay():
    out = _run("from aiayn import allocator; print(allocator.keep_freed_memory())",
               MALLOC_TRIM_THRESHOLD_="1000000")
    assert out == ["False"]


@needs_glibc
def test_loading_a_translator_for_the_cpu_keeps_freed_memory(trained_run):
    code = ("import aiayn, functools; from aiayn import allocator; "
            f"aiayn.load_translator({str(trained_run)!r}, device='cpu'); "
            "print(allocator.keep_freed_memory.cache_info().currsize)")
    assert _run(code) == ["1"]
