"""The xArm6 backend (robots/xarm6.py) through the unmodified xarm-python-sdk against the emulator:
bring-up and the arm's safety layer (the TCP offset among it, with its one-screen read-back),
closed-loop moves, pick and place, every injected fault as a typed RobotFault with the arm stopped
and the backend latched, a dropped link, the read-back refusal, the Controller rejecting a fence
breach before the SDK, the fence and the box being about the fingertips, and the cameras."""
from __future__ import annotations

import json
import math
import os
import threading
import time

import numpy as np
import pytest

pytest.importorskip("xarm")

from motormind.errors import ConfigError, RobotFault  # noqa: E402
from motormind.geometry import axis_angle_to_mat, quat_to_mat  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.robot import Motion  # noqa: E402
from motormind.robots.xarm6 import XArm6Robot, format_safety_readback  # noqa: E402
from motormind.sim.xarm_emulator import XArmEmulator  # noqa: E402
from motormind.sim.xarm_emulator import free_loopback_host as free_loopback  # noqa: E402

pytestmark = pytest.mark.xarm

DOWN = np.diag([1.0, -1.0, -1.0])          # tool pointing down: roll 180 degrees


@pytest.fixture
def emu():
    """A controller whose gripper TCP is already stored (as UFACTORY Studio leaves it once the gripper
    is set up): the backend writes the same offset, so the TCP starts at [300, 0, 300], tool down."""
    e = XArmEmulator(free_loopback(), 0, report_hz=20, tcp_offset=load_profile("xarm6").safety.tcp_offset).start()
    yield e
    e.stop()


@pytest.fixture
def fresh_emu():
    """A fresh controller: no TCP offset stored (the TCP is the flange), flange at [300, 0, 200] down."""
    e = XArmEmulator(free_loopback(), 0, report_hz=20, initial_pose=(300.0, 0.0, 200.0, 180.0, 0.0, 0.0)).start()
    yield e
    e.stop()


@pytest.fixture
def profile():
    return load_profile("xarm6")


def profile_with(**safety):
    """The xarm6 profile with other ``safety`` values."""
    import yaml
    from motormind.paths import config_dir
    from motormind.profile import profile_from_dict
    doc = yaml.safe_load((config_dir() / "robots" / "xarm6.yaml").read_text())
    doc["safety"].update(safety)
    return profile_from_dict(doc, "xarm6-variant.yaml")


@pytest.fixture
def robot(emu, profile):
    r = XArm6Robot(emu.host, profile, command_port=emu.port, stall_timeout_s=0.5)
    yield r
    r.close()


def emu_pos_m(emu):
    return np.array(emu.snapshot()["pose_mm_deg"][:3]) / 1000.0


def move_by(robot, dxyz_mm, estop=None):
    o = robot.observe()
    target = o.eef_pos_m + np.asarray(dxyz_mm, dtype=float) / 1000.0
    res = robot.execute(Motion("move", target, quat_to_mat(o.eef_quat_xyzw), max_steps=200), estop or threading.Event())
    return res, target


def grip(robot, fraction):
    o = robot.observe()
    return robot.execute(Motion("gripper", o.eef_pos_m, quat_to_mat(o.eef_quat_xyzw), gripper=fraction),
                         threading.Event())


# ------------------------------------------------------------------------------------- bring-up
@pytest.mark.parametrize("addr", ["localhost", "xarm6.lab", "192.168.1", "::1"])
def test_a_hostname_is_refused_with_a_clear_error(addr):
    with pytest.raises(ConfigError, match="not an IPv4 literal.*serial"):
        XArm6Robot(addr, connect=False)


def test_sdk_import_survives_an_unwritable_home(tmp_path):
    """The SDK creates ~/.UFACTORY/log at import; the backend retries with a temporary HOME."""
    import subprocess
    import sys
    code = ("import os; from motormind.robots.xarm6 import _import_sdk; _import_sdk(); "
            "print('ok', os.environ['HOME'])")
    env = dict(os.environ, HOME="/proc/motormind-unwritable")
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "ok /proc/motormind-unwritable" in out.stdout                  # HOME restored afterwards


