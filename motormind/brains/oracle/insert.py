"""Into a roofed region through its open side: a mug into a microwave. PRIVILEGED geometry.

A region under its fixture's roof cannot take an object lowered from above: LIBERO's microwave has
14 cm of room over its floor, its mugs are 10-13 cm tall, and a top-down hand stands 2-10 cm over
the rim it pinches. The oracle grips the object by its handle instead (the boxes that stand out
beyond its wall ring, on the side away from the opening) with the tool tilted back from pointing
down toward the opening: the hand over and behind the handle, the fingers side by side across the
opening's axis. It carries the object level, just over the floor's height, to in front of the
opening, slides it in along the axis and lets go; the hand stays in front of the opening. Then the
handle is pushed inside the face, so that the door can shut.

Every batch is computed from the current poses, like the rest of the oracle: a grasp batch that
finds the tool not yet turned turns it (where the hand has room), the next comes in.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import pickplace as pp
from .articulated import UNTILT_MIN, down_rot, reorient, turning_point, untilt
from .motion import clear_along, path_commands, route
from .tuning import (ACROSS_COST, ALIGNED_DOT, BACK_OUT_M, BAR_MIN_HALF_M, CLEAR_IN_M, CLOSED_MAX, DEPTH_COST,
                     FLOOR_CLEAR_M, GAP_TOL_MM, GRIP_IN_M, HANDLE_CLEAR_M, HANDLE_FREE_M, HANDLE_MARGIN_M,
                     HANDLE_NEAR_M, INSERT_PUSH_PAST_M, INSERT_STANDOFF_M, INSIDE_CLEAR_ENOUGH_M, INSIDE_GAIN,
                     INSIDE_M, INSIDE_SPAN, IN_LINE_M, PROTRUDE_M, PUSH_GAP_M, PUSH_TILT_DEG, RING_TALL, ROOF_ROOM_M,
                     ROOM_CLEAR_M, ROOM_STEP_M, ROUTE_CLEAR_M, SIDE_DEPTH_M, SIDE_Z_INSET_M, STAGE_BACK_M,
                     STAGE_CLEAR_M, TEST_LIFT_M, THERE_M, TILTS_DEG, TRAIL_MAX, WALL_OVER_FLOOR_M)
from .world import Boxes, World, gripper_boxes, separation, wrap

UP = np.array([0.0, 0.0, 1.0])


@dataclass
class Opening:
    region: str
    fixture: str
    d: np.ndarray              # horizontal unit vector pointing in through the open side
    floor: float               # top of the floor under the region's middle (m)
    roof: float                # underside of the roof over it
    face: float                # d . p of the open side's plane (where the fixture's walls end)


def opening(w: World, region: str) -> Opening | None:
    """The open side of ``region`` when its fixture roofs it over, else None."""
    rg = w.regions.get(region)
    parent = (rg or {}).get("parent")
    if rg is None or parent not in w.bodies or w.bodies[parent].kind != "fixture":
        return None
    boxes = w.bodies[parent].boxes                        # (n, 2, 3) axis-aligned
    c = np.asarray(rg["centre"], float)
    half = np.asarray(rg["half_extents"], float)
    mid_lo, mid_hi = c[:2] - half[:2] / 2, c[:2] + half[:2] / 2
    over = _overlap_xy(boxes, mid_lo, mid_hi)
    floors = boxes[over & (boxes[:, 1, 2] < c[2]), 1, 2]
    roofs = boxes[over & (boxes[:, 0, 2] > c[2]), 0, 2]
    if not len(floors) or not len(roofs):
        return None
    floor, roof = float(floors.max()), float(roofs.min())
    if roof - floor > ROOF_ROOM_M:
        return None
    sides = []
    for u in (np.array([1.0, 0.0]), np.array([-1.0, 0.0]), np.array([0.0, 1.0]), np.array([0.0, -1.0])):
        k = int(np.flatnonzero(u)[0])
        lo, hi = mid_lo.copy(), mid_hi.copy()
        edge = c[k] + u[k] * half[k]
        lo[k], hi[k] = (edge, edge + SIDE_DEPTH_M) if u[k] > 0 else (edge - SIDE_DEPTH_M, edge)
        z_ok = (boxes[:, 0, 2] < roof - SIDE_Z_INSET_M) & (boxes[:, 1, 2] > floor + SIDE_Z_INSET_M)
        if not (_overlap_xy(boxes, lo, hi) & z_ok).any():
            sides.append(u)
    if not sides:
        return None
    u = max(sides, key=lambda v: float(np.dot(v, -c[:2])))   # several open: the one facing the robot
    d = np.array([-u[0], -u[1], 0.0])
    within = _overlap_xy(boxes, c[:2] - half[:2], c[:2] + half[:2])
    face = float(np.min(boxes[within][:, :, :2] @ d[:2])) if within.any() else float(c[:2] @ d[:2] - half[:2] @ np.abs(d[:2]))
    return Opening(region, parent, d, floor, roof, face)


def _overlap_xy(boxes: np.ndarray, lo, hi) -> np.ndarray:
    return (boxes[:, 0, 0] < hi[0]) & (boxes[:, 1, 0] > lo[0]) & (boxes[:, 0, 1] < hi[1]) & (boxes[:, 1, 1] > lo[1])


def handle_parts(w: World, a: str) -> tuple[np.ndarray, float, np.ndarray] | None:
    """``a``'s wall ring and handle: (the ring's middle (xy), its radius, the indices of the handle's
    boxes), or None without a handle. The ring is the tallest boxes (a mug's wall; measured on
    LIBERO's three mugs: walls 13-17 cm tall, the handle's bars at most 6 cm); the handle, the other
    boxes standing PROTRUDE_M or more out beyond it."""
    b = w.bodies[a]
    if len(b.obbs) < 4:
        return None
    tall = b.obbs.half_along(UP)                          # half heights
    ring = tall >= RING_TALL * tall.max()
    if ring.sum() < 4:
        return None
    mid = b.obbs.c[ring, :2].mean(axis=0)
    r = np.linalg.norm(b.obbs.c[:, :2] - mid, axis=1)
    radius = float(r[ring].max())
    idx = np.flatnonzero(~ring & (r > radius + PROTRUDE_M))
    return (mid, radius, idx) if len(idx) else None


def handle_dir(w: World, a: str) -> float | None:
    """The horizontal direction (rad) in which ``a``'s handle sticks out; None without one."""
    parts = handle_parts(w, a)
    if parts is None:
        return None
    mid, _, idx = parts
    v = w.bodies[a].obbs.c[idx, :2].mean(axis=0) - mid
    return math.atan2(v[1], v[0])


