"""Crashes around `motormind launch fake` over DDS: the recorder killed by SIGKILL mid-episode keeps
what it had written (the MCAP file is written as it goes, and the episode waited for the recorder),
and `kill -9` of the launcher stops every node in order, with no Controller restart marker left
behind (every node follows its launcher, motormind/ros/lifeline.py)."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import yaml

pytest.importorskip("rclpy")
pytest.importorskip("mcap_ros2")

from motormind.mcap_record import is_complete, read_messages, recover  # noqa: E402
from motormind.ros import graph, package  # noqa: E402
from motormind.ros.launcher import Launcher  # noqa: E402
from motormind.ros.probe import Probe  # noqa: E402
from rostest_util import Log, free_domain, kill_nodes  # noqa: E402
from waiting import wait_for  # noqa: E402

PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "sweep", "success_criterion": "swept"}]}
# 100 mm moves take 0.5 s each on the real-time fake: eight of them keep the episode going for 4 s
SWEEP = {"commands": [{"op": "move", "direction": d, "distance_mm": 100} for d in ("left", "right") * 4]}


def _script(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"planner": [PLAN], "executor": [SWEEP]}))
    return script


def _strings(path, topic):
    return [json.loads(m.data) for t, _, m, _ in read_messages(path) if t == f"/motormind/{topic}"]


def test_a_recorder_killed_mid_episode_keeps_what_it_had_recorded(tmp_path):
    mcap = tmp_path / "episode.mcap"
    domain = free_domain("rec")
    log = Log()
    launcher = Launcher("fake", {"brain_script": str(_script(tmp_path)), "instruction": "sweep left and right",
                                 "record": str(mcap)},
                        env={**graph.ros_env(domain), "ROS_HOME": str(tmp_path / "ros")}, out=log, grace_s=5)
    t = threading.Thread(target=launcher.run, daemon=True)
    probe = Probe(domain_id=domain)
    t.start()
    try:
        probe.wait_for("progress", lambda m: m.get("event") == "command_start" and m.get("batch_id") == "b1",
                       timeout=90)
        # on disk while the episode runs, with no close: the plan, the batch and its first command's start
        wait_for(lambda: mcap.exists() and any(c.get("batch_id") == "b1" for c in _strings(mcap, "commands"))
                 and any(e.get("event") == "command_start" and e.get("batch_id") == "b1"
                         for e in _strings(mcap, "progress")), timeout=30, what="the episode so far in the file")
        on_disk = len(list(read_messages(mcap)))
        pid = launcher.pids()["recorder"]
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: "NODE DIED: recorder (killed by SIGKILL)" in log.text(), timeout=30, what="the recorder's death")
        rep = probe.wait_for("report", lambda m: m.get("batch_id") == "b1", timeout=30)    # the episode goes on
        assert rep["status"] in ("done", "cancelled"), rep
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=30)
        print(log.text()[-4000:])
    assert not t.is_alive() and not launcher.pids()

    assert not is_complete(mcap)                       # no summary, no footer: it was killed
    msgs = list(read_messages(mcap))
    assert len(msgs) >= on_disk                        # nothing that was on disk is lost
    assert _strings(mcap, "plan")[0]["subgoals"][0]["id"] == "s1"
    # from the start (the episode waited for the recorder) to the kill: b1, as the probe saw it
    recorded = _strings(mcap, "commands")
    assert recorded and recorded[0]["batch_id"] == "b1", [c["batch_id"] for c in recorded]
    sent = {c["batch_id"]: c for c in probe.msgs["commands"]}
    assert all(c == sent[c["batch_id"]] for c in recorded if c["batch_id"] in sent)
    assert recorded[0]["commands"] == SWEEP["commands"]
    assert any(e.get("kind") == "vlm_call" for e in _strings(mcap, "events"))
    assert {t for t, _, _, _ in msgs} >= {"/motormind/plan", "/motormind/commands", "/motormind/progress",
                                          "/motormind/state", "/motormind/eef_pose", "/motormind/events"}
    r = recover(mcap, tmp_path / "recovered.mcap")
    assert r["messages"] == len(msgs) and not r["complete"]
    from mcap.reader import make_reader               # the standard indexed reader opens the recovered copy
    with open(tmp_path / "recovered.mcap", "rb") as fh:
        assert make_reader(fh).get_summary().statistics.message_count == len(msgs)


# The launcher runs under a harness that adopts orphans (PR_SET_CHILD_SUBREAPER): once the launcher is
# killed its nodes become the harness's children, so their exit statuses can be read, not just their absence.
HARNESS = """
import ctypes, json, os, subprocess, sys
assert ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0) == 0     # PR_SET_CHILD_SUBREAPER
launcher = subprocess.Popen(sys.argv[1:])
print(json.dumps({"launcher": launcher.pid}), flush=True)
while True:
    try:
        pid, status = os.wait()
    except ChildProcessError:
        break
    print(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status)}), flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the harness adopts orphans with a Linux prctl")
