"""The Controller node over DDS, on the kinematic fake in real time: a cancel published on
/motormind/cancel mid-batch is honoured at the next action boundary, and /motormind/estop stops
motion mid-command (latched until released and reset)."""
import os
import signal
import subprocess
import sys
import threading
import time
import types

import pytest

pytest.importorskip("rclpy")

from motormind.ros import graph  # noqa: E402
from motormind.ros.base import ObservationCache  # noqa: E402
from motormind.ros.launcher import node_argv  # noqa: E402
from motormind.ros.settings import write_with  # noqa: E402
from motormind.ros.probe import Probe  # noqa: E402
from rostest_util import free_domain  # noqa: E402
from waiting import wait_for  # noqa: E402

DOMAIN = free_domain("ctrl")
# 100 mm moves take 0.5 s each on the fake (200 mm/s): a cancel or an e-stop lands mid-batch
MOVES = [{"op": "move", "direction": d, "distance_mm": 100} for d in ("left", "right") * 3]


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ctrl")
    spec = graph.NodeSpec("controller", "controller")
    cfg = write_with(tmp / "motormind.yaml", {
        "profile": "fake", "robot": {"type": "fake", "realtime": True}, "controller": {
            "publish_task": False, "privileged_service": False, "watchdog_nodes": [""], "state_dir": str(tmp)}})
    env = {**os.environ, **graph.ros_env(DOMAIN)}
    proc = subprocess.Popen(node_argv(spec, cfg), env=env, stdout=open(tmp / "log", "w"),
                            stderr=subprocess.STDOUT, start_new_session=True)
    probe = Probe(domain_id=DOMAIN)
    try:
        probe.wait_for("progress", lambda m: m.get("event") == "idle", timeout=60)
        probe.wait_for_subscribers("commands")
        probe.wait_for_subscribers("cancel")
        probe.wait_for_subscribers("estop")
        yield probe
    finally:
        probe.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        sys.stdout.write((tmp / "log").read_text()[-3000:])


def _centre(pr) -> None:
    """A cancel or an e-stop leaves the arm where it stopped (MOVES sweep along y): move back to
    y = 0, measured by the last report, so that each test starts in the middle of the workspace."""
    done = [r for r in pr.msgs["report"] if r.get("batch_id") and r.get("end_state")]
    y = done[-1]["end_state"]["eef_pos_mm"][1] if done else 0.0
    steps = []
    while abs(y) >= 0.5:
        d = max(-100.0, min(100.0, -y))
        steps.append({"op": "move", "direction": "left" if d > 0 else "right", "distance_mm": abs(round(d, 1))})
        y += d
    if steps:
        bid = f"centre{len(pr.msgs['report'])}"
        pr.send("commands", {"batch_id": bid, "subgoal_id": "s1", "commands": steps})
        rep = pr.wait_for("report", lambda m: m.get("batch_id") == bid, timeout=30)
        assert rep["status"] == "done", rep


def test_cancel_mid_batch_is_honoured_at_the_next_action_boundary(controller):
    pr = controller
    _centre(pr)
    pr.send("commands", {"batch_id": "c1", "subgoal_id": "s1", "commands": MOVES})
    pr.wait_for("progress", lambda m: m.get("event") == "command_end" and m.get("batch_id") == "c1", timeout=20)
    pr.send("cancel", {"batch_id": "c1", "reason": "test: wrong object", "source": "operator"})
    rep = pr.wait_for("report", lambda m: m.get("batch_id") == "c1", timeout=20)
    st = [r["status"] for r in rep["results"]]
    k = st.index("cancelled")
    assert k >= 1 and st[:k] == ["done"] * k and st[k:] == ["cancelled"] * (len(st) - k), st
    assert rep["status"] == "cancelled" and "test: wrong object" in rep["reason"]
    for r in rep["results"][k:]:
        assert "action boundary" in r["reason"] and "test: wrong object" in r["reason"] and r["steps"] == 0
    for r in rep["results"][:k]:       # every command that ran, ran to its end: nothing cut mid-command
        assert r["achieved"]["error_mm"] < 1.0