def test_bring_up_writes_the_arms_safety_layer_from_the_profile(emu, robot, profile):
    s = emu.snapshot()
    assert s["enabled"] and s["mode"] == 0 and s["state"] == 2 and s["error"] == 0
    assert s["boundary"] == [650, 150, 400, -400, 500, 20]               # workspace_mm: the fence
    assert s["fence"] and s["reduced_mode"] and s["reduced_tcp_speed"] == pytest.approx(100.0)
    assert s["collision_sensitivity"] == 3
    assert s["tcp_load"] == pytest.approx([0.82, 0, 0, 48], abs=1e-4)
    assert s["gripper_enabled"]
    assert s["tcp_offset_mm_deg"] == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-4)
    got = robot.read_safety()
    assert got["boundary"] == [650, 150, 400, -400, 500, 20] and got["fence"] is True


def test_bring_up_sets_the_profiles_tcp_offset_and_reads_it_back(fresh_emu, profile):
    """A fresh controller (TCP at the flange) gets the profile's TCP offset on connect; the pose the
    arm reports, and so the Controller's measured eef pose, is then the TCP's, 172 mm past the flange;
    connect returns (and prints) the read-back of every safety value, expected and read."""
    emu = fresh_emu
    before = emu.snapshot()
    assert before["tcp_offset_mm_deg"] == [0.0] * 6 and before["pose_mm_deg"][2] == pytest.approx(200.0, abs=0.1)
    robot = XArm6Robot(emu.host, profile, command_port=emu.port, connect=False)
    try:
        rows = robot.connect()
        s = emu.snapshot()
        assert s["tcp_offset_mm_deg"] == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-4)     # register 35
        assert s["joints_rad"] == pytest.approx(before["joints_rad"], abs=1e-6)             # nothing moved
        flange = np.array(before["pose_mm_deg"][:3])
        assert s["pose_mm_deg"][:3] == pytest.approx(flange - [0, 0, 172], abs=1e-3)         # the TCP's pose
        assert robot.observe().eef_pos_m == pytest.approx((flange - [0, 0, 172]) / 1000, abs=1e-5)
        assert robot.read_safety()["tcp_offset"] == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-3)
        # the read-back: every safety value, each with the expected and the read value
        assert rows is robot.safety_readback
        by = {r.setting: r for r in rows}
        assert list(by) == ["fence mode", "TCP boundary", "reduced mode", "reduced TCP speed",
                            "collision sensitivity", "TCP load", "TCP offset"]
        assert all(r.ok for r in rows)
        assert by["TCP offset"].expected == [0, 0, 172, 0, 0, 90]
        assert by["TCP offset"].read == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-3)
        assert by["TCP boundary"].expected == by["TCP boundary"].read == [650, 150, 400, -400, 500, 20]
        assert by["TCP load"].read == [pytest.approx(0.82), pytest.approx([0, 0, 48])]
        assert (by["collision sensitivity"].expected, by["collision sensitivity"].read) == (3, 3)
        assert by["fence mode"].read is True and by["reduced mode"].read is True
        assert by["reduced TCP speed"].read == pytest.approx(100.0)
        text = format_safety_readback(rows, "xArm6")
        lines = text.splitlines()
        assert len(lines) <= 24 and max(map(len, lines)) <= 120                             # one screen
        assert "all 7 settings as expected" in lines[0]
        offset_line = next(ln for ln in lines if ln.strip().startswith("TCP offset"))
        assert offset_line.count("[0, 0, 172] rpy [0, 0, 90]") == 2 and offset_line.endswith("ok")
    finally:
        robot.close()


