"""The oracle's model of the scene: boxes, the gripper's shape, clearances. PRIVILEGED.

Built from ``Scene.world()`` (sim/libero_pro/scene.py): true object poses and collision geometry
read from the simulator. Units: metres, radians; the robot's base frame (+x forward, +y left,
+z up). Nothing here talks to the robot: it answers geometric questions for the skills.

The gripper model (measured on LIBERO's Panda hand, gripper pointing down; ``s`` is the finger
separation axis, ``a`` the axis across the fingers, heights relative to the grip site, which sits
between the fingertips about 10 mm above their lowest point):
    hand    +-0.105 along s, +-0.041 along a, z +0.024 .. +0.122
    finger  from the gap's edge outwards 0.025 along s, +-0.012 along a, z -0.010 .. +0.050
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

HAND_HALF_S, HAND_HALF_A, HAND_Z = 0.105, 0.041, (0.024, 0.122)
FINGER_T, FINGER_HALF_A, FINGER_Z = 0.025, 0.012, (-0.010, 0.050)
FINGERTIP_BELOW_M = 0.010      # the fingertips' lowest point under the grip site
MAX_GAP_M = 0.078              # the fingers' widest gap


@dataclass
class Body:
    name: str
    kind: str                  # object | fixture
    pos: np.ndarray            # body origin: the point LIBERO's predicates test
    rot: np.ndarray            # body frame -> base
    local_lo: np.ndarray       # collision geoms' extent in the body frame (an oriented box)
    local_hi: np.ndarray
    boxes: np.ndarray          # (n, 2, 3): one axis-aligned box per collision geom
    lo: np.ndarray
    hi: np.ndarray

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def size(self) -> np.ndarray:
        return self.hi - self.lo

    @property
    def upright(self) -> bool:
        return bool(self.rot[2, 2] > 0.9)


@dataclass
class Articulation:
    fixture: str
    joint: str
    type: str                  # slide | hinge
    q: float
    range: tuple
    axis: np.ndarray           # base frame
    anchor: np.ndarray
    body: str
    parts: list                # [{"name", "c", "half", "rot"}]: the moving body's collision geoms
    regions: list
    ranges: dict


@dataclass
class World:
    bodies: dict
    static: np.ndarray         # (n, 2, 3)
    ground_z: float | None
    articulations: list
    predicates: dict
    regions: dict
    _cache: dict = field(default_factory=dict)

    @classmethod
    def from_data(cls, w: dict) -> "World":
        bodies = {}
        for n, b in w["bodies"].items():
            boxes = np.asarray(b["boxes"], dtype=float).reshape(-1, 2, 3)
            bodies[n] = Body(n, b["kind"], np.asarray(b["pos"], float), np.asarray(b["rot"], float).reshape(3, 3),
                             np.asarray(b["local_lo"], float), np.asarray(b["local_hi"], float), boxes,
                             np.asarray(b["lo"], float), np.asarray(b["hi"], float))
        arts = [Articulation(a["fixture"], a["joint"], a["type"], float(a["q"]), tuple(a["range"]),
                             np.asarray(a["axis"], float), np.asarray(a["anchor"], float), a["body"], a["parts"],
                             list(a["regions"]), dict(a["ranges"])) for a in w.get("articulations", [])]
        regions = {n: {k: (np.asarray(v, float) if isinstance(v, list) else v) for k, v in r.items()}
                   for n, r in w.get("regions", {}).items()}
        return cls(bodies, np.asarray(w.get("static", []), dtype=float).reshape(-1, 2, 3), w.get("ground_z"),
                   arts, dict(w.get("predicates", {})), regions)

    # -- queries -------------------------------------------------------------------------------
    def obstacles(self, exclude=()) -> np.ndarray:
        """Every collision box of the scene but those of ``exclude`` (names), plus the floor."""
        key = tuple(sorted(exclude))
        if key not in self._cache:
            parts = [b.boxes for n, b in self.bodies.items() if n not in exclude and len(b.boxes)]
            parts.append(self.static)
            if self.ground_z is not None:
                g = self.ground_z
                parts.append(np.array([[[-5.0, -5.0, g - 1.0], [5.0, 5.0, g]]]))
            self._cache[key] = np.concatenate(parts) if parts else np.zeros((0, 2, 3))
        return self._cache[key]

    def top_under(self, lo_xy, hi_xy, exclude=(), below: float = math.inf) -> float:
        """Highest top (m) of the obstacle boxes overlapping the rectangle lo_xy..hi_xy whose top
        is below ``below`` (-inf when none)."""
        obs = self.obstacles(exclude)
        if not len(obs):
            return -math.inf
        lo, hi = obs[:, 0], obs[:, 1]
        m = (lo[:, 0] < hi_xy[0]) & (hi[:, 0] > lo_xy[0]) & (lo[:, 1] < hi_xy[1]) & (hi[:, 1] > lo_xy[1]) \
            & (hi[:, 2] < below)
        return float(hi[m, 2].max()) if m.any() else -math.inf

    def clearance(self, boxes: np.ndarray, exclude=()) -> float:
        """Smallest separation (m) between any of ``boxes`` (n, 2, 3) and the scene's obstacles;
        negative when they overlap (by the depth of the shallowest axis)."""
        obs = self.obstacles(exclude)
        if not len(obs) or not len(boxes):
            return math.inf
        a_lo, a_hi = boxes[:, None, 0], boxes[:, None, 1]
        b_lo, b_hi = obs[None, :, 0], obs[None, :, 1]
        gap = np.maximum(b_lo - a_hi, a_lo - b_hi)            # (n, m, 3): per-axis gaps
        sep = gap.max(axis=2)                                   # > 0: separated along some axis
        return float(sep.min())

    def predicate(self, op: str, name: str) -> bool | None:
        return self.predicates.get(f"{op} {name}")

    def joint_for_region(self, region: str) -> Articulation | None:
        return next((a for a in self.articulations if region in a.regions), None)

    def joints_of(self, fixture: str) -> list[Articulation]:
        return [a for a in self.articulations if a.fixture == fixture]


def rot_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def gripper_boxes(grip: np.ndarray, sep_yaw: float, gap_m: float = MAX_GAP_M, hand: bool = True) -> np.ndarray:
    """Axis-aligned boxes around the top-down gripper at ``grip`` whose fingers separate along the
    horizontal direction at angle ``sep_yaw`` (rad from base +x), opened to ``gap_m``."""
    s = np.array([math.cos(sep_yaw), math.sin(sep_yaw), 0.0])
    a = np.array([-s[1], s[0], 0.0])
    out = []
    if hand:
        out.append(_obb_aabb(grip + [0, 0, (HAND_Z[0] + HAND_Z[1]) / 2], s, a,
                             (HAND_HALF_S, HAND_HALF_A, (HAND_Z[1] - HAND_Z[0]) / 2)))
    zc, zh = (FINGER_Z[0] + FINGER_Z[1]) / 2, (FINGER_Z[1] - FINGER_Z[0]) / 2
    for sign in (-1.0, 1.0):
        c = grip + s * sign * (gap_m / 2 + FINGER_T / 2) + [0, 0, zc]
        out.append(_obb_aabb(c, s, a, (FINGER_T / 2, FINGER_HALF_A, zh)))
    return np.asarray(out)


def _obb_aabb(c, s, a, half) -> np.ndarray:
    ext = np.abs(s) * half[0] + np.abs(a) * half[1] + np.array([0, 0, half[2]])
    return np.array([c - ext, c + ext])


def box_of_points(pts: np.ndarray) -> np.ndarray:
    return np.array([pts.min(axis=0), pts.max(axis=0)])


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi
