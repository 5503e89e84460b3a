"""No rendered prompt keeps an unfilled placeholder. Rendering is lenient on purpose (a VLM's
answer quoted into a prompt may hold a '$'), so a context that forgot a key would leave
``${subgoal}`` in what the model reads, silently: here every prompt is rendered the way the stack
renders it - every role of an episode on the kinematic fake (a plan, batches, a rejected claim and
its replan, a repair request, the Monitor, Memory), the camera checks, the diagnostic's question -
and no ``$name`` or ``${name}`` may remain."""
from __future__ import annotations

import re
import time

import pytest

from motormind.brains.probe import point_request, probe_images
from motormind.brains.scripted import ScriptedBrain
from motormind.diagnose.role import Diagnoser
from motormind.episode.config import EpisodeConfig
from motormind.paths import prompt_dir
from motormind.profile import load_profile
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeRunner

PLACEHOLDER = re.compile(r"\$(\{\w+\}|[A-Za-z_]\w*)")
PLAN = {"subgoals": [{"id": "s1", "description": "move 20 mm forward", "success_criterion": "moved"},
                     {"id": "s2", "description": "close the gripper", "success_criterion": "closed"}]}
B1 = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 20}, {"op": "wait", "seconds": 0.1},
                   {"op": "done"}]}
B2 = {"commands": [{"op": "gripper", "action": "close"}, {"op": "done"}]}


def _unfilled(text: str) -> list[str]:
    return PLACEHOLDER.findall(text or "")


@pytest.fixture(scope="module")
def episode_requests(tmp_path_factory):
    robot = FakeRobot(image_size=32)
    brain = ScriptedBrain({"planner": [PLAN, PLAN], "executor": ["not json at all", B1, B1, B2],
                           "verifier": [{"achieved": False, "evidence": "not there"}, {"achieved": True, "evidence": "ok"},
                                        {"achieved": True, "evidence": "ok"}]})

    def hold_for_monitor(r):
        """The Monitor checks on its own thread and a batch that ends first withdraws its snapshot: a
        wait command holds until the Monitor has been asked (on a loaded machine it may come late)."""
        if r.executed and r.executed[-1].kind == "wait":
            deadline = time.monotonic() + 10
            while brain.calls("monitor") == 0 and time.monotonic() < deadline:
                time.sleep(0.005)
    robot.step_hook = hold_for_monitor
    rec = Recorder(tmp_path_factory.mktemp("prompts"))
    res = EpisodeRunner(robot, brain, "move forward, then close the gripper", rec, EpisodeConfig(max_batches=8),
                        success_fn=lambda: robot.gripper < 0.05).run()
    rec.close()
    assert res.success and res.replans == 1          # the episode went through a rejection and its replan
    if brain.calls("monitor") == 0 or brain.calls("memory") == 0:
        pytest.fail("the episode did not reach the Monitor and Memory")
    return brain.requests


def test_every_prompt_file_is_rendered_by_a_test_here():
    rendered = {"planner", "executor", "verifier", "monitor", "memory", "repair", "probe", "point", "diagnose",
                "diagnose_grounding"}    # the last rendered and checked in tests/grounding/test_diagnose_grounding.py
    assert {p.stem for p in prompt_dir().glob("*.md")} == rendered


@pytest.mark.parametrize("role", ["planner", "executor", "verifier", "monitor", "memory"])
def test_no_role_prompt_of_an_episode_keeps_a_placeholder(episode_requests, role):
    reqs = [r for r in episode_requests if r.role == role]
    assert reqs, f"no {role} call"
    for r in reqs:
        assert not _unfilled(r.system), (role, _unfilled(r.system))
        assert not _unfilled(r.user), (role, _unfilled(r.user))


def test_a_repair_request_keeps_no_placeholder(episode_requests):
    repaired = [r for r in episode_requests if r.history]
    assert repaired, "no repair request was made"
    for r in repaired:
        for turn in r.history:
            if turn.get("role") == "user":
                assert not _unfilled(turn["content"]), _unfilled(turn["content"])


def test_the_camera_checks_keep_no_placeholder():
    """The colour probe rendered by probe_images itself (its three calls: images, none, padded), and
    the coordinate check."""
    brain = ScriptedBrain({"probe": [{"schema_version": 1, "colours": ["red", "green"]}]})
    res = probe_images(brain, ["front", "wrist"], (16, 16, 3))
    assert res.answered == ["red", "green"] and brain.calls("probe") == 3
    req = point_request(64, 48, 10.0, 20.0)
    for r in brain.requests + [req]:
        assert r.system and r.user
        for text in (r.system, r.user):
            assert not _unfilled(text), (r.role, _unfilled(text))


def test_the_diagnostic_question_keeps_no_placeholder():
    brain = ScriptedBrain({"diagnose": [{"answer": "A"}]})
    q = {"id": "q1", "skill": "action", "instruction": "put the bowl on the plate", "plan": [],
         "state": {"eef_pos_mm": [400, 0, 200]}, "question": "What next?", "subgoal": None,
         "options": [{"letter": "A", "text": "move 20 mm down"}, {"letter": "B", "text": "close the gripper"}]}
    Diagnoser(brain).answer(q, {}, load_profile("libero_panda"), privileged=False)
    (r,) = brain.requests
    assert not _unfilled(r.system) and not _unfilled(r.user), (_unfilled(r.system), _unfilled(r.user))
