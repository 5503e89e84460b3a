"""The xArm6 rehearsal cell (sim/xarm_cell/): the wire-level emulator over a MuJoCo scene.

What the arm did is measured from the physics (the privileged scene, as an evaluator would), never
taken from the stack's own reports: the unmodified SDK picks a block up and puts it on its mark;
the backend opens the emulated cameras by URL and its frames show the scene where the calibration
says; contact stops the arm (C31) and reach is refused (C21) as on the controller; placement trials
run through the real backend with interference that never reaches a prompt."""
import json
import math
import re
import subprocess
import sys
import time

import numpy as np
import pytest

pytest.importorskip("xarm")
pytest.importorskip("mujoco")

from motormind.errors import ConfigError  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.robots.xarm6 import XArm6Robot, XArmFault, _import_sdk  # noqa: E402
from motormind.sim.xarm_cell.config import cell_from_dict, load_cell  # noqa: E402
from motormind.sim.xarm_cell.emulator import CellEmulator  # noqa: E402
from motormind.sim.xarm_emulator import free_loopback_host  # noqa: E402

pytestmark = [pytest.mark.xarm, pytest.mark.sim]

SEED = 3


@pytest.fixture(scope="module")
def cell():
    emu = CellEmulator("placement", free_loopback_host(), 0, camera_port=0, report_hz=20, seed=SEED).start()
    yield emu
    emu.stop()


@pytest.fixture
def fresh(cell):
    cell.clear_faults()
    trial = cell.reset_scene(SEED)
    return cell, trial


def sdk(emu):
    XArmAPI, XCONF = _import_sdk()
    saved = XCONF.SocketConf.TCP_CONTROL_PORT
    XCONF.SocketConf.TCP_CONTROL_PORT = emu.port      # the emulator's port (not root: not 502)
    try:
        arm = XArmAPI(emu.host, is_radian=False, forbid_uds=True)
    finally:
        XCONF.SocketConf.TCP_CONTROL_PORT = saved
    for rc in (arm.clean_error(), arm.motion_enable(True), arm.set_mode(0), arm.set_state(0),
               arm.set_gripper_mode(0), arm.set_gripper_enable(True), arm.set_gripper_speed(5000)):
        assert (rc[0] if isinstance(rc, (list, tuple)) else rc) == 0
    return arm


def yaw_deg(body) -> float:
    r = body["rot"]
    return math.degrees(math.atan2(r[3], r[0]))


def test_the_unmodified_sdk_picks_a_block_and_places_it_on_its_mark(fresh):
    emu, trial = fresh
    _, block, mark = trial.goal[0]
    world = emu.scene.world()                               # the evaluator's privileged view
    b, m = world["bodies"][block], world["bodies"][mark]
    z0 = b["pos"][2]
    arm = sdk(emu)
    try:
        yaw = yaw_deg(b)                                     # fingers (the TCP's x axis) along the block's x
        assert arm.set_gripper_position(850, wait=True) == 0
        x, y = b["pos"][0] * 1000, b["pos"][1] * 1000
        assert arm.set_position(x, y, 120, 180, 0, yaw, speed=150, wait=True) == 0
        assert arm.set_position(x, y, z0 * 1000 + 5, 180, 0, yaw, speed=80, wait=True) == 0
        arm.set_gripper_position(0, wait=True)
        code, pulses = arm.get_gripper_position()
        width = emu.cell.blocks[block].size_m[0] * 1000
        assert code == 0 and width - 3 < pulses / 10 < width + 1      # stopped on the block, by contact
        assert emu.scene.world()["finger_contacts"][block] == ["finger1", "finger2"]
        assert arm.set_position(x, y, 130, 180, 0, yaw, speed=150, wait=True) == 0
        lifted = emu.scene.world()["bodies"][block]["pos"][2]
        assert lifted > z0 + 0.08                                     # it came up with the fingers
        mx, my = m["pos"][0] * 1000, m["pos"][1] * 1000
        assert arm.set_position(mx, my, 130, 180, 0, yaw, speed=150, wait=True) == 0
        assert not emu.scene.predicate(["on", block, mark])          # held above it: not on it yet
        assert arm.set_position(mx, my, z0 * 1000 + 5 + 2 + 4, 180, 0, yaw, speed=80, wait=True) == 0
        assert arm.set_gripper_position(850, wait=True) == 0
        assert arm.set_position(mx, my, 130, 180, 0, yaw, speed=150, wait=True) == 0
        time.sleep(0.3)
        assert emu.scene.predicate(["on", block, mark]) and emu.scene.success()
        assert emu.scene.placement_error_mm() < 3.0
        # the pose the controller reports is the physics' TCP (FK of the measured joints, TCP offset)
        code, pose = arm.get_position()
        site, _ = emu.physics.tcp()
        assert code == 0 and np.allclose(np.array(pose[:3]) / 1000, site, atol=2e-4)
    finally:
        arm.disconnect()


