"""`motormind launch fake`: the nodes as separate processes. Killing the Executor's process mid-batch
makes the Controller's watchdog stop the robot (and say so on its report topic); the launcher
reports the dead node; a Controller killed and restarted by the launcher comes up stopped."""
import json
import os
import signal
import threading
import time

import pytest
import yaml

pytest.importorskip("rclpy")

from motormind.ros import graph, package  # noqa: E402
from motormind.ros.launcher import Launcher  # noqa: E402
from motormind.ros.probe import Probe  # noqa: E402
from rostest_util import Log, free_domain  # noqa: E402

DOMAIN = free_domain("wd")
PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "sweep", "success_criterion": "swept"}]}
SWEEP = {"commands": [{"op": "move", "direction": d, "distance_mm": 100} for d in ("left", "right") * 4]}


def test_killing_the_executor_trips_the_watchdog_and_a_restarted_controller_is_stopped(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"planner": [PLAN], "executor": [SWEEP]}))
    cfg = yaml.safe_load(package.params_file().read_text())
    cfg["controller"].update(watchdog_nodes=["executor"], watchdog_timeout_s=1.5,
                                                           state_dir=str(tmp_path))
    cfg_file = tmp_path / "motormind.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    log = Log()
    launcher = Launcher("fake", {"brain_script": str(script), "instruction": "sweep left and right",
                                 "config": str(cfg_file)}, env=graph.ros_env(DOMAIN), out=log, grace_s=5)
    t = threading.Thread(target=launcher.run, daemon=True)
    probe = Probe(domain_id=DOMAIN)
    t.start()
    try:
        start = probe.wait_for("progress", lambda m: m.get("event") == "command_start" and m.get("batch_id") == "b1",
                               timeout=90)
        assert start["index"] == 0
        os.kill(launcher.pids()["executor"], signal.SIGKILL)
        rep = probe.wait_for("report", lambda m: m.get("batch_id") == "b1", timeout=30)
        notice = probe.wait_for("report", lambda m: m.get("source") == "watchdog", timeout=30)
        assert "watchdog: executor silent" in notice["reason"] and notice["status"] == "stopped" and notice["estop"]
        st = [r["status"] for r in rep["results"]]
        assert rep["estop"] and "cancelled" in st and st[-1] == "cancelled", st
        assert "watchdog: executor silent" in rep["reason"]
        deadline = time.monotonic() + 10
        while not launcher.deaths and time.monotonic() < deadline:
            time.sleep(0.1)
        assert launcher.deaths[0]["node"] == "executor" and launcher.deaths[0]["code"] == -signal.SIGKILL
        assert "NODE DIED: executor (killed by SIGKILL)" in log.text()

        # the Controller dies; the launcher restarts it; it comes up stopped and moves nothing
        n0 = len(probe.msgs["report"])
        os.kill(launcher.pids()["controller"], signal.SIGKILL)
        back = probe.wait_for("report", lambda m: m.get("status") == "stopped" and "restarted" in m["reason"],
                              timeout=60, start=n0)
        assert back["estop"] and back["source"] == "controller"
        probe.wait_for_subscribers("commands", n=2)          # the new Controller (and the Monitor)
        probe.send("commands", {"batch_id": "x1", "subgoal_id": "s1", "commands": SWEEP["commands"][:1]})
        rej = probe.wait_for("report", lambda m: m.get("batch_id") == "x1", timeout=30)
        assert rej["status"] == "rejected" and "reset required" in rej["reason"]
        assert all(r["steps"] == 0 for r in rej["results"])
        assert "restarting controller" in log.text()
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=30)
        print(log.text()[-4000:])
    assert not t.is_alive() and not launcher.pids()
