#!/usr/bin/env python
"""An episode at a model's pace: episode wall time with the VLM's thinking overlapped with motion
(``overlap: {speculate, verify_ahead, plan_with_probe, retry_with_replan}``, motormind/episode/overlap.py)
against the plain serial loop, on the same episodes.

    MUJOCO_GL=osmesa .venv/bin/python bench/overlap.py [--latencies 5,2] [--brains oracle,noisy]
        [--tasks 0-4] [--inits 0-3] [--concurrency 5] [--out runs/bench-overlap] [--report-only] [--waits N]

Each brain answers through the real openai client and serve-brain's latency model
(configs/vlm/local-oracle.yaml, ``latency.mean_s=L``: every call held L s): the oracle, and the noisy
brain (the oracle behind the endpoint, seed-calibrated errors drawn on the client side,
``--noise seed_calibrated``: configs/noise/seed_calibrated.yaml). For each brain and latency,
``motormind eval`` runs the same libero_object episodes (task x init state pairs) twice at the same
time, serial and overlapped (so both see the same machine load), each ``--concurrency`` episodes in
flight. Printed per pair: successes, median steps, mean episode wall, the serial sum (the calls the
serial loop waits for: camera probe, Planner, Executor, Verifier, plus motion, from each episode's
record), the wall ratio (overlap / serial: of the mean walls, and the median of the per-episode
ratios), the early calls asked / used / dropped per kind and the dropped calls' share of the model
seconds, the machine's load average while the pair ran, and where each mode waited between motions
(``waits``: the waits keyed by the plans, verdicts and calls between a report and the next batch).
Goal: a wall ratio of at most 0.6 at 5 s a call with no success lost. Never fails on speed; on a
loaded machine the walls carry that load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from motormind.episode.overlap import Overlap  # noqa: E402

KINDS = tuple(f.name for f in fields(Overlap))    # speculate, verify_ahead, plan_with_probe, retry_with_replan
ON = [a for k in KINDS for a in ("--vlm-set", f"overlap.{k}=true")]
WAITED = ("probe", "planner", "executor", "verifier")      # the calls the serial loop waits for


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


def from_record(r: dict) -> tuple[float, float]:
    """(model seconds of the calls the serial loop waits for: probe, Planner, Executor, Verifier, early
    calls included; seconds from the first call, the probe's, to the first plan) from one episode's record."""
    p = Path(r.get("run_dir") or "") / "events.jsonl"
    if not p.exists():
        return float(r.get("vlm_s", 0.0) or 0.0), 0.0
    s, first, plan = 0.0, None, None
    for line in p.read_text().splitlines():
        if '"vlm_call"' not in line and '"plan"' not in line and '"vlm_probe"' not in line:
            continue
        e = json.loads(line)
        if e.get("kind") == "vlm_probe":          # the camera probe's calls (not vlm_call events): its span
            lat = float(e.get("latency_s", 0.0) or 0.0)
            first = min(first if first is not None else 1e18, float(e["t"]) - lat)
            s += lat
        elif e.get("kind") == "vlm_call":
            lat = float(e.get("latency_s", 0.0) or 0.0)
            first = min(first if first is not None else 1e18, float(e["t"]) - lat)
            if e.get("role") in WAITED:
                s += lat
        elif e.get("kind") == "plan" and plan is None:
            plan = float(e["t"])
    return s, (plan - first) if plan is not None and first is not None else 0.0


def waits(rs: list[dict]) -> list[tuple[str, int, float]]:
    """Where an episode waited between motions: for each batch (and the end), the time from the report
    before it (the episode's start for the first) to its start, keyed by what happened in between, in order:
    P (a plan arrived), V+ / V- (an accepting / rejecting verdict), E (an Executor call answered in its
    turn), U:kind / D:kind (a call asked ahead used / dropped), R:status (the report). Returns
    (key, count, seconds per episode), the largest first."""
    short = {"plan": "P", "verdict": "V"}
    out: dict = {}
    for r in rs:
        p = Path(r.get("run_dir") or "") / "events.jsonl"
        if not p.exists():
            continue
        events = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        last, seq = events[0]["t"] if events else 0.0, []
        end_t = last + float(r.get("episode_s", 0.0) or 0.0)      # the machine's end (later events: closing)
        for e in events:
            k = e.get("kind")
            if k in short:
                seq.append(short[k] + ("" if k == "plan" else "+" if e.get("achieved") else "-"))
            elif k in ("overlap_used", "overlap_dropped"):
                seq.append(("U:" if k == "overlap_used" else "D:") + e.get("overlap", ""))
            elif k == "vlm_call" and e.get("role") == "executor" and not e.get("ahead"):
                seq.append("E")
            elif k == "report":
                last, seq = e["t"], [f"R:{e.get('status', '')}"]
            elif k in ("batch", "episode_end"):
                key = " ".join(seq) + (" end" if k == "episode_end" else "")
                t = min(e["t"], end_t) if k == "episode_end" else e["t"]
                n, sec = out.get(key, (0, 0.0))
                out[key] = (n + 1, sec + max(0.0, t - last))
                seq = []
    n_eps = max(1, len(rs))
    return sorted(((k, n, sec / n_eps) for k, (n, sec) in out.items()), key=lambda x: -x[2])


def figures(rs: list[dict]) -> dict:
    walls = [float(r["episode_s"]) for r in rs]
    ov = {k: {"asked": 0, "used": 0, "dropped": 0} for k in KINDS}
    drop = {"calls": 0, "s": 0.0}
    for r in rs:
        o = r.get("overlap") or {}
        for kind in KINDS:
            for k in ("asked", "used", "dropped"):
                ov[kind][k] += int((o.get(kind) or {}).get(k, 0))
        c = o.get("dropped_cost") or {}
        drop["calls"] += int(c.get("calls", 0))
        drop["s"] += float(c.get("s", 0.0))
    rec = [from_record(r) for r in rs]
    model = [m for m, _ in rec]
    start = [st for _, st in rec]
    vlm_all = sum(float(r.get("vlm_s", 0) or 0) + float(r.get("vlm_background_s", 0) or 0) for r in rs)
    serial_sum = [m + float(r.get("motion_s", 0.0) or 0.0) for m, r in zip(model, rs)]
    return {"n": len(rs), "success": sum(bool(r["success"]) for r in rs),
            "steps_median": statistics.median([r["steps"] for r in rs]) if rs else 0,
            "calls": sum(int(r.get("vlm_calls", 0)) for r in rs),
            "wall_mean": statistics.fmean(walls) if walls else 0.0,
            "wall_median": statistics.median(walls) if walls else 0.0,
            "model_mean": statistics.fmean(model) if model else 0.0,
            "motion_mean": statistics.fmean([float(r.get("motion_s", 0) or 0) for r in rs]) if rs else 0.0,
            "serial_sum_mean": statistics.fmean(serial_sum) if serial_sum else 0.0,
            "start_mean": statistics.fmean(start) if start else 0.0,          # to the first plan
            "after_plan_mean": statistics.fmean([float(r["episode_s"]) - st for r, st in zip(rs, start)]) if rs else 0.0,
            "ahead": ov, "dropped_calls": drop["calls"], "dropped_s": drop["s"],
            "dropped_share": drop["s"] / vlm_all if vlm_all else 0.0}


class Load:
    """The 1-minute load average, sampled every 10 s while a pair runs (the machine is shared)."""

    def __init__(self):
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)
        self._t.start()

    def _run(self):
        while not self._stop.is_set():
            self.samples.append(os.getloadavg()[0])
            self._stop.wait(10)

    def stop(self) -> dict:
        self._stop.set()
        self._t.join()
        s = self.samples or [0.0]
        return {"mean": round(statistics.fmean(s), 2), "max": round(max(s), 2)}


def line(brain: str, lat: float, row: dict) -> str:
    s, o = row["serial"], row["overlap"]
    ahead = ", ".join(f"{k} {v['asked']}/{v['used']}/{v['dropped']}" for k, v in o["ahead"].items() if v["asked"])
    return (f"{brain:6s} {lat:g} s/call | serial: {s['success']}/{s['n']} ok, steps {s['steps_median']}, wall "
            f"{s['wall_mean']:.1f} s (serial sum {s['serial_sum_mean']:.1f} = model {s['model_mean']:.1f} + motion "
            f"{s['motion_mean']:.1f}), {s['calls']} calls | overlap: {o['success']}/{o['n']} ok, steps "
            f"{o['steps_median']}, wall {o['wall_mean']:.1f} s, {o['calls']} calls; asked/used/dropped: "
            f"{ahead or 'none'}; dropped {o['dropped_calls']} calls, {o['dropped_s']:.1f} s = "
            f"{o['dropped_share']:.1%} of model time | to the first plan {s['start_mean']:.1f} -> {o['start_mean']:.1f} "
            f"s, after it {s['after_plan_mean']:.1f} -> {o['after_plan_mean']:.1f} s "
            f"| wall ratio {row['ratio_mean_wall'] or float('nan'):.2f} "
            f"(per episode median {row['ratio_paired_median'] or float('nan'):.2f}; overlap wall / serial sum "
            f"{row['ratio_to_serial_sum'] or float('nan'):.2f}) | load {row['load']['mean']} (max "
            f"{row['load']['max']}), {row['bench_s']:.0f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--latencies", default="5,2")
    ap.add_argument("--brains", default="oracle,noisy")
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--tasks", default="0-4")
    ap.add_argument("--inits", default="0-3")
    ap.add_argument("--concurrency", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "runs" / "bench-overlap"))
    ap.add_argument("--waits", type=int, default=8, metavar="N",
                    help="print the N largest waits between motions, by what happened in between (0: none)")
    ap.add_argument("--report-only", action="store_true",
                    help="run nothing: print the figures of the runs already in --out (an interrupted bench's too)")
    a = ap.parse_args()
    base = Path(a.out)
    base.mkdir(parents=True, exist_ok=True)
    # a GL context per task in flight (sim/libero_pro/render.py keeps 3 by default; a worker that evicts one
    # while its other episodes render was seen to crash with more tasks than that in flight)
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa"),
           "MOTORMIND_RENDER_CONTEXTS": os.environ.get("MOTORMIND_RENDER_CONTEXTS", str(max(3, a.concurrency)))}
    print(f"bench/overlap.py: {a.suite} tasks {a.tasks} x inits {a.inits}, {a.concurrency} in flight per mode; "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f} at start", flush=True)
    table = []
    for lat in [float(x) for x in a.latencies.split(",")]:
        for brain in a.brains.split(","):
            outs = {m: base / f"{brain}-{lat:g}s-{m}" for m in ("serial", "overlap")}
            t0 = time.monotonic()
            load = None if a.report_only else Load()
            if a.report_only:
                if not all((o / "results.jsonl").exists() for o in outs.values()):
                    continue
            else:
                procs = {m: subprocess.Popen(eval_cmd(o, brain, lat, m == "overlap", a), cwd=ROOT, env=env,
                                             stdout=subprocess.DEVNULL, stderr=open(base / f"{o.name}.log", "w"))
                         for m, o in outs.items()}
                for p in procs.values():
                    p.wait()
            got = {m: rows(o) for m, o in outs.items()}
            common = set(map(key, got["serial"])) & set(map(key, got["overlap"]))
            got = {m: [r for r in rs if key(r) in common] for m, rs in got.items()}    # the same episodes
            f = {m: figures(r) for m, r in got.items()}
            ser = {key(r): float(r["episode_s"]) for r in got["serial"]}
            paired = [float(r["episode_s"]) / ser[key(r)] for r in got["overlap"] if ser.get(key(r))]
            s, o = f["serial"], f["overlap"]
            row = {"brain": brain, "latency_s": lat, "serial": s, "overlap": o,
                   "ratio_mean_wall": o["wall_mean"] / s["wall_mean"] if s["wall_mean"] else None,
                   "ratio_paired_median": statistics.median(paired) if paired else None,
                   "ratio_to_serial_sum": o["wall_mean"] / s["serial_sum_mean"] if s["serial_sum_mean"] else None,
                   "success_lost": sorted(set(key(r) for r in got["serial"] if r["success"])
                                          - set(key(r) for r in got["overlap"] if r["success"])),
                   "success_won": sorted(set(key(r) for r in got["overlap"] if r["success"])
                                         - set(key(r) for r in got["serial"] if r["success"])),
                   "load": load.stop() if load else {"mean": "-", "max": "-"}, "bench_s": round(time.monotonic() - t0, 1)}
            table.append(row)
            print(line(brain, lat, row), flush=True)
            if a.waits:
                for m, rs in got.items():
                    print(f"       where {m} waited (s per episode, count, between the report and the next batch):")
                    for k, n, sec in waits(rs)[:a.waits]:
                        print(f"         {sec:5.1f} s  {n:3d}x  {k}")
            if row["success_lost"] or row["success_won"]:
                print(f"       episodes lost with overlap {row['success_lost']}, won {row['success_won']}", flush=True)
            if not a.report_only:
                (base / "bench.json").write_text(json.dumps(table, indent=1))
    if not any(r["serial"]["n"] for r in table):
        print("no episode finished: see the .log files in", base)
    if not a.report_only:
        print(f"wrote {base / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
