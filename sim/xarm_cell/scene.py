"""The cell's PRIVILEGED scene: the evaluator's and the oracle's view of the simulation, never a role's.

``CellScene`` offers what the oracle brain reads from LIBERO's ``Scene`` (sim/libero_pro/scene.py):
``goal_state`` (BDDL-like predicates, e.g. ``[["on", "red_block", "green_mark"]]``),
``predicate(pred)``, ``world()`` (the same data layout: bodies with boxes, oriented boxes, origins
and rotations; static boxes; ground_z; finger_contacts; no articulations or regions), plus
``success()``, ``placement_error_mm()`` and ``move_object()`` (the outside hand, for interference).
It lives in the emulator's process and reads the physics under the emulator's lock; the xArm6
backend and the roles only ever see the controller's wire protocol and the camera streams. Another
process reaches it through the evaluator-only HTTP channel (sim/scene_channel.py).

``draw_trial(cfg, seed)`` is one seeded trial: a layout (every block and mark at a drawn place),
which block goes on which mark, and the instruction. Units: metres, base frame.

``on A B`` holds when A's centre is over B's top face (inside its footprint, in B's own frame), A is
not pinched between the fingers (released), and A touches B (a block: a physics contact) or, B being
a mark (tape, not a collider), A rests on the table (its lowest point within REST_MM of the table,
slower than REST_SPEED_M_S).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass

import numpy as np

from .config import CellConfig

REST_MM = 3.0              # a block on the table: its lowest point this close to the surface
REST_SPEED_M_S = 0.02      # ... and moving slower than this


@dataclass(frozen=True)
class Trial:
    seed: int
    objects: dict            # name -> (x, y, yaw rad)
    goal: list               # [["on", block, mark]]
    instruction: str

    def to_json(self) -> dict:
        return {"seed": self.seed, "objects": {k: [round(v, 4) for v in xyz] for k, xyz in self.objects.items()},
                "goal": self.goal, "instruction": self.instruction}


def draw_trial(cfg: CellConfig, seed: int, tries: int = 2000) -> Trial:
    """Every block and mark at a seeded place in the layout area, ``min_spacing_m`` apart; one block
    (seeded) to go on one mark (seeded)."""
    rng = random.Random(f"{cfg.name}:{seed}")
    lay = cfg.layout
    names = list(cfg.marks) + list(cfg.blocks)
    for _ in range(tries):
        placed: dict = {}
        for n in names:
            x, y = rng.uniform(*lay.area_x_m), rng.uniform(*lay.area_y_m)
            if any(math.hypot(x - px, y - py) < lay.min_spacing_m for px, py, _ in placed.values()):
                break
            yaw = math.radians(rng.uniform(*lay.yaw_deg)) if n in cfg.blocks else 0.0
            placed[n] = (x, y, yaw)
        if len(placed) == len(names):
            block, mark = rng.choice(sorted(cfg.blocks)), rng.choice(sorted(cfg.marks))
            text = f"put the {cfg.blocks[block].label} on the {cfg.marks[mark].label}"
            return Trial(seed, placed, [["on", block, mark]], text)
    raise ValueError(f"{cfg.source}: layout: {len(names)} objects do not fit {lay.min_spacing_m:g} m apart "
                     f"in x {lay.area_x_m}, y {lay.area_y_m}")


class CellScene:
    """Live privileged view of one CellEmulator's simulation (see the module docstring)."""

    privileged = True

    def __init__(self, emulator):
        self._emu = emulator
        self.trial: Trial | None = None

    @property
    def _ph(self):
        return self._emu.physics

    @property
    def cfg(self) -> CellConfig:
        return self._emu.cell

    # -- the task -------------------------------------------------------------------------------
    @property
    def goal_state(self) -> list:
        return [list(p) for p in (self.trial.goal if self.trial else [])]

    @property
    def language_instruction(self) -> str:
        return self.trial.instruction if self.trial else ""

    @property
    def object_names(self) -> list[str]:
        return list(self.cfg.blocks) + list(self.cfg.marks)

    def _check(self, name: str) -> None:
        if name not in self.cfg.blocks and name not in self.cfg.marks:
            raise KeyError(f"unknown object {name!r}; known: {', '.join(self.object_names)}")

    # -- predicates -----------------------------------------------------------------------------
    def predicate(self, pred) -> bool:
        op = str(pred[0]).lower()
        if op != "on" or len(pred) != 3:
            raise ValueError(f"the cell knows only ('on', A, B) predicates, got {list(pred)}")
        a, b = str(pred[1]), str(pred[2])
        self._check(a)
        self._check(b)
        with self._emu._lock:
            return self._on_locked(a, b)

    def _on_locked(self, a: str, b: str) -> bool:
        ph = self._ph
        pa, ra = ph.pose(a)
        pb, rb = ph.pose(b)
        half = np.asarray(self._size(b)) / 2
        local = rb.T @ (pa - pb)
        over = abs(local[0]) <= half[0] and abs(local[1]) <= half[1] and local[2] > 0
        released = len(ph.finger_contacts().get(a, ())) < 2
        if b in self.cfg.marks:            # tape on the table: A rests on the table over it, still
            _, ha, _ = ph.obb(ph.model.geom(a).id)
            bottom = pa[2] - float(np.abs(ra[2]) @ ha)
            table = self.cfg.table_top_z_m
            resting = abs(bottom - table) <= REST_MM / 1000.0 and ph.speed_of(a) < REST_SPEED_M_S
            return bool(over and released and resting)
        return bool(over and released and ph.touching(a, b))

    def _size(self, name: str) -> tuple:
        return (self.cfg.blocks[name] if name in self.cfg.blocks else self.cfg.marks[name]).size_m

    def goal_status(self) -> list:
        return [(p, self.predicate(p)) for p in self.goal_state]

    def success(self) -> bool:
        """Every goal predicate holds (False with no trial set)."""
        return bool(self.goal_state) and all(t for _, t in self.goal_status())

    def placement_error_mm(self) -> float | None:
        """For an ``on A B`` goal: how far A's centre is from B's centre in the table plane (mm)."""
        if not self.goal_state:
            return None
        _, a, b = self.goal_state[0]
        with self._emu._lock:
            pa, _ = self._ph.pose(a)
            pb, _ = self._ph.pose(b)
        return float(np.linalg.norm((pa - pb)[:2]) * 1000.0)

    # -- the oracle's world ---------------------------------------------------------------------
    def world(self) -> dict:
        """The oracle's geometry, as ``Scene.world()`` lays it out (base frame, m): ``bodies`` (each
        block: kind object; each mark: kind fixture) with ``pos``, ``rot`` (row-major), ``local_lo`` /
        ``local_hi``, ``boxes``, ``obbs``, ``lo`` / ``hi``; ``static`` / ``static_obbs`` (the table);
        ``ground_z`` (the floor); ``finger_contacts``; no articulations, predicates or regions."""
        with self._emu._lock:
            ph = self._ph
            bodies = {}
            for n in self.object_names:
                pos, rot = ph.pose(n)
                c, h, r = ph.obb(ph.model.geom(n).id)
                bodies[n] = _body_entry("object" if n in self.cfg.blocks else "fixture", pos, rot, c, h, r)
            c, h, r = ph.obb(ph.table_geom)
            ext = np.abs(r) @ h
            static = [[(c - ext).tolist(), (c + ext).tolist()]]
            static_obbs = [c.tolist() + h.tolist() + r.ravel().tolist()]
            ground = float(ph.data.geom_xpos[ph.floor_geom][2])
            return {"frame": "base", "units": "m", "bodies": bodies, "static": static, "static_obbs": static_obbs,
                    "ground_z": ground, "articulations": [], "predicates": {}, "regions": {},
                    "finger_contacts": ph.finger_contacts()}

    def snapshot(self) -> dict:
        """JSON-able: the trial, the goal's truth, the world."""
        return {"frame": "base", "units": "m", "trial": self.trial.to_json() if self.trial else None,
                "goal_state": self.goal_state, "goal_status": [[p, t] for p, t in self.goal_status()],
                "success": self.success(), "placement_error_mm": self.placement_error_mm(), "world": self.world()}

    # -- the outside hand -----------------------------------------------------------------------
    def move_object(self, name: str, x: float, y: float, yaw: float | None = None) -> None:
        """Lift ``name`` and set it down at rest with its origin at (x, y) m (yaw kept unless given),
        between two physics steps."""
        self._check(name)
        with self._emu._lock:
            self._ph.move_object(name, float(x), float(y), yaw)

    def table_bounds(self, margin_m: float = 0.0) -> tuple:
        """The layout area (where objects may be put down), shrunk by ``margin_m``: ((x0, x1), (y0, y1))."""
        lay = self.cfg.layout
        return ((lay.area_x_m[0] - 0.03 + margin_m, lay.area_x_m[1] + 0.03 - margin_m),
                (lay.area_y_m[0] - 0.03 + margin_m, lay.area_y_m[1] + 0.03 - margin_m))


def _body_entry(kind: str, pos, rot, c, h, r) -> dict:
    ext = np.abs(r) @ h
    lo, hi = c - ext, c + ext
    loc_c = rot.T @ (c - pos)
    loc_ext = np.abs(rot.T @ r) @ h
    return {"kind": kind, "pos": pos.tolist(), "rot": rot.ravel().tolist(),
            "local_lo": (loc_c - loc_ext).tolist(), "local_hi": (loc_c + loc_ext).tolist(),
            "boxes": [[lo.tolist(), hi.tolist()]], "obbs": [c.tolist() + h.tolist() + r.ravel().tolist()],
            "lo": lo.tolist(), "hi": hi.tolist()}
