"""The manual VLM endpoint (motormind/serve/manual.py): a person or an agent answers as the VLM from a
folder. Whole episodes on the kinematic fake arm, every role call through the real openai client and
the in-process serve-brain (configs/vlm/manual.yaml); the answerer is a test thread that reads the
folder alone, as a person would."""
import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from waiting import wait_for

from motormind.brains.base import BrainRequest
from motormind.errors import ConfigError
from motormind.record import Recorder
from motormind.registry import BrainConfig, build_brain
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner
from motormind.schemas import PROBE
from motormind.serve import manual

PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move 60 mm forward",
                                          "success_criterion": "the tool is 60 mm further forward"}]}
MOVE = {"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1",
        "commands": [{"op": "move", "direction": "forward", "distance_mm": 30.0}]}
DONE = {"schema_version": 1, "subgoal_id": "s1", "commands": [{"op": "done"}]}
SECRET = "crimson_teapot_7f3"          # a privileged object name only the simulator's scene holds


def colours_of(folder: Path) -> list:
    """The probe's answer from the images in the folder (what a person sees in them)."""
    import cv2
    from motormind.brains.probe import name_colour
    req = manual.read_request(folder)
    out = []
    for im in req["images"]:
        bgr = cv2.imread(str(folder / im["file"]), cv2.IMREAD_COLOR)
        out.append(name_colour(bgr[:, :, ::-1]))
    return out or ["none"]


class Answerer(threading.Thread):
    """Answers the requests under a queue root from the folders alone: ``policy(role, folder, request)``
    gives the answer's text (a dict is written as JSON), or None to leave the request unanswered."""

    def __init__(self, root, policy):
        super().__init__(daemon=True)
        self.root, self.policy = Path(root), policy
        self.seen: list = []
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            for e in manual.waiting(self.root):
                if e["path"] in self.seen:
                    continue
                self.seen.append(e["path"])
                folder = Path(e["path"])
                text = self.policy(e["role"], folder, manual.read_request(folder))
                if text is not None:
                    manual.answer(folder, text)
            time.sleep(0.02)

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.join(5)


def default_policy(executor_answers=None):
    calls = {"executor": 0}
    answers = list(executor_answers or [MOVE, MOVE])

    def policy(role, folder, req):
        if role == "probe":
            return {"schema_version": 1, "colours": colours_of(folder)}
        if role == "planner":
            return PLAN
        if role == "executor":
            calls["executor"] += 1
            return answers[min(calls["executor"], len(answers)) - 1]
        if role == "verifier":
            return {"schema_version": 1, "achieved": True, "evidence": "the report says 30 mm forward"}
        if role == "monitor":
            return {"schema_version": 1, "cancel": False, "reason": "fine"}
        if role == "memory":
            return {"schema_version": 1, "summary": "moving forward"}
        return None
    return policy


class SceneRobot(FakeRobot):
    """A fake arm with a privileged scene, as a simulator has (its snapshot names a secret object)."""

    def scene(self):
        class Scene:
            def snapshot(self):
                return {"objects": {SECRET: {"pos_m": [0.123456, -0.654321, 0.9]}}, "goal_state": [["On", SECRET]]}
        return Scene()


def episode(tmp_path, policy, sets=(), max_batches=6, robot=None, keep_bodies=False, after=None):
    """-> (result, robot, events, brain, queue root)."""
    from collections import deque
    rec = Recorder(tmp_path / "run")
    robot = robot or FakeRobot(image_size=48)
    brain = build_brain(BrainConfig("openai", vlm="manual", vlm_set=("image_size=64", *sets)), robot,
                        robot.profile, rec)
    if keep_bodies:
        brain.server.bodies = deque(maxlen=10000)          # every request body the server received
    x0 = float(robot.pos[0])
    try:
        with Answerer(tmp_path / "run" / "queue", policy):
            res = EpisodeRunner(robot, brain, "move 60 mm forward", rec, EpisodeConfig(max_batches=max_batches),
                                success_fn=lambda: robot.pos[0] - x0 > 0.055).run()
            if after is not None:
                after(brain)
    finally:
        brain.close()
        rec.close()
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    return res, robot, events, brain, tmp_path / "run" / "queue"


def folders(queue: Path, role=None) -> list:
    return sorted(p for p in queue.iterdir() if p.is_dir() and (role is None or p.name.split("-")[1] == role))


