"""Interference: an object moved by an outside hand mid-episode, as an evaluation condition.

The one definition of the interference event, shared by every backend that has a scene to disturb
(the xArm6 rehearsal cell today, sim/xarm_cell/; LIBERO-PRO with issue 16). It is PRIVILEGED: it
is applied to the simulated scene between two control steps, as a person's hand would, and written
to the evaluator's record only; no role's prompt, no report and no memory ever contains it (the
roles may notice it only in what they measure and see afterwards).

    plan = InterferencePlan.seeded(seed, when="reach")
    itf = Interferer(plan, scene, goal, on_event=record)      # scene: a privileged scene with
    controller_listeners.append(itf.on_controller_event)     # world(), and move_object() below

What moves and when (``InterferencePlan``):
* ``when="reach"``: the object being fetched, at the start of the ``after_commands``-th command of
  the episode while it is not yet held (the hand is on its way to it);
* ``when="carry"``: the target (the support it is to be put on), at the start of the
  ``after_commands``-th command during which the fetched object is held.
How far: a seeded shift of ``shift_m`` (lo..hi, m) in a seeded direction, kept on the surface the
object stands on (``bounds_xy``), clear of every other body by ``clear_m``, and where ``ok(xy)``
says it is reachable; once per episode.

The scene interface (duck-typed): ``world()`` (the oracle's world dict: ``bodies`` with ``pos``,
``lo``, ``hi``; ``finger_contacts``) and ``move_object(name, x, y) -> None`` (metres, base frame;
the object lands at rest, its yaw kept). Units: metres and seconds.
"""
from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

WHEN = ("reach", "carry")


@dataclass(frozen=True)
class InterferencePlan:
    when: str                      # reach | carry
    after_commands: int            # fire at the start of this command (1 = the first) of the moment
    shift_m: tuple                 # (lo, hi) how far the object is moved
    direction_rad: float           # preferred direction of the shift (others are tried if blocked)
    seed: int = 0

    def __post_init__(self):
        if self.when not in WHEN:
            raise ValueError(f"interference when: {self.when!r} is not one of {', '.join(WHEN)}")
        if self.after_commands < 1:
            raise ValueError(f"interference after_commands: must be >= 1, got {self.after_commands}")
        lo, hi = self.shift_m
        if not 0 < lo <= hi:
            raise ValueError(f"interference shift_m: needs 0 < lo <= hi, got {self.shift_m}")

    @classmethod
    def seeded(cls, seed: int, when: str, shift_m, commands=(1, 3)) -> "InterferencePlan":
        """The plan of episode ``seed``: the command it fires at (within ``commands``) and the
        shift's direction drawn from the seed; the moment and the distance range as given."""
        rng = random.Random(f"interference:{seed}")
        return cls(when, rng.randint(*commands), tuple(shift_m), rng.uniform(-math.pi, math.pi), seed)


@dataclass
class InterferenceEvent:
    """What the outside hand did (PRIVILEGED: the evaluator's record only)."""
    object: str
    role: str                      # fetched | target
    when: str                      # the plan's moment
    t_s: float                     # seconds since the Interferer was armed (the episode's start)
    batch_id: str
    command_index: int             # the command about to start when it happened
    moved_from_m: list             # object origin before (x, y, z)
    moved_to_m: list
    shift_m: float
    privileged: bool = True
    extra: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return asdict(self)


def _overlap(lo_a, hi_a, lo_b, hi_b, margin: float) -> bool:
    return all(lo_a[i] - margin < hi_b[i] and lo_b[i] - margin < hi_a[i] for i in range(2))


def choose_spot(world: dict, name: str, plan: InterferencePlan, bounds_xy, clear_m: float = 0.02,
                ok: Callable[[tuple], bool] | None = None, tries: int = 240):
    """Where the hand puts ``name``: (x, y) of its origin, or None if nowhere fits. Shifts are tried
    from the plan's direction outwards in both senses; lengths are drawn from the plan's range."""
    b = world["bodies"][name]
    pos, lo, hi = b["pos"], b["lo"], b["hi"]
    others = [(o["lo"], o["hi"]) for n, o in world["bodies"].items() if n != name]
    (x0, x1), (y0, y1) = bounds_xy
    rng = random.Random(f"spot:{plan.seed}:{name}")
    for k in range(tries):
        turn = (k // 2 + 1) * 0.26 * (1 if k % 2 else -1) if k else 0.0   # 15 deg steps, alternating
        ang = plan.direction_rad + turn
        d = rng.uniform(*plan.shift_m)
        dx, dy = d * math.cos(ang), d * math.sin(ang)
        nlo, nhi = (lo[0] + dx, lo[1] + dy), (hi[0] + dx, hi[1] + dy)
        if nlo[0] < x0 or nhi[0] > x1 or nlo[1] < y0 or nhi[1] > y1:
            continue
        if any(_overlap(nlo, nhi, olo, ohi, clear_m) for olo, ohi in others):
            continue
        xy = (pos[0] + dx, pos[1] + dy)
        if ok is not None and not ok(xy):
            continue
        return xy
    return None


class Interferer:
    """Fires the plan once, from the Controller's events (``on_controller_event``: kind, data)."""

    def __init__(self, plan: InterferencePlan, scene, goal, bounds_xy, on_event: Callable[[InterferenceEvent], None],
                 clear_m: float = 0.02, ok: Callable[[tuple], bool] | None = None, clock=time.monotonic):
        op, fetched, target = (list(goal) + [None, None])[:3]
        if str(op).lower() not in ("on", "in") or fetched is None:
            raise ValueError(f"interference needs an on/in goal to know what is fetched, got {goal}")
        self.plan, self.scene, self.bounds_xy = plan, scene, bounds_xy
        self.fetched, self.target = fetched, target
        self.on_event, self.clear_m, self.ok, self.clock = on_event, clear_m, ok, clock
        self.t0 = clock()
        self.count = 0
        self.event: InterferenceEvent | None = None
        self.missed = ""                 # why it could not fire (no free spot), else ""
        self._lock = threading.Lock()

    def on_controller_event(self, kind: str, data: dict) -> None:
        if kind != "command_start" or self.event is not None or self.missed:
            return
        with self._lock:
            world = self.scene.world()
            held = len(world.get("finger_contacts", {}).get(self.fetched, ())) >= 2
            if (self.plan.when == "reach") == held:
                return
            self.count += 1
            if self.count < self.plan.after_commands:
                return
            name, role = (self.fetched, "fetched") if self.plan.when == "reach" else (self.target, "target")
            spot = choose_spot(world, name, self.plan, self.bounds_xy, self.clear_m, self.ok)
            if spot is None:
                self.missed = f"no free spot for {name} within {self.plan.shift_m} m"
                return
            before = list(world["bodies"][name]["pos"])
            self.scene.move_object(name, spot[0], spot[1])
            after = list(self.scene.world()["bodies"][name]["pos"])
            self.event = InterferenceEvent(
                name, role, self.plan.when, round(self.clock() - self.t0, 3), str(data.get("batch_id", "")),
                int(data.get("index", -1)), [round(v, 5) for v in before], [round(v, 5) for v in after],
                round(math.hypot(after[0] - before[0], after[1] - before[1]), 5))
        self.on_event(self.event)
