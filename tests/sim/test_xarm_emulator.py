"""The xArm6 controller emulator, driven through the UNMODIFIED xarm-python-sdk (no MotorMind code
in between): framing, the state machine, motion at the commanded speed, kinematic and safety
errors, the gripper tunnel, and the SDK's socket-timeout trap."""
from __future__ import annotations

import contextlib
import socket
import time

import pytest

pytest.importorskip("xarm")

from motormind.sim.xarm_emulator import XArmEmulator, main, serve  # noqa: E402
from motormind.sim.xarm_emulator import free_loopback_host as free_loopback  # noqa: E402

pytestmark = pytest.mark.xarm


@pytest.fixture
def emu():
    e = XArmEmulator(free_loopback(), 0, report_hz=20).start()
    yield e
    e.stop()


@contextlib.contextmanager
def sdk_arm(emu, **kw):
    """A raw XArmAPI connected to ``emu`` (its command port patched in for the connect only)."""
    from xarm.core.config.x_config import XCONF
    from xarm.wrapper import XArmAPI
    saved = XCONF.SocketConf.TCP_CONTROL_PORT
    XCONF.SocketConf.TCP_CONTROL_PORT = emu.port
    try:
        arm = XArmAPI(emu.host, forbid_uds=True, **kw)
    finally:
        XCONF.SocketConf.TCP_CONTROL_PORT = saved
    try:
        assert arm.connected
        yield arm
    finally:
        arm.disconnect()


def ready(arm):
    assert arm.clean_error() == 0
    assert arm.motion_enable(True) == 0
    assert arm.set_mode(0) == 0
    assert arm.set_state(0) == 0
    assert arm.get_state() == (0, 2)


def test_connect_enable_and_move_through_the_sdk(emu):
    with sdk_arm(emu) as arm:
        assert arm.version_number == (2, 5, 0) and arm.axis == 6 and arm.device_type == 6
        assert emu.snapshot()["state"] == 4 and not emu.snapshot()["enabled"]   # powered up, not enabled
        ready(arm)
        x0, y0, z0 = arm.get_position()[1][:3]
        t = time.monotonic()
        assert arm.set_position(x=40, relative=True, speed=100, wait=True) == 0      # MOVE_RELATIVE (83)
        dt = time.monotonic() - t
        assert 0.38 <= dt < 1.5, dt                                                  # 40 mm at 100 mm/s
        code, pose = arm.get_position()
        assert code == 0 and pose[0] == pytest.approx(x0 + 40, abs=0.1) and pose[1] == pytest.approx(y0, abs=0.1)
        assert arm.set_position(320, 50, 250, 180, 0, 30, speed=200, wait=True) == 0   # MOVE_LINE (21)
        code, pose = arm.get_position()
        assert pose[:3] == pytest.approx([320, 50, 250], abs=0.1)
        assert abs(abs(pose[3]) - 180) < 0.01 and pose[5] == pytest.approx(30, abs=0.01)
        # joints follow the kinematics: FK of the reported joints is the reported pose
        from motormind.sim.xarm_emulator import kinematics as kin
        q = arm.get_servo_angle(is_radian=True)[1][:6]
        assert kin.fk(q)[0] == pytest.approx([320, 50, 250], abs=0.1)
        # non-blocking moves queue on the controller
        for dz in (10, 10, 10):
            assert arm.set_position(z=dz, relative=True, speed=200, wait=False) == 0
        assert arm.get_cmdnum()[1] >= 2 and arm.get_state()[1] == 1
        assert emu.wait_idle(5)
        assert arm.get_position()[1][2] == pytest.approx(280, abs=0.1)


def test_fence_rejects_a_move_sent_directly(emu):
    with sdk_arm(emu) as arm:
        ready(arm)
        assert arm.set_reduced_tcp_boundary([650, 150, 400, -400, 500, 20]) == 0
        assert arm.set_fence_mode(True)[0] == 0
        before = arm.get_position()[1]
        rc = arm.set_position(700, 0, 300, 180, 0, 0, speed=100, wait=True)
        assert rc != 0
        assert arm.get_err_warn_code()[1][0] == 35 and arm.get_state()[1] == 4
        assert arm.get_position()[1][:3] == pytest.approx(before[:3], abs=0.01)    # nothing moved
        # clearing the error and re-arming works; a move inside the fence runs
        arm.clean_error()
        arm.get_err_warn_code()
        assert arm.set_state(0) == 0
        assert arm.set_position(z=-20, relative=True, speed=200, wait=True) == 0


def test_kinematic_and_joint_limit_errors(emu):
    with sdk_arm(emu, check_joint_limit=False) as arm:
        ready(arm)
        arm.set_position(1500, 0, 300, 180, 0, 0, speed=200, wait=True)           # beyond reach
        time.sleep(0.05)
        assert arm.get_err_warn_code()[1][0] == 21 and arm.get_state()[1] == 4
        arm.clean_error()
        arm.get_err_warn_code()
        arm.set_state(0)
        arm.set_servo_angle(angle=[0, 125, -30, 0, 60, 0], speed=20, wait=True)      # J2 > 120 deg
        time.sleep(0.05)
        assert arm.get_err_warn_code()[1][0] == 23
        assert emu.snapshot()["error_history"] == [21, 23]