# -- the round trip -------------------------------------------------------------------------------
def test_round_trip_folder_answer_batch_and_the_next_request_carries_the_report(tmp_path):
    res, robot, events, brain, queue = episode(tmp_path, default_policy())
    assert res.outcome == "success", res.reason           # the two answered batches moved the arm 60 mm
    assert not brain.privileged and brain.name == "openai:manual"
    planner = folders(queue, "planner")[0]
    assert {p.name for p in planner.iterdir()} == {"request.json", "messages.json", "messages.md", "schema.json",
                                                    "images", "answer.json", "status.json"}
    req = manual.read_request(planner)
    assert req["role"] == "planner" and req["state"] == "answered" and req["answer_within_s"] == 900.0
    # the messages as sent: the system prompt, then the user turn (its text, each image's label and file)
    msgs = req["messages"]
    assert [m["role"] for m in msgs] == ["system", "user"] and msgs[0]["content"].startswith("You are the Planner")
    parts = msgs[1]["content"]
    assert parts[1] == {"type": "text", "text": "Image 'front':"} and parts[2]["image_url"]["url"] == "images/front.png"
    png = (planner / "images" / "front.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and req["images"][0] == {
        "camera": "front", "file": "images/front.png", "bytes": len(png), "width": 64, "height": 64}
    called = [e for e in events if e["kind"] == "vlm_call" and e["role"] == "planner"][0]
    assert msgs[0]["content"] == called["system"] and parts[0]["text"] == called["user"]   # exactly as the model got it
    md = (planner / "messages.md").read_text()
    assert called["system"] in md and called["user"] in md and "![front](images/front.png)" in md
    assert req["schema"]["required"] == ["subgoals"]
    # the second executor request: the report of the first batch, and what the episode has left
    ex = folders(queue, "executor")
    assert len(ex) == 2
    first, second = (manual.read_request(f) for f in ex)
    assert "none yet" in first["messages"][1]["content"][0]["text"].split("Last execution report:")[1][:40]
    report = second["messages"][1]["content"][0]["text"].split("Last execution report:")[1].split("Last verifier")[0]
    assert "b1" in report and "30" in report and "done" in report
    b1, b2 = first["budget"], second["budget"]
    assert b1["steps_used"] == 0 and b2["steps_used"] > 0 and b2["batches_used"] == 2   # the one asked for counts
    assert b2["wall_budget_s"] == 900.0 and 0 < b2["wall_s_left"] <= 900.0
    assert json.loads((queue / "waiting.json").read_text())["waiting"] == []
    assert brain.answered_by["planner"] == brain.answered_by["executor"] == brain.answered_by["probe"] == "manual"
    assert set(brain.answered_by.values()) == {"manual"}


def test_a_malformed_answer_goes_through_the_repair_round_as_a_new_request(tmp_path):
    bad = "Sure! <think>forward</think> {\"schema_version\": 1, \"commands\": [{\"op\": \"move\", "
    res, robot, events, brain, queue = episode(tmp_path, default_policy([bad, MOVE, MOVE]))
    assert res.outcome == "success", res.reason
    repair = [e for e in events if e["kind"] == "repair_request" and e["role"] == "executor"]
    assert len(repair) == 1
    first, again = folders(queue, "executor")[:2]
    assert again.name.endswith("-executor-repair1")
    msgs = manual.read_request(again)["messages"]
    assert [m["role"] for m in msgs] == ["system", "user", "assistant", "user"]
    said = 'Sure!  {"schema_version": 1, "commands": [{"op": "move",'       # the thinking stripped, as a model's
    assert msgs[2]["content"] == said and repair[0]["error"] in msgs[3]["content"]
    calls = [e for e in events if e["kind"] == "vlm_call" and e["role"] == "executor"]
    assert [c["ok"] for c in calls[:2]] == [False, True] and calls[0]["response"] == said
    assert calls[0]["meta"]["quirks"][0]["quirk"] == "think_block"


