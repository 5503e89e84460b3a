"""The deterministic Controller: validation before motion, boundaries, e-stop, reports, replay."""
import json
import threading

import numpy as np
import pytest

from motormind.controller import CancelToken, Controller
from motormind.geometry import quat_to_mat, tilt_deg
from motormind.robots.fake import FakeRobot, OvershootingFakeRobot
from motormind.robots.replay import RecordingRobot, ReplayRobot


def B(*cmds, bid="b1"):
    return {"schema_version": 1, "batch_id": bid, "subgoal_id": "s1", "commands": list(cmds)}


def mv(direction, mm):
    return {"op": "move", "direction": direction, "distance_mm": mm}


def test_accepted_batch_reports_commanded_vs_achieved(fake_robot):
    c = Controller(fake_robot)
    rep = c.run(B(mv("forward", 12.2), mv("left", 30), {"op": "rotate", "axis": "yaw", "angle_deg": 15},
                  {"op": "gripper", "action": "close"}, {"op": "done"}))
    assert rep.status == "done" and rep.claims_done
    r0 = rep.results[0]
    assert r0.commanded["translation_mm"] == [12.2, 0.0, 0.0]
    assert r0.achieved["translation_mm"][0] == pytest.approx(12.2, abs=1.0)
    assert r0.achieved["error_mm"] <= fake_robot.profile.tolerances.position_mm
    assert rep.results[2].achieved["rotation_deg"] == pytest.approx(15, abs=1)
    assert rep.results[3].achieved["gripper_width_mm"] == pytest.approx(0, abs=0.5)
    assert all(r.duration_s >= 0 for r in rep.results) and rep.steps > 0
    assert json.loads(json.dumps(rep.to_json()))["schema_version"] == 1


@pytest.mark.parametrize("cmds, field, limit", [
    ([{"op": "spin"}], "commands[0].op", "unknown op 'spin'"),
    ([mv("up", 101)], "commands[0].distance_mm", "per-command limit 100 mm"),
    ([{"op": "move", "direction": "up"}], "commands[0].distance_mm", "missing"),
    ([{"op": "rotate", "axis": "yaw", "angle_deg": 45}], "commands[0].angle_deg", "per-command limit 30 deg"),
    ([{"op": "wait", "seconds": 3}], "commands[0].seconds", "limit 2 s"),
    ([{"op": "wait", "seconds": 0.1}] * 9, "commands", "exceed the batch limit 8"),
    ([mv("up", 100), mv("up", 100), mv("up", 100), mv("up", 10)], "commands[3]", "z=510.0 > 500.0"),
])
def test_each_rejection_reason_moves_nothing(fake_robot, cmds, field, limit):
    c = Controller(fake_robot)
    before = fake_robot.observe()
    rep = c.run(B(*cmds))
    assert rep.status == "rejected"
    assert any(field in r.reason and limit in r.reason for r in rep.results), [r.reason for r in rep.results]
    assert all(r.status == "rejected" for r in rep.results)
    assert fake_robot.executed == [] and np.allclose(fake_robot.observe().eef_pos_m, before.eef_pos_m)


def test_workspace_rejection_names_axis_and_box(fake_robot):
    rep = Controller(fake_robot).run(B(mv("down", 100), mv("down", 100), mv("down", 50)))
    bad = rep.results[2]
    assert "outside the workspace box" in bad.reason and "z=-50.0 < 0.0" in bad.reason
    assert rep.results[0].reason.startswith("not run: command 2 is invalid")


def test_non_finite_and_malformed_batches_are_rejected(fake_robot):
    c = Controller(fake_robot)
    rep = c.run('{"commands": [{"op": "move", "direction": "up", "distance_mm": NaN}]}')
    assert rep.status == "rejected" and "non-finite" in rep.reason
    rep = c.run('{"commands": [')
    assert rep.status == "rejected" and "malformed JSON" in rep.reason
    assert fake_robot.executed == []


