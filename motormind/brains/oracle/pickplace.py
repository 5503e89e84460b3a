"""Pick and place from privileged geometry: which grasp, where the object goes, is it held.

Grasps are top-down. A *straddle* grasp closes the fingers across an object narrower than the
finger gap (along the direction where it is narrowest that the scene leaves room for); a *rim*
grasp pinches the wall of a wide hollow object (a bowl, a mug) on the side with the most room.
Every candidate is scored by the clearance of the open gripper at the grasp and of the closed
gripper where the object will be released (the hand is 21 cm wide along the finger axis: a rim
grasp on the wrong side puts it into the cabinet next to the plate). Both finger orientations of
a grasp are the same grasp; the one nearer the wrist's current yaw is used, within the wrist
joint's range.

LIBERO's predicates test the object's body origin (``Body.pos``): ``On A B`` (an object) wants A's
origin within 3 cm of B's in xy, above it, touching; ``On A region`` the origin over the region's
top face; ``In A region`` the origin inside the region's box.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .tuning import (APPROACH_COLUMN_M, AVOID_M, CAUGHT_SLACK_MM, CLEAR_ENOUGH_M, FEASIBLE_M, FOOT_INSET_M,
                     GRASP_DEPTH_M, GRASP_FLOOR_M, GRASP_TOUCH_M, HAND_COLUMN_M, HAND_MET_COST, HAND_OVER_RIM_M,
                     HOLLOW_PROBE_M, Hand, INFEASIBLE_COST, KEEP_BONUS, LEVEL_MIN, ON_OVER_M, ON_SPAN_M,
                     OPEN_MARGIN_M, OPEN_SLACK_MM, PART_COST, PART_DEPTH_M, PART_HEIGHT_GAIN, PART_MARGIN_M,
                     PART_MAX_M, PART_MIN_HEIGHT_M, PART_MIN_LEN_M, PART_OFFSET_COST, PART_TOUCH_M, PLACE_COLUMN_M,
                     PLACE_GRID, PLACE_SPAN, PLACE_SPINS, REACH_COST, REACH_OVER_M, RELEASE_M, RIM_COST,
                     RIM_DEPTHS_M, RIM_DEPTH_COST, RIM_DEPTH_STEP_M, RIM_GAP_M, RIM_INSET_M, RIM_NEAR_M, RIM_SKEWS,
                     RIM_SKEW_COST, ROOM_M, SPOT_CLEAR_ENOUGH_M, SPOT_HIGH_COST, SPOT_OFF_COST, STRADDLE_SLACK_MM,
                     SUPPORT_OVER_M, TRIED_NEAR_M, TRIED_YAW, TURN_COST, WALL_RING_SLACK_M, WALL_RING_SPREAD,
                     WIDE_COST)
from .world import Boxes, World, gripper_boxes, rot_z, separation, wrap


@dataclass
class Grasp:
    point: np.ndarray          # grip site, base frame
    sep_yaw: float             # finger separation direction (rad from +x); sep_yaw + pi is the same grasp
    kind: str                  # straddle | rim
    width_m: float             # the object's width between the fingers
    score: float
    gap_m: float               # how far the fingers open for it (no wider than it needs)
    part: int | None = None    # a part grasp: which of the object's boxes is between the fingers


@dataclass
class Pose:
    grip: np.ndarray
    yaw: float                 # grip-site yaw = the finger separation direction
    width_mm: float
    fraction: float
    j7_deg: float | None
    rot: np.ndarray | None = None    # grip-site frame: x = finger separation, z = approach (down at rest)

    @classmethod
    def from_state(cls, st: dict) -> "Pose":
        from ...geometry import quat_to_mat
        j = st.get("joints_deg") or []
        return cls(np.asarray(st["eef_pos_mm"], float) / 1000.0, math.radians(float(st["eef_yaw_deg"])),
                   float(st["gripper_width_mm"]), float(st["gripper_fraction"]),
                   float(j[6]) if len(j) >= 7 else None, quat_to_mat(st["eef_quat_xyzw"]))

    @property
    def approach(self) -> np.ndarray:
        return np.array([0.0, 0.0, -1.0]) if self.rot is None else self.rot[:, 2]

    @property
    def tilt(self) -> float:
        """Angle (rad) of the approach axis from straight down."""
        return math.acos(float(np.clip(-self.approach[2], -1.0, 1.0)))


def corners(world: World, name: str) -> np.ndarray:
    """The 8 corners of a body's oriented box, base frame."""
    b = world.bodies[name]
    lo, hi = b.local_lo, b.local_hi
    local = np.array([[x, y, z] for x in (lo[0], hi[0]) for y in (lo[1], hi[1]) for z in (lo[2], hi[2])])
    return b.pos + local @ b.rot.T