def test_a_late_answer_times_out_like_a_slow_server(tmp_path):
    from motormind.brains.openai_brain import VLMError
    rec = Recorder(tmp_path / "run")
    robot = FakeRobot()
    brain = build_brain(BrainConfig("openai", vlm="manual", vlm_set=("timeout_s=1",)), robot, robot.profile, rec)
    late = []

    def policy(role, folder, req):
        late.append(folder)
        return None                                          # answered only after the client gave up
    try:
        with Answerer(tmp_path / "run" / "queue", policy):
            with pytest.raises(VLMError, match="timeout"):
                brain.respond(BrainRequest("planner", "planner", "You are the Planner.", "plan", {}, {}, {}))
            folder = late[0]
            wait_for(lambda: manual.read_request(folder)["state"] == "expired", 10, "the request to expire")
            with pytest.raises(ValueError, match="expired"):
                manual.answer(folder, PLAN)
    finally:
        brain.close()
        rec.close()
    assert manual.waiting(tmp_path / "run" / "queue") == []
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in events if e["kind"].startswith("manual_")] == ["manual_request", "manual_expired"]


def test_the_folder_holds_nothing_the_prompt_does_not(tmp_path):
    with pytest.raises(ConfigError, match="send_scene: must be false with serve: manual"):
        build_brain(BrainConfig("openai", vlm="manual", vlm_set=("send_scene=true",)), SceneRobot(), None,
                    Recorder(None))
    with pytest.raises(ConfigError, match="send_context: must be false"):
        build_brain(BrainConfig("openai", vlm="manual", vlm_set=("send_context=true",)), SceneRobot(), None,
                    Recorder(None))
    res, robot, events, brain, queue = episode(tmp_path, default_policy(), robot=SceneRobot(image_size=48),
                                               keep_bodies=True)
    assert res.outcome == "success"
    bodies = list(brain.server.bodies)
    assert len(bodies) == len(folders(queue))              # every request the server got is a folder
    for b in bodies:                                       # the wire carried no context and no scene
        assert set(b["motormind"]) == {"role", "prompt_name", "session", "timeout_s", "budget"}
        assert SECRET not in json.dumps(b)
    prompts = {e["system"] for e in events if e["kind"] == "vlm_call" and e.get("system")} | \
        {e["user"] for e in events if e["kind"] == "vlm_call" and e.get("user")}
    for f in folders(queue):
        for p in f.rglob("*"):
            if p.suffix in (".json", ".md"):
                text = p.read_text()
                assert SECRET not in text and "0.123456" not in text, p
        req = json.loads((f / "request.json").read_text())
        assert set(req) <= {"schema_version", "id", "role", "attempt", "created_unix", "created", "answer_within_s",
                            "answer_by_unix", "budget", "images", "messages", "readable", "schema", "answer",
                            "how_to_answer"}
        assert set(req["budget"]) == {"steps_used", "step_budget", "steps_left", "wall_s_used", "wall_budget_s",
                                      "wall_s_left", "batches_used", "batch_budget"}
        # every text of the messages is the prompt as rendered (or, in a repair round, the answer and
        # the repair request), nothing else
        msgs = json.loads((f / "messages.json").read_text())
        texts = [m["content"] if isinstance(m["content"], str) else
                 next(p["text"] for p in m["content"] if p["type"] == "text") for m in msgs[:2]]
        if req["role"] not in ("probe",):
            assert texts[0] in prompts and texts[1] in prompts, f


def test_fixed_answers_are_recorded_as_such_and_never_reach_the_folder(tmp_path):
    with pytest.raises(ConfigError, match="auto.verifier: no fixed answer"):
        manual.parse_auto("verifier=yes")
    with pytest.raises(ConfigError, match="auto.monitor: unknown fixed answer 'maybe'"):
        manual.parse_auto({"monitor": "maybe"})
    from motormind.roles.monitor import Monitor
    cancels = []

    def ask_monitor(brain):              # the Monitor's call, as it makes it mid-batch
        m = Monitor(brain)
        try:
            cancels.append(m.ask({"instruction": "move 60 mm forward", "batch": "[]", "state": "{}"}))
        finally:
            m.close()
    res, robot, events, brain, queue = episode(
        tmp_path, default_policy(), sets=("auto.monitor=no-cancel", "auto.memory=none", "auto.probe=look"),
        after=ask_monitor)
    assert res.outcome == "success"
    assert cancels[0].value["cancel"] is False
    assert {f.name.split("-")[1] for f in folders(queue)} == {"planner", "executor"}
    assert brain.answered_by == {"probe": "auto:look", "planner": "manual", "executor": "manual",
                                 "monitor": "auto:no-cancel", "memory": "auto:none"}
    by = {e["role"]: e["by"] for e in events if e["kind"] == "vlm_answered_by"}
    assert by == brain.answered_by
    assert [e["by"] for e in events if e["kind"] == "manual_answer" and e["role"] == "memory"][0] == "auto:none"
    probe = [e for e in events if e["kind"] == "vlm_probe"][0]
    assert probe["verdict"] == "ok"


