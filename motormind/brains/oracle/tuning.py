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

# -- the scene's model (world.py) ------------------------------------------------------------------
UPRIGHT_MIN = 0.9          # a body whose z axis is this close (cos) to up stands upright

# -- routes (motion.py) ------------------------------------------------------------------------------
SAMPLE_M = 0.01            # clearance samples along a leg
CLEAR_M = 0.012            # wanted clearance of the bundle over what it passes
MIN_MOVE_M = 0.0015        # a leg shorter than this is not worth a command
START_SKIP_M = 0.015       # a leg may start in contact for this long
SHORT_LEG_M = 0.012        # a leg this short with another after it is aimed past: the hand goes for the next
                           # waypoint (what the Controller's 12 mm blend did with it before issue 33 limited a
                           # blend to a fraction of its move: a 5 mm leg against contact was then blocked)
STRAIGHT_M = 0.015         # a leg shorter than this goes straight, unchecked
ROTATE_MIN_DEG = 3.0       # a rotation smaller than this is not commanded (unless a caller asks for less)
DIRECTION_DOT = 0.99999    # a move this close (cos) to a profile's direction word is written with the word


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
WALL_RING_SPREAD = 1.15    # a hollow object's wall: its geoms no farther from the middle than this many times the
WALL_RING_SLACK_M = 0.003  # ... 3rd quartile's distance plus this (a mug's handle sticks out beyond: wall at 42
                           # mm from the axis, the handle's geoms at 58-82)