def wall_corners(world: World, name: str) -> np.ndarray:
    """The corners of the geoms that make a hollow object's wall: those whose centres are not much
    farther from the middle than the ring of most (a mug's handle sticks out beyond it: measured on
    LIBERO's white-yellow mug, wall geoms at 42 mm from its axis, the handle's at 58-82 mm)."""
    b = world.bodies[name]
    if len(b.obbs) < 4:
        return corners(world, name)
    c = b.obbs.c[:, :2]
    mid = np.median(c, axis=0)
    r = np.linalg.norm(c - mid, axis=1)
    keep = r <= WALL_RING_SPREAD * float(np.percentile(r, 75)) + WALL_RING_SLACK_M
    signs = np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], float)
    return np.concatenate([b.obbs.c[k] + (signs * b.obbs.h[k]) @ b.obbs.R[k].T for k in np.flatnonzero(keep)])


def extent_along(pts: np.ndarray, yaw: float) -> tuple[float, float]:
    u = np.array([math.cos(yaw), math.sin(yaw)])
    d = pts[:, :2] @ u
    return float(d.min()), float(d.max())


def held(world: World, a: str, pose: Pose, profile) -> bool:
    """``a`` pinched between the fingers: both touch it (privileged contacts), at a gap that holds."""
    return world.pinched(a) and \
        world.hand.model.hold_min_mm < pose.width_mm < profile.gripper_max_width_mm - OPEN_SLACK_MM


def _yaws(pts: np.ndarray, body, n: int = 12) -> list[float]:
    """Candidate finger directions: the body's own axes (when upright) and every 180/n degrees."""
    base = [k * math.pi / n for k in range(n)]
    if body.upright:
        ax = math.atan2(body.rot[1, 0], body.rot[0, 0])
        base = [ax, ax + math.pi / 2] + base
    return base


def candidates(world: World, a: str) -> list[Grasp]:
    b = world.bodies[a]
    pts = corners(world, a)
    out: list[Grasp] = []
    z_top, z_bot = float(b.hi[2]), float(b.lo[2])
    for yaw in _yaws(pts, b):
        lo, hi = extent_along(pts, yaw)
        w = hi - lo
        if w <= world.hand.model.straddle_max_m:
            u = np.array([math.cos(yaw), math.sin(yaw)])
            v = np.array([-u[1], u[0]])
            vlo, vhi = extent_along(pts, yaw + math.pi / 2)
            xy = u * (lo + hi) / 2 + v * (vlo + vhi) / 2
            z = max(z_bot + GRASP_FLOOR_M, z_top - GRASP_DEPTH_M)
            out.append(Grasp(np.array([xy[0], xy[1], z]), yaw, "straddle", w, 0.0,
                             min(world.hand.max_gap_m, w + 2 * OPEN_MARGIN_M)))
    if not out and not hollow(world, a):         # wide and solid: a handle, a knob
        out += part_candidates(world, a)
    if not out:                                  # wide and open on top: pinch the wall (radially)
        pts = wall_corners(world, a)              # (a mug's handle is not its wall)
        for yaw in _yaws(pts, b):
            u = np.array([math.cos(yaw), math.sin(yaw)])
            v = np.array([-u[1], u[0]])
            lo, hi = extent_along(pts, yaw)
            vlo, vhi = extent_along(pts, yaw + math.pi / 2)
            centre = u * (lo + hi) / 2 + v * (vlo + vhi) / 2
            r = (hi - lo) / 2 - RIM_INSET_M
            for sign in (1.0, -1.0):
                xy = centre + sign * r * u
                top = z_top if b.rot[2, 2] > LEVEL_MIN else _local_top(pts, xy, z_top)   # (a tipped bowl's
                                                                                         # rim is not level)
                for depth in RIM_DEPTHS_M:            # a shallower pinch keeps the hand over walls nearby
                    z = max(z_bot + GRASP_FLOOR_M, top - depth)
                    for skew in RIM_SKEWS:            # the fingers across the wall, or across it at a slant
                        out.append(Grasp(np.array([xy[0], xy[1], z]), yaw + skew, "rim", 2 * RIM_INSET_M,
                                         -RIM_DEPTH_COST * abs(RIM_DEPTHS_M[0] - depth) / RIM_DEPTH_STEP_M
                                         - RIM_SKEW_COST * abs(skew) / 0.5,
                                         RIM_GAP_M))
    return out


