"""Run jobs: in worker processes on this machine, or on a Ray cluster. Same rows either way.

Local workers (spawned processes) each run up to ``concurrency`` episodes at once, on that many
episode slots (threads: an episode waiting for its model's answer holds no core; the roles'
HTTP calls release the GIL). With one slot, a worker takes the episodes of one task at a time
from a shared queue (one build per task, resets between its init states; a task's run is split
when there are fewer runs than workers). With more, slots take one episode at a time, so none sits
idle while another has a queue of its own, and a slot takes a simulator of its episode's task
that another slot of the worker has left idle (``_Shelf``) before it builds one. All the
episodes of a worker share its per-endpoint gates (``brains/gate.py``): at most
``max_in_flight`` requests to one endpoint, and a 429 there slows all of them.
A worker announces each job before it starts, so when a worker dies its jobs in flight are known,
rerun on a fresh worker (up to ``max_attempts`` times) and recorded as ``worker_died`` if they keep
killing workers; the jobs it had been given but not started go back to the queue. A worker ends
with the coordinator, however the coordinator ends (``lifeline.py``): a killed ``motormind eval``
leaves no simulator running, and rerunning it resumes.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import queue
import time
import traceback
from pathlib import Path
from typing import Callable

from .jobs import Job, run_job, short_key

MAX_CONCURRENCY = 256            # episodes in flight per worker (serve-brain accepts 256 connections)
# Resident memory, MB (measured: docs/evaluation.md, "Memory"): what an episode in flight adds (its
# simulator), and what a worker process holds whatever its episodes (imports, and for LIBERO the
# shared render contexts, at most render.MAX_CONTEXTS of about 0.55 GB each).
EPISODE_MB = {"libero": 350, "fake": 20}
WORKER_MB = {"libero": 2000, "fake": 150}


def available_mb() -> float | None:
    """Memory available to new work, MB (Linux /proc/meminfo; None elsewhere)."""
    try:
        for line in open("/proc/meminfo"):
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def _run_dir(out_dir: str, job: Job) -> str:
    name = job.key.replace("/", "_").replace("=", "").replace(",", "+")
    return str(Path(out_dir) / "episodes" / name)


def _worker(wid: int, jobs, results, out_dir: str, concurrency: int = 1, max_in_flight: int | None = None,
            shared=None, parent: int | None = None, stop=None) -> None:
    import signal
    import threading
    # a terminal's Ctrl-C reaches the whole process group: the coordinator decides (it stops at the
    # next episode boundary); a worker finishes the episode under way and takes no other
    signal.signal(signal.SIGINT, signal.SIG_IGN)

    from ..brains.gate import Gates
    from ..lifeline import follow_parent
    if parent is not None and not follow_parent(parent):   # ends with the coordinator, however it ends
        return
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    gates = Gates(max_in_flight, shared)

    shelf = _Shelf()

    def slot() -> None:
        while True:
            group = jobs.get()
            if group is None:
                break
            results.put(("group", wid, [j.key for j in group], os.getpid()))
            for job in group:
                if stop is not None and stop.is_set():
                    break
                results.put(("start", wid, job.key, os.getpid()))
                cache = shelf.take(job)          # an idle simulator of this task, if the worker has one
                try:
                    row = run_job(job, _run_dir(out_dir, job), cache, gates)
                    results.put(("done", wid, job.key, row))
                except Exception as e:  # noqa: BLE001 - an episode error is a result, not a crash
                    results.put(("error", wid, job.key, {"error": f"{type(e).__name__}: {e}",
                                                         "traceback": traceback.format_exc()[-4000:]}))
                finally:
                    shelf.put(cache)

    slots = [threading.Thread(target=slot, name=f"motormind-episode-{i}") for i in range(concurrency)]
    for t in slots:
        t.start()
    for t in slots:
        t.join()
    shelf.close()


class _Shelf:
    """A worker's idle simulators, shared by its episode slots. A slot takes one built for its
    next episode's suite, task and seed when one is idle (a reset instead of a rebuild), and puts
    its simulator back when the episode ends. One idle simulator is kept: a slot that finds none
    of its task closes it before building, so a worker holds at most one simulator more than it
    has episodes in flight."""

    def __init__(self):
        import threading
        self._lock = threading.Lock()
        self._idle: list = []

    def take(self, job: Job) -> dict:
        with self._lock:
            for i, robot in enumerate(self._idle):
                if (robot.suite_name, robot.task_index, robot.seed) == (job.suite, job.task, job.seed):
                    return {"robot": self._idle.pop(i)}
            stale, self._idle = self._idle, []
        for robot in stale:
            robot.close()
        return {}

    def put(self, cache: dict) -> None:
        robot = cache.get("robot")
        if robot is None:
            return
        with self._lock:
            self._idle.append(robot)
            stale, self._idle = self._idle[:-1], self._idle[-1:]
        for r in stale:
            r.close()

    def close(self) -> None:
        with self._lock:
            stale, self._idle = self._idle, []
        for robot in stale:
            robot.close()


def _groups(jobs: list[Job], slots: int = 1) -> list[list[Job]]:
    """Consecutive jobs of one suite and task go to one slot together: it builds the simulator once.
    A task's run is split into chunks when there are fewer groups than ``slots`` to keep busy."""
    out: list[list[Job]] = []
    for j in jobs:
        if out and (out[-1][0].suite, out[-1][0].task) == (j.suite, j.task):
            out[-1].append(j)
        else:
            out.append([j])
    while len(out) < slots:                              # halve the longest run until every slot has one
        i = max(range(len(out)), key=lambda k: len(out[k]), default=None)
        if i is None or len(out[i]) < 2:
            break
        g = out.pop(i)
        out[i:i] = [g[:len(g) // 2], g[len(g) // 2:]]
    return out


def _error_row(job: Job, outcome: str, reason: str) -> dict:
    return {**job.to_json(), "success": False, "outcome": outcome, "reason": reason, "steps": 0, "batches": 0,
            "replans": 0, "verifier_rejections": 0, "controller_rejections": 0, "vlm_calls": 0, "vlm_s": 0.0,
            "motion_s": 0.0, "episode_s": 0.0, "job_s": 0.0, "overhead_s": 0.0, "privileged": False}


def run_local(jobs: list[Job], out_dir: str, workers: int, on_row: Callable[[dict], None],
              max_attempts: int = 2, concurrency: int = 1, max_in_flight: int | None = None,
              endpoint: str | None = None, stop=None) -> None:
    """``endpoint``: the VLM config's base URL, whose ``max_in_flight`` is shared by all the workers.
    ``stop`` (a threading.Event, set by eval's Ctrl-C): no episode starts after it is set; the
    episodes under way finish and their rows are recorded, then this returns."""
    ctx = mp.get_context("spawn")
    wstop = ctx.Event()
    shared = None
    if max_in_flight and endpoint:
        from ..brains.gate import SharedCap
        shared = SharedCap(ctx, endpoint, max_in_flight)
    jq, rq = ctx.Queue(), ctx.Queue()
    by_key = {j.key: j for j in jobs}
    pending = len(jobs)
    # One slot per worker: a task's episodes go together (one simulator, reset between them). More:
    # one episode at a time, so no slot sits idle while another has a queue of its own; the
    # worker's slots still reuse each other's simulators of the same task (_Shelf).
    groups = _groups(jobs, workers) if concurrency == 1 else [[j] for j in jobs]
    for g in groups:
        jq.put(g)
    procs: dict[int, mp.Process] = {}
    inflight: dict[int, set] = {}         # worker -> keys of its episodes under way
    assigned: dict[int, list] = {}        # worker -> keys of its groups not finished yet
    finished: set = set()                 # keys with a row: a late message from a dead worker is dropped
    next_id = 0

    def spawn():
        nonlocal next_id
        p = ctx.Process(target=_worker, args=(next_id, jq, rq, out_dir, concurrency, max_in_flight, shared,
                                              os.getpid(), wstop), daemon=True)
        p.start()
        procs[next_id] = p
        next_id += 1

    for _ in range(min(workers, -(-len(groups) // concurrency))):
        spawn()
    hard = False
    try:
        while pending:
            if stop is not None and stop.is_set():
                wstop.set()
                if not any(inflight.values()):        # the episodes under way have finished
                    break
            try:
                msg = rq.get(timeout=0.5)
            except queue.Empty:
                msg = None
            for wid, p in list(procs.items()):      # a dead worker: rerun its episode elsewhere
                if p.is_alive():
                    continue
                del procs[wid]
                running = inflight.pop(wid, set())
                rest = [k for k in assigned.pop(wid, []) if k not in running and k not in finished]
                if rest:                                  # the episodes it was given and never started
                    jq.put([by_key[k] for k in rest])
                for key in sorted(running - finished):
                    job = by_key[key]
                    if job.attempt + 1 < max_attempts:
                        job = Job(**{**job.__dict__, "attempt": job.attempt + 1})
                        by_key[key] = job
                        jq.put([job])
                    else:
                        on_row(_error_row(job, "worker_died",
                                          f"the worker died {max_attempts} times (exit code {p.exitcode})"))
                        finished.add(key)
                        pending -= 1
                if pending and len(procs) < workers and (pending > len(procs) * concurrency or not procs) \
                        and not wstop.is_set():
                    spawn()
            if msg is None:
                continue
            kind, wid, key, data = msg
            if kind == "group":
                if wid not in procs:              # from a worker already found dead: it runs none of them
                    back = [by_key[k] for k in key if k not in finished]
                    if back:
                        jq.put(back)
                    continue
                assigned.setdefault(wid, []).extend(key)
                continue
            if kind == "start":
                if wid in procs:
                    inflight.setdefault(wid, set()).add(key)
                continue
            inflight.get(wid, set()).discard(key)
            if key in assigned.get(wid, []):
                assigned[wid].remove(key)
            if key in finished:
                continue
            finished.add(key)
            job = by_key[key]
            row = data if kind == "done" else _error_row(job, "error", data["error"])
            if kind == "error":
                row["traceback"] = data["traceback"]
            on_row(row)
            pending -= 1
    except KeyboardInterrupt:                     # a second Ctrl-C: now
        hard = True
        raise
    finally:
        for _ in range(len(procs) * concurrency):
            jq.put(None)
        for p in procs.values():
            p.join(timeout=0 if hard else 10)
            if p.is_alive():
                p.kill()


def run_ray(jobs: list[Job], out_dir: str, address: str | None, on_row: Callable[[dict], None],
            workers: int | None = None, concurrency: int = 1, max_in_flight: int | None = None) -> None:
    """Ray: with ``concurrency`` 1, one Ray task per episode (a fresh simulator each). With more,
    Ray actors do what local workers do: each actor (one per ``workers``, default one per CPU of
    the cluster) runs up to ``concurrency`` episodes at once on threads, each thread keeping its
    simulator for the next episode of the same task; a task's episodes go to one actor. A cap on
    requests in flight is shared out between the actors (each gets ``max_in_flight // actors``,
    at least 1), so the run's total stays within it. An episode on an actor that dies is rerun
    once on its restarted actor, then recorded as ``worker_died``."""
    try:
        import ray
    except ImportError:
        from ..errors import ConfigError
        raise ConfigError("--ray: Ray is not installed (pip install 'ray[default]'), or drop --ray to use "
                         "local workers") from None
    ray.init(address=address or None, ignore_reinit_error=True, log_to_driver=False,
             **({"num_cpus": workers} if workers and not address else {}))

    if concurrency <= 1:
        @ray.remote(max_retries=1)
        def remote(job: Job) -> dict:
            os.environ.setdefault("MUJOCO_GL", "osmesa")
            try:
                return run_job(job, _run_dir(out_dir, job), None)
            except Exception as e:  # noqa: BLE001
                return _error_row(job, "error", f"{type(e).__name__}: {e}")

        refs = {remote.remote(j): j for j in jobs}
    else:
        n = max(1, workers or int(ray.cluster_resources().get("CPU", 1)))
        cap = max(1, max_in_flight // n) if max_in_flight else None

        @ray.remote(num_cpus=1, max_restarts=1, max_task_retries=1)
        class EpisodeWorker:
            def __init__(self):
                import threading

                from ..brains.gate import Gates
                os.environ.setdefault("MUJOCO_GL", "osmesa")
                self.gates = Gates(cap)
                self.local = threading.local()       # each thread's simulator (its "slot")

            def run(self, job: Job) -> dict:
                cache = self.local.__dict__.setdefault("cache", {})
                try:
                    return run_job(job, _run_dir(out_dir, job), cache, self.gates)
                except Exception as e:  # noqa: BLE001 - an episode error is a result
                    return _error_row(job, "error", f"{type(e).__name__}: {e}")

        actors = [EpisodeWorker.options(max_concurrency=concurrency).remote() for _ in range(n)]
        refs = {}
        for i, group in enumerate(_groups(jobs, n * concurrency)):
            for j in group:
                refs[actors[i % n].run.remote(j)] = j
    while refs:
        ready, _ = ray.wait(list(refs), num_returns=1)
        for r in ready:
            job = refs.pop(r)
            try:
                on_row(ray.get(r))
            except Exception as e:  # noqa: BLE001 - a lost node or actor
                on_row(_error_row(job, "worker_died", f"ray task failed: {e}"))


def run_inline(jobs: list[Job], out_dir: str, on_row: Callable[[dict], None], concurrency: int = 1,
               max_in_flight: int | None = None, stop=None) -> None:
    """No worker processes (workers=0): the simplest path, handy under a debugger; ``concurrency``
    episode slots (threads) as in a worker."""
    import threading

    from ..brains.gate import Gates
    gates = Gates(max_in_flight)
    todo: queue.Queue = queue.Queue()
    for g in _groups(jobs, concurrency):
        todo.put(g)
    lock = threading.Lock()

    def slot() -> None:
        cache: dict = {}
        try:
            while True:
                try:
                    group = todo.get_nowait()
                except queue.Empty:
                    return
                for j in group:
                    if stop is not None and stop.is_set():
                        return
                    try:
                        row = run_job(j, _run_dir(out_dir, j), cache, gates)
                    except Exception as e:  # noqa: BLE001
                        row = _error_row(j, "error", f"{type(e).__name__}: {e}")
                    with lock:
                        on_row(row)
        finally:
            if cache.get("robot") is not None:
                cache["robot"].close()

    if concurrency <= 1:
        slot()
        return
    threads = [threading.Thread(target=slot, name=f"motormind-episode-{i}") for i in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


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
                   f"{short_key(row)}: {row['outcome']}")
