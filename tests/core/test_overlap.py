"""Overlapping the VLM with motion (motormind/episode/overlap.py): a batch asked ahead runs only when
what it was asked from came true, and a dropped one never reaches the Controller."""
import json
import re
from dataclasses import replace

import pytest

from motormind.brains.scripted import ScriptedBrain
from motormind.episode.overlap import Overlap, mismatch, predict
from motormind.errors import ConfigError
from motormind.profile import load_profile
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner

ONE = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move", "success_criterion": "moved"}]}
TWO = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move", "success_criterion": "moved"},
                                         {"id": "s2", "description": "close", "success_criterion": "closed"}]}


def cmds(*c):
    return {"commands": list(c)}


def mv(d, mm):
    return {"op": "move", "direction": d, "distance_mm": mm}


DONE = {"op": "done"}


def _events(path):
    return [json.loads(line) for line in (path / "events.jsonl").read_text().splitlines()]


def run(tmp_path, script, overlap, robot=None, listener=None, success=lambda r: False, **cfg):
    robot = robot or FakeRobot()
    brain = ScriptedBrain(script)
    brain.overlap = overlap
    rec = Recorder(tmp_path)
    runner = EpisodeRunner(robot, brain, "test task", rec,
                           EpisodeConfig(**{"max_batches": 10, "monitor": False, "memory": False, **cfg}),
                           success_fn=lambda: success(robot))
    if listener:
        runner.controller_listeners.append(lambda k, d: listener(runner, k, d))
    res = runner.run()
    rec.close()
    return res, brain, _events(tmp_path)


def ran(ev):
    """The batches the Controller was given, in order: (batch id, commands)."""
    return [(e["batch"]["batch_id"], e["batch"]["commands"]) for e in ev if e["kind"] == "batch"]


def executor_calls(ev):
    return [e for e in ev if e["kind"] == "vlm_call" and e["role"] == "executor"]


def by_report(on_done, on_other):
    """An Executor that answers ``on_done`` after a report of every command done, else ``on_other``."""
    def answer(req):
        c = req.context
        if c["batch_id"] == "b1":
            return FIRST
        return on_done if "status=done" in c["last_report"] else on_other
    return answer


FIRST = cmds(mv("forward", 20), mv("left", 10))


