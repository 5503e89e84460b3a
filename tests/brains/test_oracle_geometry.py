"""The oracle's geometry without a simulator: oriented-box separation, the gripper model, routes
over obstacles, release spots, exact rotations. (The oracle in the simulation: test_oracle_sim.py.)"""
from __future__ import annotations

import math

import numpy as np
import pytest

from motormind.brains.oracle import articulated as art
from motormind.brains.oracle import pickplace as pp
from motormind.brains.oracle.motion import clear_along, path_commands, route
from motormind.brains.oracle.tuning import hand_for
from motormind.brains.oracle.world import Boxes, World, gripper_boxes, separation
from motormind.geometry import axis_angle_to_mat, quat_to_mat, rot_error
from motormind.profile import load_profile

EYE = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
PANDA = hand_for(load_profile("libero_panda"))


def box(c, half, rot=EYE) -> Boxes:
    return Boxes.from_rows([list(c) + list(half) + list(np.asarray(rot).ravel())])


def body(lo, hi, rot=EYE, kind="object") -> dict:
    """A Scene.world() body of one box, its origin at the bottom centre."""
    lo, hi = np.asarray(lo, float), np.asarray(hi, float)
    c, half = (lo + hi) / 2, (hi - lo) / 2
    pos = np.array([c[0], c[1], lo[2]])
    return {"kind": kind, "pos": pos.tolist(), "rot": list(EYE), "boxes": [[lo.tolist(), hi.tolist()]],
            "obbs": [c.tolist() + half.tolist() + list(EYE)], "lo": lo.tolist(), "hi": hi.tolist(),
            "local_lo": (lo - pos).tolist(), "local_hi": (hi - pos).tolist()}


def world_data(bodies: dict, regions=None, finger_contacts=None) -> dict:
    """A Scene.world() of ``bodies`` on a table."""
    return {"bodies": bodies, "static": [[[-0.1, -0.6, -0.05], [1.1, 0.6, 0.0]]],
            "static_obbs": [[0.5, 0.0, -0.025, 0.6, 0.6, 0.025] + EYE], "ground_z": None, "articulations": [],
            "predicates": {}, "regions": regions or {}, "finger_contacts": finger_contacts or {}}


def world(bodies: dict, regions=None) -> World:
    return World.from_data(world_data(bodies, regions), PANDA)


def test_separation_of_oriented_boxes():
    a = box([0, 0, 0], [0.05, 0.05, 0.05])
    assert separation(a, box([0.2, 0, 0], [0.05, 0.05, 0.05])) == pytest.approx(0.1, abs=1e-9)
    assert separation(a, box([0.08, 0, 0], [0.05, 0.05, 0.05])) == pytest.approx(-0.02, abs=1e-9)
    # a thin wall turned 45 deg past the box's corner: its axis-aligned box would overlap the box
    r45 = axis_angle_to_mat([0, 0, 1], -math.pi / 4)
    wall = box([0.09, 0.09, 0], [0.1, 0.002, 0.05], r45)
    assert separation(a, wall) == pytest.approx(0.04 * math.sqrt(2) - 0.002, abs=1e-9)
    assert np.all(wall.aabb()[0, 0, :2] < 0.05)


def test_gripper_model_follows_the_finger_direction():
    g = gripper_boxes(PANDA, np.array([0.5, 0.0, 0.2]), math.pi / 2, 0.078)
    hand, wrist, f1, f2 = g.c
    assert hand[2] > 0.2 and wrist[2] > hand[2]
    assert abs(f1[0] - 0.5) < 1e-9 and abs(f2[0] - 0.5) < 1e-9            # fingers apart along y
    assert abs(f1[1]) == pytest.approx(0.039 + 0.0125) and f1[1] == -f2[1]
    g0 = gripper_boxes(PANDA, np.array([0.5, 0.0, 0.2]), 0.0, 0.02)
    assert abs(g0.c[2][1]) < 1e-9 and abs(g0.c[2][0] - 0.5) == pytest.approx(0.01 + 0.0125)