def tool_rot(d: np.ndarray, theta: float, near_yaw: float) -> np.ndarray:
    """The grip-site frame tilted ``theta`` from pointing down toward the horizontal ``d``, within the
    vertical plane along it, the fingers separating horizontally across it (of the two directions,
    the one nearer ``near_yaw``)."""
    x = np.array([-d[1], d[0], 0.0])
    if float(np.dot(x[:2], [math.cos(near_yaw), math.sin(near_yaw)])) < 0:
        x = -x
    z = d * math.sin(theta) + np.array([0.0, 0.0, -math.cos(theta)])
    return np.column_stack([x, np.cross(z, x), z])


def aligned(pose: pp.Pose, rot: np.ndarray) -> bool:
    """The tool points along ``rot``'s approach with the fingers across the same way (either pair)."""
    return pose.rot is not None and float(np.dot(pose.approach, rot[:, 2])) > ALIGNED_DOT and \
        abs(float(np.dot(pose.rot[:, 0], rot[:, 0]))) > ALIGNED_DOT


def spin_to(d_from: np.ndarray, op: Opening) -> float:
    """The turn (rad, about the vertical) taking the horizontal ``d_from`` to the opening's axis."""
    return wrap(math.atan2(op.d[1], op.d[0]) - math.atan2(d_from[1], d_from[0]))


@dataclass
class HandleGrasp:
    point: np.ndarray          # grip site, base frame
    gap_m: float
    part: int                  # the object's box between the fingers


