#!/usr/bin/env python
"""An episode at a model's pace over ROS 2: episode wall time with the VLM's thinking overlapped with
motion (``overlap: true``: every kind of motormind/episode/overlap.py's ``Overlap``) against the plain
serial loop, each episode a `motormind launch sim` graph (the nodes as separate processes over DDS).

    MUJOCO_GL=osmesa .venv/bin/python bench/overlap_ros.py [--latency 5] [--suite libero_object]
        [--tasks 0-1] [--inits 0-1] [--out runs/bench-overlap-ros]

Every role node's brain is the openai client against its own serve-brain (configs/vlm/local-oracle.yaml,
``latency.mean_s``: every call held that long), with the sim Controller's oracle behind it over the
privileged channel (``serve: oracle`` over ROS 2, motormind/ros/base.py ``make_brain``). For each task x
init pair the serial and the overlapped graph run at the same time, on two ROS domains (so both see the
same machine load). Printed per pair and in total: success, steps, the episode's wall (the Executor's
``result.wall_s``), the serial sum (the model seconds of the calls the serial loop waits for: the camera
probe's span, the Planner's, Executor's and Verifier's calls, early ones included; plus motion), the wall
ratio (overlapped / serial), the calls made ahead asked / used / dropped per kind, and the machine's load
average. Bench only: never fails on speed; on a loaded machine the walls carry that load.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from dataclasses import fields
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from motormind.episode.overlap import Overlap  # noqa: E402
from rostest_util import free_domain  # noqa: E402  (a ROS domain nobody on this machine uses)

KINDS = tuple(f.name for f in fields(Overlap))
WAITED = ("planner", "executor", "verifier")      # the calls the serial loop waits for (and the camera probe)


def span(s: str) -> list[int]:
    a, _, b = s.partition("-")
    return list(range(int(a), int(b or a) + 1))


def vlm_config(out: Path, latency: float, overlap: bool) -> Path:
    cfg = yaml.safe_load((ROOT / "configs/vlm/local-oracle.yaml").read_text())
    cfg = {**cfg, "name": f"local-oracle-{'overlap' if overlap else 'serial'}", "latency": {"mean_s": latency},
           "overlap": overlap}
    p = out / f"vlm-{'overlap' if overlap else 'serial'}.yaml"
    p.write_text(yaml.safe_dump(cfg))
    return p


def episode(out: Path, name: str, suite: str, task: int, init: int, vlm: Path, timeout: float) -> dict:
    """One `motormind launch sim` episode: its result, the camera probe's span, the launch's output file."""
    from motormind.ros import graph
    from motormind.ros.launcher import Launcher
    from motormind.ros.probe import WATCH, Probe
    domain = free_domain(name)
    log = (out / f"{name}.log").open("w")
    launcher = Launcher("sim", {"suite": suite, "task": str(task), "init_state": str(init), "brain": "openai",
                                "vlm": str(vlm)},
                        env={**graph.ros_env(domain), "ROS_HOME": str(out / "ros"),
                             "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")}, out=log, grace_s=5)
    probe = Probe(domain_id=domain, name="bench_" + name.replace("-", "_"), watch=WATCH + ("events",))
    t = threading.Thread(target=launcher.run, daemon=True)
    t0 = time.monotonic()
    t.start()
    try:
        end = probe.wait_for("episode", lambda m: m.get("event") == "end", timeout=timeout)
        t_end = time.monotonic() - t0
        ev = list(probe.msgs["events"])
    except TimeoutError as e:
        end, t_end, ev = {"result": None, "error": str(e)}, time.monotonic() - t0, []
    finally:
        probe.close()
        launcher.stop()
        t.join(timeout=60)
        log.close()
    probe_s = sum(float(e.get("latency_s", 0) or 0) for e in ev if e.get("kind") == "vlm_probe")
    waited_s = sum(float(e.get("latency_s", 0) or 0) for e in ev if e.get("kind") == "vlm_call"
                   and e.get("role") in WAITED)
    return {"name": name, "task": task, "init": init, "result": end.get("result"), "probe_s": probe_s,
            "waited_s": waited_s,
            "launch_to_end_s": round(t_end, 1), "log": str(out / f"{name}.log")}


def load() -> float:
    return os.getloadavg()[0]


def summary(rows: list[dict]) -> dict:
    rs = [r["result"] for r in rows if r["result"]]
    ahead = {k: {"asked": 0, "used": 0, "dropped": 0} for k in KINDS}
    dropped_s = 0.0
    for r in rs:
        for k in KINDS:
            for f in ("asked", "used", "dropped"):
                ahead[k][f] += int(((r.get("overlap") or {}).get(k) or {}).get(f, 0))
        dropped_s += float(((r.get("overlap") or {}).get("dropped_cost") or {}).get("s", 0.0))
    serial_sum = [row["waited_s"] + row["probe_s"] + float(r["motion_s"]) for r, row in
                  zip(rs, [x for x in rows if x["result"]])]
    return {"n": len(rows), "ended": len(rs), "success": sum(bool(r["success"]) for r in rs),
            "steps": [r["steps"] for r in rs], "calls": sum(int(r["vlm_calls"]) for r in rs),
            "wall_mean": statistics.fmean([float(r["wall_s"]) for r in rs]) if rs else 0.0,
            "serial_sum_mean": statistics.fmean(serial_sum) if serial_sum else 0.0,
            "ahead": ahead, "dropped_s": dropped_s}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--latency", type=float, default=5.0, help="seconds every call is held (latency.mean_s)")
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--tasks", default="0-1")
    ap.add_argument("--inits", default="0-1")
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds an episode may take")
    ap.add_argument("--out", default="runs/bench-overlap-ros")
    a = ap.parse_args(argv)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    cfgs = {False: vlm_config(out, a.latency, False), True: vlm_config(out, a.latency, True)}
    rows: dict = {False: [], True: []}
    loads = []
    for task in span(a.tasks):
        for init in span(a.inits):
            got: dict = {}
            ths = [threading.Thread(target=lambda ov=ov: got.__setitem__(ov, episode(
                out, f"{'overlap' if ov else 'serial'}-t{task}-i{init}", a.suite, task, init, cfgs[ov], a.timeout)))
                for ov in (False, True)]
            for th in ths:
                th.start()
            samples = []
            while any(th.is_alive() for th in ths):
                samples.append(load())
                time.sleep(5)
            for th in ths:
                th.join()
            loads += samples
            for ov in (False, True):
                rows[ov].append(got[ov])
            s, o = got[False]["result"] or {}, got[True]["result"] or {}
            print(f"task {task} init {init}: serial {'ok' if s.get('success') else 'FAIL'} {s.get('steps')} steps "
                  f"{s.get('wall_s', 0):.1f} s | overlap {'ok' if o.get('success') else 'FAIL'} {o.get('steps')} steps "
                  f"{o.get('wall_s', 0):.1f} s | ratio {o.get('wall_s', 0) / max(1e-9, s.get('wall_s', 0)):.2f} | "
                  f"load {statistics.fmean(samples or [load()]):.1f}", flush=True)
    (out / "results.json").write_text(json.dumps({"latency": a.latency, "suite": a.suite, "rows": {
        "serial": rows[False], "overlap": rows[True]}}, indent=1))
    s, o = summary(rows[False]), summary(rows[True])
    ratio = o["wall_mean"] / s["wall_mean"] if s["wall_mean"] else 0.0
    per = [ro["result"]["wall_s"] / rs["result"]["wall_s"] for rs, ro in zip(rows[False], rows[True])
           if rs["result"] and ro["result"]]
    ahead = ", ".join(f"{k} {v['asked']}/{v['used']}/{v['dropped']}" for k, v in o["ahead"].items())
    print(f"\n{a.suite} tasks {a.tasks} x inits {a.inits}, {a.latency:g} s a call, over ROS 2 (motormind launch sim, "
          f"openai client, serve-brain, the sim Controller's oracle)")
    print(f"serial : {s['success']}/{s['n']} ok, steps {s['steps']}, wall {s['wall_mean']:.1f} s "
          f"(serial sum {s['serial_sum_mean']:.1f}), {s['calls']} calls")
    print(f"overlap: {o['success']}/{o['n']} ok, steps {o['steps']}, wall {o['wall_mean']:.1f} s, {o['calls']} calls; "
          f"ahead asked/used/dropped: {ahead}; dropped {o['dropped_s']:.1f} model s")
    print(f"wall ratio (overlap / serial): {ratio:.2f} of the means, {statistics.median(per) if per else 0:.2f} "
          f"median per episode; load average {statistics.fmean(loads or [load()]):.1f} "
          f"(max {max(loads or [load()]):.1f}) on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
