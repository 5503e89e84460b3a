"""Marks on the images a VLM sees (motormind/grounding/marks.py), on the fake's synthetic camera."""
from __future__ import annotations

import numpy as np
import pytest
from grounding_checks import RING_ONLY, ring_centre

from motormind.errors import ConfigError
from motormind.grounding.camera import CameraCalibration, eef_pose
from motormind.grounding.marks import MarkOptions, Marker, mark_frames, mark_image, options_of
from motormind.robots.fake import FakeRobot


def _scene(image_size=128, pos=(0.45, 0.1, 0.15)):
    robot = FakeRobot(image_size=image_size, start_pos_m=pos)
    obs = robot.observe(images=True)
    return robot, obs, robot.cameras()["front"]


@pytest.mark.parametrize("pos", [(0.45, 0.1, 0.15), (0.25, -0.3, 0.05), (0.62, 0.25, 0.4)])
def test_the_grip_ring_is_drawn_where_the_grip_point_projects(pos):
    robot, obs, cal = _scene(pos=pos)
    raw = obs.images["front"].copy()
    marked, info = mark_image(obs.images["front"], cal, eef_pose(obs), obs.gripper_width_mm,
                              robot.profile.directions, RING_ONLY)
    u, v, _ = cal.project_point(obs.eef_pos_m)
    assert info["grip_px"] == pytest.approx([u, v], abs=0.05) and info["grip_in_view"]
    cu, cv = ring_centre(raw, marked, (u, v), 12)
    assert abs(cu - u) <= 1.0 and abs(cv - v) <= 1.0
    assert np.array_equal(obs.images["front"], raw)            # the frame given is left as it was
    ring_r = 4                                                  # the ring leaves the grip point itself visible
    assert np.array_equal(marked[int(round(v)) - 1:int(round(v)) + 2, int(round(u)) - 1:int(round(u)) + 2],
                          raw[int(round(v)) - 1:int(round(v)) + 2, int(round(u)) - 1:int(round(u)) + 2]), ring_r


def test_marks_follow_the_image_size_sent_to_the_vlm():
    import cv2
    robot, obs, cal = _scene(image_size=64)
    big = cv2.resize(obs.images["front"], (256, 256), interpolation=cv2.INTER_NEAREST)
    marked, info = mark_image(big, cal, eef_pose(obs), 0.0, robot.profile.directions, RING_ONLY)
    u, v, _ = cal.resized(256, 256).project_point(obs.eef_pos_m)
    assert info["size"] == [256, 256] and info["grip_px"] == pytest.approx([u, v], abs=0.05)
    cu, cv = ring_centre(big, marked, (u, v), 14)
    assert abs(cu - u) <= 1.0 and abs(cv - v) <= 1.0


def test_marks_off_gives_the_unmarked_frame_bit_for_bit():
    robot, obs, _ = _scene()
    marked, infos = Marker(robot, MarkOptions.parse(False))(obs)
    assert infos == {}
    assert marked["front"] is obs.images["front"]
    on, _ = Marker(robot, MarkOptions.parse(True))(obs)
    assert not np.array_equal(on["front"], obs.images["front"])


def test_the_arrows_point_as_the_profile_says_the_image_is_oriented():
    robot, obs, cal = _scene(image_size=256)
    view = robot.profile.cameras["front"]
    dirs = robot.profile.directions
    _, info = mark_image(obs.images["front"], cal, eef_pose(obs), 40.0, dirs,
                         MarkOptions(arrows=("forward", "left", "up")))
    right, up = dirs[view.image_right], dirs[view.image_up]
    for word in ("forward", "left"):
        du, dv = info["arrows"][word]
        expect = np.array([np.dot(dirs[word], right), -np.dot(dirs[word], up)])   # image v grows downward
        assert np.dot([du, dv], expect) > 0.95, (word, info["arrows"][word])
    assert info["arrows"]["up"] == "along the line of sight"     # a camera looking straight down
    assert info["scale_bar"]["px"] == pytest.approx(info["scale_bar"]["mm"] / info["mm_per_px"], rel=1e-3)
    assert info["scale_bar"]["px"] <= 0.25 * 256


def test_a_wrist_camera_shows_the_fingers_closing_line():
    rot_down = np.diag([1.0, -1.0, -1.0])
    cal = CameraCalibration.from_fovy("wrist", 128, 128, 75.0, "gripper", (0.0, 0.05, -0.1), np.eye(3))
    img = np.full((128, 128, 3), 90, dtype=np.uint8)
    eef = (np.array([0.4, 0.0, 0.2]), rot_down)
    _, info = mark_image(img, cal, eef, 60.0, {"up": np.array([0, 0, 1.0])}, MarkOptions(arrows=()),
                         closing_axis_eef=(0, 1, 0), max_width_mm=80.0)
    tips = info["fingertips_px"]
    assert len(tips) == 2
    for sign, tip in zip((-1, 1), tips):
        expect = cal.project_point(eef[0] + sign * rot_down @ np.array([0, 0.03, 0]), eef)
        assert tip == pytest.approx(expect[:2], abs=0.1)
    fixed = CameraCalibration.from_fovy("front", 128, 128, 60.0, "fixed", (0.4, 0.0, 1.0), rot_down)
    assert "fingertips_px" not in mark_image(img, fixed, eef, 60.0, {}, MarkOptions())[1]


def test_a_frame_without_calibration_is_passed_on_unmarked():
    robot, obs, _ = _scene()
    out, infos = mark_frames({"other": obs.images["front"]}, {}, obs, robot.profile.directions)
    assert out["other"] is obs.images["front"] and infos["other"]["note"] == "no calibration for this camera"


@pytest.mark.parametrize("value, msg", [
    ("yes", r"marks: must be true, false or a mapping"),
    ({"scale_bar_mm": 0}, r"marks\.scale_bar_mm: must be a number of mm within 1\.\.2000"),
    ({"grip_point": 1}, r"marks\.grip_point: must be true or false"),
    ({"arows": []}, r"unknown key\(s\) \['arows'\]"),
])
def test_bad_mark_options_name_the_field(value, msg):
    with pytest.raises(ConfigError, match=msg):
        MarkOptions.parse(value)


def test_an_arrow_word_the_profile_lacks_is_refused():
    with pytest.raises(ConfigError, match=r"marks\.arrows: \['north'\] not among the profile's direction words"):
        Marker(FakeRobot(), MarkOptions(arrows=("north",)))


def test_the_vlm_config_carries_the_marks_and_other_brains_get_them_on():
    from motormind.brains.openai_brain import VLMConfig

    class Brain:
        def __init__(self, cfg=None, inner=None):
            self.cfg, self.inner = cfg, inner
    assert options_of(Brain(VLMConfig(marks=False))).enabled is False
    assert options_of(Brain(inner=Brain(VLMConfig(marks={"scale_bar_mm": 100})))).scale_bar_mm == 100.0
    assert options_of(object()) == MarkOptions()
    with pytest.raises(ConfigError, match=r"marks\.labels: must be true or false"):
        VLMConfig(marks={"labels": "no"})