def test_kill_9_of_the_launcher_stops_every_node_in_order_and_leaves_no_restart_marker(tmp_path):
    domain = free_domain("k9")
    ros_home = tmp_path / "ros"
    cfg = yaml.safe_load(package.params_file().read_text())
    cfg["controller"]["watchdog_nodes"] = ["executor"]
    cfg_file = tmp_path / "motormind.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    h = subprocess.Popen([sys.executable, "-c", HARNESS, sys.executable, "-m", "motormind.cli", "launch", "fake",
                          f"brain_script:={_script(tmp_path)}", "instruction:=sweep left and right",
                          f"config:={cfg_file}", f"record:={tmp_path / 'k.mcap'}", "--domain-id", str(domain)],
                         env={**os.environ, "ROS_HOME": str(ros_home)}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True, start_new_session=True)
    lines: list = []
    reader = threading.Thread(target=lambda: lines.extend(h.stdout), daemon=True)
    reader.start()
    probe = Probe(domain_id=domain)
    pids: dict = {}
    try:
        probe.wait_for("progress", lambda m: m.get("event") == "command_start" and m.get("batch_id") == "b1",
                       timeout=90)
        out = "".join(lines)
        launcher = json.loads(next(ln for ln in out.splitlines() if ln.startswith('{"launcher"')))["launcher"]
        pids = {m.group(1): int(m.group(2)) for m in re.finditer(r"started (\S+) \(pid (\d+)\)", out)}
        assert set(pids) == {"controller", "planner", "executor", "verifier", "monitor", "memory", "recorder"}
        marker = ros_home / "motormind" / f"controller-domain{domain}.running"
        assert marker.is_file() and marker.read_text().split()[0] == str(pids["controller"])
        os.kill(launcher, signal.SIGKILL)              # mid-batch: no chance to stop anything itself
        h.wait(timeout=60)                             # the harness ends once it has reaped every node
        reader.join(timeout=10)
        exits = {d["pid"]: d["exit"] for d in (json.loads(ln) for ln in "".join(lines).splitlines()
                                               if ln.startswith('{"pid"'))}
        logs = {n: ros_home / "log" / "motormind" / f"{n}-{q}.log" for n, q in pids.items()}
        text = {n: f.read_text() if f.exists() else "(no log)" for n, f in logs.items()}
        assert exits.pop(launcher) == -signal.SIGKILL
        # every node ended by itself, in order (exit code 0: not killed, not its 10 s deadline), and said so
        ended = {n: exits.get(q) for n, q in pids.items()}
        assert ended == {n: 0 for n in pids}, {n: text[n] for n in pids if ended[n] != 0}
        assert not marker.exists(), text               # the Controller stopped in order: the next start is clean
        for n in pids:
            assert f"the launcher (pid {launcher}) is gone: {n} stops" in text[n], text[n]
    finally:
        probe.close()
        if h.poll() is None:
            h.kill()
        reader.join(timeout=10)
        kill_nodes("".join(lines))                     # only if the test failed: nothing is left behind
        print("".join(lines)[-4000:])


