"""The oracle's numbers, in one place: each robot's own, and the thresholds every robot shares.

Per robot: ``hand_for(profile)`` joins what the robot profile states (configs/robots/*.yaml: the
gripper's widest opening, the arm's comfortable reach) with the oracle's model of that robot's hand
(``MODELS``, by profile name: the boxes its clearance checks use, the wrist joint's margin, the
finger readings and sizes its grasp and push rules were tuned on). Shared (below the line): the
thresholds about objects, fixtures and the Controller's behaviour, grouped by the module that uses
them, each with its unit and the reason or measurement behind it.

Units: metres unless a name says otherwise (_MM millimetres, _DEG degrees; angles without a unit are
radians; fractions, cosines and costs are dimensionless). Frames as in world.py: ``s`` the finger
separation axis, ``a`` across the fingers, heights up from the grip site with the gripper pointing down.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...errors import ConfigError


@dataclass(frozen=True)
class HandModel:
    """The oracle's box model of one robot's gripper and wrist (m) and its wrist joint's margin."""
    hand_half_s: float          # the hand (palm) half length along s
    hand_half_a: float          # ... half width along a
    hand_z: tuple               # ... its bottom and top over the grip site
    wrist_half: float           # the wrist (the arm's last links, over the hand): half its width, both ways
    wrist_z: tuple              # ... its bottom and top over the grip site
    finger_t: float             # a finger's thickness along s, from the gap's edge outwards
    finger_half_a: float        # ... half its width along a
    finger_z: tuple             # ... its bottom and top over the grip site
    fingertip_below_m: float    # the fingertips' lowest point under the grip site
    wrist_limit_deg: float      # the yaw joint's reading (Pose.j7_deg) a turn may leave, +- (deg): a margin
                                # inside the joint's stop (robots that report no such joint never check it)
    straddle_max_m: float       # the widest object the open fingers straddle with room on both sides
    tip_half_m: float           # the closed fingertips' half thickness, along a push
    hold_min_mm: float          # a closed gripper reading narrower than this (mm) holds nothing
    rim_max_mm: float           # a rim pinch closes narrower than this (mm); wider, something else is caught
    hand_reach_m: float         # a push's path is dearer where things that stand up to the hand are this close


# Measured on LIBERO's Panda hand (robosuite's meshes' collision geoms, gripper pointing down).
PANDA_HAND = HandModel(
    hand_half_s=0.105, hand_half_a=0.041, hand_z=(0.024, 0.122),
    wrist_half=0.072, wrist_z=(0.135, 0.29),          # links 6-7
    finger_t=0.025, finger_half_a=0.012, finger_z=(-0.010, 0.050),
    fingertip_below_m=0.010,
    wrist_limit_deg=160.0,                            # the Panda's joint 7 stops at about +-166 deg
    straddle_max_m=0.066,                             # the 78 mm gap less 6 mm a side
    tip_half_m=0.012,
    hold_min_mm=3.5,        # a rim pinched with both fingers reads 3.9 while it carries a bowl; closed on nothing,
                            # the fingers read 3.0 or less
    rim_max_mm=26.0,
    hand_reach_m=0.11,      # the hand is 21 cm long along the fingers
)

# The xArm6 cell's gripper (sim/xarm_cell/model.py: palm +-0.0625 along the finger axis, fingers
# 0.010 thick, tips 10 mm under the TCP) lies inside the Panda's boxes: the oracle keeps the Panda's
# model there, conservative, and the Panda's readings (hold_min_mm, rim_max_mm: not measured on the
# cell). Its wrist (joint 6, +-360 deg) is not read as joint 7 (six joints).
MODELS = {
    "libero_panda": PANDA_HAND,
    "xarm6": PANDA_HAND,
}


@dataclass(frozen=True)
class Hand:
    """What the oracle plans with for one robot: its tuned ``model`` and the profile's facts (m)."""
    model: HandModel
    max_gap_m: float                  # the fingers' widest gap (profile gripper.max_width_mm)
    open_width_mm: float              # the gap an open gripper reads (the same, mm)
    shoulder_m: tuple                 # the shoulder's centre in the base frame (profile reach.shoulder_mm)
    reach_m: float                    # the wrist flange's comfortable distance from it (reach.radius_mm)
    flange_above_grip_m: float        # the flange over a top-down grip point (reach.flange_above_grip_mm)


