#!/usr/bin/env python
"""An episode at a model's pace: episode wall time with the VLM's thinking overlapped with motion
(speculate + verify_ahead, motormind/episode/overlap.py) against the plain serial loop.

    MUJOCO_GL=osmesa .venv/bin/python bench/overlap.py [--latencies 5,2] [--brains oracle,noisy]
        [--tasks 0-9] [--inits 0-1] [--concurrency 4] [--out runs/bench-overlap]

Each brain answers through the real openai client and serve-brain's latency model
(configs/vlm/local-oracle.yaml, ``latency.mean_s=L``): the oracle, and the noisy brain (the oracle
behind the endpoint with seed-calibrated errors, ``--noise seed_calibrated``). For each brain and
latency, ``motormind eval`` runs the same libero_object episodes twice at the same time, serial and
overlapped (so both see the same machine load), each ``--concurrency`` episodes in flight. Printed per
pair: episodes, successes, median steps, mean and median episode wall, the wall ratio (overlap /
serial, per episode paired on its job and overall), the Executor calls asked ahead, used and dropped,
and the dropped calls' share of the VLM seconds. Goal: a wall ratio of at most 0.6 at 5 s a call
with no success lost. Never fails on speed. On a loaded machine wall figures carry that load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ON = ["--vlm-set", "overlap.speculate=true", "--vlm-set", "overlap.verify_ahead=true"]


def eval_cmd(out: Path, brain: str, latency: float, overlap: bool, a) -> list[str]:
    cmd = [sys.executable, "-m", "motormind.cli", "eval", "--suites", a.suite, "--tasks", a.tasks, "--inits", a.inits,
           "--brain", "openai", "--vlm", str(ROOT / "configs/vlm/local-oracle.yaml"),
           "--vlm-set", f"latency.mean_s={latency:g}", "--concurrency", str(a.concurrency), "--out", str(out)]
    if brain == "noisy":
        cmd += ["--noise", "seed_calibrated"]
    return cmd + (ON if overlap else [])


def rows(out: Path) -> list[dict]:
    p = out / "results.jsonl"
    return [json.loads(x) for x in p.read_text().splitlines() if x.strip()] if p.exists() else []


def key(r: dict) -> tuple:
    return (r.get("suite"), r.get("task"), r.get("init_state"), r.get("seed"))


def figures(rs: list[dict]) -> dict:
    walls = [float(r["episode_s"]) for r in rs]
    ov = {"asked": 0, "used": 0, "dropped": 0, "dropped_calls": 0, "dropped_s": 0.0}
    for r in rs:
        o = r.get("overlap") or {}
        for kind in ("speculate", "verify_ahead"):
            for k in ("asked", "used", "dropped"):
                ov[k] += int((o.get(kind) or {}).get(k, 0))
        c = o.get("dropped_cost") or {}
        ov["dropped_calls"] += int(c.get("calls", 0))
        ov["dropped_s"] += float(c.get("s", 0.0))
    vlm_s = sum(float(r.get("vlm_s", 0) or 0) + float(r.get("vlm_background_s", 0) or 0) for r in rs)
    return {"n": len(rs), "success": sum(bool(r["success"]) for r in rs),
            "steps_median": statistics.median([r["steps"] for r in rs]) if rs else 0,
            "calls": sum(int(r.get("vlm_calls", 0)) for r in rs),
            "wall_mean": statistics.fmean(walls) if walls else 0.0,
            "wall_median": statistics.median(walls) if walls else 0.0, **ov,
            "dropped_share": ov["dropped_s"] / vlm_s if vlm_s else 0.0}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latencies", default="5,2")
    ap.add_argument("--brains", default="oracle,noisy")
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--tasks", default="0-9")
    ap.add_argument("--inits", default="0-1")
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench-overlap"))
    a = ap.parse_args()
    base = Path(a.out)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")}
    table = []
    for lat in [float(x) for x in a.latencies.split(",")]:
        for brain in a.brains.split(","):
            outs = {m: base / f"{brain}-{lat:g}s-{m}" for m in ("serial", "overlap")}
            t0 = time.monotonic()
            base.mkdir(parents=True, exist_ok=True)
            procs = {m: subprocess.Popen(eval_cmd(o, brain, lat, m == "overlap", a), cwd=ROOT, env=env,
                                         stdout=subprocess.DEVNULL, stderr=open(base / f"{o.name}.log", "w"))
                     for m, o in outs.items()}
            for p in procs.values():
                p.wait()
            got = {m: rows(o) for m, o in outs.items()}
            f = {m: figures(r) for m, r in got.items()}
            ser = {key(r): float(r["episode_s"]) for r in got["serial"]}
            paired = [float(r["episode_s"]) / ser[key(r)] for r in got["overlap"] if ser.get(key(r))]
            row = {"brain": brain, "latency_s": lat, "serial": f["serial"], "overlap": f["overlap"],
                   "ratio_mean_wall": f["overlap"]["wall_mean"] / f["serial"]["wall_mean"] if f["serial"]["wall_mean"] else None,
                   "ratio_paired_median": statistics.median(paired) if paired else None,
                   "bench_s": round(time.monotonic() - t0, 1)}
            table.append(row)
            s, o = f["serial"], f["overlap"]
            print(f"{brain:6s} {lat:g} s/call  serial: {s['success']}/{s['n']} ok, steps {s['steps_median']}, "
                  f"wall mean {s['wall_mean']:.1f} s (median {s['wall_median']:.1f}), {s['calls']} calls | overlap: "
                  f"{o['success']}/{o['n']} ok, steps {o['steps_median']}, wall mean {o['wall_mean']:.1f} s "
                  f"(median {o['wall_median']:.1f}), {o['calls']} calls; ahead asked {o['asked']} used {o['used']} "
                  f"dropped {o['dropped']} ({o['dropped_calls']} calls, {o['dropped_s']:.1f} s = "
                  f"{o['dropped_share']:.1%} of VLM time) | wall ratio {row['ratio_mean_wall'] or float('nan'):.2f} "
                  f"(paired median {row['ratio_paired_median'] or float('nan'):.2f})", flush=True)
    if not any(r["serial"]["n"] for r in table):
        print("no episode finished: see the .log files in", base)
    (base / "bench.json").write_text(json.dumps(table, indent=1))
    print(f"wrote {base / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
