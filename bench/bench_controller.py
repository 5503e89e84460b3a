#!/usr/bin/env python
"""Controller overhead per command: validation alone, and validation + dispatch on the kinematic fake.

    .venv/bin/python bench/bench_controller.py

Prints medians over repeated batches, per command, and the ratio of the Controller's own time to
one LIBERO control step (50 ms) - the budget its overhead competes with. Never fails on speed.
"""
from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from motormind.controller import Controller  # noqa: E402
from motormind.robot import MotionResult  # noqa: E402
from motormind.robots.fake import FakeRobot  # noqa: E402

BATCH = {"schema_version": 1, "batch_id": "b", "subgoal_id": "s", "commands": [
    {"op": "move", "direction": "forward", "distance_mm": 12.2},
    {"op": "move", "vector": [0.3, -0.4, 0.1], "distance_mm": 20},
    {"op": "rotate", "axis": "yaw", "angle_deg": 10},
    {"op": "gripper", "action": "close"},
    {"op": "move", "direction": "back", "distance_mm": 12.2},
    {"op": "rotate", "axis": "yaw", "angle_deg": -10},
    {"op": "gripper", "width": 1.0},
    {"op": "done"}]}


class InstantRobot(FakeRobot):
    """The fake, minus the motion: execute returns at once, so only the Controller is timed."""

    def execute(self, motion, estop):
        self.pos = motion.target_pos_m.copy()
        self.rot = motion.target_rot.copy()
        if motion.gripper is not None:
            self.gripper = motion.gripper
        return MotionResult(1)


def bench(fn, n: int) -> float:
    ts = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def main() -> int:
    n_cmd = len(BATCH["commands"])
    robot = InstantRobot()
    c = Controller(robot)
    obs = robot.observe()
    import json
    text = json.dumps(BATCH)
    v = bench(lambda: c.validate(text, obs), 2000) / n_cmd
    d = bench(lambda: c.run(BATCH), 1000) / n_cmd
    fake = FakeRobot()
    cf = Controller(fake)
    f = bench(lambda: cf.run(BATCH), 200) / n_cmd
    step = 0.05
    print("Controller overhead per command (median over batches of 8 commands)")
    print(f"  validation only (parse + limits + box and tilt chain): {v * 1e6:5.1f} us")
    print(f"  validation + dispatch + report (instant robot):     {d * 1e6:8.1f} us")
    print(f"  full run on the kinematic fake (includes its steps): {f * 1e6:8.1f} us")
    print(f"  ratio of Controller time to one 50 ms LIBERO control step: {d / step:.2e} "
          f"({step / d:,.0f} commands fit in one step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
