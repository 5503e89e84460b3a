"""The operator's desk: what a person at the console holds over an episode. Transport-agnostic.

    approval   each batch waits for the operator to approve it (as is or edited) or reject it
    takeover   the operator answers a role (``executor``: writes the next batch; ``verifier``: gives
               the verdict); the answer goes through the role's parse path like a VLM's
    paused     the episode holds before its next batch (the Controller holds at its next boundary);
               ``parked`` says it holds now: at its loop head, or waiting here for the operator (an
               approval, an answer) while paused. A decision made while paused is kept and handed
               over on resume, so nothing moves before then (the operator may jog meanwhile).
    control    one operator in control at a time (the others watch); shown to every viewer
    instruction  a new task from the operator (the Planner replans for it)

The episode side calls ``review(batch)``, ``ask(role, ...)``, ``park()``; the console side calls
``decide``, ``answer``, ``set_*``. Waits end when the operator decides, when the setting that made
them wait is switched off, or when the desk is closed (the episode ended or was stopped).
"""
from __future__ import annotations

import copy
import itertools
import threading
import time
from dataclasses import dataclass, field

TAKEOVER_ROLES = ("executor", "verifier")


@dataclass
class Review:
    """The operator's decision on a batch. ``batch`` is what runs (None: rejected)."""
    decision: str                 # approved | edited | rejected | auto (approval off)
    batch: dict | None
    note: str = ""
    by: str = ""


@dataclass
class Pending:
    id: str
    kind: str                     # review | answer
    role: str
    payload: dict = field(default_factory=dict)   # review: {"batch": ...}; answer: {"context": ..., "error": ...}
    since: float = 0.0

    def to_json(self) -> dict:
        return {"id": self.id, "kind": self.kind, "role": self.role, "since": round(self.since, 3), **self.payload}


def _edited(batch: dict, edit: dict) -> dict:
    """The operator's edit of ``batch``: its commands, under the batch's own ids."""
    return {**edit, "batch_id": batch.get("batch_id", ""), "subgoal_id": batch.get("subgoal_id", "")}


