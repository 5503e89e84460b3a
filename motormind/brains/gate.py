"""Per-endpoint gates: a cap on the requests in flight to one VLM endpoint, shared by every episode
of a worker; a shared slow-down when the endpoint says it is overloaded; and what one episode found
of the endpoint that holds for all (the camera probe: ``once``).

An evaluation worker runs many episodes at once (``motormind eval --concurrency K``); all their
roles' calls to one base URL pass one ``EndpointGate``. At most ``limit`` requests are in flight
(``--max-in-flight N``: what the endpoint serves well, or its rate limit); the others wait for a
slot. For the run's own endpoint (the VLM config's base URL) the cap is the run's, across all its
worker processes (``SharedCap``); an endpoint served in-process per episode (``serve: oracle``)
gets a cap per worker. A 429 (or any answer with Retry-After) pauses the gate: no episode sharing
the endpoint sends until the pause is over, not only the one that got the 429 (``OpenAIBrain._send``
calls ``slow_down``). ``Gates`` holds one gate per base URL; the worker makes one and hands it to
each episode's brain (``Brain.use_gates``). Counts (peak in flight, waits, pauses) are for tests.
"""
from __future__ import annotations

import threading
import time
from contextlib import contextmanager


class EndpointGate:
    def __init__(self, limit: int | None = None, name: str = "", shared: "SharedCap | None" = None):
        self.limit = limit                  # requests in flight at most (None: no cap)
        self.name = name
        self.shared = shared                # the cap and pause shared by every worker process of a run
        self._cv = threading.Condition()
        self.in_flight = 0
        self.peak_in_flight = 0
        self.paused_until = 0.0             # time.monotonic() before which nothing is sent
        self.pauses = 0                     # slow_down calls
        self.waited_s = 0.0                 # total time requests waited for a slot or a pause
        self._once: dict = {}               # key -> result found once for every episode (once)
        self._once_lock = threading.Lock()

    def _free(self) -> bool:
        return self.limit is None or self.in_flight < self.limit

    @contextmanager
    def slot(self):
        """Hold one of the endpoint's slots for one HTTP request (waits for a slot and any pause)."""
        t0 = time.monotonic()
        if self.shared is not None:
            self.shared.acquire()
        try:
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
        finally:
            if self.shared is not None:
                self.shared.release()

    def slow_down(self, seconds: float) -> None:
        """The endpoint is overloaded (429 / Retry-After): nobody sends for ``seconds``."""
        with self._cv:
            self.paused_until = max(self.paused_until, time.monotonic() + max(0.0, float(seconds)))
            self.pauses += 1
            self._cv.notify_all()
        if self.shared is not None:
            self.shared.pause(seconds)

    def once(self, key, fn, keep=lambda result: True):
        """(``fn()``'s result, shared): computed by the first caller for ``key`` while later callers
        wait, and then given to them (shared True) when ``keep(result)``; else the next caller tries
        again. The openai brain's camera probe: the endpoint and the cameras are the same for every
        episode of a worker, so it is asked once, not three calls an episode."""
        with self._once_lock:
            if key in self._once:
                return self._once[key], True
            result = fn()
            if keep(result):
                self._once[key] = result
            return result, False

    def stats(self) -> dict:
        with self._cv:
            return {"limit": self.limit, "peak_in_flight": self.peak_in_flight, "pauses": self.pauses,
                    "waited_s": round(self.waited_s, 3)}


class SharedCap:
    """The run's cap and pause for ONE endpoint, shared by its worker processes (made by the
    coordinator from a multiprocessing context, handed to each worker): at most ``limit``
    requests in flight from all of them, and a 429 in one pauses the others too. Wall-clock
    time (``time.time``), the one clock the processes share."""

    def __init__(self, ctx, base_url: str, limit: int):
        self.base_url = _key(base_url)
        self.limit = limit
        self._sem = ctx.BoundedSemaphore(limit)
        self._pause = ctx.Value("d", 0.0)        # time.time() before which nobody sends

    def acquire(self) -> None:
        while True:
            wait = self._pause.value - time.time()
            if wait <= 0:
                break
            time.sleep(min(wait, 1.0))
        self._sem.acquire()

    def release(self) -> None:
        self._sem.release()

    def pause(self, seconds: float) -> None:
        with self._pause.get_lock():
            self._pause.value = max(self._pause.value, time.time() + max(0.0, float(seconds)))


def _key(base_url: str) -> str:
    return str(base_url).rstrip("/")


class Gates:
    """One ``EndpointGate`` per base URL, each with the same cap (``--max-in-flight``); the run's
    endpoint with the cap shared across worker processes when ``shared`` is given."""

    def __init__(self, limit: int | None = None, shared: SharedCap | None = None):
        self.limit = limit
        self.shared = shared
        self._lock = threading.Lock()
        self._gates: dict[str, EndpointGate] = {}

    def get(self, base_url: str) -> EndpointGate:
        key = _key(base_url)
        with self._lock:
            if key not in self._gates:
                mine = self.shared if self.shared is not None and self.shared.base_url == key else None
                self._gates[key] = EndpointGate(None if mine else self.limit, key, mine)
            return self._gates[key]

    def stats(self) -> dict:
        with self._lock:
            return {k: g.stats() for k, g in self._gates.items()}
