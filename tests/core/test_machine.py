"""The episode machine (motormind/episode/machine.py): inputs in any order give the decisions of the
in-order episode; a fault ends the episode with the outcome its kind gives; the operator's hold,
review and new instruction; and the in-process runner on a faulting robot."""
from __future__ import annotations

import itertools

from motormind.brains.scripted import ScriptedBrain
from motormind.components import Context, ExecutorComponent, operator_rejection
from motormind.episode.config import EpisodeConfig
from motormind.episode.machine import Deliver, End, EpisodeMachine, Escalate, Hooks, Phase
from motormind.profile import load_profile
from motormind.record import Recorder
from motormind.results import FaultKind, Outcome
from motormind.robots.fake import FakeRobot
from motormind.roles.executor import Executor
from motormind.messages import Escalation, PlanDecision, Report, Subgoal, Verdict
from motormind.runner import EpisodeRunner

PLAN = [Subgoal("s1", "a", "ca"), Subgoal("s2", "b", "cb")]
BATCH = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 5}, {"op": "done"}]}
STATE = {"eef_pos_mm": [400, 0, 200]}


def machine(cfg=None, **hooks):
    cfg = cfg or EpisodeConfig(max_batches=10)
    ex = ExecutorComponent(Executor(ScriptedBrain({"executor": [BATCH]})), cfg, Context(load_profile("fake"), "t"))
    state = {"success": False, "steps": 0}
    h = Hooks(evaluate=lambda: (state["success"], state["steps"]), look=lambda label: (STATE, {}), **hooks)
    return EpisodeMachine(cfg, ex, h), state


def report(bid, status="done", claims=True, **kw):
    return Report.from_json({"batch_id": bid, "subgoal_id": "s1", "status": status, "claims_done": claims, "reason": "",
                             "results": [], "steps": 10, "duration_s": 0.1, **kw})


def plan(seq, plan_id, kind="plan", verdict=None):
    return PlanDecision(kind, list(PLAN), "", plan_id - 1, plan_id, "scripted", False, seq, verdict)


def kinds(actions):
    return [type(a).__name__ for a in actions]


def test_plan_report_verdict_in_order():
    m, _ = machine()
    assert m.start() == [] and m.phase is Phase.AWAIT_PLAN
    a = m.plan(plan(1, 1))
    assert kinds(a) == ["Execute"] and a[0].batch["batch_id"] == "b1" and a[0].batch["subgoal_id"] == "s1"
    a = m.report(report("b1"))
    assert kinds(a) == ["Verify"] and a[0].subgoal.id == "s1" and m.phase is Phase.AWAIT_VERDICT
    a = m.verdict(Verdict("s1", True, "ok"), "b1")
    assert kinds(a) == ["Execute"] and a[0].batch["subgoal_id"] == "s2"
    assert m.report(report("b1")) == []                   # a report of another batch is not this episode's


def _run(order):
    """Feed the same messages in ``order``: the decisions must not depend on it."""
    m, _ = machine()
    out = m.start() + m.plan(plan(1, 1)) + m.report(report("b1"))
    msgs = {"verdict": lambda: m.verdict(Verdict("s1", False, "not there"), "b1"),
            "plan": lambda: m.plan(plan(2, 2, verdict={**Verdict("s1", False, "not there").to_json(),
                                                       "batch_id": "b1"}))}
    for k in order:
        out += msgs[k]()
    return kinds(out), m.book.verifier_rejections, m.executor.plan_id, m.pending


def test_a_new_plan_before_the_rejected_verdict_that_caused_it_gives_the_in_order_decisions():
    in_order = _run(["verdict", "plan"])
    assert in_order == (["Execute", "Verify", "AwaitPlan", "Execute"], 1, 2, "b2")
    assert _run(["plan", "verdict"]) == in_order


def test_a_verdict_before_its_report_is_held_until_the_report():
    m, _ = machine()
    m.start()
    m.plan(plan(1, 1))
    assert m.verdict(Verdict("s1", True, "ok"), "b1") == []   # held
    a = m.report(report("b1"))
    assert kinds(a) == ["Verify", "Execute"] and a[1].batch["subgoal_id"] == "s2"


def test_a_budget_exhausted_fault_ends_as_step_budget_and_other_faults_as_fault_by_kind_not_by_text():
    for kind, reason, outcome in [("budget_exhausted", "command 0 faulted: out of steps", Outcome.STEP_BUDGET),
                                  ("connection", "budget_exhausted in the text is not a kind", Outcome.FAULT),
                                  (None, "no kind given", Outcome.FAULT)]:
        m, _ = machine()
        m.start()
        m.plan(plan(1, 1))
        (end,) = m.report(report("b1", "fault", False, reason=reason, fault_kind=kind))
        assert isinstance(end, End) and end.result.outcome is outcome and end.result.reason == reason
        assert end.result.fault_kind is (FaultKind(kind) if kind else FaultKind.FAULT)
        assert end.result.to_json()["outcome"] == outcome.value and m.over


