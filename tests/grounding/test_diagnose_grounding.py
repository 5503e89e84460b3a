"""The diagnostic's grounding skill (motormind/diagnose/grounding.py, role.py): truth from a calibrated
camera's depth and privileged AABBs, the pixel conventions, the oracle at 100 %, a random pointer at
chance, and the diagnostic's prompts carrying the roles' camera facts and marks.

No simulator: the fake robot's synthetic calibrated camera (straight down from 1 m, a flat table)
with a box drawn into its depth image. The LIBERO set is tested in tests/tools/test_diagnose.py (sim).
"""
from __future__ import annotations

import re
import json

import numpy as np
import pytest

from motormind.brains.base import BrainRequest
from motormind.diagnose import grounding as gnd
from motormind.diagnose.brains import OracleDiagnoser, RandomBrain, random_point
from motormind.diagnose.role import Diagnoser
from motormind.grounding.camera import eef_pose
from motormind.grounding.marks import MarkOptions
from motormind.grounding.pixels import PixelConvention, convention_for
from motormind.profile import load_profile
from motormind.robots.fake import FakeRobot

SIZE = 96


def _scene(box_xy=(0.45, 0.10), box_half=(0.03, 0.04), box_h=0.06, eef=(0.40, -0.05, 0.25)):
    """(robot, observation with depth, objects): a box on the table and a flat plate beside it."""
    robot = FakeRobot(start_pos_m=eef, image_size=SIZE)
    obs = robot.observe(images=True, depth=True)
    cal = robot.cameras()["front"]
    depth = obs.depth["front"].copy()
    lo = np.array([box_xy[0] - box_half[0], box_xy[1] - box_half[1], 0.0])
    hi = np.array([box_xy[0] + box_half[0], box_xy[1] + box_half[1], box_h])
    for v in range(SIZE):                 # the box's top face, seen straight down
        for u in range(SIZE):
            p = cal.unproject(u, v, robot.CAMERA_HEIGHT_M - box_h)
            if np.all(p[:2] >= lo[:2]) and np.all(p[:2] <= hi[:2]):
                depth[v, u] = robot.CAMERA_HEIGHT_M - box_h
    objects = {"red_box_1": {"lo": lo.tolist(), "hi": hi.tolist()},
               "plate_1": {"lo": [0.30, -0.25, 0.0], "hi": [0.40, -0.15, 0.01]}}
    return robot, obs, depth, objects


def _question(robot, obs, truth):
    cal = robot.cameras()["front"]
    return {"id": "g0001", "skill": "grounding", "suite": "fake", "task": 0, "init_state": 0, "rollout": "fake/0/0",
            "moment": 0, "step": 0, "instruction": "put the red box on the plate", "plan": [], "subgoal": None,
            "state": obs.state_dict(), "images": {}, "cameras": {"front": cal.to_json()},
            "question": "Point at the red box in the front image ...", "options": [],
            "answer": {"camera": "front", "object": truth["object"], "pixel": truth["pixel"],
                       "offset_mm": truth["offset_mm"]},
            "meta": {"camera": "front", "object": truth["object"], "chance": truth["chance"]},
            "privileged": {"grounding": truth}}


def test_truth_is_the_objects_visible_surface_from_depth():
    robot, obs, depth, objects = _scene()
    cal = robot.cameras()["front"]
    t = gnd.object_truth("red_box_1", cal, depth, eef_pose(obs), objects)
    assert t is not None and t["camera"] == "front" and t["size"] == [SIZE, SIZE]
    mask = gnd.rle_decode(t["mask_rle"], SIZE, SIZE)
    assert mask.sum() == t["mask_px"] > 20
    assert mask[t["pixel"][1], t["pixel"][0]]                    # the truth pixel is on the object
    assert abs(t["pixel"][0] - t["centre_px"][0]) <= 1 and abs(t["pixel"][1] - t["centre_px"][1]) <= 1
    p = np.asarray(t["point_m"])
    lo, hi = (np.asarray(objects["red_box_1"][k]) for k in ("lo", "hi"))
    assert abs(p[2] - hi[2]) < 1e-3 and np.all(p[:2] >= lo[:2] - 1e-3) and np.all(p[:2] <= hi[:2] + 1e-3)
    assert np.allclose(t["offset_mm"], (p - obs.eef_pos_m) * 1000.0, atol=0.1)
    # the mask is the box's top and nothing else: the table and the flat plate are not in it
    table = cal.project_point([0.35, -0.20, 0.005])
    assert not mask[int(round(table[1])), int(round(table[0]))]
    assert t["chance"] == pytest.approx(gnd.dilate(mask).mean(), abs=1e-4) and 0 < t["chance"] < 0.2
    # an object too flat to be told from the table, or one the grip point is at, is not asked about
    assert gnd.object_truth("plate_1", cal, depth, eef_pose(obs), objects) is None
    robot2, obs2, depth2, objects2 = _scene(eef=(0.45, 0.10, 0.07))
    assert gnd.object_truth("red_box_1", robot2.cameras()["front"], depth2, eef_pose(obs2), objects2) is None