class OperatorDesk:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self._cv = threading.Condition()
        self.approval = False
        self.paused = False
        self.takeover: set[str] = set()
        self.locked: set[str] = set()            # roles only the operator can answer (no brain behind)
        self.pending: dict[str, Pending] = {}
        self._decisions: dict[str, dict] = {}
        self._ids = itertools.count(1)
        self.holder: dict | None = None          # {"client", "name", "since"}
        self.parked = False                      # the episode is holding at its loop head
        self.instructions: list[str] = []        # new tasks not yet taken by the episode
        self.closed = ""                         # why waits were released (episode over)
        self.listeners: list = []                # fn() on every change (the console pushes its state)

    # -- changes --------------------------------------------------------------------------------
    def _changed(self) -> None:
        self._cv.notify_all()
        for fn in list(self.listeners):
            try:
                fn()
            except Exception:  # noqa: BLE001 - a viewer must never break the episode
                pass

    def snapshot(self) -> dict:
        with self._cv:
            return {"approval": self.approval, "paused": self.paused, "takeover": sorted(self.takeover),
                    "pending": [p.to_json() for p in self.pending.values()], "holder": self.holder,
                    "locked": sorted(self.locked), "queued_instructions": list(self.instructions),
                    "parked": self.parked, "closed": self.closed}

    def set_approval(self, on: bool) -> None:
        with self._cv:
            self.approval = bool(on)
            self._changed()

    def set_paused(self, on: bool) -> None:
        with self._cv:
            self.paused = bool(on)
            self._changed()

    def set_takeover(self, role: str, on: bool) -> None:
        if role not in TAKEOVER_ROLES:
            raise ValueError(f"takeover.role: {role!r} cannot be taken over (one of {', '.join(TAKEOVER_ROLES)})")
        with self._cv:
            if not on and role in self.locked:
                raise ValueError(f"takeover.role: the {role} cannot be given back: no brain answers it in "
                                 "this console (it runs without a VLM)")
            (self.takeover.add if on else self.takeover.discard)(role)
            self._changed()

    def lock_takeover(self, roles) -> None:
        """These roles are the operator's for good (an operator-only brain)."""
        with self._cv:
            self.locked |= set(roles)
            self.takeover |= set(roles)
            self._changed()

    def add_instruction(self, text: str) -> None:
        with self._cv:
            self.instructions.append(text)
            self._changed()

    def take_instruction(self, timeout: float = 0.0) -> str | None:
        """The oldest new task, waiting up to ``timeout`` s for one (None: none came)."""
        with self._cv:
            if timeout > 0:
                self._cv.wait_for(lambda: bool(self.instructions), timeout)
            if not self.instructions:
                return None
            text = self.instructions.pop(0)
            self._changed()
            return text

    def open(self) -> None:
        """A new episode: waits block again."""
        with self._cv:
            self.closed = ""
            self._changed()

    def close(self, reason: str) -> None:
        """Release every wait (the episode is over or stopping)."""
        with self._cv:
            self.closed = reason or "closed"
            self._changed()

    # -- control: one operator at a time --------------------------------------------------------
    def claim(self, client: str, name: str, force: bool = False) -> tuple[bool, str]:
        with self._cv:
            h = self.holder
            if h and h["client"] != client and not force:
                return False, f"{h['name']} is in control (since {h['since']:.0f} s); take over explicitly"
            prev = h["name"] if h and h["client"] != client else ""
            self.holder = {"client": client, "name": name or "operator", "since": round(self.clock(), 3)}
            self._changed()
            return True, f"took control from {prev}" if prev else "in control"

    def release(self, client: str) -> bool:
        with self._cv:
            if self.holder and self.holder["client"] == client:
                self.holder = None
                self._changed()
                return True
            return False

    def in_control(self, client: str) -> bool:
        with self._cv:
            return bool(self.holder and self.holder["client"] == client)

    # -- the episode side -----------------------------------------------------------------------
    def _set_parked(self, on: bool) -> None:
        if self.parked != on:
            self.parked = on
            self._changed()

    def _stopping(self, abort) -> bool:
        return bool(self.closed) or (abort is not None and abort())

    def _hold_while_paused(self, abort=None) -> None:
        """Hold (parked) while paused; the caller holds ``_cv``."""
        try:
            while self.paused and not self._stopping(abort):
                self._set_parked(True)
                self._cv.wait(0.1)
        finally:
            self._set_parked(False)

    def _wait(self, pid: str, still: callable, abort=None) -> dict | None:
        """Wait for the decision on ``pid`` while ``still()``; None when released otherwise. Paused
        meanwhile, the episode is parked here; a decision taken while paused is handed over on resume."""
        try:
            while True:
                if pid in self._decisions:
                    d = self._decisions.pop(pid)
                    self.pending.pop(pid, None)          # decided: no longer waiting for the operator
                    self._changed()
                    self._hold_while_paused(abort)
                    return None if self._stopping(abort) else d
                if self._stopping(abort) or not still():
                    return None
                self._set_parked(self.paused)
                self._cv.wait(0.1)
        finally:
            self._set_parked(False)

    def batch_to_run(self, pid: str, edit: dict | None = None) -> dict:
        """The batch an approval of ``pid`` would hand over (``edit``: the operator's edited batch)."""
        with self._cv:
            p = self.pending.get(pid)
            if p is None or p.kind != "review":
                raise KeyError(f"id: no batch {pid!r} is waiting for approval")
            return _edited(p.payload["batch"], edit) if edit is not None else copy.deepcopy(p.payload["batch"])

    def review(self, batch: dict, abort=None) -> Review:
        """In approval mode, hold ``batch`` until the operator decides."""
        with self._cv:
            if not self.approval:
                return Review("auto", batch)
            pid = f"review-{batch.get('batch_id', '')}-{next(self._ids)}"
            self.pending[pid] = Pending(pid, "review", "executor", {"batch": copy.deepcopy(batch)}, self.clock())
            self._changed()
            try:
                d = self._wait(pid, lambda: self.approval, abort)
            finally:
                self.pending.pop(pid, None)
                self._changed()
            if d is None and not self._stopping(abort):
                self._hold_while_paused(abort)      # approval switched off while paused: still held
        if d is None:
            if self.closed or (abort is not None and abort()):
                return Review("rejected", None, f"not run: {self.closed or 'the episode is stopping'}")
            return Review("auto", batch, "approval mode switched off while it waited")
        if d["decision"] == "reject":
            return Review("rejected", None, d.get("note", "") or "rejected by the operator", d.get("by", ""))
        if d.get("batch") is not None:
            return Review("edited", _edited(batch, d["batch"]), d.get("note", ""), d.get("by", ""))
        return Review("approved", batch, d.get("note", ""), d.get("by", ""))

    def ask(self, role: str, context: dict, error: str = "", abort=None) -> str | None:
        """A role taken over: wait for the operator's answer text (None: given back, or closed)."""
        with self._cv:
            if role not in self.takeover:
                return None
            pid = f"answer-{role}-{next(self._ids)}"
            self.pending[pid] = Pending(pid, "answer", role, {"context": context, "error": error}, self.clock())
            self._changed()
            try:
                d = self._wait(pid, lambda: role in self.takeover, abort)
            finally:
                self.pending.pop(pid, None)
                self._changed()
        return None if d is None else d["text"]

    def park(self, abort=None) -> None:
        """At the episode's loop head: hold while paused (the operator may jog meanwhile)."""
        with self._cv:
            self._hold_while_paused(abort)

    # -- the console side -----------------------------------------------------------------------
    def decide(self, pid: str, decision: str, batch: dict | None = None, note: str = "", by: str = "") -> None:
        """``decision``: approve (``batch`` given: the edited batch) or reject."""
        if decision not in ("approve", "reject"):
            raise ValueError(f"decision: {decision!r} is not approve or reject")
        with self._cv:
            p = self.pending.get(pid)
            if p is None or p.kind != "review":
                raise KeyError(f"id: no batch {pid!r} is waiting for approval")
            self._decisions[pid] = {"decision": decision, "batch": batch, "note": note, "by": by}
            self._changed()

    def reject_waiting(self, note: str, by: str = "") -> int:
        """Reject every batch waiting for approval (cancel queue). -> how many."""
        with self._cv:
            ids = [p.id for p in self.pending.values() if p.kind == "review" and p.id not in self._decisions]
            for pid in ids:
                self._decisions[pid] = {"decision": "reject", "batch": None, "note": note, "by": by}
            if ids:
                self._changed()
            return len(ids)

    def answer(self, pid: str, text: str, by: str = "") -> str:
        with self._cv:
            p = self.pending.get(pid)
            if p is None or p.kind != "answer":
                raise KeyError(f"id: no role is waiting for an answer under {pid!r}")
            self._decisions[pid] = {"text": text, "by": by}
            self._changed()
            return p.role
