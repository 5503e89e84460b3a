"""Overlapping the VLM's thinking with the arm's motion: the settings, the prediction, the check.

Four overlaps, each off by default (the plain serial loop, as the paper ran it):

    speculate      while a batch runs, the Executor is asked for the next one from the state the batch
                   is expected to reach (``predict``: the predicted end pose from the commanded targets
                   and the report of every command done); the answer is used only if the real report
                   matches that expectation (``mismatch``: every command done, nothing cancelled or
                   blocked, the end pose within the Controller's tolerances, the gripper where it was
                   sent, and for a brain that reads the simulator's scene, no object moved), otherwise
                   dropped and the Executor asked again from the real report.
    verify_ahead   when a batch claims its subgoal, the Verifier and the Executor's first batch for the
                   next subgoal are asked at once; that batch runs only after an accepting verdict.
    plan_with_probe  at the episode's start, the camera probe's three calls (``brains/probe.py``) are
                   asked at once and the Planner's first call beside them, from the same look; the
                   plan is used only when the probe finds the endpoint fit, otherwise dropped (the
                   episode ends before its first plan, as in the serial loop). Nothing moves before.
    retry_with_replan  when the Planner is asked to replan (a rejected claim, an escalation), the
                   Executor is asked beside it for the current subgoal again, from the same look and
                   as the loop head would ask it after a plan that keeps the remaining subgoals
                   (``Ahead.plan``); the batch is used only if the Planner's decision
                   is that plan (every remaining subgoal's description and success criterion the
                   same; the ids may differ) and, for a scene-reading brain, no object moved;
                   otherwise dropped and the Executor asked from the new plan. Nothing moves while
                   the Planner thinks.

A call asked ahead is told what it is (a model must not take it for a stale request): a speculative
one that its report is the expected one and its images older (``expected_note``), the others in the
verdict's place what is pending (``pending_note``). A look asked for beside the Verifier or the Planner is
answered at the loop head when the call is used (its frames are still the current ones); a speculation
is offered none (its images are older than the state it reads).

The episode machine (``machine.py``) decides; a dropped answer never reaches the Controller.
"""
from __future__ import annotations

import math
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Callable

import numpy as np

from ..commands import Done, Gripper, Move, Rotate, Wait, check_batch
from ..errors import ConfigError
from ..messages import CommandResult, Report, Subgoal, Verdict

GRIPPER_TOLERANCE = 0.05      # the gripper's opening (fraction of the stroke) within this of where it was sent
OBJECT_TOLERANCE_MM = 5.0     # a scene-reading brain's objects within this of where they were when it read them


@dataclass(frozen=True)
class Ahead:
    """What an Executor call made before its time is asked from (``ExecutorComponent.propose``)."""
    subgoal: Subgoal
    report: Report | None             # the report it reads: the expected one (speculation) or the claim's
    verdict: Verdict | None = None    # the verdict it reads (None: the last one; with ``plan``: none, as after
                                      # a new plan), saying what is pending (verify_ahead, retry_with_replan)
    plan: tuple | None = None         # the plan it is shown (None: the current one)
    note: str = ""                    # what the report is (speculate: the expected one), shown above it
    looks: bool = False               # a look is answered: its frames stay the current ones (nothing moves)


