"""Ground truth of the diagnostic, from PRIVILEGED state only.

Every question stores, under its ``privileged`` key, the snapshot this module needs (robot state,
object AABBs, goal regions, the truth of the goal predicates, the subgoal asked about). The
generator labels questions with these functions, and the oracle answers with the same functions
from the same snapshot, so a set answerable by the oracle is a set whose labels come from
privileged state and nothing else. The snapshot never goes into a prompt.

Definitions (metres, base frame; the v1 pick-and-place geometry of ``geometry.py``:
``PickPlaceGeometry._grasp``, ``_held``, ``_target_box``, ``_tallest_between``):

* Remaining cost of a subgoal, the quantity "progress" reduces:
    grasp A  path length from the grip point to A's grasp point along the oracle's route
             (over the pre-grasp point 5 cm above it, or straight down once in its column),
             plus a closing cost, plus an opening cost if the fingers are not open; 0 once held.
    carry A over B  the lift still needed to clear the tallest object on the way (3 cm margin)
             plus A's horizontal distance from above B's centre; dropping A costs 1.
    place A on/in B  A's height above the release height, its horizontal offset from B's centre
             and a release cost; 0 once released on B, 1 if released anywhere else.
  A command "makes progress" when it lowers the cost by at least 30 % of its own size; a
  distractor raises it by as much (a move) or does nothing useful (a no-op gripper command, a
  premature ``done``). Commands whose outcome the kinematic model cannot call (closing a few cm
  from the grasp point, releasing 2-4 cm above the target) are never offered.
* Progress stages: four descriptions per subgoal kind (``STAGES``); moments near a stage
  boundary (a margin each side) are not asked about.
* Completion: the subgoal's stated success criterion, decided as the oracle Verifier decides it
  (grasp: held; carry: held within 2 cm of above B's centre and above B's top), except that a
  place also needs the open gripper its criterion names ("rests on B and the gripper is open";
  the Verifier accepts the BDDL predicate alone); the task: every goal predicate (the benchmark's
  success check), not asked while a goal object is in place but still gripped.
"""
from __future__ import annotations

import math

import numpy as np

from ..commands import Done, Gripper, Move, Wait, parse_command
from ..errors import CommandError
from .geometry import APPROACH_M, HOLD_MIN_MM, RELEASE_M, PickPlaceGeometry

OPEN_FRACTION = 0.9            # fingers count as open from here
GRIP_COST_M = 0.03             # equivalent path cost of having to (re)open the fingers
CLOSE_COST_M = 0.01            # ... of the closing that finishes a grasp
RELEASE_COST_M = 0.01          # ... of the opening that finishes a place
FAIL_COST_M = 1.0              # the subgoal's object is lost (dropped, released off target)
CARRY_CLEAR_M = 0.03           # the carried object's bottom must clear the way by this much
PROGRESS_FRACTION = 0.3        # |delta cost| >= this x the command's size decides an option
KINDS = ("grasp", "carry", "place")

STAGES = {
    "grasp": (
        "not started: the gripper is still far from the {a} (more than 10 cm away)",
        "approaching: the gripper is within 10 cm of the {a}, but the fingers are not around it yet",
        "in position: the open fingers are around the {a}, ready to close",
        "done: the {a} is held between the closed fingers",
    ),
    "carry": (
        "not started: the {a} is held but not lifted yet (less than 1.5 cm above where it rested)",
        "under way: the {a} is lifted but still more than 10 cm (horizontally) from being above the {b}",
        "nearly there: the {a} is lifted and within 10 cm of being above the {b}, but not there yet",
        "done: the {a} is held clear above the {b}",
    ),
    "place": (
        "not started: the {a} is still held well above the {b} (more than 3 cm above it)",
        "nearly there: the {a} is held just above the {b} (less than 3 cm above it), not released yet",
        "done: the {a} has been released and rests {rel} the {b}",
        "failed: the {a} was released but it is not {rel} the {b}",
    ),
}


