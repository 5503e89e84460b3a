"""Benchmark the LIBERO-PRO backend: construction, reset, stepping, rendering, moves.

    MUJOCO_GL=osmesa .venv/bin/python bench/bench_libero.py [--suite libero_spatial] [--task 0]

Prints each figure and its ratio to the reference figures below, measured on this stack when the
backend was written (MuJoCo 2.3.7 / NumPy 1.26, the pinned stack; docs/libero-backend.md).
Runs one simulation process.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time

os.environ.setdefault("MUJOCO_GL", "osmesa")

import numpy as np  # noqa: E402

# Reference figures (2 cores, llvmpipe), measured when the backend was written (docs/libero-backend.md).
REF = {
    "construct_s": (4.9, "env construction with a renderer (first in process; 4.9-6.6 s)"),
    "reset_s": (5.4, "hard reset with a renderer, MuJoCo 2.3.7 (5.4-6.2 s)"),
    "steps_per_s": (48.0, "env.step without render, MuJoCo 2.3.7 (0.021 s/step)"),
    "render_s_per_camera": (0.115, "sim.render per camera at 128x128"),
    "move_20": (6.0, "PD kp=3 kd=4: steps to < 1 mm for a 12.2 mm move"),
    "move_50": (12.0, "50 mm: 16 / 10 / 10 steps in x / y / z (mean 12)"),
    "move_150": (23.3, "150 mm: 32 / 18 / 20 steps in x / y / z (mean 23.3)"),
    "gripper_close": (12.0, "set_gripper(+1) until qpos steady: 11-13 steps"),
}


def _ratio(key, value):
    ref, why = REF[key]
    return f"x{value / ref:.2f} of {ref:g} ({why})"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="libero_spatial")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--init-state", type=int, default=0)
    ap.add_argument("--image-size", type=int, default=128)
    ap.add_argument("--resets", type=int, default=2)
    ap.add_argument("--more", type=int, default=3, help="further simulators built to measure memory per simulator")
    args = ap.parse_args(argv)

    from motormind.geometry import quat_to_mat
    from motormind.robot import Motion
    from motormind.sim.libero_pro import LiberoRobot

    t0 = time.perf_counter()
    robot = LiberoRobot(args.suite, args.task, args.init_state, image_size=args.image_size,
                        max_env_steps=100_000)
    total_ctor = time.perf_counter() - t0
    construct = robot.timings["construct_s"]
    print(f"versions: {robot.versions()}")
    print(f"task: {args.suite}/{args.task} init {args.init_state}: {robot.language_instruction!r}")
    print(f"env construction:      {construct:7.2f} s  {_ratio('construct_s', construct)}")
    print(f"  constructor total:   {total_ctor:7.2f} s  (construction + first reset + 10 settle steps)")

    first = robot.timings["reset_s"]
    print(f"first reset (hard):    {first:7.2f} s  {_ratio('reset_s', first)} (no render context: built on first image)")
    resets = []
    for _ in range(args.resets):
        t = time.perf_counter()
        robot.reset()
        resets.append(time.perf_counter() - t)
    r_med = statistics.median(resets)
    print(f"later resets ({robot.timings['reset_kind']}):  {r_med:7.2f} s  x{first / r_med:.1f} faster than the "
          f"first; all: " + ", ".join(f"{x:.2f}" for x in resets))

    env = robot._env
    n = 200
    a = np.zeros(7)
    a[6] = -1
    t = time.perf_counter()
    for _ in range(n):
        env.step(a)
    raw_sps = n / (time.perf_counter() - t)
    print(f"env.step, no render:   {raw_sps:7.1f} steps/s ({1000 / raw_sps:.1f} ms/step)  "
          f"{_ratio('steps_per_s', raw_sps)}")

    ev = threading.Event()
    o = robot.observe()
    hold = Motion("wait", o.eef_pos_m, quat_to_mat(o.eef_quat_xyzw), seconds=n * 0.05)
    t = time.perf_counter()
    res = robot.execute(hold, ev)
    servo_sps = res.steps / (time.perf_counter() - t)
    print(f"servoed step (wait):   {servo_sps:7.1f} steps/s (backend overhead included)")

    t = time.perf_counter()
    for _ in range(20):
        robot.observe()
    print(f"observe() no images:   {(time.perf_counter() - t) / 20 * 1000:7.2f} ms")
    t = time.perf_counter()
    robot.observe(images=True)               # the first image builds the scene's render context
    print(f"first observe(images): {time.perf_counter() - t:7.2f} s  (builds the render context the scene's "
          f"simulators share, sim/libero_pro/render.py)")
    reps = 5
    t = time.perf_counter()
    for _ in range(reps):
        robot.observe(images=True)
    per_obs = (time.perf_counter() - t) / reps
    per_cam = per_obs / len(robot.camera_names)
    print(f"observe(images=True):  {per_obs:7.3f} s for {len(robot.camera_names)} cameras at "
          f"{args.image_size}^2 = {per_cam:.3f} s/camera  {_ratio('render_s_per_camera', per_cam)}")

    robot.reset()
    steps = {20: [], 50: [], 150: []}
    errs = []
    for dist in (20, 50, 150):
        for axis in range(3):
            for sign in (+1, -1):
                o = robot.observe()
                p0, r0 = o.eef_pos_m.copy(), quat_to_mat(o.eef_quat_xyzw)
                d = np.zeros(3)
                d[axis] = sign * dist / 1000
                res = robot.execute(Motion("move", p0 + d, r0, max_steps=80), ev)
                got = robot.observe().eef_pos_m
                errs.append(np.linalg.norm(got - (p0 + d)) * 1000)
                steps[dist].append(res.steps if res.converged else float("nan"))
    print("moves (converged = within 1 mm, i.e. half the 2 mm profile tolerance, and < 0.5 mm/step):")
    for dist in (20, 50, 150):
        med = statistics.median(steps[dist])
        per_axis = " ".join(f"{'xyz'[i // 2]}{'+-'[i % 2]}:{s}" for i, s in enumerate(steps[dist]))
        print(f"  {dist:3d} mm: median {med:5.1f} steps  {_ratio(f'move_{dist}', med)}  [{per_axis}]")
    print(f"  final error: max {max(errs):.2f} mm, median {statistics.median(errs):.2f} mm")

    o = robot.observe()
    p, r = o.eef_pos_m, quat_to_mat(o.eef_quat_xyzw)
    gc = robot.execute(Motion("gripper", p, r, gripper=0.0), ev)
    go = robot.execute(Motion("gripper", p, r, gripper=1.0), ev)
    gh = robot.execute(Motion("gripper", p, r, gripper=0.5), ev)
    print(f"gripper close (empty): {gc.steps} steps ({gc.note})  {_ratio('gripper_close', gc.steps)}")
    print(f"gripper open:          {go.steps} steps ({go.note})")
    print(f"gripper to 0.5:        {gh.steps} steps ({gh.note})")

    # memory: what one more simulator of the suite adds, images rendered (motormind eval --concurrency)
    more, before = [], _rss_mb()
    for task in range(1, 1 + args.more):
        more.append(LiberoRobot(args.suite, task % 10, 0, image_size=args.image_size))
        more[-1].observe(images=True)
    if more:
        print(f"resident memory:       {_rss_mb():7.0f} MB with {1 + len(more)} simulators; "
              f"{(_rss_mb() - before) / len(more):.0f} MB each after the first (tasks 1-{args.more}, images "
              f"rendered; reference: 1.9 GB a process with its own renderer)")
    for r in more:
        r.close()
    robot.close()
    return 0


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    sys.exit(main())
