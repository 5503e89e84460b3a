"""The operator console's actions without a browser: one operator in control, approval with edits
and rejections, taking over the Executor, cancel and pause at action boundaries, a new instruction
mid-episode, and the record of every operator action. (tests/console/test_console_browser.py drives the page.)"""
import json
import threading
import time
import urllib.error
import urllib.request

import pytest
from console_client import ConsoleClient
from waiting import wait_for, written_events

from motormind.brains.scripted import ScriptedBrain
from motormind.console.brain import OperatorOnlyBrain
from motormind.console.runtime import ActionError
from motormind.console.session import EpisodeHost
from motormind.robots.fake import FakeRobot

PLAN = {"subgoals": [{"id": "s1", "description": "go up", "success_criterion": "60 mm higher"}]}
UP = {"commands": [{"op": "move", "direction": "up", "distance_mm": 30},
                   {"op": "move", "direction": "up", "distance_mm": 30}, {"op": "done"}]}
A = {"client": "a", "name": "alice"}
B = {"client": "b", "name": "bob"}


@pytest.fixture
def console(tmp_path):
    made = []

    def make(executor=(UP,), brain=None, approval=False, realtime=False):
        robot = FakeRobot(realtime=realtime)
        factory = brain or (lambda: ScriptedBrain({"planner": [PLAN], "executor": list(executor)}))
        host = EpisodeHost(robot, factory, tmp_path / "runs", port=0, token="t", approval=approval).start()
        made.append(host)
        return host, robot, host.session.runtime
    yield make
    for h in made:
        h.close()


def events(tmp_path, kind):
    out = []
    for f in sorted((tmp_path / "runs").rglob("events.jsonl")):
        out += written_events(f, kind)
    return out


def pending(host, kind="review"):
    return wait_for(lambda: next((p for p in host.session.desk.pending.values() if p.kind == kind), None),
                    what=f"a pending {kind}")


def test_one_operator_in_control_at_a_time(console, tmp_path):
    host, robot, rt = console()
    rt.act("approval", {"on": True}, A)                     # the first to act takes control
    assert host.session.desk.holder["name"] == "alice"
    with pytest.raises(ActionError) as e:
        rt.act("pause", {}, B)
    assert e.value.status == 409 and "alice is in control" in str(e.value)
    with pytest.raises(ActionError):
        rt.act("claim", {}, B)                              # not without taking over explicitly
    assert rt.act("claim", {"force": True}, B)["detail"] == "took control from alice"
    with pytest.raises(ActionError):
        rt.act("approval", {"on": False}, A)
    assert rt.act("estop", {}, A)["ok"]                     # the e-stop works for anyone with the token
    st = host.session.view.state()
    assert st["desk"]["holder"]["name"] == "bob" and st["controller"]["estop"]
    refused = [e for e in events(tmp_path, "operator_action") if not e["ok"]]
    assert [(r["action"], r["by"]) for r in refused] == [("pause", "bob"), ("claim", "bob"), ("approval", "alice")]
    assert all(isinstance(r["t"], float) for r in refused)


def test_edited_batch_runs_as_edited_and_a_rejected_one_moves_nothing(console, tmp_path):
    host, robot, rt = console(approval=True, executor=[UP, UP])
    rt.act("instruction", {"text": "go up"}, A)
    p = pending(host)
    with pytest.raises(ActionError) as e:                   # an edit that is not a JSON object
        rt.act("approve", {"id": p.id, "batch": "[1, 2"}, A)
    assert "batch: malformed JSON at line 1 column 6" in str(e.value)
    rt.act("reject", {"id": p.id, "note": "too fast"}, A)
    p2 = wait_for(lambda: next((q for q in host.session.desk.pending.values() if q.id != p.id), None))
    assert robot.executed == []                             # the rejected batch moved nothing
    edited = {"commands": [{"op": "move", "direction": "up", "distance_mm": 15}, {"op": "done"}]}
    rt.act("approve", {"id": p2.id, "batch": json.dumps(edited)}, A)
    wait_for(lambda: host.episodes, what="the episode to end")
    assert robot.pos[2] * 1000 == pytest.approx(215, abs=1)   # 15 mm, not the proposed 60
    reps = events(tmp_path, "report")
    assert reps[0]["status"] == "rejected" and reps[0]["source"] == "operator" and "too fast" in reps[0]["reason"]
    assert reps[1]["status"] == "done" and [r["command"]["distance_mm"] for r in reps[1]["results"][:1]] == [15]
    decisions = [(d["decision"], d.get("edited_batch") is not None) for d in events(tmp_path, "review_decision")]
    assert decisions == [("rejected", False), ("edited", True)]
    assert host.episodes[0]["success"] is True
    # an operator's rejection is not counted as the Controller's
    assert host.episodes[0].get("controller_rejections", 0) == 0


