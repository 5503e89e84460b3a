"""The robot the oracle plans for: facts from its profile and the oracle's own model of its hand.

One place per robot. ``hand_for(profile)`` joins what the robot profile states (configs/robots/*.yaml:
the gripper's widest opening, the arm's comfortable reach) with the oracle's tuned model of that
robot's hand (``MODELS``, by profile name: the boxes its clearance checks use and the wrist's
margin). Units: metres, degrees where named; the grip-site frame of world.py (``s`` the finger
separation axis, ``a`` across the fingers, heights up from the grip site with the gripper pointing
down).
"""
from __future__ import annotations

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


# Measured on LIBERO's Panda hand (robosuite's meshes' collision geoms, gripper pointing down).
PANDA_HAND = HandModel(
    hand_half_s=0.105, hand_half_a=0.041, hand_z=(0.024, 0.122),
    wrist_half=0.072, wrist_z=(0.135, 0.29),          # links 6-7
    finger_t=0.025, finger_half_a=0.012, finger_z=(-0.010, 0.050),
    fingertip_below_m=0.010,
    wrist_limit_deg=160.0,                            # the Panda's joint 7 stops at about +-166 deg
)

# The xArm6 cell's gripper (sim/xarm_cell/model.py: palm +-0.0625 along the finger axis, fingers
# 0.010 thick, tips 10 mm under the TCP) lies inside the Panda's boxes: the oracle keeps the Panda's
# model there, conservative. Its wrist (joint 6, +-360 deg) is not read as joint 7 (six joints).
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