@pytest.mark.parametrize("rules,size,kind,grid", [("generic", None, "pixels", SIZE), ("qwen2.5-vl", None, "pixels", 448),
                                                  ("qwen3-vl", None, "norm1000", 1000), ("generic", 256, "pixels", 256)])
def test_each_model_familys_pixel_convention_round_trips(rules, size, kind, grid):
    conv = convention_for(rules, SIZE, SIZE, size)
    assert conv.kind == kind and conv.width == grid
    for u, v in ((0.0, 0.0), (SIZE - 1.0, 0.0), (17.3, 80.6), ((SIZE - 1) / 2, (SIZE - 1) / 2)):
        x, y = conv.from_image(u, v, SIZE, SIZE)
        assert conv.in_range(x, y)
        assert conv.to_image(x, y, SIZE, SIZE) == pytest.approx((u, v), abs=1e-9)
    # the image's centre is the convention's centre; its edges are the convention's edges
    assert conv.from_image((SIZE - 1) / 2, (SIZE - 1) / 2, SIZE, SIZE) == \
        pytest.approx((conv.x_max / 2, conv.y_max / 2), abs=1e-9)
    assert not conv.in_range(-5, 10) and not conv.in_range(10, conv.y_max + 5)
    assert PixelConvention.from_json(conv.to_json()) == conv
    assert ("0-1000" in conv.describe()) == (kind == "norm1000")


@pytest.mark.parametrize("rules", ["generic", "qwen2.5-vl", "qwen3-vl"])
def test_the_oracle_answers_grounding_from_privileged_truth_within_the_thresholds(rules):
    # the oracle has a hand model only for the arms it drives (brains/oracle/tuning.py MODELS): the
    # Panda's profile, whose directions are the fake's, over the fake's synthetic camera
    prof = load_profile("libero_panda")
    for box_xy, eef in (((0.45, 0.10), (0.40, -0.05, 0.25)), ((0.30, -0.15), (0.50, 0.10, 0.15)),
                        ((0.55, 0.0), (0.35, 0.0, 0.30))):
        robot, obs, depth, objects = _scene(box_xy=box_xy, eef=eef)
        t = gnd.object_truth("red_box_1", robot.cameras()["front"], depth, eef_pose(obs), objects)
        q = _question(robot, obs, t)
        conv = convention_for(rules, SIZE, SIZE)
        res = Diagnoser(OracleDiagnoser(prof)).answer(q, {"front": obs.images["front"]}, prof, privileged=True,
                                                      convention=conv)
        assert res.value is not None and res.privileged and res.brain == "oracle", res.error
        fig = gnd.score(t, {k: res.value[k] for k in ("point", "offset_mm")}, conv, prof.directions)
        assert fig["correct"] and fig["on_object"] and fig["within_mm"], fig
        assert fig["px_error"] <= 0.6 and fig["mm_error"] <= 1.0, fig
        # the answer key and the notes are not what it reads
        blind = {k: v for k, v in q.items() if k not in ("answer", "meta")}
        blind["meta"] = {"camera": "front"}
        again = Diagnoser(OracleDiagnoser(prof)).answer(blind, {"front": obs.images["front"]}, prof,
                                                        privileged=True, convention=conv)
        assert again.value["point"] == res.value["point"]


def test_scores_grow_with_the_error():
    prof = load_profile("fake")
    robot, obs, depth, objects = _scene()
    t = gnd.object_truth("red_box_1", robot.cameras()["front"], depth, eef_pose(obs), objects)
    conv = PixelConvention("pixels", SIZE, SIZE)
    good = gnd.oracle_answer(t, conv, prof.directions)
    off = json.loads(json.dumps(good))
    off["offset_mm"]["up"] += 45                                  # 45 mm too high
    fig = gnd.score(t, off, conv, prof.directions)
    assert fig["on_object"] and not fig["within_mm"] and fig["mm_error"] == pytest.approx(45, abs=1.5)
    far = json.loads(json.dumps(good))
    far["point"]["pixel"][0] = 2                                          # the image's left edge: the table
    fig = gnd.score(t, far, conv, prof.directions)
    assert not fig["on_object"] and fig["px_error"] > 10 and not fig["correct"]
    assert gnd.score(t, None, conv, prof.directions) == {"px_error": None, "mm_error": None, "on_object": False,
                                                          "within_mm": False, "correct": False}