def _local_top(pts: np.ndarray, xy, default: float) -> float:
    """The highest of the wall corners ``pts`` within RIM_NEAR_M (xy) of ``xy``: the rim's height there."""
    near = np.linalg.norm(pts[:, :2] - np.asarray(xy)[:2], axis=1) < RIM_NEAR_M
    return float(pts[near, 2].max()) if near.any() else default


def hollow(world: World, a: str) -> bool:
    """Open on top (a bowl, a mug, a basket): no geom of ``a`` under the middle of its top, from
    just under the top to half its height. (Probed down the middle of the bounding box, which a
    handle or a spout moves off the body's axis: a moka pot's lid knob is missed there, its body
    is not.)"""
    b = world.bodies[a]
    if not len(b.obbs):
        return False
    height = float(b.hi[2] - b.lo[2])
    for depth in (HOLLOW_PROBE_M, 0.25 * height, 0.5 * height):
        p = np.array([(b.lo[0] + b.hi[0]) / 2, (b.lo[1] + b.hi[1]) / 2, b.hi[2] - depth])
        local = np.einsum("nji,nj->ni", b.obbs.R, p - b.obbs.c)    # into each box's frame
        if np.any(np.all(np.abs(local) <= b.obbs.h + 1e-4, axis=1)):
            return False
    return True


def part_candidates(world: World, a: str) -> list[Grasp]:
    """Straddle grasps of one part of an object too wide to straddle whole (a moka pot's lid knob
    or handle, a pan's handle): a geom narrow across one horizontal axis of its own."""
    b = world.bodies[a]
    out = []
    centre = (b.lo[:2] + b.hi[:2]) / 2
    for k in range(len(b.obbs)):
        R, h, c = b.obbs.R[k], b.obbs.h[k], b.obbs.c[k]
        horiz = [j for j in range(3) if abs(R[2, j]) < 0.3]
        vert = [j for j in range(3) if abs(R[2, j]) > 0.7]
        if len(horiz) != 2 or not vert:
            continue
        j = min(horiz, key=lambda i: h[i])
        other = max(horiz, key=lambda i: h[i])
        width, length, height = 2 * h[j], 2 * h[other], 2 * h[vert[0]]
        if width > PART_MAX_M or length < PART_MIN_LEN_M or height < PART_MIN_HEIGHT_M:
            continue
        yaw = math.atan2(R[1, j], R[0, j])
        top = c[2] + h[vert[0]]
        z = max(c[2] - h[vert[0]] + GRASP_FLOOR_M, top - PART_DEPTH_M)
        off = float(np.linalg.norm(c[:2] - centre))     # from the object's middle: a tilting load
        out.append(Grasp(np.array([c[0], c[1], z]), yaw, "part", width,
                         -PART_OFFSET_COST * off + PART_HEIGHT_GAIN * (top - float(b.hi[2])),
                         min(world.hand.max_gap_m, width + 2 * PART_MARGIN_M), part=k))
    return out


def orient(grasp_yaw: float, pose: Pose, hand: Hand) -> float:
    """Of the two finger orientations of a grasp, the one the wrist reaches with the smaller turn
    that keeps joint 7 inside ``hand``'s wrist limit (yaw +d turns joint 7 by about -d)."""
    best = None
    for y in (grasp_yaw, grasp_yaw + math.pi):
        d = wrap(y - pose.yaw)
        if pose.j7_deg is not None and abs(pose.j7_deg - math.degrees(d)) > hand.model.wrist_limit_deg:
            continue
        if best is None or abs(d) < abs(best):
            best = d
    if best is None:                             # neither within the range: the smaller overshoot
        best = min((wrap(y - pose.yaw) for y in (grasp_yaw, grasp_yaw + math.pi)),
                   key=lambda d: abs(pose.j7_deg - math.degrees(d)))
    return pose.yaw + best


@dataclass
class Target:
    origin: np.ndarray         # where the object's body origin goes (xy; z = its height at release)
    support_z: float           # the surface it is released onto
    exclude: tuple             # bodies the carried object may touch at the end (the support)
    spin: float = 0.0          # the wrist turns the object this much (rad, about the vertical) on the way


def turned(boxes: Boxes, spin: float, at) -> Boxes:
    """Boxes given relative to a point, turned by ``spin`` about the vertical through it, moved to ``at``."""
    r = rot_z(spin)
    return Boxes(np.asarray(at, float) + boxes.c @ r.T, boxes.h, np.einsum("ij,njk->nik", r, boxes.R))