def handle(w: World, a: str, d: np.ndarray, rot: np.ndarray) -> HandleGrasp | None:
    """The grasp of ``a``'s handle from behind it along ``d`` (the opening's axis): the handle's
    outermost bar, when the open fingers fit around it clear of the rest."""
    parts = handle_parts(w, a)
    if parts is None:
        return None
    idx = parts[2]
    b = w.bodies[a]
    tall = b.obbs.half_along(UP)
    idx = [i for i in idx if tall[i] >= BAR_MIN_HALF_M]
    if not idx:
        return None
    k = min(idx, key=lambda i: float(b.obbs.c[i] @ d))    # the handle's outermost bar
    s = rot[:, 0]
    across = float(np.abs(b.obbs.R[k].T @ s) @ b.obbs.h[k]) * 2.0
    gap = min(w.hand.max_gap_m, across + 2 * HANDLE_MARGIN_M)
    point = b.obbs.c[k] + d * GRIP_IN_M
    fingers = gripper_boxes(w.hand, point, 0.0, gap, hand=False, rot=rot)
    rest = np.arange(len(b.obbs)) != k
    others = Boxes(b.obbs.c[rest], b.obbs.h[rest], b.obbs.R[rest])
    if separation(fingers, others) < HANDLE_FREE_M:
        return None
    if w.clearance(gripper_boxes(w.hand, point, 0.0, gap, rot=rot), exclude=(a,)) < HANDLE_CLEAR_M:
        return None
    return HandleGrasp(point, gap, k)


def target(w: World, a: str, op: Opening, grip: np.ndarray, rot: np.ndarray, width_m: float,
           need: float = CLEAR_IN_M) -> pp.Target | None:
    """Where ``a``'s origin goes inside: its bottom FLOOR_CLEAR_M over the floor, the object and the
    hand (held as now at ``grip``) clear of the fixture, the object's back inside
    the face when it fits, nearest the region's middle; None when nowhere fits."""
    rg = w.regions[op.region]
    b = w.bodies[a]
    c = np.asarray(rg["centre"], float)
    half = np.asarray(rg["half_extents"], float)
    d = op.d
    s = np.array([-d[1], d[0], 0.0])
    bundle = pp.held_bundle(w, a, grip, 0.0, width_m, rot=rot)
    obj = b.obbs.shifted(-np.asarray(grip, float))
    rel = grip - b.pos                                     # the grip from the origin
    lo = obj.aabb()
    z = op.floor + FLOOR_CLEAR_M - float(lo[:, 0, 2].min()) - rel[2]
    back = float((obj.c @ d - obj.half_along(d)).min()) + float(rel @ d)
    fx = w.bodies[op.fixture].obbs
    tops = fx.c[:, 2] + fx.half_along(UP)
    keep = tops > op.floor + WALL_OVER_FLOOR_M                        # (the floor is kept clear by the height alone)
    walls = Boxes(fx.c[keep], fx.h[keep], fx.R[keep])
    best = None
    depth_half = float(np.abs(d[:2]) @ half[:2])
    across_half = float(np.abs(s[:2]) @ half[:2])
    for fd in np.linspace(-INSIDE_SPAN, INSIDE_SPAN, 9):
        for fs in np.linspace(-INSIDE_SPAN, INSIDE_SPAN, 17):
            o = c.copy()
            o[:2] = c[:2] + d[:2] * fd * depth_half + s[:2] * fs * across_half
            o[2] = z
            at = bundle.shifted(o + rel)
            clear = min(w.clearance(at, exclude=(a, op.fixture)), separation(at, walls))
            if clear < need:
                continue
            inside = float(o @ d) + back - op.face
            score = min(inside, INSIDE_M) * INSIDE_GAIN - abs(fs) * ACROSS_COST - abs(fd) * DEPTH_COST + \
                min(clear, INSIDE_CLEAR_ENOUGH_M)
            if best is None or score > best[0]:
                best = (score, o)
    return None if best is None else pp.Target(best[1], op.floor, (op.fixture,))


