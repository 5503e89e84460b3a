"""An episode's budgets, counters and outcome: the checks at the loop head and the result.

``EpisodeResult`` is what every transport reports at the end (``to_json()``: the ``episode`` end
message, the summary, the evaluation's row). Its ``outcome`` is a ``results.Outcome`` and, when a
fault ended the episode, ``fault_kind`` the ``results.FaultKind`` of that fault; which outcome a
fault gives is ``results.ENDS_AS`` (the simulation's exhausted step budget is ``step_budget``).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..results import FaultKind, Outcome, Status, fault_kind, outcome_of_fault
from .config import EpisodeConfig


def unfit_reason(why: str) -> str:
    """How an episode ends when its brain found itself unfit (``Brain.unfit``)."""
    return f"the VLM endpoint is unfit ({why}); nothing more was asked of it"


@dataclass
class EpisodeResult:
    success: bool
    outcome: Outcome
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
    fault_kind: FaultKind | None = None     # outcome fault (or step_budget from a fault): the fault's kind
    overlap: dict = field(default_factory=dict)   # Executor calls made ahead (episode/overlap.py): per kind
                                                  # asked / used / dropped, and the dropped calls' cost

    def __post_init__(self) -> None:
        self.outcome = Outcome(self.outcome)
        self.fault_kind = fault_kind(self.fault_kind)

    def to_json(self) -> dict:
        d = asdict(self)
        d["outcome"] = self.outcome.value
        d["fault_kind"] = self.fault_kind.value if self.fault_kind else None
        return d


class EpisodeBook:
    """Budgets and outcome: the loop head's checks, the counters, the result."""

    def __init__(self, cfg: EpisodeConfig, clock: Callable[[], float] = time.monotonic, t0: float | None = None):
        self.cfg = cfg
        self.clock = clock
        self.t0 = clock() if t0 is None else t0
        self.batches = 0
        self.replans = 0
        self.verifier_rejections = 0
        self.controller_rejections = 0
        self.outcome: Outcome | None = None
        self.reason = ""
        self.fault_kind: FaultKind | None = None

    @property
    def over(self) -> bool:
        return self.outcome is not None

    def finish(self, outcome: Outcome, reason: str, kind: FaultKind | None = None) -> None:
        if self.outcome is None:
            self.outcome, self.reason, self.fault_kind = Outcome(outcome), reason, kind

    def check(self, steps: int, success: bool, stop_reason: str = "", unfit: str = "") -> bool:
        """Before each batch: True (and the outcome set) when the episode is over. ``unfit``: why
        the brain cannot be used (``Brain.unfit``, e.g. its endpoint ignores images)."""
        cfg = self.cfg
        budget = cfg.max_steps
        if self.over:
            return True
        if success:
            self.finish(Outcome.SUCCESS, "the task's success check holds")
        elif stop_reason:
            self.finish(Outcome.STOPPED, stop_reason)
        elif unfit:
            self.on_unfit(unfit)
        elif budget is not None and steps >= budget:
            self.finish(Outcome.STEP_BUDGET, f"step budget of {budget} control steps used")
        elif self.clock() - self.t0 > cfg.wall_budget_s:
            self.finish(Outcome.WALL_BUDGET, f"wall-clock budget of {cfg.wall_budget_s:g} s used")
        elif self.batches >= cfg.max_batches:
            self.finish(Outcome.BATCH_BUDGET, f"{cfg.max_batches} batches proposed")
        return self.over

    def on_unfit(self, why: str) -> bool:
        """The brain found itself unfit: the episode ends, nothing more is asked of it. True when
        ``why`` says so (an empty reason changes nothing)."""
        if why:
            self.finish(Outcome.GAVE_UP, unfit_reason(why))
        return bool(why)

    def next_batch_id(self) -> str:
        self.batches += 1
        return f"b{self.batches}"

    def on_report(self, report) -> bool:
        """Count it (a ``messages.Report``); True when the report ends the episode (a fault: the outcome
        its kind gives)."""
        status = report.status
        if status is Status.REJECTED and report.source != "operator":
            self.controller_rejections += 1     # (an operator's rejection is not the Controller's)
        if status is Status.FAULT:
            kind = report.fault_kind or FaultKind.FAULT
            self.finish(outcome_of_fault(kind), report.reason, kind)
            return True
        return False

    def on_verdict(self, verdict) -> None:
        if not verdict.achieved:
            self.verifier_rejections += 1

    def plan_verified(self, has_success_check: bool, success: Callable[[], bool]) -> bool:
        """Every subgoal of the plan was accepted (verified, or claimed with the Verifier off). The
        stack believes the task done, and its word ends the episode: on a robot without a privileged
        success check, in success; in simulation the evaluator's check scores it (success, or
        ``claimed_done``). With ``end_when_plan_done`` off, a failing check sends the plan back to
        the Planner instead. True: no replan (the episode ended, or the success check holds)."""
        if not has_success_check:
            self.finish(Outcome.SUCCESS, "every subgoal verified (no privileged success check)")
            return True
        if success():
            return True
        if self.cfg.end_when_plan_done:
            self.finish(Outcome.CLAIMED_DONE, "every subgoal was accepted as done, but the task's success "
                                              "check does not hold (PRIVILEGED)")
            return True
        return False

    def on_plan(self, decision) -> bool:
        """True when the decision (a ``components.PlanDecision``) ends the episode (the planner gave up)."""
        self.replans = max(self.replans, decision.replans)
        if decision.kind == "gave_up":
            self.finish(Outcome.GAVE_UP, decision.reason)
            return True
        return False

    def result(self, steps: int, brain: str, privileged: bool, plan: list, vlm_calls: int = 0,
               vlm_s: float = 0.0, motion_s: float = 0.0) -> EpisodeResult:
        return EpisodeResult(
            success=self.outcome is Outcome.SUCCESS, outcome=self.outcome, reason=self.reason, steps=steps,
            wall_s=round(self.clock() - self.t0, 3), batches=self.batches, replans=self.replans,
            verifier_rejections=self.verifier_rejections, controller_rejections=self.controller_rejections,
            vlm_calls=vlm_calls, vlm_s=round(vlm_s, 3), motion_s=round(motion_s, 3), brain=brain,
            privileged=privileged, plan=[asdict(s) for s in (plan or [])], fault_kind=self.fault_kind)
