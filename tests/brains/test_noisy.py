"""The noisy brain (motormind/brains/noisy.py) and its profiles (motormind/brains/noise_profile.py):
persistent errors and what clears them, Monitor alarms, strict configuration, calibration."""
from __future__ import annotations

import json

import pytest

from motormind.brains.base import Brain, BrainReply, BrainRequest
from motormind.brains.noise_profile import (KINDS, NoiseProfile, parse_noise, profile_from_items,
                                            profile_from_report)
from motormind.brains.noisy import NoisyBrain
from motormind.errors import ConfigError
from motormind.messages import Report

BATCH = [{"op": "move", "direction": "left", "distance_mm": 20.0},
         {"op": "move", "direction": "forward", "distance_mm": 20.0},
         {"op": "gripper", "action": "close"}]


class Inner(Brain):
    """Answers every role the same: a fixed batch (no done claim), a verdict, a calm Monitor."""
    name = "inner"

    def __init__(self, achieved=True, cancel=False):
        self.achieved, self.cancel = achieved, cancel

    def respond(self, req: BrainRequest) -> BrainReply:
        obj = {"planner": {"subgoals": [{"id": "s1", "description": "d", "success_criterion": "c"}]},
               "executor": {"commands": json.loads(json.dumps(BATCH))},
               "verifier": {"achieved": self.achieved, "evidence": "e"},
               "monitor": {"cancel": self.cancel, "reason": "r"}}[req.role]
        return BrainReply(json.dumps(obj), self.name)


def ask(brain, role):
    return json.loads(brain.respond(BrainRequest(role, role, "", "", {})).text)


def directions(brain):
    return [c.get("direction") for c in ask(brain, "executor")["commands"] if c["op"] == "move"]


def profile(**kw):
    return parse_noise(",".join(f"{k}={v}" for k, v in kw.items()))


def test_a_swapped_axis_repeats_every_batch_until_a_rejection_clears_it():
    b = NoisyBrain(Inner(achieved=False), profile(wrong_direction=1, clear_chance=1), seed=4)
    first = directions(b)
    assert first in (["right", "forward"], ["left", "back"])        # one axis sense swapped
    for _ in range(6):
        assert directions(b) == first                                # the same one, batch after batch
    assert b.injected["wrong_direction"] == 7
    ask(b, "verifier")                                               # rejected: new evidence
    assert b.cleared["wrong_direction"] == 1
    for _ in range(4):
        assert directions(b) == ["left", "forward"]                  # episode scope: not drawn again
    # with no chance of clearing, rejections change nothing
    b = NoisyBrain(Inner(achieved=False), profile(wrong_direction=1, clear_chance=0), seed=4)
    first = directions(b)
    for _ in range(3):
        ask(b, "verifier")
        assert directions(b) == first != ["left", "forward"]


def test_a_premature_claim_repeats_for_the_plan_until_a_replan_clears_it():
    b = NoisyBrain(Inner(), profile(premature_done=1, clear_chance=1), seed=0)
    ask(b, "planner")
    for _ in range(3):
        assert ask(b, "executor")["commands"][-1] == {"op": "done"}   # a claim on every batch of the plan
    ask(b, "verifier")                                                 # achieved: no new evidence
    assert ask(b, "executor")["commands"][-1] == {"op": "done"}
    ask(b, "planner")                                                  # a replan: cleared, not drawn for it
    assert b.cleared["premature_done"] == 1
    for _ in range(3):
        assert ask(b, "executor")["commands"][-1]["op"] != "done"
    ask(b, "planner")                                                  # the plan after: drawn again
    assert ask(b, "executor")["commands"][-1] == {"op": "done"}
    # per call (today's behaviour): each batch is its own draw
    b = NoisyBrain(Inner(), profile(premature_done=0.5, **{"scope.premature_done": "call"}), seed=1)
    claims = [ask(b, "executor")["commands"][-1] == {"op": "done"} for _ in range(400)]
    assert 150 < sum(claims) < 250


