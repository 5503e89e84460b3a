"""The UFACTORY xArm6 backend, through the unmodified ``xarm-python-sdk`` (pinned 1.18.4).

    robot = XArm6Robot("192.168.1.222")                       # profile configs/robots/xarm6.yaml
    robot = XArm6Robot("127.0.0.1", command_port=5020)        # the emulator on a non-root port

What it does
* Connects by IPv4 literal only (the SDK opens anything else as a *serial port*), with
  ``forbid_uds=True`` (a local emulator's Unix socket must never capture a real arm's traffic), and
  the rich report stream on 30002. ``command_port`` other than 502 patches
  ``XCONF.SocketConf.TCP_CONTROL_PORT`` for the duration of the connect (the report port cannot move).
* Bring-up: clear errors and warnings, enable the motors, mode 0 (position), state 0 (ready); then
  writes the arm's own safety layer from the profile - the TCP boundary (fence) from
  ``workspace_mm``, reduced mode with its TCP speed cap, collision sensitivity, TCP load - and
  reads every value back. A read-back that differs refuses to run (``kind='safety_mismatch'``).
* ``execute(motion, estop)``: moves and rotations are sent as ONE absolute Cartesian target (mm,
  degrees; xArm roll/pitch/yaw) at the profile's speeds, non-blocking, and then servoed closed-loop:
  every control period it reads the controller's state, error code and measured pose
  (``get_position``, never the report cache) until the pose is within the profile's tolerance.
  The gripper likewise (position in pulses, 10 per mm). ``estop`` is checked every period.
* Faults - a nonzero SDK code, a controller error code, a lost link, a stall, an overrun - become
  ``XArmFault`` (a ``RobotFault``) with ``kind`` and ``code`` (robots/xarm_errors.py). After a fault
  the arm is stopped and the backend is latched: every ``execute`` raises until the operator calls
  ``clear_fault()``. After a lost link nothing more is sent to the controller.
* ``observe()`` returns SI: metres, quaternion xyzw (from the controller's roll/pitch/yaw), joints
  in radians, gripper width mm and fraction, and camera images on request.

Nothing here imports ``xarm`` at module level; the SDK is imported on the first connect.
"""
from __future__ import annotations

import ipaddress
import logging
import math
import os
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from motormind.errors import ConfigError, RobotFault
from motormind.geometry import angle_between, mat_to_quat, mat_to_rpy, rpy_to_mat
from motormind.profile import RobotProfile, load_profile
from motormind.robot import Motion, MotionResult, Observation, Robot

from .cameras import CameraConfig, parse_camera_specs
from .xarm_errors import XArmFault, controller_fault, sdk_fault

log = logging.getLogger("motormind.robots.xarm6")

SDK_VERSION = "1.18.4"
_CONNECT_LOCK = threading.Lock()      # the control-port patch is process-wide: one connect at a time


def _import_sdk():
    """Import the SDK lazily. Its log module creates ~/.UFACTORY at import; if $HOME is not
    writable, retry with a temporary HOME for the import only."""
    try:
        from xarm.core.config.x_config import XCONF
        from xarm.wrapper import XArmAPI
    except ImportError as e:
        raise ConfigError(f"the xArm backend needs xarm-python-sdk ({e}); "
                          f"install it with: pip install xarm-python-sdk=={SDK_VERSION}") from e
    except OSError:
        old = os.environ.get("HOME")
        os.environ["HOME"] = tempfile.mkdtemp(prefix="motormind-xarm-home-")
        try:
            from xarm.core.config.x_config import XCONF
            from xarm.wrapper import XArmAPI
        finally:
            if old is None:
                os.environ.pop("HOME", None)
            else:
                os.environ["HOME"] = old
    return XArmAPI, XCONF


def check_ipv4(ip: str) -> str:
    """Return ``ip`` if it is an IPv4 literal, else raise ConfigError explaining why."""
    try:
        return str(ipaddress.IPv4Address(str(ip).strip()))
    except ValueError:
        raise ConfigError(
            f"xArm address {ip!r} is not an IPv4 literal. The SDK treats anything else (a hostname, "
            f"'localhost', a docker service name) as a serial device; resolve it first, e.g. "
            f"socket.gethostbyname({str(ip)!r}), and pass the address.") from None