def test_a_tampered_tcp_offset_refuses_to_move_naming_the_field_and_both_values(emu, profile):
    emu.tamper_safety(tcp_offset=[0, 0, 150, 0, 0, 90])         # the controller reports another TCP
    robot = XArm6Robot(emu.host, profile, command_port=emu.port, connect=False, readback_timeout_s=0.3)
    try:
        with pytest.raises(RobotFault) as ei:
            robot.connect()
        f = ei.value
        assert f.kind == "safety_mismatch"
        assert ("TCP offset: read [0, 0, 150] rpy [0, 0, 90], expected [0, 0, 172] rpy [0, 0, 90]" in str(f)), str(f)
        assert [r.setting for r in f.readback if not r.ok] == ["TCP offset"]
        assert "1 of 7 settings DIFFER" in format_safety_readback(f.readback)
        assert emu.motion_requests() == []
        with pytest.raises(RobotFault):                        # nothing moves: not connected, refused
            robot.jog(dz_mm=5)
        assert emu.motion_requests() == []
    finally:
        robot.close()


def test_observe_is_si(emu, robot):
    o = robot.observe()
    s = emu.snapshot()
    assert o.eef_pos_m == pytest.approx(np.array(s["pose_mm_deg"][:3]) / 1000, abs=1e-6)
    assert np.allclose(quat_to_mat(o.eef_quat_xyzw), DOWN, atol=1e-5)     # roll 180 -> quat (1, 0, 0, 0)
    assert abs(o.eef_quat_xyzw[0]) == pytest.approx(1.0, abs=1e-6)
    assert o.joints_rad.shape == (6,) and o.joints_rad == pytest.approx(s["joints_rad"], abs=1e-5)
    assert o.gripper_width_mm == pytest.approx(85.0) and o.gripper_fraction == pytest.approx(1.0)
    assert robot.observe(images=True).images == {}                       # no cameras configured


# ------------------------------------------------------------------------------------- motion
def test_scripted_pick_and_place(emu, robot, profile):
    tol = profile.tolerances.position_mm / 1000.0
    emu.set_gripper_object(30.0)
    plan = [("move", [0, 0, -25]), ("gripper", 0.0), ("move", [0, 0, 25]), ("move", [0, 40, 0]),
            ("gripper", 1.0)]
    for kind, arg in plan:
        if kind == "move":
            res, target = move_by(robot, arg)
            assert res.converged and not res.stopped, res
            o = robot.observe()
            assert np.linalg.norm(o.eef_pos_m - target) <= tol              # measured, via get_position
            assert np.linalg.norm(emu_pos_m(emu) - target) <= tol          # the controller agrees
            assert np.allclose(quat_to_mat(o.eef_quat_xyzw), DOWN, atol=1e-3)
        else:
            res = grip(robot, arg)
            assert res.converged, res
            w = robot.observe().gripper_width_mm
            if arg == 0.0:
                assert "holding at 30.0 mm" in res.note and w == pytest.approx(30.0, abs=0.2)
                emu.set_gripper_object(None)
            else:
                assert w == pytest.approx(85.0, abs=1.0)
    assert emu.snapshot()["error_history"] == []


def test_rotation_in_degrees_at_the_profile_speed(emu, robot):
    o = robot.observe()
    goal = axis_angle_to_mat([0, 0, 1], math.radians(10)) @ quat_to_mat(o.eef_quat_xyzw)
    t = time.monotonic()
    res = robot.execute(Motion("rotate", o.eef_pos_m, goal), threading.Event())
    assert res.converged and time.monotonic() - t >= 0.45                # 10 deg at 20 deg/s
    assert emu.snapshot()["pose_mm_deg"][5] == pytest.approx(10.0, abs=0.05)


def test_relative_and_absolute_helpers(emu, robot):
    assert robot.jog(dz_mm=-15).converged
    assert emu.snapshot()["pose_mm_deg"][2] == pytest.approx(285.0, abs=0.5)
    assert robot.move_to(320, 10, 280, 180, 0, 0).converged
    assert emu.snapshot()["pose_mm_deg"][:3] == pytest.approx([320, 10, 280], abs=0.5)
    assert robot.set_gripper(0.5).converged
    assert robot.observe().gripper_width_mm == pytest.approx(42.5, abs=1.0)


