"""The shared interference event (motormind/session/interference.py) on a scene that is only data:
when it fires, where it puts the object, and that it fires once."""
import math

import pytest

from motormind.session.interference import InterferencePlan, Interferer, choose_spot, spot_check
from motormind.profile import load_profile


def body(x, y, half=0.02, kind="object"):
    return {"kind": kind, "pos": [x, y, 0.03], "lo": [x - half, y - half, 0.0], "hi": [x + half, y + half, 0.06]}


class FakeScene:
    def __init__(self):
        self.bodies = {"block": body(0.40, 0.0), "mark": body(0.40, -0.15, 0.035, "fixture"),
                       "other": body(0.30, 0.10)}
        self.fingers: dict = {}
        self.moves = []

    def world(self):
        return {"bodies": {n: dict(b) for n, b in self.bodies.items()}, "finger_contacts": dict(self.fingers)}

    def move_object(self, name, x, y):
        b = self.bodies[name]
        dx, dy = x - b["pos"][0], y - b["pos"][1]
        self.bodies[name] = {**b, "pos": [x, y, b["pos"][2]], "lo": [b["lo"][0] + dx, b["lo"][1] + dy, b["lo"][2]],
                             "hi": [b["hi"][0] + dx, b["hi"][1] + dy, b["hi"][2]]}
        self.moves.append((name, x, y))


BOUNDS = ((0.25, 0.55), (-0.25, 0.25))


def start(i, k=0):
    return "command_start", {"batch_id": f"b{i}", "index": k, "command": {"op": "move"}}


def test_plans_are_seeded_and_checked():
    a, b = InterferencePlan.seeded(7, "reach", (0.09, 0.16)), InterferencePlan.seeded(7, "reach", (0.09, 0.16))
    assert a == b and 1 <= a.after_commands <= 3
    assert InterferencePlan.seeded(8, "reach", (0.09, 0.16)) != a
    for bad, msg in [(dict(when="lunch"), "when"), (dict(after_commands=0), "after_commands"),
                     (dict(shift_m=(0.2, 0.1)), "shift_m"), (dict(shift_m=(0.0, 0.1)), "shift_m")]:
        kw = dict(when="reach", after_commands=1, shift_m=(0.09, 0.16), direction_rad=0.0) | bad
        with pytest.raises(ValueError, match=msg):
            InterferencePlan(**kw)


def test_reach_moves_the_fetched_object_once_at_the_planned_command_clear_of_the_rest():
    sc, events = FakeScene(), []
    plan = InterferencePlan("reach", 2, (0.09, 0.16), 0.0, seed=3)
    itf = Interferer(plan, sc, ["on", "block", "mark"], BOUNDS, events.append)
    itf.on_controller_event("command_end", {"batch_id": "b1"})     # only command starts count
    itf.on_controller_event(*start(1, 0))
    assert not sc.moves and not events
    itf.on_controller_event(*start(1, 1))
    assert len(sc.moves) == 1 and len(events) == 1
    ev = events[0]
    assert ev.object == "block" and ev.role == "fetched" and ev.when == "reach" and ev.privileged
    assert ev.batch_id == "b1" and ev.command_index == 1
    assert 0.09 <= ev.shift_m <= 0.16 and ev.shift_m == pytest.approx(math.dist(ev.moved_from_m[:2], ev.moved_to_m[:2]),
                                                                        abs=1e-4)
    new = sc.bodies["block"]
    for other in ("mark", "other"):                                    # clear of every other body by 2 cm
        o = sc.bodies[other]
        assert new["lo"][0] > o["hi"][0] + 0.02 - 1e-9 or new["hi"][0] < o["lo"][0] - 0.02 + 1e-9 or \
            new["lo"][1] > o["hi"][1] + 0.02 - 1e-9 or new["hi"][1] < o["lo"][1] - 0.02 + 1e-9
    assert BOUNDS[0][0] <= new["lo"][0] and new["hi"][0] <= BOUNDS[0][1]
    assert BOUNDS[1][0] <= new["lo"][1] and new["hi"][1] <= BOUNDS[1][1]
    itf.on_controller_event(*start(1, 2))                              # once per episode
    assert len(sc.moves) == 1 and ev.to_json()["privileged"] is True


