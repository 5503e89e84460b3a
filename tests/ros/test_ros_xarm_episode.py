"""A whole MotorMind episode on the xArm6 through the ROS 2 nodes (`motormind launch xarm6`): the
Controller and the five roles as separate processes over DDS, the Controller driving the wire-level
controller emulator through the unmodified xarm-python-sdk.

The oracle cannot see the emulator's world, so the roles get their answers the way they would on the
arm: `brain:=openai` (the real openai client in every role node) pointed at an OpenAI-compatible
endpoint, here `motormind serve-brain --backend replay` on 127.0.0.1 replaying an episode record.
The record holds the answers of the scripted rehearsal of tests/robots/test_xarm_episode.py (pick a 30 mm
block under the tool, lift, carry 80 mm left, put down, release), written in the record format the
replay server reads. What the arm did is read from the emulator, not from the stack."""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

pytest.importorskip("xarm")
pytest.importorskip("rclpy")
pytest.importorskip("openai")

from motormind.brains.scripted import DEFAULTS  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.ros.probe import WATCH, Probe  # noqa: E402
from motormind.sim.xarm_emulator import XArmEmulator, free_loopback_host  # noqa: E402
from rostest_util import free_domain, kill_nodes  # noqa: E402

pytestmark = pytest.mark.xarm

DOMAIN = free_domain("xarm-ros")
NODES = ("controller", "planner", "executor", "verifier", "monitor", "memory")

PLAN = {"schema_version": 1, "subgoals": [
    {"id": "pick", "description": "grasp the block under the tool", "success_criterion": "block held"},
    {"id": "place", "description": "put the block 80 mm to the left", "success_criterion": "block released there"}]}
PICK = {"schema_version": 1, "commands": [
    {"op": "gripper", "action": "open"}, {"op": "move", "direction": "down", "distance_mm": 40},
    {"op": "gripper", "action": "close"}, {"op": "done"}]}
PLACE = {"schema_version": 1, "commands": [
    {"op": "move", "direction": "up", "distance_mm": 40}, {"op": "move", "direction": "left", "distance_mm": 80},
    {"op": "move", "direction": "down", "distance_mm": 40}, {"op": "gripper", "action": "open"}, {"op": "done"}]}
ANSWERS = {
    "planner": [PLAN],
    "executor": [PICK, PLACE],
    "verifier": [{"schema_version": 1, "achieved": True, "evidence": "the fingers stopped on the block"},
                 {"schema_version": 1, "achieved": True, "evidence": "the block is 80 mm left, released"}],
    "monitor": [DEFAULTS["monitor"]],        # replay repeats a role's last answer when its list runs out
    "memory": [DEFAULTS["memory"]],
}