def test_emergency_stop_mid_move_stops_at_once(emu, robot):
    estop = threading.Event()
    threading.Timer(0.25, estop.set).start()
    res, _ = move_by(robot, [0, 0, -80], estop)
    assert res.stopped and not res.converged
    s = emu.snapshot()
    assert s["state"] == 4 and not s["moving"]
    z = s["pose_mm_deg"][2]
    assert 300 - 80 + 10 < z < 300 - 5                                    # stopped part-way
    time.sleep(0.2)
    assert emu.snapshot()["pose_mm_deg"][2] == pytest.approx(z, abs=1e-6)   # and stays there
    res, _ = move_by(robot, [0, 0, 10])                                   # re-armed, not latched
    assert res.converged


def test_stop_from_another_thread(emu, robot):
    threading.Timer(0.25, robot.stop).start()
    res, _ = move_by(robot, [80, 0, 0])
    assert res.stopped and emu.snapshot()["state"] == 4 and not emu.snapshot()["moving"]


def test_backend_refuses_a_target_outside_the_box_without_sending(emu, robot):
    n = len(emu.motion_requests())
    with pytest.raises(RobotFault) as ei:
        move_by(robot, [0, 0, 250])                                       # z 550 > 500
    assert ei.value.kind == "safety_fence" and "not sent" in str(ei.value)
    assert len(emu.motion_requests()) == n and robot.fault is None         # refused, nothing moved


# ------------------------------------------------------------------------------------- faults
def _inject_error(code):
    return lambda emu: emu.inject_error(code, at_mm=5)


@pytest.mark.parametrize("inject, kind, code", [
    (_inject_error(24), "speed", 24),
    (lambda emu: emu.inject_collision(at_mm=5), "collision", 31),
    (_inject_error(21), "kinematics", 21),
    (_inject_error(22), "self_collision", 22),
    (_inject_error(23), "joint_limit", 23),
    (_inject_error(35), "safety_fence", 35),
    (lambda emu: emu.inject_stall(at_mm=5), "stall", None),
], ids=["C24-speed", "C31-collision", "C21-kinematics", "C22-self-collision", "C23-joint-limit",
        "C35-fence", "stall"])
def test_injected_fault_mid_move_is_typed_and_latches(emu, robot, inject, kind, code):
    inject(emu)
    with pytest.raises(RobotFault) as ei:
        move_by(robot, [0, 50, 0])
    assert ei.value.kind == kind and ei.value.code == code, ei.value
    s = emu.snapshot()
    assert s["state"] == 4 and not s["moving"]                            # the arm ends stopped
    assert 4.0 <= s["pose_mm_deg"][1] < 45.0                              # part-way
    n = len(emu.motion_requests())
    with pytest.raises(RobotFault, match="clear_fault") as again:         # latched: nothing is sent
        move_by(robot, [0, 10, 0])
    assert again.value.kind == kind and len(emu.motion_requests()) == n
    emu.clear_faults()
    robot.clear_fault()
    assert robot.fault is None
    res, _ = move_by(robot, [0, 10, 0])
    assert res.converged


def test_gripper_communication_fault(emu, robot):
    threading.Timer(0.15, emu.inject_gripper_comm_fault).start()
    with pytest.raises(RobotFault) as ei:
        grip(robot, 0.0)
    assert ei.value.kind == "gripper_communication" and ei.value.code == 19
    assert emu.snapshot()["state"] == 4
    with pytest.raises(RobotFault, match="clear_fault"):
        grip(robot, 1.0)
    emu.clear_faults()
    robot.clear_fault()
    assert grip(robot, 1.0).converged


def test_gripper_reports_its_own_fault(emu, robot):
    emu.inject_gripper_error(9)
    with pytest.raises(RobotFault) as ei:
        grip(robot, 0.5)
    assert ei.value.kind == "gripper"
    assert emu.snapshot()["state"] == 4                                   # arm stopped too


