"""The operator console as a ROS 2 node (motormind/ros/console_node.py): `motormind launch fake
console:=true` starts it with the other nodes as separate processes over DDS; the tests drive it over
HTTP as the page does and watch the topics with a probe. The measured state and camera frames come
from the Controller's topics; a jog goes through the Controller's validation (its reason is the
answer); the e-stop latches until reset; an instruction goes out on `task`; approval mode and the
verifier's takeover work across processes; every operator action is on `events`."""
import json
import re
import threading
import time
import urllib.request

import pytest
import yaml

pytest.importorskip("rclpy")

from motormind.ros import graph, package  # noqa: E402
from motormind.ros.launcher import Launcher  # noqa: E402
from motormind.ros.probe import WATCH, Probe  # noqa: E402
from console_client import ConsoleClient  # noqa: E402
from rostest_util import Log, free_domain  # noqa: E402

PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "reach up", "success_criterion": "raised"}]}
B1 = {"commands": [{"op": "move", "direction": "up", "distance_mm": 30}]}                      # the operator rejects it
B2 = {"commands": [{"op": "move", "direction": "up", "distance_mm": 30}, {"op": "done"}]}      # approved, edited to 10 mm


class Console:
    def __init__(self, url, token, probe):
        self.url, self.token, self.probe = url, token, probe
        self.operator = ConsoleClient(url, token)

    def state(self) -> dict:
        return self.operator.state()

    def act(self, action, body=None, token=True):
        return (self.operator if token else ConsoleClient(self.url, None)).act(action, body)

    def wait(self, pred, timeout=20.0, what="the console's state"):
        t_end = time.monotonic() + timeout
        while True:
            st = self.state()
            if pred(st):
                return st
            if time.monotonic() > t_end:
                raise TimeoutError(f"{what}: not reached within {timeout:g} s; last: {json.dumps(st)[:1500]}")
            time.sleep(0.1)

    def z(self) -> float:
        return self.state()["measured"]["eef_pos_mm"][2]


@pytest.fixture(scope="module")
def console(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("console_ros")
    domain = free_domain("console")
    script = tmp / "script.json"
    script.write_text(json.dumps({"planner": [PLAN], "executor": [B1, B2]}))
    cfg = yaml.safe_load(package.params_file().read_text())
    cfg["controller"].update(watchdog_nodes=["executor"], state_dir=str(tmp),
                                                           image_rate_hz=5.0)
    cfg_file = tmp / "motormind.yaml"
    cfg_file.write_text(yaml.safe_dump(cfg))
    log = Log()
    launcher = Launcher("fake", {"brain_script": str(script), "config": str(cfg_file), "console": "true",
                                 "console_port": "0"},
                        env={**graph.ros_env(domain), "ROS_HOME": str(tmp / "ros")}, out=log, grace_s=5)
    t = threading.Thread(target=launcher.run, daemon=True)
    t.start()
    probe = Probe(domain_id=domain, watch=WATCH + ("events",))
    try:
        t_end = time.monotonic() + 60
        while not (m := re.search(r"^\[console\] console: (http://\S+/)  token: (\S+)$", log.text(), re.M)):
            assert time.monotonic() < t_end and t.is_alive(), f"the console did not start:\n{log.text()[-3000:]}"
            time.sleep(0.1)
        c = Console(m.group(1), m.group(2), probe)
        c.wait(lambda s: len(s["measured"].get("eef_pos_mm", [])) == 3 and "joints_deg" in s["measured"], 60,
               "the measured state")
        for _ in range(100):                 # the probe hears the console's events (volatile) from here on
            assert c.act("claim")[0] == 200
            try:
                probe.wait_for("events", lambda e: e.get("kind") == "operator_action", timeout=0.3)
                break
            except TimeoutError:
                pass
        probe.wait_for_publishers("report")  # ... and the Controller's reports (volatile too)
        yield c
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=30)
        print(log.text()[-5000:])
    assert not t.is_alive() and not launcher.pids()


