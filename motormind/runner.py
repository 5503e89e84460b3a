"""The in-process episode runner: the five roles around the Controller, on threads and queues.

plan -> (batch -> controller -> report [-> verify]) ... until success, a budget, or give-up.
Replans when the Verifier rejects a claim, when a subgoal keeps failing, or when a role fails safe.
The evaluator's success check (privileged, simulation only) ends the episode; no role sees it.

Every decision is made by the transport-agnostic components of ``motormind.components`` (the
same ones the ROS 2 nodes wrap); this module only carries their messages in-process: it observes
the robot, runs the Controller, hands the Monitor its snapshots and records what happens.
"""
from __future__ import annotations

import time
from typing import Callable

from .components import (Context, EpisodeBook, EpisodeConfig, EpisodeResult, ExecutorComponent,
                         MonitorComponent, PlannerComponent, VerifierComponent, brief_report, operator_rejection,
                         review_batch)
from .controller import CancelToken, Controller, Report
from .record import Recorder
from .roles.executor import Executor
from .roles.memory import Memory
from .roles.monitor import Monitor
from .roles.planner import Planner
from .roles.verifier import Verifier

__all__ = ["EpisodeConfig", "EpisodeResult", "EpisodeRunner"]


def _brief_report(rep: Report | None) -> str:
    return brief_report(rep)


