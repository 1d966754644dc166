"""The server's search threads: how many, on how many CPU threads each, and the models' warm-up on
them. A search thread does not wait for a compiled step missing from the cache: the warm-up gives the
steps to other processes to compile and searches eagerly meanwhile, and `take_over` says when the
compiled steps are in use (translation.compiling)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Collection, Iterable
from concurrent.futures import Executor, ThreadPoolExecutor

import torch

from aiayn.config import ServeConfig
from aiayn.translation import Translator, compiling

TAKE_OVER_ROUNDS = 4  # warm-ups after other processes' compiles, before the steps left compile here


def searchers(workers: int = 1, threads: int | None = None) -> ThreadPoolExecutor:
    """The threads that run the server's models, `workers` of them, each with `threads` CPU threads of
    its own (None: as set already). Load the models on them too (`submit`): PyTorch's CPU threads form
    one OpenMP pool per thread that runs operations, and a second pool (the main thread's, from
    loading) beside a search on two threads made a 2-vCPU machine search a sentence much slower (the
    pools' threads then sleep between operations instead of spinning; benchmarks/detail/serve_load.md)."""
    return ThreadPoolExecutor(max_workers=workers, thread_name_prefix="aiayn-search",
                              initializer=_searcher, initargs=(threads,))


def _searcher(threads: int | None) -> None:
    """A search thread: `threads` CPU threads (None: as set already); a compiled step not in the cache
    yet is compiled in another process while its searches run eagerly (`compiling.wait_for_compiles`)."""
    if threads is not None:
        torch.set_num_threads(threads)
    compiling.wait_for_compiles(False)


def workers_for(config: ServeConfig, device: str, threads: int, compiled: bool = False) -> int:
    """How many searches run at once (`ServeConfig.workers`; 0: chosen here): two on a CPU of two or
    more threads, else one: on a GPU, without batching (one request at a time), and with compiled
    decoder steps, which run one call at a time (two one-thread searches of a compiled model made
    no more sentences per second than one; one on two threads more: benchmarks/detail/serve_load.md)."""
    if not config.batching:
        return 1
    if config.workers:
        return config.workers
    return 2 if device == "cpu" and threads >= 2 and not compiled else 1


def warm_up(translators: Iterable[Translator], say: bool = True, wait: bool = False) -> int:
    """Run each model once, and with a compiled decoder step, a batch at every row count that the
    server's batches (up to the search's batch size) can reach, so that each step is loaded, or
    compiled: here (`wait`, or where no other process can compile), else in other processes, the
    searches meanwhile eager. Returns how many steps were not waited for; `say`: how long it took."""
    started, steps, deferred = time.perf_counter(), 0, compiling.not_waited_for()
    models = {id(t.model) if t.model is not None else id(t): t for t in translators}  # a multilingual
    compiling.wait_for_compiles(wait)
    try:
        for translator in models.values():  # model's directions share one model: warmed once
            translator.warm_up()
            steps += translator.compiled_steps
    finally:
        compiling.wait_for_compiles(False)
    deferred = compiling.not_waited_for() - deferred
    if say:
        held = f" ({steps} compiled graphs)" if steps else ""
        later = "; searching eagerly while other processes compile the decoder steps" if deferred else ""
        print(f"warmed up in {time.perf_counter() - started:.1f} s{held}{later}", flush=True)
    return deferred


async def take_over(executor: Executor, translators: Collection[Translator]) -> None:
    """After a warm-up that did not wait for some compiled steps: each time the other processes
    have compiled what they were given, the warm-up again (it loads what is stored, and gives out
    what its searches need next), until no step is missing; after `TAKE_OVER_ROUNDS`, the steps
    still missing are compiled on the search thread, as a warm-up with no other process would."""
    loop, started = asyncio.get_running_loop(), time.perf_counter()
    try:
        for _ in range(TAKE_OVER_ROUNDS):
            while compiling.under_way():
                await asyncio.sleep(0.25)
            if not await loop.run_in_executor(executor, warm_up, translators, False):
                break
        else:
            await loop.run_in_executor(executor, warm_up, translators, False, True)
    except Exception as e:  # any: the searches stay eager where a step is missing, as they were
        print(f"the compiled decoder steps could not all be made ({type(e).__name__}: {e}); searching "
              "without those missing", flush=True)
        return
    steps = sum(t.compiled_steps for t in translators)
    print(f"compiled decoder steps in use ({steps} graphs), {time.perf_counter() - started:.1f} s after "
          "the warm-up", flush=True)