def test_carry_waits_for_the_held_object_and_moves_the_target():
    sc, events = FakeScene(), []
    itf = Interferer(InterferencePlan("carry", 1, (0.09, 0.16), 1.0, seed=1), sc, ["on", "block", "mark"], BOUNDS,
                     events.append)
    for k in range(3):
        itf.on_controller_event(*start(1, k))                          # the block is not held yet
    assert not events
    sc.fingers = {"block": ["finger1"]}                                # one finger is not a grasp
    itf.on_controller_event(*start(2, 0))
    assert not events
    sc.fingers = {"block": ["finger1", "finger2"]}
    itf.on_controller_event(*start(2, 1))
    assert [e.object for e in events] == ["mark"] and events[0].role == "target"


def test_no_room_means_no_move_and_a_reason():
    sc, events = FakeScene(), []
    plan = InterferencePlan("reach", 1, (0.09, 0.10), 0.0)
    itf = Interferer(plan, sc, ["on", "block", "mark"], ((0.37, 0.43), (-0.03, 0.03)), events.append)
    itf.on_controller_event(*start(1))
    assert not events and not sc.moves and "no free spot for block" in itf.missed
    assert choose_spot(sc.world(), "block", plan, BOUNDS, ok=lambda xy: False) is None   # ok() vetoes every spot


def test_the_hand_keeps_objects_within_the_arms_reach_and_away_from_the_gripper():
    ok = spot_check(load_profile("libero_panda"), 0.10, lambda: (0.40, 0.0), hand_clear_m=0.08, reach_xy_m=0.78)
    assert ok((0.60, 0.10))
    assert not ok((0.44, 0.02))                    # beside the fingers
    assert not ok((0.80, 0.35))                    # inside the workspace box, out of reach (0.87 m)
    assert not ok((0.10, 0.0))                     # outside the workspace box (x < 150 mm)
    assert spot_check(load_profile("libero_panda"), 0.10, lambda: (0.40, 0.0))((0.80, 0.35))   # no reach given


# -- issue 16: what moves, when, and what it costs ------------------------------------------------
def test_settings_are_what_at_when_and_a_bad_one_names_the_choices():
    from motormind.interference_setting import parse_setting
    assert parse_setting("fetched@reach") == ("fetched", "reach")
    assert parse_setting("carry") == ("target", "carry") and parse_setting("off") is None
    assert parse_setting("Bystander@Between") == ("bystander", "between")
    for bad in ("hand@reach", "fetched@lunch", "fetched@"):
        with pytest.raises(ValueError, match=r"--interference: .*fetched, target, bystander.*reach, carry, between"):
            parse_setting(bad)
    with pytest.raises(ValueError, match="what"):
        InterferencePlan("reach", 1, (0.09, 0.16), 0.0, what="hand")


def test_between_fires_before_the_first_command_of_the_planned_batch_and_a_bystander_is_seeded():
    sc, events = FakeScene(), []
    plan = InterferencePlan("between", 2, (0.09, 0.16), 0.0, seed=5, what="bystander")
    itf = Interferer(plan, sc, ["on", "block", "mark"], BOUNDS, events.append, steps_fn=lambda: 42)
    for k in range(3):
        itf.on_controller_event(*start(1, k))               # batch 1: the first batch start counts once
    assert not events
    itf.on_controller_event(*start(2, 0))
    (ev,) = events
    assert ev.object == "other" and ev.role == "bystander" and ev.when == "between"   # neither fetched nor target
    assert ev.batch_id == "b2" and ev.command_index == 0 and ev.step == 42 and ev.to_json()["step"] == 42