def test_route_goes_over_what_is_in_the_way_and_straight_when_clear():
    w = world({"block": body([0.55, -0.05, 0.0], [0.65, 0.05, 0.15])})
    bundle = gripper_boxes(PANDA, np.zeros(3), math.pi / 2, 0.078)
    p0, p1 = np.array([0.45, 0.0, 0.05]), np.array([0.75, 0.0, 0.05])
    assert clear_along(w, p0, p1, bundle, ()) < 0                           # straight through the block
    pts = route(w, p0, p1, bundle, ())
    assert np.allclose(pts[-1], p1) and len(pts) >= 2
    legs = [p0] + pts
    for a, b in zip(legs, legs[1:]):
        assert clear_along(w, a, b, bundle, (), skip=0.015) > 0               # every leg clears it
    high = np.array([0.45, 0.0, 0.40])
    assert len(route(w, high, np.array([0.75, 0.0, 0.40]), bundle, ())) == 1


def test_moves_use_direction_words_split_at_the_limit():
    prof = load_profile("libero_panda")
    cmds = path_commands(np.zeros(3), [np.array([0.0, 0.0, 0.3])], prof)
    assert cmds == [{"op": "move", "direction": "up", "distance_mm": 150.0}] * 2
    diag = path_commands(np.zeros(3), [np.array([0.1, 0.1, 0.0])], prof)
    assert len(diag) == 1 and diag[0]["distance_mm"] == pytest.approx(141.4, abs=0.1)
    assert np.allclose(diag[0]["vector"], [0.70711, 0.70711, 0.0], atol=1e-5)


def test_release_spot_avoids_a_neighbour_inside_the_region():
    regions = {"front": {"centre": [0.6, 0.2, -0.005], "half_extents": [0.04, 0.04, 0.005],
                         "lo": [0.56, 0.16, -0.02], "hi": [0.64, 0.24, 0.0], "parent": None}}
    w = world({"plate": body([0.3, -0.07, 0.0], [0.44, 0.07, 0.02]),
               "cheese": body([0.56, 0.10, 0.0], [0.64, 0.145, 0.015])}, regions)
    t = pp.place_target(w, "plate", ["on", "plate", "front"])
    assert t.support_z == pytest.approx(0.0)                                # on the table, not the cheese
    assert t.origin[1] > 0.2 and abs(t.origin[0] - 0.6) <= 0.04 * pp.PLACE_SPAN + 1e-9   # moved off it, still inside


def test_the_first_of_two_objects_for_one_region_leaves_the_second_room():
    # two moka pots on one burner (libero_10 task 8): the first released at the middle left the
    # second no spot its way down was clear at, and every carry of it was stopped over the first
    regions = {"burner": {"centre": [0.6, -0.2, -0.005], "half_extents": [0.075, 0.08, 0.005],
                          "lo": [0.525, -0.28, -0.01], "hi": [0.675, -0.12, 0.0], "parent": None}}
    pots = {"pot1": body([0.2, 0.2, 0.0], [0.28, 0.348, 0.15]), "pot2": body([0.2, -0.2, 0.0], [0.28, -0.052, 0.15])}

    def room_for_pot2(t1) -> float:
        x, y = t1.origin[:2]
        after = world({"pot1": body([x - 0.04, y - 0.074, 0.0], [x + 0.04, y + 0.074, 0.15]),
                       "pot2": pots["pot2"]}, regions)
        t2 = pp.place_target(after, "pot2", ["on", "pot2", "burner"])
        return min(after.clearance(pp.spun(after, "pot2", t2.spin, t2.origin + [0.0, 0.0, dz]), exclude=("pot2",))
                   for dz in pp.PLACE_COLUMN_M)

    w = world(pots, regions)
    alone = pp.place_target(w, "pot1", ["on", "pot1", "burner"])
    assert room_for_pot2(alone) < 0.0                     # at the middle: the second meets it on its way down
    first = pp.place_target(w, "pot1", ["on", "pot1", "burner"], room_for=("pot2",))
    assert room_for_pot2(first) > pp.ROOM_M               # off to a side, the second fits beside it
    assert abs(first.origin[0] - 0.6) <= 0.075 * pp.PLACE_SPAN + 1e-9 and abs(first.origin[1] + 0.2) <= 0.08 * pp.PLACE_SPAN + 1e-9