def test_the_backend_opens_the_emulated_cameras_by_url_and_sees_the_scene(fresh):
    emu, trial = fresh
    urls = emu.camera_urls()
    assert sorted(urls) == ["front", "wrist"] and all(u.startswith("http://") and u.endswith(".mjpg")
                                                      for u in urls.values())
    robot = XArm6Robot(emu.host, load_profile("xarm6"), command_port=emu.port, cameras=urls)
    try:
        obs = robot.observe(images=True)
        assert sorted(obs.images) == ["front", "wrist"]
        for img in obs.images.values():
            assert img.shape == (240, 320, 3) and img.dtype == np.uint8 and img.std() > 10

        spec = emu.cell.cameras["front"]
        k = spec.intrinsics()

        def red_centroid(img):
            ys, xs = np.nonzero((img[:, :, 0] > 150) & (img[:, :, 1] < 90) & (img[:, :, 2] < 90))
            assert len(xs) > 20, "no red block in the front camera's frame"
            return np.array([xs.mean(), ys.mean()])

        def projected(p):                     # the calibration: base frame -> pixel (OpenCV pinhole)
            c = spec.rot.T @ (np.asarray(p) - np.asarray(spec.position_m))
            return np.array([k["fx"] * c[0] / c[2] + k["cx"], k["fy"] * c[1] / c[2] + k["cy"]])

        p0 = emu.scene.world()["bodies"]["red_block"]["pos"]
        assert np.linalg.norm(red_centroid(obs.images["front"]) - projected(p0)) < 6.0
        # the newest frame, not a backlog: the block moved by an outside hand shows at once
        time.sleep(2.0)                       # the stream runs on while nobody reads it
        emu.scene.move_object("red_block", p0[0] + 0.08, p0[1] - 0.06)
        p1 = emu.scene.world()["bodies"]["red_block"]["pos"]
        time.sleep(0.6)                       # a few frame periods at 5 fps
        seen = red_centroid(robot.observe(images=True).images["front"])
        assert np.linalg.norm(seen - projected(p1)) < 6.0 and np.linalg.norm(seen - projected(p0)) > 15.0
        # the cameras' index tells the calibration
        import urllib.request
        with urllib.request.urlopen(emu.cameras.url + "/", timeout=5) as r:
            index = json.loads(r.read())
        cal = index["cameras"]["front"]["calibration"]
        assert cal["frame"] == "base" and cal["position_m"] == list(spec.position_m) and cal["fx"] == k["fx"]
        with urllib.request.urlopen(emu.cameras.url + "/wrist.jpg", timeout=5) as r:
            assert r.headers["Content-Type"] == "image/jpeg" and r.read(2) == b"\xff\xd8"
    finally:
        robot.close()


