"""The overlap over ROS 2 (issue 37): `motormind launch fake brain:=openai` with a VLM config that turns
on `overlap: true` (every kind of episode/overlap.py) runs the Executor's calls ahead in the Executor
node and the first plan beside the camera probe in the Planner node, as the in-process runner does. The answers come from serve-brain's replay backend (started in each role node, a small latency on
every call; the camera probe's answers are serve-brain's look at the pixels), so the episode is the same
every run: the probe's three calls and the plan are asked at once, b1 moves up (the next batch is asked
while it runs), b2 claims s1 (s2's first batch is asked beside the Verifier node's verdict), b3 claims s2.
Each batch reaches the Controller once, in order, after what it was asked ahead for came true. A probe that
finds the endpoint unfit (serve-brain ignores the images) drops the plan asked beside it: nothing moves.
A rejected claim: the Executor node asks for the subgoal again beside the Planner node's replan
(retry_with_replan), used when the new plan repeats the subgoals."""
import json
import threading
from pathlib import Path

import pytest
import yaml

pytest.importorskip("rclpy")

from motormind.ros import graph  # noqa: E402
from motormind.ros.launcher import Launcher  # noqa: E402
from motormind.ros.probe import WATCH, Probe  # noqa: E402
from rostest_util import Log, fake_stack_config, free_domain  # noqa: E402

LOCAL_ORACLE = Path(__file__).resolve().parents[2] / "configs" / "vlm" / "local-oracle.yaml"
PLAN = {"schema_version": 1, "reasoning": "up, then down",
        "subgoals": [{"id": "s1", "description": "raise the hand 30 mm", "success_criterion": "raised"},
                     {"id": "s2", "description": "lower the hand 10 mm", "success_criterion": "lowered"}]}
B1 = [{"op": "move", "direction": "up", "distance_mm": 20}]                       # no done: speculated on
B2 = [{"op": "move", "direction": "up", "distance_mm": 10}, {"op": "done"}]       # claims s1
B3 = [{"op": "move", "direction": "down", "distance_mm": 10}, {"op": "done"}]     # claims s2 (the last)


def _verdict(achieved: bool) -> dict:
    return {"schema_version": 1, "achieved": achieved, "evidence": "as commanded" if achieved else "not high enough"}


def _answers(tmp_path, plans=1, batches=(B1, B2, B3), verdicts=(True, True)):
    """The record serve-brain's replay backend answers from: each role's answers in order."""
    ex = [{"schema_version": 1, "rationale": f"batch {i}", "commands": c} for i, c in enumerate(batches, 1)]
    answers = [("planner", PLAN)] * plans + [("executor", a) for a in ex] + \
        [("verifier", _verdict(v)) for v in verdicts]
    path = tmp_path / "answers" / "events.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"kind": "vlm_call", "role": r, "attempt": 0, "response": json.dumps(a)})
                            + "\n" for r, a in answers))
    return path


def _episode(tmp_path, event=None, answers=None, **vlm_set) -> tuple[dict, dict]:
    """One episode of `motormind launch fake brain:=openai` with the replay answers and ``overlap: true``
    (``answers``: ``_answers``' arguments; ``vlm_set``: more of the VLM config): (the episode's end message, every message heard per topic, once
    an ``event`` that satisfies ``event`` is heard too: topics do not keep their order between them)."""
    domain = free_domain("overlap")
    vlm = yaml.safe_load(LOCAL_ORACLE.read_text())        # its client settings; replay answers, not the oracle
    vlm = {**vlm, "name": "replay-overlap", "serve": "replay", "replay": str(_answers(tmp_path, **(answers or {}))),
           "model": "motormind-replay", "latency": {"mean_s": 0.3}, "overlap": True, **vlm_set}
    (tmp_path / "vlm.yaml").write_text(yaml.safe_dump(vlm))
    log = Log()
    launcher = Launcher("fake", {"brain": "openai", "vlm": str(tmp_path / "vlm.yaml"),
                                 "config": fake_stack_config(tmp_path)},
                        env={**graph.ros_env(domain), "ROS_HOME": str(tmp_path / "ros")}, out=log, grace_s=5)
    probe = Probe(domain_id=domain, watch=WATCH + ("events",))
    t = threading.Thread(target=launcher.run, daemon=True)
    t.start()
    try:
        probe.wait_for_publishers("events", n=6, timeout=120)
        probe.wait_for_subscribers("task", n=5, timeout=30)
        probe.send("task", {"instruction": "raise the hand, then lower it a little", "source": "test"})
        end = probe.wait_for("episode", lambda m: m.get("event") == "end", timeout=60)
        if event is not None:
            probe.wait_for("events", event, timeout=10)
        msgs = {k: list(v) for k, v in probe.msgs.items()}
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=30)
        print(log.text()[-4000:])
    return end, msgs


def _span(e: dict) -> tuple[float, float]:
    """(start, end) of a call on its node's clock: its event is recorded when it ends."""
    return float(e["t"]) - float(e["latency_s"]), float(e["t"])