def assert_one_count(c, pr, end, instruction):
    """Issue 36: one count of VLM calls, exact. The episode's calls are those naming it that the Executor
    had heard when it ended it: each call on /motormind/events names its episode and its number among its
    node's calls of it (call_no), the end names per node how many count (vlm_counted). The end's count
    (on /motormind/episode, in the recorder's MCAP), the console's and the calls on events that count are
    one number; a background call (Monitor, Memory) ending after the end is numbered beyond."""
    st = c.wait(lambda s: s["episode"].get("status") == "ended", 10, "the episode's end")
    n, counted = end["result"]["vlm_calls"], end["vlm_counted"]
    for node, k in counted.items():      # the Executor heard them before the end: the probe hears them too
        pr.wait_for("events", lambda m, node=node, k=k: m.get("kind") == "vlm_call" and m.get("node") == node
                    and m.get("instruction") == instruction and m.get("call_no") == k, timeout=10)
    named = [m for m in pr.msgs["events"] if m.get("kind") == "vlm_call" and m.get("instruction") == instruction]
    calls = [m for m in named if m["call_no"] <= counted.get(m["node"], 0)]
    assert st["vlm_totals"]["calls"] == n == len(calls) == sum(counted.values()) > 0, \
        (st["vlm_totals"], n, counted, [(m["node"], m["call_no"]) for m in named])
    assert len({(m["node"], m["call_no"]) for m in named}) == len(named)         # each call numbered once
    assert {m["role"] for m in calls} >= {"planner", "executor", "verifier"}


def test_state_and_frames_from_the_topics_and_no_token_no_control(console):
    c = console
    st = c.state()
    assert st["transport"] == "ros2" and st["robot"]["profile"] == "fake"
    assert st["measured"]["eef_pos_mm"] == [400.0, 0.0, 200.0] and len(st["measured"]["joints_deg"]) == 6
    seq0 = c.wait(lambda s: "front" in s["frames"], 20, "a camera frame")["frames"]["front"]["seq"]
    c.wait(lambda s: s["frames"]["front"]["seq"] >= seq0 + 3, 20, "live frames from camera/front/image")
    with urllib.request.urlopen(c.url + "api/frame/front", timeout=10) as r:
        assert r.headers["Content-Type"] == "image/jpeg" and r.read(2) == b"\xff\xd8"

    code, out = c.act("estop", token=False)
    assert code == 401 and "token" in out["error"]
    code, out = c.act("jog", {"command": {"op": "move", "direction": "up", "distance_mm": 10}}, token=False)
    assert code == 401
    time.sleep(0.5)
    st = c.state()
    assert not st["controller"]["estop"] and st["batches"] == [] and st["measured"]["eef_pos_mm"][2] == 200.0
    refused = [e for e in st["operator_log"] if not e["ok"]]
    assert {e["action"] for e in refused} == {"estop", "jog"} and all("no valid token" in e["detail"] for e in refused)


def test_a_jog_goes_through_the_controllers_validation(console):
    c, pr = console, console.probe
    z0 = c.z()
    code, out = c.act("jog", {"command": {"op": "move", "direction": "up", "distance_mm": 150}})
    assert code == 422, out
    assert "rejected by the Controller" in out["error"] and \
        "commands[0].distance_mm: 150 mm exceeds the per-command limit 100 mm" in out["error"]
    rep = pr.wait_for("report", lambda m: m.get("source") == "operator" and m.get("status") == "rejected", timeout=10)
    assert rep["batch_id"].startswith("jog") and [r["steps"] for r in rep["results"]] == [0]
    time.sleep(0.5)                                    # the live pose (10 Hz): nothing moved
    assert c.z() == z0

    code, out = c.act("jog", {"command": {"op": "move", "direction": "up", "distance_mm": 20}})
    assert code == 200 and out["batch_id"].startswith("jog"), out
    done = pr.wait_for("report", lambda m: m.get("batch_id") == out["batch_id"], timeout=20)
    assert done["status"] == "done" and abs(done["results"][0]["achieved"]["translation_mm"][2] - 20) < 1.0
    c.wait(lambda s: abs(s["measured"]["eef_pos_mm"][2] - (z0 + 20)) < 1.0, 10, "the measured pose after the jog")
    # the console hears the report on its own subscription, in no fixed order with the pose: wait for it
    st = c.wait(lambda s: any(b["batch_id"] == out["batch_id"] and b["status"] == "done" for b in s["batches"]),
                10, "the console's record of the jog's report")
    b = next(b for b in st["batches"] if b["batch_id"] == out["batch_id"])
    assert b["status"] == "done" and b["source"] == "operator jog (tester)"