@dataclass(frozen=True)
class Overlap:
    speculate: bool = False       # ask the Executor for the next batch while one runs
    verify_ahead: bool = False    # ask the Verifier and the next subgoal's first batch at once
    plan_with_probe: bool = False  # ask the camera probe's calls at once and the first plan beside them
    retry_with_replan: bool = False  # ask the Executor for the current subgoal beside the Planner's replan

    @property
    def any(self) -> bool:
        return any(getattr(self, f.name) for f in fields(self))

    @classmethod
    def parse(cls, value, where: str = "overlap") -> "Overlap":
        """``{}``/None (off), ``true`` (all on), ``false`` or ``{speculate: bool, verify_ahead: bool,
        plan_with_probe: bool, retry_with_replan: bool}``."""
        if value is None or value == {}:
            return cls()
        if isinstance(value, bool):
            return cls(**{f.name: value for f in fields(cls)})
        if isinstance(value, Overlap):
            return value
        if not isinstance(value, dict):
            keys = ", ".join(f"{f.name}: bool" for f in fields(cls))
            raise ConfigError(f"{where}: must be true, false or {{{keys}}}, got {value!r}")
        known = [f.name for f in fields(cls)]
        bad = sorted(set(value) - set(known))
        if bad:
            raise ConfigError(f"{where}: unknown key(s) {bad} (known: {', '.join(known)})")
        for k, v in value.items():
            if not isinstance(v, bool):
                raise ConfigError(f"{where}.{k}: must be true or false, got {v!r}")
        return cls(**value)


OFF = Overlap()
PROBE_PLAN_TAG = "plan_with_probe:plan"     # the first plan's call asked beside the camera probe (its ``ahead``)


_AHEAD = threading.local()


def ahead_tag() -> str:
    """The tag of the call made ahead that this thread runs ("" on any other thread): its ``vlm_call``
    event carries it as ``ahead``, so its cost is counted apart."""
    return getattr(_AHEAD, "value", "")


class AheadPool:
    """The driver's side of the overlap (the in-process runner, the ROS 2 Executor node): a small thread
    pool for the calls made ahead (the machine's ``spawn``), each run under its tag (``ahead_tag``)."""

    def __init__(self, workers: int = 2):
        self._pool = ThreadPoolExecutor(workers, thread_name_prefix="ahead")

    def spawn(self, fn: Callable, tag: str) -> Future:
        def run():
            _AHEAD.value = tag
            try:
                return fn()
            finally:
                _AHEAD.value = ""
        return self._pool.submit(run)

    def close(self, wait: bool = True) -> None:
        """No more calls; ``wait``: until those under way end (a dropped one is then recorded and costed)."""
        self._pool.shutdown(wait=wait)


def overlap_of(brain) -> Overlap:
    """The overlap a brain's VLM config asks for (a wrapper's: its inner brain's); off for a brain without one."""
    return Overlap.parse(getattr(brain, "overlap", None) or getattr(getattr(brain, "inner", None), "overlap", None)
                         or OFF)


def scene_basis(brain) -> dict | None:
    """Where the objects are (mm), for a brain that reads the simulator's scene (the oracle, the noisy
    brain, an openai brain with ``send_scene``): its answer read them, so one asked ahead is used only if
    none moved meanwhile. None for a brain that reads only its prompt."""
    b, scene = brain, None
    for _ in range(4):
        fn = getattr(getattr(b, "cfg", None), "send_scene", False) and getattr(b, "scene_fn", None)
        scene = fn() if fn else getattr(b, "scene", None)
        if scene is not None or getattr(b, "inner", None) is None:
            break
        b = b.inner
    names = getattr(scene, "object_names", None)
    if scene is None or not names or not hasattr(scene, "object_aabb"):
        return None
    out = {}
    for n in list(names):
        try:
            lo, hi = scene.object_aabb(n)
        except Exception:  # noqa: BLE001 - a body that cannot be read is left out
            continue
        out[n] = [round(float(a + b_) * 500.0, 1) for a, b_ in zip(lo, hi)]   # the box's centre, mm
    return out


def expected_note(batch_id: str) -> str:
    """What a speculative Executor call is told of the report it reads (shown above it): a model must not
    take a predicted report and stale images for measured ones."""
    return (f"EXPECTED, NOT MEASURED: batch {batch_id} is still running. Below is the report it gives if every "
            f"command ends as commanded, and the robot state above is where that leaves the hand; the images were "
            f"taken before {batch_id} started. The batch you return runs after {batch_id} only if {batch_id} ends "
            f"this way; otherwise it never runs, and you are asked again from the real report. Looks are not "
            f"answered here.")


