"""Articulated fixtures and pushes, from privileged geometry, as commands.

Drawers (slide joints). LIBERO's cabinets count a drawer as open below q = -0.14 (about 0.16 m of
travel) and as closed only above q = 0.0: a nearly shut drawer is not closed. Each drawer's
handle is a horizontal bar 16 mm thick, standing 16 mm off the drawer's face, and the hand is
21 cm wide along the finger axis, so a top-down hand cannot reach a handle under the cabinet's
top. The oracle turns the tool horizontal, pointing into the drawer face (a 90 deg roll or pitch),
with the fingers one above and one below the bar, closes them on it and pulls; to close, it
pushes the bar with the horizontal tool's closed fingertips (the hand then trails behind, clear
of the handles above).

Knobs (the stove's hinge about z): straddle the knob's bar at its axis, twist the wrist. The
stove is on from q = 0.5 rad, off below 0.0; the fingers slip a little on the bar, so the twist
overshoots the threshold.

Hinged doors (the microwave): push the door's outer face along its arc until it shuts.

Flat objects slide to a table region along a path planned around what stands on the table: a
rimmed one (a plate) dragged by the fingers opened down in its well, one straight leg a batch;
anything else pushed by the fingertips low behind it.
"""
from __future__ import annotations

import math

import numpy as np

from ...geometry import axis_angle_to_mat, mat_to_rpy, rot_error
from . import pickplace as pp
from .motion import clear_along, path_commands, route, rotations
from .tuning import (APPROACH_SKIP_M, BACKOFF_M, BACK_OFF_TILT_DEG, BAR_FACE_M, BAR_HELD_MAX_MM, BAR_OPEN_MIN,
                     BAR_PUSH_START_M, BAR_SPOTS, BEYOND_REACH_COST, CLOSED_FRACTION, CLOSED_GAP_M,
                     DOOR_GRIP_BELOW_TOP_M, DOOR_PAST, DOOR_PUSH_AT, DOOR_RISE_M, DOOR_START_M, DOOR_STEP_DEG,
                     DOOR_TIP_OFF_M, DOWN_PUSH_CLEAR_M, DOWN_PUSH_COLUMN_M, DOWN_PUSH_OFF_M, DOWN_PUSH_RISE_M,
                     DOWN_PUSH_UNDER_M, DRAG_CLEAR_M, DRAG_STEP_M, DRAG_TURN_COST, END_TOUCH_M, FINGER_OVER_M,
                     FLAT_MAX_M, HAND_NEAR_COST, HORIZONTAL_DOT, KNOB_DEPTH_M, KNOB_LIFT_M, KNOB_NEAR_M,
                     KNOB_NEAR_Z_M, KNOB_OFF_PAST, KNOB_ON_MARGIN, KNOB_OPEN_MIN, KNOB_SLIP, LEG_COST_M, LEG_SAMPLES,
                     ONE_AXIS_DOT, ON_BAR_M, ON_BAR_NEAR_M, PRE_BAR_M, PULL_PRESS_M, PULL_TO, PUSH_ABOVE_M,
                     PUSH_BEHIND_M, PUSH_CLEAR_ENOUGH_M, PUSH_CLEAR_M, PUSH_CLEAR_SPOT_M, PUSH_COLUMN_M, PUSH_GRID_M,
                     PUSH_INSET_M, PUSH_LOW_M, PUSH_MARGIN_M, PUSH_OVER_M, PUSH_PAST_M, PUSH_REACH_M, PUSH_RISE_M,
                     PUSH_RUN_UP_M, PUSH_SLANTS_DEG, PUSH_SLANT_COST, PUSH_SPOT_FAR_COST, PUSH_TIGHT_COST,
                     PUSH_TOL_M, PUSH_WINDOW_M, RELEASE_FRACTION, RELEASE_NEAR_M, RELEASE_RISE_M, REORIENT_MIN_DEG,
                     RIM_OVER_M, SETTLE, SHOVE_COST, STANDS_M, STAY_MAX, STUCK_M, TALL_UNDER_M, TURN_CHECK_DEG,
                     TURN_CLEAR_M, TURN_RISE_M, TURN_TOP_M, UNTILT_MIN, WELL_ABOVE_M, WELL_GAP_MAX_M, WELL_GAP_MIN_M,
                     WELL_GAP_STEP_M, WELL_GAP_TOL, WELL_LAG_M, WELL_MIN_M, WELL_PROBE_STEP_M, WELL_ROUTE_CLEAR_M,
                     WELL_TIPS_OVER_M, WELL_TOUCH_M)
from .world import Articulation, Boxes, World, gripper_boxes, separation


# -- facts about fixtures ---------------------------------------------------------------------------
def opening_decreases(a: Articulation) -> bool:
    o, c = a.ranges.get("open"), a.ranges.get("close")
    if o and c:
        return max(o) <= min(c)
    return True


def is_open(a: Articulation) -> bool:
    o = a.ranges.get("open")
    if not o:
        return False
    return a.q < max(o) if opening_decreases(a) else a.q > min(o)


def open_dir(a: Articulation) -> np.ndarray:
    """Horizontal unit vector the drawer moves along when it opens."""
    d = a.axis * (-1.0 if opening_decreases(a) else 1.0)
    d = np.array([d[0], d[1], 0.0])
    return d / (np.linalg.norm(d) or 1.0)


def handle(a: Articulation, d: np.ndarray) -> dict:
    """The moving body's part farthest out along ``d``: the handle bar."""
    return max(a.parts, key=lambda p: float(np.dot(p["c"], d)))


def flat(w: World, name: str) -> bool:
    b = w.bodies.get(name)
    if b is None:
        return False
    pts = pp.corners(w, name)
    narrow = min(pp.extent_along(pts, y)[1] - pp.extent_along(pts, y)[0]
                 for y in (0.0, math.pi / 4, math.pi / 2, -math.pi / 4))
    return float(b.size[2]) < FLAT_MAX_M and narrow > w.hand.model.straddle_max_m


def describe(op: str, name: str) -> str:
    return {"open": f"pull open the {name}", "close": f"push the {name} closed",
            "turnon": f"turn the knob of the {name} on", "turnoff": f"turn the knob of the {name} off"}[op]