def test_dropped_connection_mid_motion(emu, robot):
    emu.drop_connection(at_mm=5)
    with pytest.raises(RobotFault) as ei:
        move_by(robot, [0, -40, 0])
    assert ei.value.kind == "connection"
    t_drop = emu.dropped_at
    assert t_drop is not None
    # what the Controller does after a fault: stop, observe; then the next command
    robot.stop()
    with pytest.raises(RobotFault):
        robot.observe()
    with pytest.raises(RobotFault) as again:
        move_by(robot, [0, 10, 0])
    assert again.value.kind == "connection"
    time.sleep(0.3)
    assert emu.requests_since(t_drop) == [] and emu.connections_after_drop == 0   # nothing more sent


def test_a_controller_that_stops_answering_is_a_timeout_fault_and_the_arm_ends_stopped(emu, robot):
    """The link stays up but the controller's replies come later than the SDK waits (2 s): the
    backend raises kind 'timeout' (SDK code 3) instead of hanging, halts the arm and latches."""
    o = robot.observe()
    rot = quat_to_mat(o.eef_quat_xyzw)
    emu.delay_replies(2.5)
    t0 = time.monotonic()
    with pytest.raises(RobotFault) as ei:
        robot.execute(Motion("move", o.eef_pos_m + [0, 0.05, 0], rot, max_steps=200), threading.Event())
    f = ei.value
    assert f.kind == "timeout" and f.sdk_code == 3 and "no reply from the controller" in str(f), f
    assert time.monotonic() - t0 < 15                   # bounded: the SDK's timeout, not a hang
    assert robot.fault is f and robot.connected          # latched; the link itself is still up
    s = emu.snapshot()
    assert s["state"] == 4 and not s["moving"] and s["error"] == 0   # the backend's halt (set_state 4) arrived
    n = len(emu.motion_requests())
    with pytest.raises(RobotFault, match="clear_fault") as again:    # latched: nothing more is sent
        robot.execute(Motion("move", o.eef_pos_m, rot, max_steps=200), threading.Event())
    assert again.value.kind == "timeout" and len(emu.motion_requests()) == n
    emu.clear_faults()                                   # prompt replies again: a quick close()


@pytest.mark.parametrize("tamper, what", [
    ({"boundary": [700, 150, 400, -400, 500, 20]}, "TCP boundary"),
    ({"reduced_tcp_speed": 250.0}, "reduced TCP speed"),
    ({"fence": False}, "fence mode"),
    ({"collision_sensitivity": 1}, "collision sensitivity"),
    ({"tcp_offset": [0, 0, 0, 0, 0, 0]}, "TCP offset"),
])
def test_safety_readback_mismatch_refuses_to_run(emu, profile, tamper, what):
    emu.tamper_safety(**tamper)
    with pytest.raises(RobotFault) as ei:
        XArm6Robot(emu.host, profile, command_port=emu.port, readback_timeout_s=0.3)
    assert ei.value.kind == "safety_mismatch" and what in str(ei.value)
    assert emu.motion_requests() == []
    time.sleep(0.1)
    assert emu.snapshot()["state"] == 4                                   # left stopped


# ------------------------------------------------------------------------------------- Controller
def test_controller_rejects_a_fence_breach_before_the_sdk(emu, robot, profile):
    from motormind.controller import Controller
    c = Controller(robot, profile)
    batch = {"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1",
             "commands": [{"op": "move", "direction": "up", "distance_mm": 100},
                          {"op": "move", "direction": "up", "distance_mm": 100},
                          {"op": "move", "direction": "up", "distance_mm": 10}]}    # z 510 > 500
    rep = c.run(json.dumps(batch))
    assert rep.status == "rejected" and "z=510.0 > 500.0" in rep.results[2].reason
    assert emu.motion_requests() == []                                    # never reached the SDK
    ok = {"schema_version": 1, "batch_id": "b2", "subgoal_id": "s1",
          "commands": [{"op": "move", "direction": "down", "distance_mm": 20},
                       {"op": "gripper", "action": "close"}, {"op": "done"}]}
    rep = c.run(ok)
    assert rep.status == "done", rep.summary()
    assert rep.results[0].achieved["error_mm"] <= profile.tolerances.position_mm
    assert rep.results[0].achieved["translation_mm"][2] == pytest.approx(-20, abs=1.0)


