"""The camera model (motormind/grounding/camera.py) and the fake's synthetic camera, without a simulator."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from motormind.errors import ConfigError
from motormind.geometry import axis_angle_to_mat, mat_to_quat, rpy_to_mat
from motormind.grounding.camera import (CameraCalibration, eef_pose, flange_to_eef, load_calibrations, sample_depth)
from motormind.robots.fake import FakeRobot
from motormind.robots.replay import RecordingRobot, ReplayRobot


def _rand_rot(rng):
    axis = rng.normal(size=3)
    return axis_angle_to_mat(axis / np.linalg.norm(axis), rng.uniform(0, math.pi))


def _look_down(height_m=0.5):
    axes = np.array([[0.0, -1.0, 0.0], [-1.0, 0.0, 0.0], [0.0, 0.0, -1.0]]).T
    return CameraCalibration.from_fovy("cam", 320, 240, 50.0, "fixed", (0.4, 0.0, height_m), axes)


def test_a_point_projects_and_unprojects_back_fixed_and_on_the_gripper():
    rng = np.random.default_rng(0)
    for mount in ("fixed", "gripper"):
        cal = CameraCalibration.from_fovy("c", 640, 480, 58.0, mount, rng.normal(size=3) * 0.2, _rand_rot(rng))
        eef = (rng.normal(size=3) * 0.3, _rand_rot(rng)) if mount == "gripper" else None
        p_cam, r_cam = cal.pose_base(eef)
        for _ in range(20):
            local = np.array([rng.uniform(-0.2, 0.2), rng.uniform(-0.15, 0.15), rng.uniform(0.1, 1.5)])
            pt = p_cam + r_cam @ local
            u, v, z = cal.project_point(pt, eef)
            assert z == pytest.approx(local[2])
            assert np.allclose(cal.unproject(u, v, z, eef), pt, atol=1e-9)


def test_the_principal_point_is_the_image_centre_in_pixel_centre_coordinates():
    cal = _look_down()
    assert (cal.cx_px, cal.cy_px) == (159.5, 119.5)
    u, v, _ = cal.project_point([0.4, 0.0, 0.0])               # straight below the camera
    assert (u, v) == pytest.approx((159.5, 119.5))
    assert cal.fov_deg[1] == pytest.approx(50.0)


def test_the_calibration_follows_the_image_size():
    cal = _look_down()
    pt = [0.47, 0.09, 0.02]
    u, v, _ = cal.project_point(pt)
    for w, h in ((160, 120), (448, 336), (100, 100)):
        small = cal.resized(w, h)
        us, vs, _ = small.project_point(pt)
        assert (us, vs) == pytest.approx(cal.pixel_to(u, v, w, h))
        assert (us, vs) == pytest.approx(((u + 0.5) * w / 320 - 0.5, (v + 0.5) * h / 240 - 0.5))
        assert np.allclose(small.unproject(us, vs, 0.48), cal.unproject(u, v, 0.48))
    assert cal.resized(320, 240) is cal


def test_a_point_behind_the_camera_has_no_pixel():
    cal = _look_down()
    assert cal.project_point([0.4, 0.0, 0.9]) is None
    with pytest.raises(ValueError, match="depth must be a finite distance > 0"):
        cal.unproject(10, 10, float("nan"))


def test_a_wrist_camera_moves_with_the_end_effector():
    cal = CameraCalibration.from_fovy("wrist", 128, 128, 75.0, "gripper", (0.05, 0.0, -0.06), np.eye(3))
    with pytest.raises(ValueError, match="needs the eef pose"):
        cal.pose_base()
    p, r = cal.pose_base((np.array([0.5, 0.1, 0.3]), rpy_to_mat(math.pi, 0, 0)))
    assert np.allclose(p, [0.55, 0.1, 0.36])                    # the tool upside down: -z of the eef is up
    assert np.allclose(r, rpy_to_mat(math.pi, 0, 0))


def test_a_calibration_file_round_trips_and_a_flange_camera_is_moved_to_the_eef_frame(tmp_path):
    rng = np.random.default_rng(3)
    fixed = CameraCalibration.from_fovy("front", 320, 240, 50.0, "fixed", (1.0, 0.0, 0.5), _rand_rot(rng))
    back = CameraCalibration.from_json(json.loads(json.dumps(fixed.to_json())))
    assert back.K == pytest.approx(fixed.K) and np.allclose(back.rot, fixed.rot, atol=1e-7)
    assert back.position_m == pytest.approx(fixed.position_m) and back.mount == "fixed"
    # a wrist camera calibrated in the flange frame; the eef (TCP) is the flange moved by the TCP offset
    offset = (0.0, 0.0, 172.0, 0.0, 0.0, 90.0)
    cam_rot = _rand_rot(rng)
    entry = {"camera": "wrist", "width": 320, "height": 240, "fovy_deg": 70, "frame": "flange",
             "position_m": [0.085, 0.0, 0.075], "quat_xyzw": mat_to_quat(cam_rot).tolist()}
    (tmp_path / "cal.json").write_text(json.dumps({"cameras": {"front": fixed.to_json(), "wrist": entry}}))
    cams = load_calibrations(str(tmp_path / "cal.json"), tcp_offset=offset)
    assert set(cams) == {"front", "wrist"} and cams["wrist"].mount == "gripper"
    flange_p, flange_r = np.array([0.3, 0.1, 0.4]), _rand_rot(rng)
    r_off = rpy_to_mat(0, 0, math.radians(90))
    eef = (flange_p + flange_r @ np.array([0, 0, 0.172]), flange_r @ r_off)
    p, r = cams["wrist"].pose_base(eef)
    assert np.allclose(p, flange_p + flange_r @ np.array([0.085, 0.0, 0.075]))
    assert np.allclose(r, flange_r @ cam_rot)
    assert np.allclose(flange_to_eef([0, 0, 0.172], r_off, offset)[0], 0)
    with pytest.raises(ConfigError, match="frame: flange needs the robot's TCP offset"):
        load_calibrations(str(tmp_path / "cal.json"))


@pytest.mark.parametrize("entry, msg", [
    ({"width": 0}, r"\.width: must be a whole number of pixels >= 1"),
    ({"fx": -3}, r"\.fx: must be a finite number > 0"),
    ({"frame": "wrist"}, r"\.frame: must be base, eef or flange"),
    ({"quat_xyzw": [0, 0, 0, 0]}, r"\.quat_xyzw: must not be all zeros"),
    ({"position_m": [1, 2]}, r"\.position_m: must be 3 finite numbers"),
    ({"depth": "yes"}, r"\.depth: must be true or false"),
    ({"focal": 3}, r"unknown key\(s\) \['focal'\]"),
])
def test_a_bad_calibration_entry_names_the_field(entry, msg):
    good = _look_down().to_json()
    with pytest.raises(ConfigError, match=msg):
        CameraCalibration.from_json({**good, **entry})


def test_the_fake_camera_points_at_the_tool_and_its_depth_lands_on_the_table():
    robot = FakeRobot(image_size=64)
    cal = robot.cameras()["front"]
    assert cal.depth and cal.size == (64, 64)
    obs = robot.observe(images=True, depth=True)
    img, dep = obs.images["front"], obs.depth["front"]
    assert dep.shape == img.shape[:2] and dep.dtype == np.float32
    u, v, _ = cal.project_point(obs.eef_pos_m)
    ys, xs = np.nonzero(img[:, :, 0] > 200)
    assert abs(xs.mean() - u) <= 1 and abs(ys.mean() - v) <= 1      # the tool's dot is where it projects
    for uu, vv in ((3, 5), (32, 40), (60, 12)):
        p = cal.unproject(uu, vv, sample_depth(dep, uu, vv))
        assert p[2] == pytest.approx(FakeRobot.TABLE_Z_M, abs=1e-6)
        assert cal.project_point(p)[:2] == pytest.approx((uu, vv))
    assert robot.observe(images=True).depth == {}                    # depth only when asked


def test_a_camera_without_depth_says_so():
    robot = FakeRobot(depth=False)
    cal = robot.cameras()["front"]
    assert cal.depth is False and "without depth" in cal.no_depth_reason
    assert cal.to_json()["no_depth_reason"] == cal.no_depth_reason
    assert robot.observe(images=True, depth=True).depth == {}


def test_sample_depth_skips_holes_and_follows_the_image_size():
    d = np.full((10, 10), np.nan, dtype=np.float32)
    d[4:7, 4:7] = 0.5
    assert sample_depth(d, 5, 5) == pytest.approx(0.5)
    assert math.isnan(sample_depth(d, 0, 0))
    assert math.isnan(sample_depth(d, 50, 5))
    assert sample_depth(d, 10.5, 10.5, size=(20, 20)) == pytest.approx(0.5)   # pixel (10.5, 10.5) of a 20 px image


def test_replay_gives_back_the_recorded_calibration_or_none():
    inner = FakeRobot()
    rec = RecordingRobot(inner)
    rec.observe(images=True, depth=True)
    cams = rec.cameras()
    assert cams["front"] == inner.cameras()["front"] and rec.observations[0].depth
    replay = ReplayRobot(inner.profile, rec.observations, [], calibrations=rec.calibrations)
    assert replay.cameras() == cams
    assert ReplayRobot(inner.profile, rec.observations, []).cameras() == {}
    assert eef_pose(replay.observe())[0] == pytest.approx(inner.pos)


def test_the_depth_png_round_trips_in_millimetres_with_holes_as_no_reading():
    """Issue 34 item 1: the depth a network camera serves (the rehearsal cell's /<camera>.depth.png)
    is a 16-bit PNG of whole mm, 0 = no reading; decoding gives metres with NaN where there is none."""
    pytest.importorskip("cv2")
    from motormind.grounding.camera import decode_depth_png, depth_to_units, encode_depth_png
    d = np.linspace(0.05, 3.0, 12 * 16, dtype=np.float32).reshape(12, 16)
    d[0, 0], d[0, 1], d[0, 2], d[0, 3] = np.nan, 0.0, 70.0, 0.0004      # hole, zero, too far, under 1 mm
    data = encode_depth_png(d)
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    back = decode_depth_png(data)
    assert back.shape == d.shape and back.dtype == np.float32
    assert np.isnan(back[0, :4]).all() and np.isfinite(back).sum() == d.size - 4
    ok = np.isfinite(back)
    assert np.abs(back[ok] - d[ok]).max() <= 0.0005 + 1e-6               # rounded to the mm
    assert depth_to_units(np.array([[1.2344, 65.535]])).tolist() == [[1234, 65535]]
    import cv2
    _, grey8 = cv2.imencode(".png", np.zeros((4, 4), np.uint8))
    with pytest.raises(ValueError, match="16-bit single-channel"):
        decode_depth_png(grey8.tobytes())