def criterion(op: str, name: str) -> str:
    return {"open": f"the {name} is open (pulled out to its stop region)",
            "close": f"the {name} is fully closed", "turnon": f"the {name} is on",
            "turnoff": f"the {name} is off"}[op]


def joint_of(w: World, name: str, kinds=("slide", "hinge")) -> Articulation | None:
    j = w.joint_for_region(name)
    if j is None:
        js = [a for a in w.joints_of(name) if a.type in kinds]
        j = js[0] if js else None
    return j


# -- tool orientation -------------------------------------------------------------------------------
def down_rot(yaw: float) -> np.ndarray:
    """The grip-site frame pointing straight down with the fingers separating along ``yaw``."""
    c, s = math.cos(yaw), math.sin(yaw)
    return np.array([[c, s, 0.0], [s, -c, 0.0], [0.0, 0.0, -1.0]])


def reorient(pose: pp.Pose, r_goal: np.ndarray, profile) -> list[dict]:
    """Rotate commands taking the tool from its measured orientation to ``r_goal``: one base axis at
    a time (roll, pitch, yaw), each in steps within the per-command limit."""
    if pose.rot is None:
        return []
    rv = rot_error(r_goal, pose.rot)                 # base-frame axis-angle taking now -> goal
    ang = float(np.linalg.norm(rv))
    if ang < math.radians(REORIENT_MIN_DEG):
        return []
    axis = rv / ang
    names = [n for n in ("roll", "pitch", "yaw") if n in profile.rotation_axes]
    best = max(names, key=lambda n: abs(float(np.dot(axis, profile.rotation_axes[n]))))
    if abs(float(np.dot(axis, profile.rotation_axes[best]))) > ONE_AXIS_DOT:
        sign = math.copysign(1.0, float(np.dot(axis, profile.rotation_axes[best])))
        return rotations(best, sign * ang, profile)
    # a compound turn, exactly: M = Rz(yaw) Ry(pitch) Rx(roll), so roll first, then pitch, then yaw
    roll, pitch, yaw = mat_to_rpy(r_goal @ pose.rot.T)
    out = []
    for n, v in (("roll", roll), ("pitch", pitch), ("yaw", yaw)):
        if n in profile.rotation_axes:
            out += rotations(n, v, profile)
    return out


def untilt(pose: pp.Pose, profile) -> tuple[list[dict], pp.Pose]:
    """Back off along the tool (out of whatever it was pointing into) and turn back to pointing
    down by the smallest rotation (about the horizontal axis across the tilt):
    -> (commands, the pose they leave: BACKOFF_M back, pointing down)."""
    if pose.rot is None or pose.tilt < UNTILT_MIN:
        return [], pose
    k = np.cross(pose.approach, [0.0, 0.0, -1.0])
    n = float(np.linalg.norm(k))
    r_goal = axis_angle_to_mat(k / n, pose.tilt) @ pose.rot if n > 1e-9 else down_rot(pose.yaw)
    x = r_goal[:, 0]
    yaw = math.atan2(x[1], x[0])
    grip = pose.grip
    cmds: list[dict] = []
    if pose.tilt > math.radians(BACK_OFF_TILT_DEG):
        grip = pose.grip - pose.approach * BACKOFF_M
        cmds += path_commands(pose.grip, [grip], profile)
    cmds += reorient(pose, r_goal, profile)
    j7 = None if pose.j7_deg is None else pose.j7_deg
    return cmds, pp.Pose(grip, yaw, pose.width_mm, pose.fraction, j7, down_rot(yaw))


def horizontal_rot(d: np.ndarray, sep_vertical: bool, near_yaw: float = 0.0) -> np.ndarray:
    """The grip-site frame pointing along -d (into a drawer face); fingers one above the other
    (``sep_vertical``) or side by side (separating along the horizontal nearest ``near_yaw``, so
    that from pointing down at that yaw it is one turn about a horizontal axis)."""
    z = -d / np.linalg.norm(d)
    if sep_vertical:
        x = np.array([0.0, 0.0, -1.0])
    else:
        x = np.cross([0.0, 0.0, 1.0], z)
        x = x / np.linalg.norm(x)
        if float(np.dot(x, [math.cos(near_yaw), math.sin(near_yaw), 0.0])) < 0:
            x = -x
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


# -- drawers ----------------------------------------------------------------------------------------
def drawer(brain, w: World, pose: pp.Pose, name: str, opening: bool = True):
    """Open a drawer: turn the tool horizontal where the hand has room, come in level with the
    handle bar, fingers one above and one below it, close, pull, let go and back off."""
    prof = brain.profile
    a = joint_of(w, name, ("slide",))
    if a is None:
        return [], True
    d = open_dir(a)
    h = handle(a, d)
    hc = np.asarray(h["c"], float)
    goal_q = _pull_target(a)
    r_h = horizontal_rot(d, sep_vertical=True)
    horizontal = pose.rot is not None and float(np.dot(pose.approach, -d)) > HORIZONTAL_DOT
    pre = hc + d * PRE_BAR_M
    on_bar = hc + d * ON_BAR_M
    cmds: list[dict] = []
    if horizontal and np.linalg.norm(pose.grip - on_bar) < ON_BAR_NEAR_M and \
            w.hand.model.hold_min_mm < pose.width_mm < BAR_HELD_MAX_MM:
        pull = abs(a.q - goal_q)                      # holding the bar: pull
        cmds += path_commands(pose.grip, [pose.grip + d * pull], prof)
        cmds += _release_and_back(pose.grip + d * pull, d, pose, prof)
        return cmds, True
    if not horizontal:                                # pointing down: to where the tool can turn, turn
        yaw = math.atan2(d[1], d[0])
        un, pose = untilt(pose, prof)
        cmds += un
        if pose.fraction < 0.95:
            cmds.append({"op": "gripper", "action": "open"})
        cmds += rotations("yaw", pp.orient(yaw, pose, w.hand) - pose.yaw, prof)
        turn_at = turning_point(w, pre, down_rot(yaw), r_h)
        bundle = gripper_boxes(w.hand, np.zeros(3), yaw, w.hand.max_gap_m)
        cmds += path_commands(pose.grip, route(w, pose.grip, turn_at, bundle, exclude=()), prof)
        fake = pp.Pose(turn_at, yaw, pose.width_mm, 1.0, pose.j7_deg, down_rot(yaw))
        cmds += reorient(fake, r_h, prof)
        start = turn_at
    else:
        if pose.fraction < BAR_OPEN_MIN:
            cmds.append({"op": "gripper", "action": "open"})
        start = pose.grip
    # level with the bar, onto it, close; then pull, let go, back off (in the next batch if need be)
    cmds += path_commands(start, [pre, on_bar], prof)
    cmds.append({"op": "gripper", "action": "close"})
    if len(cmds) > prof.limits.max_batch:             # the turn now, the approach after it
        return cmds[:len(cmds) - 3], False
    if len(cmds) + 4 > prof.limits.max_batch:         # ends closed on the bar: the next batch pulls
        return cmds, False
    end = on_bar + d * abs(a.q - goal_q)
    cmds += path_commands(on_bar, [end], prof)
    cmds += _release_and_back(end, d, pose, prof)
    return cmds, True