def held_target(w: World, a: str, op: Opening, pose: pp.Pose) -> pp.Target | None:
    """``target`` for ``a`` as the hand holds it now, with less clearance when none has CLEAR_IN_M
    (held, the object sits a little otherwise than the grasp was planned for)."""
    for need in (CLEAR_IN_M, CLEAR_IN_M / 2, 0.0):
        t = target(w, a, op, pose.grip, pose.rot, pose.width_mm / 1000.0, need=need)
        if t is not None:
            return t
    return None


def choose(w: World, a: str, op: Opening, pose: pp.Pose) -> tuple[HandleGrasp, np.ndarray] | None:
    """The handle grasp and the tool's frame for it: the first tilt (TILTS_DEG; the one the tool is
    already turned to first) at which the open fingers fit around the handle where it stands and the
    held object, with the hand, fits inside the region. None when the handle does not point away
    from the opening."""
    h = handle_dir(w, a)
    if h is None:
        return None
    gd = -np.array([math.cos(h), math.sin(h), 0.0])       # toward the object from its handle
    if abs(spin_to(gd, op)) > TRAIL_MAX:                  # its handle points elsewhere (measured: turning it
        return None                                       # with the tool tilted stalls the arm, 100-190 mm off)
    rots = [tool_rot(op.d, math.radians(t), pose.yaw) for t in TILTS_DEG]
    rots.sort(key=lambda r: not aligned(pose, r))
    for rot in rots:
        g = handle(w, a, op.d, rot)
        if g is not None and target(w, a, op, g.point, rot, g.gap_m - 2 * HANDLE_MARGIN_M) is not None:
            return g, rot
    return None


def grasp(brain, w: World, pose: pp.Pose, a: str, op: Opening) -> tuple[list[dict], bool]:
    """One batch toward gripping ``a``'s handle: turn the tool where it has room (the first batch),
    come in along the tool's axis, close, lift TEST_LIFT_M (the next)."""
    prof = brain.profile
    if pp.held(w, a, pose, prof):
        return [], True
    found = choose(w, a, op, pose)
    if found is None:
        return [], True                                   # no handle, or it does not fit: the Verifier says no
    g, rot = found
    approach = rot[:, 2]
    pre = g.point - approach * INSERT_STANDOFF_M
    frac = round(g.gap_m * 1000.0 / prof.gripper_max_width_mm, 3)
    cmds: list[dict] = []
    if not aligned(pose, rot):
        if pose.rot is not None and pose.tilt > UNTILT_MIN and \
                abs(float(np.dot(pose.rot[:, 0], rot[:, 0]))) > ALIGNED_DOT:
            return reorient(pose, rot, prof)[:prof.limits.max_batch], False   # part way through the turn: on
        un, pose = untilt(pose, prof)
        cmds += un
        cmds.append({"op": "gripper", "width": frac})
        yaw = math.atan2(rot[1, 0], rot[0, 0])
        down = down_rot(yaw)
        cmds += reorient(pose, down, prof)                # fingers across the axis, still pointing down
        at = turning_point(w, pre, down, rot)
        bundle = gripper_boxes(w.hand, np.zeros(3), yaw, g.gap_m)
        cmds += path_commands(pose.grip, route(w, pose.grip, at, bundle, exclude=(), clear=ROUTE_CLEAR_M), prof)
        cmds += reorient(pp.Pose(at, yaw, pose.width_mm, frac, pose.j7_deg, down), rot, prof)
        return cmds[:prof.limits.max_batch], False
    if pose.fraction < CLOSED_MAX and np.linalg.norm(pose.grip - g.point) < HANDLE_NEAR_M:   # closed on nothing
                                                                                            # there: back out
        return [{"op": "gripper", "width": frac}] + path_commands(pose.grip, [pre], prof), False
    if abs(pose.width_mm - g.gap_m * 1000.0) > GAP_TOL_MM:
        cmds.append({"op": "gripper", "width": frac})
    bundle = gripper_boxes(w.hand, np.zeros(3), 0.0, g.gap_m, rot=pose.rot)
    cmds += path_commands(pose.grip, route(w, pose.grip, pre, bundle, exclude=(a,)), prof)
    cmds += path_commands(pre, [g.point], prof)
    cmds.append({"op": "gripper", "action": "close"})
    cmds += path_commands(g.point, [g.point + [0.0, 0.0, TEST_LIFT_M]], prof)   # (the Verifier sees it rise)
    return cmds, True