def test_speculative_batch_is_used_when_the_report_matches(tmp_path):
    nxt = cmds(mv("up", 10), DONE)
    res, brain, ev = run(tmp_path, {"planner": [ONE], "executor": by_report(nxt, cmds(mv("down", 5), DONE))},
                         Overlap(speculate=True))
    assert ran(ev) == [("b1", FIRST["commands"]), ("b2", nxt["commands"])]
    calls = executor_calls(ev)
    assert len(calls) == 2 and calls[1].get("ahead") == "speculate:b2"   # asked once, while b1 ran
    spec = calls[1]["user"]
    assert "batch b1 status=done" in spec
    # told that the report and state are the expected ones and the images older, and that looks wait
    assert "EXPECTED, NOT MEASURED: batch b1 is still running" in spec and "Looks left before this batch: 0" in spec
    assert "EXPECTED" not in calls[0]["user"]
    # asked from the state b1 should reach: 20 mm forward and 10 mm left of the start
    rep = next(e for e in ev if e["kind"] == "report" and e["batch_id"] == "b1")
    start = rep["start_state"]["eef_pos_mm"]
    assert f'"eef_pos_mm": [{start[0] + 20:.1f}, {start[1] + 10:.1f}, {start[2]:.1f}]' in spec
    used = [e for e in ev if e["kind"] == "overlap_used"]
    assert [(u["overlap"], u["batch_id"]) for u in used] == [("speculate", "b2")]
    assert res.overlap["speculate"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res.overlap["dropped_cost"]["calls"] == 0


def test_speculative_batch_is_dropped_when_a_command_is_blocked(tmp_path):
    robot = FakeRobot()
    robot.obstacle_z_m = robot.pos[2] - 0.01          # 10 mm below the hand: a 40 mm descent stops there
    first = cmds(mv("down", 40))
    spec_answer, real_answer = cmds(mv("forward", 30), DONE), cmds(mv("up", 10), DONE)

    def answer(req):
        if req.context["batch_id"] == "b1":
            return first
        return spec_answer if "status=done" in req.context["last_report"] else real_answer
    res, brain, ev = run(tmp_path, {"planner": [ONE], "executor": answer}, Overlap(speculate=True), robot=robot)
    assert ran(ev)[:2] == [("b1", first["commands"]), ("b2", real_answer["commands"])]
    assert all(c != spec_answer["commands"] for _, c in ran(ev))        # the Controller never saw it
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert drop["batch_id"] == "b2" and "blocked" in drop["reason"]
    assert res.overlap["speculate"]["dropped"] == 1 and res.overlap["dropped_cost"]["calls"] == 1
    assert len(executor_calls(ev)) == 3      # b1, the dropped one, b2 asked again from the real report


def test_speculative_batch_is_dropped_when_the_batch_is_cancelled(tmp_path):
    first = cmds(mv("forward", 20), mv("forward", 20))
    spec_answer, real_answer = cmds(mv("right", 30), DONE), cmds(mv("up", 10), DONE)

    def answer(req):
        if req.context["batch_id"] == "b1":
            return first
        return spec_answer if "status=done" in req.context["last_report"] else real_answer

    def cancel(runner, kind, data):
        if kind == "command_end" and data.get("batch_id") == "b1" and data.get("index") == 0:
            runner.cancel("the operator cancels", "operator")
    res, brain, ev = run(tmp_path, {"planner": [ONE], "executor": answer}, Overlap(speculate=True), listener=cancel)
    assert [b for b, _ in ran(ev)][:2] == ["b1", "b2"] and ran(ev)[1][1] == real_answer["commands"]
    assert all(c != spec_answer["commands"] for _, c in ran(ev))
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert "cancelled" in drop["reason"]


def test_no_speculation_for_a_batch_that_claims_its_subgoal_nor_when_off(tmp_path):
    b = cmds(mv("forward", 20), DONE)
    res, brain, ev = run(tmp_path / "a", {"planner": [ONE], "executor": [b]}, Overlap(speculate=True))
    assert not any(e["kind"].startswith("overlap") for e in ev) and len(executor_calls(ev)) == 1
    res, brain, ev = run(tmp_path / "b", {"planner": [ONE], "executor": by_report(b, b)}, Overlap())
    assert not any(e["kind"].startswith("overlap") for e in ev) and res.overlap == {}
    assert not any(c.get("ahead") for c in executor_calls(ev))


S1 = cmds(mv("forward", 20), DONE)
S2 = cmds(mv("right", 7), {"op": "gripper", "action": "close"}, DONE)


def by_subgoal(req):
    return S1 if req.context["subgoal_id"] == "s1" else S2


def test_accepted_verdict_lets_the_batch_asked_beside_it_run(tmp_path):
    res, brain, ev = run(tmp_path, {"planner": [TWO], "executor": by_subgoal}, Overlap(verify_ahead=True))
    assert ran(ev) == [("b1", S1["commands"]), ("b2", S2["commands"])]
    calls = executor_calls(ev)
    assert len(calls) == 2 and calls[1]["ahead"] == "verify_ahead:b2"
    assert "checking this claim now" in calls[1]["user"] and "batch b1 status=done" in calls[1]["user"]
    kinds = [e["kind"] for e in ev]
    b2 = next(i for i, e in enumerate(ev) if e["kind"] == "batch" and e["batch"]["batch_id"] == "b2")
    assert kinds.index("verdict") < kinds.index("overlap_used") < b2
    assert res.overlap["verify_ahead"] == {"asked": 1, "used": 1, "dropped": 0}


def test_rejected_verdict_drops_the_batch_asked_beside_it(tmp_path):
    verdicts = [{"achieved": False, "evidence": "not there"}, {"achieved": True, "evidence": "ok"},
                {"achieved": True, "evidence": "ok"}]
    res, brain, ev = run(tmp_path, {"planner": [TWO, TWO], "executor": by_subgoal, "verifier": verdicts},
                         Overlap(verify_ahead=True))
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert drop["overlap"] == "verify_ahead" and "rejected" in drop["reason"]
    # s2's batch ran once, after the accepting verdict of the second plan's s1 (never after the rejection)
    assert [c for _, c in ran(ev)] == [S1["commands"], S1["commands"], S2["commands"]]
    verdicts_at = [i for i, e in enumerate(ev) if e["kind"] == "verdict"]
    s2_at = next(i for i, e in enumerate(ev) if e["kind"] == "batch" and e["batch"]["commands"] == S2["commands"])
    assert verdicts_at[1] < s2_at
    assert res.overlap["verify_ahead"] == {"asked": 2, "used": 1, "dropped": 1}


SAME_TWO = {"schema_version": 1, "subgoals": [{"id": "t1", "description": "move", "success_criterion": "moved"},
                                              {"id": "t2", "description": "close", "success_criterion": "closed"}]}
OTHER_TWO = {"schema_version": 1, "subgoals": [{"id": "u1", "description": "other", "success_criterion": "moved"},
                                               {"id": "u2", "description": "close", "success_criterion": "closed"}]}
RETRY = cmds(mv("left", 5), DONE)
OTHER = cmds(mv("back", 5), DONE)


def retry_answer(req):
    """s1's first batch, s1's retry (any later call for "move"), the other plan's batch, s2's batch."""
    c = req.context
    if c["subgoal"] == "other":
        return OTHER
    if c["subgoal"] == "close":
        return S2
    return S1 if c["batch_id"] == "b1" else RETRY


REJECT_THEN_ACCEPT = [{"achieved": False, "evidence": "not there"}, {"achieved": True, "evidence": "ok"},
                      {"achieved": True, "evidence": "ok"}]


def test_batch_asked_beside_the_replan_runs_when_the_new_plan_repeats_the_subgoals(tmp_path, monkeypatch):
    looks = []
    look = EpisodeRunner._look
    monkeypatch.setattr(EpisodeRunner, "_look", lambda self, label: (looks.append(label), look(self, label))[1])
    res, brain, ev = run(tmp_path, {"planner": [TWO, SAME_TWO], "executor": retry_answer,
                                    "verifier": REJECT_THEN_ACCEPT}, Overlap(retry_with_replan=True))
    assert ran(ev) == [("b1", S1["commands"]), ("b2", RETRY["commands"]), ("b3", S2["commands"])]
    b2 = next(e["batch"] for e in ev if e["kind"] == "batch" and e["batch"]["batch_id"] == "b2")
    assert b2["subgoal_id"] == "t1"                   # the new plan's id for the subgoal it repeats
    calls = executor_calls(ev)
    assert [c.get("ahead", "") for c in calls] == ["", "retry_with_replan:b2", ""]
    ahead = calls[1]["user"]
    # asked as the loop head asks after a new plan (the remaining subgoals, the claim's report), told why and
    # what is pending in the verdict's place, and that no look is answered
    assert "batch b1 status=done" in ahead and '"id": "s1"' in ahead
    assert "rejected the claim on s1: not there; the Planner is making a new plan now" in ahead
    assert re.search(r"Looks left before this batch: [1-9]", ahead)     # nothing moves: a look is offered
    kinds = [(e["kind"], e.get("overlap")) for e in ev]
    ask = kinds.index(("overlap_ask", "retry_with_replan"))
    plans = [i for i, e in enumerate(ev) if e["kind"] == "plan"]
    assert plans[0] < ask < plans[1] < kinds.index(("overlap_used", "retry_with_replan"))   # beside the replan
    # one look for both (nothing moves before the decision): the Planner's replan took none of its own
    assert [x for x in looks if "replan" in x] == ["b2 s1 (beside the replan)"]
    assert res.overlap["retry_with_replan"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res.overlap["dropped_cost"]["calls"] == 0


def test_batch_asked_beside_the_replan_is_dropped_when_the_plan_changes(tmp_path):
    res, brain, ev = run(tmp_path, {"planner": [TWO, OTHER_TWO], "executor": retry_answer,
                                    "verifier": REJECT_THEN_ACCEPT}, Overlap(retry_with_replan=True))
    assert [c for _, c in ran(ev)][:2] == [S1["commands"], OTHER["commands"]]
    assert all(c != RETRY["commands"] for _, c in ran(ev))          # the Controller never saw it
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert drop["overlap"] == "retry_with_replan" and "subgoal 1 is not the one" in drop["reason"]
    assert res.overlap["retry_with_replan"] == {"asked": 1, "used": 0, "dropped": 1}
    assert res.overlap["dropped_cost"]["calls"] == 1


def test_batch_asked_beside_an_escalation_or_a_kept_plan(tmp_path):
    """An escalation (a batch the Controller rejected, one failure allowed) asks beside the Planner too; with
    replanning off (the ablation) the Planner keeps the plan, and the call asked as after ``keep`` is used."""
    bad = cmds({"op": "move", "direction": "forward", "distance_mm": 5000.0})

    def answer(req):
        return bad if req.context["batch_id"] == "b1" else retry_answer(req)
    res, brain, ev = run(tmp_path / "esc", {"planner": [TWO, SAME_TWO], "executor": answer},
                         Overlap(retry_with_replan=True), max_failures_per_subgoal=1)
    rejected = next(e for e in ev if e["kind"] == "report" and e["batch_id"] == "b1")
    assert rejected["status"] == "rejected"
    assert [b for b, _ in ran(ev)][:2] == ["b1", "b2"] and ran(ev)[1][1] == RETRY["commands"]
    assert res.overlap["retry_with_replan"]["used"] == 1

    res, brain, ev = run(tmp_path / "keep", {"planner": [TWO], "executor": retry_answer,
                                             "verifier": REJECT_THEN_ACCEPT}, Overlap(retry_with_replan=True),
                         replan=False)
    assert [c for _, c in ran(ev)][:2] == [S1["commands"], RETRY["commands"]]
    ahead = next(c for c in executor_calls(ev) if c.get("ahead"))
    assert "not there" in ahead["user"]               # after ``keep`` the head still shows the rejection
    assert res.overlap["retry_with_replan"] == {"asked": 1, "used": 1, "dropped": 0}


def test_a_look_asked_beside_the_verifier_is_answered_at_the_loop_head(tmp_path):
    """An Executor call beside the Verifier may look first (its frames stay the current ones): the look is
    answered when the call is used, in the same frames, and the Executor asked on from it; nothing runs before
    the accepting verdict, and no call is dropped. A speculation offers no look (its images are older)."""
    look = {"schema_version": 1, "points": [{"camera": "front", "pixel": [10, 10], "label": "the cup"}]}
    asked = []

    def answer(req):
        asked.append(req.context["batch_id"])
        if req.context["subgoal"] == "move":
            return S1
        return look if asked.count("b2") == 1 else S2
    res, brain, ev = run(tmp_path, {"planner": [TWO], "executor": answer}, Overlap(verify_ahead=True))
    assert ran(ev) == [("b1", S1["commands"]), ("b2", S2["commands"])]
    calls = executor_calls(ev)
    assert [c.get("ahead", "") for c in calls] == ["", "verify_ahead:b2", ""]
    assert re.search(r"Looks left before this batch: [1-9]", calls[1]["user"])
    looks = [e for e in ev if e["kind"] == "look"]
    assert [(e["batch_id"], e["look"]) for e in looks] == [("b2", 1)]
    verdict = next(i for i, e in enumerate(ev) if e["kind"] == "verdict")
    assert verdict < ev.index(looks[0])                          # answered at the head, after the verdict
    assert "(from your points" in calls[2]["user"] or "the cup" in calls[2]["user"]
    assert res.overlap["verify_ahead"] == {"asked": 1, "used": 1, "dropped": 0}


def test_prediction_and_its_check():
    prof = load_profile("libero_panda")
    st = {"eef_pos_mm": [400.0, 0.0, 200.0], "eef_quat_xyzw": [1.0, 0.0, 0.0, 0.0], "eef_yaw_deg": 0.0,
          "gripper_width_mm": 80.0, "gripper_fraction": 1.0, "joints_deg": [0, 0, 0, 0, 0, 0, 45.0]}
    batch = {"batch_id": "b1", "subgoal_id": "s1", "commands": [mv("up", 30), {"op": "gripper", "action": "close"}]}
    rep, end = predict(batch, st, prof)
    assert end["eef_pos_mm"][2] == 230.0 and end["gripper_fraction"] == 0.0
    assert [r.status for r in rep.results] == ["done", "done"]
    assert predict({**batch, "commands": batch["commands"] + [DONE]}, st, prof) is None
    real = replace(rep, end_state={**end, "eef_pos_mm": [400.0, 0.0, 231.0]})
    assert mismatch(real, end, prof) == ""
    assert "mm from the predicted pose" in mismatch(replace(rep, end_state={**end, "eef_pos_mm": [400, 0, 250]}),
                                                    end, prof)
    # a close that stalls on an object: the opening is not the predicted one
    assert "gripper" in mismatch(replace(rep, end_state={**end, "gripper_fraction": 0.3}), end, prof)
    blocked = replace(rep, status="blocked", reason="contact")
    assert "blocked" in mismatch(blocked, end, prof)


def test_overlap_settings_are_strict():
    assert Overlap.parse(None) == Overlap() and Overlap.parse(True) == Overlap(True, True, True, True)
    assert Overlap.parse(False) == Overlap() and not Overlap().any and Overlap(plan_with_probe=True).any
    assert Overlap.parse({"speculate": True}) == Overlap(speculate=True)
    with pytest.raises(ConfigError, match="overlap: unknown key"):
        Overlap.parse({"speculat": True})
    with pytest.raises(ConfigError, match="overlap.verify_ahead: must be true or false"):
        Overlap.parse({"verify_ahead": "yes"})


def test_each_roles_stable_prefix_is_the_same_bytes_in_every_call_of_an_episode(tmp_path):
    """Prefix caching (vLLM's automatic prefix caching, hosted prompt caching) reuses what comes first:
    the system text and the user text up to the task instruction (the robot's facts) stay byte-identical
    across an episode's calls of each role, looks and speculative calls included."""
    from motormind.brains.scripted import ScriptedBrain
    robot = FakeRobot()
    look = {"regions": [{"camera": "front", "box": [0, 0, 8, 8], "label": "corner"}]}
    script = {"planner": [ONE], "executor": [look, cmds(mv("forward", 10)), cmds(mv("left", 10)),
                                              cmds(mv("up", 10), DONE)],
              "monitor": [{"schema_version": 1, "cancel": False, "reason": "fine"}]}
    brain = ScriptedBrain(script)
    brain.overlap = Overlap(speculate=True)
    rec = Recorder(tmp_path)
    EpisodeRunner(robot, brain, "test task", rec, EpisodeConfig(max_batches=8), success_fn=lambda: False).run()
    rec.close()
    by_role: dict = {}
    for r in brain.requests:
        by_role.setdefault(r.role, []).append(r)
    assert {"executor", "verifier", "planner", "memory"} <= set(by_role)
    assert len(by_role["executor"]) >= 4
    for role, reqs in by_role.items():
        cut = [r.user.index("Task instruction:") for r in reqs]
        prefixes = {r.system + "\x00" + r.user[:c + len("Task instruction: \"test task\"")] for r, c in zip(reqs, cut)}
        assert len(prefixes) == 1, f"{role}: {len(prefixes)} different stable prefixes"
        if role != "memory":
            assert "Robot setup" in reqs[0].user[:cut[0]] or reqs[0].user[:cut[0]].strip(), role


def test_the_servers_cached_tokens_reach_the_call_record_and_the_totals():
    """serve-brain reports a repeated prompt prefix as cached tokens, as vLLM and OpenAI do
    (usage.prompt_tokens_details.cached_tokens); the openai brain records them per call and totals them."""
    from motormind.brains.base import BrainRequest
    from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
    from motormind.serve.server import BrainServer
    verdict = {"schema_version": 1, "achieved": True, "evidence": "ok"}
    schema = {"type": "object"}
    system = "You are the Verifier of a robot. " + "The robot's fixed facts. " * 40
    with BrainServer(ScriptedBrain({"verifier": [verdict]}), model="m") as srv:
        brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null",
                                                             "overlap.speculate=true"]))
        assert brain.overlap == Overlap(speculate=True)
        first = brain.respond(BrainRequest("verifier", "verifier", system, "Is it done? (1)", schema, {}, {}))
        second = brain.respond(BrainRequest("verifier", "verifier", system, "Is it done? (2)", schema, {}, {}))
    assert first.meta["cached_tokens"] == 0
    assert second.meta["cached_tokens"] >= 16 * (len(system) // 4 // 16) > 0
    assert brain.totals["cached_tokens"] == second.meta["cached_tokens"]


class ProbingBrain(ScriptedBrain):
    """A scripted brain with the openai brain's camera probe: ``unfit`` after it when told so; the probe
    waits (up to 5 s) for the Planner's call to arrive, so it sees whether the plan was asked beside it."""

    def __init__(self, script, finds_unfit=False):
        import threading
        self.asked_plan = threading.Event()
        self.plan_during_probe = None
        self.finds_unfit = finds_unfit
        self.unfit = ""
        super().__init__({**script, "planner": self._plan(script["planner"])})

    def _plan(self, answers):
        answers = list(answers)

        def answer(req):
            self.asked_plan.set()
            return answers.pop(0) if len(answers) > 1 else answers[0]
        return answer

    def preflight(self, images):
        self.plan_during_probe = self.asked_plan.wait(5.0 if self.overlap.plan_with_probe else 0.2)
        if self.finds_unfit:
            self.unfit = "images_ignored: the model answered without seeing the images"
        return {"verdict": "unfit" if self.finds_unfit else "ok", "message": "probed"}


def run_probing(tmp_path, brain, success=lambda r: False):
    robot = FakeRobot()
    rec = Recorder(tmp_path)
    runner = EpisodeRunner(robot, brain, "test task", rec, EpisodeConfig(max_batches=3, monitor=False, memory=False),
                           success_fn=lambda: success(robot))
    res = runner.run()
    rec.close()
    return res, _events(tmp_path)


def test_first_plan_asked_beside_the_probe_is_used_when_the_endpoint_is_fit(tmp_path):
    brain = ProbingBrain({"planner": [ONE], "executor": [cmds(mv("forward", 20), DONE)]})
    brain.overlap = Overlap(plan_with_probe=True)
    res, ev = run_probing(tmp_path, brain)
    assert brain.plan_during_probe is True                 # the Planner was asked while the probe ran
    plan = next(e for e in ev if e["kind"] == "vlm_call" and e["role"] == "planner")
    assert plan.get("ahead") == "plan_with_probe:plan"
    assert [b for b, _ in ran(ev)][:1] == ["b1"]           # the plan's batch ran
    assert any(e["kind"] == "overlap_used" and e["overlap"] == "plan_with_probe" for e in ev)
    assert res.overlap["plan_with_probe"] == {"asked": 1, "used": 1, "dropped": 0}
    assert res.overlap["dropped_cost"]["calls"] == 0


def test_first_plan_asked_beside_the_probe_is_dropped_when_the_endpoint_is_unfit(tmp_path):
    brain = ProbingBrain({"planner": [ONE], "executor": [cmds(mv("forward", 20), DONE)]}, finds_unfit=True)
    brain.overlap = Overlap(plan_with_probe=True)
    res, ev = run_probing(tmp_path, brain)
    assert brain.plan_during_probe is True
    assert ran(ev) == [] and not executor_calls(ev)        # nothing moved, no Executor asked
    serial = ProbingBrain({"planner": [ONE], "executor": [cmds(mv("forward", 20), DONE)]}, finds_unfit=True)
    serial.overlap = Overlap()
    res0, ev0 = run_probing(tmp_path / "serial", serial)
    assert (res.outcome, res.reason) == (res0.outcome, res0.reason) and "images_ignored" in res.reason
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert drop["overlap"] == "plan_with_probe" and "unfit" in drop["reason"]
    assert res.overlap["plan_with_probe"] == {"asked": 1, "used": 0, "dropped": 1}
    assert res.overlap["dropped_cost"]["calls"] == 1       # the Planner's call, costed


def test_without_plan_with_probe_the_plan_waits_for_the_probe(tmp_path):
    brain = ProbingBrain({"planner": [ONE], "executor": [cmds(mv("forward", 20), DONE)]})
    brain.overlap = Overlap(speculate=True)
    res, ev = run_probing(tmp_path, brain)
    assert brain.plan_during_probe is False
    assert not any(e.get("ahead") for e in ev if e["kind"] == "vlm_call" and e["role"] == "planner")
    assert "plan_with_probe" not in (res.overlap or {})


def test_the_probes_three_calls_are_asked_at_once_with_plan_with_probe():
    """``overlap.plan_with_probe`` also asks the camera probe's three calls together: the server sees
    them in flight at once (serve-brain's latency model holds each 0.3 s), with the same verdict and
    calibration as the probe asked one call after the other."""
    import numpy as np
    from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
    from motormind.serve.server import BrainServer
    images = {"agentview": np.zeros((32, 32, 3), np.uint8), "wrist": np.zeros((32, 32, 3), np.uint8)}
    out = {}
    for mode in ("false", "true"):
        with BrainServer(ScriptedBrain({}), latency={"mean_s": 0.3}) as srv:
            b = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null",
                                                             f"overlap.plan_with_probe={mode}"]))
            got = b.preflight(images)
            out[mode] = (got["verdict"], b.calibration, srv.stats()["requests"], srv.stats()["peak_in_flight"])
            b.close()
    assert out["false"][:3] == out["true"][:3] and out["true"][0] == "ok" and out["true"][2] == 3
    assert out["false"][3] == 1 and out["true"][3] == 3