def _ray_truth(m, d, cam: str, u: float, v: float, width: int, height: int):
    """MuJoCo's own answer for pixel (u, v) of ``cam``'s upright image, from its camera data alone
    (cam_xpos, cam_xmat, cam_fovy; a MuJoCo camera looks along its -z with +y up): the first
    surface along the ray through the pixel's centre (mj_ray, every geom) and the body it is on."""
    import mujoco
    cid = m.camera(cam).id
    f = (height / 2.0) / math.tan(math.radians(float(m.cam_fovy[cid])) / 2.0)
    ray = d.cam_xmat[cid].reshape(3, 3) @ np.array([(u + 0.5 - width / 2) / f, -(v + 0.5 - height / 2) / f, -1.0])
    ray /= np.linalg.norm(ray)
    geom = np.array([-1], dtype=np.int32)
    dist = mujoco.mj_ray(m, d, d.cam_xpos[cid].copy(), ray, None, 1, -1, geom)
    assert dist > 0, (cam, u, v)
    return d.cam_xpos[cid] + dist * ray, m.body(int(m.geom_bodyid[geom[0]])).name


def test_the_backend_reads_the_cells_depth_and_it_unprojects_onto_mujocos_surfaces(fresh):
    """Issue 34 item 1: the cell renders depth from MuJoCo beside each colour stream; the xArm6
    backend reads it (``depth: URL``) with the served calibration (depth: true); the depth at a
    block's projected centre and at the grip point's projection, unprojected, lies within 10 mm of
    the surface MuJoCo's ray finds through that pixel, in both cameras."""
    import mujoco

    from motormind.grounding.camera import eef_pose, sample_depth
    emu, trial = fresh
    confs = emu.camera_configs()
    assert confs["front"]["depth"].endswith("/front.depth.png")
    robot = XArm6Robot(emu.host, load_profile("xarm6"), command_port=emu.port, cameras=confs,
                       calibration=emu.cameras.url + "/")
    try:
        cals = robot.cameras()
        assert sorted(cals) == ["front", "wrist"] and all(c.depth for c in cals.values())
        time.sleep(1.0)                                   # the arm and the blocks at rest, frames current
        obs = robot.observe(images=True, depth=True)
        assert sorted(obs.depth) == ["front", "wrist"]
        m = emu.physics.model
        d = mujoco.MjData(m)
        with emu._lock:                                   # the state now, as the renderer copies it
            st = emu.physics.state()
            d.qpos[:], d.mocap_pos[:], d.mocap_quat[:] = st["qpos"], st["mocap_pos"], st["mocap_quat"]
        mujoco.mj_kinematics(m, d)
        mujoco.mj_camlight(m, d)
        eef = eef_pose(obs)
        world = emu.scene.world()["bodies"]
        checks = [("front", "red_block", world["red_block"]["pos"]), ("front", "blue_block", world["blue_block"]["pos"]),
                  ("front", None, obs.eef_pos_m), ("wrist", None, obs.eef_pos_m)]
        for cam, body, p in checks:
            cal, dep = cals[cam], obs.depth[cam]
            assert dep.shape == (cal.height_px, cal.width_px) and dep.dtype == np.float32
            u, v, _ = cal.project_point(p, eef)
            iu, iv = int(round(u)), int(round(v))
            z = sample_depth(dep, iu, iv, window_px=0)
            assert math.isfinite(z), (cam, body, iu, iv)
            got = cal.unproject(iu, iv, z, eef)
            surface, hit = _ray_truth(m, d, cam, iu, iv, cal.width_px, cal.height_px)
            if body is not None:
                assert hit == body, (cam, body, hit)
            assert np.linalg.norm(got - surface) < 0.010, (cam, body, hit, got, surface)
    finally:
        robot.close()