def turning_point(w: World, p: np.ndarray, r_from: np.ndarray, r_to: np.ndarray, rise: float = TURN_RISE_M,
                  top: float = TURN_TOP_M) -> np.ndarray:
    """The lowest point above ``p`` where the gripper turns from ``r_from`` to ``r_to`` (about the
    grip site, as the Controller turns it) clear of the scene, checked every 15 deg."""
    rv = rot_error(r_to, r_from)
    ang = float(np.linalg.norm(rv))
    axis = rv / ang if ang > 1e-9 else np.array([0.0, 0.0, 1.0])
    steps = max(2, int(math.ceil(math.degrees(ang) / TURN_CHECK_DEG)))
    q = p.copy()
    while q[2] < top:
        ok = True
        for k in range(steps + 1):
            r = axis_angle_to_mat(axis, ang * k / steps) @ r_from
            if w.clearance(gripper_boxes(w.hand, q, 0.0, w.hand.max_gap_m, rot=r)) < TURN_CLEAR_M:
                ok = False
                break
        if ok:
            return q
        q = q + np.array([0.0, 0.0, rise])
    return q


def _half_along(part: dict, d: np.ndarray) -> float:
    r = np.asarray(part["rot"], float).reshape(3, 3)
    return float(np.abs(r.T @ d) @ np.asarray(part["half"], float))


def _pull_target(a: Articulation) -> float:
    o = a.ranges["open"]
    lim = a.range[0] if opening_decreases(a) else a.range[1]
    thr = max(o) if opening_decreases(a) else min(o)
    # between LIBERO's threshold and the joint's stop, nearer the stop
    return thr + (lim - thr) * PULL_TO


def _release_and_back(at: np.ndarray, d: np.ndarray, pose: pp.Pose, prof) -> list[dict]:
    """Let go of the bar (just wide enough to clear it). The backing off is the next skill's
    first move (``untilt``): there it blends into the turn back to pointing down."""
    return [{"op": "gripper", "width": RELEASE_FRACTION}]


def close(brain, w: World, pose: pp.Pose, name: str):
    """Close a drawer (push its bar with the horizontal tool) or a hinged door (push along its arc)."""
    a = joint_of(w, name)
    if a is None:
        return [], True
    if a.type == "slide":
        rise = out_of_release(w, pose, brain.profile)
        if rise:                                      # out of what was let go of first; the push next batch
            return rise, False
    if a.type == "hinge":
        return door(brain, w, pose, a)
    prof = brain.profile
    d = open_dir(a)
    h = handle(a, d)
    hc = np.asarray(h["c"], float)
    face = hc + d * (_half_along(h, d) + BAR_FACE_M)  # fingertips against the bar's outer face
    stop_q = a.range[1] if opening_decreases(a) else a.range[0]
    travel = abs(stop_q - a.q) + PUSH_PAST_M
    horizontal = pose.rot is not None and float(np.dot(pose.approach, -d)) > HORIZONTAL_DOT
    cmds: list[dict] = []
    start = face + d * BAR_PUSH_START_M
    if not horizontal:
        down = _close_pointing_down(w, pose, a, h, d, travel, prof)
        if down is not None:                          # the fingers come down in front of the drawer: no turn
            return down
    if not horizontal:                                # pointing down: to where the tool can turn, turn
        un, pose = untilt(pose, prof)
        cmds += un
        yaw = pp.orient(math.atan2(d[1], d[0]) + math.pi / 2, pose, w.hand)   # fingers side by side, across d
        r_h = horizontal_rot(d, sep_vertical=False, near_yaw=yaw)
        cmds += rotations("yaw", yaw - pose.yaw, prof)
        if pose.fraction > CLOSED_FRACTION:
            cmds.append({"op": "gripper", "action": "close"})
        turn_at = turning_point(w, start, down_rot(yaw), r_h)
        bundle = gripper_boxes(w.hand, np.zeros(3), yaw, CLOSED_GAP_M)
        cmds += path_commands(pose.grip, route(w, pose.grip, turn_at, bundle, exclude=()), prof)
        fake = pp.Pose(turn_at, yaw, pose.width_mm, 0.0, pose.j7_deg, down_rot(yaw))
        cmds += reorient(fake, r_h, prof)
        p = turn_at
    else:
        p = pose.grip
        if pose.fraction > CLOSED_FRACTION:                       # open around the bar (after a pull): clear it, close,
            cmds += path_commands(p, [start], prof)   # so the fingertips do not meet the cabinet first
            cmds.append({"op": "gripper", "action": "close"})
            p = start
    end = face - d * travel
    # A hand already within APPROACH_SKIP_M of the push's start (a retry after the arm met the cabinet on
    # the way there) pushes from where it is: a short approach against that contact would only be
    # blocked again (the Controller's blend once passed it through; issue 33 made blends a fraction of a move)
    way = [end, end + d * BACKOFF_M] if float(np.linalg.norm(start - p)) < APPROACH_SKIP_M else \
        [start, end, end + d * BACKOFF_M]
    cmds += path_commands(p, way, prof)
    if len(cmds) + 1 > prof.limits.max_batch:         # the turn now, the push next batch
        return cmds[:len(cmds) - len(path_commands(p, way, prof))], False
    return cmds, True