def hand_for(profile) -> Hand:
    """The oracle's hand for ``profile``: a ConfigError naming what is missing when the oracle has
    no model of that robot or the profile does not state its reach."""
    model = MODELS.get(profile.name)
    if model is None:
        raise ConfigError(f"brain oracle: no hand model for robot profile {profile.name!r} (known: "
                          f"{', '.join(sorted(MODELS))}; motormind/brains/oracle/tuning.py MODELS)")
    reach = profile.reach
    if reach is None:
        raise ConfigError(f"{profile.source or profile.name}: reach: missing (the oracle weighs grasps by the "
                          "arm's comfortable reach: shoulder_mm, radius_mm, flange_above_grip_mm)")
    return Hand(model, max_gap_m=profile.gripper_max_width_mm / 1000.0,
                open_width_mm=profile.gripper_max_width_mm,
                shoulder_m=tuple(float(v) / 1000.0 for v in reach.shoulder_mm),
                reach_m=reach.radius_mm / 1000.0, flange_above_grip_m=reach.flange_above_grip_mm / 1000.0)


# ==================================================================================================
# The thresholds every robot shares: about LIBERO's objects and fixtures and the Controller's behaviour
# (tuned on the Panda; the hand's own numbers are in MODELS above). Units as in the module's doc.

# -- routes (motion.py) ------------------------------------------------------------------------------
SAMPLE_M = 0.01            # clearance samples along a leg
CLEAR_M = 0.012            # wanted clearance of the bundle over what it passes
MIN_MOVE_M = 0.0015        # a leg shorter than this is not worth a command
START_SKIP_M = 0.015       # a leg may start in contact for this long
SHORT_LEG_M = 0.012        # a leg this short with another after it is aimed past: the hand goes for the next
                           # waypoint (what the Controller's 12 mm blend did with it before issue 33 limited a
                           # blend to a fraction of its move: a 5 mm leg against contact was then blocked)

# -- pick and place (pickplace.py) -------------------------------------------------------------------
RIM_INSET_M = 0.006        # a rim grasp's point inside the wall's outer face
RIM_NEAR_M = 0.02          # a tipped object's rim height at a pinch: its wall corners this near (xy) ...
LEVEL_MIN = 0.995          # ... for one tipped more than this (cos of the tilt: 6 deg; a bowl resting on the
                           # edge of another object, 26 deg)
RIM_GAP_M = 0.040          # the fingers open this far for a rim pinch (a wall 5-10 mm thick)
RIM_SKEWS = (0.0, math.radians(30.0), -math.radians(30.0))   # finger directions off the wall's normal
OPEN_MARGIN_M = 0.016      # a straddle opens this much wider than the object on each side
APPROACH_COLUMN_M = (0.025, 0.05, 0.09, 0.13)   # heights over a grasp the hand comes down through
FEASIBLE_M = 0.003         # a grasp whose gripper comes closer than this to the scene collides
GRASP_TOUCH_M = 0.003      # ... except at the grasp itself, where the fingertips may touch what it stands on
CLEAR_ENOUGH_M = 0.02      # more clearance than this buys nothing
HAND_OVER_RIM_M = 0.004    # the hand stays this much further above a rim it reaches over
PART_MAX_M = 0.05          # a part this narrow across is a handle or a knob to straddle
PART_MIN_LEN_M = 0.008     # ... at least this long
PART_MIN_HEIGHT_M = 0.012  # ... and this tall
PART_MARGIN_M = 0.012      # the fingers open this much wider than the part on each side
PART_OFFSET_COST = 0.05    # score per metre of a part's offset from the object's middle
RIM_DEPTHS_M = (0.020, 0.012, 0.028)   # ... and below the rim's top (the first preferred): the hand, over
                           # the far side of the object, must stay clear of its rim; the deepest keeps the
                           # hand under an overhang (an opened drawer over a bowl)
GRASP_DEPTH_M = 0.03       # a straddle grasp this far below the object's top ...
GRASP_FLOOR_M = 0.011      # ... but the grip site at least this far above its bottom
RELEASE_M = 0.012          # release with the object's bottom this far above the support
HOVER_M = 0.025            # the carry ends with the object's bottom this far above the release
TEST_LIFT_M = 0.02         # a grasp batch ends lifting the object this much: the Verifier sees whether it holds
ORIGIN_TOL_M = 0.015       # a carry is done with the origin this close over its target
PLACE_SPAN = 0.7           # a release spot within this fraction of a region's half sizes
PLACE_GRID = (0.0, -0.5, 0.5, -1.0, 1.0)   # the spots tried along each axis (fractions of that span)
PLACE_COLUMN_M = (0.0, 0.04, 0.09, 0.15)   # heights over a release the object comes down through
HAND_COLUMN_M = (0.04, 0.09, 0.15, 0.22, 0.3)   # ... and the hand holding it, once a carry was stopped (at
                           # the release itself its fingers may touch the support: a box held wide over a bowl)
