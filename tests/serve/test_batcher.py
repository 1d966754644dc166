"""The batcher alone: which waiting sentences share a search, within the token budget and the wait."""

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from aiayn.config import ServeConfig
from aiayn.decoding.translator import Translation
from aiayn.serve.batcher import Batcher, QueueFull, Search
from aiayn.text.segment import Parts
from aiayn.translation import Segments
from tests.conftest import HANG_S

NAMES: dict[int, str] = {}  # a sentence's first source id -> its text, for the Recorder


def submit(batcher, texts, segments, search, bulk=False):
    """`batcher.submit` of a request of `texts`, each text's sentences its words, the first id of each
    telling the Recorder its name; -> [its future] (a list, to await with others: `*submit(...)`)."""
    named = []
    for text, s in zip(texts, segments, strict=True):
        words = text.split() if len(s.ids) > 1 else [text]
        codes = [next((c for c, name in NAMES.items() if name == w), None) for w in words]
        for i, w in enumerate(words):
            if codes[i] is None:
                codes[i] = 1000 + len(NAMES)
                NAMES[codes[i]] = w
        named.append(Segments(Parts(words, [""] + [" "] * (len(words) - 1) + [""]),
                              [[c] + ids[1:] for c, ids in zip(codes, s.ids, strict=True)]))
    return [batcher.submit(batcher.request(texts, named, search, bulk))]


def answered(results):
    """The texts of the answers of several requests, in order."""
    return [t.text for answers in results for t in answers]


class Recorder:
    """A translator that records each search's texts (and options), and can hold the first search."""

    def __init__(self) -> None:
        self.searches, self.hold = [], threading.Event()
        self.hold.set()

    def search(self, ids, **options):
        texts = [NAMES[i[0]] for i in ids]
        self.hold.wait(HANG_S)
        self.searches.append((texts, options))
        return [[Translation(t.upper(), 0.0, 0.0, [1] * len(t))] for t in texts]

    def assemble(self, segments, nbests, attention=False, steers=None):
        return Translation(" ".join(n[0].text for n in nbests), 0.0, 0.0, [])


def run(config, scenario, workers=1, recorder=None):
    recorder = recorder or Recorder()
    executor = ThreadPoolExecutor(workers)

    async def main():
        batcher = Batcher({("en", "de"): recorder}, config, executor, workers=workers)
        task = asyncio.create_task(batcher.run())
        try:
            return await scenario(batcher, recorder)
        finally:
            task.cancel()

    try:
        return asyncio.run(main()), recorder
    finally:
        executor.shutdown()


EN_DE = Search(("en", "de"))


def ids(*lengths):
    """Texts of one sentence each, of these lengths in source tokens."""
    return [Segments(Parts(["x"], ["", ""]), [[4] * n]) for n in lengths]


def sentences(*lengths):
    """One text of several sentences, of these lengths in source tokens (its words are its sentences)."""
    return [Segments(Parts(["x"] * len(lengths), [""] * (len(lengths) + 1)), [[4] * n for n in lengths])]


def test_sentences_arriving_within_the_wait_share_one_search():
    async def scenario(batcher, recorder):
        batcher.arriving = 1  # a request on its way: the first sentence waits for it
        first = submit(batcher, ["a"], ids(1), EN_DE)
        await asyncio.sleep(0.01)
        batcher.arriving = 0
        second = submit(batcher, ["b", "c"], ids(1, 1), EN_DE)
        return answered(await asyncio.gather(*first, *second))

    results, recorder = run(ServeConfig(max_wait_ms=500), scenario)
    assert results == ["A", "B", "C"]
    assert [texts for texts, _ in recorder.searches] == [["a", "b", "c"]]


def test_with_no_other_request_on_its_way_a_sentence_does_not_wait():
    async def scenario(batcher, recorder):
        return await asyncio.wait_for(asyncio.gather(*submit(batcher, ["a"], ids(1), EN_DE)), 5)

    _, recorder = run(ServeConfig(max_wait_ms=60_000), scenario)
    assert [texts for texts, _ in recorder.searches] == [["a"]]


