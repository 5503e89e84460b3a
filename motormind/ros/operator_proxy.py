"""The operator's desk as the Executor and Verifier nodes see it, over the console's topics.

The console node owns the one ``OperatorDesk`` (motormind/console/desk.py). A role node holds this
proxy in its place: the episode side of the desk (``review``, ``ask``, ``takeover``), the same calls
the in-process runner and ``OperatorBrain`` make, carried over

    console/mode      (latched)  console -> all: {approval, takeover: [roles]}
    console/request              node -> console: {id, kind: review, batch} | {id, kind: answer, role,
                                 context, error} | {id, kind: withdraw}
    console/response             console -> node: {id, decision, batch, note, by} | {id, text}
    pause             (latched)  Bool: the Executor holds before its next batch while true

Waits end as the desk's do: when the console answers, when the setting that made them wait is
switched off (approval off: the batch runs as proposed; role given back: the brain answers), or
when no console has listened for ``gone_s`` (the desk closed: a batch waiting for approval is
rejected, "not run"; a taken-over role's question goes back to the brain). Without a console the
proxy never waits: approval is off and no role is taken over until a console says otherwise.
"""
from __future__ import annotations

import os
import threading
import time

from ..console.desk import Review

_GONE = object()


class OperatorProxy:
    def __init__(self, node, gone_s: float = 3.0, on_pause=None):
        self.node = node
        self.gone_s = gone_s
        self.on_pause = on_pause or (lambda paused: None)
        self.approval = False
        self.takeover: set[str] = set()
        self.paused = False
        self._cv = threading.Condition()
        self._answers: dict[str, dict] = {}
        self._n = 0
        node.publisher("console/request")       # made now: matched with the console before the first ask
        node.listen("console/mode", self._on_mode)
        node.listen("console/response", self._on_response)
        node.listen("pause", self._on_pause)

    # -- from the console (callbacks: quick) ------------------------------------------------------
    def _on_mode(self, msg: dict) -> None:
        with self._cv:
            self.approval = bool(msg.get("approval"))
            self.takeover = {str(r) for r in msg.get("takeover") or []}
            self._cv.notify_all()

    def _on_response(self, msg: dict) -> None:
        with self._cv:
            rid = str(msg.get("id", ""))
            if rid in self._answers and self._answers[rid] is None:
                self._answers[rid] = msg
                self._cv.notify_all()

    def _on_pause(self, msg) -> None:
        was, self.paused = self.paused, bool(msg.data)
        if was != self.paused:
            self.on_pause(self.paused)

    # -- the episode side of the desk ---------------------------------------------------------------
    def _call(self, kind: str, payload: dict, still, abort=None):
        """Ask the console; its answer, None (``still()`` turned false, or ``abort()``), or _GONE."""
        pub = self.node.publisher("console/request")
        with self._cv:
            self._n += 1
            rid = f"{self.node.get_name()}-{os.getpid()}-{self._n}"
            self._answers[rid] = None
        req = {"id": rid, "kind": kind, "from": self.node.get_name(), **payload}
        self.node.send("console/request", req)
        heard = pub.get_subscription_count() > 0
        silent_since = None if heard else time.monotonic()
        try:
            while True:
                with self._cv:
                    self._cv.wait_for(lambda: self._answers.get(rid) is not None or not still(), 0.1)
                    msg = self._answers.get(rid)
                    if msg is not None:
                        return msg
                    if not still():
                        break
                if abort is not None and abort():
                    break
                if pub.get_subscription_count() > 0:
                    if silent_since is not None:      # a console (back) on the graph: ask it
                        self.node.send("console/request", req)
                    silent_since = None
                elif silent_since is None:
                    silent_since = time.monotonic()
                elif time.monotonic() - silent_since > self.gone_s:
                    return _GONE
            self.node.send("console/request", {"id": rid, "kind": "withdraw", "from": self.node.get_name()})
            return None
        finally:
            with self._cv:
                self._answers.pop(rid, None)

    def review(self, batch: dict, abort=None) -> Review:
        """In approval mode, hold ``batch`` until the operator decides (OperatorDesk.review)."""
        if not self.approval:
            return Review("auto", batch)
        r = self._call("review", {"batch": batch}, lambda: self.approval, abort)
        if r is _GONE:
            return Review("rejected", None, "not run: the operator console is gone (approval mode was on)")
        if r is None:
            if abort is not None and abort():
                return Review("rejected", None, "not run: the episode is stopping")
            return Review("auto", batch, "approval mode switched off while it waited")
        decision = str(r.get("decision", "rejected"))
        out = r.get("batch") if isinstance(r.get("batch"), dict) else None
        if decision == "rejected" or out is None:
            return Review("rejected", None, str(r.get("note", "")) or "rejected by the operator", str(r.get("by", "")))
        out = {**out, "batch_id": batch.get("batch_id", ""), "subgoal_id": batch.get("subgoal_id", "")}
        return Review(decision, out, str(r.get("note", "")), str(r.get("by", "")))

    def ask(self, role: str, context: dict, error: str = "", abort=None) -> str | None:
        """A role taken over: the operator's answer text (None: given back, no console: the brain answers)."""
        if role not in self.takeover:
            return None
        r = self._call("answer", {"role": role, "context": context, "error": error},
                       lambda: role in self.takeover, abort)
        if r is None or r is _GONE:
            return None
        text = r.get("text")
        return text if isinstance(text, str) else None