def test_grasp_choice_is_narrow_side_and_clear_of_neighbours():
    prof = load_profile("libero_panda")
    w = world({"box": body([0.5, -0.02, 0.0], [0.58, 0.02, 0.03]),
               "wall": body([0.47, 0.125, 0.0], [0.61, 0.145, 0.25])})
    pose = pp.Pose(np.array([0.45, 0.0, 0.3]), math.pi / 2, 78.0, 1.0, 45.0, art.down_rot(math.pi / 2))
    g = pp.choose(w, "box", pose, prof, None)
    assert g.kind == "straddle" and abs(math.sin(g.sep_yaw)) > 0.99           # across its 40 mm side
    assert g.score > 0


def test_rim_grasp_for_a_hollow_object_part_grasp_for_a_solid_one():
    def ring(cx, cy, r, t, h):
        rows = []
        for k in range(8):
            ang = k * math.pi / 4
            rot = axis_angle_to_mat([0, 0, 1], ang)
            c = [cx + r * math.cos(ang), cy + r * math.sin(ang), h / 2]
            rows.append(c + [t / 2, r * 0.42, h / 2] + list(rot.ravel()))
        return rows
    bowl = body([0.45, -0.055, 0.0], [0.56, 0.055, 0.05])
    bowl["obbs"] = ring(0.505, 0.0, 0.05, 0.006, 0.05)
    pot = body([0.45, -0.04, 0.0], [0.53, 0.04, 0.13])
    knob = [0.49, 0.0, 0.14, 0.006, 0.006, 0.01] + EYE
    pot["obbs"] = pot["obbs"] + [knob]
    pot["hi"] = [0.53, 0.04, 0.15]
    w = world({"bowl": bowl, "pot": pot})
    assert pp.hollow(w, "bowl") and not pp.hollow(w, "pot")
    assert {g.kind for g in pp.candidates(w, "bowl")} == {"rim"}
    parts = pp.candidates(w, "pot")
    assert parts and {g.kind for g in parts} == {"part"} and any(abs(g.point[2] - 0.14) < 0.02 for g in parts)


@pytest.mark.parametrize("axis,deg", [([1, 0, 0], -90), ([0, 1, 0], 60), ([0.6, 0.8, 0], 90), ([1, 1, 1], 75)])
def test_reorient_reaches_the_goal_exactly(axis, deg):
    prof = load_profile("libero_panda")
    r0 = art.down_rot(0.3)
    goal = axis_angle_to_mat(np.asarray(axis, float) / np.linalg.norm(axis), math.radians(deg)) @ r0
    pose = pp.Pose(np.zeros(3), 0.3, 78.0, 1.0, 0.0, r0)
    r = r0
    for c in art.reorient(pose, goal, prof):
        assert abs(c["angle_deg"]) <= prof.limits.max_rotate_deg
        r = axis_angle_to_mat(prof.rotation_axes[c["axis"]], math.radians(c["angle_deg"])) @ r
    assert np.linalg.norm(rot_error(goal, r)) < 1e-3                              # (angles go out at 0.01 deg)


def test_untilt_backs_off_and_points_down():
    prof = load_profile("libero_panda")
    d = np.array([0.0, 1.0, 0.0])
    r_h = art.horizontal_rot(d, sep_vertical=True)
    pose = pp.Pose(np.array([0.6, -0.1, 0.1]), 0.0, 30.0, 0.4, 0.0, r_h)
    cmds, after = art.untilt(pose, prof)
    assert cmds[0]["op"] == "move" and after.grip[1] == pytest.approx(-0.1 + art.BACKOFF_M)   # out along d
    assert after.tilt < 1e-6
    r = r_h
    for c in cmds[1:]:
        r = axis_angle_to_mat(prof.rotation_axes[c["axis"]], math.radians(c["angle_deg"])) @ r
    assert math.degrees(math.acos(-r[2, 2])) < 1e-4                                   # pointing down