@pytest.mark.parametrize("wildcard", ["", "*"])
def test_a_cancel_without_a_batch_id_cancels_the_running_and_the_queued_batches(controller, wildcard):
    """docs/ros2.md, "cancel": every batch the Controller holds when the cancel arrives, the running
    one at its next action boundary and the queued ones before their first command; a batch that
    comes later runs."""
    pr = controller
    _centre(pr)
    ids = [f"w{'star' if wildcard else 'empty'}{i}" for i in (1, 2, 3)]
    n0 = len(pr.msgs["report"])
    for bid in ids:
        pr.send("commands", {"batch_id": bid, "subgoal_id": "s1", "commands": MOVES})
    pr.wait_for("progress", lambda m: m.get("event") == "command_start" and m.get("batch_id") == ids[0]
                and set(ids[1:]) <= set(m.get("queued", [])), timeout=20)      # both wait behind the first
    pr.send("cancel", {"batch_id": wildcard, "reason": "test: stop everything", "source": "operator"})
    reps = {bid: pr.wait_for("report", lambda m, b=bid: m.get("batch_id") == b, timeout=30, start=n0) for bid in ids}
    first = [r["status"] for r in reps[ids[0]]["results"]]
    assert reps[ids[0]]["status"] == "cancelled" and first[0] == "done" and first[-1] == "cancelled", first
    for bid in ids[1:]:
        rep = reps[bid]
        assert rep["status"] == "cancelled" and "test: stop everything" in rep["reason"], rep
        assert [r["status"] for r in rep["results"]] == ["cancelled"] * len(MOVES)
        assert all(r["steps"] == 0 and "before command 0" in r["reason"] for r in rep["results"])
    pr.send("commands", {"batch_id": ids[0] + "-after", "subgoal_id": "s1", "commands": MOVES[:1]})
    after = pr.wait_for("report", lambda m: m.get("batch_id") == ids[0] + "-after", timeout=20, start=n0)
    assert after["status"] == "done"


def test_estop_stops_motion_mid_command_and_latches(controller):
    pr = controller
    _centre(pr)
    n0 = len(pr.msgs["report"])
    pr.send("commands", {"batch_id": "e1", "subgoal_id": "s1", "commands": MOVES})
    pr.wait_for("progress", lambda m: m.get("event") == "command_end" and m.get("batch_id") == "e1"
                and m.get("index") == 0, timeout=20)
    pr.estop(True)
    rep = pr.wait_for("report", lambda m: m.get("batch_id") == "e1", timeout=20, start=n0)
    st = [r["status"] for r in rep["results"]]
    assert st[0] == "done" and rep["estop"] is True and set(st[1:]) == {"cancelled"}, st
    stopped = rep["results"][1]
    moved = abs(stopped["achieved"]["translation_mm"][1])
    assert "emergency stop mid-command" in stopped["reason"] and 0 < moved < 99.0, stopped
    # latched: a new batch is refused, and reset is refused while the e-stop is held
    pr.send("commands", {"batch_id": "e2", "subgoal_id": "s1", "commands": MOVES[:1]})
    rep2 = pr.wait_for("report", lambda m: m.get("batch_id") == "e2", timeout=20)
    assert rep2["status"] == "rejected" and "emergency stop latched" in rep2["reason"]
    ok, why = pr.call("reset")
    assert not ok and "estop" in why
    pr.estop(False)
    for _ in range(50):                 # the release reaches the Controller
        ok, why = pr.call("reset")
        if ok:
            break
    assert ok, why
    pr.send("commands", {"batch_id": "e3", "subgoal_id": "s1", "commands": MOVES[:1]})
    rep3 = pr.wait_for("report", lambda m: m.get("batch_id") == "e3", timeout=20)
    assert rep3["status"] == "done"