def spun(world: World, a: str, spin: float, origin) -> Boxes:
    """``a``'s boxes turned by ``spin`` about the vertical through its origin, moved to ``origin``."""
    b = world.bodies[a]
    return turned(b.obbs.shifted(-b.pos), spin, origin)


def place_target(world: World, a: str, pred, avoid=(), hand: Boxes | None = None, room_for=(),
                 keep=None) -> Target:
    """Where ``a`` is released for ``pred`` (On / In): the origin spot, among those the predicate
    accepts (a region's box, 3 cm around an object's origin), where the object, hanging RELEASE_M
    over what is under it, is clearest of everything else on the way down, nearest the middle
    and lowest (on the surface meant, not on a neighbour). Into a region the object may be turned
    (a book into a slot): a quarter or an eighth turn when that fits it better. With ``hand`` (the
    closed gripper's boxes relative to ``a``'s origin, as it holds it), the hand too is kept clear
    all the way down from HAND_COLUMN_M, and any goal may turn the object (the hand's long side
    away from a cabinet beside the spot). ``room_for`` names objects the goal puts on the same
    support after ``a``: a spot that leaves one of theirs clear of ``a`` is preferred (two moka
    pots on one burner: the first at the middle left the second none, every way down met it); then
    a spot within AVOID_M of ``keep`` (where the last carry went) stays chosen unless another is
    clearly better (the room changes as the held object sways: the Verifier found the carry 38 mm
    from a target that had moved)."""
    op, b = pred[0].lower(), pred[2]
    body = world.bodies[a]
    if b in world.regions:
        rg = world.regions[b]
        centre = np.asarray(rg["centre"], float)[:2]
        half = np.asarray(rg["half_extents"], float)[:2] * PLACE_SPAN
        below = float(rg["centre"][2]) if op == "in" else float(rg["hi"][2]) + SUPPORT_OVER_M
    else:
        tb = world.bodies[b]
        centre = tb.pos[:2].copy()
        half = np.array([ON_SPAN_M, ON_SPAN_M])
        below = float(tb.hi[2]) + ON_OVER_M
    spins = PLACE_SPINS if op == "in" or hand is not None else (0.0,)
    bottom_off = float(body.lo[2] - body.pos[2])
    later = [_later_spots(world, c, a, centre, half, below) for c in room_for
             if c != a and c in world.bodies and len(world.bodies[c].obbs) and len(body.obbs)]
    spots = []
    for spin in spins:
        for fx in PLACE_GRID:
            for fy in PLACE_GRID:
                xy = centre + half * [fx, fy]
                at = np.array([xy[0], xy[1], body.pos[2]])
                foot = spun(world, a, spin, at).aabb() if len(body.obbs) else np.array([[body.lo, body.hi]])
                flo, fhi = foot[:, 0, :2].min(axis=0) + FOOT_INSET_M, foot[:, 1, :2].max(axis=0) - FOOT_INSET_M
                support = world.top_under(flo, fhi, exclude=(a,), below=below)
                if not math.isfinite(support):
                    support = float(body.lo[2])
                origin = np.array([xy[0], xy[1], support + RELEASE_M - bottom_off])
                clear = min(world.clearance(spun(world, a, spin, origin + [0, 0, dz]), exclude=(a,))
                            for dz in PLACE_COLUMN_M) if len(body.obbs) else 0.0   # there, and the way down
                met = 0.0
                if hand is not None:                  # (a hand that meets something on the way down is stopped)
                    hand_clear = min(world.clearance(turned(hand, spin, origin + [0, 0, dz]), exclude=(a,))
                                     for dz in HAND_COLUMN_M)
                    clear, met = min(clear, hand_clear), float(hand_clear < 0.0)
                if later:                             # the room it leaves the objects still to come
                    mine = spun(world, a, spin, origin)
                    clear = min(clear, min(_room(mine, cs) for cs in later) - ROOM_M)
                spots.append((origin, support, clear, float(np.hypot(fx, fy)) + abs(spin) + HAND_MET_COST * met,
                              spin))
    lowest = min(sp[1] for sp in spots)
    def avoided(xy) -> float:                         # a spot a carry to was stopped at, and near it
        return 1.0 if any(np.linalg.norm(np.asarray(xy[:2]) - np.asarray(v)[:2]) < AVOID_M for v in avoid) else 0.0
    def kept(xy) -> float:
        return KEEP_BONUS if later and keep is not None and np.linalg.norm(np.asarray(xy[:2]) - keep[:2]) < AVOID_M \
            else 0.0
    origin, support, _, _, spin = max(spots, key=lambda sp: min(sp[2], SPOT_CLEAR_ENOUGH_M) - SPOT_OFF_COST * sp[3]
                                      - SPOT_HIGH_COST * (sp[1] - lowest) - avoided(sp[0]) + kept(sp[0]))
    return Target(origin, support, (a,), spin)