def test_the_fence_and_the_box_are_about_the_fingertips_not_the_flange(fresh_emu, profile):
    """The same physical move - the flange from z 200 to 180 mm, tool down - twice. With the profile's
    TCP offset the Controller, the backend and the arm's own fence refuse it: the grip point would
    end 8 mm above the base plane, below the 20 mm floor. With the TCP at the flange (what a fresh
    controller keeps when the backend does not set the offset, as before) every check passes it."""
    emu = fresh_emu
    floor = profile.workspace_mm["z"][0]                                  # 20 mm
    offset_z = profile.safety.tcp_offset_mm[2]                            # 172 mm past the flange
    flange_target = np.array(emu.snapshot()["pose_mm_deg"][:3]) - [0.0, 0.0, 20.0]   # z 180
    tcp_target = flange_target - [0.0, 0.0, offset_z]                     # tool down: the TCP is below
    assert profile.in_workspace(flange_target) == []                      # the flange-based check passes it
    assert profile.in_workspace(tcp_target) == [f"z={tcp_target[2]:.1f} < {floor:.1f}"]

    # with the profile's TCP offset: the move is refused by each layer
    robot = XArm6Robot(emu.host, profile, command_port=emu.port)
    try:
        assert robot.observe().eef_pos_m[2] * 1000 == pytest.approx(28.0, abs=0.2)   # the TCP, not the flange
        from motormind.controller import Controller
        rep = Controller(robot, profile).run({"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1",
                                              "commands": [{"op": "move", "direction": "down", "distance_mm": 20}]})
        assert rep.status == "rejected" and "z=8.0 < 20.0" in rep.results[0].reason, rep.summary()
        with pytest.raises(RobotFault) as ei:                             # the backend's own pre-check
            move_by(robot, [0, 0, -20])
        assert ei.value.kind == "safety_fence" and "z=8.0 < 20.0" in str(ei.value) and "not sent" in str(ei.value)
        assert emu.motion_requests() == []                                # nothing reached the controller
        # the arm's own fence, sent past the stack straight through the SDK: C35, nothing moves
        assert robot.arm.set_position(z=-20, relative=True, speed=50, wait=True) != 0
        s = emu.snapshot()
        assert s["error"] == 35 and s["pose_mm_deg"][2] == pytest.approx(28.0, abs=0.2)
    finally:
        robot.close()

    # as before, by construction: the TCP at the flange, and the same move runs
    at_flange = profile_with(tcp_offset_mm=[0, 0, 0], tcp_offset_rpy_deg=[0, 0, 0])
    robot = XArm6Robot(emu.host, at_flange, command_port=emu.port)
    try:
        res, _ = move_by(robot, [0, 0, -20])
        assert res.converged, res
        z = emu.snapshot()["pose_mm_deg"][2]
        assert z == pytest.approx(flange_target[2], abs=0.5)
        assert z - offset_z < floor                                       # the grip point: 8 mm, into the floor
    finally:
        robot.close()


def test_controller_reports_a_fault(emu, robot, profile):
    from motormind.controller import Controller
    emu.inject_collision(at_mm=3)
    rep = Controller(robot, profile).run({"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1",
                                          "commands": [{"op": "move", "direction": "left", "distance_mm": 30},
                                                       {"op": "move", "direction": "right", "distance_mm": 30}]})
    assert rep.status == "fault" and rep.results[0].status == "fault"
    assert "collision" in rep.results[0].reason and "31" in rep.results[0].reason
    assert rep.results[1].status == "cancelled" and emu.snapshot()["state"] == 4