def test_two_concurrent_episodes_keep_their_queues_apart(tmp_path):
    from motormind.evaluate.jobs import Job
    from motormind.evaluate.pool import run_inline
    rows = []
    jobs = [Job("fake", 0, i, brain="openai", backend="fake", vlm="manual",
                vlm_set=(f"queue={tmp_path / 'q'}", "image_size=32", "auto.monitor=no-cancel", "auto.memory=none",
                         "auto.probe=look")) for i in (0, 1)]
    both, together = threading.Barrier(2, timeout=30), []

    def release(folder):
        try:
            both.wait()
            together.append(folder.parent.name)
        except threading.BrokenBarrierError:
            pass
        manual.answer(folder, PLAN)

    def policy(role, folder, req):
        if role == "planner":            # the two episodes' planners wait for each other: both run at once
            threading.Thread(target=release, args=(folder,), daemon=True).start()
            return None
        if role == "executor":
            return DONE
        return {"schema_version": 1, "achieved": True, "evidence": "claimed"}
    with Answerer(tmp_path / "q", policy):
        run_inline(jobs, str(tmp_path / "out"), rows.append, concurrency=2)
    assert len(rows) == 2 and len(set(together)) == 2      # two planners waited at once, one per queue
    subs = sorted(p for p in (tmp_path / "q").iterdir() if p.is_dir())
    assert [p.name for p in subs] == sorted(Path(r["run_dir"]).name for r in rows)
    for sub in subs:                     # each episode's queue: its own requests, numbered from 1
        names = [p.name for p in folders(sub)]
        assert names[0] == "0001-planner" and len([n for n in names if "planner" in n]) == 1
        assert json.loads((sub / "waiting.json").read_text())["waiting"] == []
    for r in rows:
        by = dict(r["answered_by"])
        assert by.pop("monitor", "auto:no-cancel") == "auto:no-cancel"    # asked only if a batch lasts long enough
        assert by == {"probe": "auto:look", "planner": "manual", "executor": "manual", "verifier": "manual",
                      "memory": "auto:none"}
        assert r["brain_label"] == "openai:manual" and r["privileged"] is False


def test_clients_without_a_run_directory_get_a_queue_each_under_the_root(tmp_path):
    """The ROS 2 role nodes have no run directory: each node names its own queue under the root,
    so no two servers rewrite one waiting.json or number their requests over each other."""
    cfg = BrainConfig(type="openai", vlm="manual", vlm_set=(f"queue={tmp_path / 'q'}", "auto.probe=look"))
    brains = [build_brain(cfg, None, FakeRobot().profile, None, queue_name=n) for n in ("planner", "executor")]
    try:
        assert [b.manual.queue for b in brains] == [tmp_path / "q" / "planner", tmp_path / "q" / "executor"]
    finally:
        for b in brains:
            b.close()


def test_an_answer_is_read_only_once_whole_under_its_name(tmp_path):
    """``answer.json.tmp`` (half-written) is never read; the rename to ``answer.json`` delivers it
    (a direct call, without a server: the messages rebuilt as the openai brain sends them)."""
    brain = manual.ManualBrain(tmp_path, poll_s=0.02)
    got = []
    img = np.zeros((16, 24, 3), dtype=np.uint8)
    req = BrainRequest("probe", "probe", "You are the Probe.", "Name the colour.", PROBE, {"wrist": img}, {})
    t = threading.Thread(target=lambda: got.append(brain.respond(req)), daemon=True)
    t.start()
    try:
        entry = wait_for(lambda: manual.waiting(tmp_path), 10, "the request")[0]
        folder = Path(entry["path"])
        assert entry["role"] == "probe" and manual.read_request(folder)["images"][0]["width"] == 24
        (folder / "answer.json.tmp").write_text('{"schema_version": 1, "colo')       # half-written
        time.sleep(0.3)
        assert not got and manual.read_request(folder)["state"] == "waiting"
        (folder / "answer.json.tmp").write_text('{"schema_version": 1, "colours": ["black"]}')
        (folder / "answer.json.tmp").rename(folder / "answer.json")
        t.join(10)
        assert got[0].text == '{"schema_version": 1, "colours": ["black"]}' and got[0].brain == "manual"
        assert manual.read_request(folder)["state"] == "answered" and manual.waiting(tmp_path) == []
        with pytest.raises(ValueError, match="already answered"):
            manual.answer(folder, "{}")
    finally:
        brain.close()


