"""Interference: an object moved by an outside hand mid-episode, as an evaluation condition.

The outside hand, attached to the episode it disturbs (session/open.py ``attach``; the xArm6
cell's trials, evaluate/trials.py), and what it costs (``InterferenceProbe``); the statistics over
many episodes are evaluate/interference.py's. One definition of the interference event, shared by
every backend that has a scene to disturb (the xArm6 rehearsal cell, sim/xarm_cell/; LIBERO-PRO). It is PRIVILEGED: it
is applied to the simulated scene between two control steps, as a person's hand would, and written
to the evaluator's record only; no role's prompt, no report and no memory ever contains it (the
roles may notice it only in what they measure and see afterwards).

    plan = InterferencePlan.seeded(seed, when="reach")
    itf = Interferer(plan, scene, goal, on_event=record)      # scene: a privileged scene with
    controller_listeners.append(itf.on_controller_event)     # world(), and move_object() below

When (``InterferencePlan.when``):
* ``"reach"``: at the start of the ``after_commands``-th command of the episode while the fetched
  object is not yet held (the hand is on its way to it);
* ``"carry"``: at the start of the ``after_commands``-th command during which it is held;
* ``"between"``: before the first command of the ``after_commands``-th batch (the batch was
  planned, nothing of it has run).
An object the fingers touch is never moved (a person does not pull it out of the hand): such a
command or batch does not count towards ``after_commands``.
What (``InterferencePlan.what``; by default the fetched object for reach and between, the target
for carry): ``"fetched"``, ``"target"`` (the support it is to be put on or in; a region names its
owner, and a fixture cannot be moved), or ``"bystander"`` (a seeded other movable object).
How far: a seeded shift of ``shift_m`` (lo..hi, m) in a seeded direction, kept on the surface the
object stands on (``bounds_xy``), clear of every other body by ``clear_m``, and where ``ok(xy)``
says it is reachable; once per episode. A setting as the command line writes it is ``WHAT@WHEN``
(``interference_setting.parse_setting``), e.g. ``fetched@reach``, ``target@carry``, ``bystander@between``.

What it costs (``InterferenceProbe``, on the episode's record): time and control steps from the
event to the Monitor's cancel, to the next batch, to the next plan and to success; the VLM calls
after it; and the commands that ran on the stale plan (the batch under way when it happened).

The scene interface (duck-typed): ``world()`` (the oracle's world dict: ``bodies`` with ``pos``,
``lo``, ``hi``; ``finger_contacts``; optionally ``regions`` with their ``parent``),
``move_object(name, x, y) -> None`` (metres, base frame; the object lands at rest, its yaw kept)
and optionally ``movable()`` (the names an outside hand can pick up; default: every body).
Units: metres and seconds.
"""
from __future__ import annotations

import math
import random
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Callable

from ..interference_setting import DEFAULT_WHAT, WHAT, WHEN
from ..messages import EventKind


@dataclass(frozen=True)
class InterferencePlan:
    when: str                      # reach | carry
    after_commands: int            # fire at the start of this command (1 = the first) of the moment
    shift_m: tuple                 # (lo, hi) how far the object is moved
    direction_rad: float           # preferred direction of the shift (others are tried if blocked)
    seed: int = 0
    what: str = ""                 # fetched | target | bystander ("": the moment's default)

    def __post_init__(self):
        if self.when not in WHEN:
            raise ValueError(f"interference when: {self.when!r} is not one of {', '.join(WHEN)}")
        if self.what and self.what not in WHAT:
            raise ValueError(f"interference what: {self.what!r} is not one of {', '.join(WHAT)}")
        if self.after_commands < 1:
            raise ValueError(f"interference after_commands: must be >= 1, got {self.after_commands}")
        lo, hi = self.shift_m
        if not 0 < lo <= hi:
            raise ValueError(f"interference shift_m: needs 0 < lo <= hi, got {self.shift_m}")

    @property
    def role(self) -> str:
        """What is moved: fetched, target or bystander."""
        return self.what or DEFAULT_WHAT[self.when]

    @classmethod
    def seeded(cls, seed: int, when: str, shift_m, commands=(1, 3), what: str = "") -> "InterferencePlan":
        """The plan of episode ``seed``: the command it fires at (within ``commands``) and the
        shift's direction drawn from the seed; the moment and the distance range as given."""
        rng = random.Random(f"interference:{seed}")
        return cls(when, rng.randint(*commands), tuple(shift_m), rng.uniform(-math.pi, math.pi), seed, what)