def _later_spots(world: World, c: str, a: str, centre, half, below) -> list[tuple[Boxes, float]]:
    """Where ``c``, still to come to the same region, could go (the spots place_target tries, unturned,
    over the way down): its boxes there and how clear they are of everything but ``a`` and ``c``."""
    body = world.bodies[c]
    bottom_off = float(body.lo[2] - body.pos[2])
    out = []
    for fx in PLACE_GRID:
        for fy in PLACE_GRID:
            xy = centre + half * [fx, fy]
            foot = spun(world, c, 0.0, np.array([xy[0], xy[1], body.pos[2]])).aabb()
            flo, fhi = foot[:, 0, :2].min(axis=0) + FOOT_INSET_M, foot[:, 1, :2].max(axis=0) - FOOT_INSET_M
            support = world.top_under(flo, fhi, exclude=(a, c), below=below)
            if not math.isfinite(support):
                continue
            origin = np.array([xy[0], xy[1], support + RELEASE_M - bottom_off])
            for dz in PLACE_COLUMN_M[:3]:
                boxes = spun(world, c, 0.0, origin + [0.0, 0.0, dz])
                out.append((boxes, world.clearance(boxes, exclude=(a, c))))
    return out


def _room(mine: Boxes, later: list[tuple[Boxes, float]]) -> float:
    """The clearest spot ``later`` offers once ``mine`` stands where it would go (each spot's worst
    height on the way down counts: the spots come in columns of three)."""
    best = -math.inf
    for k in range(0, len(later), 3):
        col = later[k:k + 3]
        best = max(best, min(min(cl, separation(boxes, mine)) for boxes, cl in col))
    return best


def grip_at(target: Target, grasp_rel: np.ndarray, lift: float = 0.0) -> np.ndarray:
    """The grip point that puts the object's origin at the target (``grasp_rel`` = origin - grip,
    now; the wrist's turn by ``target.spin`` turns it too)."""
    return target.origin - rot_z(target.spin) @ grasp_rel + np.array([0.0, 0.0, lift])


def reach_margin(p, hand: Hand) -> np.ndarray:
    """How far (m) the wrist flange above top-down grip points ``p`` (..., 3) is beyond the arm's
    comfortable reach (the robot profile's ``reach``: ``hand.reach_m`` from ``hand.shoulder_m``);
    negative: within it. (A bowl grasped with the Panda's flange 0.777 m out had the elbow straight:
    the carry back stalled, singular.)"""
    flange = np.asarray(p, float) + np.array([0.0, 0.0, hand.flange_above_grip_m])
    return np.linalg.norm(flange - np.array(hand.shoulder_m), axis=-1) - hand.reach_m


def reach_excess(p, hand: Hand) -> float:
    """``reach_margin`` of one grip point, 0 within reach."""
    return max(0.0, float(reach_margin(p, hand)))


