"""Batching across requests: the sentences of concurrent requests are searched together.

A request's texts come here cut into sentences (`Translator.segment`), and the batcher works on
sentences: a text is answered once each of its sentences has been searched, wherever they were
(`Translator.assemble`, on the search thread). One task per worker (`run`) takes the oldest
sentence and gathers the others waiting with the same search (language pair and options), oldest
first, until they hold `max_batch_tokens` source tokens, or the first has waited `max_wait_ms`, or
no other request is on its way (`arriving`: one client alone never waits). After a search, the
next also waits up to `return_wait_ms` for the clients it answered: many send their next sentence
at once, and those answered together would otherwise come back to find the others' search under
way, splitting the clients into two half-size batches for good (32 clients: searches of 16
sentences without the wait, 24-30 with it; benchmarks/detail/serve_load.md). The search runs in a worker
thread, so the event loop keeps accepting requests while the model computes, and the next batch
gathers meanwhile. Several workers (`ServeConfig.workers`) each search a batch of their own at
once; beside a running search, the next starts once half as many sentences wait (or that search
ends): on a busy server an idle worker would otherwise take one sentence at a time.

Bulk requests (a file, or more source tokens than one search takes, or more sentences than the
queue holds: the server decides) wait apart: their sentences are searched in batches of
`max_batch_tokens`, only while no other sentence waits, and by at most all workers but one, so that
a request of a few sentences never waits behind a file when there are two workers or more. A
request answers once all its texts are answered, or with the first error; a request that gave up
(a timeout, a client gone, an error) has its sentences still waiting leave the queue unsearched.
The search of a sentence does not depend on which others share its batch (decoding/translator.py),
so a sentence served here gets what `aiayn translate` gives it. Without batching, one request is
searched at a time.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass, field
from typing import Any

from aiayn.config import ServeConfig
from aiayn.translation import Segments, Steer, Translation, Translator


class QueueFull(Exception):
    """More sentences (or bulk requests) are waiting than the server accepts."""


@dataclass(frozen=True)
class Search:
    """What a sentence asks for; sentences are batched only with others asking the same."""

    pair: tuple[str, str]  # (source, target) language
    options: tuple[tuple[str, Any], ...] = ()  # DecodeConfig fields set by the request, sorted
    attention: bool = False
    explain: bool = False  # the explain page's data of one sentence (`aiayn.explain`), searched alone
    steered: bool = False  # with a glossary: constrained search, slower, so apart from the others


@dataclass(eq=False)
class Request:
    """One request's texts and sentences as the batcher searches them, made on any thread
    (`Batcher.request`: a large request's thousands of objects are not made on the event loop),
    then queued (`Batcher.submit`). Its `future` resolves to an answer per text, or to the first
    error; cancelled, the sentences still waiting are withdrawn."""

    sentences: list[_Sentence]  # to search, in order
    search: Search
    bulk: bool  # waits apart (see the module)
    answers: list[Any]  # per text, as they come (a text without a sentence: at once)
    left: int  # texts not answered yet
    future: asyncio.Future = field(init=False, repr=False)
    since: float = 0.0  # event-loop time it was queued


@dataclass(eq=False)
class _Text:
    """One text of a request: its sentences, and their n-best lists as their searches end."""

    request: Request = field(repr=False)
    index: int  # which text of the request
    text: str
    segments: Segments
    nbests: list[list[Translation] | None]
    left: int  # sentences not searched yet
    steers: list[Steer] | None = None  # what each sentence's translation must hold (a glossary's terms)


@dataclass(eq=False)
class _Sentence:
    text: _Text
    index: int  # which sentence of its text
    due: bool = False  # left out of a search for its token budget: goes in the next without waiting

    @property
    def request(self) -> Request:
        return self.text.request

    @property
    def search(self) -> Search:
        return self.text.request.search

    @property
    def ids(self) -> list[int]:
        return self.text.segments.ids[self.index]

    @property
    def steer(self) -> Steer:
        return self.text.steers[self.index] if self.text.steers else Steer()

    @property
    def tokens(self) -> int:  # source tokens, for the batch's budget
        return len(self.ids)

    @property
    def withdrawn(self) -> bool:  # its request gave up, or failed
        return self.text.request.future.done()


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
        self._searching = 0  # sentences of requests (not bulk) in the searches running now
        self._bulk_searching = 0  # searches of bulk sentences running now
        self._queue: collections.deque[_Sentence] = collections.deque()
        self._bulk: collections.deque[collections.deque[_Sentence]] = collections.deque()  # per request
        self._bulk_requests: set[Request] = set()  # in progress: waiting or searched, until answered
        self._submitted = asyncio.Event()
        self._lock = threading.Lock()  # the texts' n-best lists, filled by the search threads
        self.arriving = 0  # requests received and not yet submitted (the server counts them)
        self._answered_at, self._answered = float("-inf"), 0  # when the last search ended; its requests
        self._since_answer = 0  # requests submitted since then

    @property
    def queued(self) -> int:
        """Sentences waiting (not those withdrawn; a bulk request's are withdrawn together)."""
        bulk = sum(len(q) for q in self._bulk if not q[0].withdrawn)
        return sum(not s.withdrawn for s in self._queue) + bulk

    @property
    def bulk_full(self) -> bool:
        """As many bulk requests are in progress (waiting, or being searched) as the server takes
        (`max_bulk`)."""
        return len(self._bulk_requests) >= self.config.max_bulk

    def request(self, texts: Sequence[str], segments: Sequence[Segments], search: Search, bulk: bool = False,
                steers: Sequence[Steer] | None = None) -> Request:
        """One request's texts with their sentences (`Translator.segment`), ready to `submit`; a text
        without a sentence is answered here. `steers`: each sentence's (`Translator.steers`). Any
        thread may call it."""
        request = Request([], search, bulk, [None] * len(texts), len(texts))
        translator = self.translators[search.pair]
        sentences = iter(steers) if steers is not None else None
        for i, (text, s) in enumerate(zip(texts, segments, strict=True)):
            mine = [next(sentences) for _ in s.ids] if sentences is not None else None
            t = _Text(request, i, text, s, [None] * len(s.ids), len(s.ids), mine)
            request.sentences += [_Sentence(t, k) for k in range(t.left)]
            if not t.left:
                request.answers[i] = translator.assemble(s, [], search.attention)
                request.left -= 1
        return request

    def submit(self, request: Request) -> asyncio.Future:
        """Queue a `request` (on the event loop); -> its future (see Request). A bulk request waits
        apart, at most `max_bulk` of them in progress (waiting, or being searched, until answered);
        at most `max_queue` sentences of the others wait at once (QueueFull beyond)."""
        self._drop_withdrawn()
        if request.bulk and self.bulk_full:
            raise QueueFull(f"{len(self._bulk_requests):,} files or long requests are being translated "
                            f"(at most {self.config.max_bulk:,})")
        if not request.bulk and len(self._queue) + len(request.sentences) > self.config.max_queue:
            raise QueueFull(f"{len(self._queue):,} sentences are waiting (at most {self.config.max_queue:,})")
        loop = asyncio.get_running_loop()
        request.future, request.since = loop.create_future(), loop.time()
        if not request.left:
            request.future.set_result(request.answers)
        elif request.bulk:
            self._bulk.append(collections.deque(request.sentences))
            self._bulk_requests.add(request)  # until answered, failed or withdrawn
            request.future.add_done_callback(lambda _, request=request: self._bulk_requests.discard(request))
        else:
            self._queue.extend(request.sentences)
            self._since_answer += 1
        self._submitted.set()
        return request.future

    async def run(self) -> None:
        """Search batch after batch, `workers` at once, for ever (cancel the task to stop)."""
        await asyncio.gather(*(self._work() for _ in range(self.workers)))

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            batch, bulk = await self._next_batch()
            started = time.perf_counter()
            if bulk:
                self._bulk_searching += 1
            else:
                self._searching += len(batch)
            try:
                outputs, answers = await loop.run_in_executor(self.executor, self._search, batch)
            except Exception as e:  # noqa: BLE001 - handed to the requests, which answer 500
                answers = [(s.text, e) for s in batch]
                outputs = []
            finally:
                if bulk:
                    self._bulk_searching -= 1
                else:
                    self._searching -= len(batch)
                self._submitted.set()  # a worker gathering beside this search may start now
            for text, answer in answers:
                _answer(text, answer)
            requests = len({id(s.request) for s in batch})
            if not bulk:
                self._answered_at, self._answered, self._since_answer = loop.time(), requests, 0
            self.on_batch(BatchStats(len(batch), requests, sum(len(o[0].tokens) for o in outputs if o),
                                     time.perf_counter() - started))

    def _search(self, batch: list[_Sentence]) -> tuple[list[Any], list[tuple[_Text, Any]]]:
        """On a search thread: search the batch; -> each sentence's n-best list, and the answer (or
        the error) of each text whose last sentences these were."""
        search = batch[0].search
        translator = self.translators[search.pair]
        if search.explain:
            from aiayn.explain import explain

            return [], [(batch[0].text, explain(translator, batch[0].text.text, **dict(search.options)))]
        steered = {"steers": [s.steer for s in batch]} if search.steered else {}
        outputs = translator.search([s.ids for s in batch], **steered, **dict(search.options))
        complete = []
        with self._lock:
            for s, nbest in zip(batch, outputs, strict=True):
                s.text.nbests[s.index] = nbest
                s.text.left -= 1
                if s.text.left == 0:
                    complete.append(s.text)
        answers: list[tuple[_Text, Any]] = []
        for t in complete:
            try:
                answers.append((t, translator.assemble(t.segments, t.nbests, search.attention,  # type: ignore[arg-type]
                                                       t.steers)))
            except Exception as e:  # noqa: BLE001 - that text's request answers 500
                answers.append((t, e))
        return outputs, answers

    async def _next_batch(self) -> tuple[list[_Sentence], bool]:
        """The next sentences to search together: the oldest waiting, and what may join it; or, when
        none waits, bulk sentences (a worker left for the others). -> (the sentences, bulk)."""
        loop = asyncio.get_running_loop()
        while True:
            self._drop_withdrawn()
            if not self._queue:
                if self._bulk and self._bulk_searching < max(1, self.workers - 1):
                    taken = self._take_bulk()
                    if taken:
                        return taken, True
                    continue
                self._submitted.clear()
                await self._submitted.wait()
                continue
            first = self._queue[0]
            if first.search.explain:
                return self._take(lambda s, first=first: s is first), False
            if not self.config.batching:
                return self._take(lambda s, request=first.request: s.request is request), False
            now = loop.time()
            since = float("-inf") if first.due else first.request.since
            left = since + self.config.max_wait_ms / 1000 - now if self.arriving > 0 else 0.0
            returning = self._answered_at + self.config.return_wait_ms / 1000 - now \
                if self._since_answer < self._answered else 0.0
            same = [s for s in self._queue if s.search == first.search]
            tokens = sum(s.tokens for s in same)
            # Beside a running search, wait for half as many sentences as it holds (or for it to end):
            # a second search of one or two sentences would take the cores for little.
            gathering = 2 * len(same) < self._searching
            if tokens >= self.config.max_batch_tokens or (not gathering and max(left, returning) <= 0):
                budget = self.config.max_batch_tokens
                return self._take(lambda s, search=first.search: s.search == search, budget), False
            self._submitted.clear()
            try:
                await asyncio.wait_for(self._submitted.wait(), None if gathering else max(left, returning))
            except TimeoutError:
                pass

    def _take(self, joins: Callable[[_Sentence], bool], budget: int | None = None) -> list[_Sentence]:
        """Remove and return the waiting sentences that `joins` accepts, oldest first, within `budget`
        source tokens (the first is taken whatever its size). Those left out for the budget are due:
        they go in the next search without waiting for others."""
        taken, kept, tokens = [], collections.deque(), 0
        for s in self._queue:
            if joins(s) and (not taken or budget is None or tokens + s.tokens <= budget):
                taken.append(s)
                tokens += s.tokens
            else:
                s.due = s.due or joins(s)
                kept.append(s)
        self._queue = kept
        return taken

    def _take_bulk(self) -> list[_Sentence]:
        """The oldest bulk request's next sentences, with (when batching) those of later ones asking
        the same search, within the token budget (the first taken whatever its size)."""
        search, budget = self._bulk[0][0].search, self.config.max_batch_tokens
        taken, tokens = [], 0
        for queue in self._bulk if self.config.batching else [self._bulk[0]]:
            while queue and queue[0].search == search and (not taken or tokens + queue[0].tokens <= budget):
                s = queue.popleft()
                if not s.withdrawn:
                    taken.append(s)
                    tokens += s.tokens
        self._bulk = collections.deque(q for q in self._bulk if q)
        return taken

    def _drop_withdrawn(self) -> None:
        if any(s.withdrawn for s in self._queue):
            self._queue = collections.deque(s for s in self._queue if not s.withdrawn)
        if any(q[0].withdrawn for q in self._bulk):  # a request's texts are withdrawn together
            self._bulk = collections.deque(q for q in self._bulk if not _dropped(q))


def _dropped(queue: collections.deque[_Sentence]) -> bool:
    """Take the withdrawn sentences off the front of a bulk request's queue; -> whether none is left."""
    while queue and queue[0].withdrawn:
        queue.popleft()
    return not queue


def _answer(text: _Text, answer: Any) -> None:
    """On the event loop: a text's answer (or error) into its request's."""
    request = text.request
    if request.future.done():  # withdrawn, or failed already
        return
    if isinstance(answer, Exception):
        request.future.set_exception(answer)
        return
    request.answers[text.index] = answer
    request.left -= 1
    if not request.left:
        request.future.set_result(request.answers)
