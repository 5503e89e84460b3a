"""Camera view descriptions: parsed strictly from a profile, rendered into every role's prompt that
carries images, and true of the images (the fake arm's top view here; LIBERO-PRO's cameras in
tests/sim/test_libero_backend.py)."""
import threading

import numpy as np
import pytest

from motormind.components import Context
from motormind.errors import ConfigError
from motormind.profile import load_profile
from motormind.robot import Motion
from motormind.robots.fake import FakeRobot
from motormind.roles.base import render
from motormind.views import describe, parse_views

DIRS = load_profile("fake").directions


def test_view_sections_are_checked_field_by_field():
    ok = {"front": {"mount": "fixed", "looks": ["down"], "image_right": "right", "image_up": "forward"}}
    assert parse_views(ok, DIRS)["front"].looks == ("down",)
    for bad, msg in [({"front": {**ok["front"], "mount": "ceiling"}}, "cameras.front.mount: must be one of"),
                     ({"front": {**ok["front"], "image_right": "starboard"}}, "cameras.front.image_right"),
                     ({"front": {**ok["front"], "image_up": "right"}}, "perpendicular"),
                     ({"front": {**ok["front"], "lens": 3}}, r"unknown key\(s\) \['lens'\]"),
                     ({"front": {"mount": "fixed"}}, "cameras.front.looks: missing")]:
        with pytest.raises(ConfigError, match=msg):
            parse_views(bad, DIRS)


def test_a_bad_view_in_a_profile_file_names_the_file_and_the_field():
    import yaml

    from motormind.paths import config_dir
    from motormind.profile import profile_from_dict
    d = yaml.safe_load((config_dir() / "robots" / "fake.yaml").read_text())
    d["cameras"]["front"]["image_up"] = "sideways"
    with pytest.raises(ConfigError, match=r"^mine.yaml: cameras.front.image_up: \['sideways'\] not among"):
        profile_from_dict(d, "mine.yaml")


def test_every_shipped_profile_describes_its_cameras_or_says_it_does_not():
    lib = load_profile("libero_panda")
    text = describe(lib.cameras, lib.directions)
    assert "agentview: a fixed camera in front of the robot" in text
    assert "right is the robot's left (+y), left the robot's right (-y)" in text
    assert "It faces the robot" in text
    assert "robot0_eye_in_hand: on the gripper" in text and "up the robot's forward (+x)" in text
    assert "no camera view descriptions" in describe(load_profile("xarm6").cameras, DIRS)
    assert "wrist: no view description" in describe(lib.cameras, lib.directions, ["agentview", "wrist"])


@pytest.mark.parametrize("prompt", ["planner", "executor", "verifier"])
def test_the_roles_that_see_images_are_told_where_each_camera_looks_from(prompt):
    ctx = Context(load_profile("libero_panda"), "put the bowl on the plate", camera_names=["agentview"])
    base = ctx.base({"eef_pos_mm": [1, 2, 3]}, [])
    _, user = render(prompt, {**base, "image_names": "agentview", "replan": "", "subgoal_id": "s1",
                              "subgoal": "x", "criterion": "y", "last_report": "", "last_verdict": "", "batch_id": "b1",
                              "schema": "{}"})
    assert "Where each camera looks from (base frame):\n- agentview: a fixed camera" in user
    assert "robot0_eye_in_hand" not in user                    # only the robot's own cameras
    assert "${" not in user


def _dot(img):
    ys, xs = np.nonzero(img[:, :, 0] > 200)
    return xs.mean(), ys.mean()


@pytest.mark.parametrize("word", ["left", "right", "forward", "back"])
def test_the_fake_arms_image_moves_as_its_profile_says(word):
    robot = FakeRobot(image_size=64)
    view = robot.profile.cameras["front"]
    x0, y0 = _dot(robot.observe(images=True).images["front"])
    d = robot.profile.directions[word] * 0.08
    robot.execute(Motion("move", robot.pos + d, robot.rot.copy()), threading.Event())
    x1, y1 = _dot(robot.observe(images=True).images["front"])
    dx, dy = x1 - x0, y0 - y1                                   # image right, image up
    right, up = robot.profile.directions[view.image_right], robot.profile.directions[view.image_up]
    expect = np.array([np.dot(robot.profile.directions[word], right), np.dot(robot.profile.directions[word], up)])
    got = np.array([dx, dy])
    assert np.dot(got / np.linalg.norm(got), expect) > 0.9, (word, got, expect)