def test_a_monitor_cancel_clears_and_alarms_come_at_their_rates():
    b = NoisyBrain(Inner(cancel=True), profile(wrong_magnitude=1, clear_chance=1), seed=2)
    d1 = [c["distance_mm"] for c in ask(b, "executor")["commands"] if c["op"] == "move"]
    assert d1[0] == d1[1] != 20.0                                    # one bias on every move
    assert [c["distance_mm"] for c in ask(b, "executor")["commands"] if c["op"] == "move"] == d1
    assert ask(b, "monitor")["cancel"] is True                         # the Monitor's cancel is new evidence
    assert b.cleared["wrong_magnitude"] == 1
    assert [c["distance_mm"] for c in ask(b, "executor")["commands"] if c["op"] == "move"] == [20.0, 20.0]
    calm = NoisyBrain(Inner(cancel=False), profile(false_alarm=0.1), seed=3)
    n = sum(ask(calm, "monitor")["cancel"] for _ in range(1000))
    assert 70 < n < 130 and calm.injected["false_alarm"] == n
    alarmed = NoisyBrain(Inner(cancel=True), profile(missed_alarm=0.3), seed=3)
    n = sum(not ask(alarmed, "monitor")["cancel"] for _ in range(1000))
    assert 250 < n < 350 and alarmed.injected["missed_alarm"] == n


def test_strict_noise_configuration():
    with pytest.raises(ConfigError, match=r"unknown key.*'wrong_directon'.*did you mean 'wrong_direction'"):
        parse_noise("wrong_directon=0.2")
    with pytest.raises(ConfigError, match=r"wrong_region: must be <= 1, got 1.5"):
        parse_noise("wrong_region=1.5")
    with pytest.raises(ConfigError, match=r"false_alarm: must be >= 0, got -0.1"):
        parse_noise("seed_calibrated,false_alarm=-0.1")
    with pytest.raises(ConfigError, match=r"clear_chance: must be <= 1"):
        NoiseProfile(clear_chance=2.0)
    with pytest.raises(ConfigError, match=r"did you mean 'seed_calibrated'"):
        parse_noise("seed_calibratd")
    with pytest.raises(ConfigError, match=r"scope.wrong_direction: must be one of 'call', 'plan', 'episode'"):
        parse_noise("scope.wrong_direction=batch")
    with pytest.raises(ConfigError, match=r"unknown key.*'wrong_directin'.*did you mean 'wrong_direction'"):
        parse_noise("scope.wrong_directin=call")


def test_the_seed_preset_carries_the_papers_accuracies_and_round_trips_through_a_job():
    p = parse_noise("seed_calibrated")
    assert p.accuracies == {"action": 0.3625, "progress": 0.55, "completion": 0.65}
    assert (p.wrong_direction, p.wrong_magnitude, p.premature_done, p.missed_completion) == \
        pytest.approx((0.6375, 0.45, 0.35, 0.35))
    assert p.scope.wrong_direction == "episode" and p.scope.object_confusion == "plan"
    again = profile_from_items(p.items())
    assert again.rates() == p.rates() and again.scope == p.scope and again.name == "seed_calibrated"
    assert parse_noise("seed_calibrated,clear_chance=0.2").name == "seed_calibrated,clear_chance=0.2"
    assert set(parse_noise("all=0.1").rates().values()) == {0.1} and len(KINDS) == 8


def test_a_profile_from_a_diagnostic_report():
    rep = {"brain": "some-vlm", "scores": {
        "skill": {"action": {"n": 80, "correct": 29, "rate": 0.3625},
                  "progress": {"n": 80, "correct": 44, "rate": 0.55},
                  "completion": {"n": 80, "correct": 52, "rate": 0.65}},
        "completion_by_truth": {"achieved (subgoal)": {"n": 20, "correct": 18},
                                "achieved (task)": {"n": 20, "correct": 16},
                                "not achieved (subgoal)": {"n": 40, "correct": 18}}}}
    p = profile_from_report(rep)
    assert p.wrong_direction == pytest.approx(0.6375) and p.wrong_magnitude == pytest.approx(0.45)
    assert p.missed_completion == pytest.approx(1 - 34 / 40) and p.premature_done == pytest.approx(1 - 18 / 40)
    assert p.missed_alarm == pytest.approx(0.35) and p.name == "diagnostic:some-vlm"
    with pytest.raises(ConfigError, match="no progress questions"):
        profile_from_report({"scores": {"skill": {"action": rep["scores"]["skill"]["action"],
                                                  "completion": rep["scores"]["skill"]["completion"]}}})


