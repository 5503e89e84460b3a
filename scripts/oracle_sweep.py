#!/usr/bin/env python
"""Oracle-brain success over a grid of LIBERO-PRO tasks x init states, with episode wall times.

    .venv/bin/python scripts/oracle_sweep.py --suites libero_spatial libero_object --tasks 0-4 --inits 0-1

Prints a Markdown table and writes runs/sweep-<time>/results.jsonl (one line per episode; rerunning
with the same --out skips episodes already there). Results come from the ORACLE brain, which reads
privileged simulator state: they are an upper bound for the stack, not a VLM's score.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from motormind.ranges import parse_ints as _range

os.environ.setdefault("MUJOCO_GL", "osmesa")


def main(argv=None) -> int:
    from motormind.session.open import open_episode
    from motormind.session.setup import libero_setup
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suites", nargs="+", default=["libero_spatial", "libero_object"])
    ap.add_argument("--tasks", default="0-4")
    ap.add_argument("--inits", default="0-1")
    ap.add_argument("--out", default=None)
    ap.add_argument("--no-images", action="store_true")
    a = ap.parse_args(argv)
    out = Path(a.out or f"runs/sweep-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    res_path = out / "results.jsonl"
    done = {}
    if res_path.exists():
        for line in res_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["suite"], r["task"], r["init_state"])] = r
    grid = [(s, t, i) for s in a.suites for t in _range(a.tasks) for i in _range(a.inits)]
    t0 = time.monotonic()
    for n, key in enumerate(grid, 1):
        if key in done:
            continue
        s, t, i = key
        setup = libero_setup(s, t, i, out=str(out / f"{s}_t{t}_i{i}"), images=not a.no_images)
        summ = open_episode(setup, progress=lambda m: None)
        row = {k: summ[k] for k in ("suite", "task", "init_state", "success", "outcome", "reason", "steps",
                                    "step_budget", "batches", "replans", "verifier_rejections", "vlm_calls",
                                    "episode_wall_s", "wall_s", "brain", "privileged", "instruction")}
        with open(res_path, "a") as f:
            f.write(json.dumps(row) + "\n")
        done[key] = row
        print(f"[{n}/{len(grid)} {time.monotonic() - t0:6.0f}s] {s} t{t} i{i}: "
              f"{'OK  ' if row['success'] else 'FAIL'} {row['outcome']:<12} steps {row['steps']:>3}/{row['step_budget']} "
              f"wall {row['episode_wall_s']:.1f}s", file=sys.stderr, flush=True)
    rows = [done[k] for k in grid]
    print(f"\nOracle brain (PRIVILEGED simulator state), {len(rows)} episodes; record: {res_path}\n")
    print("| suite | task | init | success | outcome | steps | batches | replans | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['suite']} | {r['task']} | {r['init_state']} | {'yes' if r['success'] else 'no'} | {r['outcome']} "
              f"| {r['steps']}/{r['step_budget']} | {r['batches']} | {r['replans']} | {r['episode_wall_s']:.1f} |")
    print()
    for s in a.suites:
        rs = [r for r in rows if r["suite"] == s]
        ok = sum(r["success"] for r in rs)
        walls = sorted(r["episode_wall_s"] for r in rs)
        print(f"{s}: {ok}/{len(rs)} success, median episode wall {walls[len(walls) // 2]:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