def out_of_release(w: World, pose: pp.Pose, prof) -> list[dict]:
    """The fingers open around or just over an object let go of (a place ends opening the gripper):
    a rise of RELEASE_RISE_M out of it before the fingers close or the wrist turns, else nothing
    (measured: a bowl dropped into a drawer, closed on and carried off by the push to shut it)."""
    if pose.fraction < CLOSED_FRACTION or pose.tilt > UNTILT_MIN:
        return []
    fingers = gripper_boxes(w.hand, pose.grip, pose.yaw, pose.width_mm / 1000.0, hand=False)
    if not any(b.kind == "object" and len(b.obbs) and separation(fingers, b.obbs) < RELEASE_NEAR_M
               for b in w.bodies.values()):
        return []
    return path_commands(pose.grip, [pose.grip + [0.0, 0.0, RELEASE_RISE_M]], prof)


def _close_pointing_down(w: World, pose: pp.Pose, a: Articulation, h: dict, d: np.ndarray, travel: float,
                         prof) -> tuple[list[dict], bool] | None:
    """Shut a drawer with the tool pointing down: the closed fingertips come down just in front of
    its handle bar and push it along the slide. None when that column is not clear (then the tool
    turns horizontal). A low drawer needs this: a horizontal tool brings the arm down onto the
    cabinet's top (measured on libero_10's white cabinet, bottom drawer)."""
    if pose.tilt > UNTILT_MIN:
        return None
    hc = np.asarray(h["c"], float)
    yaw = pp.orient(math.atan2(d[1], d[0]) + math.pi / 2, pose, w.hand)     # the finger pair across the slide
    reach = _half_along(h, d) + w.hand.model.tip_half_m + DOWN_PUSH_OFF_M
    z = float(hc[2]) + w.hand.model.fingertip_below_m + DOWN_PUSH_UNDER_M   # fingertips just under the bar's middle
    bundle = gripper_boxes(w.hand, np.zeros(3), yaw, CLOSED_GAP_M)
    excl = (a.body,)                                   # the drawer the fingertips push

    def column_clear(at) -> bool:
        column = [at + [0, 0, dz] for dz in DOWN_PUSH_COLUMN_M]
        return min(w.clearance(bundle.shifted(q), exclude=excl) for q in column) >= DOWN_PUSH_CLEAR_M and \
            min(w.clearance(bundle.shifted(q), exclude=()) for q in column[1:]) >= DOWN_PUSH_CLEAR_M   # (the drawer
                                                                                         # itself from above)
    across = np.array([-d[1], d[0], 0.0])
    span = _half_along(h, across)
    mid = np.array([hc[0], hc[1], z]) + d * reach
    at = next((mid + across * f * span for f in BAR_SPOTS if column_clear(mid + across * f * span)), None)
    if at is None:                                     # (something in the drawer stands over every spot)
        return None
    end = at - d * travel
    cmds: list[dict] = rotations("yaw", yaw - pose.yaw, prof)
    if pose.fraction > CLOSED_FRACTION:
        cmds.append({"op": "gripper", "action": "close"})
    above = at + [0, 0, DOWN_PUSH_COLUMN_M[-1]]
    cmds += path_commands(pose.grip, route(w, pose.grip, above, bundle, exclude=excl), prof)
    cmds += path_commands(above, [at, end, end + d * BACKOFF_M, end + d * BACKOFF_M + [0, 0, DOWN_PUSH_RISE_M]], prof)
    if len(cmds) + 1 > prof.limits.max_batch:         # the way there now, the push next batch
        return (cmds[:len(cmds) - 4] if len(cmds) > 4 else cmds), False
    return cmds, True


# -- hinged doors -----------------------------------------------------------------------------------
def door(brain, w: World, pose: pp.Pose, a: Articulation):
    """Push a hinged door shut along its arc, fingertips against its outer face near the top edge."""
    prof = brain.profile
    closed_q = a.range[1] if max(a.ranges.get("close", [0.0])) >= a.range[1] - 1e-6 else a.range[0]
    sense = 1.0 if closed_q > a.q else -1.0          # the door's angle grows toward closed?
    panel = max(a.parts, key=lambda p: float(np.prod(np.asarray(p["half"], float)[:2])) +
                float(np.asarray(p["half"], float).max()))
    pc = np.asarray(panel["c"], float)
    pr, ph = np.asarray(panel["rot"], float).reshape(3, 3), np.asarray(panel["half"], float)
    flat = [i for i in range(3) if abs(pr[2, i]) < 0.5]
    i_long = max(flat, key=lambda i: ph[i])           # the panel's long horizontal axis: from the hinge out
    e = pr[:, i_long].copy()
    e[2] = 0.0
    e /= np.linalg.norm(e) or 1.0
    if float(np.dot(pc - a.anchor, e)) < 0:
        e = -e
    length = float(np.dot(pc - a.anchor, e)) + float(ph[i_long])
    z_axis = a.axis / (np.linalg.norm(a.axis) or 1.0)
    v = np.cross(z_axis * sense, e)                  # the door's motion when closing
    v[2] = 0.0
    v /= np.linalg.norm(v) or 1.0
    thick = _half_along(panel, v)
    face = float(np.dot(pc - a.anchor, v)) - thick   # its outer face (the one pushed) along v from the hinge
    r_push = length * DOOR_PUSH_AT
    top = float(pc[2] + _half_along(panel, np.array([0.0, 0.0, 1.0])))
    z = top - DOOR_GRIP_BELOW_TOP_M
    remaining = abs(closed_q - a.q) + DOOR_PAST
    cmds: list[dict] = []
    un, pose = untilt(pose, prof)
    cmds += un
    if pose.fraction > CLOSED_FRACTION:
        cmds.append({"op": "gripper", "action": "close"})
    yaw = math.atan2(v[1], v[0]) + math.pi / 2       # the hand's thin side along the push
    cmds += rotations("yaw", pp.orient(yaw, pose, w.hand) - pose.yaw, prof)

    def point(theta: float) -> np.ndarray:
        rr = axis_angle_to_mat(z_axis, sense * theta)
        ee, vv = rr @ e, rr @ v
        p = a.anchor + ee * r_push + vv * (face - DOOR_TIP_OFF_M)
        return np.array([p[0], p[1], z])

    start = point(0.0) - v * DOOR_START_M
    bundle = gripper_boxes(w.hand, np.zeros(3), yaw, CLOSED_GAP_M)
    cmds += path_commands(pose.grip, route(w, pose.grip, start, bundle, exclude=()), prof)
    last, push = start, []
    n = max(2, int(math.ceil(remaining / math.radians(DOOR_STEP_DEG))))
    for k in range(1, n + 1):
        q = point(remaining * k / n)
        push += path_commands(last, [q], prof)
        last = q
    push += path_commands(last, [last + np.array([0.0, 0.0, DOOR_RISE_M])], prof)
    if len(cmds) + len(push) + 1 > prof.limits.max_batch and cmds:   # the way there now, the push next batch
        return cmds[:prof.limits.max_batch], False
    return (cmds + push)[:prof.limits.max_batch - 1], True


