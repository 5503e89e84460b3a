"""A toy oracle for the kinematic fake arm: reach a target point, then close the gripper.

Stateless and deterministic: it answers each role from the request's context alone (the measured
state and limits the prompt was rendered from), so it can sit behind the brain server, answer
concurrent Monitor / Memory calls, and recover from any fault the server injects (a premature
``done`` gets a verifier rejection and a replan). It knows the target, which no VLM would: it is
labelled ``reach-oracle`` and privileged. Used by the fault tests and ``serve-brain --backend reach``.
"""
from __future__ import annotations

import json
import math
import threading

from .. import SCHEMA_VERSION
from ..brains.base import Brain, BrainReply, BrainRequest

TARGET_MM = (480.0, 60.0, 140.0)
TOL_MM = 3.0
CLOSED = 0.05


class ReachBrain(Brain):
    name = "reach-oracle"
    privileged = True

    def __init__(self, target_mm=TARGET_MM):
        self.target = tuple(float(v) for v in target_mm)
        self._lock = threading.Lock()
        self.plans = 0
        self.calls: dict = {}

    def success(self, robot) -> bool:
        """The evaluator's check on a FakeRobot (privileged: the roles never see it)."""
        pos = [v * 1000 for v in robot.pos]
        return _dist(pos, self.target) < TOL_MM and robot.gripper < CLOSED

    def respond(self, req: BrainRequest) -> BrainReply:
        with self._lock:
            self.calls[req.role] = self.calls.get(req.role, 0) + 1
            if req.role == "planner":
                self.plans += 1
            k = self.plans
        obj = getattr(self, f"_{req.role}")(req.context, k)
        return BrainReply(json.dumps({"schema_version": SCHEMA_VERSION, "source": self.name, **obj}),
                          self.name, privileged=True)

    def _planner(self, ctx: dict, k: int) -> dict:
        t = ", ".join(f"{v:g}" for v in self.target)
        return {"reasoning": "reach, then grasp", "subgoals": [
            {"id": f"r{k}reach", "description": f"move the tool to [{t}] mm",
             "success_criterion": f"the tool is within {TOL_MM:g} mm of [{t}] mm"},
            {"id": f"r{k}close", "description": "close the gripper", "success_criterion": "the gripper is closed"}]}

    def _executor(self, ctx: dict, k: int) -> dict:
        st = _state(ctx)
        lim = json.loads(ctx["limits"]) if isinstance(ctx.get("limits"), str) else (ctx.get("limits") or {})
        max_move = float(lim.get("max_move_mm", 50.0))
        max_batch = int(lim.get("max_batch", 8))
        sid = ctx.get("subgoal_id", "")
        cmds: list[dict] = []
        if sid.endswith("reach"):
            d = [t - p for t, p in zip(self.target, st["eef_pos_mm"])]
            n = math.sqrt(sum(x * x for x in d))
            if n >= 0.5:
                parts = math.ceil(n / max_move)
                seg = round(n / parts, 2)
                vec = [round(x / n, 5) for x in d]
                cmds = [{"op": "move", "vector": vec, "distance_mm": seg} for _ in range(parts)]
        elif sid.endswith("close"):
            if float(st["gripper_fraction"]) >= CLOSED:
                cmds = [{"op": "gripper", "action": "close"}]
        cmds = cmds[:max_batch - 1] + [{"op": "done"}]
        return {"rationale": f"{sid}: straight to the target from the measured pose", "commands": cmds}

    def _verifier(self, ctx: dict, k: int) -> dict:
        st = _state(ctx)
        sid = ctx.get("subgoal_id", "")
        if sid.endswith("reach"):
            d = _dist(st["eef_pos_mm"], self.target)
            return {"achieved": d < TOL_MM, "evidence": f"the tool is {d:.1f} mm from the target"}
        if sid.endswith("close"):
            g = float(st["gripper_fraction"])
            return {"achieved": g < CLOSED, "evidence": f"gripper fraction {g:.2f}"}
        return {"achieved": False, "evidence": f"unknown subgoal {sid!r}"}

    def _monitor(self, ctx: dict, k: int) -> dict:
        return {"cancel": False, "reason": "nominal"}

    def _memory(self, ctx: dict, k: int) -> dict:
        events = ctx.get("event_list", [])
        facts = [f"{e.get('batch_id')}: {e.get('status')}" for e in events if e.get("kind") == "report"]
        return {"summary": f"{len(events)} new event(s)", "facts": facts[-10:]}


def _state(ctx: dict) -> dict:
    st = ctx.get("state", {})
    return json.loads(st) if isinstance(st, str) else st


def _dist(a, b) -> float:
    return math.sqrt(sum((float(x) - float(y)) ** 2 for x, y in zip(a, b)))
