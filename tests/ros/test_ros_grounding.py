"""Grounding over ROS 2 (docs/grounding.md, "Over ROS 2"): the Controller publishes its cameras'
calibrations, depth images and scene facts; a role node marks its frames with the runner's Marker,
states the runner's PromptFacts and resolves points through the same Grounding.

Fast tests drive ObservationCache and RoleNode.look with hand-made messages (no DDS); one test runs
`motormind launch fake` with a scripted brain whose Executor points at a pixel of the fake's
synthetic top camera (a flat table at z = 0 under it)."""
import json
import threading
import types

import numpy as np
import pytest

pytest.importorskip("rclpy")

from motormind.components import Context  # noqa: E402
from motormind.grounding.camera import eef_pose  # noqa: E402
from motormind.grounding.marks import Marker, MarkOptions  # noqa: E402
from motormind.grounding.points import Grounding  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.roles.facts import PromptFacts  # noqa: E402
from motormind.ros import graph  # noqa: E402
from motormind.ros.base import ObservationCache, depth_from_msg, observation_of  # noqa: E402
from motormind.ros.role_nodes import RoleNode  # noqa: E402
from robots.fake import FakeRobot  # noqa: E402


class _StubNode:
    """What ObservationCache needs of a node, without DDS."""

    def __init__(self):
        self.subs, self.logs = {}, []

    def listen(self, name, fn, raw=False):
        self.subs[name] = fn

    def create_timer(self, period, fn):
        return None

    def log(self, text):
        self.logs.append(text)


def _image_msg(img, stamp, encoding="rgb8", data=None):
    h, w = img.shape[:2]
    return types.SimpleNamespace(height=h, width=w, encoding=encoding, is_bigendian=0,
                                 step=w * (3 if encoding == "rgb8" else 4),
                                 data=data if data is not None else np.ascontiguousarray(img).tobytes(),
                                 header=types.SimpleNamespace(stamp=types.SimpleNamespace(sec=stamp, nanosec=0)))


def _fed_cache(robot, depth=True):
    """An ObservationCache fed what the Controller node publishes for ``robot`` (one look)."""
    node = _StubNode()
    cache = ObservationCache(node, images=True, image_wait_s=0.2)
    node.subs["cameras"]({"cameras": {n: c.to_json() for n, c in robot.cameras().items()},
                          "closing_axis_eef": [0.0, 1.0, 0.0]})
    node.subs["scene_facts"](robot.scene_facts())
    obs = robot.observe(images=True, depth=True)
    node.subs["progress"]({"event": "idle", "state": obs.state_dict(), "cameras": ["front"]})
    cache._on_image("front", _image_msg(obs.images["front"], 7))
    if depth:
        cache._on_depth("front", _image_msg(obs.depth["front"].astype("<f4"), 7, "32FC1"))
    return cache, obs


def test_depth_messages_and_camera_topics():
    d = np.array([[0.5, np.nan], [1.25, 2.0]], dtype="<f4")
    out = depth_from_msg(_image_msg(d, 1, "32FC1"))
    assert out.dtype == np.float32 and np.isnan(out[0, 1]) and out[1, 0] == pytest.approx(1.25)
    big = d.astype(">f4")
    msg = _image_msg(big, 1, "32FC1", big.tobytes())
    msg.is_bigendian = 1
    assert depth_from_msg(msg)[1, 1] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="32FC1"):
        depth_from_msg(_image_msg(d, 1, "16UC1"))
    assert graph.camera_topic("camera/front/depth") == ("front", "depth")
    assert graph.topic_spec("camera/front/camera_info").latched
    assert graph.topic_spec("cameras").latched and graph.topic_spec("scene_facts").latched
    assert graph.camera_topic("camera/front/other") is None


def test_the_cache_keeps_calibrations_scene_facts_and_the_depth_of_each_look():
    robot = FakeRobot(image_size=32)
    cache, obs = _fed_cache(robot)
    view = cache.robot(robot.profile)
    got, cal = view.cameras()["front"], robot.cameras()["front"]
    assert np.allclose(got.K, cal.K, atol=1e-5) and np.allclose(got.rot, cal.rot, atol=1e-7)
    assert np.allclose(got.position_m, cal.position_m) and got.mount == cal.mount and got.depth
    assert view.scene_facts() == robot.scene_facts() and view.camera_names == ["front"]
    state, images, depth = cache.observe("b1", after=0.0)
    assert np.array_equal(images["front"], obs.images["front"])
    assert np.array_equal(depth["front"], obs.depth["front"])
    # a depth image of another moment is not this look's
    cache._on_image("front", _image_msg(obs.images["front"], 9))
    assert cache.observe("b2", after=0.0)[2] == {}


def _node_self(robot, cache, brain=None):
    """A RoleNode's parts RoleNode.look reads, built as RoleNode builds them."""
    rec = []
    view = cache.robot(robot.profile)
    ns = types.SimpleNamespace(cache=cache, robot=view, marker=Marker(view, MarkOptions()),
                               record=lambda kind, **d: rec.append((kind, d)), events=rec)
    ns.prompt_ctx = Context(robot.profile, "task", None, view.camera_names,
                            Grounding(robot.profile.directions, max_looks=2))
    ns.prompt_ctx.facts = PromptFacts.of_robot(view, None, MarkOptions())
    return ns