# -- knobs ------------------------------------------------------------------------------------------
def knob(brain, w: World, pose: pp.Pose, name: str, on: bool):
    """Turn a knob: straddle its bar at the knob's axis, close, twist the wrist by what the joint
    still needs (plus the fingers' slip), let go and lift. Closed-loop: a knob already turned far
    enough is only let go of; one held is only twisted."""
    prof = brain.profile
    a = joint_of(w, name, ("hinge",))
    if a is None:
        return [], True
    bar = max(a.parts, key=lambda p: float(np.prod(np.asarray(p["half"], float))))
    r = np.asarray(bar["rot"], float).reshape(3, 3)
    half = np.asarray(bar["half"], float)
    long_axis = r[:, int(np.argmax(half[:2]))]
    bar_yaw = math.atan2(long_axis[1], long_axis[0])
    top = float(np.asarray(bar["c"], float)[2] + half[2])
    grasp = np.array([a.anchor[0], a.anchor[1], top - KNOB_DEPTH_M])
    lift = grasp + np.array([0.0, 0.0, KNOB_LIFT_M])
    sense = 1.0 if a.axis[2] > 0 else -1.0
    goal_q = (min(a.ranges["turnon"]) + KNOB_ON_MARGIN) if on else (a.range[0] - KNOB_OFF_PAST)
    twist = sense * (goal_q - a.q) * KNOB_SLIP
    near = float(np.linalg.norm((pose.grip - grasp)[:2])) < KNOB_NEAR_M and abs(pose.grip[2] - grasp[2]) < KNOB_NEAR_Z_M
    done_now = bool(w.predicate("turnon" if on else "turnoff", a.fixture))
    cmds: list[dict] = []
    if done_now:                                      # turned: let go and lift
        if near and pose.fraction < KNOB_OPEN_MIN:
            cmds += [{"op": "gripper", "action": "open"}] + path_commands(pose.grip, [lift], prof)
        return cmds, True
    if near and w.pinched(a.fixture):                  # holding the knob: twist on
        cmds += rotations("yaw", twist, prof, min_deg=1.0)
        cmds += [{"op": "gripper", "action": "open"}] + path_commands(pose.grip, [lift], prof)
        return cmds, True
    un, pose = untilt(pose, prof)
    cmds += un
    if pose.fraction < 0.95:
        cmds.append({"op": "gripper", "action": "open"})
    yaw = _orient_for_twist(bar_yaw + math.pi / 2, pose, twist,       # fingers across the bar
                            w.hand.model.wrist_limit_deg)
    cmds += rotations("yaw", yaw - pose.yaw, prof)
    pre = grasp + np.array([0.0, 0.0, KNOB_LIFT_M])
    bundle = gripper_boxes(w.hand, np.zeros(3), yaw, w.hand.max_gap_m)
    cmds += path_commands(pose.grip, route(w, pose.grip, pre, bundle, exclude=()), prof)
    cmds += path_commands(pre, [grasp], prof)
    cmds.append({"op": "gripper", "action": "close"})
    turn = rotations("yaw", twist, prof, min_deg=1.0)
    if len(cmds) + len(turn) + 3 <= prof.limits.max_batch:
        cmds += turn + [{"op": "gripper", "action": "open"}] + path_commands(grasp, [lift], prof)
        return cmds, True
    return cmds[:prof.limits.max_batch], False      # the grasp now, the twist next batch


def _orient_for_twist(yaw: float, pose: pp.Pose, twist: float, limit_deg: float) -> float:
    """The finger orientation (of the two) that leaves joint 7 room (within +-``limit_deg``) for the
    twist after it."""
    best, best_cost = None, None
    for y in (yaw, yaw + math.pi):
        d = (y - pose.yaw + math.pi) % (2 * math.pi) - math.pi
        if pose.j7_deg is not None:
            j_end = pose.j7_deg - math.degrees(d) - math.degrees(twist)
            j_mid = pose.j7_deg - math.degrees(d)
            over = max(0.0, abs(j_end) - limit_deg, abs(j_mid) - limit_deg)
        else:
            over = 0.0
        cost = over * 10 + abs(d)
        if best_cost is None or cost < best_cost:
            best, best_cost = pose.yaw + d, cost
    return best