def test_reduced_mode_caps_the_tcp_speed(emu):
    with sdk_arm(emu) as arm:
        ready(arm)
        assert arm.set_reduced_max_tcp_speed(50) == 0 and arm.set_reduced_mode(True) == 0
        t = time.monotonic()
        assert arm.set_position(y=30, relative=True, speed=500, wait=True) == 0
        assert time.monotonic() - t >= 0.55                                          # 30 mm at 50, not 500
        code, st = arm.get_reduced_states()
        assert code == 0 and st[0] == 1 and st[2] == pytest.approx(50)


def test_gripper_over_the_rs485_tunnel(emu):
    with sdk_arm(emu) as arm:
        ready(arm)
        assert arm.set_gripper_mode(0) == 0 and arm.set_gripper_enable(True) == 0
        assert arm.set_gripper_speed(5000) == 0
        assert arm.set_gripper_position(300, wait=True) == 0
        assert arm.get_gripper_position() == (0, 300)
        emu.set_gripper_object(20.0)                                                 # 200 pulses
        arm.set_gripper_position(0, wait=True)
        assert arm.get_gripper_position() == (0, 200)
        assert emu.snapshot()["gripper_status"] == 2                                # gripping
        emu.inject_gripper_error(9)
        assert arm.set_gripper_position(500, wait=False, wait_motion=False) == 102   # END_EFFECTOR_HAS_FAULT


def test_idle_sockets_survive_the_sdks_global_timeout(emu):
    """The SDK sets socket.setdefaulttimeout(1) process-wide; the emulator's own sockets must not
    inherit it (an idle command connection would die after 1 s)."""
    with sdk_arm(emu) as arm:
        assert socket.getdefaulttimeout() == 1
        time.sleep(1.6)
        assert arm.connected and arm.get_state()[0] == 0


def test_serve_and_main(emu):
    other = serve(emu.host, 0, block=False, report_port=30001, report_type="normal")
    try:
        assert other.port and other.report_port == 30001
    finally:
        other.stop()
    assert main(["--host", emu.host, "--port", str(emu.port)]) == 2        # port taken: clean error


def test_the_tcp_offset_register_moves_the_reported_pose_and_the_fence_to_the_tcp(emu):
    """Register 35 (set_tcp_offset) stores the offset; the report stream carries it back (the SDK's
    ``tcp_offset``: SDK 1.18.4 has no register that reads it); the joints stay where they are, and
    the pose, the moves and the fence are the TCP's from then on."""
    with sdk_arm(emu) as arm:
        ready(arm)
        q0 = arm.get_servo_angle(is_radian=True)[1][:6]
        flange = arm.get_position()[1]
        assert arm.tcp_offset == [0] * 6
        assert arm.set_tcp_offset([0, 0, 172, 0, 0, 90], wait=False) == 0          # mm and degrees
        assert emu.snapshot()["tcp_offset_mm_deg"] == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-4)
        time.sleep(0.15)                                                            # one report at 20 Hz
        assert arm.tcp_offset == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-3)
        assert arm.get_servo_angle(is_radian=True)[1][:6] == pytest.approx(q0, abs=1e-6)
        tcp = arm.get_position()[1]
        assert tcp[:3] == pytest.approx([flange[0], flange[1], flange[2] - 172], abs=1e-3)   # tool down
        # the fence is about the TCP: a floor 20 mm below it refuses a 30 mm descent that leaves the
        # flange ~140 mm above the floor
        assert arm.set_reduced_tcp_boundary([650, 150, 400, -400, 500, int(tcp[2]) - 20]) == 0
        assert arm.set_fence_mode(True)[0] == 0
        assert arm.set_position(z=-30, relative=True, speed=200, wait=True) != 0
        assert arm.get_err_warn_code()[1][0] == 35
        assert arm.get_position()[1][2] == pytest.approx(tcp[2], abs=1e-3)           # nothing moved
        # tampering changes what the report says, not what the controller stores
        emu.tamper_safety(tcp_offset=[0, 0, 100, 0, 0, 0])
        time.sleep(0.15)
        assert arm.tcp_offset == pytest.approx([0, 0, 100, 0, 0, 0], abs=1e-3)
        assert emu.snapshot()["tcp_offset_mm_deg"] == pytest.approx([0, 0, 172, 0, 0, 90], abs=1e-4)


def test_the_rehearsal_cell_stores_the_profiles_tcp_offset_at_its_grip_point():
    """One TCP offset: the xarm6 profile's, which the backend writes; the rehearsal cell's controller
    powers up with it, and it is the cell gripper's grip point, 10 mm above the fingertips."""
    from motormind.profile import load_profile
    from motormind.sim.xarm_cell import model
    from motormind.sim.xarm_cell.config import load_cell
    offset = load_profile("xarm6").safety.tcp_offset
    assert load_cell("placement").tcp_offset == offset
    assert offset[2] == pytest.approx(model.TCP_Z_M * 1000)
    assert offset[2] == pytest.approx((model.PALM_LEN_M + model.FINGER_LEN_M) * 1000 - 10)