def write_record(path) -> None:
    """An episode record (events.jsonl) with one recorded ``vlm_call`` per answer, in order."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        for role, answers in ANSWERS.items():
            for a in answers:
                fh.write(json.dumps({"kind": "vlm_call", "role": role, "attempt": 0, "ok": True,
                                     "brain": "scripted", "privileged": False, "response": json.dumps(a)}) + "\n")


def _stop(p: subprocess.Popen, timeout: float = 30) -> None:
    if p.poll() is None:
        p.send_signal(signal.SIGINT)        # the launcher stops its nodes on SIGINT
        try:
            p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def test_replayed_pick_and_place_over_ros2_nodes_on_the_emulator(tmp_path, monkeypatch):
    record = tmp_path / "rehearsal" / "events.jsonl"
    write_record(record)
    # the gripper's TCP already stored, as the backend writes it on connect: the pose measured before
    # the launch is the TCP's, as every pose after it
    emu = XArmEmulator(free_loopback_host(), 0, report_hz=20,
                       tcp_offset=load_profile("xarm6").safety.tcp_offset).start()
    server = launch = probe = None
    lines: list = []
    try:
        emu.set_gripper_object(30.0)
        start = np.array(emu.snapshot()["pose_mm_deg"][:3])
        server_log, server_err = tmp_path / "serve-brain.jsonl", tmp_path / "serve-brain.err"
        with open(server_err, "w") as err:
            server = subprocess.Popen([sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "replay",
                                       "--record", str(record), "--host", "127.0.0.1", "--port", "0", "--quiet",
                                       "--log", str(server_log)], stdout=subprocess.PIPE, stderr=err, text=True)
        url = server.stdout.readline().strip()           # it prints its URL once it listens
        assert url.startswith("http://127.0.0.1:"), server_err.read_text()
        vlm = tmp_path / "replay.yaml"
        vlm.write_text(f"name: rehearsal\nbase_url: {url}\nmodel: motormind-replay\napi_key: local\n"
                       "api_key_env: null\ntimeout_s: 10.0\nretries: 2\nbackoff_s: 0.05\n"
                       "structured_output: json_schema\n")

        monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")   # as the launched nodes
        probe = Probe(domain_id=DOMAIN, watch=WATCH + ("events",))
        env = {**os.environ, "ROS_HOME": str(tmp_path / "ros")}
        t0 = time.monotonic()
        launch = subprocess.Popen(
            [sys.executable, "-m", "motormind.cli", "launch", "xarm6", f"robot_ip:={emu.host}",
             f"command_port:={emu.port}", "brain:=openai", f"vlm:={vlm}", "instruction:=move the block 80 mm left",
             "exit_on_end:=true", "--domain-id", str(DOMAIN)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        reader = threading.Thread(target=lambda: lines.extend(launch.stdout), daemon=True)
        reader.start()
        try:
            launch.wait(timeout=180)
        finally:
            _stop(launch)
            reader.join(timeout=10)
            if launch.returncode is None or launch.returncode < 0:
                kill_nodes("".join(lines))
        wall = time.monotonic() - t0
        out = "".join(lines)

        # the launch: every node up, the episode ended in success, no node died
        assert launch.returncode == 0, out[-6000:]
        for node in NODES:
            assert f"[launch] started {node} (pid" in out, node
        assert "[executor] EPISODE SUCCESS: success - every subgoal verified (no privileged success check)" in out
        assert "NODE DIED" not in out and "all nodes stopped" in out

        # what the arm did, measured by the emulator: down 40, up 40, 80 mm left, down 40
        snap = emu.snapshot()
        end = np.array(snap["pose_mm_deg"][:3])
        assert end - start == pytest.approx([0, 80, -40], abs=1.5), (start, end)
        assert snap["error"] == 0 and not snap["moving"]
        assert snap["gripper_pulses"] / 10.0 > 80             # released: the fingers opened past the block

        # what went over DDS: the end result, the reports, the verdicts
        ep = probe.wait_for("episode", lambda m: m.get("event") == "end", timeout=10)["result"]
        assert ep["success"] and ep["outcome"] == "success" and ep["batches"] == 2 and ep["replans"] == 0, ep
        assert ep["brain"] == "openai:motormind-replay" and not ep["privileged"]
        reports = [m for m in probe.msgs["report"] if m.get("batch_id")]
        assert [(r["batch_id"], r["subgoal_id"], r["status"]) for r in reports] == \
            [("b1", "pick", "done"), ("b2", "place", "done")], reports
        pick, place = reports
        assert [c["status"] for c in pick["results"]] == ["done"] * 4
        grip = pick["results"][2]
        assert grip["achieved"]["gripper_width_mm"] == pytest.approx(30, abs=2), grip
        assert "stalled: holding at" in grip["reason"], grip                   # the fingers stopped on the block
        assert pick["end_state"]["gripper_width_mm"] == pytest.approx(30, abs=2)
        assert place["end_state"]["eef_pos_mm"] == pytest.approx(list(end), abs=1.0)
        idle = [m for m in probe.msgs["progress"] if m.get("event") == "idle"]
        assert idle and all(m["cameras"] == [] for m in idle)   # no camera:=, so the roles wait for no frames
        verdicts = list(probe.msgs["verdict"])
        assert [(v["batch_id"], v["subgoal_id"], v["achieved"]) for v in verdicts] == \
            [("b1", "pick", True), ("b2", "place", True)], verdicts

        # every role answer came through the openai client from the replay server, over HTTP
        # (the planner answers within moments of its start, possibly before this probe has matched its
        # `events` publisher, which is volatile; the server's own log below counts every role's calls)
        calls = [e for e in probe.msgs["events"] if e.get("kind") == "vlm_call"]
        assert {c["role"] for c in calls} >= {"executor", "verifier"}
        assert all(c["brain"] == "openai:motormind-replay" and c["ok"] and not c["privileged"] for c in calls), \
            [c for c in calls if not c["ok"]]
        served = [json.loads(line) for line in server_log.read_text().splitlines()]
        assert all(s["status"] == 200 for s in served), served
        by_role = {r: sum(1 for s in served if s["role"] == r) for r in ("planner", "executor", "verifier")}
        assert by_role == {"planner": 1, "executor": 2, "verifier": 2}, by_role
        print(f"episode over ROS 2 on the emulator: launch {wall:.1f} s, episode {ep['wall_s']:.1f} s, "
              f"motion {ep['motion_s']:.1f} s, {len(served)} HTTP requests")
    finally:
        if probe is not None:
            probe.close()
        if launch is not None and launch.poll() is None:
            _stop(launch)
            kill_nodes("".join(lines))
        if server is not None:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
        emu.stop()