def test_a_role_nodes_look_marks_the_frames_states_the_grip_pixel_and_resolves_points():
    robot = FakeRobot(image_size=64)
    cache, obs = _fed_cache(robot)
    me = _node_self(robot, cache)
    state, images = RoleNode.look(me, "b1 s1", after=0.0)
    in_process, infos = Marker(robot, MarkOptions())(obs)
    assert not np.array_equal(images["front"], obs.images["front"])       # marked
    assert np.array_equal(images["front"], in_process["front"])           # as the runner marks them
    u, v, _ = robot.cameras()["front"].project_point(obs.eef_pos_m)
    facts = me.prompt_ctx.facts.values()
    assert f"the grip point at pixel ({round(u)}, {round(v)})" in facts["look"]
    assert "z = 0 mm" in facts["setup"] and "Field of view 60 x 60 deg (64 x 64 px)" in facts["setup"]
    assert [k for k, _ in me.events] == ["marks"] and me.events[0][1]["cameras"]["front"]["grip_px"]
    ms, _ = me.prompt_ctx.grounding.take("executor", {"points": [{"camera": "front", "pixel": [10, 50],
                                                                 "label": "spot"}]})
    want = robot.cameras()["front"].unproject(10, 50, robot.CAMERA_HEIGHT_M, eef_pose(obs))
    assert ms[0].ok and np.allclose(ms[0].pos_m, want, atol=1e-6) and abs(ms[0].pos_m[2]) < 1e-6


def test_a_camera_without_depth_is_refused_with_its_reason():
    robot = FakeRobot(image_size=32, depth=False)
    cache, _ = _fed_cache(robot, depth=False)
    me = _node_self(robot, cache)
    RoleNode.look(me, "b1 s1", after=0.0)
    ms, _ = me.prompt_ctx.grounding.take("executor", {"points": [{"camera": "front", "pixel": [3, 4],
                                                                 "label": "cup"}]})
    assert not ms[0].ok and "built without depth" in ms[0].reason


# -- over DDS ---------------------------------------------------------------------------------------
PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "look", "success_criterion": "looked"}]}
PIXEL = [40, 20]          # of the fake's 64 x 64 top view


def test_over_ros_a_role_node_marks_states_and_measures(tmp_path):
    from motormind.ros.launcher import Launcher
    from motormind.ros.probe import Probe
    from rostest_util import Log, fake_stack_config, free_domain
    domain = free_domain("ground")
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"planner": [PLAN], "executor": [
        {"points": [{"camera": "front", "pixel": PIXEL, "label": "table spot"}]},
        {"commands": [{"op": "move", "direction": "left", "distance_mm": 10}, {"op": "done"}]}]}))
    log = Log()
    launcher = Launcher("fake", {"brain_script": str(script), "config": fake_stack_config(tmp_path)},
                        env=graph.ros_env(domain), out=log, grace_s=5)
    probe = Probe(domain_id=domain, watch=("events", "cameras"))
    t = threading.Thread(target=launcher.run, daemon=True)
    t.start()
    try:
        # the task goes out once this probe hears every node's events (volatile: the episode takes a second)
        probe.wait_for_publishers("events", n=6, timeout=120)
        probe.wait_for_subscribers("task", n=5, timeout=30)
        probe.send("task", {"instruction": "look at the table", "source": "test"})
        calls = probe.wait_for("events", lambda m: m.get("kind") == "vlm_call" and m.get("role") == "executor"
                               and "table spot" in m.get("user", ""), timeout=60)
        first = next(m for m in probe.msgs["events"] if m.get("kind") == "vlm_call" and m.get("role") == "executor")
        points = next(m for m in probe.msgs["events"] if m.get("kind") == "points")
        marks = next(m for m in probe.msgs["events"] if m.get("kind") == "marks" and m.get("node") == "executor")
        cams = probe.msgs["cameras"][-1]["cameras"]
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=30)
        print(log.text()[-4000:])
    # the calibration that crossed is the fake's; the prompt states its numbers and the grip pixel
    fake = FakeRobot(image_size=64)
    cal = fake.cameras()["front"]
    assert cams["front"]["fx"] == pytest.approx(cal.fx_px) and cams["front"]["depth"] is True
    start = np.asarray(fake.pos)
    u, v, _ = cal.project_point(start)
    assert f"front (64 x 64 px): the grip point at pixel ({round(u)}, {round(v)})" in first["user"]
    assert "Table surface (what the objects stand on): z = 0 mm" in first["user"]
    assert "Marks drawn on the images" in first["user"] and "Field of view 60 x 60 deg (64 x 64 px)" in first["user"]
    assert marks["cameras"]["front"]["grip_px"] == pytest.approx([u, v], abs=0.1) and marks["depth"] == ["front"]
    # the point resolves to the table under it (the fake's synthetic depth: z = 0), as the calibration says
    p = points["points"][0]
    want = cal.unproject(PIXEL[0], PIXEL[1], fake.CAMERA_HEIGHT_M) * 1000.0
    assert p["ok"], p
    assert np.allclose(p["pos_mm"], want, atol=2.0) and abs(p["pos_mm"][2]) < 2.0
    # and comes back as a fact in the Executor's next prompt
    assert f'"table spot" (front 40, 20; at ' in calls["user"] and f"x {want[0]:.0f} y {want[1]:.0f} z" in calls["user"]
