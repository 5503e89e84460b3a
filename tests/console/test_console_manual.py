"""The console and the manual VLM endpoint (docs/console.md, docs/manual-vlm.md): an in-process
episode on the kinematic fake arm with configs/vlm/manual.yaml, its requests listed on the console
and answered over HTTP by the operator in control, for any role. The answer goes into the request's
folder and takes the path any model's answer takes."""
import json
import threading
from pathlib import Path

import pytest
from console_client import ConsoleClient
from waiting import wait_for, written_events

from motormind.console.manual import ManualQueue, QueueError
from motormind.console.session import ConsoleSession
from motormind.record import Recorder
from motormind.registry import BrainConfig, build_brain
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig
from motormind.serve import manual

TOKEN = "manual-t0ken"
PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move 30 mm forward",
                                          "success_criterion": "the tool is 30 mm further forward"}]}
MOVE = {"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1",
        "commands": [{"op": "move", "direction": "forward", "distance_mm": 30.0}, {"op": "done"}]}
# the probe, the Monitor and Memory get fixed answers: the test answers the Planner and the Executor
AUTO = ("auto.probe=look", "auto.monitor=no-cancel", "auto.memory=none", "image_size=64")


class Episode:
    """An in-process episode under the console, its brain the manual endpoint, run on a thread."""

    def __init__(self, tmp_path, sets=()):
        self.robot = FakeRobot(image_size=48)
        self.rec = Recorder(tmp_path / "run")
        self.console = ConsoleSession(self.robot, port=0, token=TOKEN, frames=False)
        self.console.runtime.watch(self.rec)
        self.brain = build_brain(BrainConfig("openai", vlm="manual", vlm_set=(*AUTO, *sets)), self.robot,
                                 self.robot.profile, self.rec)
        self.rec("episode_start", instruction="move 30 mm forward", brain=self.brain.name, privileged=False)
        x0 = float(self.robot.pos[0])
        self.runner = self.console.runner(self.brain, "move 30 mm forward", self.rec, EpisodeConfig(max_batches=3),
                                          success_fn=lambda: self.robot.pos[0] - x0 > 0.025)
        self.result = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.client = ConsoleClient(self.console.url, TOKEN)
        self.queue = tmp_path / "run" / "queue"

    def _run(self):
        self.result = self.runner.run()

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.runner.stop("the test is over")
        self.brain.manual.close()                 # a request still waiting ends (closed): the runner stops
        self.thread.join(20)
        self.console.detach()
        self.brain.close()
        self.console.close()
        self.rec.close()

    def listed(self, role=None):
        """The waiting requests the console's state lists (of ``role``)."""
        items = (self.client.state().get("manual") or {}).get("waiting") or []
        return [i for i in items if role is None or i["role"] == role]

    def events(self, kind):
        return written_events(self.rec.dir / "events.jsonl", kind)


def test_a_planner_request_listed_opened_and_answered_from_the_console_then_the_episode_goes_on(tmp_path):
    with Episode(tmp_path) as ep:
        item = wait_for(lambda: ep.listed("planner"), what="the planner's request on the console")[0]
        st = ep.client.state()
        assert st["manual"]["queue"] == str(ep.queue.resolve()) and st["manual_used"]
        assert item["id"] == "0001-planner" and item["attempt"] == 0
        assert 0 <= item["age_s"] < item["answer_by_unix"] - item["created_unix"]
        assert 0 < item["time_left_s"] <= 900
        assert item["budget"]["batches_used"] == 0 and item["budget"]["wall_budget_s"] > 0

        code, opened = ep.client.act("manual_open", {"id": item["id"]})
        assert code == 200, opened
        req = opened["request"]
        sent = manual.read_request(ep.queue / item["id"])
        assert req["role"] == "planner" and req["state"] == "waiting"
        assert req["messages"] == sent["messages"]                        # system and user, as sent
        assert [m["role"] for m in req["messages"]][:2] == ["system", "user"]
        assert req["schema"] == sent["schema"] and "subgoals" in json.dumps(req["schema"])
        assert req["images"] and all(i["url"].startswith("data:image/png;base64,") for i in req["images"])
        parts = [p for m in req["messages"] if isinstance(m["content"], list) for p in m["content"]]
        assert {p["image_url"]["url"] for p in parts if p["type"] == "image_url"} == {i["file"] for i in req["images"]}

        code, out = ep.client.act("manual_answer", {"id": item["id"], "answer": json.dumps(PLAN)})
        assert code == 200 and out["role"] == "planner", out
        # the episode goes on: the plan is taken, and the Executor's request is the next one listed
        ex = wait_for(lambda: ep.listed("executor"), what="the executor's request after the plan")[0]
        assert [e["subgoals"][0]["id"] for e in ep.events("plan")] == ["s1"]
        assert manual.read_request(ep.queue / item["id"])["state"] == "answered"
        code, out = ep.client.act("manual_answer", {"id": ex["id"], "answer": MOVE})
        assert code == 200, out
        wait_for(lambda: ep.events("report"), what="the batch answered from the console to run")
        assert ep.events("report")[0]["status"] == "done"
        assert ep.robot.pos[0] * 1000 == pytest.approx(430, abs=2)       # 30 mm forward of 400
        wait_for(lambda: ep.result is not None, what="the episode to end")
        assert ep.result.success, ep.result
        acts = [(e["action"], e["ok"]) for e in ep.events("operator_action")]
        assert acts == [("manual_open", True), ("manual_answer", True), ("manual_answer", True)]


