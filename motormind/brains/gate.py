"""Per-endpoint gates: a cap on the requests in flight to one VLM endpoint, shared by every episode
of a worker, and a shared slow-down when the endpoint says it is overloaded.

An evaluation worker runs many episodes at once (``motormind eval --concurrency K``); all their
roles' calls to one base URL pass one ``EndpointGate``. At most ``limit`` requests are in flight
(``--max-in-flight N``: what the endpoint serves well, or its rate limit); the others wait for a
slot. A 429 (or any answer with Retry-After) pauses the gate: no episode sharing the endpoint sends
until the pause is over, not only the one that got the 429 (``OpenAIBrain._send`` calls
``slow_down``). ``Gates`` holds one gate per base URL; the worker makes one and hands it to each
episode's brain (``Brain.use_gates``). Counts (peak in flight, waits, pauses) are for reports and tests.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager


class EndpointGate:
    def __init__(self, limit: int | None = None, name: str = ""):
        self.limit = limit                  # requests in flight at most (None: no cap)
        self.name = name
        self._cv = threading.Condition()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.paused_until = 0.0             # time.monotonic() before which nothing is sent
        self.pauses = 0                     # slow_down calls
        self.waited_s = 0.0                 # total time requests waited for a slot or a pause

    def _free(self) -> bool:
        return self.limit is None or self.in_flight < self.limit

    @contextmanager
    def slot(self):
        """Hold one of the endpoint's slots for one HTTP request (waits for a slot and any pause)."""
        t0 = time.monotonic()
        with self._cv:
            while True:
                wait = self.paused_until - time.monotonic()
                if wait <= 0 and self._free():
                    break
                self._cv.wait(timeout=wait if wait > 0 else None)
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
            self.waited_s += time.monotonic() - t0
        try:
            yield
        finally:
            with self._cv:
                self.in_flight -= 1
                self._cv.notify()

    def slow_down(self, seconds: float) -> None:
        """The endpoint is overloaded (429 / Retry-After): nobody sends for ``seconds``."""
        with self._cv:
            self.paused_until = max(self.paused_until, time.monotonic() + max(0.0, float(seconds)))
            self.pauses += 1
            self._cv.notify_all()

    def stats(self) -> dict:
        with self._cv:
            return {"limit": self.limit, "peak_in_flight": self.peak_in_flight, "pauses": self.pauses,
                    "waited_s": round(self.waited_s, 3)}


class Gates:
    """One ``EndpointGate`` per base URL, each with the same cap (a worker's ``--max-in-flight``)."""

    def __init__(self, limit: int | None = None):
        self.limit = limit
        self._lock = threading.Lock()
        self._gates: dict[str, EndpointGate] = {}

    def get(self, base_url: str) -> EndpointGate:
        key = str(base_url).rstrip("/")
        with self._lock:
            if key not in self._gates:
                self._gates[key] = EndpointGate(self.limit, key)
            return self._gates[key]

    def stats(self) -> dict:
        with self._lock:
            return {k: g.stats() for k, g in self._gates.items()}
