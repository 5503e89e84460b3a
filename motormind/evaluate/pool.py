"""Run jobs: in worker processes on this machine, or on a Ray cluster. Same rows either way.

Local workers (spawned processes) each keep one simulator open and take the episodes of one task at
a time from a shared queue (one build per task, resets between its init states);
a worker announces a job before it starts, so when a worker dies its job is known, rerun on a fresh
worker (up to ``max_attempts`` times) and recorded as ``worker_died`` if it keeps killing workers.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from pathlib import Path
from typing import Callable

from .jobs import Job, run_job


def _run_dir(out_dir: str, job: Job) -> str:
    name = job.key.replace("/", "_").replace("=", "").replace(",", "+")
    return str(Path(out_dir) / "episodes" / name)


def _worker(wid: int, jobs, results, out_dir: str) -> None:
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    cache: dict = {}
    while True:
        group = jobs.get()
        if group is None:
            break
        results.put(("group", wid, [j.key for j in group], os.getpid()))
        for job in group:
            results.put(("start", wid, job.key, os.getpid()))
            try:
                row = run_job(job, _run_dir(out_dir, job), cache)
                results.put(("done", wid, job.key, row))
            except Exception as e:  # noqa: BLE001 - an episode error is a result, not a crash
                results.put(("error", wid, job.key, {"error": f"{type(e).__name__}: {e}",
                                                     "traceback": traceback.format_exc()[-4000:]}))
    if cache.get("robot") is not None:
        cache["robot"].close()


def _groups(jobs: list[Job]) -> list[list[Job]]:
    """Consecutive jobs of one suite and task go to one worker together: it builds the simulator once."""
    out: list[list[Job]] = []
    for j in jobs:
        if out and (out[-1][0].suite, out[-1][0].task) == (j.suite, j.task):
            out[-1].append(j)
        else:
            out.append([j])
    return out


def _error_row(job: Job, outcome: str, reason: str) -> dict:
    return {**job.to_json(), "success": False, "outcome": outcome, "reason": reason, "steps": 0, "batches": 0,
            "replans": 0, "verifier_rejections": 0, "controller_rejections": 0, "vlm_calls": 0, "vlm_s": 0.0,
            "motion_s": 0.0, "episode_s": 0.0, "job_s": 0.0, "overhead_s": 0.0, "privileged": False}


def run_local(jobs: list[Job], out_dir: str, workers: int, on_row: Callable[[dict], None],
              max_attempts: int = 2) -> None:
    ctx = mp.get_context("spawn")
    jq, rq = ctx.Queue(), ctx.Queue()
    by_key = {j.key: j for j in jobs}
    pending = len(jobs)
    groups = _groups(jobs)
    for g in groups:
        jq.put(g)
    procs: dict[int, mp.Process] = {}
    inflight: dict[int, str] = {}
    assigned: dict[int, list] = {}        # worker -> keys of its group not finished yet
    next_id = 0

    def spawn():
        nonlocal next_id
        p = ctx.Process(target=_worker, args=(next_id, jq, rq, out_dir), daemon=True)
        p.start()
        procs[next_id] = p
        next_id += 1

    for _ in range(min(workers, len(groups))):
        spawn()
    try:
        while pending:
            try:
                msg = rq.get(timeout=0.5)
            except queue.Empty:
                msg = None
            for wid, p in list(procs.items()):      # a dead worker: rerun its episode elsewhere
                if p.is_alive():
                    continue
                del procs[wid]
                key = inflight.pop(wid, None)
                rest = [k for k in assigned.pop(wid, []) if k != key]
                if rest:                                  # the group's episodes it never started
                    jq.put([by_key[k] for k in rest])
                if key is not None:
                    job = by_key[key]
                    if job.attempt + 1 < max_attempts:
                        job = Job(**{**job.__dict__, "attempt": job.attempt + 1})
                        by_key[key] = job
                        jq.put([job])
                    else:
                        on_row(_error_row(job, "worker_died",
                                          f"the worker died {max_attempts} times (exit code {p.exitcode})"))
                        pending -= 1
                if pending > len(procs):
                    spawn()
            if msg is None:
                continue
            kind, wid, key, data = msg
            if kind == "group":
                assigned[wid] = list(key)
                continue
            if kind == "start":
                inflight[wid] = key
                continue
            inflight.pop(wid, None)
            if key in assigned.get(wid, []):
                assigned[wid].remove(key)
            job = by_key[key]
            row = data if kind == "done" else _error_row(job, "error", data["error"])
            if kind == "error":
                row["traceback"] = data["traceback"]
            on_row(row)
            pending -= 1
    finally:
        for _ in procs:
            jq.put(None)
        for p in procs.values():
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


def run_ray(jobs: list[Job], out_dir: str, address: str | None, on_row: Callable[[dict], None],
            workers: int | None = None) -> None:
    try:
        import ray
    except ImportError:
        from ..errors import ConfigError
        raise ConfigError("--ray: Ray is not installed (pip install 'ray[default]'), or drop --ray to use "
                         "local workers") from None
    ray.init(address=address or None, ignore_reinit_error=True, log_to_driver=False,
             **({"num_cpus": workers} if workers and not address else {}))

    @ray.remote(max_retries=1)
    def remote(job: Job) -> dict:
        os.environ.setdefault("MUJOCO_GL", "osmesa")
        try:
            return run_job(job, _run_dir(out_dir, job), None)
        except Exception as e:  # noqa: BLE001
            return _error_row(job, "error", f"{type(e).__name__}: {e}")

    refs = {remote.remote(j): j for j in jobs}
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1)
        for r in ready:
            job = refs.pop(r)
            try:
                on_row(ray.get(r))
            except Exception as e:  # noqa: BLE001 - a lost node
                on_row(_error_row(job, "worker_died", f"ray task failed: {e}"))


def run_inline(jobs: list[Job], out_dir: str, on_row: Callable[[dict], None]) -> None:
    """No worker processes (workers=0): the simplest path, handy under a debugger."""
    cache: dict = {}
    try:
        for j in jobs:
            try:
                on_row(run_job(j, _run_dir(out_dir, j), cache))
            except Exception as e:  # noqa: BLE001
                on_row(_error_row(j, "error", f"{type(e).__name__}: {e}"))
    finally:
        if cache.get("robot") is not None:
            cache["robot"].close()


class Progress:
    """One line per finished episode: done/total, success so far, elapsed, time left."""

    def __init__(self, total: int, already: int, ok_already: int, write=None):
        self.total, self.done, self.ok = total, already, ok_already
        self.t0 = time.monotonic()
        self.new = 0
        self.write = write or (lambda s: print(s, flush=True, file=__import__("sys").stderr))

    def __call__(self, row: dict) -> None:
        self.done += 1
        self.new += 1
        self.ok += bool(row.get("success"))
        el = time.monotonic() - self.t0
        left = (self.total - self.done) * el / self.new
        bar = "#" * int(30 * self.done / max(1, self.total))
        self.write(f"[{bar:<30}] {self.done}/{self.total} episodes, success {self.ok}/{self.done} "
                   f"({100 * self.ok / max(1, self.done):.0f}%), elapsed {el:.0f}s, left ~{left:.0f}s | "
                   f"{row['key']}: {row['outcome']}")