@dataclass
class InterferenceEvent:
    """What the outside hand did (PRIVILEGED: the evaluator's record only)."""
    object: str
    role: str                      # fetched | target | bystander
    when: str                      # the plan's moment
    t_s: float                     # seconds since the Interferer was armed (the episode's start)
    batch_id: str
    command_index: int             # the command about to start when it happened
    moved_from_m: list             # object origin before (x, y, z)
    moved_to_m: list
    shift_m: float
    step: int = -1                 # the control step it happened at (-1: no step counter)
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


def _movable(world: dict, scene) -> list[str]:
    """The bodies an outside hand can pick up: the scene's ``movable()`` if it says, else all of them."""
    fn = getattr(scene, "movable", None)
    names = list(fn()) if fn is not None else list(world["bodies"])
    return sorted(n for n in names if n in world["bodies"])


def body_of(world: dict, name: str | None) -> str | None:
    """The body a goal argument names: itself, or the owner of a region (``world['regions']``)."""
    if name is None or name in world["bodies"]:
        return name
    parent = (world.get("regions") or {}).get(name, {}).get("parent")
    return parent if parent in world["bodies"] else None


class Interferer:
    """Fires the plan once, from the Controller's events (``on_controller_event``: kind, data).
    ``steps_fn()``: the control steps used so far (the event records the step it happened at)."""

    def __init__(self, plan: InterferencePlan, scene, goal, bounds_xy, on_event: Callable[[InterferenceEvent], None],
                 clear_m: float = 0.02, ok: Callable[[tuple], bool] | None = None, clock=time.monotonic,
                 steps_fn: Callable[[], int] | None = None):
        op, fetched, target = (list(goal) + [None, None])[:3]
        if str(op).lower() not in ("on", "in") or fetched is None:
            raise ValueError(f"interference needs an on/in goal to know what is fetched, got {goal}")
        self.plan, self.scene, self.bounds_xy = plan, scene, bounds_xy
        self.fetched, self.target = fetched, target
        self.on_event, self.clear_m, self.ok, self.clock = on_event, clear_m, ok, clock
        self.steps_fn = steps_fn
        self.t0 = clock()
        self.count = 0
        self.event: InterferenceEvent | None = None
        self.missed = ""                 # why it could not fire (nothing movable, no free spot), else ""
        self._lock = threading.Lock()

    def _victim(self, world: dict) -> tuple[str | None, str]:
        """(the body to move or None, why not)."""
        role = self.plan.role
        movable = _movable(world, self.scene)
        if role == "fetched":
            name = self.fetched
        elif role == "target":
            name = body_of(world, self.target)
            if name is None:
                return None, f"the target {self.target} is no body"
        else:
            keep = {self.fetched, body_of(world, self.target)}
            pool = [n for n in movable if n not in keep]
            if not pool:
                return None, "no bystander: every movable object is fetched or the target"
            name = random.Random(f"bystander:{self.plan.seed}").choice(pool)
        if name not in movable:
            return None, f"the {role} {name} is not movable (a fixture)"
        return name, ""

    def on_controller_event(self, kind: str, data: dict) -> None:
        if kind != "command_start" or self.event is not None or self.missed:
            return
        with self._lock:
            world = self.scene.world()
            touched = world.get("finger_contacts", {})
            if self.plan.when == "between":
                if int(data.get("index", -1)) != 0:      # the first command of a batch: nothing of it ran
                    return
            else:
                held = len(touched.get(self.fetched, ())) >= 2
                if (self.plan.when == "reach") == held:
                    return
            name, why = self._victim(world)
            if name is None:
                self.missed = why
                return
            if touched.get(name):                        # nobody pulls an object out of the fingers: later
                return
            self.count += 1
            if self.count < self.plan.after_commands:
                return
            spot = choose_spot(world, name, self.plan, self.bounds_xy, self.clear_m, self.ok)
            if spot is None:
                self.missed = f"no free spot for {name} within {self.plan.shift_m} m"
                return
            before = list(world["bodies"][name]["pos"])
            self.scene.move_object(name, spot[0], spot[1])
            after = list(self.scene.world()["bodies"][name]["pos"])
            self.event = InterferenceEvent(
                name, self.plan.role, self.plan.when, round(self.clock() - self.t0, 3), str(data.get("batch_id", "")),
                int(data.get("index", -1)), [round(v, 5) for v in before], [round(v, 5) for v in after],
                round(math.hypot(after[0] - before[0], after[1] - before[1]), 5),
                int(self.steps_fn()) if self.steps_fn else -1)
        self.on_event(self.event)


