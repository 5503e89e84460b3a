"""motormind eval --concurrency: many episodes in flight per worker, nothing lost, same rows as one
at a time, and the per-endpoint cap held (counted at the server)."""
import json
import os
import signal
import subprocess
import sys
import time

from motormind.serve.reach import ReachBrain
from motormind.serve.server import BrainServer

EVAL = [sys.executable, "-m", "motormind.cli", "eval"]


def rows(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def strip(r):
    return {k: r[k] for k in ("key", "success", "outcome", "steps", "batches", "replans")}


def test_concurrent_rows_match_sequential_ones_and_a_dead_workers_episodes_are_rerun(tmp_path):
    base = ["--backend", "fake", "--suites", "fake", "--tasks", "0-2", "--inits", "0-3"]
    seq = subprocess.run(EVAL + base + ["--workers", "1", "--out", str(tmp_path / "a")], capture_output=True,
                         text=True, timeout=120)
    faults = ["--test-crash-once", str(tmp_path / "crashed"), "--test-sleep", "0.3"]
    con = subprocess.run(EVAL + base + ["--workers", "1", "--concurrency", "4", "--out", str(tmp_path / "b"), *faults],
                         capture_output=True, text=True, timeout=120)
    assert seq.returncode == 0 and con.returncode == 0, con.stderr[-2000:]
    assert "4 episodes at once each" in con.stderr
    assert (tmp_path / "crashed").exists()                       # the worker died with episodes in flight
    b_rows = rows(tmp_path / "b")
    assert sorted(map(strip, rows(tmp_path / "a")), key=lambda r: r["key"]) == \
        sorted(map(strip, b_rows), key=lambda r: r["key"])
    assert len(b_rows) == len({r["key"] for r in b_rows}) == 12   # one row per episode
    assert any(r["attempt"] == 1 for r in b_rows)                # the dead worker's episodes were rerun
    by_pid = {}
    for r in b_rows:
        by_pid.setdefault(r["pid"], set()).add(r["slot"])
    assert max(len(s) for s in by_pid.values()) >= 2             # several episode slots in one process


def test_a_killed_concurrent_run_resumes_losing_and_duplicating_nothing(tmp_path):
    out = tmp_path / "ev"
    args = EVAL + ["--backend", "fake", "--suites", "fake", "--tasks", "0-1", "--inits", "0-5", "--workers", "1",
                   "--concurrency", "3", "--out", str(out), "--test-sleep", "0.5"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / "results.jsonl").exists() and len((out / "results.jsonl").read_text().splitlines()) >= 3:
            break
        time.sleep(0.02)
    os.killpg(p.pid, signal.SIGKILL)          # the coordinator and its worker, episodes in flight
    p.wait()
    first = rows(out)
    assert 3 <= len(first) < 12
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{len(first)} already finished" in done.stderr
    final = rows(out)
    keys = [r["key"] for r in final]
    assert len(keys) == len(set(keys)) == 12
    assert [strip(r) for r in final[:len(first)]] == [strip(r) for r in first]   # nothing rewritten


def _children(pid: int) -> list[int]:
    out = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.append(int(d))
            except (OSError, ValueError, IndexError):
                pass
    return out


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_killed_coordinator_takes_its_workers_with_it(tmp_path):
    """kill -9 of the coordinator alone (not its process group): its worker processes, episodes in
    flight, end too instead of running on with their simulators."""
    out = tmp_path / "ev"
    p = subprocess.Popen(EVAL + ["--backend", "fake", "--suites", "fake", "--tasks", "0-1", "--inits", "0-5",
                                 "--workers", "2", "--out", str(out), "--test-sleep", "0.5"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (out / "results.jsonl").exists():
            time.sleep(0.05)
        workers = [c for c in _children(p.pid)
                   if "spawn_main" in open(f"/proc/{c}/cmdline").read().replace("\0", " ")]
        assert len(workers) == 2, workers
        p.kill()
        p.wait()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and any(_alive(w) for w in workers):
            time.sleep(0.05)
        assert not any(_alive(w) for w in workers)
    finally:
        p.kill()


def _served(tmp_path, name, srv, extra):
    out = tmp_path / name
    p = subprocess.run(EVAL + ["--backend", "fake", "--suites", "fake", "--tasks", "0", "--inits", "0-5",
                               "--brain", "openai", "--vlm", "local-oracle", "--vlm-set", f"base_url={srv.url}",
                               "--vlm-set", "serve=null", "--vlm-set", "send_context=true",
                               "--vlm-set", "privileged=true", "--workers", "1", "--concurrency", "6",
                               "--out", str(out), "--test-sleep", "3",     # every slot busy while both workers start
                               *extra], capture_output=True, text=True, timeout=180)
    assert p.returncode == 0, p.stderr[-2000:]
    return rows(out)


def test_the_per_endpoint_cap_holds_at_the_server(tmp_path):
    """Six episodes at once (2 workers x 3) through the real openai client to one serve-brain
    (0.2 s a call): with --max-in-flight 2 the server never sees more than 2 requests at once,
    from both workers together; without it, more."""
    spread = ["--workers", "2", "--concurrency", "3"]
    with BrainServer(ReachBrain(), latency={"mean_s": 0.2}) as srv:
        capped = _served(tmp_path, "capped", srv, [*spread, "--max-in-flight", "2"])
        peak_capped = srv.stats()["peak_in_flight"]
    with BrainServer(ReachBrain(), latency={"mean_s": 0.2}) as srv:
        free = _served(tmp_path, "free", srv, spread)
        peak_free = srv.stats()["peak_in_flight"]
    assert peak_capped == 2 and peak_free > 2
    assert len({r["pid"] for r in capped}) == 2                 # both workers ran episodes
    assert len(capped) == len(free) == 6 and all(r["success"] for r in capped + free)
    assert sorted(map(strip, capped), key=lambda r: r["key"]) == sorted(map(strip, free), key=lambda r: r["key"])


def test_a_workers_slots_reuse_each_others_idle_simulators():
    """--concurrency K hands out one episode at a time; a slot takes an idle simulator of its
    episode's suite, task and seed before building one, and at most one idle simulator is kept."""
    from motormind.evaluate.jobs import Job
    from motormind.evaluate.pool import _Shelf

    class Sim:
        def __init__(self, task, seed=0):
            self.suite_name, self.task_index, self.seed, self.closed = "libero_spatial", task, seed, False

        def close(self):
            self.closed = True

    def job(task, seed=0):
        return Job(suite="libero_spatial", task=task, init_state=0, seed=seed)

    shelf = _Shelf()
    a, b = Sim(0), Sim(0)
    shelf.put({"robot": a})
    assert shelf.take(job(0)) == {"robot": a}          # the same task: reused
    shelf.put({"robot": a})
    shelf.put({"robot": b})                            # one idle kept: the older one is closed
    assert a.closed and not b.closed
    assert shelf.take(job(0, seed=1)) == {}            # another seed: a fresh simulator (fixtures per seed)
    assert b.closed                                    # the idle one is closed before that build
    c = Sim(3)
    shelf.put({"robot": c})
    shelf.put({})                                      # an episode that built nothing
    shelf.close()
    assert c.closed