def test_a_full_token_budget_starts_the_search_without_waiting_and_the_rest_waits_its_turn():
    async def scenario(batcher, recorder):
        batcher.arriving = 5
        futures = submit(batcher, ["a", "b", "c"], ids(3, 3, 3), EN_DE)
        return await asyncio.wait_for(asyncio.gather(*futures), 5)  # far less than the 60 s wait

    _, recorder = run(ServeConfig(max_wait_ms=60_000, max_batch_tokens=6), scenario)
    assert [texts for texts, _ in recorder.searches] == [["a", "b"], ["c"]]


def test_only_sentences_asking_the_same_search_are_batched():
    greedy = Search(("en", "de"), (("beam_size", 1),))

    async def scenario(batcher, recorder):
        batcher.arriving = 1
        futures = submit(batcher, ["a"], ids(1), EN_DE) + submit(batcher, ["b"], ids(1), greedy)
        futures += submit(batcher, ["c"], ids(1), EN_DE)
        return await asyncio.gather(*futures)

    _, recorder = run(ServeConfig(max_wait_ms=20), scenario)
    assert recorder.searches == [(["a", "c"], {}), (["b"], {"beam_size": 1})]


def test_without_batching_one_request_at_a_time():
    async def scenario(batcher, recorder):
        futures = submit(batcher, ["a", "b"], ids(1, 1), EN_DE) + submit(batcher, ["c"], ids(1), EN_DE)
        return await asyncio.gather(*futures)

    _, recorder = run(ServeConfig(batching=False), scenario)
    assert [texts for texts, _ in recorder.searches] == [["a", "b"], ["c"]]


def test_withdrawn_sentences_are_not_searched_and_a_full_queue_refuses():
    async def scenario(batcher, recorder):
        recorder.hold.clear()
        busy = submit(batcher, ["a"], ids(1), EN_DE)
        await asyncio.sleep(0.1)  # "a" is being searched; what comes now waits
        waiting = submit(batcher, ["b", "c"], ids(1, 1), EN_DE)
        with pytest.raises(QueueFull):
            submit(batcher, ["d"], ids(1), EN_DE)
        for f in waiting:
            f.cancel()
        later = submit(batcher, ["e"], ids(1), EN_DE)
        recorder.hold.set()
        return answered(await asyncio.gather(*busy, *later))

    results, recorder = run(ServeConfig(max_queue=2, max_wait_ms=0), scenario)
    assert results == ["A", "E"]
    assert [texts for texts, _ in recorder.searches] == [["a"], ["e"]]


class Holder(Recorder):
    """Holds every search of a text "hold" until released; counts the searches running at once."""

    def __init__(self) -> None:
        super().__init__()
        self.running, self.most, self.release, self.lock = 0, 0, threading.Event(), threading.Lock()
        self.times = []  # (started, ended) of each search, time.monotonic()

    def search(self, ids, **options):
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        started = time.monotonic()
        if "hold" in [NAMES[i[0]] for i in ids]:
            self.release.wait(HANG_S)
        try:
            return super().search(ids, **options)
        finally:
            with self.lock:
                self.running -= 1
                self.times.append((started, time.monotonic()))


@pytest.mark.parametrize("workers", [1, 2])
def test_workers_search_batches_at_once(workers):
    """With two workers a request is searched while another's search runs; with one it waits."""
    async def scenario(batcher, holder):
        held = submit(batcher, ["hold"], ids(1), EN_DE)
        await asyncio.sleep(0.05)  # the first worker is searching "hold"
        other = submit(batcher, ["b"], ids(1), EN_DE)
        done, _ = await asyncio.wait(other, timeout=0.5)
        holder.release.set()
        await asyncio.gather(*held, *other)
        return len(done)

    holder = Holder()
    answered_while_held, _ = run(ServeConfig(), scenario, workers, holder)
    assert answered_while_held == (1 if workers == 2 else 0)
    assert holder.most == workers


@pytest.mark.parametrize("options, device, threads, compiled, expected", [
    ({}, "cpu", 2, False, 2), ({}, "cpu", 1, False, 1), ({}, "cuda", 8, False, 1), ({}, "cpu", 2, True, 1),
    ({"workers": 3}, "cpu", 2, False, 3), ({"workers": 3}, "cpu", 2, True, 3),
    ({"batching": False}, "cpu", 8, False, 1), ({"batching": False, "workers": 4}, "cpu", 8, False, 1),
])
def test_how_many_searches_run_at_once(options, device, threads, compiled, expected):
    from aiayn.serve.searching import workers_for

    assert workers_for(ServeConfig(**options), device, threads, compiled) == expected


