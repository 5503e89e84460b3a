"""The in-process driver of the episode machine: the five roles around the Controller, on threads.

The decisions (what happens after a plan, a report or a verdict; the budgets; the end) are the
episode machine's (``motormind/episode/machine.py``), the same one the ROS 2 Executor node drives.
This module answers the machine's actions at once, on the caller's thread: it observes the robot,
runs the Controller, asks the Verifier and the Planner, hands the Monitor its snapshots and records
what happens. The evaluator's success check (privileged, simulation only) is read at the loop head;
no role sees it.
"""
from __future__ import annotations

import time
from typing import Callable

from .components import (Context, ExecutorComponent, MonitorComponent, PlannerComponent, VerifierComponent,
                         operator_rejection, review_batch)
from .controller import CancelToken, Controller
from .episode.book import EpisodeResult
from .episode.config import EpisodeConfig
from .episode.machine import (AwaitPlan, Deliver, End, EpisodeMachine, Escalate, Execute, Hold, Hooks,
                              Verify)
from .episode.overlap import PROBE_PLAN_TAG, AheadPool, ahead_tag, overlap_of, scene_basis
from .grounding.marks import Marker, options_of
from .grounding.points import Grounding, convention_of
from .messages import EventKind, Report
from .record import Recorder
from .roles.executor import Executor
from .roles.facts import PromptFacts
from .roles.memory import Memory
from .roles.monitor import Monitor
from .roles.planner import Planner
from .roles.verifier import Verifier
from .vlm_calls import dropped_cost, vlm_totals

