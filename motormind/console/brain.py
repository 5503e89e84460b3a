"""Taking over a role: a brain wrapper that hands a taken-over role's call to the operator.

The operator's answer is JSON text, exactly what a VLM would return, so it goes through the role's
parse path: schema validation, one repair request quoting the error (the console shows it and asks
again), fail-safe. An operator batch still meets the Controller's validation. Labelled ``operator``.
"""
from __future__ import annotations

import json
import time

from ..brains.base import Brain, BrainReply, BrainRequest, BrainWrapper
from .desk import OperatorDesk

# what the console shows the operator of a role's context (the prompt's inputs, not the prompt)
_SHOWN = ("instruction", "subgoal_id", "subgoal", "criterion", "batch_id", "state", "last_report", "last_verdict")


def shown_context(req: BrainRequest) -> dict:
    ctx = req.context or {}
    out = {k: ctx[k] for k in _SHOWN if k in ctx}
    if isinstance(out.get("state"), str):
        try:
            out["state"] = json.loads(out["state"])
        except ValueError:
            pass
    return out


def repair_error(req: BrainRequest) -> str:
    """The parse error quoted in a repair request (the last user turn of the history), if any."""
    for turn in reversed(req.history or []):
        if turn.get("role") == "user":
            return str(turn.get("content", ""))[:600]
    return ""


class OperatorBrain(BrainWrapper):
    def __init__(self, inner: Brain, desk: OperatorDesk, abort=None):
        self.inner = inner
        self.desk = desk
        self.abort = abort
        self.name = inner.name
        self.privileged = getattr(inner, "privileged", False)

    def respond(self, req: BrainRequest) -> BrainReply:
        if req.role in self.desk.takeover:
            t0 = time.perf_counter()
            text = self.desk.ask(req.role, shown_context(req), repair_error(req), self.abort)
            if text is not None:
                return BrainReply(text, "operator", time.perf_counter() - t0, privileged=False,
                                  meta={"source": "operator console"})
        return self.inner.respond(req)

    def close(self) -> None:
        self.inner.close()


class OperatorOnlyBrain(Brain):
    """No VLM at all: the operator plays the Executor and the Verifier through the console.

    The Planner's answer is one subgoal, the instruction itself, judged by the operator; the Monitor
    never cancels; Memory keeps a one-line summary. The Executor and Verifier stay taken over (the
    desk refuses to give them back: there is nobody else to answer). Labelled ``operator``."""
    name = "operator"
    privileged = False
    roles = ("executor", "verifier")

    @classmethod
    def from_config(cls, _cfg, _robot=None, _profile=None, _record=None) -> "OperatorOnlyBrain":
        """The registry's ``operator`` brain (motormind/registry.py): nothing to configure."""
        return cls()

    def respond(self, req: BrainRequest) -> BrainReply:
        ctx = req.context or {}
        if req.role == "planner":
            ans = {"schema_version": 1, "source": "operator", "subgoals": [{
                "id": "task", "description": str(ctx.get("instruction", "the operator's task"))[:500],
                "success_criterion": "the operator confirms it is done"}]}
        elif req.role == "monitor":
            ans = {"schema_version": 1, "cancel": False, "reason": "no monitor: the operator watches"}
        elif req.role == "memory":
            ans = {"schema_version": 1, "summary": "operator-driven session (no VLM)", "facts": []}
        else:        # the desk keeps these taken over; reaching here means the console closed mid-call
            return BrainReply("", self.name, meta={"source": "operator console",
                                                   "error": f"no operator answered the {req.role}"})
        return BrainReply(json.dumps(ans), self.name)