def test_not_json_is_refused_before_anything_is_written_and_a_schema_miss_is_repaired(tmp_path):
    with Episode(tmp_path) as ep:
        item = wait_for(lambda: ep.listed("planner"), what="the planner's request")[0]
        code, out = ep.client.act("manual_answer", {"id": item["id"], "answer": "{\"subgoals\": [ }"})
        assert code == 400 and out["error"].startswith("answer"), out
        code, out = ep.client.act("manual_answer", {"id": item["id"], "answer": "[1, 2]"})
        assert code == 400 and "one JSON object" in out["error"], out
        assert not (ep.queue / item["id"] / manual.ANSWER).exists()       # nothing written
        # JSON, but not the schema: the normal path's repair round asks again (a new request)
        code, out = ep.client.act("manual_answer", {"id": item["id"], "answer": {"schema_version": 1, "plan": "go"}})
        assert code == 200, out
        rep = wait_for(lambda: [i for i in ep.listed("planner") if i["attempt"] == 1],
                       what="the planner's repair request")[0]
        assert rep["id"] == "0002-planner-repair1" and [i["id"] for i in ep.listed()] == [rep["id"]]
        code, opened = ep.client.act("manual_open", {"id": rep["id"]})
        assert "subgoals" in json.dumps(opened["request"]["messages"][-1])     # the repair request's error


def test_open_and_answer_need_the_token_and_control_the_list_is_read_only_for_all(tmp_path):
    with Episode(tmp_path) as ep:
        item = wait_for(lambda: ep.listed("planner"), what="the planner's request")[0]
        viewer = ConsoleClient(ep.console.url, None, "viewer")
        assert [i["id"] for i in viewer.state()["manual"]["waiting"]] == [item["id"]]     # anyone sees the list
        for action, body in (("manual_open", {"id": item["id"]}), ("manual_answer", {"id": item["id"], "answer": PLAN})):
            code, out = viewer.act(action, body)
            assert code == 401 and "token" in out["error"], out
        code, _ = ep.client.act("claim")                                  # the operator holds control
        assert code == 200
        other = ConsoleClient(ep.console.url, TOKEN, "other")            # the token, but not control
        code, out = other.act("manual_answer", {"id": item["id"], "answer": PLAN})
        assert code == 409 and "in control" in out["error"], out
        assert not (ep.queue / item["id"] / manual.ANSWER).exists()
        refused = [e for e in ep.events("operator_action") if not e["ok"]]
        assert [e["action"] for e in refused] == ["manual_open", "manual_answer", "manual_answer"]
        # a name that is not a request folder under the queue is refused, never read
        for bad in ("../run", "/etc", "0001-planner/../../x", "nope"):
            code, out = ep.client.act("manual_open", {"id": bad})
            assert code == 404 and out["error"].startswith("id:"), (bad, out)