def pending_note(why: str) -> str:
    """What an Executor call asked beside the Planner (retry_with_replan) is told in its verdict's place."""
    return (f"{why}; the Planner is making a new plan now. The batch you return runs only if the new plan "
            f"repeats these subgoals; otherwise it never runs, and you are asked again under the new plan.")


def _quat_of(m: np.ndarray) -> list:
    from ..geometry import mat_to_quat
    return [round(float(v), 4) for v in mat_to_quat(m)]


def predict(batch: dict, state: dict, profile) -> tuple[Report, dict] | None:
    """(the report the batch gives if every command goes as commanded, the state it ends in), or None
    when the batch cannot be predicted (it claims its subgoal, does not parse, or is empty).

    The report is one the Controller could give (``messages.Report``): every command ``done``, achieved as
    commanded; the state has ``Observation.state_dict()``'s keys, the pose the chain of targets reaches
    (orientation composed from the rotations; the last joint turned by the yaw turned), the gripper at
    the opening last sent, joints otherwise as measured at the start."""
    from ..geometry import axis_angle_to_mat, quat_to_mat
    try:
        _, parsed, issues = check_batch({k: v for k, v in batch.items() if k in ("batch_id", "subgoal_id", "commands")},
                                        profile)
    except Exception:  # noqa: BLE001 - an unparsable batch is not predicted (the Controller will reject it)
        return None
    if issues or not parsed or any(isinstance(c, Done) for c in parsed):
        return None
    pos = np.asarray(state["eef_pos_mm"], dtype=float)
    rot = quat_to_mat(state["eef_quat_xyzw"])
    yaw0 = math.atan2(rot[1, 0], rot[0, 0])
    frac, width = float(state.get("gripper_fraction", 0.0)), float(state.get("gripper_width_mm", 0.0))
    results, duration, steps = [], 0.0, 0
    for i, c in enumerate(parsed):
        commanded, achieved = {}, {}
        if isinstance(c, Move):
            d = np.asarray(c.displacement_mm, dtype=float)
            pos = pos + d
            commanded = {"translation_mm": [round(float(v), 2) for v in d]}
            achieved = {"translation_mm": commanded["translation_mm"], "rotation_deg": 0.0}
        elif isinstance(c, Rotate):
            rot = axis_angle_to_mat(c.axis_vector, math.radians(c.angle_deg)) @ rot
            commanded = {"rotation_deg": round(c.angle_deg, 3), "axis": c.axis}
            achieved = {"translation_mm": [0.0, 0.0, 0.0], "rotation_deg": round(abs(c.angle_deg), 2)}
        elif isinstance(c, Gripper):
            frac, width = float(c.width), round(float(c.width) * profile.gripper_max_width_mm, 1)
            commanded = {"gripper_fraction": c.width, "gripper_width_mm": width}
            achieved = {"translation_mm": [0.0, 0.0, 0.0], "rotation_deg": 0.0}
        elif isinstance(c, Wait):
            commanded = {"seconds": c.seconds}
            achieved = {"translation_mm": [0.0, 0.0, 0.0], "rotation_deg": 0.0}
        achieved["gripper_width_mm"] = width
        results.append(CommandResult(i, c.to_json(), "done", "", commanded, achieved))
    yaw = math.atan2(rot[1, 0], rot[0, 0])
    joints = list(state.get("joints_deg") or [])
    if joints:
        turned = math.degrees(math.atan2(math.sin(yaw - yaw0), math.cos(yaw - yaw0)))
        joints[-1] = round(float(joints[-1]) + turned, 1)
    end = {**state, "eef_pos_mm": [round(float(v), 1) for v in pos], "eef_quat_xyzw": _quat_of(rot),
           "eef_yaw_deg": round(math.degrees(yaw), 1), "gripper_width_mm": round(width, 1),
           "gripper_fraction": round(frac, 3), "joints_deg": joints}
    report = Report(batch.get("batch_id", ""), batch.get("subgoal_id", ""), "done", tuple(results), source="executor",
                    start_state=state, end_state=end, duration_s=duration, steps=steps)
    return report, end


