"""Batching across requests: the sentences of concurrent requests are searched together.

A request puts its sentences in the queue (`submit`) and awaits their futures. One task (`run`)
takes the oldest sentence and gathers the others waiting with the same search (language pair
and options), oldest first, until they hold `max_batch_tokens` source tokens, or the first has
waited `max_wait_ms`, or no other request is on its way (`arriving`: one client alone never
waits). After a search, the next also waits up to `return_wait_ms` for the clients it answered:
many send their next sentence at once, and those answered together would otherwise come back to
find the others' search under way, splitting the clients into two half-size batches for good
(32 clients: searches of 16 sentences without the wait, 24-30 with it; benchmarks/RESULTS.md).
The search runs in a worker thread, so the event loop keeps accepting requests while the model
computes, and the next batch gathers meanwhile. Several workers (`ServeConfig.workers`) each
search a batch of their own at once; beside a running search, the next starts once half as many
sentences wait (or that search ends): on a busy server an idle worker would otherwise take one
sentence at a time. A sentence whose request gave up (a timeout, a client gone) leaves the queue
unsearched. The search of a sentence does not depend on which others share its batch
(decoding/translator.py), so a sentence served here gets what `aiayn translate` gives it. Without
batching, one request is searched at a time.
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import time
from collections.abc import Callable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from aiayn.config import ServeConfig
from aiayn.translation import Segments, Translation, Translator


class QueueFull(Exception):
    """More sentences are waiting than the server accepts (`max_queue`)."""


@dataclass(frozen=True)
class Search:
    """What a sentence asks for; sentences are batched only with others asking the same."""

    pair: tuple[str, str]  # (source, target) language
    options: tuple[tuple[str, Any], ...] = ()  # DecodeConfig fields set by the request, sorted
    attention: bool = False


@dataclass
class _Waiting:
    text: str
    segments: Segments  # its sentences and their ids (cut once, when the request's limits were checked)
    search: Search
    request: int
    future: asyncio.Future = field(repr=False)
    since: float = 0.0  # event-loop time it arrived

    @property
    def tokens(self) -> int:  # source tokens, for the batch's budget
        return self.segments.tokens


@dataclass
class BatchStats:
    """What one search did, for the metrics."""

    sentences: int
    requests: int
    output_tokens: int
    seconds: float


class Batcher:
    """Gathers sentences into searches and runs them on `executor`, `workers` searches at once (one
    per thread of the executor). `on_batch` is told about each search; `queued` is how many
    sentences wait."""

    def __init__(self, translators: dict[tuple[str, str], Translator], config: ServeConfig,
                 executor: Executor, on_batch: Callable[[BatchStats], None] = lambda stats: None,
                 workers: int = 1) -> None:
        self.translators, self.config, self.executor, self.on_batch = translators, config, executor, on_batch
        self.workers = workers
        self._searching = 0  # sentences in the searches running now
        self._queue: collections.deque[_Waiting] = collections.deque()
        self._submitted = asyncio.Event()
        self._requests = itertools.count()
        self.arriving = 0  # requests received and not yet submitted (the server counts them)
        self._answered_at, self._answered = float("-inf"), 0  # when the last search ended; its requests
        self._since_answer = 0  # requests submitted since then

    @property
    def queued(self) -> int:
        """Sentences waiting (not those withdrawn)."""
        return sum(not w.future.done() for w in self._queue)

    def submit(self, texts: list[str], segments: list[Segments], search: Search) -> list[asyncio.Future]:
        """Queue one request's texts with their sentences (`Translator.segment`); -> a future per
        text, resolving to its Translation. Cancel the futures to withdraw the texts still waiting."""
        self._drop_withdrawn()
        if len(self._queue) + len(texts) > self.config.max_queue:
            raise QueueFull(f"{len(self._queue):,} sentences are waiting (at most {self.config.max_queue:,})")
        loop, request = asyncio.get_running_loop(), next(self._requests)
        waiting = [_Waiting(text, s, search, request, loop.create_future(), loop.time())
                   for text, s in zip(texts, segments, strict=True)]
        self._queue.extend(waiting)
        self._since_answer += 1
        self._submitted.set()
        return [w.future for w in waiting]

    async def run(self) -> None:
        """Search batch after batch, `workers` at once, for ever (cancel the task to stop)."""
        await asyncio.gather(*(self._work() for _ in range(self.workers)))

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch = await self._next_batch()
            started = time.perf_counter()
            search = batch[0].search
            self._searching += len(batch)
            try:
                results = await loop.run_in_executor(self.executor, self._translate, search, batch)
            except Exception as e:  # noqa: BLE001 - handed to the requests, which answer 500
                for w in batch:
                    if not w.future.done():
                        w.future.set_exception(e)
                continue
            finally:
                self._searching -= len(batch)
                self._submitted.set()  # a worker gathering beside this search may start now
            for w, result in zip(batch, results, strict=True):
                if not w.future.done():
                    w.future.set_result(result)
            requests = len({w.request for w in batch})
            self._answered_at, self._answered, self._since_answer = loop.time(), requests, 0
            self.on_batch(BatchStats(len(batch), requests, sum(len(r.tokens) for r in results),
                                     time.perf_counter() - started))

    def _translate(self, search: Search, batch: list[_Waiting]) -> list[Translation]:
        texts, segments = [w.text for w in batch], [w.segments for w in batch]
        return self.translators[search.pair].translate(texts, segments=segments, attention=search.attention,
                                                       **dict(search.options))

    async def _next_batch(self) -> list[_Waiting]:
        """The next sentences to search together: the oldest waiting, and what may join it."""
        loop = asyncio.get_running_loop()
        while True:
            self._drop_withdrawn()
            if not self._queue:
                self._submitted.clear()
                await self._submitted.wait()
                continue
            first = self._queue[0]
            if not self.config.batching:
                return self._take(lambda w, request=first.request: w.request == request)
            now = loop.time()
            left = first.since + self.config.max_wait_ms / 1000 - now if self.arriving > 0 else 0.0
            returning = self._answered_at + self.config.return_wait_ms / 1000 - now \
                if self._since_answer < self._answered else 0.0
            same = [w for w in self._queue if w.search == first.search]
            tokens = sum(w.tokens for w in same)
            # Beside a running search, wait for half as many sentences as it holds (or for it to end):
            # a second search of one or two sentences would take the cores for little.
            gathering = 2 * len(same) < self._searching
            if tokens >= self.config.max_batch_tokens or (not gathering and max(left, returning) <= 0):
                budget = self.config.max_batch_tokens
                return self._take(lambda w, search=first.search: w.search == search, budget)
            self._submitted.clear()
            try:
                await asyncio.wait_for(self._submitted.wait(), None if gathering else max(left, returning))
            except TimeoutError:
                pass

    def _take(self, joins: Callable[[_Waiting], bool], budget: int | None = None) -> list[_Waiting]:
        """Remove and return the waiting sentences that `joins` accepts, oldest first, within `budget`
        source tokens (the first is taken whatever its size). Those left out for the budget are due:
        they go in the next search without waiting for others."""
        taken, kept, tokens = [], collections.deque(), 0
        for w in self._queue:
            if joins(w) and (not taken or budget is None or tokens + w.tokens <= budget):
                taken.append(w)
                tokens += w.tokens
            else:
                if joins(w):
                    w.since = float("-inf")
                kept.append(w)
        self._queue = kept
        return taken

    def _drop_withdrawn(self) -> None:
        if any(w.future.done() for w in self._queue):
            self._queue = collections.deque(w for w in self._queue if not w.future.done())
