"""The service's Prometheus metrics (``GET /metrics``), in a registry of its own.

* ``distprove_serve_queue_depth{key}``: requests accepted and not finished (queued or proving);
* ``distprove_serve_requests_total{key}``: requests accepted;
* ``distprove_serve_proofs_total{key,status}``: requests finished, ``done`` or ``failed``;
* ``distprove_serve_proofs_per_second{key}``: proofs done per second over the last minute
  (``rate(distprove_serve_proofs_total[...])`` gives the same from the counter);
* ``distprove_serve_latency_seconds{key}``: a histogram of seconds from acceptance to the end;
* ``distprove_serve_rejected_total{reason}``: refused requests (``queue-full``, ``bad-body``, ...).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

RATE_WINDOW = 60.0
"""Seconds over which ``proofs_per_second`` counts."""

LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, float("inf"))


class _Live(Collector):
    """The gauges read when scraped: queue depth and recent proofs per second, per key."""

    def __init__(self, keys: list[str], depth: Callable[[str], int], done: dict[str, deque[float]], lock: threading.Lock) -> None:
        self.keys, self.depth, self.done, self.lock = keys, depth, done, lock

    def collect(self) -> Iterator[GaugeMetricFamily]:
        depth = GaugeMetricFamily("distprove_serve_queue_depth", "Requests accepted and not finished", labels=["key"])
        rate = GaugeMetricFamily("distprove_serve_proofs_per_second", f"Proofs done per second over the last {RATE_WINDOW:.0f} s", labels=["key"])
        now = time.monotonic()
        for k in self.keys:
            depth.add_metric([k], self.depth(k))
            with self.lock:
                q = self.done[k]
                while q and q[0] < now - RATE_WINDOW:
                    q.popleft()
                rate.add_metric([k], len(q) / RATE_WINDOW)
        yield depth
        yield rate


class ServiceMetrics:
    """The counters the service updates and the registry ``/metrics`` renders."""

    def __init__(self, keys: list[str], depth: Callable[[str], int]) -> None:
        self.registry = CollectorRegistry()
        self._done: dict[str, deque[float]] = {k: deque() for k in keys}
        self._lock = threading.Lock()
        self.registry.register(_Live(keys, depth, self._done, self._lock))
        self._requests = Counter("distprove_serve_requests", "Requests accepted", ["key"], registry=self.registry)
        self._proofs = Counter("distprove_serve_proofs", "Requests finished", ["key", "status"], registry=self.registry)
        self._latency = Histogram("distprove_serve_latency_seconds", "Seconds from acceptance to the end", ["key"],
                                  buckets=LATENCY_BUCKETS, registry=self.registry)
        self._rejected = Counter("distprove_serve_rejected", "Requests refused", ["reason"], registry=self.registry)

    def accepted(self, key: str) -> None:
        self._requests.labels(key).inc()

    def finished(self, key: str, status: str, seconds: float) -> None:
        self._proofs.labels(key, status).inc()
        self._latency.labels(key).observe(max(0.0, seconds))
        if status == "done":
            with self._lock:
                self._done[key].append(time.monotonic())

    def rejected(self, reason: str) -> None:
        self._rejected.labels(reason).inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