def test_a_hostile_message_on_a_json_topic_is_dropped_and_the_node_goes_on(controller):
    """ros/base.py ``listen``: the strict decoder (a 3000-deep message would raise RecursionError
    in json.loads inside the subscription callback; duplicate keys would be last-wins)."""
    from std_msgs.msg import String
    pr = controller
    _centre(pr)
    n0 = len(pr.msgs["report"])
    dup = '{"batch_id": "h1", "subgoal_id": "s1", "commands": [{"op": "move", "direction": "left", ' \
          '"distance_mm": 500, "distance_mm": 10}]}'
    for text in ("[" * 3000 + "]" * 3000, dup, '{"batch_id": "h2", "commands": [], "x": NaN}'):
        pr._pub("commands").publish(String(data=text))
    pr.send("commands", {"batch_id": "h3", "subgoal_id": "s1", "commands": MOVES[:1]})
    rep = pr.wait_for("report", lambda m: m.get("batch_id") == "h3", timeout=20, start=n0)
    assert rep["status"] == "done"
    assert [m.get("batch_id") for m in pr.msgs["report"][n0:]] == ["h3"]      # the hostile ones: nothing ran


def test_listen_decodes_strictly_and_logs_what_it_drops():
    from std_msgs.msg import String

    from motormind.ros.base import MotorMindNode
    node = types.SimpleNamespace(_subs=[], logs=[], full=lambda n: f"/motormind/{n}")
    node.log = node.logs.append
    node.create_subscription = lambda typ, topic, cb, q: cb
    got = []
    MotorMindNode.listen(node, "commands", got.append)
    for text in ("[" * 3000 + "]" * 3000, '{"a": 1, "a": 2}', '{"x": 1e999}', '{"a": 1} {"b": 2}', "not json"):
        node._subs[0](String(data=text))
    node._subs[0](String(data='{"batch_id": "b1"}'))
    node._subs[0](String(data='[1, 2]'))                                      # JSON, but not an object
    assert got == [{"batch_id": "b1"}]
    assert len(node.logs) == 5 and all(m.startswith("dropped a message on commands: ") for m in node.logs)
    assert "nested deeper than 32 levels" in node.logs[0] and "duplicate key 'a'" in node.logs[1]
    assert max(len(m) for m in node.logs) < 400


def test_idle_events_name_the_cameras_the_controller_publishes(controller):
    idle = controller.wait_for("progress", lambda m: m.get("event") == "idle", timeout=20)
    assert idle["cameras"] == ["front"] and idle["state"]["eef_pos_mm"]      # the fake renders one camera


