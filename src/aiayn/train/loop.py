"""The training loop: one `train_step`, one `evaluate`, and the bookkeeping around them.

The loop knows nothing about the model's insides: it needs `model(src, tgt_in) -> logits`.
Everything that decides what happens next (optimiser state, step, data position, RNG states)
goes into each checkpoint, so a resumed run continues exactly as if it had never stopped.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import signal
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from aiayn import checkpoint
from aiayn.config import ConfigError, DataConfig, DecodeConfig, TrainConfig
from aiayn.data.batching import Batch, TokenizedCorpus, collate, make_batches
from aiayn.data.mixing import Mix
from aiayn.data.readers import DataError
from aiayn.data.subwords import Resampler
from aiayn.decoding.translator import translate_ids
from aiayn.devices import resolve_device
from aiayn.evaluate import score as sacrebleu_score
from aiayn.evaluate import tokenizer_for
from aiayn.model import Transformer
from aiayn.tokenizer import Tokenizer
from aiayn.train import distributed
from aiayn.train.distributed import Ranks
from aiayn.train.ema import EMA
from aiayn.train.logs import MetricsLog, Window
from aiayn.train.optim import learning_rate, make_optimizer
from aiayn.train.order import Position, rng_state, set_rng_state, updates
from aiayn.train.step import Criterion, evaluate, train_step
from aiayn.train.stopping import METRICS, GracefulStop, Patience, best, limit_reached, stop_reason

ValidData = TokenizedCorpus | dict[str, TokenizedCorpus] | None  # one set, or one per direction


def train(model: Transformer, tokenizer: Tokenizer, train_data: TokenizedCorpus | Mix,
          valid_data: ValidData, data: DataConfig, config: TrainConfig,
          run_dir: str | Path, state: dict[str, Any] | None = None, ranks: Ranks | None = None
          ) -> dict[str, Any]:
    """Train until a limit in `config` is reached, or a Ctrl-C or SIGTERM asks to stop; resume from
    `state` when given. With several `ranks` (torchrun), this process trains its share of every
    update, and rank 0 alone writes.

    Returns the final training state (as saved in the last checkpoint) with the last metrics, and
    `stopped_by`: the signal that stopped the run early, or None.
    """
    if not len(train_data):
        raise DataError("no training pairs: every pair was dropped (empty, or over the length limit)")
    ranks = ranks or Ranks()
    device = _rank_device(resolve_device(config.device), ranks)
    hint = f"continue with `torchrun ... -m aiayn train --out {run_dir} --resume`"
    with distributed.process_group(ranks, device), distributed.reporting_lost_ranks(ranks, hint):
        return _train(model, tokenizer, train_data, valid_data, data, config, Path(run_dir), state, ranks,
                      device)


def _rank_device(device: torch.device, ranks: Ranks) -> torch.device:
    """Under torchrun each rank of a machine takes its own GPU (LOCAL_RANK)."""
    if device.type != "cuda" or ranks.world == 1:
        return device
    if ranks.local >= torch.cuda.device_count():
        raise ConfigError(f"rank {ranks.rank} wants GPU {ranks.local}, this machine has "
                          f"{torch.cuda.device_count()}: start at most that many processes per node")
    torch.cuda.set_device(ranks.local)
    return torch.device("cuda", ranks.local)


class _Run:
    """One run's state and its bookkeeping (checkpoints, validation, metrics), for `_train`'s loop:
    the step, the data position, the optimiser, the validation scores so far (which pick the best
    checkpoint and may stop the run), and the time trained so far."""

    def __init__(self, model: Transformer, tokenizer: Tokenizer, valid_data: ValidData,
                 data: DataConfig, config: TrainConfig, run_dir: Path, ranks: Ranks, device: torch.device,
                 ) -> None:
        self.model, self.tokenizer, self.data = model, tokenizer, data
        # name -> corpus: "" for the one validation set, a direction (en-de) each for a multilingual run
        self.valid_sets = ({} if valid_data is None else valid_data if isinstance(valid_data, dict)
                           else {"": valid_data})
        self.config, self.run_dir, self.ranks, self.device = config, run_dir, ranks, device
        model.to(device)
        # A collective call: every rank has read its data and built its model before rank 0 writes.
        self.criterion = distributed.wrap(Criterion(model, config.label_smoothing, tokenizer.pad_id), ranks,
                                          device)
        self.optimizer = make_optimizer(model, config)
        # --bpe-dropout: each epoch draws its own pieces of every training sentence (data/subwords.py)
        self.resampler = (Resampler(tokenizer, config.bpe_dropout, config.seed, data.max_len)
                          if config.bpe_dropout else None)
        self.ema = EMA(model, config.ema_decay) if config.ema_decay else None  # --ema-decay (train/ema.py)
        self.step, self.position, self.elapsed, self.best_bleu = 0, Position(), 0.0, float("-inf")
        self.scores: dict[str, list[tuple[int, float]]] = {m: [] for m in METRICS}  # (step, value) each
        self.rule = Patience(config.patience, config.stop_metric, config.min_delta)
        self.early_stop: str | None = None  # why it stopped by itself (--patience): in its last checkpoint
        self.log = MetricsLog(run_dir / "metrics.jsonl")
        self.started = time.perf_counter()

    def begin(self, state: dict[str, Any] | None) -> None:
        """Start afresh, or where a checkpoint's `state` left off; rank 0 prepares the run directory."""
        ranks, tokenizer = self.ranks, self.tokenizer
        if state is not None:
            self.optimizer.load_state_dict(state["optimizer"])
            self.step, self.position = state["step"], Position(**state["position"])
            self.elapsed, self.best_bleu = state["elapsed"], state.get("best_bleu", self.best_bleu)
            self.scores.update({m: [tuple(x) for x in v] for m, v in state.get("scores", {}).items()})
            if self.ema and "weights" in (state.get("ema") or {}):  # else it starts from the weights
                self.ema.load(state["ema"])
        _seed_rank(state, self.config.seed, self.step, ranks)
        if ranks.main:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            for leftover in checkpoint.clean_leftovers(self.run_dir):
                tqdm.write(f"removed {leftover}, a checkpoint left half-written by a process that was killed")
            self.log.keep_until(self.step if state is not None else -1)  # a fresh start keeps none
        self.valid_batches = {} if not ranks.main else {name: [
            collate(b, corpus, tokenizer.pad_id, self.bos_id, tokenizer.eos_id)
            for b in make_batches(*corpus.lengths(), self.data.batch_tokens, shuffle=False)]
            for name, corpus in self.valid_sets.items() if len(corpus)}
        self.started = time.perf_counter()

    @property
    def bos_id(self) -> int | None:
        """What starts the decoder: <s>, or None where each target's first token is its language
        (`collate`, data/multilingual.py)."""
        return None if self.data.told_in_decoder else self.tokenizer.bos_id

    def seconds(self) -> float:
        """Time trained, over every session of the run."""
        return self.elapsed + time.perf_counter() - self.started

    def limit(self) -> str | None:
        """The run's limit reached, if any."""
        return limit_reached(self.config, self.step, self.position.epoch, self.seconds() / 60)

    def due(self, interval: int) -> bool:
        """Whether something done every `interval` updates (0: never) is due after this one."""
        return bool(interval) and self.step % interval == 0

    def own_batches(self, group: list[np.ndarray], corpus: TokenizedCorpus) -> list[Batch]:
        """This rank's share of an update of `corpus`, padded, in the pieces this epoch draws (with
        --bpe-dropout); a filler counts no tokens."""
        t = self.tokenizer
        if self.resampler:
            corpus = self.resampler.drawn(corpus, self.position.epoch)
        batches = []
        for indices, real in distributed.share(group, self.ranks):
            batch = collate(indices, corpus, t.pad_id, self.bos_id, t.eos_id)
            batches.append(batch if real else dataclasses.replace(batch, n_tgt_tokens=0))
        return batches

    def snapshot(self, rng_states: list[dict[str, Any]]) -> dict[str, Any]:
        """The training state a checkpoint holds."""
        return {"step": self.step, "position": vars(self.position).copy(),
                "optimizer": self.optimizer.state_dict(), "rng": rng_states[0],
                "rng_ranks": rng_states if self.ranks.world > 1 else None, "elapsed": self.seconds(),
                "best_bleu": self.best_bleu, "early_stop": self.early_stop,
                "scores": {m: [list(x) for x in v] for m, v in self.scores.items()},
                "ema": self.ema.state() if self.ema else None}

    def validated(self) -> contextlib.AbstractContextManager:
        """The weights that validation scores and checkpoints/best keeps: the moving average with
        --ema-decay, else the model's own."""
        return self.ema.applied(self.model) if self.ema else contextlib.nullcontext()

    def save(self) -> None:
        """Every rank calls this (their RNG states go into the checkpoint); rank 0 writes it."""
        rng_states = distributed.gather(rng_state(), self.ranks)
        if self.ranks.main:
            checkpoint.save(checkpoint.step_path(self.run_dir, self.step), self.model, self.tokenizer,
                            self.data, self.config, self.snapshot(rng_states),
                            ema=self.ema.model(self.model) if self.ema else None)
            checkpoint.prune(self.run_dir, self.config.keep_checkpoints)

    def validate(self) -> dict[str, float] | None:
        """Loss and perplexity on the validation set (rank 0)."""
        if not self.valid_batches:
            return None
        c = self.config
        with self.validated():
            each = {name: evaluate(self.model, batches, c.label_smoothing, self.tokenizer.pad_id, self.device,
                                   c.precision) for name, batches in self.valid_batches.items()}
        result = _pooled(each)
        self.log.write("valid", step=self.step, **result, **_directions(each))
        each_loss = "".join(f" | {name} {r['loss']:.3f}" for name, r in each.items() if name)
        tqdm.write(f"step {self.step:,} | valid loss {result['loss']:.3f} | nll {result['nll']:.3f} "
                   f"| ppl {result['ppl']:.2f}{each_loss}" + self.scored("loss", result["loss"]))
        return result

    def validate_bleu(self) -> float | None:
        """sacreBLEU and chrF of the validation set with beam search (rank 0); -> the BLEU."""
        if not (self.valid_batches and self.ranks.main):
            return None
        each = {}
        for name in self.valid_batches:
            corpus = self.valid_sets[name]
            targets = list(corpus.target)
            start = -1 if self.bos_id is not None else targets[0][0]  # the language the targets begin with
            if start >= 0:
                targets = [t[1:] for t in targets]
            decode = DecodeConfig(beam_size=self.config.bleu_beam, decoder_start=start)
            with self.validated():
                translations = translate_ids(self.model, self.tokenizer, list(corpus.source), decode, False)
            references = [self.tokenizer.decode(t) for t in targets]
            target = name.partition("-")[2] or self.data.tgt_lang
            scores = sacrebleu_score([t[0].text for t in translations], references, tokenizer_for(target))
            each[name] = {"bleu": scores.bleu, "chrf": scores.chrf}
        bleu, chrf = (sum(r[m] for r in each.values()) / len(each) for m in ("bleu", "chrf"))  # the mean
        self.best_bleu = max(self.best_bleu, bleu)
        self.log.write("bleu", step=self.step, bleu=bleu, chrf=chrf, best_bleu=self.best_bleu,
                       **_directions(each))
        noted = self.scored("bleu", bleu) + self.scored("chrf", chrf)
        each_bleu = "".join(f" | {name} {r['bleu']:.2f}" for name, r in each.items() if name)
        tqdm.write(f"step {self.step:,} | valid BLEU {bleu:.2f}, chrF {chrf:.2f} (beam "
                   f"{self.config.bleu_beam}){each_bleu}{noted}")
        return bleu

    def scored(self, metric: str, value: float) -> str:
        """A validation score into the run's history; when it is the stop metric's best so far, the
        model is saved as checkpoints/best. -> what to add to the validation's line."""
        before = best(self.scores[metric], self.rule) if metric == self.rule.metric else None
        self.scores[metric].append((self.step, value))
        if metric != self.rule.metric:
            return ""
        if before is not None and not self.rule.better(value, before[1], margin=0.0):
            return f" | best {metric} {before[1]:.4g} at step {before[0]:,}"
        with self.validated():  # what was scored
            checkpoint.save(self.run_dir / "checkpoints" / "best", self.model, self.tokenizer, self.data,
                            self.config, self.snapshot([rng_state()]))
        return " | new best, saved as checkpoints/best"

    def stop_reason(self) -> str | None:
        """Why the run stops by itself after this validation (`--patience`), or None."""
        return stop_reason(self.scores[self.rule.metric], self.rule)