def test_a_region_target_moves_its_owner_and_a_fixture_cannot_be_moved():
    sc, events = FakeScene(), []
    world = sc.world

    def with_region():
        return {**world(), "regions": {"mark_top_region": {"parent": "mark"}}}
    sc.world = with_region
    sc.movable = lambda: ["block", "other"]                  # the mark is a fixture here
    itf = Interferer(InterferencePlan("carry", 1, (0.09, 0.16), 0.0), sc, ["on", "block", "mark_top_region"],
                     BOUNDS, events.append)
    sc.fingers = {"block": ["finger1", "finger2"]}
    itf.on_controller_event(*start(1, 0))
    assert not events and not sc.moves and itf.missed == "the target mark is not movable (a fixture)"
    sc.movable = lambda: ["block", "other", "mark"]
    itf = Interferer(InterferencePlan("carry", 1, (0.09, 0.16), 0.0), sc, ["on", "block", "mark_top_region"],
                     BOUNDS, events.append)
    itf.on_controller_event(*start(1, 0))
    assert [e.object for e in events] == ["mark"]


def _timeline(monitor: bool):
    """A record as the probe hears it: the event at the start of command 1 of b2 (step 40), the
    Monitor's cancel from its snapshot after command 1, honoured before command 3 (or not at all)."""
    from motormind.session.interference import InterferenceProbe
    step = {"n": 0}
    probe = InterferenceProbe(lambda: step["n"])

    def ev(t, kind, n, **data):
        step["n"] = n
        probe.listen({"t": t, "kind": kind, **data})
    ev(0.0, "batch", 0, batch={"batch_id": "b1"})
    ev(1.0, "batch", 30, batch={"batch_id": "b2"})
    ev(1.1, "command_start", 30, batch_id="b2", index=0)
    ev(1.2, "command_start", 40, batch_id="b2", index=1)
    ev(1.2, "interference", 40, batch_id="b2", command_index=1, step=40, object="bowl", role="fetched",
       when="reach", shift_m=0.1)
    ev(1.3, "vlm_call", 44)
    if monitor:
        ev(1.4, "monitor_cancel", 46, batch_id="b2", after_command=1, reason="moved")
    ev(1.5, "command_start", 50, batch_id="b2", index=2)
    results = [{"index": i, "status": "done"} for i in range(3)]
    if monitor:
        results += [{"index": i, "status": "cancelled"} for i in (3, 4)]
    else:
        ev(1.6, "command_start", 55, batch_id="b2", index=3)
        ev(1.7, "command_start", 60, batch_id="b2", index=4)
        results += [{"index": i, "status": "done"} for i in (3, 4)]
    ev(1.8, "report", 60, batch_id="b2", results=results)
    ev(2.0, "batch", 60, batch={"batch_id": "b3"})
    ev(2.1, "vlm_call", 60)
    ev(3.2, "episode_end", 100, steps=100, success=True)
    return probe


def test_the_probe_measures_latency_stale_commands_and_recovery_calls():
    m = _timeline(monitor=True).measures(success=True)
    assert m["step"] == 40 and m["shift_mm"] == 100.0
    assert m["cancel"] == {"ms": pytest.approx(200.0), "steps": 6}
    assert m["cancel_boundary"] == 1 and m["honoured_boundary"] == 2 and m["stale_commands"] == 2
    assert m["next_batch"] == {"ms": pytest.approx(800.0), "steps": 20} and m["next_plan"] is None
    assert m["success"] == {"ms": pytest.approx(2000.0), "steps": 60} and m["recovery_vlm_calls"] == 2
    off = _timeline(monitor=False).measures(success=True)
    assert off["cancel"] is None and off["cancel_boundary"] is None and off["stale_commands"] == 4
    assert _timeline(monitor=True).measures(success=False)["success"] is None
    from motormind.evaluate.interference import summarize_measures
    from motormind.session.interference import InterferenceProbe
    assert InterferenceProbe(lambda: 0).measures(True) is None            # nothing happened: nothing to measure
    s = summarize_measures([{"interference_measures": m}, {"interference_measures": off}, {}])
    assert s["interfered"] == 2 and s["cancel"]["n"] == 1 and s["cancel"]["steps_median"] == 6
    assert s["stale_commands"] == {"median": 3.0, "p90": 3.8, "max": 4.0} and s["success"]["n"] == 2


