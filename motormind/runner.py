"""The in-process episode runner: the five roles around the Controller, on threads and queues.

plan -> (batch -> controller -> report [-> verify]) ... until success, a budget, or give-up.
Replans when the Verifier rejects a claim, when a subgoal keeps failing, or when a role fails safe.
The evaluator's success check (privileged, simulation only) ends the episode; no role sees it.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from .controller import CancelToken, Controller, Report
from .record import Recorder
from .roles.executor import Executor
from .roles.memory import Memory
from .roles.monitor import Monitor
from .roles.planner import Planner, Subgoal
from .roles.verifier import Verdict, Verifier


@dataclass
class EpisodeConfig:
    max_steps: int | None = None        # control-step budget (None: the backend's default)
    wall_budget_s: float = 900.0        # wall-clock budget
    max_batches: int = 60
    max_replans: int = 6
    max_failures_per_subgoal: int = 3   # failed batches on one subgoal before a replan
    images: bool = True                 # render camera images for the roles
    replan: bool = True                 # ablations (issue: evaluation at scale)
    planner: bool = True
    monitor: bool = True
    verifier: bool = True
    memory: bool = True


@dataclass
class EpisodeResult:
    success: bool
    outcome: str                        # success | step_budget | wall_budget | batch_budget | gave_up | fault | stopped
    reason: str
    steps: int
    wall_s: float
    batches: int
    replans: int
    verifier_rejections: int
    controller_rejections: int
    vlm_calls: int
    vlm_s: float
    motion_s: float
    brain: str
    privileged: bool
    plan: list = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)


def _brief_report(rep: Report | None) -> str:
    if rep is None:
        return "none yet (this is the first batch)"
    d = rep.to_json()
    lines = [f"batch {d['batch_id']} status={d['status']}" + (f" reason: {d['reason']}" if d["reason"] else "")]
    for r in d["results"]:
        c = r["command"]
        lines.append(f"  [{r['index']}] {json.dumps(c)} -> {r['status']}"
                     + (f" commanded={r['commanded']}" if r["commanded"] else "")
                     + (f" achieved={ {k: v for k, v in r['achieved'].items() if k != 'rotation_vector_deg'} }"
                        if r["achieved"] else "")
                     + (f" ({r['reason']})" if r["reason"] else ""))
    return "\n".join(lines)


class EpisodeRunner:
    def __init__(self, robot, brain, instruction: str, recorder: Recorder | None = None,
                 config: EpisodeConfig | None = None, success_fn: Callable[[], bool] | None = None,
                 steps_fn: Callable[[], int] | None = None, progress: Callable[[str], None] | None = None):
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
        self.controller = Controller(robot, self.profile, on_event=self._on_controller_event)
        rec = self.rec
        self.planner = Planner(brain, rec)
        self.executor = Executor(brain, rec)
        self.verifier = Verifier(brain, rec)
        self.monitor = Monitor(brain, rec) if self.cfg.monitor else None
        self.memory = Memory(brain, rec, instruction) if self.cfg.memory else None
        self._stop_reason = ""
        self._batch_ctx: dict = {}
        self.t0 = time.monotonic()
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

    def _observe(self, label: str):
        obs = self.robot.observe(images=self.cfg.images)
        if obs.images:
            self.rec.frame(label, obs.images)
        return obs

    def _memory_text(self) -> str:
        return self.memory.text() if self.memory else "(memory disabled)"

    def _emit(self, kind: str, **data) -> None:
        self.rec(kind, **data)
        if self.memory:
            self.memory.add(kind, data)

    def _on_controller_event(self, kind: str, data: dict) -> None:
        if kind == "command_end" and self.monitor is not None:
            # runs on the Controller's thread: a cheap state snapshot, the brain call is the Monitor's
            obs = self.robot.observe()
            ctx = {**self._batch_ctx, "state": obs.state_dict(),
                   "progress": json.dumps(self._batch_ctx.get("_done", []) + [data]),
                   "last_command": data}
            self._batch_ctx.setdefault("_done", []).append(
                {"index": data["index"], "status": data["status"], "command": data["command"]})
            self.monitor.offer({k: v for k, v in ctx.items() if k != "_done"})
        elif kind in ("command_start", "command_end"):
            self.rec(kind, **data)

    def _base_ctx(self, obs, plan: list[Subgoal]) -> dict:
        p = self.profile
        return {
            "instruction": self.instruction, "robot_description": p.description,
            "directions": ", ".join(sorted(p.directions)), "axes": ", ".join(sorted(p.rotation_axes)),
            "rotation_frame": p.rotation_frame, "limits": json.dumps(p.describe_limits()),
            "state": json.dumps(obs.state_dict()), "memory": self._memory_text(),
            "plan": json.dumps([asdict(s) for s in plan]),
        }

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

    def _plan(self, obs, old: list[Subgoal], reason: str) -> list[Subgoal] | None:
        images = obs.images
        if not self.cfg.planner:
            # ablation: no planner -- the whole instruction is the one subgoal
            return [Subgoal("s1", self.instruction, "the instruction is fulfilled")]
        plan, res = self.planner.plan(self._base_ctx(obs, old), images, reason)
        if plan is not None:
            self._emit("plan", subgoals=[asdict(s) for s in plan], replan_reason=reason, brain=res.brain,
                       privileged=res.privileged)
        return plan

    def _run(self) -> EpisodeResult:
        cfg = self.cfg
        rec = self.rec
        budget = cfg.max_steps
        batches = replans = v_rej = c_rej = 0
        outcome, why = "", ""
        last_report: Report | None = None
        last_verdict: Verdict | None = None
        obs = self._observe("start")
        plan = self._plan(obs, [], "")
        idx = 0
        fails = 0
        if plan is None:
            outcome, why = "gave_up", "the planner failed safe (no valid plan)"
        while not outcome:
            steps = self.steps_fn()
            if self.success_fn():
                outcome, why = "success", "the task's success check holds"
                break
            if self._stop_reason:
                outcome, why = "stopped", self._stop_reason
                break
            if budget is not None and steps >= budget:
                outcome, why = "step_budget", f"step budget of {budget} control steps used"
                break
            if time.monotonic() - self.t0 > cfg.wall_budget_s:
                outcome, why = "wall_budget", f"wall-clock budget of {cfg.wall_budget_s:g} s used"
                break
            if batches >= cfg.max_batches:
                outcome, why = "batch_budget", f"{cfg.max_batches} batches proposed"
                break
            sg = plan[idx]
            batches += 1
            bid = f"b{batches}"
            obs = self._observe(f"{bid} {sg.id}")
            ctx = {**self._base_ctx(obs, plan), "subgoal_id": sg.id, "subgoal": sg.description,
                   "criterion": sg.success_criterion, "last_report": _brief_report(last_report),
                   "last_verdict": json.dumps(last_verdict.to_json()) if last_verdict else "none",
                   "batch_id": bid}
            res = self.executor.propose(ctx, obs.images)
            replan_reason = ""
            if res.value is None:
                fails += 1
                self.progress(f"{self._clock(steps)} {sg.id} executor answer unusable: {res.error[:80]}")
                if fails >= cfg.max_failures_per_subgoal:
                    replan_reason = f"the executor failed to give a usable batch {fails} times ({res.error})"
            else:
                batch = {**res.value, "batch_id": bid, "subgoal_id": sg.id}
                rec("batch", batch=batch, brain=res.brain, privileged=res.privileged)
                token = CancelToken()
                self._batch_ctx = {"instruction": self.instruction, "subgoal_id": sg.id,
                                   "subgoal": sg.description, "batch_id": bid, "batch": json.dumps(batch)}
                if self.monitor:
                    self.monitor.watch(token)
                t_m = time.monotonic()
                report = self.controller.run(batch, token, source="executor")
                self.motion_s += time.monotonic() - t_m
                if self.monitor:
                    self.monitor.unwatch()
                last_report = report
                self._emit("report", **report.to_json())
                self.progress(f"{self._clock(self.steps_fn())} {sg.id} {report.summary()[:150]}")
                if report.status == "rejected":
                    c_rej += 1
                if report.status == "fault":
                    outcome, why = "fault", report.reason
                    break
                if self.success_fn():
                    continue   # the loop head records the success
                if report.status == "done" and report.claims_done:
                    obs = self._observe(f"verify {sg.id}")
                    if cfg.verifier:
                        vctx = {**ctx, "state": json.dumps(obs.state_dict()), "last_report": _brief_report(report)}
                        verdict = self.verifier.verify(vctx, obs.images)
                    else:
                        verdict = Verdict(sg.id, True, "verifier disabled (ablation): claim accepted", "none")
                    last_verdict = verdict
                    self._emit("verdict", **verdict.to_json())
                    self.progress(f"{self._clock(self.steps_fn())} {sg.id} verdict: "
                                  f"{'achieved' if verdict.achieved else 'REJECTED'} - {verdict.evidence[:100]}")
                    if verdict.achieved:
                        idx, fails = idx + 1, 0
                        if idx >= len(plan):
                            if not self.has_success_check:   # a real robot: the Verifier has the last word
                                outcome, why = "success", "every subgoal verified (no privileged success check)"
                                break
                            if self.success_fn():
                                continue               # the loop head records the success
                            replan_reason = "every subgoal was verified but the task is not complete"
                    else:
                        v_rej += 1
                        replan_reason = f"the verifier rejected the claim on {sg.id}: {verdict.evidence}"
                elif report.status != "done":
                    fails += 1
                    if fails >= cfg.max_failures_per_subgoal:
                        replan_reason = f"{fails} batches on {sg.id} failed; last: {report.reason}"
            if replan_reason:
                if not cfg.replan:
                    if idx >= len(plan):
                        outcome, why = "gave_up", replan_reason + " (replanning disabled)"
                        break
                    fails = 0
                    continue
                if replans >= cfg.max_replans:
                    outcome, why = "gave_up", f"replan limit {cfg.max_replans} reached; last: {replan_reason}"
                    break
                replans += 1
                self._emit("replan", reason=replan_reason)
                self.progress(f"{self._clock(self.steps_fn())} replan #{replans}: {replan_reason[:120]}")
                obs = self._observe(f"replan {replans}")
                new = self._plan(obs, plan, replan_reason)
                if new is None:
                    outcome, why = "gave_up", "the planner failed safe on a replan"
                    break
                plan, idx, fails, last_verdict = new, 0, 0, None
        wall = time.monotonic() - self.t0
        result = EpisodeResult(
            success=outcome == "success", outcome=outcome, reason=why, steps=self.steps_fn(), wall_s=round(wall, 3),
            batches=batches, replans=replans, verifier_rejections=v_rej, controller_rejections=c_rej,
            vlm_calls=self.vlm["calls"], vlm_s=round(self.vlm["s"], 3), motion_s=round(self.motion_s, 3),
            brain=getattr(self.brain, "name", "?"), privileged=bool(getattr(self.brain, "privileged", False)),
            plan=[asdict(s) for s in (plan or [])])
        return result

    def _clock(self, steps: int) -> str:
        b = self.cfg.max_steps
        return f"[{time.monotonic() - self.t0:6.1f}s step {steps:4d}{'/' + str(b) if b else ''}]"