def test_pose_from_state_reads_the_frame():
    q = [-0.68442513, -0.72851044, 0.02609432, 0.01240414]                  # LIBERO's rest pose
    st = {"eef_pos_mm": [441.0, 12.8, 259.3], "eef_yaw_deg": 86.4, "gripper_width_mm": 78.0,
          "gripper_fraction": 1.0, "joints_deg": [0, 0, 0, 0, 0, 0, 45.0], "eef_quat_xyzw": q}
    pose = pp.Pose.from_state(st)
    assert pose.tilt < math.radians(4.0) and np.allclose(pose.rot, quat_to_mat(q))
    assert pose.j7_deg == 45.0 and pose.grip[2] == pytest.approx(0.2593)


BASKET = {"basket_region": {"centre": [0.6, 0.2, 0.06], "half_extents": [0.06, 0.06, 0.05],
                            "lo": [0.54, 0.14, 0.0], "hi": [0.66, 0.26, 0.11], "parent": "basket"}}


def test_a_held_object_low_over_an_in_regions_box_is_let_go_there():
    from motormind.brains.oracle.brain import droppable
    def at(x, y, z):
        return world({"can": body([x - 0.03, y - 0.03, z], [x + 0.03, y + 0.03, z + 0.1])}, BASKET)
    into = ["in", "can", "basket_region"]
    assert droppable(at(0.6, 0.2, 0.05), "can", into)                   # over the box, 5 cm over its floor
    assert droppable(at(0.64, 0.2, 0.05), "can", into)                  # off-centre, still inside
    assert not droppable(at(0.655, 0.2, 0.05), "can", into)             # its origin too near the side
    assert droppable(at(0.6, 0.2, 0.10), "can", into)                   # 10 cm up, but within the box's height
    assert not droppable(at(0.6, 0.2, 0.13), "can", into)               # over the box's top: it could fall anywhere
    assert not droppable(at(0.6, 0.2, 0.05), "can", ["on", "can", "basket_region"])   # only In goals


class _Scene:
    """A Scene stand-in for the Planner: a goal, the truth of its predicates, a world."""
    def __init__(self, w: dict, goal, true=()):
        self._w, self.goal_state, self._true = w, goal, set(map(tuple, true))

    def world(self) -> dict:
        return self._w

    def predicate(self, pred) -> bool:
        return tuple(pred) in self._true


def test_the_planner_lets_go_of_an_object_whose_goal_already_holds():
    import json as _json
    from motormind.brains.oracle.brain import OracleBrain
    from motormind.brains.base import BrainRequest
    bodies = {"can": body([0.57, 0.17, 0.05], [0.63, 0.23, 0.15]), "box": body([0.4, -0.2, 0.0], [0.44, -0.16, 0.03])}
    data = world_data(bodies, BASKET, {"can": ["left", "right"]})
    goal = [["in", "can", "basket_region"], ["in", "box", "basket_region"]]
    brain = OracleBrain(_Scene(data, goal, true=[goal[0]]), load_profile("libero_panda"))
    state = {"eef_pos_mm": [600.0, 200.0, 130.0], "eef_yaw_deg": 0.0, "gripper_width_mm": 60.0,
             "gripper_fraction": 0.77, "joints_deg": [0, 0, 0, -90, 0, 90, 45], "eef_quat_xyzw": [1, 0, 0, 0]}
    ctx = {"state": _json.dumps(state)}
    req = BrainRequest("planner", "planner", "", "", {}, context=ctx)
    plan = _json.loads(brain.respond(req).text)["subgoals"]
    assert "let go of the can" in plan[0]["description"]                 # the can's goal holds: release first
    assert [s["description"].split(" the ")[0] for s in plan[1:]] == ["grasp", "lift", "lower"]   # then the box
    cmds = brain._x_release(brain.world(), pp.Pose.from_state(state), "can", None, None)[0]
    assert cmds[0] == {"op": "gripper", "action": "open"} and cmds[1]["direction"] == "up"
    verdict = brain._verifier({"subgoal_id": plan[0]["id"], "state": ctx["state"]})
    assert not verdict["achieved"] and "still held" in verdict["evidence"]