def test_jobs_keep_their_old_keys_and_the_report_puts_the_conditions_side_by_side():
    from motormind.evaluate.jobs import Job, grid
    from motormind.evaluate.report import markdown
    assert Job("libero_spatial", 0, 0).key == "libero_spatial/0/0/s0/oracle/full/-"      # earlier runs resume
    assert Job("libero_spatial", 0, 0, interference="fetched@reach").key.endswith("/-/itf=fetched@reach")
    assert Job("libero_spatial", 0, 0, interference="fetched@reach", interference_shift_m=(0.02, 0.04)).key.endswith(
        "/itf=fetched@reach:20-40mm")
    jobs = grid(["libero_spatial"], [0], [0, 1], ablations=["full", "no_monitor"], interference=["off", "target@carry"])
    assert len(jobs) == 8 and len({j.key for j in jobs}) == 8
    m = _timeline(monitor=True).measures(success=True)
    base = {"suite": "libero_spatial", "ablation": "full", "noise": {}, "outcome": "success", "steps": 100,
            "vlm_s": 0.1, "motion_s": 5.0, "overhead_s": 1.0, "episode_s": 6.1, "vlm_calls": 20, "privileged": True,
            "brain": "oracle"}
    rows = [{**base, "key": "a", "success": True},
            {**base, "key": "b", "success": True, "interference": "fetched@reach", "interference_event": {"x": 1},
             "interference_measures": m},
            {**base, "key": "c", "success": False, "outcome": "step_budget", "interference": "fetched@reach",
             "interference_event": None, "interference_missed": "no free spot for bowl within (0.06, 0.15) m"}]
    md = markdown(rows)
    assert "| libero_spatial | full | 1/1 100% [21, 100] | 1/2 50% [9, 91] |" in md
    assert "| libero_spatial | full | fetched@reach | 1/2 | 1 | 200 / 200 | 6 / 6 | 1 / 1; 2 / 2 |" in md
    assert "Not moved: 1 x no free spot for bowl" in md
    assert "Interference" not in markdown([rows[0]])                     # no interference: no such section


def test_an_object_in_the_fingers_is_never_pulled_out_of_them():
    sc, events = FakeScene(), []
    itf = Interferer(InterferencePlan("between", 1, (0.09, 0.16), 0.0), sc, ["on", "block", "mark"], BOUNDS,
                     events.append)
    sc.fingers = {"block": ["finger1", "finger2"]}
    itf.on_controller_event(*start(1, 0))
    itf.on_controller_event(*start(2, 0))
    assert not events and not sc.moves and itf.count == 0      # held batches do not count
    sc.fingers = {}
    itf.on_controller_event(*start(3, 0))
    assert [e.batch_id for e in events] == ["b3"]


def test_a_cancel_recorded_between_the_move_and_its_record_counts():
    """The Monitor's thread may look between the hand's move and the event's record: the moment is
    the disturbed command's start, and that cancel (from the boundary before) is the response."""
    from motormind.session.interference import InterferenceProbe
    probe = InterferenceProbe(lambda: 13)
    for ev in ({"t": 1.0, "kind": "command_start", "batch_id": "b1", "index": 2},
               {"t": 1.02, "kind": "monitor_cancel", "batch_id": "b1", "after_command": 1},
               {"t": 1.03, "kind": "interference", "batch_id": "b1", "command_index": 2, "step": 13},
               {"t": 1.5, "kind": "report", "batch_id": "b1",
                "results": [{"index": 0, "status": "done"}, {"index": 1, "status": "done"},
                            {"index": 2, "status": "done"}, {"index": 3, "status": "cancelled"}]}):
        probe.listen(ev)
    m = probe.measures(success=False)
    assert m["cancel"] == {"ms": pytest.approx(20.0), "steps": 0}
    assert m["cancel_boundary"] == 0 and m["honoured_boundary"] == 1 and m["stale_commands"] == 1
