"""The oracle's model of the scene: boxes, the gripper's shape, clearances. PRIVILEGED.

Built from ``Scene.world()`` (sim/libero_pro/scene.py): true object poses and collision geometry
read from the simulator. Units: metres, radians; the robot's base frame (+x forward, +y left,
+z up). Nothing here talks to the robot: it answers geometric questions for the skills.

The gripper is modelled as boxes (``gripper_boxes``) from the robot's ``Hand`` (tuning.py: the
profile's widest gap, the oracle's box model of that robot's hand and wrist).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .tuning import UPRIGHT_MIN, Hand


@dataclass
class Boxes:
    """Oriented boxes: centres (n, 3), half sizes (n, 3), rotations (n, 3, 3; columns = box axes)."""
    c: np.ndarray
    h: np.ndarray
    R: np.ndarray
    _aabb: np.ndarray | None = field(default=None, repr=False, compare=False)

    @classmethod
    def from_rows(cls, rows) -> "Boxes":
        a = np.asarray(rows, dtype=float).reshape(-1, 15)
        return cls(a[:, :3].copy(), a[:, 3:6].copy(), a[:, 6:].reshape(-1, 3, 3).copy())

    @classmethod
    def empty(cls) -> "Boxes":
        return cls(np.zeros((0, 3)), np.zeros((0, 3)), np.zeros((0, 3, 3)))

    def __len__(self) -> int:
        return len(self.c)

    def shifted(self, p) -> "Boxes":
        return Boxes(self.c + np.asarray(p, float), self.h, self.R)

    def __add__(self, other: "Boxes") -> "Boxes":
        return Boxes(np.concatenate([self.c, other.c]), np.concatenate([self.h, other.h]),
                     np.concatenate([self.R, other.R]))

    def half_along(self, d) -> np.ndarray:
        """(n,) each box's half extent along the unit direction ``d``."""
        return (np.abs(np.einsum("nij,i->nj", self.R, np.asarray(d, float))) * self.h).sum(axis=1)

    def aabb(self) -> np.ndarray:
        """(n, 2, 3) axis-aligned boxes around them (computed once: boxes are not changed in place)."""
        if self._aabb is None:
            ext = np.einsum("nij,nj->ni", np.abs(self.R), self.h)
            self._aabb = np.stack([self.c - ext, self.c + ext], axis=1)
        return self._aabb


def _sat_pairs(a: Boxes, b: Boxes, i: np.ndarray, j: np.ndarray) -> np.ndarray:
    """The separating-axis gap of the box pairs (a[i], b[j]): the largest gap over their 15 axes."""
    A, B = a.R[i].transpose(0, 2, 1), b.R[j].transpose(0, 2, 1)          # (k, 3, 3), rows = axes
    k = len(i)
    cross = np.cross(A[:, :, None, :], B[:, None, :, :]).reshape(k, 9, 3)
    L = np.concatenate([A, B, cross], axis=1)                            # (k, 15, 3)
    norm = np.linalg.norm(L, axis=2)
    ok = norm > 1e-6
    L = L / np.where(ok, norm, 1.0)[..., None]
    d = b.c[j] - a.c[i]
    dist = np.abs(np.einsum("kj,klj->kl", d, L))
    ra = np.einsum("klm,km->kl", np.abs(np.einsum("kmj,klj->klm", A, L)), a.h[i])
    rb = np.einsum("klm,km->kl", np.abs(np.einsum("kmj,klj->klm", B, L)), b.h[j])
    return np.where(ok, dist - ra - rb, -np.inf).max(axis=1)


