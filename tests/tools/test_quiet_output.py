"""What a person at a terminal reads (issue 36, "Output noise"): libero's [info] chatter is dropped
and its other prints kept, GL contexts are freed before the interpreter's teardown, progress lines
cut at a word boundary and name a noise profile instead of listing it."""
from __future__ import annotations

import subprocess
import sys

import pytest

from motormind.brains.scripted import ScriptedBrain
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner
from motormind.text import clip

PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move 20 mm forward",
                                           "success_criterion": "moved"}]}
B1 = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 20}, {"op": "done"}]}
EVIDENCE = ("the gripper moved twenty millimetres forward as commanded and the measured position agrees with "
            "the target within the tolerance of the profile")


def test_clip_cuts_at_a_word_boundary_with_an_ellipsis():
    assert clip("short  text\n", 40) == "short text"
    out = clip(EVIDENCE, 100)
    assert len(out) <= 100 and out.endswith("…")
    assert EVIDENCE.startswith(out[:-1]) and EVIDENCE[len(out) - 1] == " "     # a whole word before the cut
    assert clip("x" * 300, 50) == "x" * 49 + "…"                              # one word longer than the room


def test_the_verdict_progress_line_is_not_cut_mid_word():
    robot = FakeRobot(image_size=32)
    brain = ScriptedBrain({"planner": [PLAN], "executor": [B1],
                           "verifier": [{"achieved": True, "evidence": EVIDENCE}]})
    said: list[str] = []
    EpisodeRunner(robot, brain, "test task", Recorder(None), EpisodeConfig(max_batches=3, monitor=False, memory=False),
                  success_fn=lambda: False, progress=said.append).run()
    line = next(s for s in said if "verdict: achieved" in s)
    shown = line.split("verdict: achieved - ", 1)[1]
    assert shown.endswith("…") and EVIDENCE.startswith(shown[:-1])
    assert EVIDENCE[len(shown) - 1] == " ", f"cut mid-word: {line!r}"


def test_a_noisy_episodes_progress_line_names_its_profile():
    from motormind.brains.noise_profile import parse_noise
    from motormind.evaluate.jobs import Job
    from motormind.evaluate.pool import Progress
    items = parse_noise("seed_calibrated").items()
    job = Job("libero_spatial", 0, 0, noise=items)
    lines: list[str] = []
    Progress(1, 0, 0, write=lines.append)({**job.to_json(), "success": True, "outcome": "success"})
    assert len(job.key) > 150                                   # the whole profile: the key results.jsonl keeps
    assert "noise=seed_calibrated" in lines[0] and "wrong_direction=" not in lines[0]
    assert len(lines[0].split(" | ", 1)[1]) < 90, lines[0]


def test_libero_info_lines_are_dropped_and_its_other_prints_kept(capsys):
    suites = pytest.importorskip("motormind.sim.libero_pro.suites")
    pytest.importorskip("libero.libero.benchmark")
    suites.load_suite("libero_spatial")
    with suites.stdout_to_stderr():
        print("[warning] something libero means")
        print("[info] chatter")
    out, err = capsys.readouterr()
    assert "[info]" not in out + err, err
    assert "[warning] something libero means" in err and "[warning]" not in out


PROBE = """
import atexit, sys
# registered first, so it runs last: after the render module's own exit handler
atexit.register(lambda: print("contexts at exit:", sys.modules["motormind.sim.libero_pro.render"].contexts()))
import mujoco
from motormind.sim.libero_pro import render
m = mujoco.MjModel.from_xml_string('<mujoco><worldbody><light pos="0 0 1"/><geom type="box" size=".1 .1 .1"/>'
                                   '<camera name="c" pos="0 -1 0.3" xyaxes="1 0 0 0 0.3 1"/></worldbody></mujoco>')
d = mujoco.MjData(m)
class Sim:
    class model:
        _model = m
        camera_name2id = staticmethod(lambda name: 0)
    class data:
        _data = d
print("rendered", render.render(Sim, "c", 32, 32, "scene").shape)
"""


@pytest.mark.sim
def test_gl_contexts_are_freed_before_the_interpreter_tears_down():
    pytest.importorskip("robosuite")
    import os
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "MUJOCO_GL": "osmesa"})
    assert r.returncode == 0, r.stderr
    assert "rendered (32, 32, 3)" in r.stdout and "contexts at exit: 0" in r.stdout, r.stdout
    assert "Exception ignored" not in r.stderr and "GLContext.__del__" not in r.stderr, r.stderr