__all__ = ["EpisodeConfig", "EpisodeResult", "EpisodeRunner"]


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
        self.monitor = Monitor(brain, rec) if self.cfg.monitor else None
        self.memory = Memory(brain, rec, instruction) if self.cfg.memory else None
        self.marker = Marker(robot, options_of(brain))   # marks on every frame a role sees (grounding/marks.py)
        self._marked: dict = {}
        # the roles' points and regions, resolved from each look's depth (grounding/points.py)
        self.grounding = Grounding(self.profile.directions, lambda role, cam, w, h: convention_of(brain, role, w, h),
                                   getattr(robot, "render", None), self.rec, max_looks=self.cfg.max_looks,
                                   record_frame=self.rec.frame)
        self.context = Context(self.profile, instruction, self._memory_text,
                               list(getattr(robot, "camera_names", None) or []) or None, self.grounding)
        # the numbers every prompt states (roles/facts.py): the backend's calibrations and scene facts
        # (read once), the marks' info of each look, the budget
        # the grip point's pixel in the convention the Executor's points are read in (the model family's)
        self.context.facts = PromptFacts.of_robot(robot, self.budget_left, self.marker.options,
                                                  lambda cam, w, h: convention_of(brain, "executor", w, h))
        self.planner_c = PlannerComponent(Planner(brain, self._tagged), self.cfg, self.context, self._emit, self._say)
        self.executor_c = ExecutorComponent(Executor(brain, self._tagged), self.cfg, self.context, self._say)
        self.verifier_c = VerifierComponent(Verifier(brain, rec), self.cfg, self.context)
        self.monitor_c = MonitorComponent(self.monitor, instruction) if self.monitor else None
        if self.monitor_c is not None:
            self.monitor_c.setup = self.context.facts.robot()
        self.vlm = vlm_totals(self.rec)     # the record's VLM calls (vlm_calls.py), ahead ones by tag (by_tag)
        # Executor calls made ahead of their time (episode/overlap.py), per the brain's VLM config
        self.overlap = overlap_of(brain)
        self._pool = AheadPool() if self.overlap.any else None
        self.machine = EpisodeMachine(self.cfg, self.executor_c, Hooks(
            evaluate=lambda: (self.success_fn(), self.steps_fn()), look=self._look,
            has_success_check=self.has_success_check, unfit=self._unfit, stop_reason=lambda: self._stop_reason,
            hold=self._park, review=self._review if operator is not None else None,
            interject=self._new_instruction if operator is not None else None,
            rejection=lambda batch, note: operator_rejection(batch, note, self.robot.observe().state_dict()),
            vlm=lambda: (self.vlm["calls"], self.vlm["latency_s"]), say=self._say,
            brain=getattr(brain, "name", "?"), privileged=bool(getattr(brain, "privileged", False)),
            overlap=self.overlap, spawn=self._pool.spawn if self._pool is not None else None, basis=lambda: scene_basis(self.brain),
            record=self.rec))
        self.book = self.machine.book
        self.t0 = self.machine.t0
        self.observers: list = []        # fn(label, Observation) at every look (the MCAP recorder)
        self._stop_reason = ""
        watch = getattr(brain, "watch_budget", None)
        if watch is not None:            # the brain may tell its endpoint what the episode has left
            watch(self.budget_left)

    def budget_left(self) -> dict:
        """What the episode has left: control steps, wall time, batches (the one being asked for
        counts). Not privileged: a teleoperator knows it; the openai brain's ``send_budget`` sends it
        with each call."""
        steps, book, cfg = int(self.steps_fn()), self.book, self.cfg
        used = book.clock() - book.t0
        return {"steps_used": steps, "step_budget": cfg.max_steps,
                "steps_left": None if cfg.max_steps is None else max(0, cfg.max_steps - steps),
                "wall_s_used": round(used, 1), "wall_budget_s": cfg.wall_budget_s,
                "wall_s_left": round(max(0.0, cfg.wall_budget_s - used), 1),
                "batches_used": book.batches, "batch_budget": cfg.max_batches}

    @property
    def motion_s(self) -> float:
        return self.machine.motion_s

    # -- overlap (episode/overlap.py) -------------------------------------------------------------
    def _tagged(self, kind: str, **data) -> None:
        """The Executor's record: a call made ahead carries its tag (``ahead``), so it is costed apart."""
        tag = ahead_tag()
        self.rec(kind, **({**data, "ahead": tag} if tag and kind == EventKind.VLM_CALL else data))

    def _overlap_summary(self, result: EpisodeResult) -> None:
        """The result's ``overlap``: per kind asked / used / dropped, and what the dropped calls cost
        (their calls, model seconds, tokens, USD, and that share of the episode's VLM time)."""
        if self._pool is not None:
            self._pool.close(wait=True)         # a dropped call still in flight is counted when it ends
        tagged = self.vlm.get("by_tag") or {}
        if not result.overlap and not tagged:
            return
        result.overlap = {**result.overlap,
                          "dropped_cost": dropped_cost(self.machine.overlap_log, tagged, self.vlm["latency_s"])}

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
        """A fresh observation; its frames are marked once here for every role (``_marked``) and
        recorded raw and marked side by side (the raw frames in the observation are never changed)."""
        obs = self.robot.observe(images=True, depth=True) if self.cfg.images else self.robot.observe()
        cams = self.robot.cameras() if obs.images and hasattr(self.robot, "cameras") else {}
        self._marked, _ = self.context.see(label, obs, self.marker, cams)
        if obs.images:
            extra = {f"{k} (marked)": v for k, v in self._marked.items() if v is not obs.images.get(k)}
            self.rec.frame(label, {**obs.images, **extra})
        for fn in list(self.observers):
            fn(label, obs)
        return obs

    def _look(self, label: str) -> tuple:
        """(state, the frames as the roles see them: marked unless the brain's VLM config says not)."""
        obs = self._observe(label)
        return obs.state_dict(), self._marked

    def _memory_text(self) -> str:
        return self.memory.text() if self.memory else "(memory disabled)"

    def _emit(self, kind: str, **data) -> None:
        self.rec(kind, **data)
        if self.memory:
            self.memory.add(kind, data)

    def _say(self, text: str) -> None:
        self.progress(f"{self._clock(self.steps_fn())} {text}")

    def _unfit(self) -> str:
        return getattr(self.brain, "unfit", "") or ""

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
            result = self._run()
            self._overlap_summary(result)
            return result
        finally:
            if self._pool is not None:
                self._pool.close(wait=False)
            if self.monitor:
                self.monitor.close()
            if self.memory:
                self.memory.flush(timeout=5)
                self.memory.close()

    def _preflight(self, images: dict) -> None:
        """Before the first plan: the brain checks that it sees the cameras (Brain.preflight)."""
        check = getattr(self.brain, "preflight", None)
        found = check(images) if (check and images) else None
        if found:
            self._say(f"VLM endpoint check: {found.get('verdict')} - {str(found.get('message', ''))[:140]}")

    def _run(self) -> EpisodeResult:
        m = self.machine
        state, images = self._look("start")
        first = None                    # overlap.plan_with_probe: the first plan, asked beside the probe
        if self.overlap.plan_with_probe and self._pool is not None and getattr(self.brain, "preflight", None):
            first = self._pool.spawn(lambda: self.planner_c.start(state, images), PROBE_PLAN_TAG)
            self.rec("overlap_ask", overlap="plan_with_probe", batch_id="", for_batch="", subgoal_id="",
                     tag=PROBE_PLAN_TAG)
        self._preflight(images)
        if first is not None:           # used only when the probe found the endpoint fit
            unfit = self._unfit()
            m.ahead_outcome("plan_with_probe", PROBE_PLAN_TAG,
                            f"the probe found the endpoint unfit: {unfit}" if unfit else "")
        actions = m.start()
        if not m.over:
            actions += m.plan(first.result() if first is not None else self.planner_c.start(state, images))
        while actions:
            actions += self._answer(actions.pop(0))
        return m.result

    def _answer(self, a) -> list:
        """Do what the machine asks, at once; what it says to that."""
        m = self.machine
        if isinstance(a, Execute):
            sg = self.executor_c.subgoal
            self.rec("batch", batch=a.batch, brain=a.brain, privileged=a.privileged, source=a.source)
            rep = self._execute(a.batch, sg)
            self._emit(EventKind.REPORT, **rep.to_json())
            return m.report(rep)
        if isinstance(a, Deliver):
            self._emit(EventKind.REPORT, **a.report.to_json())
            return m.report(a.report)
        if isinstance(a, Verify):
            sg, rep = a.subgoal, a.report
            state, images = a.look if a.look is not None else self._look(f"verify {sg.id}")
            verdict = self.verifier_c.verify(sg, self.executor_c.plan, rep, state, images, self.executor_c.last_verdict)
            self._emit(EventKind.VERDICT, **verdict.to_json())
            return m.verdict(verdict, rep.batch_id)
        if isinstance(a, (Escalate, AwaitPlan)):     # the Planner reads the look of the call asked beside it
            look = self._look if a.look is None else (lambda _label, seen=a.look: seen)
            if isinstance(a, Escalate):
                return m.plan(self.planner_c.on_escalation(a.escalation, look))
            return m.plan(self.planner_c.on_verdict(a.verdict, look))
        if isinstance(a, (End, Hold)):      # (in-process the operator's hold waits in _park)
            return []
        raise TypeError(f"unknown action {a!r}")

    # -- the operator (console) ----------------------------------------------------------------
    def _park(self) -> bool:
        """The operator's pause holds here, before the next batch (the desk waits); never 'hold'."""
        if self.operator is not None:
            self.operator.park(abort=lambda: bool(self._stop_reason))
        return False

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
        return review_batch(self.operator, batch, self.rec, self._say, lambda: bool(self._stop_reason))

    def _execute(self, batch: dict, sg) -> Report:
        token = self.token = CancelToken()
        if self.monitor_c:
            self.monitor_c.begin(batch, sg, token)
        try:
            return self.controller.run(batch, token, source="executor")
        finally:
            self.token = None
            if self.monitor_c:
                self.monitor_c.end()

    def _clock(self, steps: int) -> str:
        b = self.cfg.max_steps
        return f"[{time.monotonic() - self.t0:6.1f}s step {steps:4d}{'/' + str(b) if b else ''}]"