def test_the_verifier_reads_the_look_the_batch_asked_beside_it_was_asked_from(tmp_path):
    """One look after a claiming report serves the Verifier and the Executor call asked beside it (the
    scene is the same: nothing moves before the verdict); without verify_ahead the Verifier looks itself."""
    looks = {}
    for name, ov in (("ahead", Overlap(verify_ahead=True)), ("serial", Overlap())):
        brain = ScriptedBrain({"planner": [TWO], "executor": by_subgoal})
        brain.overlap = ov
        rec = Recorder(tmp_path / name)
        runner = EpisodeRunner(FakeRobot(), brain, "test task", rec,
                               EpisodeConfig(max_batches=10, monitor=False, memory=False), success_fn=lambda: False)
        labels = looks[name] = []
        runner.observers.append(lambda label, obs, labels=labels: labels.append(label))
        runner.run()
        rec.close()
        ver = [r for r in brain.requests if r.role == "verifier"]
        assert ver and all("batch b1" in r.user or "batch b2" in r.user for r in ver)
    after_b1 = lambda ls: ls[ls.index(next(x for x in ls if x.startswith("b1 "))) + 1:]   # noqa: E731
    assert after_b1(looks["serial"])[:2] == ["verify s1", "b2 s2"]
    assert after_b1(looks["ahead"])[0] == "b2 s2 (beside the verdict on s1)"
    assert "verify s1" not in looks["ahead"]                   # the Verifier took the look asked beside it
    assert len(looks["ahead"]) == len(looks["serial"]) - 1