def position_tolerance_mm(report: Report, profile) -> float:
    """How far from the predicted end a batch of done commands may end: each move is done within the
    Controller's tolerance of its target (``continue_mm`` when that is larger: settled without contact)
    and the next one is aimed from where it ended, so the errors of its moves add up (at least
    ``position_mm``)."""
    tol = profile.tolerances
    each = max(tol.position_mm, tol.continue_mm)
    moves = sum(1 for r in report.results if isinstance(r.command, dict) and r.command.get("op") == "move")
    return max(tol.position_mm, each * moves)


def mismatch(report: Report, expected_state: dict, profile) -> str:
    """Why ``report`` is not the one a speculation was made from ("" when it is): a command not done
    (blocked by contact, cancelled, rejected, a fault), the e-stop, the end pose farther from the
    predicted one than the Controller's tolerances, or the gripper's opening off where it was sent."""
    from ..geometry import quat_to_mat, rot_error
    if report.status != "done" or report.estop:
        return f"the batch ended {report.status}" + (f": {report.reason[:120]}" if report.reason else "")
    bad = [r for r in report.results if r.status != "done"]
    if bad:
        return f"command {bad[0].index} was {bad[0].status}"
    end = report.end_state or {}
    if not end.get("eef_pos_mm"):
        return "the report has no end state"
    tol = profile.tolerances
    lim = position_tolerance_mm(report, profile)
    err = float(np.linalg.norm(np.asarray(end["eef_pos_mm"], float) - np.asarray(expected_state["eef_pos_mm"], float)))
    if err > lim:
        return f"the hand ended {err:.1f} mm from the predicted pose (tolerance {lim:g} mm)"
    rv = rot_error(quat_to_mat(end["eef_quat_xyzw"]), quat_to_mat(expected_state["eef_quat_xyzw"]))
    deg = math.degrees(float(np.linalg.norm(rv)))
    if deg > tol.rotation_deg:
        return f"the hand ended {deg:.1f} deg from the predicted orientation (tolerance {tol.rotation_deg:g} deg)"
    df = abs(float(end.get("gripper_fraction", 0.0)) - float(expected_state.get("gripper_fraction", 0.0)))
    if df > GRIPPER_TOLERANCE:
        return (f"the gripper ended at {float(end.get('gripper_fraction', 0.0)):.2f} of its stroke, predicted "
                f"{float(expected_state.get('gripper_fraction', 0.0)):.2f} (tolerance {GRIPPER_TOLERANCE:g})")
    return ""


def same_plan(asked: tuple, plan) -> str:
    """Why ``plan`` (the Planner's new one) is not the plan an Executor call was shown (``asked``: the
    subgoals it was asked under), "" when it is: the same subgoals in order, each with the same
    description and success criterion (the ids a Planner gives may differ)."""
    new = [(s.description, s.success_criterion) for s in plan]
    old = [(s.description, s.success_criterion) for s in asked]
    if new == old:
        return ""
    if len(new) != len(old):
        return f"the new plan has {len(new)} subgoal(s), the call was asked under {len(old)}"
    i = next(i for i, (a, b) in enumerate(zip(new, old)) if a != b)
    return f"the new plan's subgoal {i + 1} is not the one the call was asked under ({new[i][0][:60]!r})"


def moved(before: dict | None, after: dict | None) -> str:
    """Which object of a scene-reading brain's scene moved between two ``scene_basis`` readings ("" when none)."""
    if not before or not after:
        return ""
    for name, p in before.items():
        q = after.get(name)
        if q is None:
            return f"{name} is gone from the scene"
        d = float(np.linalg.norm(np.asarray(p, float) - np.asarray(q, float)))
        if d > OBJECT_TOLERANCE_MM:
            return f"the {name} moved {d:.0f} mm while the batch ran (the answer read the scene before)"
    return ""