def test_estop_latches_until_reset(console):
    c, pr = console, console.probe
    n0 = len(pr.msgs["report"])
    code, out = c.act("estop")
    assert code == 200 and "EMERGENCY STOP" in out["detail"]
    notice = pr.wait_for("report", lambda m: m.get("batch_id") == "" and m.get("source") == "estop", timeout=10, start=n0)
    assert notice["status"] == "stopped" and notice["estop"]
    st = c.wait(lambda s: s["controller"]["estop"] and s["controller"]["paused"], 10, "the latched e-stop")
    assert "estop topic" in st["controller"]["estop_reason"]
    pr.wait_for("events", lambda m: m.get("kind") == "pause" and m.get("node") == "controller", timeout=10)

    code, out = c.act("jog", {"command": {"op": "move", "direction": "up", "distance_mm": 10}})
    assert code == 422 and "emergency stop latched" in out["error"], out
    code, out = c.act("resume")
    assert code == 409 and "reset it first" in out["error"]

    code, out = c.act("reset")
    assert code == 200 and "ready" in out["detail"] and "still paused" in out["detail"], out
    pr.wait_for("report", lambda m: m.get("batch_id") == "" and m.get("status") == "ready", timeout=10, start=n0)
    c.wait(lambda s: not s["controller"]["estop"], 10, "the reset")
    code, out = c.act("resume")
    assert code == 200, out
    pr.wait_for("events", lambda m: m.get("kind") == "resume" and m.get("node") == "controller", timeout=10)
    c.wait(lambda s: not s["controller"]["paused"], 10, "the resume")


def test_instruction_approval_and_verifier_takeover_across_processes(console):
    c, pr = console, console.probe
    z0 = c.z()
    assert c.act("approval", {"on": True})[0] == 200
    assert c.act("takeover", {"role": "verifier", "on": True})[0] == 200
    code, out = c.act("instruction", {"text": "reach up a little"})
    assert code == 200 and "published on /motormind/task" in out["detail"], out
    task = pr.wait_for("task", lambda m: m.get("instruction") == "reach up a little", timeout=10)
    assert task["source"] == "console (tester)"

    def pending(kind, batch_id=None):
        def pred(s):
            return any(p["kind"] == kind and (batch_id is None or p["batch"]["batch_id"] == batch_id)
                       for p in s["desk"]["pending"])
        st = c.wait(pred, 30, f"a pending {kind} {batch_id or ''}")
        return next(p for p in st["desk"]["pending"] if p["kind"] == kind)

    p1 = pending("review", "b1")
    assert p1["batch"]["commands"] == B1["commands"]
    assert c.act("reject", {"id": p1["id"], "note": "too far"})[0] == 200
    r1 = pr.wait_for("report", lambda m: m.get("batch_id") == "b1", timeout=20)
    assert r1["status"] == "rejected" and r1["reason"] == "rejected by the operator: too far" and r1["source"] == "operator"

    p2 = pending("review", "b2")
    edited = {"commands": [{"op": "move", "direction": "up", "distance_mm": 10}, {"op": "done"}]}
    assert c.act("approve", {"id": p2["id"], "batch": json.dumps(edited), "note": "shorter"})[0] == 200
    sent = pr.wait_for("commands", lambda m: m.get("batch_id") == "b2", timeout=20)
    assert sent["commands"] == edited["commands"] and sent["source"] == "operator (edited)"
    r2 = pr.wait_for("report", lambda m: m.get("batch_id") == "b2", timeout=20)
    assert r2["status"] == "done" and r2["claims_done"] and abs(r2["results"][0]["achieved"]["translation_mm"][2] - 10) < 1
    assert abs(r2["end_state"]["eef_pos_mm"][2] - (z0 + 10)) < 1.0     # b1 moved nothing

    q = pending("answer")
    assert q["role"] == "verifier" and q["context"]["subgoal_id"] == "s1" and q["context"]["batch_id"] == "b2"
    code, out = c.act("answer", {"id": q["id"], "answer": {"achieved": True, "evidence": "the tool is 10 mm higher"}})
    assert code == 200, out
    v = pr.wait_for("verdict", lambda m: m.get("batch_id") == "b2", timeout=20)
    assert v["achieved"] and v["evidence"] == "the tool is 10 mm higher" and v["brain"] == "operator"
    end = pr.wait_for("episode", lambda m: m.get("event") == "end", timeout=20)
    assert end["result"]["success"] and end["result"]["outcome"] == "success"

    # the end (Executor), the report (Controller) and the verdict (Verifier) reach the console in no fixed order
    st = c.wait(lambda s: s["episode"].get("status") == "ended" and s["verdicts"] and
                {b["batch_id"]: b["status"] for b in s["batches"]}.get("b2") == "done", 10,
                "the episode's end, b2's report and its verdict")
    timeline = "\n".join(f"{e['t']} {e['kind']} {e['text'][:90]}" for e in st["timeline"])
    assert st["plan"] and st["plan"][0]["id"] == "s1" and st["plan"][0]["status"] == "achieved", timeline
    assert [b["status"] for b in st["batches"] if b["batch_id"] in ("b1", "b2")] == ["done", "rejected"], timeline
    assert st["verdicts"][0]["brain"] == "operator"
    assert_one_count(c, pr, end, "reach up a little")
    # every operator action, taken or refused, is on /motormind/events with its time (the recorder keeps it)
    acts = [m for m in pr.msgs["events"] if m.get("kind") == "operator_action"]
    seen = {(m["action"], m["ok"]) for m in acts}
    assert {("estop", False), ("jog", False), ("jog", True), ("estop", True), ("reset", True), ("instruction", True),
            ("approval", True), ("takeover", True), ("reject", True), ("approve", True), ("answer", True)} <= seen, seen
    assert all(isinstance(m["t"], float) and m["node"] == "console" and m["by"] == "tester" for m in acts)