class InterferenceProbe:
    """What an interference cost, read off the episode's record as it is written (a Recorder
    listener: ``rec.listeners.append(probe.listen)``). PRIVILEGED: the evaluator's only.
    ``steps_fn()``: the control steps used so far, read when each event is written.

    ``measures(success)``: None without an event, else ms and control steps from the event to the
    Monitor's first cancel after it (``cancel``), to the next batch (``next_batch``), to the next
    plan (``next_plan``) and to the episode's end when it succeeded (``success``); ``stale_commands``:
    the commands of the batch under way that ran after the disturbance (the one starting when it
    happened included: the rest of the batch when nothing cancelled it); ``cancel_boundary``: at
    which action boundary after the disturbance the Monitor's snapshot that led to the cancel was
    taken (1: the first, the end of the command that was starting when it happened; None: no
    cancel); ``honoured_boundary``: at which one the Controller stopped the batch (the Monitor does
    not block execution: one more command runs while it answers); ``recovery_vlm_calls``: VLM calls
    after the event up to the episode's end."""

    KINDS = ("interference", "monitor_cancel", "batch", "plan", "command_start", "report", EventKind.VLM_CALL,
             "episode_end", "trial_end")
    ENDS = ("episode_end", "trial_end")      # a LIBERO episode's end; an xArm6 cell trial's

    def __init__(self, steps_fn: Callable[[], int]):
        self.steps_fn = steps_fn
        self.timeline: list[tuple] = []       # (kind, t_s, step, event)

    def listen(self, ev: dict) -> None:
        if ev.get("kind") in self.KINDS:
            try:
                step = int(self.steps_fn())
            except Exception:  # noqa: BLE001 - a closed simulator at the very end: no step
                step = -1
            self.timeline.append((ev["kind"], float(ev.get("t", 0.0)), step, ev))

    def measures(self, success: bool) -> dict | None:
        tl = self.timeline
        at = next((k for k, e in enumerate(tl) if e[0] == "interference"), None)
        if at is None:
            return None
        _, t0, s0, ev = tl[at]
        s0 = ev.get("step", s0) if ev.get("step", -1) >= 0 else s0
        bid, idx = ev.get("batch_id", ""), int(ev.get("command_index", -1))
        # The hand acts in the disturbed command's start, which is recorded just before; its own
        # record follows the move, and the Monitor's thread may look (and cancel) in between: the
        # moment of interference is that command's start, and what follows it counts.
        start = next((k for k in range(at - 1, -1, -1) if tl[k][0] == "command_start"
                      and tl[k][3].get("batch_id") == bid and tl[k][3].get("index") == idx), None)
        if start is not None:
            t0 = tl[start][1]
        after = [x for k, x in enumerate(tl[start + 1 if start is not None else at + 1:]) if x[0] != "interference"]

        def steps(n):                     # (no step counter, a real-time arm: no steps)
            return None if s0 < 0 or n is None or n < 0 else int(n) - s0

        def first(kind, cond=lambda e: True):
            hit = next((x for x in after if x[0] == kind and cond(x[3])), None)
            return None if hit is None else {"ms": round((hit[1] - t0) * 1000.0, 1), "steps": steps(hit[2])}
        stale = 1 + sum(1 for k, _, _, e in after if k == "command_start" and e.get("batch_id") == bid)
        rep = next((e for k, _, _, e in after if k == "report" and e.get("batch_id") == bid), None)
        cancelled = [c.get("index", 0) for c in (rep or {}).get("results", []) if c.get("status") == "cancelled"]
        mc = next((e for k, _, _, e in after if k == "monitor_cancel" and e.get("batch_id") == bid), None)
        seen = mc.get("after_command") if mc else None
        end = next((x for x in after if x[0] in self.ENDS), None)
        stop = end[1] if end else float("inf")
        out = {"object": ev.get("object"), "role": ev.get("role"), "when": ev.get("when"),
               "shift_mm": round(float(ev.get("shift_m", 0.0)) * 1000.0, 1), "t_s": round(t0, 3), "step": s0,
               "cancel": first("monitor_cancel", lambda e: e.get("batch_id") == bid),
               "next_batch": first("batch", lambda e: (e.get("batch") or {}).get("batch_id") != bid),
               "next_plan": first("plan"),
               "success": ({"ms": round((end[1] - t0) * 1000.0, 1), "steps": steps(end[3].get("steps", end[2]))}
                           if end and success else None),
               "stale_commands": stale,
               "cancel_boundary": (int(seen) - idx + 1) if seen is not None and idx >= 0 else None,
               "honoured_boundary": (min(cancelled) - idx) if cancelled and mc else None,
               "recovery_vlm_calls": sum(1 for k, t, _, _ in after if k == EventKind.VLM_CALL and t <= stop)}
        return out


