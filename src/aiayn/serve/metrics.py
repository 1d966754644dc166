"""The server's Prometheus metrics (`GET /metrics`), in a registry of its own."""

from __future__ import annotations

import time

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from aiayn.serve.batcher import BatchStats


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("aiayn_requests", "HTTP requests answered, by endpoint and status code",
                                ["endpoint", "status"], registry=self.registry)
        self.in_progress = Gauge("aiayn_requests_in_progress", "requests received and not yet answered, "
                                 "by endpoint", ["endpoint"], registry=self.registry)
        self.latency = Histogram("aiayn_request_seconds", "time from a request's arrival to its answer",
                                 ["endpoint"], registry=self.registry,
                                 buckets=(.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60))
        self.batch_sentences = Histogram("aiayn_batch_sentences", "sentences searched together",
                                         registry=self.registry,
                                         buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256, 512))
        self.batch_requests = Histogram("aiayn_batch_requests", "requests whose sentences shared a search",
                                        registry=self.registry, buckets=(1, 2, 4, 8, 16, 32, 64, 128))
        self.queue_depth = Gauge("aiayn_queue_sentences", "sentences waiting for a search",
                                 registry=self.registry)
        self.sentences = Counter("aiayn_translated_sentences", "sentences translated", registry=self.registry)
        self.output_tokens = Counter("aiayn_output_tokens", "target tokens produced", registry=self.registry)
        self.tokens_per_second = Gauge("aiayn_output_tokens_per_second",
                                       "target tokens per second of search over the last 10 seconds",
                                       registry=self.registry)
        self._recent: list[tuple[float, int, float]] = []  # (when, tokens, seconds searching)

    def batch(self, stats: BatchStats) -> None:
        self.batch_sentences.observe(stats.sentences)
        self.batch_requests.observe(stats.requests)
        self.sentences.inc(stats.sentences)
        self.output_tokens.inc(stats.output_tokens)
        now = time.monotonic()
        self._recent = [r for r in self._recent if now - r[0] < 10]
        self._recent.append((now, stats.output_tokens, stats.seconds))
        busy = sum(r[2] for r in self._recent)
        self.tokens_per_second.set(sum(r[1] for r in self._recent) / busy if busy else 0.0)