class EpisodeRunner:
    def __init__(self, robot, brain, instruction: str, recorder: Recorder | None = None,
                 config: EpisodeConfig | None = None, success_fn: Callable[[], bool] | None = None,
                 steps_fn: Callable[[], int] | None = None, progress: Callable[[str], None] | None = None,
                 operator=None, controller: Controller | None = None):
        self.robot = robot
        self.brain = brain
        self.instruction = instruction
        self.rec = recorder or Recorder(None)
        self.cfg = config or EpisodeConfig()
        self.has_success_check = success_fn is not None   # simulation: the evaluator's privileged check
        self.success_fn = success_fn or (lambda: False)
        self.steps_fn = steps_fn or (lambda: robot.observe().step)
        self.progress = progress or (lambda s: None)
        self.profile = robot.profile
        self.operator = operator        # console.desk.OperatorDesk: approval, pause, new instructions
        self.controller_listeners: list = []   # fn(kind, data) for every Controller event
        if controller is not None:      # the console's Controller: its e-stop latch outlives the episode
            controller.on_event = self._on_controller_event
            self.controller = controller
        else:
            self.controller = Controller(robot, self.profile, on_event=self._on_controller_event)
        self.token: CancelToken | None = None   # the batch under way
        rec = self.rec
        self.planner = Planner(brain, rec)
        self.executor = Executor(brain, rec)
        self.verifier = Verifier(brain, rec)
        self.monitor = Monitor(brain, rec) if self.cfg.monitor else None
        self.memory = Memory(brain, rec, instruction) if self.cfg.memory else None
        self.context = Context(self.profile, instruction, self._memory_text,
                               list(getattr(robot, "camera_names", None) or []) or None)
        self.book = EpisodeBook(self.cfg)
        self.t0 = self.book.t0
        self.planner_c = PlannerComponent(self.planner, self.cfg, self.context, self._emit, self._say)
        self.executor_c = ExecutorComponent(self.executor, self.cfg, self.context, self._say)
        self.verifier_c = VerifierComponent(self.verifier, self.cfg, self.context)
        self.monitor_c = MonitorComponent(self.monitor, instruction) if self.monitor else None
        self.observers: list = []        # fn(label, Observation) at every look (the MCAP recorder)
        self._stop_reason = ""
        self.motion_s = 0.0
        self.vlm = {"calls": 0, "s": 0.0, "input_tokens": 0, "output_tokens": 0}
        self.rec.listeners.append(self._count_call)

    def _count_call(self, ev: dict) -> None:
        if ev["kind"] == "vlm_call":
            self.vlm["calls"] += 1
            self.vlm["s"] += float(ev.get("latency_s", 0.0))
            self.vlm["input_tokens"] += int(ev.get("input_tokens", 0) or 0)
            self.vlm["output_tokens"] += int(ev.get("output_tokens", 0) or 0)

    # -- helpers --------------------------------------------------------------------------------
    def stop(self, reason: str = "stopped by operator") -> None:
        """Ask the episode to end after the current batch; the e-stop is controller.emergency_stop."""
        self._stop_reason = reason

    def cancel(self, reason: str, source: str = "operator") -> bool:
        """Cancel what is queued of the batch under way (honoured at the next action boundary)."""
        tok = self.token
        if tok is None or tok.cancelled:
            return False
        tok.cancel(reason, source)
        return True

    def _observe(self, label: str):
        obs = self.robot.observe(images=self.cfg.images)
        if obs.images:
            self.rec.frame(label, obs.images)
        for fn in list(self.observers):
            fn(label, obs)
        return obs

    def _look(self, label: str) -> tuple:
        obs = self._observe(label)
        return obs.state_dict(), obs.images

    def _memory_text(self) -> str:
        return self.memory.text() if self.memory else "(memory disabled)"

    def _emit(self, kind: str, **data) -> None:
        self.rec(kind, **data)
        if self.memory:
            self.memory.add(kind, data)

    def _say(self, text: str) -> None:
        self.progress(f"{self._clock(self.steps_fn())} {text}")

    def _on_controller_event(self, kind: str, data: dict) -> None:
        if kind == "command_end" and self.monitor_c is not None:
            # runs on the Controller's thread: a cheap state snapshot, the brain call is the Monitor's
            self.monitor_c.command_end(data, self.robot.observe().state_dict())
        elif kind in ("command_start", "command_end"):
            self.rec(kind, **data)
        for fn in list(self.controller_listeners):
            fn(kind, data)

    # -- the episode ----------------------------------------------------------------------------
    def run(self) -> EpisodeResult:
        try:
            return self._run()
        finally:
            if self.monitor:
                self.monitor.close()
            if self.memory:
                self.memory.flush(timeout=5)
                self.memory.close()

    def _apply(self, decision) -> bool:
        """Hand a plan decision to the executor and the book; True when the episode ends."""
        if decision is None:
            return False
        if self.book.on_unfit(self._unfit()):      # the plan failed because the endpoint cannot see
            return True
        self.executor_c.on_plan(decision)
        return self.book.on_plan(decision)

    def _unfit(self) -> str:
        return getattr(self.brain, "unfit", "") or ""

    def _preflight(self, images: dict) -> None:
        """Before the first plan: the brain checks that it sees the cameras (Brain.preflight)."""
        check = getattr(self.brain, "preflight", None)
        found = check(images) if (check and images) else None
        if found:
            self._say(f"VLM endpoint check: {found.get('verdict')} - {str(found.get('message', ''))[:140]}")

    def _run(self) -> EpisodeResult:
        book, ex = self.book, self.executor_c
        state, images = self._look("start")
        self._preflight(images)
        if not book.on_unfit(self._unfit()):
            self._apply(self.planner_c.start(state, images))
        while not book.over:
            if self.operator is not None:
                self.operator.park(abort=lambda: bool(self._stop_reason))
            if book.check(self.steps_fn(), self.success_fn(), self._stop_reason, self._unfit()):
                break
            if self.operator is not None and self._apply(self._new_instruction()):
                break
            sg = ex.subgoal
            bid = book.next_batch_id()
            state, images = self._look(f"{bid} {sg.id}")
            prop = ex.propose(state, images, bid)
            decision = None
            if prop.batch is not None:
                batch, source, note = self._review(prop.batch)
                if batch is not None:
                    self.rec("batch", batch=batch, brain=prop.brain, privileged=prop.privileged, source=source)
                    report = self._execute(batch, sg)
                    rep = report.to_json()
                else:                      # rejected by the operator: nothing moves
                    rep = operator_rejection(prop.batch, note, self.robot.observe().state_dict())
                self._emit("report", **rep)
                self._say(f"{sg.id} batch {rep['batch_id']}: {rep['status']}"
                          + (f" - {rep['reason'][:120]}" if rep["reason"] else ""))
                if book.on_report(rep):
                    break
                if self.success_fn():
                    continue   # the loop head records the success
                after = ex.on_report(rep)
                if after.verify:
                    state, images = self._look(f"verify {sg.id}")
                    verdict = self.verifier_c.verify(sg, ex.plan, rep, state, images, ex.last_verdict)
                    self._emit("verdict", **verdict.to_json())
                    self._say(f"{sg.id} verdict: {'achieved' if verdict.achieved else 'REJECTED'} - "
                              f"{verdict.evidence[:100]}")
                    book.on_verdict(verdict)
                    esc = ex.on_verdict(verdict)
                    if esc is not None and book.plan_verified(self.has_success_check, self.success_fn):
                        continue           # ended (no privileged check), or the loop head records the success
                    if esc is not None:
                        decision = self.planner_c.on_escalation(esc, self._look)
                    else:
                        decision = self.planner_c.on_verdict(verdict, self._look)
                elif after.escalate is not None:
                    decision = self.planner_c.on_escalation(after.escalate, self._look)
            elif prop.escalate is not None:
                decision = self.planner_c.on_escalation(prop.escalate, self._look)
            if self._apply(decision):
                break
        return book.result(self.steps_fn(), getattr(self.brain, "name", "?"),
                           bool(getattr(self.brain, "privileged", False)), ex.plan,
                           self.vlm["calls"], self.vlm["s"], self.motion_s)

    # -- the operator (console) ----------------------------------------------------------------
    def _new_instruction(self):
        """A new task from the operator: the Planner replans for it (None: none waiting)."""
        text = self.operator.take_instruction()
        if not text:
            return None
        self.instruction = self.context.instruction = text
        if self.monitor_c is not None:
            self.monitor_c.instruction = text
        self._emit("instruction", text=text, source="operator")
        return self.planner_c.replan(f"the operator gave a new instruction: {text}", False, self._look)

    def _review(self, batch: dict) -> tuple:
        """Approval mode: the operator approves, edits or rejects the batch. -> (batch or None, source, note)"""
        if self.operator is None:
            return batch, "executor", ""
        return review_batch(self.operator, batch, self.rec, self._say, lambda: bool(self._stop_reason))

    def _execute(self, batch: dict, sg) -> Report:
        token = self.token = CancelToken()
        if self.monitor_c:
            self.monitor_c.begin(batch, sg, token)
        t_m = time.monotonic()
        try:
            return self.controller.run(batch, token, source="executor")
        finally:
            self.token = None
            self.motion_s += time.monotonic() - t_m
            if self.monitor_c:
                self.monitor_c.end()

    def _clock(self, steps: int) -> str:
        b = self.cfg.max_steps
        return f"[{time.monotonic() - self.t0:6.1f}s step {steps:4d}{'/' + str(b) if b else ''}]"

