"""The shared interference event (motormind/evaluate/interference.py) on a scene that is only data:
when it fires, where it puts the object, and that it fires once."""
import math

import pytest

from motormind.evaluate.interference import InterferencePlan, Interferer, choose_spot


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