ISSUE_15 = [   # the one-line reproductions of issue 15 ("hostile input" and "validation gaps")
    ('{"commands": [{"op": "move", "direction": "up", "distance_mm": 1' + "0" * 400 + "}]}",
     "commands[0].distance_mm: an integer of 401 digits"),
    ('{"commands": [{"op": "move", "direction": "up", "distance_mm": 1' + "0" * 4400 + "}]}",
     "commands[0].distance_mm: an integer of 4401 digits"),
    (B({"op": "move", "direction": ["up"], "distance_mm": 10}), "commands[0].direction: must be a word"),
    (B({"op": "rotate", "axis": {"yaw": 1}, "angle_deg": 10}), "commands[0].axis: must be a word"),
    ('{"commands": ' + "[" * 3000 + "]" * 3000 + "}", "batch: nested deeper than 32 levels"),
    (B({"op": "move", "vector": [1e200, 0, 0], "distance_mm": 20}), "commands[0].vector: element 0 is 1e+200"),
    ({**B({"op": "done"}), "schema_version": True}, "schema_version: unsupported version True"),
    (B({"op": "done", "note": "x" * 10_000}), "commands[0].note: 10000 characters exceed the limit of 500"),
    ('{"commands": [{"op": "move", "direction": "up", "distance_mm": 500, "distance_mm": 10}]}',
     "commands[0]: duplicate key 'distance_mm'"),
]


@pytest.mark.parametrize("data, reason", ISSUE_15)
def test_hostile_batches_are_clean_rejections(fake_robot, data, reason):
    rep = Controller(fake_robot).run(data)
    assert rep.status == "rejected" and reason in rep.reason, rep.reason
    assert fake_robot.executed == [] and all(r.status == "rejected" for r in rep.results)
    json.dumps(rep.to_json())                     # the report is always writable


@pytest.mark.parametrize("direction, axis, bound", [("forward", 0, "x=701.8 > 700.0"), ("down", 2, "z=-0.9 < 0.0")])
def test_the_box_holds_at_execution_for_a_backend_that_overshoots(fake_profile, direction, axis, bound):
    """Each move's target comes from the measured pose; 0.9 mm of overshoot per move (inside the 1 mm
    tolerance) would carry the third 100 mm move forward to x = 702.7 mm, the second down to z = -1.8."""
    robot = OvershootingFakeRobot(fake_profile, start_pos_m=(0.4, 0.0, 0.2), overshoot_mm=0.9)
    n = 3 if direction == "forward" else 2
    rep = Controller(robot).run(B(*[mv(direction, 100)] * n, {"op": "done"}))
    assert [r.status for r in rep.results] == ["done"] * (n - 1) + ["rejected", "cancelled"]
    bad = rep.results[n - 1]
    assert bad.reason.startswith(f"commands[{n - 1}] at execution: target outside the workspace box: {bound} mm")
    assert bad.steps == 0 and len(robot.executed) == n - 1            # never sent to the robot
    assert rep.status == "rejected" and not rep.claims_done and rep.reason.startswith(f"command {n - 1} rejected")
    assert rep.results[n].reason.startswith(f"not run: command {n - 1} rejected")
    lo, hi = fake_profile.workspace_mm["xyz"[axis]]
    assert lo <= robot.pos[axis] * 1000 <= hi


def test_accumulated_tilt_is_bounded_but_yaw_is_not(fake_robot):
    c = Controller(fake_robot)
    roll = {"op": "rotate", "axis": "roll", "angle_deg": 30}
    rep = c.run(B(*[roll] * 8))                                  # 240 deg of roll: rejected before motion
    assert rep.status == "rejected" and fake_robot.executed == []
    assert rep.results[2].reason == ("commands[2]: target orientation outside the bound: tilt 90.0 deg from "
                                     "gripper-down > max_tilt_deg 60 (orientation of profile fake)")
    assert c.run(B(roll, roll)).status == "done"                 # 60 deg: at the bound
    assert tilt_deg(quat_to_mat(fake_robot.observe().eef_quat_xyzw)) == pytest.approx(60, abs=1.5)
    rep = c.run(B(roll))
    assert rep.status == "rejected" and "max_tilt_deg 60" in rep.reason
    assert c.run(B({**roll, "angle_deg": -30})).status == "done"     # back toward gripper-down
    yaw = {"op": "rotate", "axis": "yaw", "angle_deg": 30}
    assert c.run(B(*[yaw] * 8)).status == "done"                 # 240 deg of yaw: the wrist's business