OPEN_SLACK_MM = 4.0        # a gap within this of fully open holds nothing (the fingers were not stopped)
HOLLOW_PROBE_M = 0.012     # open on top: no geom this far under the middle of its top (nor a quarter, half way)
RIM_DEPTH_COST = 0.002     # a rim candidate's score: less per RIM_DEPTH_STEP_M off the preferred depth ...
RIM_DEPTH_STEP_M = 0.006
RIM_SKEW_COST = 0.015      # ... and per half radian of skew across the wall
PART_DEPTH_M = 0.010       # a part grasp this far below the part's top (at least GRASP_FLOOR_M above its bottom)
PART_HEIGHT_GAIN = 0.01    # a part's score: more per metre its top is higher (a lid's knob over a handle)
PART_TOUCH_M = 0.003       # the fingers may come this close to the rest of the object at a part grasp
PART_COST = 0.002          # a part grasp scores this much less than its own score says (plainer grasps first)
SUPPORT_OVER_M = 0.02      # On a region: the support is the highest top under the spot up to this over the region's
ON_SPAN_M = 0.012          # On an object: spots within this of its origin (x and y; LIBERO accepts 3 cm) ...
ON_OVER_M = 0.001          # ... on supports up to this over its top
FOOT_INSET_M = 0.006       # a spot's support is what stands under its footprint this far in from its sides
SPOT_CLEAR_ENOUGH_M = 0.015   # a release spot's score: its clearance up to this, ...
SPOT_OFF_COST = 0.02       # ... less this per unit off the middle (and turn), ...
SPOT_HIGH_COST = 5.0       # ... and per metre higher than the lowest spot (on the surface meant, not a neighbour)
REACH_OVER_M = 0.05        # reach is judged at the grasp and this far over it
REACH_COST = 3.0           # a grasp's score: per metre beyond the comfortable reach (first what can be done)
INFEASIBLE_COST = 0.1      # ... a grasp whose gripper collides (FEASIBLE_M) scores this much less
TURN_COST = 0.004          # ... per 45 deg of wrist turn
RIM_COST = 0.003           # ... a rim pinch, against a straddle
WIDE_COST = 0.3            # ... per metre wider than the narrowest straddle (a slanted squeeze turns the object)
TRIED_NEAR_M = 0.02        # a grasp within this of one already tried ...
TRIED_YAW = 0.7            # ... and within this (rad, of twice the yaw: both finger orders) comes last
STRADDLE_SLACK_MM = 4.0    # a clean grasp: a straddle of an object up to this wider than straddle_max_m ...
CAUGHT_SLACK_MM = 6.0      # ... closes to at most this more than its width; more is something else caught


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
APPROACH_SKIP_M = 0.02     # a push's start this close: push from where the hand is (close(), a retry)
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
# turning the tool
REORIENT_MIN_DEG = 3.0     # a turn smaller than this is not made
ONE_AXIS_DOT = 0.995       # a turn this close (cos) to one rotation axis is made about it alone
BACK_OFF_TILT_DEG = 30.0   # a tool tilted more than this backs off along its axis before it turns pointing down
HORIZONTAL_DOT = 0.97      # the tool counts as horizontal, pointing into a drawer's face, this close (cos)
TURN_RISE_M = 0.02         # where the tool can turn: tried every this much higher ...
TURN_TOP_M = 0.45          # ... up to this height
TURN_CHECK_DEG = 15.0      # ... the turn checked every this many degrees ...
TURN_CLEAR_M = 0.008       # ... clear of the scene by this much
CLOSED_FRACTION = 0.1      # the fingers open less than this fraction count as closed (for a push, after a let-go)
CLOSED_GAP_M = 0.01        # the closed fingers' gap as the clearance checks model it for a push
# a drawer: pulled open by its bar with the tool horizontal
PRE_BAR_M = 0.06           # the fingers come level with the bar this far out from it ...
ON_BAR_M = 0.004           # ... and close on it this far out from its middle
ON_BAR_NEAR_M = 0.015      # the grip this near that point ...
BAR_HELD_MAX_MM = 40.0     # ... the fingers narrower than this: holding the bar, pull
BAR_OPEN_MIN = 0.9         # already horizontal, fingers open less than this fraction open first
PULL_TO = 0.7              # pulled this fraction of the way from LIBERO's "open" threshold to the joint's stop
# a drawer: pushed shut
BAR_FACE_M = 0.012         # the fingertips against the bar's outer face: this past its half thickness
BAR_PUSH_START_M = 0.03    # the push starts this far out from the bar's face
DOWN_PUSH_OFF_M = 0.006    # pointing down: the fingertips this much further out than the bar's face ...
DOWN_PUSH_UNDER_M = 0.004  # ... this much under its middle
DOWN_PUSH_COLUMN_M = (0.0, 0.04, 0.09, 0.15)   # ... coming down through these heights over the spot ...
DOWN_PUSH_CLEAR_M = 0.004  # ... this clear of everything but the drawer (and of the drawer above the spot)
DOWN_PUSH_RISE_M = 0.08    # ... and rise this much after backing off
# a hinged door: pushed shut along its arc
DOOR_PAST = 0.05           # rad: pushed this much further than the door's closed angle
DOOR_TIP_OFF_M = 0.014     # the fingertips this far outside its outer face
DOOR_START_M = 0.03        # ... starting this far out from it
DOOR_STEP_DEG = 25.0       # the arc in moves of at most this many degrees
DOOR_RISE_M = 0.06         # the hand rises this much after the push
# a knob
KNOB_DEPTH_M = 0.013       # the grip site this far under the top of the knob's bar
KNOB_LIFT_M = 0.05         # the hand comes down from and lifts to this far over the grasp
KNOB_NEAR_M = 0.015        # the grip this near the grasp (xy) ...
KNOB_NEAR_Z_M = 0.02       # ... and in height: at the knob
KNOB_OPEN_MIN = 0.8        # at the knob with the fingers open less than this fraction: holding it
# a push's path (more)
STANDS_M = 0.003           # a box whose top is this far over the pushed object's bottom stands on the table
PUSH_SPOT_FAR_COST = 0.02  # a push target's score: its clearance less this per metre from where the object is
TALL_UNDER_M = 0.01        # things reaching up to this under the hand's bottom stand up to the hand
END_TOUCH_M = 0.003        # the path's ends may be this much closer to what stands there than the margin
HAND_NEAR_COST = 20.0      # a cell's cost: 1, plus this times how far within hand_reach_m a tall thing is (a fraction)
LEG_SAMPLES = 0.7          # a leg's cost sampled at this many points per grid cell of the window's diagonal
BEYOND_REACH_COST = 100.0  # ... plus this per metre beyond the comfortable reach (up to PUSH_REACH_M)
# a drag from inside a well (more)
WELL_ABOVE_M = 0.03        # the fingertips go this far over its top to come to, or leave, its well
WELL_GAP_TOL = 0.2         # the fingers within this fraction of the well's gap are open as it needs
WELL_ROUTE_CLEAR_M = 0.008 # the way to over its well this clear of the scene
DRAG_TURN_COST = 0.001     # a drag's yaw: its clearance (up to DRAG_CLEAR_M) less this per radian of turn
WELL_PROBE_STEP_M = 0.0005 # its floor probed down its axis in steps of this
WELL_TIPS_OVER_M = 0.001   # the fingers' fit tested with the tips this far over its floor
WELL_GAP_MIN_M = 0.01      # gaps tried from this ...
WELL_GAP_STEP_M = 0.002    # ... in steps of this, up to WELL_GAP_MAX_M
# a push from outside (closed fingertips low behind its trailing side)
PUSH_SLANTS_DEG = (0.0, 15.0, -15.0, 30.0, -30.0, 45.0, -45.0, 60.0, -60.0)   # headings tried off the straight way
PUSH_BEHIND_M = 0.004      # the fingertips this far behind its trailing side ...
PUSH_LOW_M = 0.004         # ... this far over its bottom ...
PUSH_RUN_UP_M = 0.02       # ... starting this far back (and pushing this much further)
PUSH_CLEAR_ENOUGH_M = 0.02 # a heading's score: its clearance up to this, ...
PUSH_TIGHT_COST = 0.1      # ... less this when closer than PUSH_CLEAR_M, ...
PUSH_SLANT_COST = 0.004    # ... and this per 15 deg off the straight way
PUSH_ABOVE_M = 0.06        # the hand comes down to the start from this far over it ...
PUSH_RISE_M = 0.05         # ... and rises this much after the push (out of a well, the same)


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
INSERT_STANDOFF_M = 0.08   # the tool comes in along its axis from this far out ...
ROUTE_CLEAR_M = 0.03       # ... and goes there this clear of the scene (measured: a way 1.3 cm over the mug's
                           # rim caught it and tipped it)