def test_the_last_step_of_a_plan_is_verified_against_the_whole_goal():
    import json as _json
    from motormind.brains.oracle.brain import OracleBrain
    from motormind.brains.base import BrainRequest
    bodies = {"can": body([0.57, 0.17, 0.05], [0.63, 0.23, 0.15]), "box": body([0.58, 0.18, 0.0], [0.62, 0.22, 0.03])}
    data = world_data(bodies, BASKET)
    goal = [["in", "can", "basket_region"], ["in", "box", "basket_region"]]
    scene = _Scene(data, goal, true=[goal[0]])
    brain = OracleBrain(scene, load_profile("libero_panda"))
    state = _json.dumps({"eef_pos_mm": [600.0, 200.0, 300.0], "eef_yaw_deg": 0.0, "gripper_width_mm": 78.0,
                         "gripper_fraction": 1.0, "joints_deg": [0, 0, 0, -90, 0, 90, 45], "eef_quat_xyzw": [1, 0, 0, 0]})
    plan = _json.loads(brain.respond(BrainRequest("planner", "planner", "", "", {}, context={"state": state})).text)["subgoals"]
    last = plan[-1]["id"]
    assert brain.specs[last][0] == "place" and brain.specs[last][1] == "box"
    scene._true = {tuple(goal[1])}                                      # the box went in; the can was knocked out
    verdict = brain._verifier({"subgoal_id": last, "state": state})
    assert not verdict["achieved"] and "(in can basket_region) no longer holds" in verdict["evidence"]
    scene._true = {tuple(goal[0]), tuple(goal[1])}
    assert brain._verifier({"subgoal_id": last, "state": state})["achieved"]


def test_the_monitor_cancels_for_an_object_moved_by_another_hand_not_by_its_own_fingers():
    """PRIVILEGED check of the oracle's Monitor (issue 16): an object the batch works on that moved
    more than 2 cm since the batch was computed cancels it, unless a finger has touched it since (the
    hand slides what it pinched; the contact of a rim pinch can flicker off at one snapshot)."""
    import json as _json
    from motormind.brains.oracle.brain import OracleBrain
    bodies = {"bowl": body([0.57, 0.17, 0.0], [0.63, 0.23, 0.05]), "plate": body([0.3, -0.2, 0.0], [0.4, -0.1, 0.01])}
    scene = _Scene(world_data(bodies), [["on", "bowl", "plate"]])
    brain = OracleBrain(scene, load_profile("libero_panda"))
    state = _json.dumps({"eef_pos_mm": [600.0, 200.0, 300.0], "eef_yaw_deg": 0.0, "gripper_width_mm": 78.0,
                         "gripper_fraction": 1.0, "joints_deg": [0, 0, 0, -90, 0, 90, 45], "eef_quat_xyzw": [1, 0, 0, 0]})
    sid = next(s["id"] for s in brain._planner({"state": state})["subgoals"] if brain.specs[s["id"]][0] == "grasp")
    brain._executor({"subgoal_id": sid, "state": state})

    def monitor(moved_by, touched=None):
        b = dict(bodies["bowl"], pos=[0.60 + moved_by, 0.20, 0.0])
        scene._w = world_data({**bodies, "bowl": b}, finger_contacts=touched or {})
        return brain._monitor({"subgoal_id": sid, "state": state, "last_command": {"command": {"op": "move"}}})
    assert not monitor(0.015)["cancel"]                                  # within 2 cm: not moved
    got = monitor(0.05)
    assert got["cancel"] and "bowl" in got["reason"] and "privileged" in got["reason"]
    brain._executor({"subgoal_id": sid, "state": state})                 # a new batch, from where it is
    assert not monitor(0.05)["cancel"]
    monitor(0.05, {"bowl": ["finger1", "finger2"]})                      # pinched: the hand moves it now
    assert not monitor(0.09)["cancel"]                                   # (its contacts flickered off)


def _microwave(front_wall: bool = False) -> dict:
    """A box oven at x 0.5-0.72, y 0.27-0.47: floor, roof, walls, open toward -y (unless ``front_wall``)."""
    walls = [([0.48, 0.27, 0.0], [0.51, 0.47, 0.2]), ([0.71, 0.27, 0.0], [0.74, 0.47, 0.2]),
             ([0.51, 0.44, 0.0], [0.71, 0.47, 0.2]), ([0.51, 0.27, 0.175], [0.71, 0.44, 0.2]),
             ([0.51, 0.27, 0.0], [0.71, 0.44, 0.033])]
    if front_wall:
        walls.append(([0.51, 0.25, 0.0], [0.71, 0.27, 0.2]))
    oven = body([0.48, 0.25 if front_wall else 0.27, 0.0], [0.74, 0.47, 0.2], kind="fixture")
    oven["boxes"] = [[list(lo), list(hi)] for lo, hi in walls]
    oven["obbs"] = [list((np.add(lo, hi) / 2)) + list((np.subtract(hi, lo) / 2)) + EYE for lo, hi in walls]
    return oven


