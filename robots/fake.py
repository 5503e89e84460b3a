"""A fast kinematic fake arm for unit tests and benchmarks. No physics: it moves toward each target
at the profile's speed, one control period per step, and can be told to stall (an obstacle) or to
fault. Time is simulated (no sleeping) unless ``realtime`` is set.

``OvershootingFakeRobot`` is a test double of a backend that settles within tolerance but past its
target (a real servo may): the workspace box must hold for what is commanded, not what was planned.
``SlippingFakeRobot`` is a test double of a grasp that is lost: a close stalls on an object, which
slips out during a later motion (the grasp report, motormind/grasp.py)."""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass, field
from typing import ClassVar, Literal

import numpy as np

from motormind.errors import RobotFault
from motormind.geometry import axis_angle_to_mat, mat_to_quat, rot_error
from motormind.profile import RobotProfile, load_profile
from motormind.robot import Motion, MotionResult, Observation, Robot


class FakeRobot(Robot):
    def __init__(self, profile: RobotProfile | None = None, start_pos_m=(0.4, 0.0, 0.2),
                 realtime: bool = False, image_size: int = 32, depth: bool = True):
        self.profile = profile or load_profile("fake")
        self.pos = np.array(start_pos_m, dtype=float)
        self.rot = np.diag([1.0, -1.0, -1.0])      # tool pointing down
        self.gripper = 1.0                          # opening fraction
        self.t = 0.0
        self.steps = 0
        self.realtime = realtime
        self.image_size = image_size
        self.has_depth = bool(depth)                 # the synthetic camera gives a depth image
        self.executed: list[Motion] = []
        self.obstacle_z_m: float | None = None      # the arm cannot go below this (a table, say)
        self.grip_object_mm: float | None = None     # an object of this width is between the fingers
        self.fault_after_steps: int | None = None    # raise a RobotFault after this many steps
        self.step_hook = None                        # called every step (tests use it to act mid-command)
        self._stop = threading.Event()

    @property
    def camera_names(self) -> list[str]:
        return ["front"]

    # the synthetic camera "front": straight down from CAMERA_HEIGHT_M above the workspace's centre,
    # the image's up the robot's forward (+x), its right the robot's right (-y) (configs/robots/fake.yaml)
    CAMERA_HEIGHT_M = 1.0
    CAMERA_FOVY_DEG = 60.0
    TABLE_Z_M = 0.0                                  # the depth image sees a flat table at this height

    def cameras(self) -> dict:
        from motormind.grounding.camera import CameraCalibration
        ws = self.profile.workspace_mm
        centre = (sum(ws["x"]) / 2000.0, sum(ws["y"]) / 2000.0, self.CAMERA_HEIGHT_M)
        axes = np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]).T   # OpenCV x, y, z as columns
        cal = CameraCalibration.from_fovy("front", self.image_size, self.image_size, self.CAMERA_FOVY_DEG,
                                          "fixed", centre, axes, source="robots/fake.py (synthetic)")
        return {"front": cal.with_depth(self.has_depth, "the fake's camera was built without depth (depth=False)")}

    def scene_facts(self) -> dict:
        return {"table_z_mm": self.TABLE_Z_M * 1000.0, "surface": "table"}

    def observe(self, images: bool = False, depth: bool = False) -> Observation:
        imgs = {"front": self._render()} if images else {}
        deps = {"front": self._depth()} if (images and depth and self.has_depth) else {}
        w = self.gripper * self.profile.gripper_max_width_mm
        return Observation(t=self.t, eef_pos_m=self.pos.copy(), eef_quat_xyzw=mat_to_quat(self.rot),
                           gripper_width_mm=w, gripper_fraction=self.gripper,
                           joints_rad=np.zeros(6), images=imgs, step=self.steps, depth=deps)

    def _render(self) -> np.ndarray:
        """A tiny synthetic top view through the calibrated camera: a bright dot where the tool is."""
        n = self.image_size
        img = np.full((n, n, 3), 40, dtype=np.uint8)
        p = self.cameras()["front"].project_point(self.pos)
        if p is not None:
            c, r = int(np.clip(round(p[0]), 0, n - 1)), int(np.clip(round(p[1]), 0, n - 1))
            img[max(0, r - 1):r + 2, max(0, c - 1):c + 2] = (255, 200, 0)
        return img

    def _depth(self) -> np.ndarray:
        """The table's distance along the optical axis at every pixel (the camera faces it squarely)."""
        n = self.image_size
        return np.full((n, n), self.CAMERA_HEIGHT_M - self.TABLE_Z_M, dtype=np.float32)

    def _tick(self) -> None:
        self.steps += 1
        self.t += self.profile.period_s
        if self.realtime:
            time.sleep(self.profile.period_s)
        if self.fault_after_steps is not None and self.steps >= self.fault_after_steps:
            self.fault_after_steps = None
            raise RobotFault("injected fault", code=99, kind="fault")
        if self.step_hook:
            self.step_hook(self)

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        self.executed.append(motion)
        self._stop.clear()                            # stop() halts the motion under way, not later ones
        prof = self.profile
        vmax = prof.move_mm_s / 1000.0 * prof.period_s
        wmax = math.radians(prof.rotate_deg_s) * prof.period_s
        gmax = 0.25                                   # fraction per step
        tol = prof.tolerances.position_mm / 1000.0 * 0.25
        for k in range(motion.max_steps):
            if estop.is_set() or self._stop.is_set():
                return MotionResult(k, converged=False, stopped=True, note="stopped")
            if motion.kind == "wait":
                self._tick()
                continue
            dp = motion.target_pos_m - self.pos
            dr = rot_error(motion.target_rot, self.rot)
            dg = 0.0 if motion.gripper is None else motion.gripper - self.gripper
            if self.grip_object_mm is not None and motion.gripper is not None:
                floor = self.grip_object_mm / prof.gripper_max_width_mm
                if self.gripper <= floor + 1e-9 and dg < 0:
                    return MotionResult(k, converged=True, contact=True,   # stalled on the object
                                        note=f"stalled: holding at {self.grip_object_mm:.1f} mm")
            near = max(tol, motion.blend_m)             # a blended move passes within blend_m
            if np.linalg.norm(dp) <= near and np.linalg.norm(dr) < 1e-4 and abs(dg) < 1e-6:
                return MotionResult(k, converged=True)
            n = np.linalg.norm(dp)
            step = dp if n <= vmax else dp / n * vmax
            new = self.pos + step
            if self.obstacle_z_m is not None and new[2] < self.obstacle_z_m:
                new[2] = self.obstacle_z_m
                if abs(new[2] - self.pos[2]) < 1e-12 and np.linalg.norm(new[:2] - self.pos[:2]) < 1e-12:
                    self._tick()
                    return MotionResult(k + 1, converged=False, note="stalled: contact", contact=True)
            self.pos = new
            a = np.linalg.norm(dr)
            if a > 1e-12:
                self.rot = axis_angle_to_mat(dr / a, min(a, wmax)) @ self.rot
            if motion.gripper is not None:
                g = self.gripper + float(np.clip(dg, -gmax, gmax))
                if self.grip_object_mm is not None and dg < 0:
                    g = max(g, self.grip_object_mm / prof.gripper_max_width_mm)
                self.gripper = g
            self._tick()
        return MotionResult(motion.max_steps, converged=motion.kind == "wait", note="step limit reached")

    def stop(self) -> None:
        self._stop.set()