def test_operator_plays_the_executor_through_its_parse_path(console, tmp_path):
    host, robot, rt = console(brain=OperatorOnlyBrain)
    rt.act("instruction", {"text": "lift the tool 20 mm"}, A)
    p = pending(host, "answer")
    assert p.role == "executor" and p.payload["context"]["subgoal"] == "lift the tool 20 mm"
    rt.act("answer", {"id": p.id, "answer": '{"commands": [{"op": "fly", "distance_mm": 20}]}'}, A)
    p2 = wait_for(lambda: next((q for q in host.session.desk.pending.values() if q.id != p.id), None))
    assert p2.role == "executor" and "fly" in p2.payload["error"]      # the repair request quotes the error
    assert robot.executed == []                                         # a malformed answer never runs
    rt.act("answer", {"id": p2.id, "answer": {"commands": [
        {"op": "move", "direction": "up", "distance_mm": 20}, {"op": "done"}]}}, A)
    v = wait_for(lambda: next((q for q in host.session.desk.pending.values() if q.role == "verifier"), None))
    rt.act("answer", {"id": v.id, "answer": {"achieved": True, "evidence": "I see it 20 mm higher"}}, A)
    wait_for(lambda: host.episodes, what="the episode to end")
    assert host.episodes[0]["success"] and robot.pos[2] * 1000 == pytest.approx(220, abs=1)
    calls = [(c["role"], c["brain"]) for c in events(tmp_path, "vlm_call") if c["role"] in ("executor", "verifier")]
    assert set(calls) == {("executor", "operator"), ("verifier", "operator")}
    with pytest.raises(ActionError) as e:                   # nobody else could answer it
        rt.act("takeover", {"role": "executor", "on": False}, A)
    assert "cannot be given back" in str(e.value)


def test_cancel_and_pause_act_at_action_boundaries(console, tmp_path):
    host, robot, rt = console(executor=[UP, {"commands": [{"op": "done"}]}])
    fired = threading.Event()

    def hook(r):                                            # mid-way through the first command
        if r.steps == 5 and not fired.is_set():
            fired.set()
            rt.act("cancel", {"reason": "not that way"}, A)
    robot.step_hook = hook
    rt.act("instruction", {"text": "go up"}, A)
    wait_for(lambda: events(tmp_path, "report"), what="a report")
    rep = events(tmp_path, "report")[0]
    assert [r["status"] for r in rep["results"]] == ["done", "cancelled", "cancelled"]
    assert "not that way" in rep["results"][1]["reason"] and rep["status"] == "cancelled"
    robot.step_hook = None
    host.close()

    host2, robot2, rt2 = console(executor=[UP])
    paused_at = {}

    def hook2(r):
        if r.steps == 5 and not paused_at:
            paused_at["steps"] = r.steps
            rt2.act("pause", {}, A)
    robot2.step_hook = hook2
    rt2.act("instruction", {"text": "go up"}, A)
    wait_for(lambda: host2.session.view.state()["controller"]["held"], what="the hold")
    z = robot2.pos[2]
    assert z * 1000 == pytest.approx(230, abs=1)            # the command under way finished; the next waits
    time.sleep(0.2)
    assert robot2.pos[2] == z
    rt2.act("resume", {}, A)
    wait_for(lambda: host2.episodes, what="the episode to end")
    assert robot2.pos[2] * 1000 == pytest.approx(260, abs=1)