def choose(world: World, a: str, pose: Pose, profile, target: Target | None, tried=()) -> Grasp | None:
    """The best-scoring grasp of ``a``: clearance at the grasp (open fingers), over it and at the
    release, within reach; grasps like one already ``tried`` ((point, yaw) relative to the
    object's origin) come last."""
    body = world.bodies[a]
    best = None
    cands = candidates(world, a)
    narrowest = min((g.width_m for g in cands if g.kind == "straddle"), default=0.0)
    for g in cands:
        yaw = orient(g.sep_yaw, pose, world.hand)
        clear_g = world.clearance(gripper_boxes(world.hand, g.point, yaw, g.gap_m), exclude=(a,))
        clear_pre = min(world.clearance(gripper_boxes(world.hand, g.point + [0, 0, dz], yaw, g.gap_m), exclude=(a,))
                        for dz in APPROACH_COLUMN_M)     # the way in from above
        clear = min(clear_g + GRASP_TOUCH_M, clear_pre)   # at the grasp, fingertips may graze the support
        if g.kind == "part":                          # the rest of the object is in the way too
            own = world.bodies[a].obbs
            keep = [k for k in range(len(own)) if k != g.part]
            if keep:
                rest = Boxes(own.c[keep], own.h[keep], own.R[keep])
                for dz in (0.0,) + APPROACH_COLUMN_M:
                    tips = gripper_boxes(world.hand, g.point + [0, 0, dz], yaw, g.gap_m)
                    clear = min(clear, separation(tips, rest) + PART_TOUCH_M)
        if g.kind == "rim":                           # the hand spans the object: clear of its far rim too
            hand = gripper_boxes(world.hand, g.point, yaw, g.gap_m)
            own = world.bodies[a].obbs
            clear = min(clear, separation(Boxes(hand.c[:1], hand.h[:1], hand.R[:1]), own) - HAND_OVER_RIM_M)
        excess = reach_excess(g.point + [0, 0, REACH_OVER_M], world.hand)
        if target is not None:
            rel = body.pos - g.point
            gp = grip_at(target, rel)
            held_g = gripper_boxes(world.hand, np.zeros(3), yaw + target.spin, max(g.width_m, 0.01))
            bundle_p = held_g + spun(world, a, target.spin, target.origin).shifted(-gp) if len(body.obbs) else held_g
            for dz in PLACE_COLUMN_M:                 # the release pose, and the way down to it
                clear = min(clear, world.clearance(bundle_p.shifted(gp + [0, 0, dz]), exclude=(a,))
                            + (RELEASE_M if dz == 0.0 else 0.0))   # (the object hangs RELEASE_M over its support)
            excess = max(excess, reach_excess(gp, world.hand)) + (1.0 if _outside(profile, gp) else 0.0)
        # first what can be done (clear of the scene, within reach), then the roomiest, then the least
        # wrist turning and the plainest grasp
        score = min(clear, CLEAR_ENOUGH_M) - REACH_COST * excess
        if clear < FEASIBLE_M:
            score -= INFEASIBLE_COST
        score -= TURN_COST * abs(math.degrees(wrap(yaw - pose.yaw))) / 45.0
        if g.kind == "rim":
            score -= RIM_COST - g.score                  # (a rim candidate's own score: depth and skew)
        else:                                         # across the narrowest side: a slanted squeeze turns it
            score -= WIDE_COST * (g.width_m - narrowest)
        for p_rel, y in tried:
            if np.linalg.norm(g.point - body.pos - p_rel) < TRIED_NEAR_M and abs(wrap(2 * (g.sep_yaw - y))) < TRIED_YAW:
                score -= 0.5
        if g.kind == "part":
            score += g.score - PART_COST
        cand = Grasp(g.point, yaw, g.kind, g.width_m, score, g.gap_m, g.part)
        if best is None or cand.score > best.score:
            best = cand
    return best


def expected_width_mm(world: World, a: str, pose: Pose) -> tuple[float, float]:
    """The finger gap (mm) a clean grasp of ``a`` closes to with the fingers along ``pose.yaw``:
    the object's extent along that direction (a straddle), or up to a rim's thickness."""
    pts = corners(world, a)
    lo, hi = extent_along(pts, pose.yaw)
    w = (hi - lo) * 1000.0
    m = world.hand.model
    if w <= m.straddle_max_m * 1000.0 + STRADDLE_SLACK_MM:         # narrower is fine (a bottle's neck, a box turned
        return m.hold_min_mm, w + CAUGHT_SLACK_MM                 # square in the fingers); wider: more is caught
    return m.hold_min_mm, m.rim_max_mm


def _outside(profile, p_m) -> bool:
    return bool(profile.in_workspace(np.asarray(p_m) * 1000.0))


def bundle(world: World, a: str, pose: Pose) -> Boxes:
    """The closed gripper and the held object's boxes, relative to the grip site."""
    return held_bundle(world, a, pose.grip, pose.yaw, pose.width_mm / 1000.0)


def held_bundle(world: World, a: str, grip: np.ndarray, yaw: float, width_m: float,
                rot: np.ndarray | None = None) -> Boxes:
    """The gripper closed to ``width_m`` on ``a`` at ``grip`` (pointing down, finger yaw ``yaw``; or
    in the grip-site frame ``rot``) and ``a``'s boxes, relative to the grip site (``a`` where it is now)."""
    b = world.bodies[a]
    g = gripper_boxes(world.hand, np.zeros(3), yaw, max(width_m, 0.005), rot=rot)
    return g + b.obbs.shifted(-np.asarray(grip, float)) if len(b.obbs) else g