def _mug(cx: float, cy: float) -> dict:
    """A 10 cm mug (a ring of 8 wall boxes) with a handle bar sticking out 3.5 cm toward -y."""
    rows = []
    for k in range(8):
        ang = k * math.pi / 4
        rot = axis_angle_to_mat([0, 0, 1], ang)
        rows.append([cx + 0.045 * math.cos(ang), cy + 0.045 * math.sin(ang), 0.05, 0.004, 0.019, 0.05]
                    + list(rot.ravel()))
    rows.append([cx, cy - 0.083, 0.045, 0.0085, 0.0045, 0.029] + EYE)      # the handle's outer bar
    mug = body([cx - 0.049, cy - 0.088, 0.0], [cx + 0.049, cy + 0.049, 0.1])
    mug["obbs"] = rows
    return mug


OVEN_REGION = {"heating": {"centre": [0.61, 0.355, 0.1], "half_extents": [0.1, 0.08, 0.08],
                           "lo": [0.51, 0.275, 0.02], "hi": [0.71, 0.435, 0.18], "parent": "oven"}}


def test_a_roofed_region_is_entered_through_its_open_side_by_the_handle():
    from motormind.brains.oracle import insert as ins
    w = world({"oven": _microwave(), "mug": _mug(0.62, -0.02)}, OVEN_REGION)
    op = ins.opening(w, "heating")
    assert op is not None and np.allclose(op.d, [0, 1, 0])                  # open toward the robot's -y
    assert op.floor == pytest.approx(0.033) and op.roof == pytest.approx(0.175) and op.face == pytest.approx(0.27)
    shut = world({"oven": _microwave(front_wall=True), "mug": _mug(0.62, -0.02)}, OVEN_REGION)
    assert ins.opening(shut, "heating") is None                            # no open side: not this skill
    basket = dict(OVEN_REGION["heating"], parent="mug")
    assert ins.opening(world({"mug": _mug(0.62, -0.02)}, {"in_mug": basket}), "in_mug") is None
    pose = pp.Pose(np.array([0.45, 0.0, 0.3]), 0.0, 78.0, 1.0, 0.0, art.down_rot(0.0))
    g, rot = ins.choose(w, "mug", op, pose)
    assert g.point[1] == pytest.approx(-0.1, abs=0.005) and g.point[2] == pytest.approx(0.045)   # the bar
    assert rot[1, 2] > 0.3 and rot[2, 2] < -0.3                            # tilted back, pointing in and down
    assert abs(rot[1, 0]) < 1e-9                                           # the fingers close across the axis
    t = ins.target(w, "mug", op, g.point, rot, 0.017)
    assert abs(t.origin[0] - 0.61) < 0.1 and 0.275 < t.origin[1] < 0.435   # inside the region's box
    assert t.origin[2] == pytest.approx(op.floor + ins.FLOOR_CLEAR_M)      # (its origin at its bottom)
    moved = w.bodies["mug"].obbs.shifted(t.origin - w.bodies["mug"].pos)
    assert w.clearance(moved, exclude=("mug",)) > 0.0                      # in, clear of the walls and roof