def test_serve_brain_manual_command_line(tmp_path, capsys):
    from motormind.cli import main
    assert main(["serve-brain", "--backend", "manual"]) == 2
    assert "--backend manual needs --queue DIR" in capsys.readouterr().err
    assert main(["serve-brain", "--queue", str(tmp_path)]) == 2
    assert "--queue: only --backend manual has a queue (not oracle)" in capsys.readouterr().err
    assert main(["serve-brain", "--backend", "manual", "--queue", str(tmp_path), "--auto", "monitor=sure"]) == 2
    assert "--auto.monitor: unknown fixed answer 'sure' (known: no-cancel)" in capsys.readouterr().err


@pytest.mark.sim
def test_libero_episode_folder_holds_no_object_name_the_prompt_lacks(tmp_path):
    """A LIBERO-PRO episode answered from the folder: the simulator's object names that no prompt
    holds are nowhere in the folder; the images are the cameras' PNGs as sent; the budget is the suite's."""
    from motormind.profile import load_profile
    from motormind.registry import BrainConfig, build_robot
    from motormind.session.open import open_episode
    from motormind.session.setup import libero_setup
    brain = BrainConfig("openai", vlm="manual", vlm_set=("image_size=128", "auto.probe=look", "auto.monitor=no-cancel",
                                                         "auto.memory=none"))
    setup = libero_setup("libero_spatial", 0, 1, brain=brain, image_size=128, episode=EpisodeConfig(max_batches=2),
                         out=str(tmp_path / "run"), media=False)
    robot = build_robot(setup.robot, load_profile(setup.profile))
    small = {"schema_version": 1, "commands": [{"op": "move", "direction": "up", "distance_mm": 10.0}]}
    try:
        with Answerer(tmp_path / "run" / "queue", default_policy([small, small])):
            s = open_episode(setup, progress=lambda m: None, robot=robot)
        names = list(robot.scene().object_names)
    finally:
        robot.close()
    assert s["outcome"] == "batch_budget" and s["privileged"] is False and s["brain"] == "openai:manual"
    assert s["answered_by"] == {"probe": "auto:look", "planner": "manual", "executor": "manual",
                                "memory": "auto:none"} | ({"monitor": "auto:no-cancel"} if "monitor" in
                                                          s["answered_by"] else {})
    events = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    prompts = " ".join(e.get("system", "") + e.get("user", "") for e in events if e["kind"] == "vlm_call")
    hidden = [n for n in names if n not in prompts]
    assert hidden                                            # the scene knows names no prompt says
    queue = tmp_path / "run" / "queue"
    texts = " ".join(p.read_text() for p in queue.rglob("*") if p.suffix in (".json", ".md"))
    assert not [n for n in hidden if n in texts]
    first, second = (manual.read_request(f) for f in folders(queue, "executor"))
    assert [(i["camera"], i["file"], i["width"]) for i in second["images"]] == [
        ("agentview", "images/agentview.png", 128), ("robot0_eye_in_hand", "images/robot0_eye_in_hand.png", 128)]
    assert first["budget"]["steps_used"] == 0 < second["budget"]["steps_used"] <= s["steps"]
    assert second["budget"]["step_budget"] == s["step_budget"] == 220


def test_the_index_says_when_no_request_will_come_and_never_the_outcome(tmp_path):
    """An answerer polls waiting.json; once the episode's brain has closed it says so (the trials'
    answerers otherwise waited on a marker of their own), without saying how the episode ended."""
    b = manual.ManualBrain(tmp_path / "q")
    assert json.loads((tmp_path / "q" / "waiting.json").read_text())["closed"] is False
    b.close()
    index = json.loads((tmp_path / "q" / "waiting.json").read_text())
    assert index["closed"] is True and index["waiting"] == []
    assert not {"outcome", "success"} & set(index)
