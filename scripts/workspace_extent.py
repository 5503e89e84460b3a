"""Measure where LIBERO-PRO tasks put the targets a grip must reach, against the libero_panda
workspace box (configs/robots/libero_panda.yaml).

For every task of the given suites (init state 0 and any others asked for), it builds the scene and
collects, in the robot's base frame (mm): every object's grasp heights (its top, 3 cm below it,
its bottom + 11 mm), every region's centre at a thin object's grasp height (its surface + 11 mm)
and its top + 15 cm (where a carried object is lowered from), and every articulated fixture's
handle parts. It prints the extent per axis and the points outside the profile's box, and writes the measurement as JSON (tests/data/libero_workspace.json
by default: the extent per task) for tests/brains/test_oracle_sim.py.

    MUJOCO_GL=osmesa .venv/bin/python scripts/workspace_extent.py --suites base --inits 0
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MUJOCO_GL", "osmesa")

BASE = ["libero_spatial", "libero_object", "libero_goal", "libero_10"]


def targets(scene) -> list[tuple[str, list[float]]]:
    w = scene.world()
    out = []
    for n, b in w["bodies"].items():
        lo, hi = b["lo"], b["hi"]
        cx, cy = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
        if b["kind"] == "object":
            for z in (hi[2], hi[2] - 0.03, lo[2] + 0.011):
                out.append((f"object {n}", [cx, cy, z]))
    for n, r in w["regions"].items():
        c = r["centre"]
        out.append((f"region {n} (a thin object's grasp on it)", [c[0], c[1], c[2] + 0.011]))
        out.append((f"region {n} (lowering from)", [c[0], c[1], r["hi"][2] + 0.15]))
    for a in w["articulations"]:
        for p in a["parts"]:
            out.append((f"part {a['joint']}/{p['name']}", list(p["c"])))
    return [(k, [round(v * 1000.0, 1) for v in p]) for k, p in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suites", nargs="+", default=["base"])
    ap.add_argument("--tasks", default="0-9")
    ap.add_argument("--inits", default="0")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parents[1] / "tests" / "data" / "libero_workspace.json"))
    a = ap.parse_args(argv)
    from motormind.profile import load_profile
    from motormind.ranges import parse_ints
    from motormind.sim.libero_pro.backend import LiberoRobot
    suites = []
    for s in a.suites:
        suites += BASE if s == "base" else [f"{b}_{p}" for b in BASE for p in ("lan", "object", "swap", "task")] \
            if s == "pro" else [s]
    prof = load_profile("libero_panda")
    rows, outside = [], []
    for suite in suites:
        for task in parse_ints(a.tasks):
            robot = None
            for init in parse_ints(a.inits):
                if robot is None:
                    robot = LiberoRobot(suite, task, init, image_size=32)
                else:
                    robot.reset(init)
                for what, p in targets(robot.scene()):
                    rows.append({"suite": suite, "task": task, "init": init, "what": what, "mm": p})
                    bad = prof.in_workspace(p)
                    if bad:
                        outside.append((suite, task, init, what, p, bad))
                        print("OUTSIDE", suite, task, init, what, p, bad, file=sys.stderr)
            robot.close()
            print(f"{suite}/{task}: {len(rows)} points so far, {len(outside)} outside", file=sys.stderr)
    ext = {ax: [min(r["mm"][i] for r in rows), max(r["mm"][i] for r in rows)] for i, ax in enumerate("xyz")}
    print(json.dumps({"extent_mm": ext, "workspace_mm": {k: list(v) for k, v in prof.workspace_mm.items()}}))
    for o in outside:
        print("OUTSIDE", *o)
    per_task: dict = {}
    for r in rows:
        k = f"{r['suite']}/{r['task']}"
        e = per_task.setdefault(k, {"lo": list(r["mm"]), "hi": list(r["mm"])})
        e["lo"] = [min(x, y) for x, y in zip(e["lo"], r["mm"])]
        e["hi"] = [max(x, y) for x, y in zip(e["hi"], r["mm"])]
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"about": "target extents per task, base frame, mm (scripts/workspace_extent.py)",
                                       "suites": suites, "inits": a.inits, "extent_mm": ext, "tasks": per_task},
                                      indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