def test_failed_batches_escalate_and_the_planner_answers():
    m, _ = machine(EpisodeConfig(max_failures_per_subgoal=2, max_batches=10))
    m.start()
    m.plan(plan(1, 1))
    assert kinds(m.report(report("b1", "blocked", False))) == ["Execute"]
    (esc,) = m.report(report("b2", "blocked", False))
    assert isinstance(esc, Escalate) and isinstance(esc.escalation, Escalation) and m.phase is Phase.AWAIT_PLAN
    assert kinds(m.plan(None)) == ["Execute"]               # the Planner kept the plan: the episode goes on


def test_the_loop_head_ends_at_a_budget_and_on_success():
    m, state = machine(EpisodeConfig(max_batches=1))
    m.start()
    m.plan(plan(1, 1))
    (end,) = m.report(report("b1", "blocked", False))
    assert end.result.outcome is Outcome.BATCH_BUDGET and end.result.batches == 1
    m, state = machine()
    m.start()
    m.plan(plan(1, 1))
    state["success"] = True
    (end,) = m.report(report("b1"))
    assert end.result.success and end.result.outcome is Outcome.SUCCESS


def test_the_operator_holds_reviews_and_rejects():
    held = itertools.chain([True], itertools.repeat(False))
    reviewed = []

    def review(batch):
        reviewed.append(batch["batch_id"])
        return None, "executor", "too far"                 # rejected: nothing moves
    m, _ = machine(hold=lambda: next(held), review=review,
                   rejection=lambda batch, note: operator_rejection(batch, note, STATE))
    m.start()
    assert kinds(m.plan(plan(1, 1))) == ["Hold"] and m.phase is Phase.HELD
    (d,) = m.resume()
    assert isinstance(d, Deliver) and reviewed == ["b1"] and d.report.status == "rejected"
    assert d.report.source == "operator" and "too far" in d.report.reason
    a = m.report(d.report)                                  # delivered as the Controller's would be
    assert kinds(a) == ["Deliver"] and m.book.controller_rejections == 0   # an operator's rejection is not the Controller's


def test_an_unfit_brain_ends_the_episode_before_anything_moves():
    m, _ = machine(unfit=lambda: "images_ignored")
    (end,) = m.start()
    assert end.result.outcome is Outcome.GAVE_UP and "images_ignored" in end.result.reason and end.result.batches == 0


class _OutOfSteps(FakeRobot):
    """A backend whose step budget runs out mid-command (as the LIBERO backend's does)."""

    def _tick(self):
        super()._tick()
        if self.steps >= 30:
            from motormind.errors import RobotFault
            raise RobotFault("step budget used up", kind="budget_exhausted")


def test_the_in_process_runner_ends_a_budget_exhausted_fault_as_step_budget(tmp_path):
    robot = _OutOfSteps()
    brain = ScriptedBrain({"planner": [{"subgoals": [{"id": "s1", "description": "go", "success_criterion": "gone"}]}],
                           "executor": [{"commands": [{"op": "move", "direction": "forward", "distance_mm": 100}]}]})
    rec = Recorder(tmp_path)
    res = EpisodeRunner(robot, brain, "go", rec, EpisodeConfig(max_batches=5), success_fn=lambda: False).run()
    rec.close()
    assert res.outcome is Outcome.STEP_BUDGET and res.fault_kind is FaultKind.BUDGET_EXHAUSTED
    assert "budget_exhausted: step budget used up" in res.reason and res.batches == 1
    assert res.to_json()["fault_kind"] == "budget_exhausted"



def test_an_executors_replan_request_escalates_with_its_reason_and_is_not_a_failure():
    """Issue 33 item 7: the Executor's ``replan`` answer ends the plan (an Escalate for the Planner),
    with its reason; it is no failed batch and runs nothing."""
    cfg = EpisodeConfig(max_batches=10)
    why = "the hand (200 mm) cannot pass the top handle to reach the middle one"
    ex = ExecutorComponent(Executor(ScriptedBrain({"executor": [{"replan": {"reason": why}}, BATCH]})), cfg,
                           Context(load_profile("fake"), "t"))
    m = EpisodeMachine(cfg, ex, Hooks(evaluate=lambda: (False, 0), look=lambda label: (STATE, {})))
    m.start()
    (esc,) = m.plan(plan(1, 1))
    assert isinstance(esc, Escalate) and m.phase is Phase.AWAIT_PLAN
    e = esc.escalation
    assert e.requested and e.plan_id == 1 and e.subgoal_id == "s1" and not e.exhausted
    assert e.reason == f"the executor asks for a new plan (on s1): {why}"
    assert Escalation.from_json(e.to_json()) == e                     # the wire form (ROS 2) keeps it
    assert ex.fails == 0
    a = m.plan(plan(2, 2))                                            # the Planner's new plan: the next batch
    assert kinds(a) == ["Execute"] and a[0].batch["subgoal_id"] == "s1"