def test_beside_a_running_search_a_second_waits_for_half_as_many_sentences():
    """Two workers: while four sentences are searched, one new sentence is not searched alone; a second
    arriving makes half as many, and they are searched together at once."""
    async def scenario(batcher, holder):
        held = submit(batcher, ["hold", "x", "y", "z"], ids(1, 1, 1, 1), EN_DE)
        await asyncio.sleep(0.05)  # the first worker is searching the four
        first = submit(batcher, ["b"], ids(1), EN_DE)
        await asyncio.sleep(0.1)
        waited = not first[0].done()
        second = submit(batcher, ["c"], ids(1), EN_DE)
        await asyncio.wait_for(asyncio.gather(*first, *second), 5)  # searched while "hold" is held
        holder.release.set()
        await asyncio.gather(*held)
        return waited

    holder = Holder()
    waited, _ = run(ServeConfig(), scenario, 2, holder)
    assert waited
    assert [texts for texts, _ in holder.searches] == [["b", "c"], ["hold", "x", "y", "z"]]


def test_a_sentence_gathering_beside_a_search_goes_when_the_search_ends():
    async def scenario(batcher, holder):
        held = submit(batcher, ["hold", "x", "y", "z"], ids(1, 1, 1, 1), EN_DE)
        await asyncio.sleep(0.05)
        alone = submit(batcher, ["b"], ids(1), EN_DE)
        await asyncio.sleep(0.1)
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*held, *alone), 5)

    holder = Holder()
    run(ServeConfig(), scenario, 2, holder)
    assert [texts for texts, _ in holder.searches] == [["hold", "x", "y", "z"], ["b"]]


def answered_then(batcher, first, then):
    """Clients sending again once answered: each request of `first` (lists of texts) sends the
    texts of `then` at its place when its answer comes; -> the clients' tasks, and the futures of
    what they send again (filled in as they send it)."""
    futures = []

    async def client(texts, again):
        await asyncio.gather(*submit(batcher, texts, ids(*[1] * len(texts)), EN_DE))
        futures.extend(submit(batcher, again, ids(*[1] * len(again)), EN_DE))

    return [asyncio.create_task(client(t, a)) for t, a in zip(first, then, strict=True)], futures


def test_after_a_search_the_next_waits_for_the_clients_it_answered():
    """Two clients answered together, a third's sentence waiting: the next search waits for the two
    to send again and takes all three sentences, instead of the third alone."""
    async def scenario(batcher, holder):
        clients, futures = answered_then(batcher, [["hold"], ["x"]], [["a"], ["b"]])
        await asyncio.sleep(0.05)  # "hold" and "x" are searched together
        third = submit(batcher, ["c"], ids(1), EN_DE)
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*clients), 5)
        await asyncio.wait_for(asyncio.gather(*third, *futures), 5)  # far less than the 60 s wait

    holder = Holder()
    run(ServeConfig(return_wait_ms=60_000), scenario, 1, holder)
    assert [sorted(texts) for texts, _ in holder.searches] == [["hold", "x"], ["a", "b", "c"]]


def test_clients_that_do_not_send_again_are_waited_for_return_wait_ms_at_most():
    async def scenario(batcher, holder):
        held = submit(batcher, ["hold", "x"], ids(1, 1), EN_DE)  # one request, answered and gone
        await asyncio.sleep(0.05)
        third = submit(batcher, ["c"], ids(1), EN_DE)
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*held, *third), 5)

    for wait_s in (0.2, 0):
        holder = Holder()
        run(ServeConfig(return_wait_ms=wait_s * 1000), scenario, 1, holder)
        assert [texts for texts, _ in holder.searches] == [["hold", "x"], ["c"]]
        (_, first_ended), (second_started, _) = holder.times
        assert second_started - first_ended >= wait_s - 0.001  # a lower bound: a busy machine is later


