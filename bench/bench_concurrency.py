#!/usr/bin/env python
"""Evaluation throughput against a VLM-like endpoint: episodes per hour at several concurrencies.

    MUJOCO_GL=osmesa .venv/bin/python bench/bench_concurrency.py [--latency 5] [--levels 1,4,16,32]
        [--workers 2] [--cpu-concurrency 4] [--out runs/bench-concurrency]

One standalone ``motormind serve-brain --backend oracle --latency L`` per measurement (a fresh
server, so its /stats counts that run alone), the oracle behind it, LIBERO-PRO episodes with
images (libero_spatial, tasks 0-9) run by ``motormind eval --brain openai --vlm remote-oracle``
through the real openai client over HTTP:

- the CPU-bound rate: latency 0, ``--cpu-concurrency`` episodes in flight (the cores saturated);
- for each level C: latency L, C episodes in flight (``--workers`` processes x C/workers each),
  ``--rounds`` x C episodes (each slot runs that many one after another: with one round the rate
  is C over one episode's time under load, simulator builds and the ramp up included, not the
  steady state the bound describes);
- a rate is episodes / (last end - first start) from the result rows (simulator builds included,
  Python start-up and suite checks not); one episode's time T1 at latency L is the median episode
  (build or reset included) at level 1;
- the bound at level C is min(CPU-bound rate, C x 3600 / T1); the ratio is rate / bound (goal >= 0.8);
- resident memory: the eval process tree's peak RSS (/proc), and per concurrent episode the
  slope between the two highest levels;
- the 10,000-episode protocol (4 base suites + 16 variants x 10 tasks x 50 init states) projected
  on one machine and on N such machines at the best measured rate, and at the paper's 223.4 s an
  episode.

Prints a table and writes ``bench.json`` in ``--out``. Never fails on speed; a level whose run
fails is reported as such.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = 10_000          # 20 suites x 10 tasks x 50 init states
PAPER_EPISODE_S = 223.4    # the paper's mean episode with a real VLM


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def tree_rss_mb(pid: int) -> float:
    """Resident memory of ``pid`` and all its descendants, MB (Linux /proc)."""
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            kids.setdefault(ppid, []).append(int(d))
        except (OSError, ValueError, IndexError):
            continue
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        todo += kids.get(p, [])
        try:
            with open(f"/proc/{p}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1]) / 1024
        except OSError:
            pass
    return total


def serve(latency: float, log: Path):
    port = free_port()
    cmd = [sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "oracle", "--port", str(port),
           "--quiet", *(["--latency", f"{latency:g}"] if latency > 0 else [])]
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(log, "w"), cwd=ROOT)
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 60
    while time.monotonic() < end:
        try:
            urllib.request.urlopen(url + "/health", timeout=1).read()
            return p, url
        except OSError:
            time.sleep(0.2)
    p.kill()
    raise RuntimeError(f"serve-brain did not start (see {log})")


def episodes(n: int) -> tuple[str, str]:
    """--tasks / --inits for exactly ``n`` episodes over libero_spatial's tasks: T tasks x n / T init
    states, T the largest divisor of ``n`` up to 10 (a count that is not a multiple of the slots
    leaves a tail of a few episodes running alone, which the rate would count as the level's)."""
    t = max(d for d in range(1, 11) if n % d == 0)
    return f"0-{t - 1}", f"0-{n // t - 1}"


def measure(name: str, latency: float, concurrency: int, n: int, workers: int, out: Path) -> dict:
    d = out / name
    w = max(1, min(workers, concurrency))
    k = math.ceil(concurrency / w)
    srv, url = serve(latency, out / f"{name}.serve.log")
    tasks, inits = episodes(n)
    cmd = [sys.executable, "-m", "motormind.cli", "eval", "--suites", "libero_spatial", "--tasks", tasks,
           "--inits", inits, "--brain", "openai", "--vlm", "remote-oracle", "--vlm-set", f"base_url={url}/v1",
           "--vlm-set", "timeout_s=120", "--workers", str(w), "--concurrency", str(k), "--out", str(d)]
    print(f"[bench] {name}: latency {latency:g} s, {w} worker(s) x {k} = {w * k} in flight, "
          f"tasks {tasks} inits {inits}", flush=True)
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=open(out / f"{name}.eval.log", "w"), cwd=ROOT,
                         env={**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")})
    peak, loads = [0.0], []

    def sample():
        while p.poll() is None:
            peak[0] = max(peak[0], tree_rss_mb(p.pid))
            loads.append(os.getloadavg()[0])
            time.sleep(1.0)
    th = threading.Thread(target=sample, daemon=True)
    th.start()
    rc = p.wait()
    wall = time.monotonic() - t0
    th.join(2)
    try:
        st = json.loads(urllib.request.urlopen(url + "/stats", timeout=5).read())
    except OSError:
        st = {}
    srv.terminate()
    srv.wait(10)
    res = {"name": name, "latency_s": latency, "in_flight": w * k, "workers": w, "concurrency": k, "rc": rc,
           "wall_s": round(wall, 1), "peak_rss_mb": round(peak[0]), "server": st,
           "load_avg": round(statistics.mean(loads), 1) if loads else None}   # the machine's, others' work included
    path = d / "results.jsonl"
    rows = [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []
    if rc != 0 or not rows:
        said = [x for x in (out / f"{name}.eval.log").read_text().splitlines()
                if x.strip() and not x.startswith("[info]")][-1:] or [""]
        if rc < 0:
            said = [f"killed by signal {-rc} (e.g. out of memory) after {wall:.0f} s"]
        print(f"[bench] {name}: FAILED (rc {rc}, {len(rows)} rows): {said[0]}", flush=True)
        return {**res, "episodes": len(rows), "error": said[0]}
    span = max(r["ended_at"] for r in rows) - min(r["started_at"] for r in rows)
    ep = [r["ended_at"] - r["started_at"] for r in rows]
    res.update(episodes=len(rows), success=sum(bool(r["success"]) for r in rows), span_s=round(span, 1),
               per_hour=round(len(rows) * 3600 / span, 1), episode_s=round(statistics.median(ep), 1),
               vlm_calls=round(statistics.mean(r["vlm_calls"] for r in rows), 1),
               errors=sum(r["outcome"] in ("error", "worker_died") for r in rows))
    print(f"[bench] {name}: {res['episodes']} episodes ({res['success']} succeeded) in {span:.0f} s: "
          f"{res['per_hour']:.0f}/h; median episode {res['episode_s']:.0f} s; peak RSS {res['peak_rss_mb']} MB; "
          f"server peak in flight {st.get('peak_in_flight')}; load average {res['load_avg']}", flush=True)
    return res


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--latency", type=float, default=5.0, help="serve-brain's fixed latency per call, s")
    ap.add_argument("--levels", default="1,4,16,32", help="episodes in flight to measure")
    ap.add_argument("--workers", type=int, default=2, help="eval worker processes (the cores)")
    ap.add_argument("--cpu-concurrency", type=int, default=8, help="episodes in flight for the CPU-bound rate")
    ap.add_argument("--cpu-episodes", type=int, default=24, help="episodes for the CPU-bound rate")
    ap.add_argument("--min-episodes", type=int, default=2, help="episodes at least per level")
    ap.add_argument("--rounds", type=int, default=3, help="episodes per slot at each level (C x rounds in all)")
    ap.add_argument("--machines", default="1,10,50", help="cluster sizes to project on")
    ap.add_argument("--out", default="runs/bench-concurrency")
    a = ap.parse_args()
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    levels = [int(x) for x in a.levels.split(",")]
    results = {"cpu": measure("cpu", 0.0, a.cpu_concurrency, a.cpu_episodes, a.workers, out)}
    for c in levels:
        n = max(c * a.rounds, a.min_episodes) if c > 1 else a.min_episodes    # level 1 gives T1
        results[f"c{c}"] = measure(f"c{c}", a.latency, c, n, a.workers, out)
    cpu_rate = results["cpu"].get("per_hour")
    t1 = results.get(f"c{levels[0]}", {}).get("episode_s") if levels[0] == 1 else None
    print(f"\nserve-brain latency {a.latency:g} s per call (fixed), oracle behind it, images on; "
          f"CPU-bound rate (latency 0, {results['cpu']['in_flight']} in flight): {cpu_rate} episodes/h")
    print(f"one episode at {a.latency:g} s latency (level 1, median): T1 = {t1} s\n")
    print("| in flight | episodes | success | span s | episodes/h | median episode s | bound/h | ratio | "
          "peak RSS MB | server peak in flight | load avg |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for c in levels:
        r = results[f"c{c}"]
        if "per_hour" not in r:
            print(f"| {c} | not run: {r.get('error', '')[:160]} | | | | | | | | | |")
            continue
        bound = min(cpu_rate or math.inf, c * 3600 / t1) if t1 else None
        r["bound_per_hour"] = round(bound, 1) if bound else None
        r["ratio"] = round(r["per_hour"] / bound, 2) if bound else None
        print(f"| {c} | {r['episodes']} | {r['success']} | {r['span_s']} | {r['per_hour']:.0f} | {r['episode_s']} | "
              f"{bound:.0f} | {r['ratio']:.2f} | {r['peak_rss_mb']} | {r['server'].get('peak_in_flight')} | "
              f"{r['load_avg']} |"
              if bound else f"| {c} | {r['episodes']} | {r['success']} | {r['span_s']} | {r['per_hour']:.0f} | "
              f"{r['episode_s']} | - | - | {r['peak_rss_mb']} | {r['server'].get('peak_in_flight')} | "
              f"{r['load_avg']} |")
    ok = [results[f"c{c}"] for c in levels if "per_hour" in results[f"c{c}"]]
    if len(ok) >= 2:
        hi, lo = ok[-1], ok[-2]
        per_ep = (hi["peak_rss_mb"] - lo["peak_rss_mb"]) / max(1, hi["in_flight"] - lo["in_flight"])
        results["rss_mb_per_episode"] = round(per_ep)
        print(f"\nresident memory per concurrent episode: {per_ep:.0f} MB "
              f"(peak RSS {lo['peak_rss_mb']} MB at {lo['in_flight']}, {hi['peak_rss_mb']} MB at {hi['in_flight']})")
    if ok:
        best = max(ok, key=lambda r: r["per_hour"])
        print(f"\nprojection of the {PROTOCOL}-episode protocol at the best measured rate "
              f"({best['per_hour']:.0f}/h, {best['in_flight']} in flight, {a.latency:g} s a call):")
        for m in (int(x) for x in a.machines.split(",")):
            print(f"  {m} machine(s): {PROTOCOL / (m * best['per_hour']):.1f} h")
        if cpu_rate:
            need = math.ceil(cpu_rate * PAPER_EPISODE_S / 3600)
            print(f"with the paper's {PAPER_EPISODE_S} s episodes: one at a time {PROTOCOL * PAPER_EPISODE_S / 3600:.0f} h; "
                  f"{need} in flight reach this machine's CPU-bound {cpu_rate:.0f}/h: "
                  + ", ".join(f"{m} machine(s) {PROTOCOL / (m * cpu_rate):.1f} h"
                              for m in (int(x) for x in a.machines.split(","))))
    (out / "bench.json").write_text(json.dumps(results, indent=2))
    print(f"\n[bench] figures: {out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
