"""Marks reach every role's images once, in the episode loop; the raw frames are recorded beside them."""
from __future__ import annotations

import numpy as np

from motormind.brains.openai_brain import VLMConfig
from motormind.brains.scripted import ScriptedBrain
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner

PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move 20 mm forward",
                                           "success_criterion": "moved"}]}
B1 = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 20}, {"op": "done"}]}


def _episode(marks):
    robot = FakeRobot(image_size=96)
    brain = ScriptedBrain({"planner": [PLAN], "executor": [B1], "verifier": [{"achieved": True, "evidence": "ok"}]})
    brain.cfg = VLMConfig(marks=marks)               # the marks option a VLM config carries
    rec = Recorder(None)
    runner = EpisodeRunner(robot, brain, "test task", rec, EpisodeConfig(max_batches=3, monitor=False, memory=False),
                           success_fn=lambda: robot.pos[0] > 0.418)
    runner.run()
    return robot, brain, rec


def test_every_role_sees_marked_frames_and_the_record_keeps_both():
    robot, brain, rec = _episode(True)
    seen = [r for r in brain.requests if r.images]
    assert {r.role for r in seen} >= {"planner", "executor"}
    for req in seen:
        img = req.images["front"]
        assert img.shape == (96, 96, 3)
        assert np.any((img[:, :, 0] > 200) & (img[:, :, 1] < 60) & (img[:, :, 2] > 200))   # the magenta grip ring
    label, tile = rec.frames[0]
    assert tile.shape == (96, 192, 3)                          # raw | marked, side by side
    raw, marked = tile[:, :96], tile[:, 96:]
    assert not np.any((raw[:, :, 0] > 200) & (raw[:, :, 1] < 60) & (raw[:, :, 2] > 200))
    assert np.array_equal(marked, seen[0].images["front"])


def test_marks_off_in_the_vlm_config_sends_the_raw_frames():
    robot, brain, rec = _episode(False)
    seen = [r for r in brain.requests if r.images]
    assert seen
    fresh = FakeRobot(image_size=96).observe(images=True).images["front"]   # the same start, unmarked
    assert np.array_equal(seen[0].images["front"], fresh)
    assert rec.frames[0][1].shape == (96, 96, 3)               # nothing marked: one tile