class XArm6Robot(Robot):
    """The physical xArm6 (or its emulator) behind the Robot interface.

    Args:
        ip: controller address, IPv4 literal.
        profile: RobotProfile or profile name (default ``xarm6``).
        command_port: the controller's command port (502; the emulator may serve another).
        cameras: ``{name: source}`` or a list of camera configs (robots/cameras.py), or a CameraSet.
        connect: connect and bring up now (default). Otherwise call ``connect()``.
        gripper: drive the xArm Gripper (RS485 tunnel); False for an arm without one.
        gripper_speed: gripper speed in r/min (the SDK's unit).
        gripper_pulses_per_mm: gripper position units per mm of finger gap (850 = 85 mm).
        tcp_acc_mm_s2: Cartesian acceleration sent with each move.
        stall_timeout_s: a move whose measured pose makes no progress for this long while the
            controller says "moving" is stopped and raises ``kind='stall'``.
        readback_timeout_s: how long to wait for the report stream to show the written settings.
        show_readback: print the safety read-back (one screen: every setting, expected and read)
            to stderr on connect; it is logged either way and kept in ``safety_readback``.
    """

    def __init__(self, ip: str, profile: RobotProfile | str = "xarm6", *, command_port: int = 502,
                 cameras=None, connect: bool = True, gripper: bool = True, gripper_speed: int = 5000,
                 gripper_pulses_per_mm: float = 10.0, tcp_acc_mm_s2: float = 1000.0,
                 stall_timeout_s: float = 1.0, readback_timeout_s: float = 2.0, show_readback: bool = True,
                 calibration: str | None = None, table_z_mm: float | None = None):
        self.ip = check_ipv4(ip)
        self.profile = profile if isinstance(profile, RobotProfile) else load_profile(profile)
        self.command_port = int(command_port)
        if not 0 < self.command_port < 65536 or self.command_port in (30000, 30001, 30002, 30003, 30004):
            raise ConfigError(f"command_port {command_port}: must be a TCP port other than the report "
                              "ports 30000-30003 (and 30001, whose +1 the SDK would mistake for a command socket)")
        self.use_gripper = bool(gripper)
        self.gripper_speed = int(gripper_speed)
        self.pulses_per_mm = float(gripper_pulses_per_mm)
        self.tcp_acc = float(tcp_acc_mm_s2)
        self.stall_timeout_s = float(stall_timeout_s)
        self.readback_timeout_s = float(readback_timeout_s)
        self.show_readback = bool(show_readback)
        self.safety_readback: list[SafetyReading] = []     # the last read-back (verify_safety)
        self._cameras_cfg = cameras
        self.camera_set = None             # the CameraSet (robots/cameras.py)
        # the cameras' calibration (motormind/grounding/camera.py): a file or URL; a wrist camera
        # calibrated to the flange is moved to the TCP frame with the profile's TCP offset
        self.calibrations: dict = {}
        if calibration:
            from motormind.grounding.camera import load_calibrations
            tcp = self.profile.safety.tcp_offset if self.profile.safety is not None else None
            self.calibrations = load_calibrations(calibration, tcp_offset=tcp)
        if table_z_mm is not None and not (isinstance(table_z_mm, (int, float)) and math.isfinite(table_z_mm)):
            raise ConfigError(f"table_z_mm: must be a finite number of mm (the table's surface, base frame), "
                              f"got {table_z_mm!r}")
        self.table_z_mm = None if table_z_mm is None else float(table_z_mm)   # scene_facts (measured once)
        self._arm = None
        self._fault: XArmFault | None = None
        self._link_lost = False
        self._stop_evt = threading.Event()
        self._last_gripper_mm = float(self.profile.gripper_max_width_mm)
        self._safety_expected: dict = {}
        if cameras is not None:
            from .cameras import CameraSet
            self.camera_set = cameras if isinstance(cameras, CameraSet) else CameraSet(cameras)
        if connect:
            try:
                self.connect()
            except BaseException:
                self.close()
                raise

    # ============================================================================ connection
    @property
    def arm(self):
        """The underlying ``xarm.wrapper.XArmAPI`` (for diagnostics; do not move the arm with it)."""
        return self._arm

    @property
    def connected(self) -> bool:
        return self._arm is not None and bool(self._arm.connected) and not self._link_lost

    @property
    def fault(self) -> XArmFault | None:
        """The latched fault, or None."""
        return self._fault

    @property
    def camera_names(self) -> list[str]:
        return self.camera_set.names if self.camera_set is not None else []

    # the xArm Gripper's fingers slide along the flange's y, which the profile's TCP frame (turned
    # 90 deg about the tool axis) calls x
    closing_axis_eef = (1.0, 0.0, 0.0)

    def cameras(self) -> dict:
        """The calibration file's cameras (``calibration=``); none without one. The depth flag
        follows the camera config: true for a camera with a depth source (``depth: URL`` or a
        pyrealsense2 source), false otherwise, with the file's reason or one naming the config."""
        depth = set(self.camera_set.depth_names) if self.camera_set is not None else set()
        out = {}
        for name, cal in self.calibrations.items():
            if name in depth:
                out[name] = cal.with_depth(True)
            elif cal.depth:
                out[name] = cal.with_depth(False, f"camera {name!r} has no depth source configured (robot cameras: "
                                                  f"a depth URL beside its colour source, or a pyrealsense2 source)")
            else:
                out[name] = cal
        return out

    def scene_facts(self) -> dict:
        """The table's surface height as configured (``table_z_mm``); nothing when it is not."""
        return {} if self.table_z_mm is None else {"table_z_mm": self.table_z_mm, "surface": "table"}

    def connect(self) -> list["SafetyReading"]:
        """Connect, bring the arm up, write and verify its safety settings; return the safety
        read-back (``safety_readback``). Raises XArmFault."""
        XArmAPI, XCONF = _import_sdk()
        if self._arm is not None:
            self._disconnect_quietly()
        self._link_lost = False
        with _CONNECT_LOCK:
            saved = XCONF.SocketConf.TCP_CONTROL_PORT
            XCONF.SocketConf.TCP_CONTROL_PORT = self.command_port
            try:
                arm = XArmAPI(self.ip, is_radian=False, do_not_open=True, forbid_uds=True,
                              report_type="rich", enable_report=True)
                arm.connect()
            except Exception as e:  # noqa: BLE001 - the SDK raises bare Exception
                raise XArmFault(f"cannot connect to the xArm controller at {self.ip}:{self.command_port}: {e}",
                                kind="connection", where="connect") from e
            finally:
                XCONF.SocketConf.TCP_CONTROL_PORT = saved
        self._arm = arm
        try:
            self._bring_up()
        except BaseException:
            self._halt_quietly()
            self._disconnect_quietly()
            raise
        self._fault = None
        log.info("xArm6 at %s ready (firmware %s)", self.ip, arm.version)
        return self.safety_readback

    def _bring_up(self) -> None:
        arm = self._arm
        deadline = time.monotonic() + 3.0
        while arm.count == -1 and time.monotonic() < deadline:   # the first rich report sets count
            if not arm.connected:
                break
            time.sleep(0.02)
        if not arm.connected:
            raise XArmFault(f"the xArm controller at {self.ip} closed the connection during bring-up",
                            kind="connection", where="connect")
        if arm.count == -1:
            raise XArmFault(f"no report stream from {self.ip}:30002 (the SDK cannot wait for motions "
                            "without it)", kind="connection", where="connect")
        if arm.axis != 6:
            raise XArmFault(f"the controller at {self.ip} reports a {arm.axis}-axis arm, not an xArm6 "
                            f"(version {arm.version!r})", kind="config", where="connect")
        self._rc(arm.clean_error(), "clean_error")
        self._rc(arm.clean_warn(), "clean_warn")
        self._rc(arm.motion_enable(enable=True), "motion_enable")
        self._rc(arm.set_mode(0), "set_mode(0)")
        self._rc(arm.set_state(0), "set_state(0)")
        self._check_error("bring-up")
        self._apply_safety()
        if self.use_gripper:
            self._gripper_up()
        self._rc(arm.set_state(0), "set_state(0)")
        self._check_error("bring-up")
        code, state = arm.get_state()
        self._rc(code, "get_state")
        if state not in (0, 1, 2):
            raise XArmFault(f"the arm is not ready after bring-up (state {state})", kind="not_ready",
                            where="connect")

    def _gripper_up(self) -> None:
        arm = self._arm
        self._rc(arm.set_gripper_mode(0), "set_gripper_mode(0)", gripper=True)
        self._rc(arm.set_gripper_enable(True), "set_gripper_enable", gripper=True)
        self._rc(arm.set_gripper_speed(self.gripper_speed), "set_gripper_speed", gripper=True)

    # ============================================================================ safety layer
    def safety_targets(self) -> dict:
        """What the arm's own safety layer is set to, from the profile (mm, mm/s, kg, degrees): its
        workspace box and its ``safety`` block (checked when the profile loaded: motormind/profile.py).
        ``tcp_offset`` is x, y, z (mm), roll, pitch, yaw (deg): the point the fence, the box and every
        reported pose are about."""
        ws = self.profile.workspace_mm
        s = self.profile.safety
        if s is None:
            raise ConfigError(f"profile {self.profile.name}: the xArm6 needs a safety block (the arm's own "
                              "safety layer is set from it and read back on connect)")
        out = {
            "tcp_offset": [float(v) for v in s.tcp_offset],
            # x max, x min, y max, y min, z max, z min: rounded inwards to whole mm
            "boundary": [math.floor(ws["x"][1]), math.ceil(ws["x"][0]), math.floor(ws["y"][1]),
                         math.ceil(ws["y"][0]), math.floor(ws["z"][1]), math.ceil(ws["z"][0])],
            "fence": s.fence,
            "reduced_mode": s.reduced_mode,
        }
        if s.reduced_tcp_speed_mm_s is not None:
            out["reduced_tcp_speed"] = float(s.reduced_tcp_speed_mm_s)
        if s.collision_sensitivity is not None:
            out["collision_sensitivity"] = int(s.collision_sensitivity)
        if s.tcp_load_kg is not None:
            out["tcp_load"] = [float(s.tcp_load_kg), [float(c) for c in s.tcp_load_com_mm]]
        return out

    def _apply_safety(self) -> None:
        arm = self._arm
        want = self.safety_targets()
        self._safety_expected = want
        # the TCP first: the boundary written next is about it. wait=False: nothing is queued at
        # bring-up (set_mode just cleared the queue), and the SDK's wait would add a 0.5 s sleep
        self._rc(arm.set_tcp_offset(want["tcp_offset"], is_radian=False, wait=False), "set_tcp_offset")
        if "reduced_tcp_speed" in want:
            self._rc(arm.set_reduced_max_tcp_speed(want["reduced_tcp_speed"]), "set_reduced_max_tcp_speed")
        self._rc(arm.set_reduced_tcp_boundary(want["boundary"]), "set_reduced_tcp_boundary")
        ret = arm.set_fence_mode(want["fence"])             # SDK 1.18.4 returns a list here
        self._rc(ret[0] if isinstance(ret, (list, tuple)) else ret, "set_fence_mode")
        self._rc(arm.set_reduced_mode(want["reduced_mode"]), "set_reduced_mode")
        if "collision_sensitivity" in want:
            self._rc(arm.set_collision_sensitivity(want["collision_sensitivity"]), "set_collision_sensitivity")
        if "tcp_load" in want:
            self._rc(arm.set_state(0), "set_state(0)")
            self._rc(arm.set_tcp_load(want["tcp_load"][0], want["tcp_load"][1]), "set_tcp_load")
        self.verify_safety()

    def read_safety(self) -> dict:
        """Read the arm's safety settings back: register 53 (boundary, reduced mode and its speed
        cap, fence) and the report stream (collision sensitivity, TCP load, TCP offset: SDK 1.18.4
        has no register that reads the TCP offset; the report carries it at byte 91)."""
        arm = self._arm
        code, rs = arm.get_reduced_states(is_radian=True)
        self._rc(code, "get_reduced_states")
        load = arm.tcp_load
        return {"reduced_mode": bool(rs[0]), "boundary": [int(v) for v in rs[1]],
                "reduced_tcp_speed": float(rs[2]), "fence": bool(rs[5]) if len(rs) > 5 else None,
                "collision_sensitivity": arm.collision_sensitivity,
                "tcp_load": [float(load[0]), [float(v) for v in load[1]]],
                "tcp_offset": [float(v) for v in arm.tcp_offset]}          # mm and degrees (is_radian=False)

    def verify_safety(self) -> list["SafetyReading"]:
        """Read back and compare with the profile. Keeps the read-back in ``safety_readback``, logs
        it as one screen (and prints it to stderr with ``show_readback``), and returns it; raises
        ``kind='safety_mismatch'`` naming each differing setting with both values. The
        report-cached values (sensitivity, load, TCP offset) get ``readback_timeout_s`` to catch up."""
        want = self._safety_expected or self.safety_targets()
        deadline = time.monotonic() + self.readback_timeout_s
        while True:
            rows = compare_safety(want, self.read_safety())
            bad = [r for r in rows if not r.ok]
            # register 53 answers fresh; only report-cached values are worth waiting for
            if not bad or not all(r.cached for r in bad) or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        self.safety_readback = rows
        text = format_safety_readback(rows, f"xArm6 {self.ip}, profile {self.profile.name!r}")
        (log.error if bad else log.info)("%s", text)
        if self.show_readback:
            print(text, file=sys.stderr, flush=True)
        if bad:
            raise XArmFault("the arm's safety settings read back differently from profile "
                            f"{self.profile.name!r}; refusing to run: " + "; ".join(r.mismatch() for r in bad),
                            kind="safety_mismatch", where="safety read-back", readback=rows)
        return rows

    # ============================================================================ helpers
    def _rc(self, rc, where: str, gripper: bool = False) -> None:
        """Raise the typed fault for a nonzero SDK return code."""
        if isinstance(rc, (list, tuple)):
            rc = rc[0]
        if rc == 0:
            return
        raise self._fault_for(int(rc), where, gripper)

    def _fault_for(self, rc: int, where: str, gripper: bool = False) -> XArmFault:
        arm = self._arm
        if arm is None or not arm.connected or rc == -1:
            self._link_lost = True
            return XArmFault(f"lost the connection to the xArm controller at {self.ip} (SDK code {rc}, "
                             f"during {where})", kind="connection", sdk_code=rc, where=where)
        if rc == 3:                               # a reply timeout: a dead link or a hung controller
            t_end = time.monotonic() + 1.0
            while arm.connected and time.monotonic() < t_end:
                time.sleep(0.05)
            if not arm.connected:
                self._link_lost = True
                return XArmFault(f"lost the connection to the xArm controller at {self.ip} (during {where})",
                                 kind="connection", sdk_code=rc, where=where)
            return sdk_fault(rc, where)
        err = 0
        try:
            code, ew = arm.get_err_warn_code()
            if code == 0:
                err = int(ew[0])
        except Exception:  # noqa: BLE001
            pass
        gerr = int(getattr(arm, "gripper_error_code", 0) or 0) if gripper or rc == 102 else 0
        return sdk_fault(rc, where, err=err, gripper_err=gerr)

    def _check_error(self, where: str) -> None:
        code, ew = self._arm.get_err_warn_code()
        self._rc(code, "get_err_warn_code")
        if ew[0]:
            raise controller_fault(int(ew[0]), where)

    def _poll(self, where: str):
        """One fresh look at the controller: (state, pose [mm, deg]). Raises on any problem."""
        arm = self._arm
        if arm is None or not arm.connected:
            self._link_lost = True
            raise XArmFault(f"lost the connection to the xArm controller at {self.ip} (during {where})",
                            kind="connection", where=where)
        code, ew = arm.get_err_warn_code()
        self._rc(code, where)
        if ew[0]:
            raise controller_fault(int(ew[0]), where)
        code, state = arm.get_state()
        self._rc(code, where)
        code, pose = arm.get_position(is_radian=False)
        self._rc(code, where)
        return int(state), [float(v) for v in pose]

    def _halt_quietly(self) -> None:
        """Stop the arm (state 4) if the link is up; never raises, never sends on a dead link."""
        arm = self._arm
        if arm is None or self._link_lost or not arm.connected:
            return
        try:
            arm.set_state(4)
        except Exception:  # noqa: BLE001
            pass

    def _disconnect_quietly(self) -> None:
        arm, self._arm = self._arm, None
        if arm is None:
            return

        def _disconnect():
            try:
                arm.disconnect()     # closes both sockets at once, then joins the SDK's threads
            except Exception:  # noqa: BLE001
                pass
        # the SDK's thread joins take ~1 s; the sockets are closed within the first microseconds,
        # so do not make every close() wait for its housekeeping
        t = threading.Thread(target=_disconnect, daemon=True, name="xarm-disconnect")
        t.start()
        t.join(0.05)

    def _latch(self, fault: XArmFault) -> XArmFault:
        if fault.kind == "connection":
            self._link_lost = True
            self._disconnect_quietly()        # sends nothing: just closes the sockets
        else:
            self._halt_quietly()
        if self._fault is None:
            self._fault = fault
            log.error("xArm6 fault latched: %s", fault)
        return fault

    def _ensure_usable(self, where: str) -> None:
        if self._fault is not None:
            f = self._fault
            raise XArmFault(f"the xArm6 is stopped after a fault ({f.kind}: {f}); call clear_fault() "
                            "once the cause is fixed", code=f.code, kind=f.kind, sdk_code=f.sdk_code,
                            where=where)
        if self._arm is None or self._link_lost or not self._arm.connected:
            raise self._latch(XArmFault(f"not connected to the xArm controller at {self.ip}",
                                        kind="connection", where=where))

    def _arm_for_motion(self, where: str) -> None:
        """Re-arm after a plain stop (state 4, no error): set_state(0)."""
        state, _ = self._poll(where)
        if state in (4, 5):
            self._rc(self._arm.set_state(0), "set_state(0)")
            state, _ = self._poll(where)
            if state in (4, 5):
                raise XArmFault(f"the controller refuses to get ready (state {state}); check the "
                                "emergency stop and the enable switch", kind="not_ready", where=where)
        elif state == 3:
            raise XArmFault("the controller is paused (state 3, e.g. from UFACTORY Studio)",
                            kind="not_ready", where=where)

    # ============================================================================ Robot interface
    def observe(self, images: bool = False, depth: bool = False) -> Observation:
        """With ``images``, each camera's newest frame; with ``depth`` too, the depth image of each
        camera that has a depth source (metres, NaN where no reading, the colour image's size)."""
        self._ensure_link("observe")
        arm = self._arm
        try:
            code, pose = arm.get_position(is_radian=False)
            self._rc(code, "observe: get_position")
            code, angles = arm.get_servo_angle(is_radian=True)
            self._rc(code, "observe: get_servo_angle")
        except XArmFault as f:
            if f.kind == "connection":
                self._latch(f)
            raise
        if self.use_gripper and self._fault is None:
            try:
                code, gp = arm.get_gripper_position()
                if code == 0 and gp is not None:
                    self._last_gripper_mm = float(gp) / self.pulses_per_mm
            except Exception:  # noqa: BLE001 - keep the last known width
                pass
        prof = self.profile
        rot = rpy_to_mat(*(math.radians(v) for v in pose[3:6]))
        span = max(1e-9, prof.gripper_max_width_mm - prof.gripper_min_width_mm)
        w = self._last_gripper_mm
        imgs, depths = self.camera_set.read_frames(depth) if (images and self.camera_set is not None) else ({}, {})
        return Observation(
            t=time.time(), eef_pos_m=np.array(pose[:3], dtype=float) / 1000.0,
            eef_quat_xyzw=mat_to_quat(rot), gripper_width_mm=w,
            gripper_fraction=float(min(1.0, max(0.0, (w - prof.gripper_min_width_mm) / span))),
            joints_rad=np.array(angles[:6], dtype=float), images=imgs, depth=depths)

    def _ensure_link(self, where: str) -> None:
        if self._arm is None or self._link_lost or not self._arm.connected:
            raise XArmFault(f"not connected to the xArm controller at {self.ip}", kind="connection",
                            where=where)

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        self._stop_evt.clear()
        self._ensure_usable(f"execute {motion.kind}")
        if estop.is_set():
            self._halt_quietly()
            return MotionResult(0, converged=False, stopped=True, note="emergency stop")
        try:
            if motion.kind in ("move", "rotate"):
                pos_mm = np.asarray(motion.target_pos_m, dtype=float) * 1000.0
                return self._servo_to(pos_mm, np.asarray(motion.target_rot, dtype=float), estop,
                                      motion.kind, motion.max_steps)
            if motion.kind == "gripper":
                if motion.gripper is None:
                    raise XArmFault("gripper motion without a target fraction", kind="config")
                return self._gripper_to(float(motion.gripper), estop, motion.max_steps)
            if motion.kind == "wait":
                return self._wait(float(motion.seconds), estop)
            raise XArmFault(f"unknown motion kind {motion.kind!r}", kind="config")
        except XArmFault as f:
            if f.where != "pre-check":
                self._latch(f)
            raise

    def stop(self) -> None:
        """Stop motion now (state 4: the controller halts and drops its queue). Any thread."""
        self._stop_evt.set()
        self._halt_quietly()

    def emergency_stop(self) -> None:
        """The SDK's emergency stop (state 4, repeated until the controller confirms). Any thread."""
        self._stop_evt.set()
        arm = self._arm
        if arm is not None and not self._link_lost and arm.connected:
            try:
                arm.emergency_stop()
            except Exception:  # noqa: BLE001
                pass

    def clear_fault(self) -> None:
        """Operator call after a fault: reconnect if the link was lost, clear the controller's error,
        re-enable, re-check the safety settings, and un-latch. Raises if the fault persists."""
        if self._arm is None or self._link_lost or not self._arm.connected:
            self.connect()                       # full bring-up, safety write and read-back
            return
        arm = self._arm
        self._rc(arm.clean_error(), "clean_error")
        self._rc(arm.clean_warn(), "clean_warn")
        self._rc(arm.motion_enable(enable=True), "motion_enable")
        self._rc(arm.set_mode(0), "set_mode(0)")
        self._rc(arm.set_state(0), "set_state(0)")
        self._check_error("clear_fault")       # also refreshes the SDK's cached error code
        if self.use_gripper:
            try:
                arm.clean_gripper_error()
            except Exception:  # noqa: BLE001
                pass
            self._gripper_up()
        self.verify_safety()
        self._arm_for_motion("clear_fault")
        self._fault = None
        self._stop_evt.clear()

    def close(self) -> None:
        if self.camera_set is not None:
            try:
                self.camera_set.close()
            except Exception:  # noqa: BLE001
                pass
        self._halt_quietly()
        self._disconnect_quietly()

    def __enter__(self) -> "XArm6Robot":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ============================================================================ motions
    def move_to(self, x_mm: float, y_mm: float, z_mm: float, roll_deg: float, pitch_deg: float,
                yaw_deg: float, estop: threading.Event | None = None) -> MotionResult:
        """Absolute Cartesian move (base frame, mm and degrees), confirmed closed-loop."""
        self._ensure_usable("move_to")
        rot = rpy_to_mat(math.radians(roll_deg), math.radians(pitch_deg), math.radians(yaw_deg))
        try:
            return self._servo_to(np.array([x_mm, y_mm, z_mm], dtype=float), rot, estop or threading.Event(),
                                  "move", self.profile.tolerances.max_steps_per_command)
        except XArmFault as f:
            if f.where != "pre-check":
                self._latch(f)
            raise

    def jog(self, dx_mm: float = 0.0, dy_mm: float = 0.0, dz_mm: float = 0.0, droll_deg: float = 0.0,
            dpitch_deg: float = 0.0, dyaw_deg: float = 0.0, estop: threading.Event | None = None) -> MotionResult:
        """Relative Cartesian move (the controller's MOVE_RELATIVE: base-frame mm, roll/pitch/yaw
        increments in degrees) within the profile's per-command limits and workspace box,
        confirmed closed-loop against the target computed from the measured pose."""
        self._ensure_usable("jog")
        lim = self.profile.limits
        d = float(np.linalg.norm([dx_mm, dy_mm, dz_mm]))
        if d > lim.max_move_mm + 1e-9:
            raise XArmFault(f"jog of {d:.1f} mm exceeds limits.max_move_mm={lim.max_move_mm:g}",
                            kind="config", where="pre-check")
        if max(abs(droll_deg), abs(dpitch_deg), abs(dyaw_deg)) > lim.max_rotate_deg + 1e-9:
            raise XArmFault(f"jog rotation exceeds limits.max_rotate_deg={lim.max_rotate_deg:g}",
                            kind="config", where="pre-check")
        try:
            _, pose = self._poll("jog")
            target = [a + b for a, b in zip(pose, [dx_mm, dy_mm, dz_mm, droll_deg, dpitch_deg, dyaw_deg])]
            rot = rpy_to_mat(*(math.radians(v) for v in target[3:6]))
            rotating = d < 1e-9
            return self._servo_to(np.array(target[:3]), rot, estop or threading.Event(),
                                  "rotate" if rotating else "move",
                                  self.profile.tolerances.max_steps_per_command,
                                  relative=[dx_mm, dy_mm, dz_mm, droll_deg, dpitch_deg, dyaw_deg])
        except XArmFault as f:
            if f.where != "pre-check":
                self._latch(f)
            raise

    def set_gripper(self, fraction: float, estop: threading.Event | None = None) -> MotionResult:
        """Gripper to an opening fraction (0 closed, 1 open), confirmed from the measured width."""
        self._ensure_usable("set_gripper")
        try:
            return self._gripper_to(float(fraction), estop or threading.Event(),
                                    self.profile.tolerances.max_steps_per_command)
        except XArmFault as f:
            if f.where != "pre-check":
                self._latch(f)
            raise

    def _servo_to(self, pos_mm: np.ndarray, rot: np.ndarray, estop: threading.Event, kind: str,
                  max_steps: int, relative=None) -> MotionResult:
        prof = self.profile
        tol = prof.tolerances
        bad = prof.in_workspace(pos_mm)
        if bad:
            raise XArmFault(f"TCP target outside the workspace box ({'; '.join(bad)} mm); not sent to the arm",
                            kind="safety_fence", where="pre-check")
        if not np.all(np.isfinite(pos_mm)) or not np.all(np.isfinite(rot)):
            raise XArmFault("non-finite target; not sent to the arm", kind="config", where="pre-check")
        self._arm_for_motion(kind)
        arm = self._arm
        state, pose = self._poll(kind)
        p_now = np.array(pose[:3])
        r_now = rpy_to_mat(*(math.radians(v) for v in pose[3:6]))
        lin = float(np.linalg.norm(pos_mm - p_now))
        ang = math.degrees(angle_between(rot, r_now))
        v_lin = prof.move_mm_s
        if kind == "rotate":
            speed = min(1000.0, prof.rotate_deg_s * 1000.0 / 180.0)   # 0..1000 <-> 0..180 deg/s
        else:
            speed = v_lin
        cap = self._safety_expected.get("reduced_tcp_speed") if self._safety_expected.get("reduced_mode") else None
        v_eff = min(v_lin, cap) if cap else v_lin
        expected = max(lin / max(v_eff, 1e-6), ang / max(prof.rotate_deg_s, 1e-6))
        period = prof.period_s
        deadline_s = max(max_steps * period, 1.5 * expected + 2.0)
        r, p, y = (math.degrees(v) for v in mat_to_rpy(rot))
        if relative is not None:
            rc = arm.set_position(*relative, speed=speed, mvacc=self.tcp_acc, relative=True,
                                  is_radian=False, wait=False)
        else:
            rc = arm.set_position(float(pos_mm[0]), float(pos_mm[1]), float(pos_mm[2]), r, p, y,
                                  speed=speed, mvacc=self.tcp_acc, is_radian=False, wait=False)
        self._rc(rc, f"set_position ({kind})")
        t0 = time.monotonic()
        steps, corrections = 0, 0
        best = (lin, ang)
        last_progress = t0
        seen_moving = False
        while True:
            tick = time.monotonic()
            if estop.is_set() or self._stop_evt.is_set():
                self._halt_quietly()
                why = "emergency stop" if estop.is_set() else "stopped"
                return MotionResult(steps, converged=False, stopped=True, note=why)
            state, pose = self._poll(kind)
            steps += 1
            now = time.monotonic()
            pe = float(np.linalg.norm(np.array(pose[:3]) - pos_mm))
            re = math.degrees(angle_between(rot, rpy_to_mat(*(math.radians(v) for v in pose[3:6]))))
            if pe < best[0] - 0.05 or re < best[1] - 0.05:
                best = (min(pe, best[0]), min(re, best[1]))
                last_progress = now
            within = pe <= tol.position_mm and re <= tol.rotation_deg
            if state in (0, 1):
                seen_moving = True
                if now - last_progress > self.stall_timeout_s:
                    self._halt_quietly()
                    raise XArmFault(f"stall: the controller reports 'moving' but the measured pose has not "
                                    f"changed for {self.stall_timeout_s:g} s ({pe:.1f} mm, {re:.1f} deg from "
                                    "the target); arm stopped", kind="stall", where=kind)
            elif state == 2:
                if within:
                    return MotionResult(steps, converged=True)
                if not seen_moving and now - t0 < 0.5:
                    pass                               # the controller has not picked the move up yet
                elif corrections < 1 and relative is None:
                    corrections += 1
                    self._rc(arm.set_position(float(pos_mm[0]), float(pos_mm[1]), float(pos_mm[2]), r, p, y,
                                              speed=speed, mvacc=self.tcp_acc, is_radian=False, wait=False),
                             f"set_position ({kind}, correction)")
                    seen_moving, last_progress = False, now
                    t0 = now
                else:
                    return MotionResult(steps, converged=False,
                                        note=f"the controller finished {pe:.1f} mm / {re:.1f} deg from the target")
            elif state == 3:
                last_progress = now                    # paused by someone else: wait, within the deadline
            elif state in (4, 5):
                return MotionResult(steps, converged=within, stopped=True,
                                    note=f"stopped by the controller (state {state}) before reaching the target")
            if now - t0 > deadline_s:
                self._halt_quietly()
                raise XArmFault(f"the move did not finish within {deadline_s:.1f} s ({pe:.1f} mm, {re:.1f} deg "
                                "from the target); arm stopped", kind="timeout", where=kind)
            time.sleep(max(0.0, period - (time.monotonic() - tick)))

    def _gripper_to(self, fraction: float, estop: threading.Event, max_steps: int) -> MotionResult:
        if not self.use_gripper:
            raise XArmFault("this xArm6 has no gripper configured (gripper=False)", kind="config",
                            where="pre-check")
        prof = self.profile
        arm = self._arm
        f = min(1.0, max(0.0, fraction))
        width = prof.gripper_min_width_mm + f * (prof.gripper_max_width_mm - prof.gripper_min_width_mm)
        target = int(round(width * self.pulses_per_mm))
        self._poll("gripper")
        rc = arm.set_gripper_position(target, wait=False, speed=self.gripper_speed, wait_motion=False)
        self._rc(rc, "set_gripper_position", gripper=True)
        period = prof.period_s
        tol_p = max(1.0, prof.tolerances.position_mm) * self.pulses_per_mm
        t0 = time.monotonic()
        stroke_s = 850.0 / max(1.0, self.gripper_speed * 0.2)
        deadline_s = max(max_steps * period, 2.0 * stroke_s + 3.0)
        steps, steady, last = 0, 0, None
        while True:
            tick = time.monotonic()
            if estop.is_set() or self._stop_evt.is_set():
                self._halt_quietly()
                try:
                    c, gp = arm.get_gripper_position()
                    if c == 0 and gp is not None:
                        arm.set_gripper_position(int(gp), wait=False, wait_motion=False)   # hold here
                except Exception:  # noqa: BLE001
                    pass
                return MotionResult(steps, converged=False, stopped=True,
                                    note="emergency stop" if estop.is_set() else "stopped")
            self._poll("gripper")
            code, gp = arm.get_gripper_position()
            if code != 0 or gp is None:
                raise self._fault_for(code if code else 102, "get_gripper_position", gripper=True)
            steps += 1
            self._last_gripper_mm = gp / self.pulses_per_mm
            if abs(gp - target) <= tol_p:
                return MotionResult(steps, converged=True)
            steady = steady + 1 if (last is not None and abs(gp - last) <= 1) else 0
            last = gp
            now = time.monotonic()
            if steady * period >= 0.3 and now - t0 > 0.4:
                mm = gp / self.pulses_per_mm
                if gp > target:    # closing and stopped early: an object between the fingers
                    return MotionResult(steps, converged=True, contact=True,   # the Controller says held
                                        note=f"stalled: holding at {mm:.1f} mm")
                return MotionResult(steps, converged=False,
                                    note=f"gripper stalled at {mm:.1f} mm (target {width:.1f} mm)")
            if now - t0 > deadline_s:
                raise XArmFault(f"the gripper did not settle within {deadline_s:.1f} s", kind="timeout",
                                where="gripper")
            time.sleep(max(0.0, period - (time.monotonic() - tick)))

    def _wait(self, seconds: float, estop: threading.Event) -> MotionResult:
        period = self.profile.period_s
        end = time.monotonic() + max(0.0, seconds)
        steps = 0
        while True:
            if estop.is_set() or self._stop_evt.is_set():
                self._halt_quietly()
                return MotionResult(steps, converged=False, stopped=True,
                                    note="emergency stop" if estop.is_set() else "stopped")
            self._poll("wait")                         # a fault while waiting is still a fault
            steps += 1
            left = end - time.monotonic()
            if left <= 0:
                return MotionResult(steps, converged=True)
            time.sleep(min(period, left))