def test_contact_stops_the_arm_and_unreachable_targets_fault_as_on_the_controller(fresh):
    emu, trial = fresh
    prof = load_profile("xarm6")
    robot = XArm6Robot(emu.host, prof, command_port=emu.port)
    try:
        assert robot.read_safety()["collision_sensitivity"] == 3
        b = emu.scene.world()["bodies"][trial.goal[0][1]]
        x, y, top = b["pos"][0] * 1000, b["pos"][1] * 1000, b["hi"][2] * 1000
        robot.set_gripper(0.0)                                  # closed: the fingertips come down on its top
        robot.move_to(x, y, top + 40, 180, 0, 0)
        with pytest.raises(XArmFault) as e:
            robot.move_to(x, y, top - 20, 180, 0, 0)            # 10 mm into the block with the fingertips
        assert e.value.kind == "collision" and e.value.code == 31
        snap = emu.snapshot()
        assert snap["error"] == 31 and not snap["moving"] and snap["pose_mm_deg"][2] > top + 5
        robot.clear_fault()
        robot.move_to(x, y, top + 40, 180, 0, 0)                # and it moves again after the operator's reset
    finally:
        robot.close()
    arm = sdk(emu)
    try:
        # inside the fence the backend wrote (x 150..650, y +-400 mm) but beyond the arm's reach
        assert arm.set_position(650, 400, 30, 180, 0, 0, speed=100, wait=True) != 0
        assert arm.get_err_warn_code()[1][0] == 21
    finally:
        arm.disconnect()


def test_scene_configs_name_the_field_and_the_limit():
    cfg = load_cell("placement")
    assert set(cfg.blocks) == {"red_block", "blue_block"} and set(cfg.marks) == {"green_mark", "yellow_mark"}
    assert cfg.tcp_offset == (0, 0, 172, 0, 0, 90)
    import yaml
    from motormind.paths import config_dir
    good = yaml.safe_load((config_dir() / "cells" / "placement.yaml").read_text())
    cases = [
        (("blocks", "red_block", "size_m"), [0.04, -0.04, 0.06], "blocks.red_block.size_m[1]: must be > 0"),
        (("blocks", "red_block", "colour"), [1, 0, 0, 1], "blocks.red_block: unknown key(s) ['colour']"),
        (("cameras", "front", "mount"), "ceiling", "cameras.front.mount: must be one of fixed, flange"),
        (("cameras", "front", "quat_xyzw"), [0, 0, 0, 1], "give exactly one of quat_xyzw"),
        (("layout", "area_x_m"), [0.5, 0.3], "layout.area_x_m: lo 0.5 must be <= hi 0.3"),
        (("layout", "area_y_m"), [-0.9, 0.2], "layout.area_y_m: [-0.9, 0.2] must lie on the table"),
        (("arm", "tcp_offset"), [0, 0, 172], "arm.tcp_offset: must be 6 numbers"),
        (("gripper", "force_n"), 0, "gripper.force_n: must be > 0"),
    ]
    for path, value, msg in cases:
        d = json.loads(json.dumps(good))
        node = d
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value
        with pytest.raises(ConfigError, match=re.escape(msg)):
            cell_from_dict(d, "placement.yaml")
    with pytest.raises(ConfigError, match="--scene: 'nosuch' is not a scene .known: placement"):
        load_cell("nosuch")


def test_the_command_line_refuses_what_the_kinematic_emulator_cannot_do():
    def run(*args):
        p = subprocess.run([sys.executable, "-m", "motormind.cli", "emulate", "xarm6", *args],
                           capture_output=True, text=True, timeout=60)
        return p.returncode, p.stderr.strip().splitlines()
    rc, err = run("--scene", "nosuch", "--port", "0")
    assert rc == 2 and len(err) == 1 and "--scene: 'nosuch' is not a scene" in err[0]
    rc, err = run("--seed", "4", "--port", "0")
    assert rc == 2 and err == ["motormind emulate xarm6: error: --seed: only with --scene NAME"]