FLOOR_CLEAR_M = 0.008      # carried in with its bottom this far over the floor
INSIDE_M = 0.01            # the object's back (its handle) this far inside the opening's face, if it fits
CLEAR_IN_M = 0.006         # wanted clearance of the object and the hand from the fixture, in place
STAGE_CLEAR_M = 0.012      # ... and in front of the opening, before sliding in
BACK_OUT_M = 0.07          # let go, the hand backs out this far along the axis
PUSH_TILT_DEG = 65.0       # the tool's tilt for pushing the object deeper by its handle (the hand stays out)
PUSH_GAP_M = 0.01          # ... the fingertips start this far behind the handle
INSERT_PUSH_PAST_M = 0.015 # ... and push this much further than the model says (measured: the mug went 1.6 cm
                           # less far than the fingertips' modelled travel), as far as the room in front allows
SIDE_Z_INSET_M = 0.01      # a side is open when no fixture box between this over the floor and under the roof stands
HANDLE_FREE_M = 0.001      # the fingers around a handle's bar this clear of the object's other boxes ...
HANDLE_CLEAR_M = 0.002     # ... and the gripper this clear of the scene, or the handle is not gripped there
WALL_OVER_FLOOR_M = 0.001  # the fixture's boxes whose tops stand this over the floor are its walls
INSIDE_SPAN = 0.8          # spots inside tried over this fraction of the region's half sizes (9 deep, 17 across)
INSIDE_GAIN = 10.0         # a spot's score: per metre the object's back is inside the face (up to INSIDE_M), ...
ACROSS_COST = 0.02         # ... less per unit off the middle across the opening ...
DEPTH_COST = 0.01          # ... and along it, ...
INSIDE_CLEAR_ENOUGH_M = 0.02   # ... plus its clearance up to this
HANDLE_NEAR_M = 0.03       # the fingers closed (CLOSED_MAX) this near the handle grasp: closed on nothing, back out
GAP_TOL_MM = 6.0           # the fingers within this of the handle grasp's gap are open enough
THERE_M = 0.01             # the grip this close to the goal inside: carried
STAGE_BACK_M = (0.04, 0.40, 0.02)   # the stage in front of the opening: this far out along the axis (from, to, step)
IN_LINE_M = 0.01           # the grip this close to the axis (and clear): straight in
ROOM_STEP_M = 0.005        # how far the object can be pushed in: in steps of this ...
ROOM_CLEAR_M = 0.004       # ... while it stays this clear of the fixture


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
SCRIPT_PASSES = 12         # a whole-task batch advances or replans its script at most this many times (bounded)
IDLE_WAIT_S = 0.1          # s: a batch with nothing to do waits this long (a batch must have a command)
SINK_M = 0.01              # an object's bottom may read this far under the surface it stands on (contact
                           # penetration, the boxes' error) and still count as on it
# a grasp batch
SHORT_OPEN_MIN = 0.25      # the fingers still open wider than this fraction, the grip site ...
SHORT_NEAR_M = 0.012       # ... this close to the grasp tried last: the descent stopped short of it (on contact);
                           # the fingers close there, once
CLOSED_MAX = 0.2           # the fingers closed past this fraction, holding nothing ...
DOWN_TILT = 0.1            # ... with the tool within this (rad) of pointing down: open and start again
OPEN_RISE_M = 0.04         # opened on nothing, or let go, the hand rises this much
KEPT_M = 0.01              # a grasp planned last batch goes on while the object moved less than this
OPEN_NEED_MM = 20.0        # the fingers must be open this much wider than the object (or to the grasp's gap) ...
RIM_OPEN_SLACK_MM = 4.0    # ... to within this of a rim pinch's gap ...
OPEN_EXTRA_MM = 10.0       # ... and no more than this wider than the grasp's gap; else they open (again)
OPEN_FULL_MIN = 0.9        # a gap this near fully open (a fraction) is commanded as "open"
TURN_ROOM_M = 0.01         # the wrist turns where it is when the hand is this clear there; else over the approach
SLIDE_RISE_M = 0.003       # out from under an overhang: the slide rises this much ...
SLIDE_SKIP_M = 0.01        # ... may touch for its first this much (where the bundle already is) ...
SLIDE_TOUCH_M = 0.002      # ... and this deep
# a carry batch
CARRIED_LOW_M = 0.06       # the object over its spot with its bottom this low over the support: nothing to carry
LIFT_OFF_M = 0.02          # a carry first lifts the object this much off its support
CARRIED_TOL_M = 0.005      # the Verifier accepts a carry this much farther from over its target than it aims