# ================================================================================ safety read-back
@dataclass(frozen=True)
class SafetyReading:
    """One line of the safety read-back: a setting of the arm's own safety layer, what the profile
    expects (``expected`` None: the profile leaves it to the arm) and what the arm reports."""
    setting: str           # "TCP offset"; a mismatch names it
    unit: str              # "x, y, z mm; roll, pitch, yaw deg"
    expected: object       # as safety_targets() has it
    read: object           # as read_safety() has it
    ok: bool
    cached: bool = False   # read from the report stream, which may lag a write by one report

    @property
    def expected_text(self) -> str:
        return "(not set by the profile)" if self.expected is None else _show(self.setting, self.expected)

    @property
    def read_text(self) -> str:
        return _show(self.setting, self.read)

    def mismatch(self) -> str:
        """``TCP offset: read ..., expected ... (unit)``."""
        return f"{self.setting}: read {self.read_text}, expected {self.expected_text} ({self.unit})"


def _num(v) -> str:
    return f"{float(v):.1f}".rstrip("0").rstrip(".") if abs(float(v)) >= 0.05 else "0"


def _show(setting: str, v) -> str:
    if v is None:
        return "(not reported)"
    if isinstance(v, bool):
        return "on" if v else "off"
    if setting == "TCP boundary":
        xmax, xmin, ymax, ymin, zmax, zmin = v
        return f"x {xmin}..{xmax}, y {ymin}..{ymax}, z {zmin}..{zmax}"
    if setting == "TCP load":
        return f"{float(v[0]):g} kg at [{', '.join(_num(c) for c in v[1])}]"
    if setting == "TCP offset":
        return f"[{', '.join(_num(c) for c in v[:3])}] rpy [{', '.join(_num(c) for c in v[3:6])}]"
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _angle_diff_deg(a: float, b: float) -> float:
    return abs((float(a) - float(b) + 180.0) % 360.0 - 180.0)


