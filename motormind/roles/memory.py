"""Memory: consumes every event asynchronously and keeps short summaries the other roles read.

``add`` never blocks; a background thread folds new events into the summary by asking the brain
(at most one call in flight; events that arrive meanwhile are batched into the next call)."""
from __future__ import annotations

import json
import threading

from .base import Role

_KEEP = ("plan", "report", "verdict", "monitor_cancel", "role_failed", "replan", "operator")


class Memory(Role):
    name = prompt_name = "memory"

    def __init__(self, brain, record=None, instruction: str = "", every: int = 2):
        super().__init__(brain, record, repair=False)
        self.instruction = instruction
        self.every = every
        self._lock = threading.Condition()
        self._events: list[dict] = []
        self._summary = "nothing yet"
        self._facts: list[str] = []
        self._stop = False
        self._busy = False
        self.updates = 0
        self._thread = threading.Thread(target=self._loop, name="motormind-memory", daemon=True)
        self._thread.start()

    def add(self, kind: str, data: dict) -> None:
        if kind not in _KEEP:
            return
        with self._lock:
            self._events.append({"kind": kind, **_brief(kind, data)})
            if len(self._events) >= self.every:
                self._lock.notify()

    def text(self) -> str:
        with self._lock:
            facts = "".join(f"\n- {f}" for f in self._facts)
            return self._summary + facts

    def flush(self, timeout: float = 10.0) -> None:
        with self._lock:
            if self._events:
                self._lock.notify()
            self._lock.wait_for(lambda: not self._events and not self._busy, timeout)

    def close(self) -> None:
        with self._lock:
            self._stop = True
            self._lock.notify_all()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: self._stop or len(self._events) >= 1)
                if self._stop:
                    return
                events, self._events = self._events, []
                prev = self._summary
                self._busy = True
            try:
                ctx = {"instruction": self.instruction, "memory": prev, "events": json.dumps(events)}
                res = self.ask(ctx, {}, {**ctx, "event_list": events})
                if res.value is not None:
                    with self._lock:
                        self._summary = res.value["summary"]
                        self._facts = list(res.value.get("facts", []))[-10:]
                        self.updates += 1
                    self.record("memory", summary=self._summary, facts=self._facts, brain=res.brain)
            finally:
                with self._lock:
                    self._busy = False
                    self._lock.notify_all()


def _brief(kind: str, d: dict) -> dict:
    """The part of an event worth summarising (reports without their full state dumps)."""
    if kind == "report":
        return {"batch_id": d.get("batch_id"), "subgoal_id": d.get("subgoal_id"), "status": d.get("status"),
                "reason": d.get("reason", ""), "claims_done": d.get("claims_done"),
                "end_eef_pos_mm": d.get("end_state", {}).get("eef_pos_mm"),
                "end_gripper_width_mm": d.get("end_state", {}).get("gripper_width_mm"),
                "results": [{"i": r["index"], "op": r["command"].get("op"), "status": r["status"],
                             **({"reason": r["reason"]} if r["reason"] else {})} for r in d.get("results", [])]}
    return {k: v for k, v in d.items() if k not in ("system", "user")}