PLACE_IN_STAGES = (     # place into a region (a basket, a drawer): heights above its floor
    "not started: the {a} is still held well above the floor of the {b} (more than 3 cm above it)",
    "nearly there: the {a} is held low in the {b} (less than 3 cm above its floor), not released yet",
    "done: the {a} has been released and rests in the {b}",
    "failed: the {a} was released but it is not in the {b}",
)


def stage_texts(kind: str, a: str, b: str, pred) -> list[str]:
    rel = "in" if pred and str(pred[0]).lower() == "in" else "on"
    texts = PLACE_IN_STAGES if (kind == "place" and rel == "in") else STAGES[kind]
    return [t.format(a=a, b=b, rel=rel) for t in texts]


class SnapshotScene:
    """The scene interface the v1 geometry reads (geometry.py), over a stored snapshot."""

    def __init__(self, priv: dict):
        self.priv = priv
        self.goal_state = [list(p) for p in priv["goal_state"]]
        self.object_names = list(priv["movable"])
        self.region_names = list(priv.get("regions", {}))
        self._preds = {_key(p): bool(v) for p, v in priv.get("predicates", [])}

    def object_aabb(self, name: str):
        o = self.priv["objects"][name]
        return np.asarray(o["lo"], dtype=float), np.asarray(o["hi"], dtype=float)

    def region(self, name: str) -> dict:
        r = self.priv["regions"][name]
        return {"lo": np.asarray(r["lo"], dtype=float), "hi": np.asarray(r["hi"], dtype=float)}

    def predicate(self, pred) -> bool:
        k = _key(pred)
        if k not in self._preds:
            raise KeyError(f"predicate {list(pred)} is not in the snapshot")
        return self._preds[k]


def _key(pred) -> str:
    return " ".join(str(x).lower() for x in pred)