def test_a_robot_measured_tilted_past_the_bound_may_rotate_back(fake_robot):
    from motormind.geometry import axis_angle_to_mat
    fake_robot.rot = axis_angle_to_mat([1, 0, 0], np.radians(80)) @ fake_robot.rot
    c = Controller(fake_robot)
    assert c.run(B({"op": "rotate", "axis": "roll", "angle_deg": 5})).status == "rejected"
    assert c.run(B({"op": "rotate", "axis": "roll", "angle_deg": -30})).status == "done"


def test_a_pose_that_is_not_finite_moves_nothing(fake_robot):
    fake_robot.pos = np.array([np.nan, 0.0, 0.2])
    rep = Controller(fake_robot).run(B(mv("up", 10)))
    assert rep.status == "rejected" and "x=nan is not a finite position" in rep.reason
    assert fake_robot.executed == []


def test_cancel_during_command_k_lets_k_finish_and_runs_nothing_after(fake_robot):
    c = Controller(fake_robot)
    token = CancelToken()
    fired = []

    def hook(robot):                       # cancel while command 1 is under way
        if len(robot.executed) == 2 and not fired:
            fired.append(robot.steps)
            token.cancel("monitor: wrong object", source="monitor")
    fake_robot.step_hook = hook
    rep = c.run(B(mv("forward", 20), mv("left", 20), mv("up", 20), {"op": "gripper", "action": "close"}), token)
    assert fired
    assert [r.status for r in rep.results] == ["done", "done", "cancelled", "cancelled"]
    assert rep.results[1].achieved["translation_mm"][1] == pytest.approx(20, abs=1)   # k finished
    assert "wrong object" in rep.results[2].reason and "before command 2" in rep.results[2].reason
    assert len(fake_robot.executed) == 2 and rep.status == "cancelled"


def test_estop_mid_command_stops_motion_and_latches(fake_robot):
    c = Controller(fake_robot)
    positions = []

    def hook(robot):
        positions.append(robot.pos.copy())
        if len(positions) == 3:
            c.emergency_stop("operator pressed stop")
    fake_robot.step_hook = hook
    rep = c.run(B(mv("forward", 80), mv("left", 20)))
    assert [r.status for r in rep.results] == ["cancelled", "cancelled"] and rep.estop
    assert "emergency stop mid-command" in rep.results[0].reason
    moved = rep.results[0].achieved["translation_mm"][0]
    assert 0 < moved < 80 * 0.5                  # stopped well short of the target
    assert len(positions) == 3                   # no control step after the stop
    fake_robot.step_hook = None
    rep2 = c.run(B(mv("left", 5)))               # latched: nothing runs until reset
    assert rep2.status == "rejected" and "reset required" in rep2.results[0].reason
    c.reset_estop()
    assert c.run(B(mv("left", 5))).status == "done"


def test_an_estop_while_idle_cancels_nothing_after_reset(fake_robot):
    """Issue 31: an e-stop pressed while no batch ran, then reset, must not cancel the next batch."""
    c = Controller(fake_robot)
    c.emergency_stop("operator e-stop (idle)")
    c.reset_estop()
    rep = c.run(B(mv("up", 20)))
    assert rep.status == "done" and not rep.estop, rep.to_json()