def compare_safety(want: dict, got: dict) -> list[SafetyReading]:
    """Every setting of the arm's safety layer, expected (``XArm6Robot.safety_targets``) against read
    (``XArm6Robot.read_safety``), in the order of the read-back screen."""
    rows = [
        SafetyReading("fence mode", "on/off", want["fence"], got["fence"], got["fence"] is want["fence"]),
        SafetyReading("TCP boundary", "mm, the TCP's box: workspace_mm rounded inwards", want["boundary"],
                      got["boundary"], got["boundary"] == want["boundary"]),
        SafetyReading("reduced mode", "on/off", want["reduced_mode"], got["reduced_mode"],
                      got["reduced_mode"] is want["reduced_mode"])]
    w = want.get("reduced_tcp_speed")
    rows.append(SafetyReading("reduced TCP speed", "mm/s", w, got["reduced_tcp_speed"],
                              w is None or abs(got["reduced_tcp_speed"] - w) <= 0.5))
    w = want.get("collision_sensitivity")
    rows.append(SafetyReading("collision sensitivity", "0..5", w, got["collision_sensitivity"],
                              w is None or got["collision_sensitivity"] == w, cached=True))
    w = want.get("tcp_load")
    g = got["tcp_load"]
    rows.append(SafetyReading("TCP load", "payload kg at its centre of mass x, y, z mm", w, g,
                              w is None or (abs(g[0] - w[0]) <= 0.005
                                            and all(abs(a - b) <= 0.5 for a, b in zip(g[1], w[1]))),
                              cached=True))
    w, g = want["tcp_offset"], got["tcp_offset"]
    rows.append(SafetyReading("TCP offset", "x, y, z mm; roll, pitch, yaw deg; in the flange frame", w, g,
                              len(g) == 6 and all(abs(a - b) <= 0.1 for a, b in zip(g[:3], w[:3]))
                              and all(_angle_diff_deg(a, b) <= 0.1 for a, b in zip(g[3:], w[3:])), cached=True))
    return rows