def test_the_state_topics_carry_the_measured_values_not_the_prompts_rounding(controller):
    """Issue 31 item 10: eef_pose and state were built from the state rounded for prompts (0.1 mm,
    0.1 degree): a consumer got 34.1 mm for 34.142. The fake ends a move exactly on its target when
    its last step is longer than its tolerance (33.333 mm: 1.333 mm past 16 steps of 2 mm), and a
    gripper exactly at 0.33333 of its stroke: detail below 0.1 mm the topics must carry."""
    from geometry_msgs.msg import PoseStamped
    from sensor_msgs.msg import JointState

    from motormind.profile import load_profile
    from motormind.ros.base import qos
    pr = controller
    _centre(pr)
    got = {"eef_pose": [], "state": []}
    subs = [pr.node.create_subscription(typ, f"{graph.NAMESPACE}/{name}", got[name].append, qos(graph.TOPICS[name]))
            for name, typ in (("eef_pose", PoseStamped), ("state", JointState))]

    def measured():
        """y (m) and the finger gap (m) from the first messages of both topics stamped from now on."""
        t0 = time.time_ns()

        def fresh(name):
            return [m for m in list(got[name]) if m.header.stamp.sec * 10**9 + m.header.stamp.nanosec >= t0]
        wait_for(lambda: fresh("eef_pose") and fresh("state"), timeout=20, what="fresh state messages")
        js = fresh("state")[0]
        return fresh("eef_pose")[0].pose.position.y, dict(zip(js.name, js.position))["gripper"]
    try:
        y0, _ = measured()
        n0 = len(pr.msgs["report"])
        pr.send("commands", {"batch_id": "measured1", "subgoal_id": "s1", "commands": [
            {"op": "move", "direction": "left", "distance_mm": 33.333}, {"op": "gripper", "width": 0.33333}]})
        rep = pr.wait_for("report", lambda m: m.get("batch_id") == "measured1", timeout=30, start=n0)
        assert rep["status"] == "done", rep
        y1, gap = measured()
        # rounded for prompts they were 33.3 (or 33.4) mm apart, and the gap 26.7 mm
        assert abs(y1 - y0) * 1000 == pytest.approx(33.333, abs=1e-6)
        assert gap * 1000 == pytest.approx(0.33333 * load_profile("fake").gripper_max_width_mm, abs=1e-6)
    finally:
        for sub in subs:
            pr.node.destroy_subscription(sub)
        pr.send("commands", {"batch_id": "measured2", "subgoal_id": "s1", "commands": [
            {"op": "gripper", "action": "open"}]})
        pr.wait_for("report", lambda m: m.get("batch_id") == "measured2", timeout=30)


class _StubNode:
    """What ObservationCache needs of a node, without DDS."""

    def __init__(self, image_wait_s: float):
        self.subs, self.image_wait_s = {}, image_wait_s

    def listen(self, name, fn, raw=False):
        self.subs[name] = fn

    def create_timer(self, period, fn):
        return None


@pytest.mark.parametrize("cameras, waits", [([], False), (["front"], True), (None, True)])
def test_roles_wait_for_fresh_frames_only_from_a_controller_with_cameras(cameras, waits):
    """An arm without cameras (no camera:=) says so in its idle events: a role does not wait
    image_wait_s for frames that never come. With cameras, or from a Controller that does not say
    (None), a role waits for frames newer than the last batch."""
    node = _StubNode(image_wait_s=0.5 if waits else 60.0)     # not waiting: returns long before 60 s
    cache = ObservationCache(node, images=True, image_wait_s=node.image_wait_s)
    ev = {"event": "idle", "state": {"eef_pos_mm": [300.0, 0.0, 300.0]}}
    if cameras is not None:
        ev["cameras"] = cameras
    node.subs["progress"](ev)
    t = time.monotonic()
    state, images = cache.look("b1")
    dt = time.monotonic() - t
    assert state == ev["state"] and images == {}
    assert dt >= 0.45 if waits else dt < 30.0, dt


class _SilentChannelNode:
    """What RemoteCall needs of a node: a privileged channel that is there but never answers."""

    def __init__(self):
        self.sent = []

    def listen(self, name, fn, raw=False):
        pass

    def publisher(self, name):
        return types.SimpleNamespace(get_subscription_count=lambda: 1)

    def send(self, name, obj):
        self.sent.append(obj)

    def get_name(self):
        return "monitor"


def test_a_stopping_node_abandons_its_privileged_calls():
    """A role's brain call waiting on the privileged channel (a Monitor's check) does not hold the
    node's shutdown for rpc_timeout_s: close() ends it at once."""
    from motormind.ros.base import RemoteCall
    node = _SilentChannelNode()
    rpc = RemoteCall(node)
    out = {}

    def call():
        try:
            rpc.call("respond", 600.0, role="monitor")
        except RuntimeError as e:
            out["error"] = str(e)
    t = threading.Thread(target=call, daemon=True)
    t.start()
    wait_for(lambda: node.sent, timeout=30, what="the request")
    rpc.close()
    t.join(timeout=30)
    assert not t.is_alive() and out["error"] == "privileged respond call abandoned: the node is stopping"