def test_new_instruction_mid_episode_replans(console, tmp_path):
    seen = []

    def planner(req):
        seen.append(req.context.get("instruction"))
        return PLAN
    host, robot, rt = console(brain=lambda: ScriptedBrain({"planner": planner, "executor": [UP]}), approval=True)
    rt.act("instruction", {"text": "go up"}, A)
    p = pending(host)
    rt.act("instruction", {"text": "go up, then stop"}, A)
    rt.act("reject", {"id": p.id, "note": "new task coming"}, A)     # the loop head takes the new task
    p2 = wait_for(lambda: next((q for q in host.session.desk.pending.values() if q.id != p.id), None))
    assert seen == ["go up", "go up, then stop"]                      # replanned for it, same episode
    rt.act("approve", {"id": p2.id}, A)
    wait_for(lambda: host.episodes, what="the episode to end")
    assert len(host.episodes) == 1 and host.episodes[0]["replans"] == 1
    assert [e["text"] for e in events(tmp_path, "instruction")] == ["go up, then stop"]


def test_http_refusals_name_the_field(console):
    host, robot, rt = console()
    url = host.session.url

    operator = ConsoleClient(url, "t")

    def post(action, body, token="t"):
        return operator.act(action, body) if token == "t" else ConsoleClient(url, token).act(action, body)
    assert post("pause", {}, token="")[0] == 401
    assert post("explode", {}) == (404, {"ok": False, "error": "action: unknown 'explode' (one of claim, release, "
                                         "instruction, pause, resume, cancel, estop, reset, jog, approval, approve, "
                                         "reject, takeover, answer, manual_open, manual_answer)"})
    assert post("instruction", b"{not json")[0] == 400
    code, out = post("instruction", {"text": "x" * 501})
    assert code == 400 and out["error"] == "text: 501 characters exceed the limit of 500"
    code, out = post("jog", {"command": {"op": "done"}})
    assert code == 400 and out["error"].startswith("command.op: a jog is one of move, rotate, gripper")
    code, out = post("jog", {"command": {"op": "rotate", "axis": "yaw", "angle_deg": 45}})
    assert code == 422 and "angle_deg: |45| deg exceeds the per-command limit 30 deg" in out["error"]
    assert robot.executed == []
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(url + "api/frame/nope", timeout=5)
    assert e.value.code == 404


def test_cancel_queue_rejects_a_batch_waiting_for_approval(console, tmp_path):
    host, robot, rt = console(approval=True, executor=[UP])
    rt.act("instruction", {"text": "go up"}, A)
    pending(host)
    assert rt.act("cancel", {}, A)["detail"] == "1 waiting batch(es) rejected"
    wait_for(lambda: events(tmp_path, "report"), what="the rejection's report")
    rep = events(tmp_path, "report")[0]
    assert rep["status"] == "rejected" and rep["reason"] == "rejected by the operator: cancelled by alice"
    assert robot.executed == []


def _post(url, action, body, token="t"):
    return ConsoleClient(url, token).act(action, body)


@pytest.mark.parametrize("command, error", [
    ({"op": "move", "direction": ["up"], "distance_mm": 10}, "commands[0].direction: must be a word, got ['up']"),
    ({"op": "rotate", "axis": {"yaw": 1}, "angle_deg": 10}, "commands[0].axis: must be a word"),
    ({"op": "move", "vector": [1e200, 0, 0], "distance_mm": 20}, "commands[0].vector: element 0 is 1e+200"),
    # refused by the strict decoder of the request body, before the Controller sees it
    ({"op": "move", "direction": "up", "distance_mm": 10 ** 400},
     "command.distance_mm: an integer of 401 digits is outside the finite double range"),
    ({"op": ["move"], "direction": "up", "distance_mm": 10}, "command.op: a jog is one of move, rotate, gripper"),
])
def test_a_hostile_jog_is_refused_recorded_and_moves_nothing(console, tmp_path, command, error):
    host, robot, rt = console()
    code, out = _post(host.session.url, "jog", {"command": command})
    assert code in (400, 422) and error in out["error"], out
    assert robot.executed == []
    acts = [e for e in events(tmp_path, "operator_action") if e["action"] == "jog"]
    assert len(acts) == 1 and not acts[0]["ok"] and error in acts[0]["detail"]