# ------------------------------------------------------------------------------------- cameras
def test_missing_camera_is_named(emu):
    from motormind.robots.cameras import CameraError, CameraSet
    with pytest.raises(CameraError, match="camera 'wrist'.*does not exist"):
        CameraSet({"wrist": "/dev/video-nope"})
    with pytest.raises(CameraError, match="camera 'front'.*device index 97"):
        CameraSet({"front": 97})


def test_file_camera_feeds_observe(emu, profile, tmp_path):
    cv2 = pytest.importorskip("cv2")
    path = str(tmp_path / "front.avi")
    w = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for i in range(3):
        frame = np.zeros((48, 64, 3), np.uint8)
        frame[:, :, 2] = 200                                              # red in BGR
        w.write(frame)
    w.release()
    r = XArm6Robot(emu.host, profile, command_port=emu.port, cameras={"front": {"source": path, "rotate": 180}})
    try:
        assert r.camera_names == ["front"]
        for _ in range(5):                                                # loops past the end
            img = r.observe(images=True).images["front"]
        assert img.shape == (48, 64, 3) and img.dtype == np.uint8
        assert img[..., 0].mean() > 150 and img[..., 2].mean() < 60       # RGB, not BGR
    finally:
        r.close()


def test_a_cell_trial_builds_its_openai_brain_the_registry_way():
    """`motormind trials xarm6 --brain openai` built its brain with a function that no longer
    existed (an ImportError at the first trial); it now builds it as every episode does."""
    from motormind.robots.fake import FakeRobot
    from motormind.evaluate.trials import trial_brain
    robot = FakeRobot()
    b = trial_brain("openai", "vllm-qwen2.5-vl", ["timeout_s=1"], None, robot, robot.profile, lambda *a, **k: None)
    try:
        assert b.name.startswith("openai") and b.privileged is False
    finally:
        b.close()


# ------------------------------------------------------------------------------------- depth
def _serve_png(data: bytes):
    """A local HTTP server whose every GET gives ``data`` as a PNG (a depth URL); (server, url)."""
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class H(BaseHTTPRequestHandler):
        def do_GET(self):                                                   # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "image/png")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, f"http://127.0.0.1:{srv.server_address[1]}/front.depth.png"


def test_a_depth_url_beside_the_colour_fills_observe_in_metres_upright_at_the_colour_size(emu, profile, tmp_path):
    """Issue 34 item 1: a camera's ``depth: URL`` (16-bit PNG, mm, 0 = no reading) is read beside its
    colour source; observe(images=True, depth=True) gives metres, NaN where 0, turned as the colour
    frame is (``rotate``) and scaled to its size; the calibration's depth flag follows the config."""
    cv2 = pytest.importorskip("cv2")
    from motormind.grounding.camera import encode_depth_png
    path = str(tmp_path / "front.avi")
    w = cv2.VideoWriter(path, cv2.VideoWriter_fourcc(*"MJPG"), 10, (64, 48))
    for _ in range(3):
        w.write(np.full((48, 64, 3), 90, np.uint8))
    w.release()
    depth = np.full((24, 32), 0.8, np.float32)                           # half the colour's size
    depth[0, 0] = np.nan                                                  # no reading (0 in the PNG)
    depth[:, 16:] = 1.25
    srv, url = _serve_png(encode_depth_png(depth))
    calib = tmp_path / "calib.json"
    entry = {"width": 64, "height": 48, "fovy_deg": 50, "frame": "base", "position_m": [1, 0, 0.5],
             "quat_xyzw": [0, 0, 0, 1], "depth": False, "no_depth_reason": "colour only"}
    calib.write_text(json.dumps({"cameras": {"front": entry}}))
    r = XArm6Robot(emu.host, profile, command_port=emu.port, calibration=str(calib),
                   cameras={"front": {"source": path, "rotate": 180, "depth": url}})
    try:
        assert r.cameras()["front"].depth is True                         # the config has depth
        o = r.observe(images=True, depth=True)
        d = o.depth["front"]
        assert d.shape == o.images["front"].shape[:2] == (48, 64) and d.dtype == np.float32
        # turned 180 degrees: the 1.25 m half is on the left, the hole at the bottom right
        assert np.allclose(d[:, :32], 1.25) and np.allclose(d[:-2, 32:], 0.8)
        assert np.isnan(d[-2:, -2:]).all() and np.isfinite(d).sum() == 48 * 64 - 4
        assert r.observe(images=True).depth == {}                         # not asked: not read
    finally:
        r.close()
        srv.shutdown()