def separation(a: Boxes, b: Boxes) -> float:
    """Smallest separation between any box of ``a`` and any of ``b``: > 0 apart (a lower bound of
    the distance), < 0 overlapping (about the shallowest penetration). Each pair's value is the
    largest gap along a separating axis: the 15 axes of the separating-axis test and the base
    frame's axes (the pair's bounding boxes). Pairs whose bounding boxes are farther apart than the
    best pair found so far cannot be the answer and are not tested."""
    if not len(a) or not len(b):
        return math.inf
    ab, bb = a.aabb(), b.aabb()
    g = np.maximum(bb[None, :, 0] - ab[:, None, 1], ab[:, None, 0] - bb[None, :, 1]).max(axis=2)   # (n, m)
    flat = g.ravel()
    order = np.argsort(flat, kind="stable")
    best, start, chunk = math.inf, 0, 16
    while start < len(order) and flat[order[start]] < best:
        idx = order[start:start + chunk]
        idx = idx[flat[idx] < best]
        i, j = np.divmod(idx, g.shape[1])
        v = np.maximum(_sat_pairs(a, b, i, j), flat[idx])
        best = min(best, float(v.min()))
        start += chunk
        chunk *= 2
    return best


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
    obbs: Boxes = None         # the same geoms as oriented boxes

    @property
    def centre(self) -> np.ndarray:
        return (self.lo + self.hi) / 2

    @property
    def size(self) -> np.ndarray:
        return self.hi - self.lo

    @property
    def upright(self) -> bool:
        return bool(self.rot[2, 2] > UPRIGHT_MIN)


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
    static_obbs: Boxes
    ground_z: float | None
    articulations: list
    predicates: dict
    regions: dict
    finger_contacts: dict = field(default_factory=dict)   # name -> fingers touching it
    hand: Hand | None = None   # the robot's gripper and reach (tuning.hand_for): set by from_data
    _cache: dict = field(default_factory=dict)

    @classmethod
    def from_data(cls, w: dict, hand: Hand) -> "World":
        bodies = {}
        for n, b in w["bodies"].items():
            boxes = np.asarray(b["boxes"], dtype=float).reshape(-1, 2, 3)
            bodies[n] = Body(n, b["kind"], np.asarray(b["pos"], float), np.asarray(b["rot"], float).reshape(3, 3),
                             np.asarray(b["local_lo"], float), np.asarray(b["local_hi"], float), boxes,
                             np.asarray(b["lo"], float), np.asarray(b["hi"], float), Boxes.from_rows(b["obbs"]))
        arts = [Articulation(a["fixture"], a["joint"], a["type"], float(a["q"]), tuple(a["range"]),
                             np.asarray(a["axis"], float), np.asarray(a["anchor"], float), a["body"], a["parts"],
                             list(a["regions"]), dict(a["ranges"])) for a in w.get("articulations", [])]
        regions = {n: {k: (np.asarray(v, float) if isinstance(v, list) else v) for k, v in r.items()}
                   for n, r in w.get("regions", {}).items()}
        return cls(bodies, np.asarray(w.get("static", []), dtype=float).reshape(-1, 2, 3),
                   Boxes.from_rows(w.get("static_obbs", [])), w.get("ground_z"), arts,
                   dict(w.get("predicates", {})), regions, dict(w.get("finger_contacts", {})), hand)

    def pinched(self, name: str) -> bool:
        """Both fingers touch ``name`` (privileged contact state)."""
        return len(self.finger_contacts.get(name, ())) >= 2

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

    def obstacle_obbs(self, exclude=()) -> Boxes:
        key = ("obb",) + tuple(sorted(exclude))
        if key not in self._cache:
            out = self.static_obbs
            for n, b in self.bodies.items():
                if n not in exclude and len(b.obbs):
                    out = out + b.obbs
            if self.ground_z is not None:
                out = out + Boxes(np.array([[0.0, 0.0, self.ground_z - 0.5]]), np.array([[5.0, 5.0, 0.5]]),
                                  np.eye(3)[None])
            self._cache[key] = out
        return self._cache[key]

    def clearance(self, boxes: Boxes, exclude=()) -> float:
        """Smallest separation (m) between any of ``boxes`` and the scene's obstacles (oriented
        boxes, separating-axis test); negative when they overlap."""
        return separation(boxes, self.obstacle_obbs(exclude))

    def predicate(self, op: str, name: str) -> bool | None:
        return self.predicates.get(f"{op} {name}")

    def over_region(self, name: str, region: str, inset) -> bool:
        """``name``'s origin over ``region``'s box in xy, ``inset`` (m; one value or one per axis)
        in from its sides. False for a region the scene does not have."""
        rg = self.regions.get(region)
        if rg is None:
            return False
        d = np.abs(self.bodies[name].pos[:2] - np.asarray(rg["centre"], float)[:2])
        return bool(np.all(d < np.asarray(rg["half_extents"], float)[:2] - inset))

    def joint_for_region(self, region: str) -> Articulation | None:
        return next((a for a in self.articulations if region in a.regions), None)

    def joints_of(self, fixture: str) -> list[Articulation]:
        return [a for a in self.articulations if a.fixture == fixture]


def rot_z(yaw: float) -> np.ndarray:
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


def gripper_boxes(model: Hand, grip: np.ndarray, sep_yaw: float, gap_m: float, hand: bool = True,
                  rot: np.ndarray | None = None) -> Boxes:
    """``model``'s gripper as boxes at ``grip``: pointing down with the fingers separating along the
    horizontal direction at ``sep_yaw`` (rad from base +x), or in the grip-site frame ``rot``
    (columns: separation axis, across axis, approach axis), opened to ``gap_m``; without the hand
    and wrist when ``hand`` is false."""
    m = model.model
    if rot is None:
        s = np.array([math.cos(sep_yaw), math.sin(sep_yaw), 0.0])
        a = np.array([-s[1], s[0], 0.0])
        up = np.array([0.0, 0.0, 1.0])
    else:
        s, a, up = rot[:, 0], rot[:, 1], -rot[:, 2]
    frame = np.column_stack([s, a, up])
    cs, hs = [], []
    if hand:
        cs.append(grip + up * (m.hand_z[0] + m.hand_z[1]) / 2)
        hs.append((m.hand_half_s, m.hand_half_a, (m.hand_z[1] - m.hand_z[0]) / 2))
        cs.append(grip + up * (m.wrist_z[0] + m.wrist_z[1]) / 2)
        hs.append((m.wrist_half, m.wrist_half, (m.wrist_z[1] - m.wrist_z[0]) / 2))
    zc, zh = (m.finger_z[0] + m.finger_z[1]) / 2, (m.finger_z[1] - m.finger_z[0]) / 2
    for sign in (-1.0, 1.0):
        cs.append(grip + s * sign * (gap_m / 2 + m.finger_t / 2) + up * zc)
        hs.append((m.finger_t / 2, m.finger_half_a, zh))
    n = len(cs)
    return Boxes(np.asarray(cs, float), np.asarray(hs, float), np.broadcast_to(frame, (n, 3, 3)).copy())


def box_of_points(pts: np.ndarray) -> np.ndarray:
    return np.array([pts.min(axis=0), pts.max(axis=0)])


def wrap(a: float) -> float:
    return (a + math.pi) % (2 * math.pi) - math.pi