def format_safety_readback(rows: list[SafetyReading], title: str = "xArm6") -> str:
    """The read-back as one screen: a line per setting with the expected and the read value."""
    bad = [r for r in rows if not r.ok]
    verdict = (f"all {len(rows)} settings as expected" if not bad else
               f"{len(bad)} of {len(rows)} settings DIFFER: refusing to run")
    out = [f"{title}: safety read-back, {verdict}",
           f"  {'setting':<22} {'expected':<35} {'read':<35}"]
    for r in rows:
        out.append(f"  {r.setting:<22} {r.expected_text:<35} {r.read_text:<35} {'ok' if r.ok else 'DIFFERS'}")
    out.append("  units: boundary mm (the TCP's box); speed mm/s; load kg at x, y, z mm; "
               "offset x, y, z mm, rpy deg in the flange frame")
    return "\n".join(line.rstrip() for line in out)


@dataclass
class XArm6Config:
    """``robot: {type: xarm6, ip: 192.168.1.222, cameras: [front=0]}``: the arm (or its emulator)."""
    type: Literal["xarm6"] = "xarm6"
    ip: str = ""                                          # the controller's IPv4 address (required)
    command_port: int = field(default=502, metadata={"ge": 1, "le": 65535})   # the emulator may use another
    cameras: tuple[str, ...] = ()                         # NAME=SOURCE each (robots/cameras.py)
    depth: tuple[str, ...] = ()                           # NAME=URL each: a camera's depth PNG URL (mm)
    calibration: str = ""                                 # the cameras' calibration file or URL (docs/grounding.md)
    table_z_mm: float | None = None                       # the table's surface in the base frame, measured once (prompts)
    gripper: bool = True                                  # drive the xArm Gripper
    stall_timeout_s: float = field(default=1.0, metadata={"gt": 0})

    any_profile: ClassVar[bool] = False

    def __post_init__(self) -> None:
        if not self.ip:
            raise ConfigError("ip: required for the xArm6 (the controller's IPv4 address, e.g. 192.168.1.222)")
        check_ipv4(self.ip)
        self._camera_specs()

    def _camera_specs(self) -> dict | None:
        """``{name: source or {source, depth}}`` from ``cameras`` and ``depth`` (each depth names a camera)."""
        cams = parse_camera_specs(self.cameras)
        deps = parse_camera_specs(self.depth)
        for name in deps:
            if name not in cams:
                raise ConfigError(f"depth: {name!r} is not one of the cameras ({', '.join(cams) or 'none'})")
        out = {n: ({"source": src, "depth": deps[n]} if n in deps else src) for n, src in cams.items()}
        for n, spec in out.items():
            CameraConfig.parse(n, spec)
        return out or None

    @staticmethod
    def profile_issue(profile: RobotProfile) -> str:
        return "" if profile.safety is not None else \
            f"profile {profile.name} has no safety block: the xArm6's own safety layer is set from it"

    def build(self, profile: RobotProfile) -> "XArm6Robot":
        return XArm6Robot(self.ip, profile, command_port=self.command_port,
                          cameras=self._camera_specs(), gripper=self.gripper,
                          calibration=self.calibration or None, table_z_mm=self.table_z_mm,
                          stall_timeout_s=self.stall_timeout_s)


__all__ = ["XArm6Config", "XArm6Robot", "XArmFault", "RobotFault", "SafetyReading", "compare_safety",
           "format_safety_readback", "check_ipv4", "rpy_to_mat", "mat_to_rpy"]
