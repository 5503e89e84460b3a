"""Held or not (motormind/grasp.py): from the fingers stalling against something and from how the gap
changes during later commands, never from a width threshold; said on the command where it happens."""
import pytest

from motormind.controller import Controller
from motormind.grasp import SLIP_MM, GraspTracker
from motormind.robots.fake import FakeRobot, SlippingFakeRobot

CLOSE = {"op": "gripper", "action": "close"}
OPEN = {"op": "gripper", "action": "open"}


def B(*cmds, bid="b1"):
    return {"schema_version": 1, "batch_id": bid, "subgoal_id": "s1", "commands": list(cmds)}


def mv(direction, mm):
    return {"op": "move", "direction": direction, "distance_mm": mm}


# ------------------------------------------------------------------ the tracker alone
def test_a_stall_at_any_width_is_held_and_a_close_without_one_is_not():
    t = GraspTracker()
    said = t.gripper(78.0, 6.9, 0.0, stalled=True, full=True)        # a bowl's thin wall
    assert t.held and t.held_mm == 6.9
    assert "holding at 6.9 mm" in said and "an object is held" in said and "nothing held" not in said
    t.reset()
    said = t.gripper(78.0, 24.0, 0.0, stalled=False, full=True)      # wide, but the fingers met nothing
    assert not t.held and said == "closed to 24.0 mm without meeting anything: nothing held"


def test_a_slip_is_said_on_the_command_during_which_the_gap_closed():
    t = GraspTracker()
    t.gripper(78.0, 11.4, 0.0, stalled=True, full=True)
    assert t.during("move", 11.4, 11.0) == ""                        # the grip tightening: still held
    assert t.held
    said = t.during("move", 11.0, 1.7)
    assert said == ("the gap closed from 11.0 to 1.7 mm during this move (it held at 11.4 mm): "
                    "the held object slipped out")
    assert not t.held and t.during("move", 1.7, 0.0) == ""           # said once


def test_a_grip_that_narrows_but_still_holds_is_a_shift_not_a_slip():
    """Seen in real-VLM trials: a bowl's wall pinched at 12.4 mm narrowed to 4.7 mm during the lift while
    the bowl still hung in the fingers; only a gap closed to next to nothing is a lost object."""
    t = GraspTracker()
    t.gripper(78.0, 12.4, 0.0, stalled=True, full=True)
    said = t.during("move", 12.4, 4.7)
    assert said == ("the gap closed from 12.4 to 4.7 mm during this move (it held at 12.4 mm): the grip shifted "
                    "(the object turned or slid between the fingers); something is still between them at 4.7 mm")
    assert t.held and t.held_mm == 4.7 and "slipped" not in said
    assert t.during("move", 4.7, 4.5) == ""                          # measured from the new gap
    assert t.during("move", 4.5, 1.0).endswith("the held object slipped out") and not t.held


def test_opening_releases_and_a_reset_between_batches_forgets():
    t = GraspTracker()
    t.gripper(78.0, 30.0, 0.0, stalled=True, full=True)
    assert t.gripper(30.0, 78.0, 78.0, stalled=False, full=True) == \
        "opened to 78.0 mm: the object held at 30.0 mm is released"
    assert not t.held
    t.gripper(78.0, 30.0, 0.0, stalled=True, full=True)
    assert t.start_batch(78.0) == "" and not t.held                  # a new episode opened the fingers
    t.gripper(78.0, 30.0, 0.0, stalled=True, full=True)
    assert "grip shifted" in t.start_batch(30.0 - SLIP_MM - 1) and t.held       # narrowed, still holding
    assert "slipped out" in t.start_batch(2.0) and not t.held


def test_slip_threshold_must_be_positive():
    with pytest.raises(ValueError, match="slip_mm"):
        GraspTracker(slip_mm=0)


# ------------------------------------------------------------------ through the Controller, every backend's words
def test_a_thin_wall_close_is_reported_held(fake_profile):
    robot = FakeRobot(fake_profile)
    robot.grip_object_mm = 6.9                       # the bowl's wall: a stall at a small width
    c = Controller(robot)
    rep = c.run(B(CLOSE, mv("up", 20)))
    close = rep.results[0]
    assert close.status == "done" and close.achieved["gripper_width_mm"] == pytest.approx(6.9, abs=0.1)
    assert "stalled: holding at 6.9 mm" in close.reason and "an object is held" in close.reason
    assert "nothing held" not in close.reason and c.grasp.held
    assert "slipped" not in rep.results[1].reason


def test_an_empty_close_is_reported_nothing_held(fake_profile):
    c = Controller(FakeRobot(fake_profile))
    rep = c.run(B(CLOSE))
    assert rep.results[0].reason == "closed to 0.0 mm without meeting anything: nothing held"
    assert not c.grasp.held


def test_a_slip_during_a_later_command_is_reported_on_that_command(fake_profile):
    robot = SlippingFakeRobot(fake_profile, grip_object_mm=11.4, slip_on=3)
    c = Controller(robot)
    rep1 = c.run(B(CLOSE, mv("up", 20), bid="grasp"))
    assert "holding at 11.4 mm" in rep1.results[0].reason and "slipped" not in rep1.results[1].reason
    rep2 = c.run(B(mv("up", 30), mv("left", 30), bid="carry"))     # the lift's second motion loses it
    assert "slipped" not in rep2.results[0].reason
    assert rep2.results[1].reason.endswith(
        "the gap closed from 11.4 to 0.0 mm during this move (it held at 11.4 mm): the held object slipped out")
    assert not c.grasp.held
    assert rep2.results[1].status == "done"                          # the move itself reached its target


def test_opening_after_a_grasp_says_released(fake_profile):
    robot = FakeRobot(fake_profile)
    robot.grip_object_mm = 30.0
    c = Controller(robot)
    c.run(B(CLOSE))
    robot.grip_object_mm = None
    rep = c.run(B(OPEN))
    assert rep.results[0].reason.startswith("opened to") and "the object held at 30.0 mm is released" \
        in rep.results[0].reason


def test_a_full_command_that_moves_nothing_says_where_the_fingers_are():
    t = GraspTracker()
    assert t.gripper(77.7, 77.7, 78.0, stalled=False, full=True) == "open at 77.7 mm: nothing held"
