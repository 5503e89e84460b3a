"""One LIBERO-PRO episode with the oracle brain, the nodes as separate processes over DDS
(`motormind launch sim`), recorded to MCAP with ROS 2 message schemas."""
import json
import os
import signal
import subprocess
import sys
import threading

import pytest

pytest.importorskip("rclpy")
pytest.importorskip("mcap_ros2")

from motormind.mcap_record import read_messages  # noqa: E402
from rostest_util import free_domain, kill_nodes  # noqa: E402

pytestmark = pytest.mark.sim


def test_oracle_episode_over_dds_succeeds_and_is_recorded(tmp_path):
    domain = free_domain("ep")
    mcap = tmp_path / "episode.mcap"
    env = {**os.environ, "ROS_HOME": str(tmp_path / "ros"), "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")}
    p = subprocess.Popen([sys.executable, "-m", "motormind.cli", "launch", "sim", "suite:=libero_spatial", "task:=0",
                          "brain:=oracle", f"record:={mcap}", "--domain-id", str(domain)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()
    try:
        p.wait(timeout=420)
    finally:
        if p.poll() is None:            # the launcher stops its nodes on SIGINT
            p.send_signal(signal.SIGINT)
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                reader.join(timeout=10)
                kill_nodes("".join(lines))
        reader.join(timeout=10)
    out = "".join(lines)
    assert p.returncode == 0, out[-5000:]
    assert "[executor] EPISODE SUCCESS: success - the task's success check holds [oracle: privileged" in out
    assert "NODE DIED" not in out and "all nodes stopped" in out
    for node in ("controller", "planner", "executor", "verifier", "monitor", "memory", "recorder"):
        assert f"[launch] started {node} (pid" in out

    msgs = list(read_messages(mcap))
    types = {t: ty for t, ty, _, _ in msgs}
    assert types["/motormind/report"] == "std_msgs/msg/String"
    assert types["/motormind/state"] == "sensor_msgs/msg/JointState"
    assert types["/motormind/eef_pose"] == "geometry_msgs/msg/PoseStamped"
    assert types["/motormind/camera/agentview/image"] == "sensor_msgs/msg/Image"
    data = {}
    for topic, ty, m, _ in msgs:
        if ty == "std_msgs/msg/String":
            data.setdefault(topic, []).append(json.loads(m.data))
    for topic in ("task", "plan", "commands", "report", "verdict", "episode", "events"):
        assert data[f"/motormind/{topic}"], topic
        assert all(d["schema_version"] == 1 for d in data[f"/motormind/{topic}"]), topic
    end = [d for d in data["/motormind/episode"] if d["event"] == "end"][0]["result"]
    assert end["success"] and end["brain"] == "oracle" and end["privileged"] and end["batches"] >= 2
    calls = [e for e in data["/motormind/events"] if e["kind"] == "vlm_call"]
    assert {c["role"] for c in calls} >= {"planner", "executor", "verifier"}
    assert all(c["brain"] == "oracle" and c["privileged"] for c in calls)
    img = next(m for t, _, m, _ in msgs if t == "/motormind/camera/agentview/image")
    assert img.encoding == "rgb8" and len(img.data) == img.height * img.step > 0