def test_a_tipped_bowls_rim_is_pinched_at_its_height_there():
    def ring(tilt_deg):
        rows, tilt = [], axis_angle_to_mat([1, 0, 0], math.radians(tilt_deg))
        for k in range(8):
            ang = k * math.pi / 4
            c = tilt @ np.array([0.05 * math.cos(ang), 0.05 * math.sin(ang), 0.025])
            rot = tilt @ axis_angle_to_mat([0, 0, 1], ang)
            rows.append(list(np.array([0.5, 0.0, 0.0]) + c) + [0.003, 0.021, 0.025] + list(rot.ravel()))
        return rows
    for tilt in (0.0, 20.0):
        bowl = body([0.445, -0.06, 0.0], [0.555, 0.06, 0.07])
        bowl["obbs"] = ring(tilt)
        bowl["rot"] = list(axis_angle_to_mat([1, 0, 0], math.radians(tilt)).ravel())
        corners = np.concatenate([np.asarray(r[:3]) + (np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1)
                                  for z in (-1, 1)]) * r[3:6]) @ np.asarray(r[6:]).reshape(3, 3).T for r in bowl["obbs"]])
        bowl["lo"], bowl["hi"] = corners.min(axis=0).tolist(), corners.max(axis=0).tolist()
        w = world({"bowl": bowl})
        rims = [g for g in pp.candidates(w, "bowl") if g.kind == "rim" and abs(g.score) < 1e-9]
        low = min(rims, key=lambda g: g.point[1])                      # tipped about x: -y is the low side
        high = max(rims, key=lambda g: g.point[1])
        depth = pp.RIM_DEPTHS_M[0]
        top = float(corners[:, 2].max())
        if tilt == 0.0:
            assert low.point[2] == pytest.approx(top - depth) and high.point[2] == pytest.approx(top - depth)
        else:                                                          # each pinch under the rim where it is
            near = lambda g: corners[np.linalg.norm(corners[:, :2] - g.point[:2], axis=1) < pp.RIM_NEAR_M, 2].max()
            assert high.point[2] == pytest.approx(near(high) - depth)
            assert low.point[2] == pytest.approx(near(low) - depth) and low.point[2] < high.point[2] - 0.02


def test_after_a_stopped_carry_the_release_keeps_the_holding_hand_clear_and_may_turn_the_object():
    # a cheese box held with the fingers across y: the hand, 21 cm along them, comes down onto the
    # cabinet beside the bowl at every spot an On goal accepts, unless the object is turned
    w = world({"bowl": body([0.55, -0.05, 0.0], [0.65, 0.05, 0.05]),
               "cabinet": body([0.5, -0.35, 0.0], [0.8, -0.09, 0.22], kind="fixture"),
               "cheese": body([0.38, 0.18, 0.1], [0.42, 0.22, 0.12])})
    grip = np.array([0.40, 0.20, 0.115])
    hand = gripper_boxes(PANDA, grip - w.bodies["cheese"].pos, math.pi / 2, 0.04)
    plain = pp.place_target(w, "cheese", ["on", "cheese", "bowl"])
    assert plain.spin == 0.0                                                # an On goal is not turned
    assert min(w.clearance(pp.turned(hand, 0.0, plain.origin + [0, 0, dz]), exclude=("cheese",))
               for dz in pp.HAND_COLUMN_M) < 0.0                           # ... and its hand meets the cabinet
    t = pp.place_target(w, "cheese", ["on", "cheese", "bowl"], avoid=[plain.origin[:2]], hand=hand)
    assert abs(abs(t.spin) - math.pi / 2) < 1e-9
    assert np.linalg.norm(t.origin[:2] - w.bodies["bowl"].pos[:2]) < 0.03    # still where On holds
    assert min(w.clearance(pp.turned(hand, t.spin, t.origin + [0, 0, dz]), exclude=("cheese",))
               for dz in pp.HAND_COLUMN_M) > 0.0


def test_a_push_boxed_in_by_objects_shoves_them_and_keeps_clear_of_the_fixtures():
    # a plate between a stove (a fixture) and a bowl, its target beyond the bowl: no way is clear of
    # both, so the path goes through the bowl (it is shoved aside), never through the stove
    w = world({"plate": body([0.39, -0.06, 0.0], [0.51, 0.06, 0.02]),
               "stove": body([0.2, 0.1, 0.0], [0.5, 0.3, 0.03], kind="fixture"),
               "bowl": body([0.575, -0.03, 0.0], [0.68, 0.08, 0.07])})
    target = np.array([0.58, 0.24])
    assert art._plan_push(w, "plate", target, 0.1, shove=False) is None
    path = art._push_path(w, "plate", target, 0.1)
    assert len(path) > 2 and np.allclose(path[-1], target)                 # around the stove's corner
    r = art._radius(w, "plate")
    stove = art._table_boxes(w, "plate", objects=False)
    pts = np.concatenate([p + np.linspace(0, 1, 20)[:, None] * (q - p) for p, q in zip(path[:-1], path[1:])])
    away = np.linalg.norm(pts - target, axis=1) > 0.02                     # (it may end nearer than that)
    assert art._dist(pts[away], stove).min() >= r - 1e-6
    assert art._dist(pts, art._table_boxes(w, "plate")).min() < r           # ... and through the bowl