def test_a_body_nested_too_deep_is_refused_and_recorded_as_text(console, tmp_path):
    host, robot, rt = console()
    deep: list = []
    cur = deep
    for _ in range(3000):
        cur.append([])
        cur = cur[0]
    with pytest.raises(ActionError) as e:
        rt.act("jog", {"command": {"op": "move", "vector": deep, "distance_mm": 5}}, A)
    assert e.value.status == 400 and str(e.value) == "body: nested deeper than 32 levels (the limit of 32)"
    act = [e for e in events(tmp_path, "operator_action") if e["action"] == "jog"][0]
    assert isinstance(act["args"], str) and len(act["args"]) < 200 and robot.executed == []


def test_a_hostile_edit_is_rejected_and_the_episode_goes_on(console, tmp_path):
    host, robot, rt = console(approval=True, executor=[UP, UP])
    rt.act("instruction", {"text": "go up"}, A)
    p = pending(host)
    with pytest.raises(ActionError) as e:                   # last-wins would run 10 mm of a 500 mm edit
        rt.act("approve", {"id": p.id, "batch": '{"commands": [{"op": "move", "direction": "up", '
                                                 '"distance_mm": 500, "distance_mm": 10}]}'}, A)
    assert str(e.value).startswith("batch.commands[0]: duplicate key 'distance_mm'")
    with pytest.raises(ActionError) as e:                   # the Controller's verdict is the approval's answer
        rt.act("approve", {"id": p.id, "batch": {"commands": [{"op": "rotate", "axis": {"yaw": 1}, "angle_deg": 10}]}},
               A)
    assert e.value.status == 422 and str(e.value).startswith("rejected by the Controller: commands[0].axis: must be "
                                                             "a word")
    assert robot.executed == [] and p.id in host.session.desk.pending     # it still waits for the operator
    rt.act("approve", {"id": p.id}, A)
    wait_for(lambda: host.episodes, what="the episode to end")
    assert host.episodes[0]["success"] is True and host.episodes[0]["controller_rejections"] == 0


def test_an_operator_answer_holding_two_batches_is_sent_back(console, tmp_path):
    host, robot, rt = console(brain=OperatorOnlyBrain)
    rt.act("instruction", {"text": "lift the tool"}, A)
    p = pending(host, "answer")
    two = json.dumps({"commands": [{"op": "move", "direction": "up", "distance_mm": 5}]}) * 2
    rt.act("answer", {"id": p.id, "answer": two}, A)
    p2 = wait_for(lambda: next((q for q in host.session.desk.pending.values() if q.id != p.id), None))
    assert "exactly one JSON value is expected" in p2.payload["error"] and robot.executed == []
    assert [c["response"] for c in events(tmp_path, "vlm_call") if c["role"] == "executor"][0] == two


def test_a_dead_vlm_endpoint_says_what_the_connection_error_was(tmp_path):
    """The endpoint goes away after the console started (at start, `motormind console --brain
    openai` refuses a dead one: tests/tools/test_cli_errors.py): the episode's end says why, not only
    that the planner failed safe."""
    import socket

    from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = load_vlm_config("local-oracle", [f"base_url=http://127.0.0.1:{port}/v1", "serve=null", "retries=0"])
    said = []
    host = EpisodeHost(FakeRobot(), lambda: OpenAIBrain(cfg), tmp_path / "runs", port=0, token="t",
                       progress=said.append).start()
    try:
        host.session.desk.add_instruction("go up")
        wait_for(lambda: host.episodes, what="the episode to end")
    finally:
        host.close()
    ep = host.episodes[0]
    assert ep["outcome"] == "gave_up" and "Connection refused" in ep["reason"], ep["reason"]
    assert any(m.startswith("episode ended: gave_up - the planner failed safe") and "Connection refused" in m
               for m in said), said


