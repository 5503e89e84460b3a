"""The typed messages (motormind/messages.py): one codec, a round trip for each, and readers that
decide on a report's facts, never on its prose."""
from __future__ import annotations

import json

import pytest

from motormind import SCHEMA_VERSION
from motormind.brains.oracle.brain import OracleBrain
from motormind.brains.scripted import ScriptedBrain
from motormind.commands import parse_batch
from motormind.components import Context, ExecutorComponent, brief_report
from motormind.controller import Controller
from motormind.episode.config import EpisodeConfig
from motormind.messages import (MESSAGES, Batch, CommandResult, Escalation, EventKind, PlanDecision, Report, Subgoal,
                                Verdict, decode, encode)
from motormind.profile import load_profile
from motormind.results import FaultKind, Status
from motormind.robots.fake import FakeRobot
from motormind.roles.executor import Executor

PROFILE = load_profile("fake")
STATE = {"eef_pos_mm": [400.0, 0.0, 200.0], "eef_quat_xyzw": [1.0, 0.0, 0.0, 0.0], "gripper_width_mm": 80.0}
CONTACT_PROSE = "command 0 blocked: stopped by contact: achieved 3.0 of 40 mm along the commanded direction"


def _wire(d: dict) -> dict:
    """What a transport delivers: the JSON text, decoded."""
    return json.loads(json.dumps(d))


def _report(**kw) -> Report:
    res = (CommandResult(0, {"op": "move", "direction": "down", "distance_mm": 40}, "blocked",
                         CONTACT_PROSE.removeprefix("command 0 blocked: "), {"translation_mm": [0, 0, -40]},
                         {"translation_mm": [0, 0, -3], "error_mm": 37.0}, 0.25, 12),
           CommandResult(1, {"op": "gripper", "action": "close"}, "cancelled", "not run: " + CONTACT_PROSE))
    return Report("b3", "s1", "blocked", res, reason=CONTACT_PROSE, start_state=STATE, end_state=STATE,
                  duration_s=0.25, steps=12, source="executor", **kw)


@pytest.mark.parametrize("msg", [
    _report(contact=True, held_mm=12.5),
    Report("b4", "s2", "fault", (CommandResult(0, {"op": "wait", "seconds": 1}, "fault", "servo: x",
                                               fault_kind=FaultKind.SERVO),), reason="command 0 faulted"),
    Verdict("s1", False, "the bowl is not held", "scripted", replan=True),
    Verdict("s1", True, "held", "oracle", failed_safe=False),
    PlanDecision("plan", (Subgoal("s1", "grasp", "held"), Subgoal("s2", "lift", "up")), "why", 1, 2, "oracle",
                 True, 3, {**Verdict("s0", False, "no").to_json(), "batch_id": "b2"}),
    PlanDecision("gave_up", reason="replan limit"),
    PlanDecision("gave_up", reason="unfit", ahead={"kind": "plan_with_probe", "tag": "plan_with_probe:plan",
                                                   "dropped": "the probe found the endpoint unfit"}),
    Escalation("3 batches failed", False, 2, "s1", requested=True),
], ids=lambda m: type(m).__name__)
def test_each_message_round_trips_through_its_json(msg):
    d = _wire(encode(msg))
    assert d["schema_version"] == SCHEMA_VERSION
    kind = next(k for k, c in MESSAGES.items() if isinstance(msg, c))
    back = decode(kind, d)
    assert type(back) is type(msg) and encode(back) == d
    if not isinstance(msg, Report):          # (a report's results carry what never travels: the motion)
        assert back == msg


def test_a_plan_decision_without_a_call_ahead_is_the_wire_form_it_was():
    """``ahead`` (overlap.plan_with_probe over ROS 2) travels only when set: a serial loop's plan messages are
    unchanged, and one from before the field decodes to no call ahead; a malformed one is refused naming it."""
    d = encode(PlanDecision("plan", (Subgoal("s1", "grasp", "held"),), plan_id=1, seq=1))
    assert "ahead" not in d and PlanDecision.from_json(d).ahead is None
    with pytest.raises(ValueError, match=r"^plan\.ahead: must be \{kind: str, tag: str, dropped: str\}"):
        PlanDecision.from_json({**d, "ahead": {"kind": 3}})


def test_a_report_keeps_its_facts_across_the_wire():
    rep = _report(contact=True, held_mm=12.5)
    back = Report.from_json(_wire(rep.to_json()))
    assert (back.status, back.contact, back.stalled, back.held_mm) == (Status.BLOCKED, True, False, 12.5)
    assert back.fault_kind is None and [r.status for r in back.results] == ["blocked", "cancelled"]
    assert Report.from_json(_wire(encode(Report("b4", "s2", "fault", (CommandResult(
        0, {}, "fault", "x", fault_kind=FaultKind.SERVO),))))).fault_kind is FaultKind.SERVO
    assert brief_report(back) == brief_report(rep)