# -- pushes -----------------------------------------------------------------------------------------
def push(brain, w: World, pose: pp.Pose, a: str, region: str, pred):
    """Slide a flat object over the table so that its origin ends in ``region`` (``_push_target``),
    along a path planned for its footprint around what stands on the table (``_push_path``),
    re-planned every batch.

    A rimmed object (a plate) is dragged from inside: the fingers, opened to rest against the foot of
    its well's sides (``_well_grip``), go down into its middle, settle there, and the hand moves
    along the path's first leg; the sides ahead of the fingers carry it, those beside and behind
    keep it from tipping. Each leg the fingers go in afresh. (Measured on LIBERO's plate: its rim
    slopes up and out at about 28 deg, from 39 mm off its axis at its floor to 66 mm at its lip 16
    mm up, and it rests on a ring 31 mm off its axis. Fingertips pushing that slope, closed, ride up
    it and tip the plate over its leading edge within 2-3 cm, and so do fingers dragged on round a
    corner; pushed from outside, a plate went into the bowl beside it. A plate is very light: the
    friction of pressed fingertips alone drags it part of the way.) Anything else is pushed from
    outside, closed fingertips low against its trailing side."""
    prof = brain.profile
    body = w.bodies[a]
    target = _push_target(w, a, region) if region in w.regions else pp.place_target(w, a, pred).origin[:2]
    well = _well_grip(w, a)
    over_z = float(body.hi[2]) + RIM_OVER_M + w.hand.model.fingertip_below_m   # fingertips just over its top
    in_well = float(np.linalg.norm(pose.grip[:2] - body.pos[:2])) < _radius(w, a) and pose.grip[2] < over_z
    if float(np.linalg.norm(target - body.pos[:2])) < PUSH_TOL_M or _inside(w, a, region, PUSH_INSET_M):
        return (path_commands(pose.grip, [np.array([*pose.grip[:2], over_z + WELL_ABOVE_M])], prof) if in_well
                else []), True
    if well is None:
        return _push_outside(brain, w, pose, a, target)
    grip_z, gap = well
    path = _push_path(w, a, target, grip_z + w.hand.model.hand_z[0])
    u = (path[1] - path[0]) / max(float(np.linalg.norm(path[1] - path[0])), 1e-9)
    last = len(path) == 2                             # one leg a batch: each corner is planned from where it is
    toward_base = max(0.0, -float(u @ pose.grip[:2]) / float(np.linalg.norm(pose.grip[:2])))
    end = np.array([*(path[1] + u * (WELL_LAG_M + (PUSH_OVER_M if last else 0.0))),
                    grip_z - PULL_PRESS_M * toward_base])
    out = [end + np.array([0.0, 0.0, 0.05])]          # the last leg done: out of it
    memo = brain.push_memo                            # object -> its origin when the last drag batch began
    was = memo.pop(a, None)
    stuck = was is not None and float(np.linalg.norm(body.pos[:2] - was)) < STUCK_M and brain.last_blocked
    lead = pose.grip[:2] - body.pos[:2]
    on = float(np.linalg.norm(lead)) < 0.01 or float(lead @ u) > math.cos(STAY_MAX) * float(np.linalg.norm(lead))
    if in_well and not stuck and on and pose.grip[2] < grip_z + 0.015:   # down in it, in its middle or leading
        memo[a] = body.pos[:2].copy()                 # it this way: the drag (on)
        cmds = _drag(pose.grip, end, prof)
        if last and len(cmds) < prof.limits.max_batch - 1:
            return cmds + path_commands(end, out, prof), True
        return cmds[:prof.limits.max_batch], False    # the rest (from where it is then) next batch
    cmds: list[dict] = []                             # else into it: over its middle, down, settle
    brain.keep_still.append(a)                        # (it should not move until the drag: if it does,
                                                      # this way in is stale)
    un, pose = untilt(pose, prof)
    cmds += un
    here = pose.grip
    if in_well:                                       # (out of it first)
        here = np.array([*here[:2], over_z])
        cmds += path_commands(pose.grip, [here], prof)
    if abs(pose.fraction - gap / w.hand.max_gap_m) > WELL_GAP_TOL:    # (its sides squeeze the fingers in a little)
        cmds.append({"op": "gripper", "width": round(gap / w.hand.max_gap_m, 3)})
    start = np.array([*path[0], grip_z])              # (opened across its floor, they go down nowhere else)
    yaw = _drag_yaw(w, a, pose, [start, end], gap, math.atan2(u[1], u[0]))
    if stuck:                                         # a drag that did not move it (the arm stopped): the
        yaw = pp.orient(yaw + math.pi / 2, pose, w.hand)      # wrist turned a quarter
    cmds += rotations("yaw", yaw - pose.yaw, prof)
    above = np.array([*start[:2], over_z + (0.0 if in_well else WELL_ABOVE_M)])
    cmds += path_commands(here, route(w, here, above, gripper_boxes(w.hand, np.zeros(3), yaw, gap), exclude=(),
                                      clear=WELL_ROUTE_CLEAR_M), prof)
    cmds += path_commands(above, [start], prof) + [SETTLE]   # the drag next batch (a way down stopped
    return cmds[:prof.limits.max_batch], False        # short on its sides would cancel it)


def _drag(p, q, prof) -> list[dict]:
    """p -> q in moves DRAG_STEP_M long at most (a long one curves: the servo saturates axis by axis)."""
    n = int(math.ceil(float(np.linalg.norm(q - p)) / DRAG_STEP_M))
    return path_commands(p, [p + (q - p) * (i + 1) / n for i in range(n)], prof)


def _drag_yaw(w: World, a: str, pose: pp.Pose, drag, gap: float, heading: float) -> float:
    """The wrist's yaw for a drag: the one it turns to least (a step per 3 deg) that keeps the hand
    clear of the scene along the drag. (From a fresh start in its well a plate followed the fingers
    at any yaw to the way: side by side across it, one behind the other, 45 deg between, within 2-4
    deg of flat.)"""
    best = None
    for y in [pose.yaw] + [heading + k * math.pi / 4 for k in range(4)]:
        y = pp.orient(y, pose, w.hand)
        bundle = gripper_boxes(w.hand, np.zeros(3), y, gap)
        col = min([clear_along(w, p, q, bundle, exclude=(a,)) for p, q in zip(drag, drag[1:])] +
                  [w.clearance(bundle.shifted(drag[0] + [0, 0, dz]), exclude=(a,)) for dz in PUSH_COLUMN_M])
        score = min(col, DRAG_CLEAR_M) - abs(y - pose.yaw) * DRAG_TURN_COST
        if best is None or score > best[0]:
            best = (score, y)
    return best[1]