def test_a_client_that_sends_again_at_once_is_not_kept_waiting():
    async def scenario(batcher, holder):
        clients, futures = answered_then(batcher, [["a"]], [["b"]])
        await asyncio.wait_for(asyncio.gather(*clients), 5)
        await asyncio.wait_for(asyncio.gather(*futures), 5)  # far less than the 60 s wait

    holder = Holder()
    run(ServeConfig(return_wait_ms=60_000), scenario, 1, holder)
    assert [texts for texts, _ in holder.searches] == [["a"], ["b"]]


def test_the_queue_counts_sentences_and_a_text_is_answered_once_all_of_its_are_searched():
    """A text of three sentences fills a queue of three; its sentences go into searches within the token
    budget, and its answer joins them in order."""
    async def scenario(batcher, recorder):
        batcher.arriving = 1  # its sentences do not wait for others: the budget is full
        future = submit(batcher, ["a b c"], sentences(2, 2, 2), EN_DE)
        with pytest.raises(QueueFull):
            submit(batcher, ["d"], ids(1), EN_DE)
        return (await asyncio.wait_for(future[0], 5))[0].text

    text, recorder = run(ServeConfig(max_queue=3, max_batch_tokens=4, max_wait_ms=60_000), scenario)
    assert text == "A B C"
    assert [texts for texts, _ in recorder.searches] == [["a", "b"], ["c"]]


def test_bulk_sentences_go_in_budget_sized_searches_after_the_others():
    """One worker busy: a bulk request and then a sentence wait; the sentence goes first, then the
    bulk request in searches of at most the token budget. A second bulk request beyond max_bulk is
    refused."""
    async def scenario(batcher, holder):
        held = submit(batcher, ["hold"], ids(1), EN_DE)
        await asyncio.sleep(0.05)
        bulk = submit(batcher, ["x", "y", "z"], ids(3, 3, 3), EN_DE, bulk=True)
        with pytest.raises(QueueFull, match="1 files or long requests"):
            submit(batcher, ["w"], ids(1), EN_DE, bulk=True)
        other = submit(batcher, ["b"], ids(1), EN_DE)
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*held, *bulk, *other), 5)

    holder = Holder()
    run(ServeConfig(max_batch_tokens=6, max_bulk=1), scenario, 1, holder)
    assert [texts for texts, _ in holder.searches] == [["hold"], ["b"], ["x", "y"], ["z"]]


def test_a_bulk_request_being_searched_counts_against_max_bulk_until_answered():
    """max_bulk counts bulk requests in progress: one whose sentences are all in a search (none left
    waiting) still counts, and a second is refused until the first is answered."""
    async def scenario(batcher, holder):
        first = submit(batcher, ["hold", "x"], ids(1, 1), EN_DE, bulk=True)
        await asyncio.sleep(0.05)  # a worker holds the first bulk request's one search: none waits
        assert batcher.bulk_full
        with pytest.raises(QueueFull, match="1 files or long requests are being translated"):
            submit(batcher, ["y"], ids(1), EN_DE, bulk=True)
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*first), 5)
        assert not batcher.bulk_full
        await asyncio.wait_for(asyncio.gather(*submit(batcher, ["y"], ids(1), EN_DE, bulk=True)), 5)

    holder = Holder()
    run(ServeConfig(max_bulk=1), scenario, 2, holder)
    assert [texts for texts, _ in holder.searches] == [["hold", "x"], ["y"]]


def test_bulk_requests_leave_a_worker_free_for_the_others():
    """Two workers, one searching a bulk request: a second bulk request waits, and a sentence is
    searched at once by the other worker."""
    async def scenario(batcher, holder):
        first = submit(batcher, ["hold", "x"], ids(1, 1), EN_DE, bulk=True)
        await asyncio.sleep(0.05)  # a worker holds the first bulk request's search
        second = submit(batcher, ["y"], ids(1), EN_DE, bulk=True)
        other = submit(batcher, ["b"], ids(1), EN_DE)
        done, _ = await asyncio.wait(other, timeout=5)
        waited = not second[0].done()
        holder.release.set()
        await asyncio.wait_for(asyncio.gather(*first, *second), 5)
        return len(done), waited

    holder = Holder()
    (answered, waited), _ = run(ServeConfig(), scenario, 2, holder)
    assert answered == 1 and waited
    assert [texts for texts, _ in holder.searches] == [["b"], ["hold", "x"], ["y"]]
