"""What the console shows, folded from the episode's record events (the same events on both
transports: the in-process Recorder's, or the ROS 2 topics turned into them).

``ConsoleView.on_event(ev)`` takes one record event (``{"t", "kind", ...}``); ``state()`` is the
JSON the browser renders; ``rev`` counts changes (the server pushes on change). Lists are bounded.
"""
from __future__ import annotations

import threading
import time
from collections import deque
from pathlib import PurePath

from ..messages import EventKind
from ..vlm_calls import count_vlm, new_vlm_totals
from ..vocabulary import describe

MAX_BATCHES = 30
MAX_LOG = 300


def _short(v, n: int = 160) -> str:
    s = v if isinstance(v, str) else str(v)
    return s if len(s) <= n else s[: n - 1] + "…"




class ConsoleView:
    def __init__(self, clock=time.monotonic):
        self.clock = clock
        self.t0 = clock()
        self._lock = threading.Lock()
        self.rev = 0
        self.listeners: list = []              # fn() after each change
        self.episode: dict = {"status": "idle"}
        self.measured: dict = {}
        self.plan: list = []                   # subgoals with "status"
        self.plan_id = 0
        self.batches: deque = deque(maxlen=MAX_BATCHES)
        self._by_id: dict = {}
        self.alerts: deque = deque(maxlen=100)
        self.verdicts: deque = deque(maxlen=100)
        self.memory: dict = {"summary": "", "facts": []}
        self.vlm: deque = deque(maxlen=MAX_LOG)
        self.vlm_totals = new_vlm_totals()
        # over ROS 2 a call names its episode's instruction and its number among its node's calls of that
        # episode (role_nodes.py); it may come before that episode's start (another node, another topic):
        # it waits here for the start. The end names per node how many count (vlm_counted).
        self._calls_ahead: dict = {}           # instruction -> {(node, call_no): call}
        self._calls: dict = {}                 # the started episode's calls, (node, call_no) -> call
        self._counted: dict | None = None      # its end's vlm_counted (None: running, or in-process)
        self._started = None                   # the instruction of the episode whose start came last
        self.timeline: deque = deque(maxlen=MAX_LOG)
        self.operator_log: deque = deque(maxlen=100)
        self.controller = {"estop": False, "estop_reason": "", "paused": False, "held": ""}
        self.frames: dict = {}                 # camera -> (seq, jpeg bytes, t)
        self.extra: dict = {}                  # runtime facts (robot, profile limits, transport)
        self.directions = None                 # the profile's direction words: a command's text names them
        self.manual_used = False               # the episode's VLM is the manual endpoint (its requests seen)

    # -- changes --------------------------------------------------------------------------------
    def _bump(self) -> None:
        self.rev += 1
        for fn in list(self.listeners):
            try:
                fn()
            except Exception:  # noqa: BLE001
                pass

    def now(self) -> float:
        return round(self.clock() - self.t0, 3)

    def set_state(self, state: dict) -> None:
        with self._lock:
            self.measured = dict(state)
            self._bump()

    def set_frame(self, camera: str, jpeg: bytes) -> None:
        with self._lock:
            seq = self.frames.get(camera, (0,))[0] + 1
            self.frames[camera] = (seq, jpeg, self.now())
            self._bump()

    def frame(self, camera: str):
        with self._lock:
            return self.frames.get(camera)

    def set_extra(self, **kw) -> None:
        with self._lock:
            self.extra.update(kw)
            self._bump()

    def _tl(self, t, kind: str, text: str, level: str = "info") -> None:
        self.timeline.append({"t": t, "kind": kind, "text": _short(text, 240), "level": level})

    def _batch(self, bid: str, create: bool = True) -> dict | None:
        b = self._by_id.get(bid)
        if b is None and create:
            b = {"batch_id": bid, "subgoal_id": "", "source": "", "status": "queued", "reason": "",
                 "commands": [], "review": ""}
            if len(self.batches) == self.batches.maxlen:
                self._by_id.pop(self.batches[0]["batch_id"], None)
            self.batches.append(b)
            self._by_id[bid] = b
        return b

    # -- events ---------------------------------------------------------------------------------
    def on_event(self, ev: dict) -> None:
        with self._lock:
            self._fold(ev)
            self._bump()

    def _fold(self, ev: dict) -> None:  # noqa: C901 - one branch per event kind, flat on purpose
        k = ev.get("kind", "")
        t = self.now()             # console time: records (episodes, the session) each start their own clock
        if k == "episode_start":
            self.episode = {"status": "running", "instruction": ev.get("instruction", ""),
                            "brain": ev.get("brain", ""), "privileged": bool(ev.get("privileged")),
                            "suite": ev.get("suite", ""), "task": ev.get("task", ""), "t_start": t,
                            "step_budget": ev.get("step_budget")}
            self.plan, self.batches, self._by_id = [], deque(maxlen=MAX_BATCHES), {}
            # the episode's own calls, as its summary.json counts them (not the sum over the session's episodes)
            self._started = ev.get("instruction", "")
            self._calls, self._counted = self._calls_ahead.pop(self._started, None) or {}, None
            self._calls_ahead.clear()
            self.vlm_totals = self._total(self._calls)
            self.manual_used = str(ev.get("brain", "")).endswith(":manual")
            self._tl(t, k, f"episode started: {ev.get('instruction', '')}"
                     + (" [oracle: privileged simulator state]" if ev.get("privileged") else ""))
        elif k == "episode_end":
            self.episode.update(status="ended", outcome=ev.get("outcome", ""), reason=ev.get("reason", ""),
                                success=bool(ev.get("success")))
            if ev.get("vlm_calls") is not None:   # over ROS 2, the end's result: the episode's record gives the count
                self._counted = dict(ev.get("vlm_counted") or {})
                self.vlm_totals = self._total(self._calls)
                self.vlm_totals["calls"] = int(ev["vlm_calls"])
            self._tl(t, k, f"episode ended: {ev.get('outcome', '')} - {ev.get('reason', '')}",
                     "ok" if ev.get("success") else "warn")
        elif k == "instruction":
            self.episode["instruction"] = ev.get("text", "")
            self._tl(t, k, f"new instruction: {ev.get('text', '')}")
        elif k == "plan":
            self.plan_id = ev.get("plan_id", self.plan_id + 1)
            self.plan = [{**s, "status": "pending"} for s in ev.get("subgoals", [])]
            if self.plan:
                self.plan[0]["status"] = "active"
            why = ev.get("replan_reason") or ""
            self._tl(t, k, f"plan {self.plan_id}: " + ", ".join(s["id"] for s in self.plan)
                     + (f" (replan: {why})" if why else ""))
        elif k == "replan":
            self._tl(t, k, f"replan: {ev.get('reason', '')}", "warn")
        elif k in ("batch", "review"):
            batch = ev.get("batch") or {}
            b = self._batch(batch.get("batch_id", "?"))
            b["subgoal_id"] = batch.get("subgoal_id", "")
            b["source"] = ev.get("source") or ev.get("brain", "")
            b["commands"] = [{"index": i, "command": c, "text": describe(c, self.directions), "status": "queued",
                              "reason": ""} for i, c in enumerate(batch.get("commands") or [])]
            if k == "review":
                b["status"], b["review"] = "awaiting approval", ev.get("id", "")
                self._tl(t, k, f"{b['batch_id']} waits for the operator's approval", "warn")
            else:
                b["status"], b["review"] = "queued", ""
                self._mark(b["subgoal_id"], "active")
                self._tl(t, k, f"{b['batch_id']} ({b['source']}): {len(b['commands'])} commands")
        elif k == "review_decision":
            b = self._batch(ev.get("batch_id", "?"))
            b["review"] = ""
            if ev.get("decision") == "rejected":
                b["status"], b["reason"] = "rejected", f"rejected by the operator: {ev.get('note', '')}"
            self._tl(t, k, f"{ev.get('batch_id')} {ev.get('decision')} by {ev.get('by') or 'operator'}"
                     + (f": {ev.get('note')}" if ev.get("note") else ""))
        elif k == "command_start":
            b = self._batch(ev.get("batch_id", "?"))
            b["status"] = "running"
            c = self._command(b, ev.get("index", 0), ev.get("command"))
            c["status"] = "running"
        elif k == "command_end":
            b = self._batch(ev.get("batch_id", "?"))
            c = self._command(b, ev.get("index", 0), ev.get("command"))
            c.update(status=ev.get("status", ""), reason=ev.get("reason", ""), achieved=ev.get("achieved", {}),
                     commanded=ev.get("commanded", {}))
        elif k == "report":
            b = self._batch(ev.get("batch_id", "?"))
            b.update(status=ev.get("status", ""), reason=ev.get("reason", ""), source=b["source"] or ev.get("source", ""))
            if not b["subgoal_id"]:
                b["subgoal_id"] = ev.get("subgoal_id", "")
            for r in ev.get("results", []):
                if r.get("index", -1) < 0:
                    continue
                c = self._command(b, r["index"], r.get("command"))
                c.update(status=r.get("status", ""), reason=r.get("reason", ""), achieved=r.get("achieved", {}),
                         commanded=r.get("commanded", {}))
            if not b["commands"] and ev.get("results"):
                b["commands"] = [{"index": 0, "command": {}, "status": "rejected",
                                  "reason": ev["results"][0].get("reason", "")}]
            if isinstance(ev.get("end_state"), dict) and ev["end_state"]:
                self.measured = dict(ev["end_state"])
            lvl = "ok" if ev.get("status") == "done" else "warn"
            self._tl(t, k, f"{b['batch_id']}: {ev.get('status')}" + (f" - {ev.get('reason')}" if ev.get("reason") else ""), lvl)
        elif k == "verdict":
            v = {"t": t, **{x: ev.get(x) for x in ("subgoal_id", "achieved", "evidence", "brain")}}
            self.verdicts.append(v)
            self._mark(ev.get("subgoal_id", ""), "achieved" if ev.get("achieved") else "rejected")
            if ev.get("achieved"):
                nxt = next((s for s in self.plan if s["status"] == "pending"), None)
                if nxt:
                    nxt["status"] = "active"
            self._tl(t, k, f"{ev.get('subgoal_id')}: {'achieved' if ev.get('achieved') else 'REJECTED'} - "
                     f"{ev.get('evidence', '')}", "ok" if ev.get("achieved") else "warn")
        elif k == "monitor_cancel":
            self.alerts.append({"t": t, "source": "monitor", "batch_id": ev.get("batch_id"), "text": ev.get("reason", "")})
            self._tl(t, k, f"monitor cancels {ev.get('batch_id')}: {ev.get('reason', '')}", "warn")
        elif k == "role_failed":
            self.alerts.append({"t": t, "source": ev.get("role", "role"), "text": f"failed safe: {ev.get('error', '')}"})
            self._tl(t, k, f"{ev.get('role')} failed safe: {ev.get('error', '')}", "warn")
        elif k == "memory":
            self.memory = {"summary": ev.get("summary", ""), "facts": list(ev.get("facts", []))[-10:]}
        elif k == EventKind.VLM_CALL:
            self.vlm.append({"t": t, "role": ev.get("role"), "ok": ev.get("ok"), "brain": ev.get("brain"),
                             "latency_s": ev.get("latency_s"), "input_tokens": ev.get("input_tokens", 0),
                             "output_tokens": ev.get("output_tokens", 0), "attempt": ev.get("attempt", 0),
                             "error": _short(ev.get("error", ""), 200), "response": _short(ev.get("response", ""), 400)})
            if ev.get("call_no") is not None:     # over ROS 2: the episode it names, counted as its end says
                self._numbered_call(ev)
            elif self.episode.get("status") != "ended":
                count_vlm(self.vlm_totals, ev)
        elif k == "estop":
            self.controller.update(estop=True, estop_reason=ev.get("reason", ""))
            self.alerts.append({"t": t, "source": "controller", "text": f"EMERGENCY STOP: {ev.get('reason', '')}"})
            self._tl(t, k, f"EMERGENCY STOP: {ev.get('reason', '')} (latched until reset)", "error")
        elif k == "estop_reset":
            self.controller.update(estop=False, estop_reason="")
            self._tl(t, k, "emergency stop reset")
        elif k == "pause":
            self.controller["paused"] = True
            self._tl(t, k, f"paused: {ev.get('reason', '')}")
        elif k == "resume":
            self.controller.update(paused=False, held="")
            self._tl(t, k, "resumed")
        elif k == "held":
            self.controller["held"] = f"{ev.get('batch_id')} before command {ev.get('index')}"
        elif k == "controller_status":     # ROS: the Controller's notices (stopped, ready, watchdog)
            self.controller.update(estop=bool(ev.get("estop")), estop_reason=ev.get("reason", "") if ev.get("estop") else "")
            self._tl(t, k, f"controller {ev.get('state', '')}: {ev.get('reason', '')}",
                     "error" if ev.get("estop") else "info")
        elif k == "operator_action":
            entry = {"t": t, **{x: ev.get(x) for x in ("action", "by", "ok", "detail")}}
            self.operator_log.append(entry)
            self._tl(t, k, f"operator {ev.get('by') or '?'}: {ev.get('action')}"
                     + (f" - {ev.get('detail')}" if ev.get("detail") else "")
                     + ("" if ev.get("ok", True) else " (refused)"), "info" if ev.get("ok", True) else "warn")
        elif k == "manual_request":        # the manual VLM endpoint (serve/manual.py): a request waits
            self.manual_used = True
            name = PurePath(str(ev.get("folder") or "")).name
            within = ev.get("answer_within_s")
            self._tl(t, k, f"{ev.get('role')} request {name} waits for its answer"
                     + (f" (within {within:g} s)" if isinstance(within, (int, float)) else ""), "warn")
        elif k == "manual_answer" and ev.get("folder"):
            name = PurePath(str(ev.get("folder"))).name
            self._tl(t, k, f"{ev.get('role')} request {name} answered after {ev.get('wait_s')} s")
        elif k == "manual_expired":
            name = PurePath(str(ev.get("folder") or "")).name
            self.alerts.append({"t": t, "source": ev.get("role", "role"),
                                "text": f"request {name} expired unanswered: the role timed out"})
            self._tl(t, k, f"{ev.get('role')} request {name} expired unanswered (the role timed out)", "warn")
        elif k in ("repair_request", "vlm_retry", "serve_fault"):
            self._tl(t, k, f"{k}: {ev.get('role', '')} {ev.get('error', '') or ev.get('reason', '')}", "warn")

    def _command(self, b: dict, index: int, command) -> dict:
        while len(b["commands"]) <= index:
            b["commands"].append({"index": len(b["commands"]), "command": {}, "text": "", "status": "queued",
                                  "reason": ""})
        c = b["commands"][index]
        if command and not c["command"]:
            c["command"] = command
            c["text"] = describe(command, self.directions)
        return c

    def _mark(self, sgid: str, status: str) -> None:
        for s in self.plan:
            if s["id"] == sgid and not (s["status"] == "achieved" and status == "active"):
                s["status"] = status

    def _numbered_call(self, ev: dict) -> None:
        """A call over ROS 2: kept under the episode it names (one naming another instruction waits
        for that episode's start); the started episode's totals are its calls, once it has ended those
        its end counts (per node, numbered up to its ``vlm_counted``), with the end's count of calls."""
        instr = ev.get("instruction")
        call = {k: v for k, v in ev.items() if k not in ("system", "user", "response")}   # for count_vlm
        key = (str(ev.get("node", "")), int(ev["call_no"]))
        if instr != self._started:
            while len(self._calls_ahead) >= 8 and instr not in self._calls_ahead:
                self._calls_ahead.pop(next(iter(self._calls_ahead)))
            self._calls_ahead.setdefault(instr, {})[key] = call
            return
        self._calls[key] = call
        calls = self.vlm_totals["calls"]
        self.vlm_totals = self._total(self._calls)
        if self._counted is not None:
            self.vlm_totals["calls"] = calls          # the end's count (its calls may still be on their way)

    def _total(self, calls: dict) -> dict:
        tot = new_vlm_totals()
        for (node, n), call in calls.items():
            if self._counted is None or n <= int(self._counted.get(node, 0)):
                count_vlm(tot, call)
        return tot

    # -- the snapshot ---------------------------------------------------------------------------
    def state(self) -> dict:
        with self._lock:
            return {"rev": self.rev, "t": self.now(), "episode": dict(self.episode), "measured": dict(self.measured),
                    "plan": [dict(s) for s in self.plan], "batches": [
                        {**b, "commands": [dict(c) for c in b["commands"]]} for b in reversed(self.batches)],
                    "alerts": list(self.alerts)[-30:][::-1], "verdicts": list(self.verdicts)[-30:][::-1],
                    "memory": dict(self.memory), "vlm": list(self.vlm)[-60:][::-1], "vlm_totals": dict(self.vlm_totals),
                    "timeline": list(self.timeline)[-150:][::-1], "operator_log": list(self.operator_log)[-30:][::-1],
                    "controller": dict(self.controller), "manual_used": self.manual_used,
                    "frames": {c: {"seq": f[0], "t": f[2]} for c, f in self.frames.items()}, **self.extra}
