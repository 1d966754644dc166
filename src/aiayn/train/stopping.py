"""When a run stops: at its limits (`limit_reached`: updates, epochs, minutes), on Ctrl-C or SIGTERM
(`GracefulStop`: after the update, saving; a second one at once), or early.

Early stopping: a run stops once its validation score has not improved for `patience`
validations in a row, as fairseq's `--patience`, Marian's `--early-stopping` and OpenNMT-py's
`-early_stopping` do.

A pure function of the validation history, (step, value) pairs of one metric: validation loss (lower
is better), or BLEU or chrF (higher is better). A value improves on the best so far when it is
better by more than `min_delta`; the best checkpoint is the one of the best value (checkpoints/best).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from tqdm import tqdm

from aiayn.config import TrainConfig

METRICS = ("loss", "bleu", "chrf")  # what a run can stop by: validation loss, BLEU or chrF


@dataclass(frozen=True)
class Patience:
    """When a run stops by itself."""

    patience: int  # validations in a row without improvement that stop the run; 0: never
    metric: str = "bleu"  # one of METRICS
    min_delta: float = 0.0  # an improvement is a change by more than this, the right way

    def better(self, value: float, than: float, margin: float | None = None) -> bool:
        """Whether `value` improves on `than` by more than `margin` (default: `min_delta`)."""
        margin = self.min_delta if margin is None else margin
        return value < than - margin if self.metric == "loss" else value > than + margin


def best(history: Sequence[tuple[int, float]], rule: Patience) -> tuple[int, float] | None:
    """The first (step, value) of `history` that no later value improves on (by any margin)."""
    found = None
    for step, value in history:
        if found is None or rule.better(value, found[1], margin=0.0):
            found = (step, value)
    return found


def since_improvement(history: Sequence[tuple[int, float]], rule: Patience) -> int:
    """Validations after the last one that improved (by more than `min_delta`) on all before it."""
    mark, count = None, 0
    for _, value in history:
        if mark is None or rule.better(value, mark):
            mark, count = value, 0
        else:
            count += 1
    return count


def stop_reason(history: Sequence[tuple[int, float]], rule: Patience) -> str | None:
    """Why the run stops after the last validation of `history`, or None: it goes on."""
    if not rule.patience or since_improvement(history, rule) < rule.patience:
        return None
    step, value = best(history, rule)  # type: ignore[misc]
    margin = f" by more than {rule.min_delta:g}" if rule.min_delta else ""
    return (f"--patience {rule.patience}: validation {rule.metric} has not improved{margin} for "
            f"{rule.patience} validations; the best, {value:.4g}, was at step {step:,}")


class Stopped(KeyboardInterrupt):
    """A second Ctrl-C or SIGTERM: stop at once, without saving."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class GracefulStop:
    """The first Ctrl-C (or SIGTERM) asks the loop to stop after the current update and save;
    `signum` says which signal asked. A second one stops at once (`Stopped`). Python delivers
    signals to the main thread only: training in another thread leaves them as they are."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def __enter__(self) -> GracefulStop:
        on_main = threading.current_thread() is threading.main_thread()
        self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGINT, signal.SIGTERM) if on_main}
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        if self.requested:
            raise Stopped(signum)
        self.signum = signum
        tqdm.write("stopping after this update and saving a checkpoint (again to stop at once)")

    def __exit__(self, *exc: Any) -> None:
        for s, handler in self._old.items():
            signal.signal(s, handler)


def limit_reached(config: TrainConfig, step: int, epoch: int, minutes: float) -> str | None:
    """Which of the run's limits (`--max-steps`, `--max-epochs`, `--max-minutes`) is reached, if any."""
    limits = (("--max-steps", config.max_steps, step), ("--max-epochs", config.max_epochs, epoch),
              ("--max-minutes", config.max_minutes, minutes))
    for flag, limit, value in limits:
        if limit and value >= limit:
            return f"{flag} {limit:g}"
    return None
