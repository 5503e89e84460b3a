"""The physics-backed xArm6 controller emulator: ``motormind emulate xarm6 --scene NAME``.

``CellEmulator`` is the wire-level emulator of sim/xarm_emulator/server.py (the same command and
report ports, registers, state machine, IK, joint limits, fence and fault injection) whose arm is a
MuJoCo model (sim/xarm_cell/model.py) instead of an ideal one:

* every control tick (100 Hz) the controller's trajectory generator (the kinematic emulator's, IK
  on the DH parameters with the scene's stored TCP offset) sets the joint servos' targets, and the
  physics advances by the tick's wall-clock time (the simulation runs in real time);
* what the controller reports (joint angles, the TCP pose: registers 41/42 and the report stream)
  is MEASURED from the simulation, so contact, a block in the way or a held load show up in the
  pose the SDK reads; a move starts from where the arm is;
* collision detection (C31): with ``collision_sensitivity`` 1..5 (the profile writes 3), a force
  at the tool of more than ``COLLISION_N[s]`` newtons sustained for ``COLLISION_S`` stops the arm,
  as the real controller's current-based detection would;
* the gripper (RS485 tunnel, slave 8) drives the physical fingers: its target ramps at the set
  speed, its position register reads the fingers' measured gap (10 pulses per mm), its status is
  2 (gripping) when they have stopped on something;
* the cameras of the scene are rendered and served as MJPEG streams, each with its depth image as a
  16-bit PNG in mm beside it (sim/xarm_cell/cameras.py);
* the PRIVILEGED scene (``emulator.scene``: goal, predicates, the oracle's world, the outside hand)
  is for the evaluator in this process, and for another process only through the evaluator-only
  HTTP channel (``privileged_port``; sim/scene_channel.py).

Units on the wire as in the kinematic emulator (mm, rad, pulses); the physics in metres.
"""
from __future__ import annotations

import logging
import math
import os

import numpy as np

from ..xarm_emulator import kinematics as kin
from ..xarm_emulator.gripper import PULSES_PER_S_PER_RPM, GripperModel
from ..xarm_emulator.server import XArmEmulator
from .config import CellConfig, load_cell
from .model import MAX_GAP_M
from .scene import CellScene, Trial, draw_trial

log = logging.getLogger("motormind.sim.xarm_cell")

PULSES_PER_M = 10000.0                   # the xArm Gripper: 850 pulses = 85 mm
COLLISION_N = {1: 60.0, 2: 45.0, 3: 32.0, 4: 24.0, 5: 16.0}   # by collision sensitivity (0: off)
COLLISION_S = 0.10                      # ... sustained this long (a start's torque spike is shorter)


class CellGripper(GripperModel):
    """The xArm Gripper's registers over physical fingers. ``cmd`` (pulses) ramps toward the target
    at the set speed and is what the finger servo follows; ``pos`` is the MEASURED gap (set by the
    emulator after each physics step), which the position register reads back."""

    def __init__(self, position: float):
        super().__init__(position)
        self.cmd = float(position)
        self.speed_pulses_s = 0.0          # measured finger speed

    def step(self, dt: float) -> None:
        if not self.enabled or self.error:
            if self.status == 1:
                self.status = 0
            return
        d = self.target - self.cmd
        v = max(1.0, self.speed_rpm * PULSES_PER_S_PER_RPM) * dt
        self.cmd += max(-v, min(v, d))
        if abs(self.target - self.cmd) > 0.5 or abs(self.speed_pulses_s) > 20.0:
            self.status = 1
        elif abs(self.pos - self.target) > 15.0:
            self.status = 2                # stopped on something short of the target
        else:
            self.status = 0