def carry(brain, w: World, pose: pp.Pose, a: str, op: Opening) -> tuple[list[dict], bool]:
    """Level to in front of the opening, at the height that clears the floor, then in along the axis."""
    prof = brain.profile
    if not pp.held(w, a, pose, prof):
        return [{"op": "gripper", "action": "open"}], True
    width = pose.width_mm / 1000.0
    t = held_target(w, a, op, pose)
    if t is None:
        return [], True                                   # it does not fit in as held: the Verifier says no
    rel = w.bodies[a].pos - pose.grip
    goal = t.origin - rel
    if np.linalg.norm(pose.grip - goal) < THERE_M:
        return [], True
    bundle = pp.held_bundle(w, a, pose.grip, 0.0, width, rot=pose.rot)
    stage = goal
    for k in np.arange(*STAGE_BACK_M):
        stage = goal - op.d * k
        if w.clearance(bundle.shifted(stage), exclude=(a,)) > STAGE_CLEAR_M:
            break
    along = float(np.dot(pose.grip - goal, op.d))
    side = np.linalg.norm((pose.grip - goal) - op.d * along)
    if along > -0.5 and side < IN_LINE_M and clear_along(w, pose.grip, goal, bundle, (a,)) > 0.0:
        return path_commands(pose.grip, [goal], prof), True   # in line already: straight in
    pts = route(w, pose.grip, stage, bundle, exclude=(a,)) + [goal]
    return path_commands(pose.grip, pts, prof), True


def place(brain, w: World, pose: pp.Pose, a: str, op: Opening) -> tuple[list[dict], bool]:
    """Let go of the handle (the object drops the last few mm onto the floor) and back out; when the
    object's back still stands out of the opening (the hand over the handle could take it no deeper),
    push it in by its handle with the closed fingertips, the tool tilted steeper (PUSH_TILT_DEG, so
    that the hand stays out under the roof's edge), and back out again."""
    prof = brain.profile
    d = op.d
    back = pose.grip - d * BACK_OUT_M
    cmds = [{"op": "gripper", "action": "open"}] + path_commands(pose.grip, [back], prof)
    b = w.bodies[a]
    ext = b.obbs.half_along(d)
    k = int(np.argmin(b.obbs.c @ d - ext))
    shift = op.face + INSIDE_M - float(b.obbs.c[k] @ d - ext[k])   # how far its back is from inside enough
    if shift < INSIDE_M / 2 or not pp.held(w, a, pose, prof):
        return cmds, True
    rot = tool_rot(d, math.radians(PUSH_TILT_DEG), pose.yaw)
    tips = gripper_boxes(w.hand, np.zeros(3), 0.0, 0.0, hand=False, rot=rot)
    front = float(np.max(tips.c @ d + tips.half_along(d)))
    bar = b.obbs.c[k]
    room = 0.0                                            # how far it can go before meeting the back
    while room < shift + INSERT_PUSH_PAST_M and \
            w.clearance(b.obbs.shifted(d * (room + ROOM_STEP_M)), exclude=(a,)) > ROOM_CLEAR_M:
        room += ROOM_STEP_M
    start = bar - d * (ext[k] + front + PUSH_GAP_M)
    end = start + d * (PUSH_GAP_M + min(shift + INSERT_PUSH_PAST_M, room))
    turn = reorient(pp.Pose(back, pose.yaw, w.hand.open_width_mm, 1.0, pose.j7_deg, pose.rot), rot, prof)
    cmds += turn + [{"op": "gripper", "action": "close"}]
    cmds += path_commands(back, [start, end, end - d * BACK_OUT_M], prof)
    return cmds[:prof.limits.max_batch - 1], True
