"""A whole MotorMind episode on the xArm6 through the unmodified SDK and the controller emulator.

The oracle cannot see the emulator's world, so a scripted brain plays the roles: pick an object of
30 mm under the tool, lift it, carry it 80 mm left, put it down and release it."""
import json

import numpy as np
import pytest

pytest.importorskip("xarm")

from motormind.brains.scripted import ScriptedBrain  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.record import Recorder  # noqa: E402
from motormind.robots.xarm6 import XArm6Robot  # noqa: E402
from motormind.runner import EpisodeConfig, EpisodeRunner  # noqa: E402
from motormind.sim.xarm_emulator import XArmEmulator, free_loopback_host  # noqa: E402

pytestmark = pytest.mark.xarm

PLAN = {"schema_version": 1, "subgoals": [
    {"id": "pick", "description": "grasp the block under the tool", "success_criterion": "block held"},
    {"id": "place", "description": "put the block 80 mm to the left", "success_criterion": "block released there"}]}
PICK = {"commands": [{"op": "gripper", "action": "open"}, {"op": "move", "direction": "down", "distance_mm": 40},
                     {"op": "gripper", "action": "close"}, {"op": "done"}]}
PLACE = {"commands": [{"op": "move", "direction": "up", "distance_mm": 40},
                      {"op": "move", "direction": "left", "distance_mm": 80},
                      {"op": "move", "direction": "down", "distance_mm": 40},
                      {"op": "gripper", "action": "open"}, {"op": "done"}]}


def test_scripted_pick_and_place_episode_over_the_emulator(tmp_path):
    emu = XArmEmulator(free_loopback_host(), 0, report_hz=20).start()
    robot = None
    try:
        robot = XArm6Robot(emu.host, load_profile("xarm6"), command_port=emu.port, stall_timeout_s=0.5)
        start = np.array(emu.snapshot()["pose_mm_deg"][:3])
        emu.set_gripper_object(30.0)
        placed = {"ok": False}

        def verify(req):
            state = json.loads(req.context["state"])
            if req.context["subgoal_id"] == "pick":
                ok = 25 < state["gripper_width_mm"] < 35          # stalled on the 30 mm block
            else:
                ok = bool(state["gripper_width_mm"] > 80 and abs(state["eef_pos_mm"][1] - (start[1] + 80)) < 2)
                placed["ok"] = ok
                emu.set_gripper_object(None)
            return {"achieved": ok, "evidence": f"gap {state['gripper_width_mm']} mm at {state['eef_pos_mm']}"}

        brain = ScriptedBrain({"planner": [PLAN], "executor": [PICK, PLACE], "verifier": verify})
        rec = Recorder(tmp_path)
        res = EpisodeRunner(robot, brain, "move the block 80 mm left", rec, EpisodeConfig(max_batches=4),
                            success_fn=lambda: placed["ok"]).run()
        rec.close()
        assert res.success and res.batches == 2 and res.replans == 0, res
        end = np.array(emu.snapshot()["pose_mm_deg"][:3])
        assert end - start == pytest.approx([0, 80, -40], abs=1.5)  # measured by the emulator, not the stack
        reports = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()
                   if '"kind": "report"' in line]
        assert [r["status"] for r in reports] == ["done", "done"]
        grip = reports[0]["results"][2]
        assert grip["achieved"]["gripper_width_mm"] == pytest.approx(30, abs=2)
    finally:
        if robot is not None:
            robot.close()
        emu.stop()