@dataclass
class FakeConfig:
    """``robot: {type: fake}``: the kinematic fake (it moves as any profile says: it runs with any)."""
    type: Literal["fake"] = "fake"
    realtime: bool = False                     # move in real time (so cancels and stops land mid-batch)
    image_size: int = field(default=32, metadata={"ge": 8})       # px, square
    start_pos_mm: tuple[float, ...] = (400.0, 0.0, 200.0)          # base frame

    any_profile: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if len(self.start_pos_mm) != 3:
            from motormind.errors import ConfigError
            raise ConfigError(f"start_pos_mm: must be [x, y, z] mm, got {list(self.start_pos_mm)!r}")

    def build(self, profile: RobotProfile) -> FakeRobot:
        return FakeRobot(profile, start_pos_m=tuple(v / 1000.0 for v in self.start_pos_mm), realtime=self.realtime,
                         image_size=self.image_size)


class SlippingFakeRobot(FakeRobot):
    """Test double: an object of ``grip_object_mm`` is between the fingers (a close stalls on it), and it
    slips out during the ``slip_on``-th motion that is not a gripper motion after the fingers stalled on
    it: during that motion the object is gone and the fingers close to where their command puts them
    (closed: 0 mm)."""

    def __init__(self, *args, grip_object_mm: float = 11.4, slip_on: int = 1, **kwargs):
        super().__init__(*args, **kwargs)
        self.grip_object_mm = grip_object_mm
        self.slip_on = slip_on
        self._after_stall: int | None = None     # motions since the stall (None: not stalled on it)
        self._grip_target = self.gripper

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        if motion.kind == "gripper":
            self._grip_target = float(motion.gripper)
            res = super().execute(motion, estop)
            self._after_stall = 0 if res.contact else None
            return res
        if self._after_stall is not None and self.grip_object_mm is not None:
            self._after_stall += 1
            if self._after_stall == self.slip_on:   # it slips out as this motion starts: the fingers close
                self.grip_object_mm = None           # on nothing while the arm moves
                self.gripper = self._grip_target
                self._after_stall = None
        return super().execute(motion, estop)


class OvershootingFakeRobot(FakeRobot):
    """Test double: every move ends ``overshoot_mm`` beyond its target along the direction of travel
    (0.9 mm by default, inside the fake profile's 1 mm tolerance, so each move is reported done)."""

    def __init__(self, *args, overshoot_mm: float = 0.9, **kwargs):
        super().__init__(*args, **kwargs)
        self.overshoot_mm = overshoot_mm

    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        start = self.pos.copy()
        res = super().execute(motion, estop)
        travel = np.asarray(motion.target_pos_m, dtype=float) - start
        n = float(np.linalg.norm(travel))
        if motion.kind == "move" and not res.stopped and n > 1e-9:
            self.pos = motion.target_pos_m + travel / n * self.overshoot_mm / 1000.0
        return res
