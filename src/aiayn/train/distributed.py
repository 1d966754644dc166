"""Data-parallel training under torchrun: which rank this process is, and the few collective steps.

    torchrun --nproc-per-node 2 -m aiayn train --data DATA_DIR --out RUN_DIR

torchrun starts one process per device and sets RANK, WORLD_SIZE and LOCAL_RANK; without them a
process is rank 0 of 1 and nothing here communicates. Every rank computes the same sequence of
updates from (seed, epoch) and takes its own share of each update's batches (`share`); gradients
are averaged by DistributedDataParallel (`wrap`), and rank 0 alone writes checkpoints and logs.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import pickle
import re
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, TypeVar

import torch
import torch.distributed as dist
from torch import nn

from aiayn.errors import AiaynError

T = TypeVar("T")

# How long a rank waits in a collective call: rank 0 validating and writing a checkpoint, or a slow
# rank still reading its data, must not end a healthy run. A rank that dies ends the run at once
# (torchrun stops the others), so a long wait costs nothing there.
TIMEOUT = datetime.timedelta(hours=2)
# How long a collective call waits for gloo to let go of its tensors (well under a millisecond, measured).
LET_GO_S = 10.0


@dataclass(frozen=True)
class Ranks:
    rank: int = 0  # this process, 0 .. world - 1
    world: int = 1  # processes training together
    local: int = 0  # this process on its machine: the GPU it uses

    @property
    def main(self) -> bool:
        """Rank 0 writes checkpoints, logs and validation results."""
        return self.rank == 0


def from_environment() -> Ranks:
    """The ranks torchrun set in the environment (rank 0 of 1 without it)."""
    try:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        return Ranks(int(os.environ.get("RANK", "0")), world, int(os.environ.get("LOCAL_RANK", "0")))
    except ValueError as e:
        raise RuntimeError(f"torchrun's environment is not understood: {e}") from None


@contextlib.contextmanager
def process_group(ranks: Ranks, device: torch.device) -> Iterator[None]:
    """Join the other ranks for the duration (NCCL on GPUs, gloo on CPUs); nothing for one rank."""
    if ranks.world == 1 or dist.is_initialized():
        yield
        return
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, timeout=TIMEOUT, rank=ranks.rank, world_size=ranks.world,
                            device_id=device if device.type == "cuda" else None)
    try:
        yield
    finally:
        dist.destroy_process_group()


class LostRank(AiaynError):
    """Another rank of the run stopped (killed, crashed, its machine gone) while this one waited on it."""


@contextlib.contextmanager
def reporting_lost_ranks(ranks: Ranks, resume_hint: str) -> Iterator[None]:
    """Turn the transport's error when another rank is gone into one line that says what to do."""
    try:
        yield
    except RuntimeError as e:
        if ranks.world == 1 or not (isinstance(e, dist.DistError) or "gloo" in str(e) or "NCCL" in str(e)):
            raise
        said = re.sub(r"^\[[^]]*\] ", "", str(e).strip())  # without gloo's source file
        said = said.split(". ")[0].splitlines()[0][:160]
        raise LostRank(f"rank {ranks.rank}: another rank of this run is gone ({said}); the run stops. Its "
                       f"last complete checkpoint is kept: {resume_hint}") from e


def share(batches: list[T], ranks: Ranks) -> list[tuple[T, bool]]:
    """This rank's share of one update's batches: every world-th one, starting at its rank, as
    (batch, True). Ranks with one batch fewer than others add (a batch, False), a filler whose
    gradient counts zero, so that every rank takes part in the same number of gradient exchanges."""
    mine = [(b, True) for b in batches[ranks.rank::ranks.world]]
    rounds = -(-len(batches) // ranks.world)
    return mine + [(batches[0], False)] * (rounds - len(mine))


def wrap(module: nn.Module, ranks: Ranks, device: torch.device) -> nn.Module:
    """`module` under DistributedDataParallel when there are several ranks, else as it is."""
    if ranks.world == 1:
        return module
    device_ids = [device.index] if device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(module, device_ids=device_ids)


def no_sync(module: nn.Module) -> contextlib.AbstractContextManager:
    """Accumulate gradients without exchanging them (every batch of an update but its last)."""
    if isinstance(module, nn.parallel.DistributedDataParallel):
        return module.no_sync()
    return contextlib.nullcontext()


def all_sum(values: list[float], ranks: Ranks) -> list[float]:
    """The sums of `values` over all ranks."""
    if ranks.world == 1:
        return values
    device = _device(ranks)
    sums, = _collective(lambda t: dist.all_reduce(t[0]),
                        lambda: [torch.tensor(values, dtype=torch.float64, device=device)])
    return sums.tolist()


def gather(value: Any, ranks: Ranks) -> list[Any]:
    """`value` of every rank, in rank order, on every rank (pickled, as `all_gather_object` does)."""
    if ranks.world == 1:
        return [value]
    device, mine = _device(ranks), pickle.dumps(value)
    sizes = [int(n) for n in _all_gather(lambda: torch.tensor([len(mine)], device=device), ranks)]

    def padded() -> torch.Tensor:  # [max(sizes)] bytes
        tensor = torch.zeros(max(sizes), dtype=torch.uint8, device=device)
        tensor[:len(mine)] = torch.frombuffer(bytearray(mine), dtype=torch.uint8)
        return tensor

    gathered = _all_gather(padded, ranks)
    return [pickle.loads(bytes(data[:n].cpu().numpy())) for data, n in zip(gathered, sizes, strict=True)]


def _all_gather(make: Callable[[], torch.Tensor], ranks: Ranks) -> list[torch.Tensor]:
    """The tensor `make()` of every rank, in rank order (of one shape on every rank)."""
    def tensors() -> list[torch.Tensor]:  # this rank's, then one for each rank's
        mine = make()
        return [mine, *(torch.empty_like(mine) for _ in range(ranks.world))]

    return _collective(lambda t: dist.all_gather(t[1:], t[0]), tensors)[1:]


def _device(ranks: Ranks) -> torch.device:
    """Where a collective's tensors live: this rank's GPU under NCCL, else the CPU."""
    return torch.device("cuda", ranks.local) if dist.get_backend() == "nccl" else torch.device("cpu")


def _collective(call: Callable[[list[torch.Tensor]], Any], make: Callable[[], list[torch.Tensor]]
                ) -> list[torch.Tensor]:
    """Copies of the tensors `make()` after `call(tensors)`, a collective call that returns when its
    result is in them: returned once gloo has let go of the originals.

    Gloo's worker threads often free a call's tensors a moment after the call returns (a tenth to a
    half of calls, measured), taking the GIL to free their Python objects. Should that moment fall
    after the last call of a rank that then exits, the thread meets an interpreter shutting down and
    the process aborts ("terminate called without an active exception"); so each call waits for it
    here, the tensors made and held here alone.
    """
    tensors = make()
    call(tensors)
    copies = [t.clone() for t in tensors]
    if dist.get_backend() == "gloo":
        held = [weakref.ref(t) for t in tensors]
        del tensors
        deadline = time.monotonic() + LET_GO_S
        while any(ref() is not None for ref in held) and time.monotonic() < deadline:
            time.sleep(0.0001)  # without the GIL, which the worker thread takes to let go
    return copies