def _well_grip(w: World, a: str) -> tuple[float, float] | None:
    """For an object with a well (its top WELL_MIN_M or more over the floor under its origin, and room
    on that floor for the fingers): (grip height, finger gap); the gap the widest, up to
    WELL_GAP_MAX_M, at which the fingers reach at most WELL_TOUCH_M into its sides. None: no well."""
    b = w.bodies[a]
    floor = None                                      # probed down its own axis (it may lie a little tilted)
    for t in np.arange(float(b.local_lo[2]), float(b.local_hi[2]), WELL_PROBE_STEP_M):
        p = b.pos + b.rot[:, 2] * t
        local = np.einsum("nji,nj->ni", b.obbs.R, p - b.obbs.c)
        if np.any(np.all(np.abs(local) <= b.obbs.h + 1e-4, axis=1)):
            floor = float(t)
    if floor is None or float(b.local_hi[2]) - floor < WELL_MIN_M:
        return None
    own = Boxes((b.obbs.c - b.pos) @ b.rot, b.obbs.h, np.einsum("ji,njk->nik", b.rot, b.obbs.R))   # upright

    def fits(gap):                                    # (tested 1 mm over the floor, in its own frame)
        tips_z = floor + WELL_TIPS_OVER_M + w.hand.model.fingertip_below_m
        return separation(gripper_boxes(w.hand, np.array([0.0, 0.0, tips_z]), 0.0, gap,
                                        hand=False), own) > -WELL_TOUCH_M
    gaps = [g for g in np.arange(WELL_GAP_MIN_M, WELL_GAP_MAX_M + 1e-6, WELL_GAP_STEP_M) if fits(g)]
    if not gaps:
        return None
    return float(b.pos[2]) + floor + w.hand.model.fingertip_below_m + FINGER_OVER_M, float(gaps[-1])


def _inside(w: World, a: str, region: str, inset: float) -> bool:
    """``a``'s origin over ``region``'s box (xy), ``inset`` in from its sides, and ``a`` lying flat."""
    return w.bodies[a].upright and w.over_region(a, region, inset)


def _radius(w: World, a: str) -> float:
    """How far ``a``'s collision boxes reach (xy) from its origin: its footprint, as a disc (a pushed
    object turns a little, so any turn of it)."""
    b = w.bodies[a]
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    pts = (b.obbs.c[:, None, :] + np.einsum("kj,nij->nki", signs, b.obbs.R * b.obbs.h[:, None, :])).reshape(-1, 3)
    return float(np.linalg.norm(pts[:, :2] - b.pos[:2], axis=1).max())


def _table_boxes(w: World, a: str, objects: bool = True) -> np.ndarray:
    """The boxes that stand on the table ``a`` slides on (every box but the table's and ``a``'s; without
    ``objects``, only the fixtures')."""
    skip = (a,) if objects else tuple(n for n, b in w.bodies.items() if b.kind == "object" or n == a)
    obs = w.obstacles(exclude=skip)
    return obs[obs[:, 1, 2] > float(w.bodies[a].lo[2]) + STANDS_M]


def _dist(p, boxes) -> np.ndarray:
    """(points (n, 2), boxes (m, 2, 3)) -> each point's xy distance to the nearest box."""
    q = np.maximum(np.maximum(boxes[None, :, 0, :2] - p[:, None], p[:, None] - boxes[None, :, 1, :2]), 0.0)
    return np.linalg.norm(q, axis=2).min(axis=1) if len(boxes) else np.full(len(p), np.inf)


def _push_target(w: World, a: str, region: str) -> np.ndarray:
    """Where ``a``'s origin is pushed to in ``region``: the spot (inside the region's box, PLACE_SPAN
    of its half sizes) where its footprint is clearest of what stands on the table (up to
    PUSH_CLEAR_SPOT_M), then nearest to it."""
    rg = w.regions[region]
    centre, half = np.asarray(rg["centre"], float)[:2], np.asarray(rg["half_extents"], float)[:2] * pp.PLACE_SPAN
    f = np.linspace(-1.0, 1.0, 9)
    spots = centre + np.stack(np.meshgrid(f, f), axis=-1).reshape(-1, 2) * half
    clear = np.minimum(_dist(spots, _table_boxes(w, a)) - _radius(w, a), PUSH_CLEAR_SPOT_M)
    return spots[int(np.argmax(clear - PUSH_SPOT_FAR_COST * np.linalg.norm(spots - w.bodies[a].pos[:2], axis=1)))]


def _push_path(w: World, a: str, target, hand_z: float) -> list[np.ndarray]:
    """Waypoints (xy) for ``a``'s origin from where it is to ``target``: [start, corners..., target],
    at most two corners, along which its footprint (a disc) stays PUSH_MARGIN_M clear of every box
    that stands on the table, the least costly: its length, dearer where things that reach up to
    the hand (``hand_z`` up) are within ``hand_reach_m`` (tuning.py) or the arm reaches beyond its comfortable reach,
    and LEG_COST_M for each corner. Corners are tried on a grid (PUSH_GRID_M) over the box around
    start and target grown by PUSH_WINDOW_M. None clear of the objects on the table (a plate boxed
    in between a stove and a bowl, a cheese box in front of its target): the least costly clear of
    the fixtures, through objects at SHOVE_COST (it shoves them aside). None at all: straight (the
    next batch sees what it did)."""
    path = _plan_push(w, a, target, hand_z, shove=False)
    if path is None:
        path = _plan_push(w, a, target, hand_z, shove=True)
    return path if path is not None else [w.bodies[a].pos[:2].copy(), np.asarray(target, float)[:2]]


