"""The one small interface every robot backend implements.

The Controller turns each validated command into a ``Motion``: an absolute target in the base
frame (computed from the measured pose at the start of the command). A backend executes one
Motion closed-loop on its own measured state, checking ``estop`` every control step, and returns
a ``MotionResult``. The Controller then observes again and reports commanded vs achieved.

Units at this interface: metres, radians and quaternions (xyzw) in the base frame; the gripper as
an opening fraction (0 closed, 1 fully open) plus the measured width in mm.
"""
from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np

from .profile import RobotProfile


@dataclass
class Observation:
    t: float                         # seconds: simulation time, or wall clock on hardware
    eef_pos_m: np.ndarray            # grip point / TCP position, base frame
    eef_quat_xyzw: np.ndarray        # orientation, base frame
    gripper_width_mm: float          # measured finger gap
    gripper_fraction: float          # width / max width, 0 closed .. 1 open
    joints_rad: np.ndarray = field(default_factory=lambda: np.zeros(0))
    images: dict = field(default_factory=dict)   # name -> HxWx3 uint8, upright
    step: int = 0                    # control steps so far (simulation)
    depth: dict = field(default_factory=dict)    # name -> HxW float32 m along the optical axis, the size and
                                     # orientation of that camera's image, NaN where no reading (asked
                                     # with observe(images=True, depth=True); only cameras that have depth)

    def state_dict(self) -> dict:
        """Measured state in prompt units (mm, degrees), as the roles see it."""
        from .geometry import quat_to_mat
        r = quat_to_mat(self.eef_quat_xyzw)
        import math
        return {
            "t_s": round(float(self.t), 3),
            "eef_pos_mm": [round(float(v) * 1000, 1) for v in self.eef_pos_m],
            "eef_quat_xyzw": [round(float(v), 4) for v in self.eef_quat_xyzw],
            "eef_yaw_deg": round(math.degrees(math.atan2(r[1, 0], r[0, 0])), 1),
            "gripper_width_mm": round(float(self.gripper_width_mm), 1),
            "gripper_fraction": round(float(self.gripper_fraction), 3),
            "joints_deg": [round(math.degrees(float(j)), 1) for j in self.joints_rad],
        }


@dataclass(frozen=True)
class Motion:
    """One validated command, as an absolute target."""
    kind: str                        # move | rotate | gripper | wait
    target_pos_m: np.ndarray         # base frame
    target_rot: np.ndarray           # 3x3 rotation matrix, base frame
    gripper: float | None = None     # target opening fraction (gripper motions)
    seconds: float = 0.0             # wait duration
    max_steps: int = 60              # give up (blocked) after this many control steps
    blend_m: float = 0.0             # > 0: another move follows; pass within this of the target (a
                                     # backend that cannot blend settles at the target instead)
    blend_rad: float = 0.0           # > 0: another rotation follows; pass within this of the target
    at_rest: bool = True             # a move: end at rest on the target (what follows starts from it:
                                     # a gripper action); False before a ``done``, a wait (which holds the
                                     # target) or the batch's end: it may end once within the position
                                     # tolerance, still slowing
    follows: bool = False            # a gripper motion an arm motion follows: an open or a partial width
                                     # whose command is set, the fingers on their way and touching nothing,
                                     # may finish during that motion (a close still ends at its stall)

    def to_json(self) -> dict:
        from .geometry import mat_to_quat
        return {"kind": self.kind, "target_pos_m": [round(float(v), 6) for v in self.target_pos_m],
                "target_quat_xyzw": [round(float(v), 6) for v in mat_to_quat(self.target_rot)],
                "gripper": self.gripper, "seconds": self.seconds,
                **({"blend_m": self.blend_m} if self.blend_m else {}),
                **({"blend_rad": self.blend_rad} if self.blend_rad else {}),
                **({"follows": True} if self.follows else {}),
                **({} if self.at_rest else {"at_rest": False})}


@dataclass
class MotionResult:
    steps: int = 0                   # control steps used
    converged: bool = True           # reached the target within tolerance
    stopped: bool = False            # interrupted by the emergency stop
    note: str = ""                   # e.g. "stalled: finger gap steady at 8.4 mm"
    contact: bool = False            # the motion ended against something (the arm, its tool or the held
                                     # object touching the scene); a shortfall without contact is a settle.
                                     # A gripper motion: the fingers stalled against something between
                                     # them (what makes a grasp held, motormind/grasp.py)


class Robot(ABC):
    """observe, execute one validated motion closed-loop, stop, close."""

    profile: RobotProfile

    @abstractmethod
    def observe(self, images: bool = False, depth: bool = False) -> Observation:
        """Measured state now; camera images only when asked (rendering is expensive), and with
        ``depth`` (and ``images``) a depth image of each camera that has one (``Observation.depth``)."""

    @abstractmethod
    def execute(self, motion: Motion, estop: threading.Event) -> MotionResult:
        """Drive to ``motion``'s target closed-loop. Check ``estop`` every control step: when set,
        stop at once and return with ``stopped=True``. Raise ``RobotFault`` on a backend fault."""

    @abstractmethod
    def stop(self) -> None:
        """Stop motion now (hold position). Must be safe to call from any thread, at any time.

        It acts on the motion under way and on nothing later: the ``execute`` running when it is
        called returns ``stopped=True``; a stop while idle moves nothing and is then forgotten, so
        the next ``execute`` runs (an execute clears any stop request left from before it began).
        What must keep a later motion from running is the Controller's latched ``estop`` event,
        which every ``execute`` checks, never a stop request remembered by the backend."""

    def close(self) -> None:
        """Release resources."""

    @property
    def camera_names(self) -> list[str]:
        return []

    # the fingers close along this unit vector of the end-effector frame (marks' closing line)
    closing_axis_eef: tuple = (0.0, 1.0, 0.0)

    def cameras(self) -> dict:
        """Each calibrated camera's ``motormind.grounding.camera.CameraCalibration`` at its image
        size now (a gripper camera's pose is relative to the end effector: evaluate it at an
        observation's eef pose). A camera of ``camera_names`` missing here has no calibration;
        one whose ``depth`` is False says why in ``no_depth_reason`` (docs/grounding.md)."""
        return {}

    def scene_facts(self) -> dict:
        """What the backend knows of the scene that a teleoperator sees, for prompts; never
        a movable object's pose. ``table_z_mm``: the height of the surface the objects stand on (the
        table's top, or the floor: ``surface`` says which), base frame, mm. Absent keys are unknown
        (docs/grounding.md, "Scene facts")."""
        return {}