def test_closing_the_console_waits_for_a_frame_under_way():
    """close() returns only after the frame thread's render has ended: a frame taken after the
    robot is closed would read a closed simulator, and a daemon thread left inside native code
    (OpenCV, MuJoCo) when the interpreter ends aborts the process ("terminate called without an
    active exception", exit -6, seen once in CI after a console episode that had succeeded)."""
    from motormind.console.inprocess import InProcessRuntime
    entered, release = threading.Event(), threading.Event()

    class SlowLook(FakeRobot):
        def observe(self, images: bool = False):
            if threading.current_thread().name == "motormind-console-frames":
                entered.set()
                release.wait(30)
            return super().observe(images=images)

    rt = InProcessRuntime(SlowLook(), frame_hz=50)
    assert entered.wait(30), "the frame thread never looked"
    closer = threading.Thread(target=rt.close)
    closer.start()
    closer.join(0.5)
    assert closer.is_alive(), "close() returned while a frame was still being taken"
    release.set()
    closer.join(30)
    assert not closer.is_alive()
    assert "motormind-console-frames" not in [t.name for t in threading.enumerate()]


def test_the_pages_vlm_count_is_the_summarys_episode_after_episode(console, tmp_path):
    """Issue 36: the console said 21 VLM calls where summary.json said 19 (summary.json took the
    runner's count, the page every recorded call, summed over the session's episodes)."""
    host, robot, rt = console(executor=[UP, UP])
    for n in (1, 2):
        rt.act("instruction", {"text": "go up"}, A)
        wait_for(lambda: len(host.episodes) >= n, what=f"episode {n} to end")
        from pathlib import Path
        run_dir = Path(host.episodes[-1]["run_dir"])
        s = json.loads((run_dir / "summary.json").read_text())
        recorded = written_events(run_dir / "events.jsonl", "vlm_call")
        assert s["vlm_calls"] == len(recorded) > 0
        assert host.session.view.state()["vlm_totals"]["calls"] == s["vlm_calls"], n


def test_over_ros_a_call_counts_for_the_episode_it_names_and_the_end_gives_the_count():
    """Issue 36 over ROS 2: calls come on /motormind/events in no fixed order with the episode's start
    and end, each naming its episode and its number among its node's calls of it (role_nodes.py). A
    call naming the next episode's instruction before that start counts for it; the end says per node
    how many count (vlm_counted): one it counts still adds its tokens when it comes after the end, one
    numbered beyond (a background call that ended after) is listed, not counted."""
    from motormind.console.view import ConsoleView
    v = ConsoleView()

    def call(instr, node, n, tokens=1):
        v.on_event({"kind": "vlm_call", "instruction": instr, "node": node, "call_no": n, "role": node,
                    "input_tokens": tokens})
    def totals():
        return v.state()["vlm_totals"]["calls"], v.state()["vlm_totals"]["input_tokens"]
    v.on_event({"kind": "episode_start", "instruction": "a"})
    call("a", "planner", 1)
    call("b", "planner", 1)                                                     # the next episode's, early
    call("a", "monitor", 1)
    assert v.state()["vlm_totals"]["calls"] == 2
    v.on_event({"kind": "episode_end", "outcome": "success", "vlm_calls": 3,
                "vlm_counted": {"planner": 1, "monitor": 1, "memory": 1}})
    assert totals() == (3, 2)
    call("a", "memory", 1, tokens=10)          # counted by the end, heard after it
    call("a", "monitor", 2, tokens=100)        # ended after the end: not counted
    assert totals() == (3, 12)
    v.on_event({"kind": "episode_start", "instruction": "b"})
    call("b", "executor", 1)
    assert v.state()["vlm_totals"]["calls"] == 2
    assert len(v.state()["vlm"]) == 6                                             # every call is in the log