def test_overlap_over_ros(tmp_path):
    end, msgs = _episode(tmp_path)
    res = end["result"]
    assert res["success"] and res["outcome"] == "success", res
    # each batch reached the Controller once, in order, with the commands its answer gave
    batches = [(b["batch_id"], b["commands"]) for b in msgs["commands"]]
    assert batches == [("b1", B1), ("b2", B2), ("b3", B3)], batches
    reports = [r for r in msgs["report"] if r.get("batch_id")]
    assert [(r["batch_id"], r["status"]) for r in reports] == [("b1", "done"), ("b2", "done"), ("b3", "done")]
    started = [e["batch_id"] for e in msgs["progress"] if e.get("event") == "command_start"]
    assert started == sorted(started) and [b for b in dict.fromkeys(started)] == ["b1", "b2", "b3"]
    # the calls made ahead: asked, used, tagged, counted apart
    ev = [e for e in msgs["events"] if e.get("node") == "executor"]
    asked = [(e["overlap"], e["batch_id"], e["for_batch"]) for e in ev if e["kind"] == "overlap_ask"]
    assert asked == [("speculate", "b2", "b1"), ("verify_ahead", "b3", "b2")], asked
    used = [(e["overlap"], e["batch_id"]) for e in ev if e["kind"] == "overlap_used"]
    assert used == [("plan_with_probe", ""), ("speculate", "b2"), ("verify_ahead", "b3")]
    assert not any(e["kind"] == "overlap_dropped" for e in ev)
    calls = [e for e in ev if e["kind"] == "vlm_call" and e["role"] == "executor"]
    assert [c.get("ahead", "") for c in calls] == ["", "speculate:b2", "verify_ahead:b3"]
    assert "batch b1 status=done" in calls[1]["user"] and "checking this claim now" in calls[2]["user"]
    assert res["overlap"]["speculate"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res["overlap"]["verify_ahead"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res["overlap"]["plan_with_probe"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res["overlap"]["dropped_cost"]["calls"] == 0
    # plan_with_probe: the Planner node asked its first plan beside the camera probe's calls, tagged
    pl = [e for e in msgs["events"] if e.get("node") == "planner"]
    assert [(e["overlap"], e["tag"]) for e in pl if e["kind"] == "overlap_ask"] == [("plan_with_probe",
                                                                                   "plan_with_probe:plan")]
    probe = [e for e in pl if e["kind"] == "vlm_probe"]
    plan = [e for e in pl if e["kind"] == "vlm_call"]
    assert len(probe) == 1 and probe[0]["verdict"] == "ok" and probe[0]["calls"] == 3, probe
    assert [c.get("ahead", "") for c in plan] == ["plan_with_probe:plan"]
    (p0, p1), (c0, c1) = _span(probe[0]), _span(plan[0])
    assert c0 < p1 and p0 < c1, f"the plan ({c0:.2f}..{c1:.2f} s) was not asked beside the probe ({p0:.2f}..{p1:.2f} s)"
    # every call counted: the Planner's, the Executor's three, the Verifier's two
    assert res["vlm_calls"] == 6 and end["vlm_counted"]["executor"] == 3


def test_an_unfit_probe_drops_the_plan_over_ros(tmp_path):
    """serve-brain ignores the images (its ``images_ignored`` quirk): the probe finds the endpoint unfit, the
    plan asked beside it is dropped, counted and costed by the Executor node, and the episode ends before its
    first plan with the probe's reason, as in the serial loop: nothing reaches the Controller."""
    end, msgs = _episode(tmp_path, event=lambda e: e.get("kind") == "overlap_dropped", quirks={"images_ignored": 1.0})
    res = end["result"]
    assert not res["success"] and "images_ignored" in res["reason"], res
    assert not msgs.get("commands"), msgs.get("commands")
    plans = [p for p in msgs["plan"]]
    assert [(p["decision"], p["subgoals"]) for p in plans] == [("gave_up", [])], plans
    assert plans[0]["ahead"]["kind"] == "plan_with_probe" and "unfit" in plans[0]["ahead"]["dropped"]
    ex = [e for e in msgs["events"] if e.get("node") == "executor"]
    drop = [e for e in ex if e["kind"] == "overlap_dropped"]
    assert [(e["overlap"], e["tag"]) for e in drop] == [("plan_with_probe", "plan_with_probe:plan")], drop
    assert res["overlap"]["plan_with_probe"] == {"asked": 1, "used": 0, "dropped": 1}
    # the dropped plan's call was counted (the decision stands on it) and costed apart
    assert res["vlm_calls"] == 1 and res["overlap"]["dropped_cost"]["calls"] == 1, res


def test_retry_with_replan_over_ros(tmp_path):
    """The Verifier node rejects b1's claim on s1: while the Planner node replans (the same subgoals), the
    Executor node asks for s1 again beside it; the new plan repeats the subgoals, so that batch runs as b2."""
    end, msgs = _episode(tmp_path, answers={"plans": 2, "batches": (B2, B2, B3), "verdicts": (False, True, True)},
                         overlap={"retry_with_replan": True})
    res = end["result"]
    assert res["success"] and res["replans"] == 1, res
    assert [(b["batch_id"], b["commands"]) for b in msgs["commands"]] == [("b1", B2), ("b2", B2), ("b3", B3)]
    ex = [e for e in msgs["events"] if e.get("node") == "executor"]
    assert [(e["overlap"], e["batch_id"], e["for_batch"]) for e in ex if e["kind"] == "overlap_ask"] == [
        ("retry_with_replan", "b2", "b1")]
    assert [(e["overlap"], e["batch_id"]) for e in ex if e["kind"] == "overlap_used"] == [("retry_with_replan", "b2")]
    calls = [e for e in ex if e["kind"] == "vlm_call" and e["role"] == "executor"]
    assert [c.get("ahead", "") for c in calls] == ["", "retry_with_replan:b2", ""]
    assert res["overlap"]["retry_with_replan"] == {"asked": 1, "used": 1, "dropped": 0}