@pytest.mark.parametrize("when", ["backend", "estop_reset_mid_command", "empty_reason"])
def test_a_stopped_command_always_says_what_stopped_it(fake_robot, when):
    """A cancel's reason is never empty: the e-stop (latched, or pressed and reset during the
    command), or the backend itself (a stop() from elsewhere), named."""
    c = Controller(fake_robot)
    n = []

    def hook(robot):
        n.append(1)
        if len(n) != 3:
            return
        if when == "backend":
            robot.stop()                                  # not the Controller's e-stop
        elif when == "estop_reset_mid_command":
            c.emergency_stop("operator pressed stop")
            c.reset_estop()
        else:
            c.emergency_stop("")
    fake_robot.step_hook = hook
    rep = c.run(B(mv("forward", 80)))
    r = rep.results[0]
    assert r.status == "cancelled" and not r.reason.endswith("()"), r.reason
    expect = {"backend": "stopped mid-command by the robot backend, not by the emergency stop (stopped) "
                         "(backend FakeRobot)",
              "estop_reset_mid_command": "emergency stop mid-command (operator pressed stop; reset since)",
              "empty_reason": "emergency stop mid-command (emergency stop)"}[when]
    assert r.reason == expect


def test_estop_from_another_thread(fake_profile):
    robot = FakeRobot(fake_profile, realtime=True)
    c = Controller(robot)
    t = threading.Timer(0.1, c.emergency_stop)
    t.start()
    rep = c.run(B(mv("forward", 90)))
    t.join()
    assert rep.results[0].status == "cancelled" and rep.results[0].achieved["translation_mm"][0] < 80


def test_blocked_when_achieved_falls_short(fake_robot):
    fake_robot.obstacle_z_m = 0.18               # a surface 20 mm below the tool
    rep = Controller(fake_robot).run(B(mv("down", 50), mv("left", 10)))
    assert [r.status for r in rep.results] == ["blocked", "cancelled"]
    assert "achieved 20.0 of 50 mm" in rep.results[0].reason
    assert "not run: command 0 blocked" in rep.results[1].reason


def test_fault_stops_the_batch(fake_robot):
    fake_robot.fault_after_steps = 3
    rep = Controller(fake_robot).run(B(mv("forward", 50), mv("left", 10)))
    assert [r.status for r in rep.results] == ["fault", "cancelled"] and rep.status == "fault"
    assert "injected fault" in rep.results[0].reason and "(code 99)" in rep.results[0].reason


def test_grasp_stall_is_done_with_width(fake_robot):
    fake_robot.grip_object_mm = 30.0
    rep = Controller(fake_robot).run(B({"op": "gripper", "action": "close"}))
    assert rep.results[0].status == "done" and rep.results[0].achieved["gripper_width_mm"] == pytest.approx(30, abs=1)


def _strip(report):
    d = report.to_json()
    d.pop("duration_s")
    for r in d["results"]:
        r.pop("duration_s")
    return d


def test_determinism_replay_of_recorded_observations(fake_profile):
    batches = [B(mv("forward", 23.4), {"op": "rotate", "axis": "yaw", "angle_deg": -12}, bid="b1"),
               B({"op": "move", "vector": [1, -2, 0.5], "distance_mm": 40}, {"op": "gripper", "width": 0.3},
                 {"op": "wait", "seconds": 0.2}, {"op": "done"}, bid="b2"),
               B(mv("down", 500), bid="b3")]                        # rejected
    live = RecordingRobot(FakeRobot(fake_profile))
    c = Controller(live)
    reports = [c.run(b) for b in batches]
    replay = ReplayRobot(fake_profile, live.observations, live.results)
    c2 = Controller(replay)
    again = [c2.run(b) for b in batches]
    assert [m.to_json() for m in replay.motions] == [m.to_json() for m in live.motions]
    assert [_strip(r) for r in again] == [_strip(r) for r in reports]
    assert len(replay.motions) == 5          # done and the rejected batch move nothing


# -- guarded moves and blends (issue 33 items 3 and 4) -------------------------------------------------
def test_a_guarded_descent_that_meets_the_table_ends_done_and_the_close_after_it_runs(fake_robot):
    fake_robot.obstacle_z_m = 0.17               # the table, 30 mm below the tool
    rep = Controller(fake_robot).run(B({"op": "move", "direction": "down", "distance_mm": 60, "until": "contact"},
                                       {"op": "gripper", "action": "close"}, mv("up", 20)))
    assert [r.status for r in rep.results] == ["done", "done", "done"] and rep.status == "done", rep.summary()
    assert "guarded move: stopped at contact after 30.0 of 60 mm" in rep.results[0].reason
    assert rep.results[1].achieved["gripper_width_mm"] == pytest.approx(0, abs=0.5)   # the close ran
    assert fake_robot.pos[2] == pytest.approx(0.19, abs=0.001)                       # and the lift after it