@pytest.mark.parametrize("how", ["twice", "burst"])
def test_a_stop_signal_said_again_is_one_orderly_stop(tmp_path, how):
    """The parent-death signal comes once for each of the launcher's threads as they end,
    microseconds apart. A SIGTERM said again, 0.3 s later or in a burst that lands while the
    previous one is being handled, must neither cut the orderly stop short (exit code 0, not
    -SIGTERM) nor deadlock it (a handler that takes a lock its interrupted self holds)."""
    from motormind.ros.launcher import node_argv
    from motormind.ros.settings import write_with
    domain = free_domain(how)
    script = _script(tmp_path)
    spec = graph.NodeSpec("memory", "memory")
    cfg = write_with(tmp_path / "motormind.yaml", {"brain": {"type": "scripted", "script": str(script)}, "profile": "fake",
                                                   "robot": {"type": "fake"}})
    probe = Probe(domain_id=domain, watch=("heartbeat",))
    # started as the launcher starts it (this process in its place): on SIGTERM it looks for up to 1 s
    # whether its launcher is gone, so the second signal lands while it stops
    env = {**os.environ, **graph.ros_env(domain), "MOTORMIND_LAUNCHER_PID": str(os.getpid())}
    p = subprocess.Popen(node_argv(spec, cfg), env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        probe.wait_for("heartbeat", lambda m: m.get("node") == "memory", timeout=90)    # spinning: handlers set
        if how == "twice":
            p.send_signal(signal.SIGTERM)
            time.sleep(0.3)                            # the first is being handled: not a test of speed
            p.send_signal(signal.SIGTERM)
        else:
            end = time.monotonic() + 0.5               # within base.REPEAT_SIGNAL_S: the same stop, said again
            while time.monotonic() < end and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
        assert p.returncode == 0, out[-3000:]
    finally:
        probe.close()
        if p.poll() is None:
            p.kill()
            p.wait()


# A memory node whose stop holds the GIL in a native call that never returns, as Fast DDS's participant
# teardown can (motormind/hard_exit.py): in its DDS teardown, after the orderly stop, or in the orderly
# stop itself. Its deadlines are shortened to 1 s.
STUCK = """
import ctypes, sys
from motormind.ros import base
from motormind.ros.nodes import node_class
base.SHUTDOWN_GRACE_S = base.TEARDOWN_S = 1.0
where = sys.argv.pop(1)
class Stuck(node_class("memory")):
    def close(self):
        if where == "close":
            ctypes.PyDLL(None).sleep(120)
        super().close()
    def destroy_node(self):
        print("closed in order", flush=True)
        ctypes.PyDLL(None).sleep(120)
sys.exit(base.spin(Stuck))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the native deadline is Linux's")
@pytest.mark.parametrize("where, code", [("teardown", 0), ("close", 1)])
def test_a_stop_stuck_with_the_gil_held_still_ends(tmp_path, where, code):
    """The DDS teardown stuck: the node ends with its own exit code (0), its orderly stop done. The
    orderly stop stuck: it ends with exit code 1, though no Python thread can run to end it."""
    from motormind.ros.launcher import node_argv
    from motormind.ros.settings import write_with
    domain = free_domain("stuck")
    cfg = write_with(tmp_path / "motormind.yaml", {"brain": {"type": "scripted", "script": str(_script(tmp_path))},
                                                   "profile": "fake", "robot": {"type": "fake"}})
    argv = node_argv(graph.NodeSpec("memory", "memory"), cfg)
    argv = [argv[0], "-c", STUCK, where, *argv[argv.index("--ros-args"):]]
    probe = Probe(domain_id=domain, watch=("heartbeat",))
    p = subprocess.Popen(argv, env={**os.environ, **graph.ros_env(domain)}, stdout=subprocess.PIPE,
                         stderr=subprocess.STDOUT, text=True)
    try:
        probe.wait_for("heartbeat", lambda m: m.get("node") == "memory", timeout=90)    # spinning: handlers set
        p.send_signal(signal.SIGTERM)
        out = p.communicate(timeout=60)[0]
        assert p.returncode == code, out[-3000:]
        assert ("closed in order" in out) == (where == "teardown"), out[-3000:]
    finally:
        probe.close()
        if p.poll() is None:
            p.kill()
            p.wait()