def test_trials_with_interference_record_the_event_and_no_prompt_holds_it(tmp_path):
    from motormind.evaluate.trials import run_trials
    s = run_trials("placement", n=1, interference="on", seed=4, out=tmp_path, progress=lambda _: None)
    (r,) = s["results"]
    assert r["interference"] == "on" and r["event"] is not None and r["privileged"] and r["brain"] == "oracle"
    ev = r["event"]
    assert ev["when"] == "reach" and ev["object"] == r["trial"]["goal"][0][1] and 0.09 <= ev["shift_m"] <= 0.16
    c = s["conditions"]["on"]
    assert c["n"] == 1 and c["interfered"] == 1 and c["seed_paper"] == 0.92
    assert c["successes"] == int(r["success"]) and len(c["wilson95"]) == 2
    assert s["realtime"]["factor"] > 0.5 and s["realtime"]["physics_capacity"] > 1
    events = [json.loads(x) for x in (tmp_path / "t004_on" / "events.jsonl").read_text().splitlines()]
    kinds = [e["kind"] for e in events]
    assert kinds.count("interference") == 1 and events[kinds.index("interference")]["privileged"] is True
    prompts = [e.get("system", "") + e.get("user", "") for e in events if e["kind"] == "vlm_call"]
    assert len(prompts) >= 3
    # The event's own words and figures (metres, as recorded) reach no role. Its position in
    # millimetres may: the gripper is sent to the moved block, so its measured pose names it.
    leaks = ["interference", "outside hand", "moved_to", "moved_from", "shift_m"]
    leaks += [json.dumps(ev["moved_to_m"]), json.dumps(ev["moved_from_m"])]
    for p in prompts:
        assert not [w for w in leaks if w in p.lower()], p
    if r["success"]:                                   # judged from physics: the block is on its mark
        assert r["placement_error_mm"] < 37.5 and r["outcome"] == "success"
    assert json.loads((tmp_path / "summary.json").read_text())["trials"] == 1


def test_trials_with_videos_film_each_trial_at_the_stated_rate_of_the_emulators_clock(tmp_path):
    """Issue 36: `trials xarm6 --videos HZ` writes each trial's rollout (every camera side by side, a
    frame every 1/HZ s of the emulator's simulated clock: the real-time arm has no control steps),
    linked from the report's episode line and the trial's episode page."""
    import cv2
    out = tmp_path / "trials"
    cmd = [sys.executable, "-m", "motormind.cli", "trials", "xarm6", "-n", "1", "--interference", "off",
           "--seed", "1", "--out", str(out)]
    bad = subprocess.run(cmd + ["--videos", "100"], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "motormind trials: error: argument --videos: 100 Hz: at most 30 Hz (each frame renders every camera) "
        "(see motormind trials --help)"]
    p = subprocess.run(cmd + ["--videos", "5"], capture_output=True, text=True, timeout=400)
    assert p.returncode == 0, p.stderr[-3000:]
    (r,) = json.loads((out / "summary.json").read_text())["results"]
    run_dir = out / "t001_off"
    video = run_dir / r["rollout"]["video"].rsplit("/", 1)[-1]
    assert video.exists() and video.suffix in (".webm", ".mp4")
    cap, frames = cv2.VideoCapture(str(video)), 0
    while cap.read()[0]:
        frames += 1
    # the trial's own span on the emulator's clock (measured by the trial, not by the film): a frame at
    # its start, then one every 0.2 s
    assert abs(frames - (r["sim_s"] * 5 + 1)) <= 2, (frames, r["sim_s"], r["rollout"])
    assert r["rollout"]["frames"] == frames and r["rollout"]["rate"] == "5 Hz of the emulator's clock"
    assert cap.get(cv2.CAP_PROP_FPS) == pytest.approx(5.0, abs=0.01)
    report = (out / "report.html").read_text()
    assert f"<a href='t001_off/{video.name}'>rollout</a>" in report
    assert "<a href='t001_off/episode.html'>episode</a>" in report
    page = (run_dir / "episode.html").read_text()
    assert f"<video src='{video.name}' controls muted loop></video>" in page
    assert f"{frames} frames at 5 Hz of the emulator&#x27;s clock" in page