def test_pause_while_a_batch_awaits_approval_parks_and_a_jog_moves_the_arm(console):
    """Issue 31 item 2 over ROS: paused while the Executor waits on this console's desk for an
    approval, the console says "paused" (the episode is parked; a jog may run) and a jog moves the
    arm; the batch approved meanwhile is handed over only on resume, then runs."""
    c, pr = console, console.probe
    n0 = {k: len(pr.msgs[k]) for k in ("report", "commands", "episode")}
    assert c.act("approval", {"on": True})[0] == 200
    assert c.act("takeover", {"role": "verifier", "on": False})[0] == 200      # the brain gives the verdict
    assert c.act("instruction", {"text": "reach up once more"})[0] == 200
    st = c.wait(lambda s: any(p["kind"] == "review" for p in s["desk"]["pending"]), 30, "a batch awaiting approval")
    p = next(p for p in st["desk"]["pending"] if p["kind"] == "review")
    bid, z0 = p["batch"]["batch_id"], c.z()

    code, out = c.act("pause")
    assert code == 200, out
    st = c.wait(lambda s: (s.get("status") or {}).get("pause") == "paused", 10, 'the console saying "paused"')
    assert st["status"]["jog"] == "" and st["desk"]["parked"], st["status"]
    code, out = c.act("jog", {"command": {"op": "move", "direction": "up", "distance_mm": 10}})
    assert code == 200, out
    rep = pr.wait_for("report", lambda m: m.get("batch_id") == out["batch_id"], timeout=20, start=n0["report"])
    assert rep["status"] == "done", rep
    c.wait(lambda s: abs(s["measured"]["eef_pos_mm"][2] - (z0 + 10)) < 1.0, 10, "the pose after the jog")

    code, out = c.act("approve", {"id": p["id"]})
    assert code == 200 and "it runs when you resume" in out["detail"], out
    time.sleep(1.0)                                    # approved while paused: nothing handed over yet
    assert not [m for m in pr.msgs["commands"][n0["commands"]:] if m.get("batch_id") == bid]
    assert c.state()["status"]["pause"] == "paused"
    assert c.act("resume")[0] == 200
    done = pr.wait_for("report", lambda m: m.get("batch_id") == bid, timeout=20, start=n0["report"])
    assert done["status"] == "done", done
    assert abs(done["end_state"]["eef_pos_mm"][2] - (z0 + 10 + 30)) < 1.0      # the jog, then the batch's 30 mm up
    assert c.act("approval", {"on": False})[0] == 200                            # the rest runs unreviewed
    end = pr.wait_for("episode", lambda m: m.get("event") == "end", timeout=20, start=n0["episode"])
    assert end["result"]["success"], end
    assert_one_count(c, pr, end, "reach up once more")      # this episode's calls, not the session's
    # the Memory node's Memory is this episode's: its prompt states this instruction, none of the first's
    mem = pr.wait_for("events", lambda m: m.get("kind") == "vlm_call" and m.get("role") == "memory" and
                      m.get("instruction") == "reach up once more" and m.get("user"), timeout=20)
    assert 'Task instruction: "reach up once more"' in mem["user"] and "reach up a little" not in mem["user"], \
        mem["user"]