class Truth:
    """Ground truth for one privileged snapshot. ``oracle``: the v1 ``PickPlaceGeometry`` (its
    ``scene`` is replaced by the snapshot's)."""

    def __init__(self, priv: dict, oracle: PickPlaceGeometry):
        self.priv = priv
        self.o = oracle
        self.o.scene = SnapshotScene(priv)
        self.scene = self.o.scene
        rob = priv["robot"]
        self.eef = np.asarray(rob["eef_pos_m"], dtype=float)
        self.width = float(rob["gripper_width_mm"])
        self.frac = float(rob["gripper_fraction"])
        sg = priv.get("subgoal") or {}
        self.kind = sg.get("kind", "")
        self.a, self.b, self.pred = sg.get("a"), sg.get("b"), sg.get("pred")
        self.start = priv.get("subgoal_start") or {}
        self.dirs = {k: np.asarray(v, dtype=float) for k, v in oracle.profile.directions.items()}

    # -- basics -------------------------------------------------------------------------------
    def held(self, a: str | None = None, eef=None, width=None) -> bool:
        a = a or self.a
        return bool(self.o._held(a, self.eef if eef is None else eef, self.width if width is None else width))

    def _held_margin(self) -> bool:
        """The finger gap is near an edge of the 'held' band (the answer would hinge on 1 mm)."""
        top = self.o.profile.gripper_max_width_mm - 4.0
        return abs(self.width - HOLD_MIN_MM) < 1.0 or abs(self.width - top) < 1.0

    def _grasp_point(self) -> np.ndarray:
        return np.asarray(self.o._grasp(self.a)[0], dtype=float)

    def _support(self):
        blo, bhi = self.o._target_box(self.b)
        on = str(self.pred[0]).lower() == "on" if self.pred else True
        return float(bhi[2] if on else blo[2] + 0.01), blo, bhi

    # -- completion -----------------------------------------------------------------------------
    def achieved(self) -> bool | None:
        """Is the snapshot's subgoal (or, for kind 'task', the task) achieved? None: too close to call."""
        k = self.kind
        if k == "task":
            done = all(self.scene.predicate(p) for p in self.scene.goal_state)
            if done and any(len(p) > 1 and p[1] in self.priv["objects"] and self.held(p[1])
                            for p in self.scene.goal_state):
                return None                       # in place but still gripped: mid-release
            return done
        if k == "place":
            # the criterion the question states: rests on/in B *and* the gripper is open
            if not self.scene.predicate(self.pred):
                return False
            if self._held_margin():
                return None
            return not self.held()                # released (a wide object held reads ~0.8 open)
        if self._held_margin():
            return None
        held = self.held()
        if k == "grasp":
            return held
        if k == "carry":
            if not held:
                return False
            alo, ahi = self.scene.object_aabb(self.a)
            blo, bhi = self.o._target_box(self.b)
            dxy = float(np.linalg.norm((alo + ahi)[:2] / 2 - (blo + bhi)[:2] / 2))
            dz = float(alo[2] - (bhi[2] - 0.005))
            if 0.015 <= dxy <= 0.03 or abs(dz) < 0.01:
                return None
            return dxy < 0.02 and dz > 0
        raise ValueError(f"no completion rule for subgoal kind {k!r}")

    # -- progress stages ------------------------------------------------------------------------
    def stage(self) -> int | None:
        """Index into STAGES[kind] for the snapshot's moment; None near a boundary or undefined."""
        k = self.kind
        if k not in KINDS or self._held_margin():
            return None
        held = self.held()
        if k == "grasp":
            if held:
                return 3
            if self.frac < OPEN_FRACTION:
                return None                       # closed on nothing: none of the four
            d = float(np.linalg.norm(self.eef - self._grasp_point()))
            if d > 0.115:
                return 0
            if 0.025 < d <= 0.085:
                return 1
            if d <= 0.015:
                return 2
            return None
        if k == "carry":
            if not held or "a_bottom_z_m" not in self.start:
                return None
            done = self.achieved()
            if done is None:
                return None
            if done:
                return 3
            alo, ahi = self.scene.object_aabb(self.a)
            lift = float(alo[2] - self.start["a_bottom_z_m"])
            if lift < 0.01:
                return 0
            if lift < 0.025:
                return None
            blo, bhi = self.o._target_box(self.b)
            dxy = float(np.linalg.norm((alo + ahi)[:2] / 2 - (blo + bhi)[:2] / 2))
            if dxy > 0.115:
                return 1
            if dxy <= 0.085:
                return 2
            return None
        # place
        alo, _ = self.scene.object_aabb(self.a)
        support, _, _ = self._support()
        if held:
            h = float(alo[2] - support)
            if h > 0.04:
                return 0
            if h <= 0.02:
                return 1
            return None
        if self.frac < OPEN_FRACTION:
            return None                           # not held, not open: dropped mid-carry, say
        return 2 if self.scene.predicate(self.pred) else 3

    # -- action: remaining cost and the effect of a command ------------------------------------
    def cost(self, eef=None, frac=None, held=None, shift=None) -> float | None:
        """Remaining cost (m) of the subgoal in a kinematic state: the grip point ``eef``, the
        finger opening ``frac``, whether the subgoal's object is ``held``, and ``shift``: how far a
        held object has moved with the hand since the snapshot."""
        eef = self.eef if eef is None else np.asarray(eef, dtype=float)
        frac = self.frac if frac is None else frac
        held = self.held() if held is None else held
        shift = np.zeros(3) if shift is None else np.asarray(shift, dtype=float)
        k = self.kind
        if k == "grasp":
            if held:
                return 0.0
            p = self._grasp_point()
            pre = p + [0, 0, APPROACH_M]
            if np.linalg.norm(eef[:2] - p[:2]) < 0.015 and eef[2] <= pre[2] + 0.01:
                pos = float(np.linalg.norm(eef - p))
            elif eef[2] >= pre[2] - 0.005:
                pos = float(np.linalg.norm(eef - pre)) + APPROACH_M
            else:
                pos = float(pre[2] - eef[2] + np.linalg.norm(eef[:2] - pre[:2])) + APPROACH_M
            return pos + (0.0 if frac >= OPEN_FRACTION else GRIP_COST_M) + CLOSE_COST_M
        if k == "carry":
            if not held:
                return FAIL_COST_M
            alo, ahi = (v + shift for v in self.scene.object_aabb(self.a))
            blo, bhi = self.o._target_box(self.b)
            ca, cb = (alo + ahi)[:2] / 2, (blo + bhi)[:2] / 2
            top = max(float(bhi[2]), self.o._tallest_between(ca, cb, float(max(ahi[:2] - alo[:2])) / 2 + 0.01,
                                                             (self.a, self.b)))
            need = max(0.0, top + CARRY_CLEAR_M - float(alo[2]))
            return need + float(np.linalg.norm(ca - cb))
        if k == "place":
            if not held:
                return 0.0 if self.scene.predicate(self.pred) else FAIL_COST_M
            alo, ahi = (v + shift for v in self.scene.object_aabb(self.a))
            support, blo, bhi = self._support()
            h = max(0.0, float(alo[2]) - (support + RELEASE_M))
            dxy = float(np.linalg.norm((alo + ahi)[:2] / 2 - (blo + bhi)[:2] / 2))
            return h + dxy + RELEASE_COST_M
        return None

    def delta(self, cmd: dict) -> float | None:
        """How much ``cmd`` lowers the remaining cost (m; negative: it sets the subgoal back).
        None when the kinematic model cannot call the outcome (such commands are never offered)."""
        if self.kind not in KINDS:
            return None
        held0 = self.held()
        c0 = self.cost(held=held0)
        c = self.command(cmd)
        if isinstance(c, (Done, Wait)):
            return 0.0
        if isinstance(c, Move):
            v = c.displacement_mm / 1000.0
            c1 = self.cost(eef=self.eef + v, held=held0, shift=v if held0 else None)
            return c0 - c1
        if isinstance(c, Gripper) and c.action:
            act = c.action
            if self.kind == "grasp":
                if held0:
                    return None
                if act == "open":
                    return c0 - self.cost(frac=1.0, held=False)
                d = float(np.linalg.norm(self.eef - self._grasp_point()))
                if self.frac >= OPEN_FRACTION and d < 0.015:
                    return c0 - 0.0                       # closes around it: held
                if d < 0.03:
                    return None                           # might catch it, might not
                return c0 - self.cost(frac=0.0, held=False)
            if self.kind == "carry":
                if act == "close":
                    return 0.0 if held0 else None          # already closed on it: nothing changes
                return c0 - FAIL_COST_M if held0 else None
            # place
            if not held0:
                return None
            if act == "close":
                return 0.0
            alo, ahi = self.scene.object_aabb(self.a)
            support, blo, bhi = self._support()
            h = float(alo[2] - support)
            dxy = float(np.linalg.norm((alo + ahi)[:2] / 2 - (blo + bhi)[:2] / 2))
            if h <= 0.02 and dxy <= 0.02:
                return c0 - 0.0                           # released on the target
            if h <= 0.04 or dxy <= 0.03:
                return None                               # a short drop: it may well land
            return c0 - FAIL_COST_M
        return None

    def command(self, cmd: dict):
        """An option's command, typed by the vocabulary's parser (``commands.parse_command``), so the
        truth reads a command as the Controller would. None for an op this model does not judge."""
        try:
            return parse_command(cmd, self.o.profile, "option")
        except CommandError:
            return None

    def decides(self, cmd: dict, delta: float | None) -> str:
        """'progress', 'setback' (or a no-op), or 'unclear' for an option command."""
        if delta is None:
            return "unclear"
        c = self.command(cmd)
        size = c.distance_mm / 1000.0 if isinstance(c, Move) else 0.0
        if isinstance(c, Move):
            if delta >= PROGRESS_FRACTION * size:
                return "progress"
            if delta <= -PROGRESS_FRACTION * size:
                return "setback"
            return "unclear"
        if delta > 0.005:
            return "progress"
        if delta <= 0.0:
            return "setback"
        return "unclear"


def unit(v) -> np.ndarray:
    v = np.asarray(v, dtype=float)
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else v


def round_list(a, nd: int = 5) -> list[float]:
    return [round(float(x), nd) for x in np.asarray(a, dtype=float).ravel()]


def finite(x) -> bool:
    return x is not None and math.isfinite(float(x))