class CellEmulator(XArmEmulator):
    """An xArm6 controller emulator over a MuJoCo scene. ``CellEmulator("placement", host, port)``."""

    def __init__(self, scene: str | CellConfig = "placement", host: str = "127.0.0.1", port: int = 502, *,
                 camera_port: int | None = 0, privileged_port: int | None = None, seed: int = 0,
                 collision_detection: bool = True, allow_hosts=(), **kwargs):
        cfg = scene if isinstance(scene, CellConfig) else load_cell(scene)
        if "MUJOCO_GL" not in os.environ and not os.environ.get("DISPLAY"):
            os.environ["MUJOCO_GL"] = "osmesa"            # headless rendering (Debian libosmesa6)
        from .physics import CellPhysics                 # mujoco: imported with the cell, not the package
        self.cell = cfg
        self.physics = CellPhysics(cfg)
        super().__init__(host, port, initial_pose=cfg.initial_pose, tcp_offset=cfg.tcp_offset, **kwargs)
        self.gripper = CellGripper(self.gripper.pos)
        self.collision_detection = bool(collision_detection)
        self._over_s = 0.0
        self._q_meas = self._q.copy()
        self._q_prev_cmd = self._q.copy()
        self.scene = CellScene(self)                     # PRIVILEGED: never handed to a role
        self.camera_port, self.privileged_port = camera_port, privileged_port
        self._allow_hosts = tuple(allow_hosts)
        self.cameras = None                              # CameraServer once started
        self.channel = None                              # the evaluator-only scene server once started
        self.reset_scene(seed)

    # -- lifecycle --------------------------------------------------------------------------------
    def start(self) -> "CellEmulator":
        super().start()
        try:
            if self.camera_port is not None and self.cell.cameras:
                from .cameras import CameraServer
                self.cameras = CameraServer(self, self.host, self.camera_port, self._allow_hosts).start()
            if self.privileged_port is not None:
                from ..scene_channel import SceneServer
                self.channel = SceneServer(self.scene, self.host, self.privileged_port).start()
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        for srv in (self.cameras, self.channel):
            if srv is not None:
                srv.close()
        super().stop()

    close = stop

    def camera_urls(self) -> dict:
        """{camera: its MJPEG stream URL} (empty before ``start()`` or without cameras)."""
        return {n: self.cameras.stream_url(n) for n in self.cell.cameras} if self.cameras else {}

    def camera_configs(self) -> dict:
        """{camera: {"source": its MJPEG stream URL, "depth": its depth PNG URL}}: the cameras as the
        xArm6 backend's camera configs (robots/cameras.py), colour and depth (empty without cameras)."""
        return {n: {"source": self.cameras.stream_url(n), "depth": self.cameras.depth_url(n)}
                for n in self.cell.cameras} if self.cameras else {}

    # -- the scene ----------------------------------------------------------------------------------
    def reset_scene(self, seed: int | Trial = 0) -> Trial:
        """A new trial: the arm back at the scene's initial pose and at rest, the gripper open, every
        object at the trial's seeded place; queued motion dropped (the controller's state, errors and
        settings are left as they are, as an operator resetting a cell would leave them)."""
        trial = seed if isinstance(seed, Trial) else draw_trial(self.cell, int(seed))
        x, y, z, r, p, yw = self.cell.initial_pose
        rot = kin.rpy_to_mat(math.radians(r), math.radians(p), math.radians(yw))
        q, ok = kin.ik(np.array([x, y, z], float), rot, [0.0, -0.5, -0.5, 0.0, 1.0, 0.0], tool=self._tool)
        if not ok:
            raise ValueError(f"{self.cell.source}: arm.initial_pose {list(self.cell.initial_pose)} is not reachable")
        with self._lock:
            self._abort_motion_locked()
            self.physics.reset(q, trial.objects, gap_m=MAX_GAP_M)
            self.gripper.pos = self.gripper.target = self.gripper.cmd = 850.0
            self._sync_locked()
            self._over_s = 0.0
            self.scene.trial = trial
        return trial

    # -- measured state ---------------------------------------------------------------------------
    def _joints_locked(self) -> np.ndarray:
        return self._q_meas

    def _pose_locked(self) -> list[float]:
        pos, rot = kin.fk(self._q_meas, self._tool)
        r, p, yw = kin.mat_to_rpy(rot)
        return [float(pos[0]), float(pos[1]), float(pos[2]), r, p, yw]

    def _sync_locked(self) -> None:
        """The trajectory generator starts from where the arm measurably is."""
        self._q_meas = self.physics.joints()
        self._q = self._q_meas.copy()
        self._q_prev_cmd = self._q.copy()
        self._pos, self._rot = kin.fk(self._q, self._tool)

    def _start_task_locked(self, task) -> bool:
        self._sync_locked()
        return super()._start_task_locked(task)

    def _abort_motion_locked(self, result: int = 2) -> None:
        super()._abort_motion_locked(result)
        if hasattr(self, "_q_meas"):                     # (the base constructor aborts nothing yet)
            self._sync_locked()

    # -- the control tick -------------------------------------------------------------------------
    def _step_locked(self, dt: float) -> None:
        super()._step_locked(dt)                          # the trajectory: self._q, the gripper's ramp
        ph = self.physics
        qd = (self._q - self._q_prev_cmd) / dt if dt > 0 else np.zeros(6)
        self._q_prev_cmd = self._q.copy()
        ph.command(self._q, qd, self.gripper.cmd / PULSES_PER_M)
        before = self.gripper.pos
        ph.step(dt)
        self._q_meas = ph.joints()
        self.gripper.pos = ph.gap_m() * PULSES_PER_M
        self.gripper.speed_pulses_s = (self.gripper.pos - before) / dt if dt > 0 else 0.0
        self._check_collision_locked(dt)

    def tool_force_n(self) -> float:
        """The force at the flange the joint servos are exerting beyond the arm's own motion (N): the
        servo torques mapped through the Jacobian (gravity is compensated, so at rest it is contact)."""
        with self._lock:
            return self._tool_force_locked()

    def _tool_force_locked(self) -> float:
        tau = self.physics.servo_torques()
        j = kin.jacobian(self._q_meas)
        j[:3] /= 1000.0                                   # mm/rad -> m/rad
        wrench, *_ = np.linalg.lstsq(j.T, tau, rcond=None)
        return float(np.linalg.norm(wrench[:3]))

    def _check_collision_locked(self, dt: float) -> None:
        s = int(self.collision_sensitivity)
        if not self.collision_detection or s <= 0 or self.error:
            self._over_s = 0.0
            return
        if self._tool_force_locked() > COLLISION_N[min(5, s)]:
            self._over_s += dt
            if self._over_s >= COLLISION_S:
                log.info("cell: collision detected (C31)")
                self._over_s = 0.0
                self._fault_locked(31)
        else:
            self._over_s = 0.0

    # -- for tests and the evaluator ----------------------------------------------------------------
    def snapshot(self) -> dict:
        out = super().snapshot()
        with self._lock:
            out["sim_time_s"] = self.physics.sim_time_s
            out["step_cpu_s"] = self.physics.step_cpu_s
            out["gripper_cmd"] = self.gripper.cmd
        return out
