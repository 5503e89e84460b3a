"""The Controller node over DDS, on the kinematic fake in real time: a cancel published on
/motormind/cancel mid-batch is honoured at the next action boundary, and /motormind/estop stops
motion mid-command (latched until released and reset)."""
import os
import random
import signal
import subprocess
import sys

import pytest

pytest.importorskip("rclpy")

from motormind.ros import graph  # noqa: E402
from motormind.ros.launcher import node_argv, overrides_yaml  # noqa: E402
from motormind.ros.probe import Probe  # noqa: E402

DOMAIN = random.Random(f"ctrl{os.getpid()}").randint(30, 99)
# 100 mm moves take 0.5 s each on the fake (200 mm/s): a cancel or an e-stop lands mid-batch
MOVES = [{"op": "move", "direction": d, "distance_mm": 100} for d in ("left", "right") * 3]


@pytest.fixture(scope="module")
def controller(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ctrl")
    spec = graph.NodeSpec("controller", "controller", {
        "backend": "fake", "profile": "fake", "fake_realtime": True, "publish_task": False,
        "privileged_service": False, "watchdog_nodes": [""], "state_dir": str(tmp)})
    ov = tmp / "controller.yaml"
    ov.write_text(overrides_yaml(spec))
    env = {**os.environ, **graph.ros_env(DOMAIN)}
    proc = subprocess.Popen(node_argv(spec, graph.params_file(), ov), env=env, stdout=open(tmp / "log", "w"),
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


def test_cancel_mid_batch_is_honoured_at_the_next_action_boundary(controller):
    pr = controller
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


def test_estop_stops_motion_mid_command_and_latches(controller):
    pr = controller
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