def _reviewed_run(tmp_path, required_from: str):
    """An episode with an operator's review hook on every batch, a review required from ``required_from``
    (never | start | b1: switched on while b1 runs, after the call for b2 was asked ahead)."""
    nxt = cmds(mv("up", 10), DONE)
    robot, brain = FakeRobot(), ScriptedBrain({"planner": [ONE], "executor": by_report(nxt, nxt)})
    brain.overlap = Overlap(speculate=True)
    rec = Recorder(tmp_path)
    runner = EpisodeRunner(robot, brain, "test task", rec, EpisodeConfig(max_batches=10, monitor=False, memory=False),
                           success_fn=lambda: False)
    required, reviewed = [required_from == "start"], []

    def review(batch):
        reviewed.append(batch["batch_id"])
        return batch, "executor (operator approved)", ""
    runner.machine.hooks.review, runner.machine.hooks.reviewing = review, lambda: required[0]
    if required_from == "b1":
        runner.controller_listeners.append(
            lambda k, d: required.__setitem__(0, True) if k == "command_end" and d.get("batch_id") == "b1" else None)
    res = runner.run()
    rec.close()
    return res, reviewed, _events(tmp_path)


def test_calls_are_made_ahead_only_while_no_review_is_required_and_every_batch_is_reviewed(tmp_path):
    """The review rule (the ROS 2 Executor node's ``reviewing``: approval mode, or the Executor taken over):
    the review hook alone does not turn the overlap off; a required review does, and a batch asked ahead
    before the review was switched on is dropped, not run. The review sees every batch that runs."""
    res, reviewed, ev = _reviewed_run(tmp_path / "never", "never")
    assert reviewed == ["b1", "b2"] and [b for b, _ in ran(ev)] == ["b1", "b2"]
    assert res.overlap["speculate"] == {"asked": 1, "used": 1, "dropped": 0}

    res, reviewed, ev = _reviewed_run(tmp_path / "start", "start")
    assert reviewed == ["b1", "b2"] and [b for b, _ in ran(ev)] == ["b1", "b2"]
    assert not any(e["kind"].startswith("overlap") for e in ev) and len(executor_calls(ev)) == 2
    assert not any(c.get("ahead") for c in executor_calls(ev))

    res, reviewed, ev = _reviewed_run(tmp_path / "b1", "b1")
    assert reviewed == ["b1", "b2"] and [b for b, _ in ran(ev)] == ["b1", "b2"]
    drop = next(e for e in ev if e["kind"] == "overlap_dropped")
    assert drop["batch_id"] == "b2" and drop["reason"] == "an operator review is required now"
    calls = executor_calls(ev)
    assert sorted(c.get("ahead", "") for c in calls) == ["", "", "speculate:b2"]   # b2 asked again, for real
    assert res.overlap["speculate"] == {"asked": 1, "used": 0, "dropped": 1}