def test_a_batch_round_trips_through_its_parser():
    b = parse_batch({"batch_id": "b1", "subgoal_id": "s1", "commands": [
        {"op": "move", "direction": "down", "distance_mm": 30, "until": "contact"},
        {"op": "gripper", "width": 0.4}, {"op": "wait", "seconds": 0.5}, {"op": "done", "note": "n"}]}, PROFILE)
    assert isinstance(b, Batch) and b.claims_done
    again = parse_batch(_wire(encode(b)), PROFILE)
    assert again == b and encode(again)["schema_version"] == SCHEMA_VERSION


def test_the_codec_refuses_another_schema_version_and_unknown_words():
    with pytest.raises(ValueError, match=r"report.schema_version: 2 is not 1"):
        decode("report", {**_report().to_json(), "schema_version": 2})
    with pytest.raises(ValueError, match="status: unknown Status 'wobbly'"):
        decode("report", {**_report().to_json(), "status": "wobbly"})
    with pytest.raises(ValueError, match="kind: unknown message 'batch'"):
        decode("batch", {})


def test_event_kinds_are_their_words_in_json():
    assert EventKind.VLM_CALL == "vlm_call" and json.dumps({"kind": EventKind.VLM_CALL}) == '{"kind": "vlm_call"}'
    assert f"{EventKind.REPORT}" == "report" and {EventKind.VERDICT: 1}["verdict"] == 1


def test_the_controller_states_contact_stall_and_held_as_fields():
    robot = FakeRobot(PROFILE)
    ctl = Controller(robot)
    rep = ctl.run({"batch_id": "b1", "subgoal_id": "s1", "commands": [{"op": "move", "direction": "up",
                                                                       "distance_mm": 10}]})
    assert rep.status == "done" and not rep.contact and not rep.stalled and rep.held_mm is None
    assert "contact" in rep.to_json() and "held_mm" in rep.to_json()
    robot.grip_object_mm = 11.4                                 # a close stalls on an object: held
    rep = ctl.run({"batch_id": "b2", "subgoal_id": "s1", "commands": [{"op": "gripper", "action": "close"}]})
    assert rep.status == "done" and rep.held_mm == pytest.approx(11.4, abs=0.5) and not rep.contact
    robot.obstacle_z_m = robot.pos[2] - 0.03                    # a table 30 mm below: the move meets it
    rep = ctl.run({"batch_id": "b3", "subgoal_id": "s1", "commands": [
        {"op": "move", "direction": "down", "distance_mm": 60}, {"op": "gripper", "action": "open"}]})
    assert rep.status == "blocked" and rep.contact and not rep.stalled and "stopped by contact" in rep.reason
    assert rep.held_mm == pytest.approx(11.4, abs=0.5)           # (still held: nothing opened the fingers)


def _oracle_reads(rep: Report) -> bool:
    """The oracle's contact decision on ``rep``, from the context the Executor's brain is given (in
    process, and as a served brain or the ROS 2 privileged channel get it: JSON)."""
    brain = ScriptedBrain({"executor": [{"commands": [{"op": "wait", "seconds": 0.1}]}]})
    ex = ExecutorComponent(Executor(brain), EpisodeConfig(), Context(PROFILE, "t"))
    ex.on_plan(PlanDecision("plan", (Subgoal("s1", "a", "ca"),), plan_id=1))
    ex.on_report(rep)
    ex.propose(STATE, {}, "b4")
    ctx = _wire(brain.requests[-1].context)
    assert ctx["last_report"] == brief_report(rep)            # what the prompt shows is the prose
    oracle = OracleBrain(None, load_profile("libero_panda"))
    oracle.take_report(ctx)
    return oracle._stopped_by_contact()


def test_the_oracle_decides_contact_from_the_reports_fields_not_its_prose():
    said = _report(contact=False, stalled=True)                  # the prose says contact, the facts do not
    assert "stopped by contact" in brief_report(said) and "status=blocked" in brief_report(said)
    assert _oracle_reads(said) is False
    assert _oracle_reads(_report(contact=True)) is True
    quiet = Report("b3", "s1", "blocked", reason="command 0 blocked", contact=True)   # no prose, the fact
    assert "contact" not in brief_report(quiet) and _oracle_reads(quiet) is True
    assert _oracle_reads(Report("b3", "s1", "done", contact=True)) is False          # not blocked: not stopped