HAND_MET_COST = 5.0        # ... a spot where it meets something costs as much as this much more off-centre + turn
AVOID_M = 0.02             # release spots this close to one where a carry was stopped are tried last
ROOM_M = 0.005             # a release spot leaves the objects still to come to its region this much more clear
                           # than its own clearance asks (their release is less exact than the model)
KEEP_BONUS = 0.008         # ... and the spot the last carry went for is kept unless another scores this much more
PLACE_SPINS = (0.0, math.pi / 2, -math.pi / 2, math.pi / 4, -math.pi / 4)   # turns tried into a region

# -- drawers, knobs, doors and pushes (articulated.py) -----------------------------------------------
PUSH_PAST_M = 0.008        # push a drawer this far past its closed position (into its stop)
KNOB_ON_MARGIN = 0.25      # rad past LIBERO's "on" threshold (0.5)
KNOB_OFF_PAST = 0.12       # rad past the knob's lower stop, to be sure it rests on it ("off" is q < 0)
KNOB_SLIP = 1.25           # the wrist turns this much more than the knob (the fingers slip on the bar)
FLAT_MAX_M = 0.03          # an object this thin and wider than the gap is pushed, not lifted
PUSH_TOL_M = 0.012         # a push is done with the origin this close to the target
PUSH_INSET_M = 0.012       # ... or this far inside the region's box
PUSH_COLUMN_M = (0.0, 0.04, 0.09, 0.14, 0.19)   # heights over a push's start the hand comes down through
PUSH_CLEAR_M = 0.012       # a push whose hand comes closer than this to the scene is not tried first
# a push's path (the object's origin): its footprint, a disc, clear of every box that stands on the table
PUSH_MARGIN_M = 0.0        # ... by this much (the disc reaches the corners of a plate's rim boxes: 73 mm, the
                           # rim's lip 66 mm)
PUSH_CLEAR_SPOT_M = 0.015  # ... and ending this clear, where the region has room (more buys nothing)
PUSH_GRID_M = 0.01         # ... corners tried on a grid this fine (every other point) ...
PUSH_WINDOW_M = 0.15       # ... over the box around its start and its target grown by this
LEG_COST_M = 0.15          # ... a corner costs as much as this much more path (the fingers lift out of the
                           # well and go in afresh: 40-45 steps)
SHOVE_COST = 5.0           # ... where no way is clear of the objects, a cell through one costs this much more
PUSH_REACH_M = 0.01        # ... and the hand no further than this beyond the arm's comfortable reach
                           # (the profile's reach; on the Panda, measured low over the table the elbow straightens
                           # 0.777-0.81 m from the shoulder, less straight ahead; dragging a plate the fingers
                           # stalled at 0.79)
# a drag from inside a well (a plate), measured on LIBERO's plate
WELL_MIN_M = 0.008         # an object whose top stands this far over the floor under its middle has a well
WELL_GAP_MAX_M = 0.047     # the fingers open at most this far ...
WELL_TOUCH_M = 0.004       # ... and so that 1 mm over its floor they reach this deep into its sides (the
                           # plate: 46 mm, 6 deg at most off flat dragged in any direction; at 30-36 mm the
                           # fingers rode up its side dragging it toward the arm's base and tipped it 10-20 deg)
FINGER_OVER_M = -0.002     # the fingertips this far over its floor (pressing on it: 1 mm higher, they rode up)
PULL_PRESS_M = 0.006       # ... dragged toward the arm's base this much lower still (the arm pitches the
                           # hand, the fingertips rose 5-8 mm; away from the base 1-2 mm)
WELL_LAG_M = 0.012         # its origin trails the grip site by this much (measured 12-25 mm)
PUSH_OVER_M = 0.004        # ... the last leg goes this much further (the give)
RIM_OVER_M = 0.012         # the fingers come down into it from this far over its top, and settle there
APPROACH_SKIP_M = 0.02       # a push's start this close: push from where the hand is (close(), a retry)
SETTLE = {"op": "wait", "seconds": 0.1}         # (a move blended into the next passes 12 mm over its target)
DRAG_STEP_M = 0.04         # dragged in moves this long at most (a long one curves: the servo saturates axis
                           # by axis, and a drag 17-28 deg off the way tipped the plate more)
DRAG_CLEAR_M = 0.006       # the wrist turns as little as keeps the hand this clear (a step per 3 deg)
STUCK_M = 0.01             # a drag batch stopped with it moved less than this: the wrist turns a quarter
STAY_MAX = math.radians(20.0)   # fingers down in it leading it within this of the way drag on from there
BACKOFF_M = 0.03           # the hand backs off a handle bar it let go of this far (and a horizontal tool this
                           # far along its axis before it turns pointing down)
