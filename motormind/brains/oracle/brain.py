"""The oracle brain: a scripted teleoperator that reads PRIVILEGED simulator state.

It answers every role in the same JSON a VLM would, through the same parse path, from the task's
BDDL goal and the true scene geometry (``Scene.world()``). It exists to test and measure the stack
without a VLM and as its upper bound: it acts only through the command vocabulary and the
Controller (move / rotate / gripper / wait / done, validated like any VLM's batch), never by
writing simulator state. Every answer carries ``"source": "oracle"``; every result it produces is
labelled ``privileged``.

Goal predicates it scripts (every one of the four LIBERO base suites and their PRO variants):
``On`` / ``In`` (pick and place, or a push for a flat object; into a roofed region, a microwave, by
the object's handle through the open side: insert.py), ``Open`` / ``Close`` (drawers: a
pinch of the handle bar and a pull, or a push; hinged doors: a push along the door's arc),
``TurnOn`` / ``TurnOff`` (a knob: straddle its bar, twist the wrist), and conjunctions of them,
ordered so that nothing blocks what comes after (a drawer is opened before something goes in,
closed after).

The Executor is closed-loop: every batch is computed afresh from the current poses, so a slip or
a disturbance is answered by the next batch. A subgoal it did not plan (the no-planner ablation
hands the Executor the whole instruction as its one subgoal) is scripted whole from the goal, as a
perfect VLM executor would: the steps its Planner would have made, each checked as its Verifier
would before the next begins, one ``done`` claim at the very end (``_whole_task``). Memory answers
use only the measured state in their prompts. The Monitor uses the measured state for a missed
grasp or a drop and, PRIVILEGED, the true object poses for a scene that no longer matches the
batch: the object the batch works on (the one to grasp, the support to carry to or put on) more
than ``MOVED_M`` from where it was when the batch was computed (an outside hand moved it) cancels
the rest of the batch, labelled privileged; the next batch is computed from the scene as it is. (It
reads the scene on the Monitor's thread, under the simulator's lock.)
"""
from __future__ import annotations

import json
import time
from dataclasses import dataclass

import numpy as np

from ... import SCHEMA_VERSION
from ..base import Brain, BrainReply, BrainRequest
from . import articulated as art
from . import insert as ins
from . import pickplace as pp
from .motion import SHORT_LEG_M, clear_along, path_commands, rotations, route, safe_height
from .tuning import (APPROACH_M, CARRIED_LOW_M, CARRIED_TOL_M, CLOSED_MAX, DOWN_TILT, DROP_INSET_M, DROP_M,
                     DROP_OVER_TOP_M, DROP_STOPPED_M, HOVER_M, IDLE_WAIT_S, KEPT_M, LIFT_OFF_M, MOVED_M,
                     OPEN_EXTRA_MM, OPEN_FULL_MIN, OPEN_NEED_MM, OPEN_RISE_M, ORIGIN_TOL_M, RELEASE_M,
                     RIM_OPEN_SLACK_MM, SCRIPT_PASSES, SHORT_NEAR_M, SHORT_OPEN_MIN, SINK_M, SLIDE_RISE_M,
                     SLIDE_SKIP_M, SLIDE_TOUCH_M, TEST_LIFT_M, TURN_ROOM_M, UNDER_COLUMN_M, UNDER_SLIDES_M, hand_for)
from .world import Boxes, World, gripper_boxes

ORDER = {"turnon": 0, "turnoff": 0, "open": 1, "on": 2, "in": 2, "close": 3}


def _spin_all(bundle):
    """The bundle's footprint in any turn about the grip site (its boxes grown to their reach)."""
    r = np.linalg.norm(bundle.c[:, :2], axis=1) + np.linalg.norm(bundle.h[:, :2], axis=1)
    h = np.column_stack([r, r, bundle.h[:, 2]])
    c = np.column_stack([np.zeros(len(r)), np.zeros(len(r)), bundle.c[:, 2]])
    return Boxes(c, h, np.broadcast_to(np.eye(3), (len(r), 3, 3)).copy())


def _heights(w: World, a: str) -> np.ndarray:
    """(bottom, origin) heights of ``a``, m: how far it rose with the hand is the larger change."""
    return np.array([float(w.bodies[a].lo[2]), float(w.bodies[a].pos[2])])


@dataclass
class _Script:
    """The whole task as the oracle's own steps (planned subgoal ids), for a subgoal it did not plan."""
    steps: list
    pos: int = 0
    claimed: bool = False           # the current step's last batch finished it: check it before going on