def _pooled(each: dict[str, dict[str, float]]) -> dict[str, float]:
    """The validation of several sets as one: loss and NLL per token over all their tokens."""
    tokens = sum(r["tokens"] for r in each.values())
    loss, nll = (sum(r[m] * r["tokens"] for r in each.values()) / tokens for m in ("loss", "nll"))
    return {"loss": loss, "nll": nll, "ppl": math.exp(min(nll, 50.0)), "tokens": tokens}


def _directions(each: dict[str, dict[str, float]]) -> dict[str, Any]:
    """What a metrics record adds for several validation sets: each one's figures."""
    return {"directions": each} if len(each) > 1 or "" not in each else {}


def _train(model: Transformer, tokenizer: Tokenizer, train_data: TokenizedCorpus | Mix,
           valid_data: ValidData, data: DataConfig, config: TrainConfig, run_dir: Path,
           state: dict[str, Any] | None, ranks: Ranks, device: torch.device) -> dict[str, Any]:
    run = _Run(model, tokenizer, valid_data, data, config, run_dir, ranks, device)
    run.begin(state)
    metrics: dict[str, Any] = {}
    mix = train_data if isinstance(train_data, Mix) else Mix([("train", train_data)])
    lengths = (lambda epoch: run.resampler.drawn(mix, epoch).lengths()) if run.resampler else mix.lengths()
    stream = updates(lengths, data, config, run.position, min_batches=ranks.world, sample=mix.sample)
    refresh = 1.0 if sys.stderr.isatty() else 30.0  # seconds; a log file needs fewer bar lines
    if state is None and config.init_from:
        run.validate()  # where a run started from a model begins: its parent's validation loss
    with GracefulStop() as stop, tqdm(total=config.max_steps or None, initial=run.step, unit="step",
                                      dynamic_ncols=True, mininterval=refresh, disable=not ranks.main) as bar:
        window = Window()
        stopping = limit_reached(config, run.step, run.position.epoch, run.elapsed / 60) is not None
        while not stopping:
            run.position, group, tokens = next(stream)
            run.step += 1
            lr = learning_rate(run.step, model.config.d_model, config.warmup_steps, config.lr_scale,
                               config.lr_decay, config.max_steps)
            batches = run.own_batches(group, mix)
            if run.resampler:  # drawn pieces: the update's target tokens counted, not foretold
                tokens = int(distributed.all_sum([sum(b.n_tgt_tokens for b in batches)], ranks)[0])
            metrics = train_step(run.criterion, batches, run.optimizer, lr, config, device, tokens,
                                 ranks.world)
            if run.ema:
                run.ema.update(model)
            # The ranks stop together: this rank's reasons (a signal, a limit) are votes.
            votes = [metrics["loss"], metrics["nll"], float(stop.requested or run.limit() is not None)]
            loss, nll, stop_votes = distributed.all_sum(votes, ranks)
            metrics.update(loss=loss, nll=nll)
            stopping = stop_votes > 0
            window.add(metrics)
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{window.speed():,.0f}",
                            epoch=run.position.epoch, refresh=False)
            if run.due(config.log_every):
                if ranks.main:
                    run.log.write("train", step=run.step, epoch=run.position.epoch, lr=lr,
                                  elapsed_s=run.seconds(), **window.summary())
                window = Window()
            if run.due(config.valid_every):
                metrics["valid"] = run.validate()
            if run.due(config.bleu_every):
                metrics["bleu"] = run.validate_bleu()
            watched = config.valid_every if run.rule.metric == "loss" else config.bleu_every
            if config.patience and run.due(watched):
                reason = run.stop_reason() if ranks.main else None  # rank 0 validates; all stop together
                if distributed.all_sum([float(reason is not None)], ranks)[0] > 0:
                    stopping, run.early_stop = True, reason or "--patience (rank 0's validation)"
            if run.due(config.save_every):
                run.save()
        # At the end, whatever the last update did not already do.
        if not run.due(config.valid_every):
            metrics["valid"] = run.validate()
        if config.bleu_every and not run.due(config.bleu_every):
            metrics["bleu"] = run.validate_bleu()
        if not run.due(config.save_every):
            run.save()
        if ranks.main:
            signalled = signal.Signals(stop.signum).name if stop.signum else None
            run.log.write("stop", step=run.step, reason=run.early_stop or run.limit() or signalled)
            if run.early_stop:
                tqdm.write(f"stopped early at step {run.step:,}: {run.early_stop}")
    final = run.snapshot([rng_state()])
    final["metrics"], final["stopped_by"] = metrics, stop.signum
    return final


def _seed_rank(state: dict[str, Any] | None, seed: int, step: int, ranks: Ranks) -> None:
    """Each rank's own random stream (dropout): a resumed run's saved one, else, for the ranks after
    the first, one of their own (rank 0 goes on with the stream a single process would have)."""
    saved = (state or {}).get("rng_ranks") or ([state["rng"]] if state else [])
    if ranks.rank < len(saved):
        set_rng_state(saved[ranks.rank])
    elif ranks.rank > 0:
        torch.manual_seed(np.random.SeedSequence([seed, ranks.rank, step]).generate_state(1)[0])