def test_a_random_pointer_scores_near_chance():
    prof = load_profile("fake")
    scenes = [_scene(box_xy=b, box_half=h) for b, h in (((0.45, 0.10), (0.03, 0.04)), ((0.30, -0.15), (0.06, 0.05)),
                                                        ((0.55, 0.0), (0.04, 0.04)))]
    qs = []
    for robot, obs, depth, objects in scenes:
        t = gnd.object_truth("red_box_1", robot.cameras()["front"], depth, eef_pose(obs), objects)
        qs.append((_question(robot, obs, t), t, obs.images["front"]))
    conv = PixelConvention("pixels", SIZE, SIZE)
    on, correct, mm = [], [], []
    for seed in range(150):
        role = Diagnoser(RandomBrain(seed))
        for q, t, img in qs:
            res = role.answer(q, {"front": img}, prof, privileged=False, convention=conv)
            assert res.value is not None, res.error
            fig = gnd.score(t, {k: res.value[k] for k in ("point", "offset_mm")}, conv, prof.directions)
            on.append(fig["on_object"])
            correct.append(fig["correct"])
            mm.append(fig["mm_error"])
    chance = float(np.mean([t["chance"] for _, t, _ in qs]))
    assert abs(np.mean(on) - chance) < 0.035, (np.mean(on), chance)
    assert np.mean(correct) <= 0.01 and np.median(mm) > 150
    # over HTTP the random pointer has no context: it reads the camera, range and words from the prompt
    role = Diagnoser(RandomBrain(0))
    seen = []
    role.brain.respond = (lambda f: (lambda req: (seen.append(req), f(req))[1]))(role.brain.respond)
    role.answer(qs[0][0], {"front": qs[0][2]}, prof, privileged=False, convention=conv)
    bare = BrainRequest("diagnose", "diagnose", seen[0].system, seen[0].user, {}, {}, {})
    got = random_point(bare, __import__("random").Random(1))
    assert got["point"]["camera"] == "front" and set(got["offset_mm"]) == {"forward", "left", "up"}
    assert 0 <= got["point"]["pixel"][0] <= SIZE - 1


def test_the_diagnostic_prompt_carries_the_camera_facts_and_marked_images():
    prof = load_profile("fake")
    robot, obs, depth, objects = _scene()
    t = gnd.object_truth("red_box_1", robot.cameras()["front"], depth, eef_pose(obs), objects)
    raw = obs.images["front"]
    for q in (_question(robot, obs, t),
              {**_question(robot, obs, t), "skill": "completion", "question": "Is the task complete right now?",
               "options": [{"letter": "A", "text": "yes", "value": {"achieved": True}},
                           {"letter": "B", "text": "no", "value": {"achieved": False}}], "answer": "B"}):
        for marks in (MarkOptions(), MarkOptions(enabled=False)):
            seen = []
            brain = RandomBrain(0)
            brain.respond = (lambda f: (lambda req: (seen.append(req), f(req))[1]))(brain.respond)
            conv = convention_for("qwen3-vl", SIZE, SIZE)
            Diagnoser(brain).answer(q, {"front": raw}, prof, privileged=False, marks=marks, convention=conv)
            req = seen[0]
            # the profile's words for the camera, as the roles get them (views.describe)
            assert "front: a fixed camera above the workspace" in req.user
            assert "right is the robot's right (-y)" in req.user and "up the robot's forward (+x)" in req.user
            # the numbers: field of view, where it stands, the grip point in the model's convention
            assert "60 x 60 deg" in req.user and "at x 400, y 0, z 1000 mm" in req.user
            g = robot.cameras()["front"].project_point(obs.eef_pos_m)
            x, y = conv.from_image(g[0], g[1], SIZE, SIZE)
            assert f"in front the grip point is at ({x:.0f}, {y:.0f})" in req.user and "0-1000" in req.user
            assert f"the grip point at pixel ({round(g[0])}, {round(g[1])})" in req.user     # the roles' own line
            # marked as the roles' frames are; marks off: the frame as rendered
            assert req.images["front"].shape == raw.shape
            assert (not np.array_equal(req.images["front"], raw)) == marks.enabled
            assert "privileged" not in req.context and "mask_rle" not in req.user
            assert not re.search(r"\$\{?[A-Za-z_]", req.system + req.user)       # every placeholder filled