def _walk(p, cmds, prof) -> list[np.ndarray]:
    """The grip points the moves of ``cmds`` pass through, from ``p`` (m)."""
    pts = [np.asarray(p, float)]
    for c in cmds:
        if c["op"] == "move":
            v = np.asarray(c.get("vector") or prof.directions[c["direction"]], float)
            pts.append(pts[-1] + v / np.linalg.norm(v) * c["distance_mm"] / 1000.0)
    return pts


def test_a_push_from_outside_claims_done_only_in_a_batch_that_pushes():
    # a thin box pushed from behind, the tool still horizontal from a drawer and the fingers open:
    # backing off, turning down, closing and the way there fill the batch. It ends there, not done
    # (a batch cut short of the push once claimed it); from over the start, the push and its claim
    prof = load_profile("libero_panda")
    w = world({"box": body([0.45, 0.10, 0.0], [0.55, 0.16, 0.02])})

    class Brain:
        profile = prof
    r_h = art.horizontal_rot(np.array([0.0, 1.0, 0.0]), sep_vertical=True)
    tilted = pp.Pose(np.array([0.70, -0.13, 0.18]), 0.0, 78.0, 1.0, 0.0, r_h)
    cmds, done = art._push_outside(Brain, w, tilted, "box", np.array([0.5, -0.05]))
    low = float(w.bodies["box"].hi[2])
    assert not done and 0 < len(cmds) <= prof.limits.max_batch
    assert min(p[2] for p in _walk(tilted.grip, cmds, prof)[1:]) > low          # the push is not in it
    at = _walk(tilted.grip, cmds, prof)[-1]
    down = pp.Pose(at, math.pi / 2, 0.0, 0.0, 0.0, art.down_rot(math.pi / 2))
    cmds, done = art._push_outside(Brain, w, down, "box", np.array([0.5, -0.05]))
    pts = _walk(at, cmds, prof)
    assert done and len(cmds) < prof.limits.max_batch
    assert min(p[2] for p in pts) < low                                           # fingertips behind it
    assert min(p[1] for p in pts) < 0.10                                          # ... and along the push


def test_the_oracle_plans_with_each_robots_own_gripper_and_reach():
    """The widest gap and the reach come from the robot's profile (the xArm gripper opens 85 mm, the
    Panda's 78): a 50 mm wide object is straddled with its full margins on the xArm6 only, and a grip
    point the Panda reaches is beyond the xArm6's comfortable reach."""
    xarm = hand_for(load_profile("xarm6"))
    assert PANDA.max_gap_m == 0.078 and PANDA.open_width_mm == 78.0 and xarm.max_gap_m == 0.085
    box_ = {"box": body([0.5, -0.025, 0.0], [0.55, 0.025, 0.08])}       # 50 mm square
    gaps = {h.max_gap_m: min(g.gap_m for g in pp.candidates(World.from_data(world_data(box_), h), "box"))
            for h in (PANDA, xarm)}
    assert gaps[0.078] == 0.078 and gaps[0.085] == pytest.approx(0.050 + 2 * pp.OPEN_MARGIN_M)
    far = np.array([0.66, 0.3, 0.0])
    assert pp.reach_excess(far, PANDA) == 0.0 and pp.reach_excess(far, xarm) > 0.0


def test_the_oracle_refuses_a_robot_it_has_no_hand_model_or_reach_for():
    from motormind.errors import ConfigError
    with pytest.raises(ConfigError, match="no hand model for robot profile 'fake'"):
        hand_for(load_profile("fake"))
    import dataclasses
    with pytest.raises(ConfigError, match="reach: missing"):
        hand_for(dataclasses.replace(load_profile("libero_panda"), reach=None))