def test_a_move_without_until_keeps_its_meaning_contact_blocks_the_batch(fake_robot):
    fake_robot.obstacle_z_m = 0.17
    rep = Controller(fake_robot).run(B(mv("down", 60), {"op": "gripper", "action": "close"}))
    assert [r.status for r in rep.results] == ["blocked", "cancelled"]
    assert "stopped by contact" in rep.results[0].reason


def test_a_guarded_move_that_meets_nothing_is_blocked_and_says_so(fake_robot):
    rep = Controller(fake_robot).run(B({"op": "move", "direction": "down", "distance_mm": 40, "until": "contact"},
                                       {"op": "gripper", "action": "close"}))
    assert [r.status for r in rep.results] == ["blocked", "cancelled"]
    assert "guarded move: no contact over the whole 40 mm (nothing met" in rep.results[0].reason
    assert rep.results[0].achieved["translation_mm"][2] == pytest.approx(-40, abs=1)
    assert rep.results[1].status == "cancelled" and fake_robot.gripper == 1.0        # no close on air


def test_a_guarded_move_does_not_blend_into_the_next_move(fake_robot):
    """Its end is where it met something: the next move starts from the measured pose."""
    from motormind.profile import load_profile
    prof = load_profile("libero_panda")
    robot = FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2))
    robot.obstacle_z_m = 0.17
    rep = Controller(robot).run(B({"op": "move", "direction": "down", "distance_mm": 60, "until": "contact"},
                                  mv("left", 30)))
    assert [r.status for r in rep.results] == ["done", "done"], rep.summary()
    assert "blend_m" not in robot.executed[0].to_json()
    assert robot.pos == pytest.approx([0.4, 0.03, 0.17], abs=0.0021)


def test_a_robot_without_contact_sensing_refuses_a_guarded_move():
    from motormind.profile import load_profile
    prof = load_profile("xarm6")
    c = Controller(FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2)), prof)
    rep = c.run(B({"op": "move", "direction": "down", "distance_mm": 40, "until": "contact"}))
    assert rep.status == "rejected"
    assert "commands[0].until: this robot senses no contact" in rep.results[0].reason
    assert "limits.guarded_moves false in profile xarm6" in rep.results[0].reason


@pytest.mark.parametrize("mm", [3.0, 11.0])
def test_a_small_correction_lands_within_tolerance_when_another_move_follows(mm):
    """The blend is at most blend_fraction of the command: a 3 mm correction followed by a move ends
    within the position tolerance of its own target (with the flat 12 mm blend it achieved 0)."""
    from motormind.profile import load_profile
    prof = load_profile("libero_panda")
    tol = prof.tolerances
    robot = FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2))
    rep = Controller(robot).run(B(mv("left", mm), mv("down", 50)))
    first = rep.results[0]
    assert first.status == "done", rep.summary()
    assert first.achieved["translation_mm"][1] >= mm * (1 - tol.blend_fraction) - 1e-6
    assert first.achieved["error_mm"] <= tol.blend_fraction * mm + 1e-6
    if mm == 3.0:
        assert first.achieved["error_mm"] <= tol.position_mm
    assert f"at most {tol.blend_fraction:g} of its {mm:g} mm" in first.reason      # the report says what happened
    assert robot.pos == pytest.approx([0.4, mm / 1000, 0.15], abs=tol.position_mm / 1000)


def test_a_long_move_still_blends_by_blend_mm():
    from motormind.profile import load_profile
    prof = load_profile("libero_panda")
    robot = FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2))
    rep = Controller(robot).run(B(mv("left", 100), mv("down", 50)))
    assert robot.executed[0].blend_m == pytest.approx(prof.tolerances.blend_mm / 1000)
    assert "passed through" in rep.results[0].reason and rep.status == "done"