def test_an_answer_to_an_expired_request_is_refused_with_the_reason(tmp_path):
    with Episode(tmp_path, sets=("roles.planner.timeout_s=1",)) as ep:
        item = wait_for(lambda: ep.listed("planner"), what="the planner's request")[0]
        assert item["time_left_s"] <= 1.0
        wait_for(lambda: manual.read_request(ep.queue / item["id"])["state"] == "expired", what="it to expire")
        wait_for(lambda: not ep.listed(), what="the list to drop it")
        code, out = ep.client.act("manual_answer", {"id": item["id"], "answer": PLAN})
        assert code == 409 and "expired" in out["error"] and "never read" in out["error"], out
        assert item["id"] in out["error"] and str(ep.queue) not in out["error"]
        assert not (ep.queue / item["id"] / manual.ANSWER).exists()
        st = ep.client.state()
        assert any("expired" in a["text"] for a in st["alerts"])


def test_the_queue_past_its_time_refuses_before_the_server_marks_it(tmp_path):
    """Past ``answer_by_unix`` the client has given up: the answer is refused even if the server has
    not yet written ``expired`` (it waits a grace second longer)."""
    q = tmp_path / "q"
    (q / "0001-planner").mkdir(parents=True)
    (q / "0001-planner" / "request.json").write_text(json.dumps({"role": "planner", "answer_by_unix": 1.0}))
    for name, body in (("messages.json", []), ("schema.json", {})):
        (q / "0001-planner" / name).write_text(json.dumps(body))
    mq = ManualQueue()
    mq.watch(q)
    try:
        with pytest.raises(QueueError, match=r"expired.*never read") as e:
            mq.answer("0001-planner", PLAN)
        assert e.value.status == 409
    finally:
        mq.close()
    assert not (q / "0001-planner" / manual.ANSWER).exists()


def test_without_a_queue_the_console_says_so(tmp_path):
    mq = ManualQueue()
    snap = mq.snapshot()
    assert snap["queue"] is None and "not the manual endpoint" in snap["note"]
    mq.watch(None, "the queue is not reachable from this console: start it with --manual-queue DIR")
    assert "--manual-queue" in mq.snapshot()["note"]
    with pytest.raises(QueueError, match="no manual VLM queue") as e:
        mq.open("0001-planner")
    assert e.value.status == 404
    pushed = []
    mq = ManualQueue(pushed.append, poll_s=3600)             # polled by hand here
    mq.watch(tmp_path / "later")
    assert "does not exist here (yet)" in mq.snapshot()["note"]
    (tmp_path / "later").mkdir()
    mq.poll()
    assert mq.snapshot()["note"] == "" and pushed[-1]["note"] == ""    # said once it is there
    mq.close()


# -- the page ---------------------------------------------------------------------------------------
@pytest.mark.browser
def test_page_shows_a_waiting_request_and_answering_it_there_brings_the_next(tmp_path):
    """Debian chromium (Playwright): the operator submits an instruction, the Planner's request
    appears in the page's list, is opened (messages, images) and answered there; the Executor's
    request appears next. Screenshot in test-artifacts/console/."""
    sync_api = pytest.importorskip("playwright.sync_api")
    from test_console_browser import ARTIFACTS, chromium_path

    from motormind.console.session import EpisodeHost
    robot = FakeRobot(image_size=48)
    make = lambda rec: build_brain(BrainConfig("openai", vlm="manual", vlm_set=AUTO), robot,  # noqa: E731
                                   robot.profile, rec)
    host = EpisodeHost(robot, make, tmp_path / "runs", port=0, token=TOKEN, frame_hz=0).start()
    try:
        with sync_api.sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=[
                "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
            try:
                page = browser.new_context(viewport={"width": 1500, "height": 1100}, bypass_csp=True).new_page()
                page.goto(host.session.server.control_url)
                assert page.is_hidden("#manual")                   # no manual endpoint yet: no panel
                page.fill("#instruction", "move 30 mm forward")
                page.click("#form-instruction button")
                page.wait_for_selector("#manual-list tr[data-role=planner]", timeout=20000)
                assert "left" in page.inner_text("#manual-list tr[data-role=planner]")
                page.click("#manual-list tr[data-role=planner] button.manual-open-btn")
                page.wait_for_selector("#manual-messages details.msg-user img[data-camera]", timeout=10000)
                assert "you are the planner" in page.inner_text("#manual-title")
                assert "subgoals" in page.text_content("#manual-schema")
                page.fill("#manual-answer", json.dumps(PLAN))
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(ARTIFACTS / "manual-request-open.png"), full_page=True)
                page.click("#manual-send")
                page.wait_for_selector("#manual-list tr[data-role=executor]", timeout=20000)
                assert "manual_answer: answered" in page.inner_text("#manual-result")
                assert page.is_hidden("#manual-open") and page.is_visible("#manual-result")
                page.screenshot(path=str(ARTIFACTS / "manual-next-request.png"), full_page=True)
            finally:
                browser.close()
    finally:
        host.close()
    plans = [e for f in (tmp_path / "runs").rglob("events.jsonl") for e in written_events(f, "plan")]
    assert [p["subgoals"][0]["id"] for p in plans] == ["s1"]