def test_a_camera_without_depth_says_so_and_a_point_there_is_refused_with_the_reason(tmp_path):
    """A calibration that says depth: true for a camera configured without a depth source: the
    backend's calibration says it has none and why (the config), and pointing there is refused."""
    from motormind.grounding.pixels import PixelConvention
    from motormind.grounding.points import Frame, Point, resolve
    from motormind.robot import Observation
    from motormind.robots.cameras import CameraSet
    entry = {"width": 64, "height": 48, "fovy_deg": 50, "frame": "base", "position_m": [1, 0, 0.5],
             "quat_xyzw": [0, 0, 0, 1], "depth": True}
    calib = tmp_path / "calib.json"
    calib.write_text(json.dumps({"cameras": {"front": entry, "side": dict(entry, depth=False,
                                                                           no_depth_reason="a webcam")}}))
    cams = CameraSet({"front": "http://127.0.0.1:9/front.mjpg", "side": 0}, open=False)
    r = XArm6Robot("127.0.0.1", connect=False, cameras=cams, calibration=str(calib))
    cal = r.cameras()
    assert cal["front"].depth is False and "no depth source configured" in cal["front"].no_depth_reason
    assert cal["side"].depth is False and cal["side"].no_depth_reason == "a webcam"     # the file's reason kept
    obs = Observation(t=0.0, eef_pos_m=np.array([0.3, 0.0, 0.2]), eef_quat_xyzw=np.array([0, 0, 0, 1.0]),
                      gripper_width_mm=80.0, gripper_fraction=1.0, joints_rad=np.zeros(6),
                      images={"front": np.zeros((48, 64, 3), np.uint8)})
    out = resolve(Point("front", 30, 20, "cup"), Frame.of("b1 s1", obs, cal), PixelConvention("pixels", 64, 48))
    assert not out.ok and out.reason == f"camera front has no depth: {cal['front'].no_depth_reason}"


def test_depth_sources_are_checked_when_configured():
    from motormind.robots.cameras import REALSENSE, CameraConfig, RealSenseCamera
    from motormind.robots.xarm6 import XArm6Config
    with pytest.raises(ConfigError, match="depth: 'back' is not one of the cameras"):
        XArm6Config(ip="127.0.0.1", cameras=("front=0",), depth=("back=http://h/back.depth.png",))
    with pytest.raises(ConfigError, match=r"cameras.front.depth: must be the http\(s\) URL"):
        XArm6Config(ip="127.0.0.1", cameras=("front=0",), depth=("front=/tmp/d.png",))
    c = XArm6Config(ip="127.0.0.1", cameras=("front=http://h/f.mjpg", "wrist=pyrealsense2:0123"),
                    depth=("front=http://h/f.depth.png",))
    specs = c._camera_specs()
    assert specs["front"] == {"source": "http://h/f.mjpg", "depth": "http://h/f.depth.png"}
    rs = CameraConfig.parse("wrist", specs["wrist"])
    assert rs.kind == REALSENSE and rs.serial == "0123" and rs.has_depth
    assert not CameraConfig.parse("wrist", {"source": REALSENSE, "depth": False}).has_depth
    with pytest.raises(ConfigError, match="cameras.front.serial: only a pyrealsense2 source"):
        CameraConfig.parse("front", {"source": 0, "serial": "1"})
    try:
        import pyrealsense2  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="needs the Python package pyrealsense2.*pip install pyrealsense2"):
            RealSenseCamera(rs).open()
