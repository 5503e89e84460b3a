"""Monitor: a background thread that watches the batch under way and can cancel what is queued.

The Controller's thread hands it snapshots at action boundaries (``offer``); the Monitor asks its
brain on its own thread and, on a cancel, sets the batch's CancelToken, which the Controller honours
at the next boundary. It never blocks execution: a snapshot that arrives while the brain is busy
replaces the pending one.
"""
from __future__ import annotations

import threading

from ..controller import CancelToken
from .base import Role


class Monitor(Role):
    name = prompt_name = "monitor"

    def __init__(self, brain, record=None, repair: bool = False):
        super().__init__(brain, record, repair)   # no repair round-trip: a late answer is useless
        self._cv = threading.Condition()
        self._pending: tuple | None = None
        self._token: CancelToken | None = None
        self._stop = False
        self.alerts: list[dict] = []
        self.checks = 0
        self._busy = False
        self._thread = threading.Thread(target=self._loop, name="motormind-monitor", daemon=True)
        self._thread.start()

    def watch(self, token: CancelToken) -> None:
        with self._cv:
            self._token = token
            self._pending = None

    def unwatch(self) -> None:
        with self._cv:
            self._token = None
            self._pending = None

    def offer(self, ctx: dict, images: dict | None = None) -> None:
        """Called from the Controller's thread; returns at once."""
        with self._cv:
            if self._token is not None and not self._token.cancelled:
                self._pending = (self._token, ctx, images or {})
                self._cv.notify()

    def wait_idle(self, timeout: float = 5.0) -> None:
        """Block until no check is pending or running (tests and orderly shutdown)."""
        with self._cv:
            self._cv.wait_for(lambda: self._pending is None and not self._busy, timeout)

    def close(self) -> None:
        with self._cv:
            self._stop = True
            self._cv.notify_all()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._pending is not None or self._stop)
                if self._stop:
                    return
                token, ctx, images = self._pending
                self._pending = None
                self._busy = True
            try:
                self.checks += 1
                values = {**ctx, "image_names": ", ".join(images) or "none"}
                res = self.ask(values, images, ctx)
                if res.value is not None and res.value["cancel"] and not token.cancelled:
                    reason = res.value["reason"]
                    token.cancel(reason, source="monitor")
                    alert = {"batch_id": ctx.get("batch_id"), "reason": reason, "brain": res.brain,
                             "after_command": (ctx.get("last_command") or {}).get("index")}   # the snapshot's boundary
                    self.alerts.append(alert)
                    self.record("monitor_cancel", **alert)
            finally:
                with self._cv:
                    self._busy = False
                    self._cv.notify_all()