RELEASE_NEAR_M = 0.04      # an object this near the open fingers when a push begins was just let go of ...
RELEASE_RISE_M = 0.06      # ... and the hand rises this much out of it first
BAR_SPOTS = (0.0, 0.5, -0.5, 0.8, -0.8)   # where along the handle bar (fractions of its half length) a
                                          # pointing-down push may press: the first with a free column
DOOR_PUSH_AT = 0.8         # a door is pushed this far out along it from the hinge (a fraction of its length)
DOOR_GRIP_BELOW_TOP_M = 0.017   # ... with the grip site this far below its top edge (the hand clears the
                                # fixture's top beside the door; the fingers overlap the door 2.7 cm)
UNTILT_MIN = math.radians(12.0)   # a smaller tilt (LIBERO starts some episodes 6 deg off) is left as it is
RELEASE_FRACTION = 0.4     # the fingers let go of a handle bar (16 mm) by opening to about 31 mm

# -- into a roofed region by the handle (insert.py) --------------------------------------------------
ROOF_ROOM_M = 0.25         # a fixture's box this low over the floor under a region's middle is a roof over it
SIDE_DEPTH_M = 0.12        # a side is open when nothing of the fixture stands this far out in front of it
TRAIL_MAX = math.radians(20.0)  # the handle points at most this far off straight away from the opening
TILTS_DEG = (35.0, 45.0, 25.0, 55.0)   # the tool tilted back from pointing down, toward the opening (first that fits)
ALIGNED_DOT = 0.985        # the tool counts as turned as wanted (cos ~10 deg)
PROTRUDE_M = 0.008         # a handle's boxes stand at least this far out beyond the object's wall ring
RING_TALL = 0.8            # ... whose boxes are the tallest: at least this fraction of the tallest's height
BAR_MIN_HALF_M = 0.012     # a handle's bar the fingers close on is at least this tall (half height)
HANDLE_MARGIN_M = 0.012    # the fingers open this much wider than the handle's bar on each side
GRIP_IN_M = 0.003          # the grip site this far past the bar's middle along the approach
INSERT_STANDOFF_M = 0.08          # the tool comes in along its axis from this far out ...
ROUTE_CLEAR_M = 0.03       # ... and goes there this clear of the scene (measured: a way 1.3 cm over the mug's
                           # rim caught it and tipped it)
FLOOR_CLEAR_M = 0.008      # carried in with its bottom this far over the floor
INSIDE_M = 0.01            # the object's back (its handle) this far inside the opening's face, if it fits
CLEAR_IN_M = 0.006         # wanted clearance of the object and the hand from the fixture, in place
STAGE_CLEAR_M = 0.012      # ... and in front of the opening, before sliding in
BACK_OUT_M = 0.07          # let go, the hand backs out this far along the axis
PUSH_TILT_DEG = 65.0       # the tool's tilt for pushing the object deeper by its handle (the hand stays out)
PUSH_GAP_M = 0.01          # ... the fingertips start this far behind the handle
INSERT_PUSH_PAST_M = 0.015        # ... and push this much further than the model says (measured: the mug went 1.6 cm
                           # less far than the fingertips' modelled travel), as far as the room in front allows

# -- the roles' own checks (brain.py) ----------------------------------------------------------------
APPROACH_M = 0.05          # pre-grasp height above the grasp point
DROP_STOPPED_M = 0.07      # a lowering stopped by contact with the object over its spot and its bottom less
                           # than this over the support lets go (a cheese box held wide, over a bowl whose
                           # rim the fingers meet 4.5 cm up)
DROP_M = 0.08              # a held object over an In goal's region box, its bottom this close over the box's
                           # floor, is let go there: it falls in (a carry stopped by a basket's rim or handle)
DROP_OVER_TOP_M = 0.015    # ... or its bottom no higher than this over the box's top (a tall container: a book
                           # swung in the fingers meets the top of a caddy's slot, and drops in)
DROP_INSET_M = 0.01        # ... with its origin this far inside the box's sides (at least half of them)
MOVED_M = 0.02             # the Monitor's privileged check: an object the batch works on this far (xy) from
                           # where it was when the batch was computed is a scene the batch was not made for
UNDER_COLUMN_M = (0.02, 0.04)   # heights over the grip a carry's first rise must be clear at (higher up, the
                                # route goes across under a shelf: a cabinet's top over a bowl in its top layer)
UNDER_SLIDES_M = (0.02, 0.035, 0.05, 0.07)   # ... else slides tried first, in 8 directions