def _plan_push(w: World, a: str, target, hand_z: float, shove: bool) -> list[np.ndarray] | None:
    """``_push_path``'s search; with ``shove``, the objects on the table are passable at SHOVE_COST.
    None when no path is clear."""
    b = w.bodies[a]
    r = _radius(w, a)
    every = _table_boxes(w, a)
    obs = _table_boxes(w, a, objects=False) if shove else every
    tall = every[:, 1, 2] > hand_z - TALL_UNDER_M
    p0, p1 = b.pos[:2].copy(), np.asarray(target, float)[:2]
    lo = np.minimum(p0, p1) - PUSH_WINDOW_M
    n = np.ceil((np.maximum(p0, p1) + PUSH_WINDOW_M - lo) / PUSH_GRID_M).astype(int) + 1
    gx, gy = np.meshgrid(np.arange(n[0]), np.arange(n[1]), indexing="ij")
    pts = lo + np.stack([gx, gy], axis=-1).reshape(-1, 2) * PUSH_GRID_M
    ends = np.array([p0, p1])
    d_ends = _dist(ends, obs) - END_TOUCH_M                  # it may start (end) closer than the margin to
    d_all, d_tall = _dist(pts, obs), _dist(pts, every[tall])   # something: then it moves away at least half as fast
    off = np.linalg.norm(pts[:, None] - ends[None], axis=2)
    need = np.minimum(r + PUSH_MARGIN_M, (d_ends[None] + 0.5 * off).min(axis=1))
    cell = 1.0 + HAND_NEAR_COST * np.clip(w.hand.model.hand_reach_m - d_tall, 0.0, None) / w.hand.model.hand_reach_m
    if shove:
        cell += SHOVE_COST * (_dist(pts, every) < r + PUSH_MARGIN_M)
    cell[(d_all < need) & (off.min(axis=1) > PUSH_GRID_M)] = np.inf
    t = np.linspace(0.0, 1.0, int(np.linalg.norm(n) * LEG_SAMPLES) + 2)

    def legs(A, B):                                   # (k, 2), (m, 2) -> (k, m): each leg's length x mean cost
        d = B[None] - A[:, None]
        length = np.linalg.norm(d, axis=2)
        q = A[:, None, None] + t[None, None, :, None] * d[:, :, None]
        k = np.clip(np.round((q - lo) / PUSH_GRID_M).astype(int), 0, n - 1)
        c = cell.reshape(n)[k[..., 0], k[..., 1]]
        grip = q + (d / np.maximum(length, 1e-9)[..., None])[:, :, None] * WELL_LAG_M   # the hand leads it
        reach = pp.reach_margin(np.concatenate([grip, np.full(grip.shape[:-1] + (1,), hand_z)], axis=-1), w.hand)
        c = np.where(reach[..., 1:].max(axis=2, initial=-1.0)[..., None] > PUSH_REACH_M, np.inf,
                     c + BEYOND_REACH_COST * np.clip(reach, 0.0, None))
        with np.errstate(invalid="ignore"):
            out = length * c.mean(axis=2)
        return np.where(np.isnan(out), np.inf, out)  # (no leg at all: not a corner)

    via = pts[np.isfinite(cell) & (gx.ravel() % 2 == 0) & (gy.ravel() % 2 == 0)]
    one = float(legs(p0[None], p1[None])[0, 0])
    a1, b1 = legs(p0[None], via)[0], legs(via, p1[None])[:, 0]
    two = a1 + b1 + LEG_COST_M
    three = a1[:, None] + legs(via, via) + b1[None, :] + 2 * LEG_COST_M
    best = min((one, 1), (float(two.min(initial=np.inf)), 2), (float(three.min(initial=np.inf)), 3))
    if not math.isfinite(best[0]):
        return None
    if best[1] == 1:
        return [p0, p1]
    if best[1] == 2:
        return [p0, via[int(np.argmin(two))], p1]
    i, j = np.unravel_index(int(np.argmin(three)), three.shape)
    return [p0, via[i], via[j], p1]


def _push_outside(brain, w: World, pose: pp.Pose, a: str, target):
    """A push of a flat object without a well: closed fingertips low against its trailing side, a
    straight push, re-aimed every batch."""
    prof = brain.profile
    body = w.bodies[a]
    delta = target - body.pos[:2]
    dist = float(np.linalg.norm(delta))
    direct = math.atan2(delta[1], delta[0])
    best = None                                       # (score, start, u, length, bundle, yaw)
    for off in np.radians(PUSH_SLANTS_DEG):
        heading = direct + off
        u = np.array([math.cos(heading), math.sin(heading)])
        length = dist * math.cos(off)                 # a slanted push now, the rest on the next batch
        lo, _ = pp.extent_along(pp.corners(w, a), heading)
        back = float(body.pos[:2] @ u) - lo           # origin to the trailing edge
        yaw = heading + math.pi / 2                   # the hand's thin side along the push
        bundle = gripper_boxes(w.hand, np.zeros(3), yaw, CLOSED_GAP_M)
        contact = body.pos[:2] - u * (back + w.hand.model.tip_half_m + PUSH_BEHIND_M)
        z = float(body.lo[2]) + PUSH_LOW_M + w.hand.model.fingertip_below_m
        start = np.array([*(contact - u * PUSH_RUN_UP_M), z])
        col = min(w.clearance(bundle.shifted(start + [0, 0, dz])) for dz in PUSH_COLUMN_M)
        end = start + np.array([*(u * length), 0.0])
        col = min(col, w.clearance(bundle.shifted(end), exclude=(a,)))
        score = min(col, PUSH_CLEAR_ENOUGH_M) - (PUSH_TIGHT_COST if col < PUSH_CLEAR_M else 0.0) - \
            PUSH_SLANT_COST * abs(off) / math.radians(15.0)
        if best is None or score > best[0]:
            best = (score, start, u, length + PUSH_RUN_UP_M, bundle, yaw)
    _, start, u, length, bundle, yaw = best
    cmds: list[dict] = []
    un, pose = untilt(pose, prof)
    cmds += un
    if pose.fraction > CLOSED_FRACTION:
        cmds.append({"op": "gripper", "action": "close"})
    cmds += rotations("yaw", pp.orient(yaw, pose, w.hand) - pose.yaw, prof)
    above = start + np.array([0.0, 0.0, PUSH_ABOVE_M])
    cmds += path_commands(pose.grip, route(w, pose.grip, above, bundle, exclude=()), prof)
    end = start + np.array([*(u * length), 0.0])
    push = path_commands(above, [start, end, end + np.array([0.0, 0.0, PUSH_RISE_M])], prof)
    if len(cmds) + len(push) + 1 <= prof.limits.max_batch:  # (with its ``done``)
        return cmds + push, True
    if cmds:                                                  # the way there now, the push next batch,
        return cmds[:prof.limits.max_batch], False            # aimed from where it is then
    return push[:prof.limits.max_batch], False                # (a push longer than a batch: re-aimed after)


# -- verification -----------------------------------------------------------------------------------
def verify(brain, w: World, pose: pp.Pose, kind: str, name: str, pred) -> tuple[bool, str]:
    truth = brain._truth(pred) if pred is not None else False
    a = joint_of(w, name)
    q = f" (joint at {a.q:.3f})" if a is not None else ""
    if kind == "open" and a is not None:
        ok = is_open(a)
        return ok, f"the {name} is {'open' if ok else 'NOT open'}{q}"
    return truth, f"predicate ({' '.join(pred)}) is {'true' if truth else 'false'}{q}"