class Planning(Inner):
    """An inner brain with the oracle's plan hook: it names objects in its plans' specs."""

    def __init__(self):
        super().__init__(achieved=False)
        self.on_plan = None
        self.specs: dict = {}
        self.scene = type("Scene", (), {"object_names": ["bowl", "plate", "mug", "cup"]})()

    def respond(self, req):
        if req.role == "planner":
            sgs = [{"id": f"g{len(self.specs)}", "description": "grasp the bowl", "success_criterion": "held"},
                   {"id": f"p{len(self.specs)}", "description": "place the bowl on the plate", "success_criterion": "on"}]
            self.specs[sgs[0]["id"]] = ("grasp", "bowl", "plate", ["on", "bowl", "plate"])
            self.specs[sgs[1]["id"]] = ("place", "bowl", "plate", ["on", "bowl", "plate"])
            self.on_plan(sgs, self.specs)
            return BrainReply(json.dumps({"subgoals": sgs}), self.name)
        return super().respond(req)


def test_a_misgrounded_object_stays_the_same_wrong_object_over_plans_until_cleared():
    inner = Planning()
    b = NoisyBrain(inner, profile(object_confusion=1, wrong_region=1, clear_chance=0), seed=5)
    objs = []
    for _ in range(4):                                       # replans: no chance of clearing
        sgs = ask(b, "planner")["subgoals"]
        objs.append((sgs[0]["description"], sgs[1]["description"]))
        ask(b, "verifier")
    assert len(set(objs)) == 1 and "bowl" not in objs[0][0] and "plate" not in objs[0][1]
    wrong_obj = inner.specs[sgs[0]["id"]][1]
    assert inner.specs[sgs[1]["id"]][1] == wrong_obj and inner.specs[sgs[1]["id"]][3][2] not in ("plate", wrong_obj)
    b.profile = parse_noise("object_confusion=1,wrong_region=1,clear_chance=1")   # now new evidence clears at once
    ask(b, "verifier")
    assert not b.active and b.cleared["object_confusion"] == b.cleared["wrong_region"] == 1


def test_a_controller_rejection_in_the_prompt_clears_once_per_rejected_batch():
    b = NoisyBrain(Inner(), profile(wrong_direction=1, clear_chance=1), seed=4)
    first = directions(b)
    assert first != ["left", "forward"]

    def after(report):
        out = json.loads(b.respond(BrainRequest("executor", "executor", "", "", {},
                                                context={"report_facts": report.facts})).text)
        return [c.get("direction") for c in out["commands"] if c["op"] == "move"]
    assert after(Report("b1", "s1", "done")) == first
    # it reads the facts, not the prose: a done batch whose reason speaks of a rejection clears nothing
    assert after(Report("b2", "s1", "done", reason="status=rejected")) == first
    assert after(Report("b3", "s1", "rejected", reason="commands[3]: target outside the workspace box")) \
        == ["left", "forward"]
    assert b.cleared["wrong_direction"] == 1


def test_calls_asked_at_once_wait_for_the_model_together_and_draw_in_the_order_asked():
    """Calls asked at once (``overlap``: the Executor beside the Verifier or while a batch runs) are
    in the inner brain together, not one after the other behind a lock; their errors are drawn in the
    order they were asked, whatever order they end in: the same answers as asked one after the other."""
    import threading

    class Slow(Inner):
        def __init__(self):
            super().__init__()
            self.second_in = threading.Event()
            self.overlapped = None

        def respond(self, req):
            if req.user == "first":
                self.overlapped = self.second_in.wait(5)   # the first ends only after the second came in
            else:
                self.second_in.set()
            return super().respond(req)

    noise = profile(wrong_direction=0.5, wrong_magnitude=0.5, premature_done=0.5)

    def req(user):
        return BrainRequest("executor", "executor", "", user, {})
    serial = NoisyBrain(Inner(), noise, seed=3)
    want = [json.loads(serial.respond(req(u)).text) for u in ("first", "second")]
    inner = Slow()
    b = NoisyBrain(inner, noise, seed=3)
    got = {}
    t = threading.Thread(target=lambda: got.setdefault("first", json.loads(b.respond(req("first")).text)))
    t.start()
    while b.tickets < 1:                                   # the first has taken its turn
        threading.Event().wait(0.001)
    got["second"] = json.loads(b.respond(req("second")).text)
    t.join(10)
    assert inner.overlapped is True
    assert [got["first"], got["second"]] == want
    assert want[0] != want[1] or want[0]["commands"] != BATCH     # the draws did change something