@dataclass
class _Rel:
    """A chosen grasp relative to the object's origin."""
    point_rel: np.ndarray
    sep_yaw: float
    kind: str
    width_m: float
    gap_m: float
    part: int | None = None


def droppable(w: World, a: str, pred) -> bool:
    """For an ``In a region`` goal: ``a``'s origin inside the region's box in xy (DROP_INSET_M in
    from its sides) with its bottom less than DROP_M over the box's floor or at most DROP_OVER_TOP_M
    over its top, so that let go it falls in. (A carry into a basket can be stopped by the basket's
    rim or handle short of its hover.)"""
    if pred is None or len(pred) != 3 or pred[0].lower() != "in" or pred[2] not in w.regions:
        return False
    rg = w.regions[pred[2]]
    inset = np.minimum(DROP_INSET_M, np.asarray(rg["half_extents"], float)[:2] / 2)
    floor, top = float(np.asarray(rg["lo"], float)[2]), float(np.asarray(rg["hi"], float)[2])
    return w.over_region(a, pred[2], inset) and \
        -SINK_M < float(w.bodies[a].lo[2]) - floor < max(DROP_M, top + DROP_OVER_TOP_M - floor)


class OracleBrain(Brain):
    name = "oracle"
    privileged = True

    def __init__(self, scene, profile):
        self.scene = scene
        self.profile = profile
        self.hand = hand_for(profile)   # the gripper and reach it plans with (tuning.py)
        self.specs: dict = {}       # subgoal id -> (kind, object or None, target, predicate)
        self.plans = 0
        self.tried: dict = {}       # object -> [(grasp point - origin, finger yaw)] of grasps closed on it
        self.grasp_plan: dict = {}  # object -> (its origin then, the grasp) of an approach not closed yet
        self.rest_z: dict = {}      # object -> (its bottom's, its origin's height) when a grasp of it closed
        self.closed_short: dict = {}  # object -> the attempt (len of tried) a stopped descent closed at
        self.carry_to: dict = {}    # object -> the release spot (xy) its last carry batch went for
        self.avoid: dict = {}       # object -> release spots a carry to was stopped by contact
        self.last_facts: dict = {}  # the facts of the Executor's last report (messages.Report.facts)
        self.scripts: dict = {}     # subgoal id it did not plan -> _Script: the whole task, step by step
        self.on_plan = None         # plan hook (subgoals, specs) -> None: a wrapper's grounding errors (brains/noisy.py)
        self.push_memo: dict = {}   # object -> its origin when the last drag batch on it began (articulated.push)
        self.keep_still: list = []  # bodies the batch being computed goes to without moving them yet (a
                                    # push's way into a plate's well): the Monitor watches them too
        self.last_steps: set = set()  # the last subgoal of each plan: its verdict is the task's
        self.planned_at: dict = {}  # subgoal id -> {body: its origin (x, y) when the last batch was computed}
        self.touched_in: dict = {}  # subgoal id -> bodies a finger has touched since (the Monitor's snapshots)

    def respond(self, req: BrainRequest) -> BrainReply:
        t0 = time.perf_counter()
        obj = getattr(self, f"_{req.role}")(req.context)
        obj = {"schema_version": SCHEMA_VERSION, "source": "oracle", **obj}
        return BrainReply(json.dumps(obj), "oracle", time.perf_counter() - t0, privileged=True)

    # -- privileged views ---------------------------------------------------------------------
    def world(self) -> World:
        return World.from_data(self.scene.world(), self.hand)

    def _truth(self, pred) -> bool:
        return bool(self.scene.predicate(pred))

    # -- planner --------------------------------------------------------------------------------
    def _planner(self, ctx: dict) -> dict:
        self.plans += 1
        w = self.world()
        pose = pp.Pose.from_state(json.loads(ctx["state"]))
        todo = sorted((p for p in self.scene.goal_state if not self._truth(p)),
                      key=lambda p: ORDER.get(p[0].lower(), 2))
        steps: list[tuple] = []          # (kind, a, b, pred, description, criterion)
        opened: set = set()
        carried = {p[1] for p in todo if p[0].lower() in ("on", "in") and len(p) == 3}
        for n, body in w.bodies.items():   # held, with nothing left to do with it (its goal holds): let go
            if body.kind == "object" and n not in carried and pp.held(w, n, pose, self.profile):
                steps.append(("release", n, None, None, f"open the gripper and let go of the {n}",
                              f"the {n} is no longer held"))
                pose = pp.Pose(pose.grip, pose.yaw, self.hand.open_width_mm, 1.0, pose.j7_deg)
        for pred in todo:
            op = pred[0].lower()
            if op in ("on", "in") and len(pred) == 3:
                a, b = pred[1], pred[2]
                joint = w.joint_for_region(b)
                if op == "in" and joint is not None and joint.type == "slide" and not art.is_open(joint) \
                        and b not in opened:
                    steps.append(("open", None, b, ["open", b], f"open the drawer of the {b}",
                                  f"the drawer holding the {b} is pulled open"))
                    opened.add(b)
                rel = "on" if op == "on" else "into"
                if art.flat(w, a) and op == "on" and b in w.regions and w.regions[b].get("parent") is None:
                    steps.append(("push", a, b, pred, f"push the {a} {rel} the {b}",
                                  f"the {a} rests {rel} the {b}"))
                    continue
                if not (pp.held(w, a, pose, self.profile) and self._clean(w, a, pose)):
                    steps.append(("grasp", a, b, pred, f"grasp the {a}", f"the {a} is held between the closed fingers"))
                steps.append(("carry", a, b, pred, f"lift the {a} and carry it above the {b}",
                              f"the {a} is held clear above the {b}"))
                steps.append(("place", a, b, pred, f"lower the {a} {rel} the {b} and release it",
                              f"the {a} rests {rel} the {b} and the gripper is open"))
                pose = pp.Pose(pose.grip, pose.yaw, self.hand.open_width_mm, 1.0, pose.j7_deg)   # later: hand empty
            elif op in ("open", "close", "turnon", "turnoff") and len(pred) == 2:
                if op == "open" and pred[1] in opened:
                    continue
                steps.append((op, None, pred[1], pred, art.describe(op, pred[1]), art.criterion(op, pred[1])))
            else:
                steps.append(("unsupported", None, None, pred, f"achieve ({' '.join(pred)})",
                              f"({' '.join(pred)}) holds; the oracle has no script for '{op}' goals"))
        subgoals = []
        for j, (kind, a, b, pred, desc, crit) in enumerate(steps):
            sid = f"p{self.plans}s{j}{kind[:2]}"
            self.specs[sid] = (kind, a, b, pred)
            subgoals.append({"id": sid, "description": desc, "success_criterion": crit})
        if not subgoals:
            subgoals = [{"id": f"p{self.plans}done", "description": "confirm the task is complete",
                         "success_criterion": "every goal predicate holds"}]
            self.specs[subgoals[0]["id"]] = ("confirm", None, None, None)
        self.last_steps.add(subgoals[-1]["id"])
        if self.on_plan is not None:
            self.on_plan(subgoals, self.specs)
        return {"reasoning": f"BDDL goal {self.scene.goal_state} (privileged)", "subgoals": subgoals}

    # -- executor -------------------------------------------------------------------------------
    def _executor(self, ctx: dict) -> dict:
        if ctx["subgoal_id"] not in self.specs:
            return self._whole_task(ctx)
        kind, a, b, pred = self.specs[ctx["subgoal_id"]]
        pose = pp.Pose.from_state(json.loads(ctx["state"]))
        w = self.world()
        self.take_report(ctx)
        self.keep_still = []        # what the batch about to be computed goes to without moving it yet
        fn = getattr(self, f"_x_{kind}", None)
        if fn is not None:
            cmds, done = fn(w, pose, a, b, pred)
        else:
            cmds, done = [], True
        self.planned_at[ctx["subgoal_id"]] = {n: tuple(w.bodies[n].pos[:2])
                                               for n in self._worked_on(w, kind, a, b) + self.keep_still}
        self.touched_in[ctx["subgoal_id"]] = set()
        return {"rationale": f"{kind} {a or ''} -> {b or ''} from privileged object poses",
                "commands": self._fit(cmds, done)}

    def _whole_task(self, ctx: dict) -> dict:
        """A batch toward the whole goal for a subgoal it did not plan (the instruction itself).

        It plans its own steps (``_planner``), runs the current one, and before going on checks it
        as its Verifier would; a step that does not hold makes it plan again from the true state,
        as a rejection makes the Planner replan. It claims ``done`` once every goal predicate holds."""
        sid = ctx["subgoal_id"]
        pose = pp.Pose.from_state(json.loads(ctx["state"]))
        self.take_report(ctx)
        m = self.profile.limits.max_batch
        for _ in range(SCRIPT_PASSES):        # each pass advances a step or plans again; bounded
            run = self.scripts.get(sid)
            if run is None or run.pos >= len(run.steps):
                if all(self._truth(p) for p in self.scene.goal_state):
                    return {"rationale": "every goal predicate holds (privileged)", "commands": [{"op": "done"}]}
                plan = self._planner(ctx)["subgoals"]
                run = self.scripts[sid] = _Script([s["id"] for s in plan])
            step = run.steps[run.pos]
            if run.claimed:
                run.claimed = False
                if self._verifier({"subgoal_id": step, "state": ctx["state"]})["achieved"]:
                    run.pos += 1
                else:
                    self.scripts.pop(sid)      # the step does not hold: plan again from the true state
                continue
            kind, a, b, pred = self.specs[step]
            fn = getattr(self, f"_x_{kind}", None)
            cmds, done = fn(self.world(), pose, a, b, pred) if fn is not None else ([], True)
            run.claimed = bool(done) and len(cmds) < m
            if cmds:
                return {"rationale": f"whole task, step {run.pos + 1}/{len(run.steps)}: {kind} {a or ''} -> {b or ''} "
                                     f"from privileged object poses", "commands": self._fit(cmds, False)}
        return {"rationale": "whole task: re-checking the steps", "commands": [{"op": "wait", "seconds": IDLE_WAIT_S}]}

    def spec_of(self, subgoal_id) -> tuple:
        """(kind, object, target, predicate) of a subgoal: a planned one's, or the step the whole-task
        script of an unplanned one is at."""
        run = self.scripts.get(subgoal_id)
        if run is not None and run.pos < len(run.steps):
            subgoal_id = run.steps[run.pos]
        return self.specs.get(subgoal_id, ("unknown", None, None, None))

    def _fit(self, cmds: list[dict], done: bool) -> list[dict]:
        m = self.profile.limits.max_batch
        if done and len(cmds) < m:
            return cmds + [{"op": "done"}]
        return cmds[:m] or [{"op": "wait", "seconds": IDLE_WAIT_S}]

    def _x_grasp(self, w: World, pose: pp.Pose, a, b, pred):
        prof = self.profile
        op = self._opening(w, pred)
        if op is not None:                            # into a roofed region: by the handle (insert.py)
            cmds, done = ins.grasp(self, w, pose, a, op)
            if done and cmds:                         # this batch closes on it
                self.rest_z[a] = _heights(w, a)
            return cmds, done
        if pp.held(w, a, pose, prof) and self._clean(w, a, pose):
            self.tried.pop(a, None)
            return [], True
        last = (self.tried.get(a) or [None])[-1]
        if last is not None and not pp.held(w, a, pose, prof) and pose.fraction > SHORT_OPEN_MIN and \
                np.linalg.norm(pose.grip - (w.bodies[a].pos + last[0])) < SHORT_NEAR_M and \
                self.closed_short.get(a) != len(self.tried[a]):        # (once an attempt: then afresh)
            self.closed_short[a] = len(self.tried[a])
            self.rest_z[a] = _heights(w, a)
            return [{"op": "gripper", "action": "close"}] + path_commands(
                pose.grip, [pose.grip + [0, 0, TEST_LIFT_M]], prof), True   # the descent stopped short: close here
        if pp.held(w, a, pose, prof) or (pose.fraction < CLOSED_MAX and pose.tilt < DOWN_TILT):   # closed badly
            return [{"op": "gripper", "action": "open"}] + path_commands(                        # or on nothing
                pose.grip, [pose.grip + [0, 0, OPEN_RISE_M]], prof), False
        cmds: list[dict] = []
        un, pose = art.untilt(pose, prof)             # a tool left horizontal (a drawer): point it down
        cmds += un
        target = self._target(w, a, pred) if pred is not None and pred[0].lower() in ("on", "in") else None
        origin = w.bodies[a].pos
        kept = self.grasp_plan.get(a)
        if kept is not None and np.linalg.norm(kept[0] - origin) < KEPT_M:
            g = pp.Grasp(origin + kept[1].point_rel, pp.orient(kept[1].sep_yaw, pose, w.hand), kept[1].kind,
                         kept[1].width_m, 0.0, kept[1].gap_m, kept[1].part)   # begun last batch: carry on
        else:
            g = pp.choose(w, a, pose, prof, target, self.tried.get(a, ()))
            if g is None:
                return [], True
            self.grasp_plan[a] = (origin.copy(), _Rel(g.point - origin, g.sep_yaw, g.kind, g.width_m, g.gap_m,
                                                      g.part))
        frac = g.gap_m * 1000.0 / prof.gripper_max_width_mm
        need_mm = min(g.gap_m * 1000.0, g.width_m * 1000.0 + OPEN_NEED_MM) if g.kind != "rim" else \
            g.gap_m * 1000.0 - RIM_OPEN_SLACK_MM
        if not need_mm <= pose.width_mm <= g.gap_m * 1000.0 + OPEN_EXTRA_MM:   # else open enough already
            cmds.append({"op": "gripper", "action": "open"} if frac >= OPEN_FULL_MIN
                        else {"op": "gripper", "width": round(frac, 3)})
        pre = g.point + [0, 0, APPROACH_M]
        turn = rotations("yaw", g.sep_yaw - pose.yaw, prof)
        p = pose.grip
        if turn and w.clearance(gripper_boxes(w.hand, p, g.sep_yaw, max(g.gap_m, pose.width_mm / 1000))) < TURN_ROOM_M:
            up = np.array([p[0], p[1], max(p[2], pre[2])])   # turn where the hand has room to sweep
            cmds += path_commands(p, [up], prof)
            p = up
        cmds += turn
        bundle = gripper_boxes(w.hand, np.zeros(3), g.sep_yaw, max(g.gap_m, pose.width_mm / 1000))
        if float(np.linalg.norm(pre - p)) >= SHORT_LEG_M:
            cmds += path_commands(p, route(w, p, pre, bundle, exclude=(a,)), prof)
            p = pre
        approach = len(cmds)                            # (already at the approach point: straight for the grasp)
        cmds += path_commands(p, [g.point], prof)
        cmds.append({"op": "gripper", "action": "close"})
        held = pp.held_bundle(w, a, g.point, g.sep_yaw, g.width_m)
        start = self._out_from_under(w, g.point, held, a)     # (from under an overhang: out first)
        cmds += path_commands(g.point, [start, start + [0, 0, TEST_LIFT_M]], prof)   # a grasp that holds lifts it
        if len(cmds) + 1 > prof.limits.max_batch:      # approach now, descend and close next batch
            return cmds[:approach] or cmds[:prof.limits.max_batch], False
        self.grasp_plan.pop(a, None)                  # this batch closes on it: an attempt
        self.tried.setdefault(a, []).append((g.point - origin, g.sep_yaw))
        self.rest_z[a] = _heights(w, a)
        return cmds, True

    @staticmethod
    def _clean(w: World, a: str, pose: pp.Pose) -> bool:
        lo, hi = pp.expected_width_mm(w, a, pose)
        return lo <= pose.width_mm <= hi

    def _x_carry(self, w: World, pose: pp.Pose, a, b, pred):
        prof = self.profile
        if not pp.held(w, a, pose, prof):
            return [{"op": "gripper", "action": "open"}], True    # lost it: claim and let the Verifier say no
        op = self._opening(w, pred)
        if op is not None:
            return ins.carry(self, w, pose, a, op)
        prev = self.carry_to.get(a)
        if prev is not None and self._stopped_by_contact():
            self.avoid.setdefault(a, []).append(prev)   # the way down to that spot is not free: another
        target = self._target(w, a, pred, pose)
        self.carry_to[a] = target.origin[:2].copy()
        body = w.bodies[a]
        if self._over(w, a, target, CARRIED_LOW_M) or droppable(w, a, pred):   # there already, or low over the box
            return [], True                                            # (a lowering stopped on contact)
        rel = body.pos - pose.grip
        goal = pp.grip_at(target, rel, lift=HOVER_M)
        bundle = pp.bundle(w, a, pose)
        start = self._out_from_under(w, pose.grip, bundle, a)          # from under an overhang first
        lift = start + [0.0, 0.0, LIFT_OFF_M]                          # off the support
        turn = rotations("yaw", target.spin, prof)
        if not turn:
            pts = [start, lift] + route(w, lift, goal, bundle, exclude=(a,))
            return path_commands(pose.grip, pts, prof), True
        # the object turns on the way (a book into a slot): up clear of everything, turn, across, down
        top = np.array([goal[0], goal[1], max(lift[2], goal[2],
                                              safe_height(w, lift, goal, _spin_all(bundle), (a,)))])
        up = np.array([lift[0], lift[1], top[2]])
        return (path_commands(pose.grip, [start, lift, up], prof) + turn + path_commands(up, [top, goal], prof)), True

    @staticmethod
    def _out_from_under(w: World, grip: np.ndarray, bundle: Boxes, a: str) -> np.ndarray:
        """Where the held bundle can rise from: the grip itself when the column over it is clear,
        else the nearest point a short slide away whose column is (a bowl grasped under an opened
        drawer: straight up, the hand meets the drawer's bottom)."""
        def column_clear(p) -> bool:
            return min(w.clearance(bundle.shifted(p + [0.0, 0.0, dz]), exclude=(a,)) for dz in UNDER_COLUMN_M) > 0.0
        if column_clear(grip):
            return grip
        for r in UNDER_SLIDES_M:
            for k in range(8):
                p = grip + [r * np.cos(k * np.pi / 4), r * np.sin(k * np.pi / 4), SLIDE_RISE_M]
                if column_clear(p) and clear_along(w, grip, p, bundle, (a,), skip=SLIDE_SKIP_M) > -SLIDE_TOUCH_M:
                    return p
        return grip

    def _x_place(self, w: World, pose: pp.Pose, a, b, pred):
        prof = self.profile
        cmds: list[dict] = []
        op = self._opening(w, pred)
        if op is not None:
            return ins.place(self, w, pose, a, op)
        if pp.held(w, a, pose, prof):
            target = self._target(w, a, pred, pose)
            rel = w.bodies[a].pos - pose.grip
            goal = pp.grip_at(target, rel)
            off = np.linalg.norm((goal - pose.grip)[:2])
            if self._over(w, a, target, 0.035) or droppable(w, a, pred) or \
                    (self._stopped_by_contact() and self._over(w, a, target, DROP_STOPPED_M)):  # low enough (the last lowering met
                pass                                                        # the support, or the fingers met its
                                                                            # rim over it): let go
            elif off > ORIGIN_TOL_M:                # drifted: re-align above first
                above = np.array([goal[0], goal[1], max(goal[2] + HOVER_M, pose.grip[2])])
                cmds += path_commands(pose.grip, route(w, pose.grip, above, pp.bundle(w, a, pose), (a,)), prof)
                cmds += path_commands(above, [goal], prof)
            elif goal[2] < pose.grip[2]:
                cmds += path_commands(pose.grip, [goal], prof)
        cmds.append({"op": "gripper", "action": "open"})
        return cmds, True

    def take_report(self, ctx: dict) -> None:
        """Keep the facts of the last report the Executor's context gives (``report_facts``: the
        Report's fields, ``components.report_context``; never its prose, which the prompt shows)."""
        self.last_facts = dict(ctx.get("report_facts") or {})

    def _stopped_by_contact(self) -> bool:
        """The last batch was stopped by contact: blocked against something (its report's facts)."""
        return self.last_facts.get("status") == "blocked" and bool(self.last_facts.get("contact"))

    @property
    def last_blocked(self) -> bool:
        """The last batch was blocked (its report's facts)."""
        return self.last_facts.get("status") == "blocked"

    def _target(self, w: World, a: str, pred, pose: pp.Pose | None = None) -> pp.Target:
        """Where ``a`` goes for ``pred``, away from spots a carry there was stopped by contact, and
        once one was, with the hand that holds it (as ``pose`` holds it) clear on the way down too
        (into a roofed region, held as ``pose`` holds it: insert.py), leaving room for the objects the
        goal still puts on the same support."""
        op = self._opening(w, pred)
        if op is not None and pose is not None and pose.rot is not None:
            t = ins.held_target(w, a, op, pose)
            if t is not None:
                return t
        avoid = self.avoid.get(a, ())
        hand = None
        if avoid and pose is not None and pose.tilt < art.UNTILT_MIN and pp.held(w, a, pose, self.profile):
            hand = gripper_boxes(w.hand, pose.grip - w.bodies[a].pos, pose.yaw, pose.width_mm / 1000.0)
        later = tuple(p[1] for p in self.scene.goal_state          # on the same support after it
                      if len(p) == 3 and p[0].lower() == pred[0].lower() and p[2] == pred[2] and p[1] != a
                      and not self._truth(p))
        keep = self.carry_to.get(a)
        return pp.place_target(w, a, pred, avoid=avoid, hand=hand, room_for=later,
                               keep=None if keep is None else np.asarray(keep, float))

    @staticmethod
    def _opening(w: World, pred) -> ins.Opening | None:
        """The open side of an ``In`` goal's region when its fixture roofs it over (a microwave)."""
        if pred is None or len(pred) != 3 or pred[0].lower() != "in" or pred[2] not in w.regions:
            return None
        joint = w.joint_for_region(pred[2])
        if joint is not None and joint.type == "slide":    # a drawer: opened, it is entered from above
            return None
        return ins.opening(w, pred[2])

    @staticmethod
    def _over(w: World, a: str, target: pp.Target, within: float) -> bool:
        """``a``'s origin over its release spot, its bottom less than ``within`` over the support."""
        body = w.bodies[a]
        dxy = float(np.linalg.norm(body.pos[:2] - target.origin[:2]))
        return dxy < ORIGIN_TOL_M and -SINK_M < float(body.lo[2]) - target.support_z < within

    def _x_release(self, w: World, pose: pp.Pose, a, b, pred):
        up = pose.grip + [0.0, 0.0, OPEN_RISE_M]
        return [{"op": "gripper", "action": "open"}] + path_commands(pose.grip, [up], self.profile), True

    def _x_confirm(self, w, pose, a, b, pred):
        return [], True

    def _x_unsupported(self, w, pose, a, b, pred):
        return [], True

    def _x_push(self, w: World, pose: pp.Pose, a, b, pred):
        return art.push(self, w, pose, a, b, pred)

    def _x_open(self, w, pose, a, b, pred):
        return ([], True) if self._holds(pred) else art.drawer(self, w, pose, b, opening=True)

    def _x_close(self, w, pose, a, b, pred):
        return ([], True) if self._holds(pred) else art.close(self, w, pose, b)

    def _x_turnon(self, w, pose, a, b, pred):      # (claimed with the fingers off the knob only)
        return ([], True) if self._holds(pred) and pose.fraction > 0.5 else art.knob(self, w, pose, b, on=True)

    def _x_turnoff(self, w, pose, a, b, pred):
        return ([], True) if self._holds(pred) and pose.fraction > 0.5 else art.knob(self, w, pose, b, on=False)

    def _holds(self, pred) -> bool:
        """An articulated goal already true (a push that shut the drawer and then met its stop is
        'blocked', yet done): claim it, the Verifier checks."""
        return pred is not None and self._truth(pred)

    # -- verifier -------------------------------------------------------------------------------
    def _verifier(self, ctx: dict) -> dict:
        kind, a, b, pred = self.specs.get(ctx["subgoal_id"], ("unknown", None, None, None))
        state = json.loads(ctx["state"])
        pose = pp.Pose.from_state(state)
        w = self.world()
        if kind == "grasp":
            held = pp.held(w, a, pose, self.profile)
            rose = float(np.max(_heights(w, a) - self.rest_z.get(a, -1.0)))   # (pinched at its rim, a bowl
                                                                            # tilts: its lowest corner rises less)
            ok = held and self._clean(w, a, pose) and rose > TEST_LIFT_M / 2
            lo, hi = pp.expected_width_mm(w, a, pose)
            ev = (f"{a} {'is' if held else 'is NOT'} between the fingers (gap {pose.width_mm:.1f} mm"
                  + (f"; a clean grasp closes to {lo:.0f}-{hi:.0f} mm: something else is caught"
                     if held and not self._clean(w, a, pose) else "")
                  + (f"; it rose {rose * 1000:.0f} mm with the hand: it slips" if held and rose <= TEST_LIFT_M / 2
                     else "") + ")")
        elif kind == "carry":
            target = self._target(w, a, pred, pose)
            body = w.bodies[a]
            dxy = float(np.linalg.norm(body.pos[:2] - target.origin[:2]))
            is_held = pp.held(w, a, pose, self.profile)
            drop = droppable(w, a, pred)
            ok = is_held and (dxy < ORIGIN_TOL_M + CARRIED_TOL_M or drop) and body.lo[2] > target.support_z
            ev = f"{a} held={is_held}, its origin {dxy * 1000:.0f} mm from over the {b}'s target" + \
                (f", low over the {b}'s box: let go, it falls in" if drop else "")
        elif kind in ("place", "push"):
            truth = self._truth(pred)
            released = not pp.held(w, a, pose, self.profile)
            ok = truth and released
            ev = f"predicate ({' '.join(pred)}) is {'true' if truth else 'false'}" + \
                 ("" if released else f"; the {a} is still gripped")
        elif kind == "release":
            ok = not pp.held(w, a, pose, self.profile)
            ev = f"the {a} {'is no longer' if ok else 'is still'} held"
        elif kind in ("open", "close", "turnon", "turnoff"):
            ok, ev = art.verify(self, w, pose, kind, b, pred)
        elif kind == "unsupported":
            ok = self._truth(pred)
            ev = f"predicate ({' '.join(pred)}) is {'true' if ok else 'false'}"
        else:
            ok = all(self._truth(p) for p in self.scene.goal_state)
            ev = f"goal predicates {'all hold' if ok else 'do not all hold'}"
        if ok and ctx["subgoal_id"] in self.last_steps:   # the plan's last step: is the whole task done?
            undone = [p for p in self.scene.goal_state if not self._truth(p)]  # (an earlier step undone)
            if undone:
                ok = False
                ev += "; but " + ", ".join(f"({' '.join(p)})" for p in undone) + " no longer holds"
        return {"achieved": bool(ok), "evidence": ev + " (privileged simulator state)"}

    @staticmethod
    def _worked_on(w: World, kind: str, a, b) -> list[str]:
        """The bodies a batch of ``kind`` is computed for and that should stay put while it runs: the
        object to grasp; the support to carry to or place on (its region's owner); none otherwise
        (a pushed object moves by design, and is watched only while the hand goes to it: ``keep_still``;
        articulated fixtures move by their joints)."""
        if kind == "grasp":
            names = [a]
        elif kind in ("carry", "place", "push"):
            names = [b if b in w.bodies else (w.regions.get(b) or {}).get("parent")]
        else:
            names = []
        return [n for n in names if n in w.bodies]

    def _moved(self, sgid: str) -> tuple[str, float] | None:
        """PRIVILEGED: (body, metres) of a body the batch for ``sgid`` works on that is now more than
        MOVED_M from where it was when the batch was computed, and that no finger has touched since (the hand
        moves what it holds), else None."""
        then = self.planned_at.get(sgid)
        if not then:
            return None
        world = self.scene.world()
        bodies = world["bodies"]
        seen = self.touched_in.setdefault(sgid, set())     # (a finger has been on it since: the hand moves
        seen.update(n for n, f in world.get("finger_contacts", {}).items() if f)   # it; contacts flicker)
        for n, xy in then.items():
            if n in bodies and n not in seen:
                d = float(np.hypot(bodies[n]["pos"][0] - xy[0], bodies[n]["pos"][1] - xy[1]))
                if d > MOVED_M:
                    return n, d
        return None

    # -- monitor (measured state; the moved-object check privileged) and memory ------------------
    def _monitor(self, ctx: dict) -> dict:
        st = ctx.get("state", {})
        st = json.loads(st) if isinstance(st, str) else st
        last = ctx.get("last_command", {}).get("command", {})
        width = float(st.get("gripper_width_mm", 99.0))
        kind = self.spec_of(ctx.get("subgoal_id"))[0]
        if last.get("op") == "gripper" and last.get("action") == "close" and width < self.hand.model.hold_min_mm \
                and kind == "grasp":
            return {"cancel": True, "reason": f"grasp missed: the fingers closed to {width:.1f} mm"}
        if kind == "carry" and width < self.hand.model.hold_min_mm:
            return {"cancel": True, "reason": f"object dropped: finger gap {width:.1f} mm while carrying"}
        moved = self._moved(ctx.get("subgoal_id"))
        if moved is not None:
            return {"cancel": True, "reason": f"the {moved[0]} is no longer where this batch was computed for "
                                              f"({moved[1] * 1000:.0f} mm away; privileged simulator state): "
                                              "the rest of the batch would act on a stale scene"}
        return {"cancel": False, "reason": "nominal"}

    def _memory(self, ctx: dict) -> dict:
        events = ctx.get("event_list", [])
        prev = ctx.get("memory", "")
        facts = []
        for e in events:
            if e["kind"] == "report" and e.get("status") != "done":
                facts.append(f"batch {e.get('batch_id')} on {e.get('subgoal_id')}: {e.get('status')} "
                             f"({(e.get('reason') or '')[:120]})")
            elif e["kind"] == "verdict":
                facts.append(f"{e.get('subgoal_id')}: {'verified' if e.get('achieved') else 'rejected'}")
            elif e["kind"] == "monitor_cancel":
                facts.append(f"monitor cancelled {e.get('batch_id')}: {e.get('reason')}")
        n = sum(1 for e in events if e["kind"] == "report")
        summary = (prev if prev and prev != "nothing yet" else "Episode log.")[:1500]
        summary = f"{summary} +{n} batch(es)."[-1800:]
        return {"summary": summary, "facts": facts[-10:]}