# -- over ROS 2: motormind console --ros --manual-queue DIR ------------------------------------------
def _ros_console(tmp_path, *extra):
    import re
    import subprocess
    import sys
    import time
    from rostest_util import free_domain
    log = tmp_path / f"console{len(extra)}.log"
    out = open(log, "w")
    cli = str(Path(sys.executable).with_name("motormind"))             # the installed command
    proc = subprocess.Popen([cli, "console", "--ros", "--port", "0", "--token", TOKEN,
                             "--profile", "fake", "--domain-id", str(free_domain("manual")), *extra],
                            stdout=out, stderr=subprocess.STDOUT, env={**__import__("os").environ,
                                                                      "ROS_HOME": str(tmp_path / "ros")})
    t_end = time.monotonic() + 60
    while not (m := re.search(r"console: (http://\S+/)  token: ", log.read_text())):
        assert time.monotonic() < t_end and proc.poll() is None, log.read_text()[-3000:]
        time.sleep(0.1)
    return proc, ConsoleClient(m.group(1), TOKEN)


def test_over_ros_the_named_queue_is_listed_and_answered_and_without_one_the_page_says_so(tmp_path):
    pytest.importorskip("rclpy")
    from motormind.brains.base import BrainRequest
    from motormind.schemas import PLANNER
    queue = tmp_path / "q"
    brain = manual.ManualBrain(queue)
    got = []
    asked = threading.Thread(target=lambda: got.append(brain.respond_with(
        BrainRequest("planner", "planner", "You are the Planner.", "plan it", PLANNER), {"timeout_s": 60})))
    proc, client = _ros_console(tmp_path, "--manual-queue", str(queue))
    try:
        asked.start()
        item = wait_for(lambda: (client.state().get("manual") or {}).get("waiting"), what="the request over ROS")[0]
        assert item["role"] == "planner" and client.state()["transport"] == "ros2"
        code, out = client.act("manual_answer", {"id": item["id"], "answer": PLAN})
        assert code == 200, out
        asked.join(10)
        assert json.loads(got[0].text) == PLAN and got[0].brain == "manual"
    finally:
        brain.close()
        proc.terminate()
        proc.wait(30)
    proc, client = _ros_console(tmp_path)                 # no queue named: the page says why it lists nothing
    try:
        m = client.state()["manual"]
        assert m["queue"] is None and "not reachable from this console" in m["note"] and "--manual-queue" in m["note"]
        code, out = client.act("manual_open", {"id": "0001-planner"})
        assert code == 404 and "no manual VLM queue" in out["error"]
    finally:
        proc.terminate()
        proc.wait(30)


def test_the_launch_argument_and_the_console_option_name_the_queue(tmp_path, capsys):
    from motormind.ros import graph
    _, cfg = graph.nodes("sim", {"console": "true", "console_manual_queue": str(tmp_path / "q")})
    assert cfg.console.manual_queue == str(tmp_path / "q")
    assert graph.nodes("sim", {"console": "true"})[1].console.manual_queue == ""
    from motormind.cli import main
    assert main(["console", "--robot", "fake", "--manual-queue", str(tmp_path / "q")]) != 0
    assert "--manual-queue: only with --ros" in capsys.readouterr().err