def test_a_profile_with_a_blend_names_its_fraction():
    from motormind.errors import ConfigError
    from motormind.profile import profile_from_dict
    import yaml
    from motormind.profile import config_dir
    d = yaml.safe_load((config_dir() / "robots" / "libero_panda.yaml").read_text())
    del d["tolerances"]["blend_fraction"]
    with pytest.raises(ConfigError, match="tolerances.blend_fraction: missing"):
        profile_from_dict(d, "libero_panda.yaml")
    d["tolerances"]["blend_fraction"] = 1.5
    with pytest.raises(ConfigError, match="tolerances.blend_fraction: must be within 0..1"):
        profile_from_dict(d, "libero_panda.yaml")


def test_a_gripper_command_is_told_when_an_arm_motion_follows(fake_robot):
    """Settling only where the next command needs it (issue 33 item 6): an open or a width followed by
    a move or rotation may finish during it (robot.Motion.follows); before a done, a wait, another
    gripper command or the batch's end it settles."""
    Controller(fake_robot).run(B({"op": "gripper", "action": "open"}, mv("up", 10),
                                 {"op": "gripper", "width": 0.5}, {"op": "rotate", "axis": "yaw", "angle_deg": 5},
                                 {"op": "gripper", "action": "close"}, {"op": "wait", "seconds": 0.1},
                                 {"op": "gripper", "action": "open"}, {"op": "done"}))
    grips = [m.follows for m in fake_robot.executed if m.kind == "gripper"]
    assert grips == [True, True, False, False]


def test_a_move_before_a_done_a_wait_or_the_batchs_end_need_not_end_at_rest(fake_robot):
    """Settling only where the next command needs it (issue 33 item 6): a move before a gripper action
    ends at rest on its target; before a wait, a done or the batch's end it may end within the
    tolerance, still slowing (robot.Motion.at_rest)."""
    c = Controller(fake_robot)
    c.run(B(mv("up", 10), {"op": "gripper", "action": "close"}, mv("up", 10), {"op": "wait", "seconds": 0.1},
            mv("up", 10), {"op": "done"}))
    c.run(B(mv("up", 10)))
    assert [m.at_rest for m in fake_robot.executed if m.kind == "move"] == [True, False, False, False]


def test_a_wait_after_a_move_holds_the_moves_target(fake_robot):
    """A move before a wait ends on its way (within the position tolerance): the wait holds the move's
    target, so the arm settles there during the wait's steps (a real-VLM trial's moves before a wait
    settled 11 steps each), not where the move happened to end; a guarded move still ends at rest."""
    c = Controller(fake_robot)
    c.run(B(mv("up", 10), {"op": "wait", "seconds": 0.1}))
    move, wait = fake_robot.executed[-2:]
    assert (move.kind, wait.kind, move.at_rest) == ("move", "wait", False)
    assert np.allclose(wait.target_pos_m, move.target_pos_m)
    c.run(B({"op": "move", "direction": "down", "distance_mm": 10, "until": "contact"}, {"op": "wait", "seconds": 0.1}))
    assert fake_robot.executed[-2].at_rest


def test_a_blend_limits_the_commands_own_quantity_and_keeps_the_held_ones():
    """A move's distance blend is cut to blend_fraction of it, its orientation keeps blend_deg; a
    rotation's angle blend is cut, its position keeps blend_mm (a rotation chain still flows)."""
    from motormind.profile import load_profile
    prof = load_profile("libero_panda")
    tol = prof.tolerances
    robot = FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2))
    Controller(robot).run(B(mv("left", 8), {"op": "rotate", "axis": "yaw", "angle_deg": 10}, mv("down", 50)))
    move, turn = robot.executed[0], robot.executed[1]
    assert move.blend_m == pytest.approx(tol.blend_fraction * 8 / 1000)
    assert move.blend_rad == pytest.approx(np.radians(tol.blend_deg))
    assert turn.blend_rad == pytest.approx(np.radians(tol.blend_fraction * 10))
    assert turn.blend_m == pytest.approx(tol.blend_mm / 1000)