HAND_CLEAR_M = 0.12          # the outside hand puts nothing closer than this (xy) to the gripper


def spot_check(profile, z_m: float, tcp_xy_m: Callable[[], tuple], hand_clear_m: float = HAND_CLEAR_M,
               reach_xy_m: float | None = None):
    """``ok(xy)`` for ``choose_spot``: reachable for a grasp (inside the profile's workspace at
    height ``z_m``, and no further than ``reach_xy_m`` from the base's vertical axis when given: a
    workspace box's far corners can be out of the arm's reach) and not under or beside the gripper
    (a person does not put an object down onto the moving fingers). ``tcp_xy_m()``: the gripper's
    (x, y) now, m, base frame."""
    def ok(xy) -> bool:
        tx, ty = tcp_xy_m()[:2]
        far = math.hypot(xy[0] - tx, xy[1] - ty) >= hand_clear_m
        near_base = reach_xy_m is None or math.hypot(xy[0], xy[1]) <= reach_xy_m
        return far and near_base and not profile.in_workspace([xy[0] * 1000.0, xy[1] * 1000.0, z_m * 1000.0])
    return ok


LIBERO_HAND_CLEAR_M = 0.08   # LIBERO's tables are small: the hand keeps 8 cm (xy) from the grip point
LIBERO_REACH_XY_M = 0.78     # ... and puts nothing further than this (xy) from the Panda's base, about as
                             # far as LIBERO's own scenes put a fetched object (0.785 m, libero_spatial 6);
                             # a bowl moved to 0.87 m could not be grasped from above (the elbow straight)


def attach(runner, scene, setting: tuple[str, str], seed: int, shift_m, record, steps_fn=None,
           clear_m: float = 0.01, hand_clear_m: float = LIBERO_HAND_CLEAR_M, reach_xy_m: float = LIBERO_REACH_XY_M):
    """Arm interference ``setting`` (what, when) on an EpisodeRunner over a privileged ``scene``
    (``goal_state``, ``world()``, ``move_object``, ``table_bounds()``; optionally ``movable()``):
    the event is recorded as ``interference`` (privileged), and an InterferenceProbe listens to the
    record. Returns (Interferer or None, probe, why it cannot fire or "")."""
    what, when = setting
    probe = InterferenceProbe(steps_fn or (lambda: -1))
    record.listeners.append(probe.listen)
    goal = next((p for p in scene.goal_state if str(p[0]).lower() in ("on", "in") and len(p) == 3), None)
    if goal is None:
        return None, probe, f"no on/in goal in {scene.goal_state}: nothing is fetched"
    # (an oracle episode has about three batches, and the fetched object is in the fingers after the
    # first: "between" is drawn from the first two batches the object is free in)
    plan = InterferencePlan.seeded(seed, when, shift_m, commands=(1, 2) if when == "between" else (1, 3), what=what)
    robot = runner.robot
    itf = Interferer(plan, scene, goal, scene.table_bounds(), clear_m=clear_m, steps_fn=steps_fn,
                     on_event=lambda ev: record("interference", **ev.to_json()),
                     ok=spot_check(robot.profile, 0.10, lambda: tuple(robot.observe().eef_pos_m[:2]), hand_clear_m,
                                   reach_xy_m))
    runner.controller_listeners.append(itf.on_controller_event)
    return itf, probe, ""
