"""motormind eval: resume loses and duplicates nothing, workers agree, bad suites are refused."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from motormind.evaluate.report import failure_cause, markdown, split_suite
from motormind.evaluate.stats import wilson
from motormind.evaluate.store import ResultStore

EVAL = [sys.executable, "-m", "motormind.cli", "eval"]


def rows(out):
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def strip(r):
    return {k: r[k] for k in ("key", "success", "outcome", "steps", "batches", "replans")}


def test_wilson_interval():
    lo, hi = wilson(8, 10)
    assert lo == pytest.approx(0.490, abs=1e-3) and hi == pytest.approx(0.943, abs=1e-3)
    assert wilson(0, 0) == (0.0, 1.0) and wilson(5, 5)[1] == 1.0
    for n in range(1, 60):                  # it holds the rate exactly (4/4 gave an upper bound below 1)
        for k in range(n + 1):
            lo, hi = wilson(k, n)
            assert 0.0 <= lo <= k / n <= hi <= 1.0, (k, n, lo, hi)
        assert wilson(n, n)[1] == 1.0 and wilson(0, n)[0] == 0.0


def test_resume_after_a_killed_run_loses_and_duplicates_nothing(tmp_path):
    out = tmp_path / "ev"
    args = EVAL + ["--backend", "fake", "--suites", "fake", "--tasks", "0-1", "--inits", "0-4", "--workers", "1",
                   "--out", str(out), "--test-sleep", "0.4"]
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if (out / "results.jsonl").exists() and len((out / "results.jsonl").read_text().splitlines()) >= 3:
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)          # the coordinator and its workers, mid-run
    p.wait()
    first = rows(out)
    assert 3 <= len(first) < 10
    with open(out / "results.jsonl", "a") as f:
        f.write('{"key": "torn')                # a crash mid-write leaves a torn line
    done = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"{len(first)} already finished" in done.stderr and "dropped 1 torn line" in done.stderr
    final = rows(out)
    keys = [r["key"] for r in final]
    assert len(keys) == len(set(keys)) == 10
    assert [strip(r) for r in final[:len(first)]] == [strip(r) for r in first]   # nothing rewritten
    assert "| fake |" in done.stdout and (out / "report.html").exists()


def test_two_workers_match_one_and_a_dead_worker_is_rerun(tmp_path):
    base = ["--backend", "fake", "--suites", "fake", "--tasks", "0-2", "--inits", "0-3"]
    one = subprocess.run(EVAL + base + ["--workers", "1", "--out", str(tmp_path / "a")], capture_output=True,
                         text=True, timeout=120)
    faults = ["--test-crash-once", str(tmp_path / "crashed"), "--test-sleep", "0.5"]
    two = subprocess.run(EVAL + base + ["--workers", "2", "--out", str(tmp_path / "b"), *faults], capture_output=True,
                         text=True, timeout=120)
    assert one.returncode == 0 and two.returncode == 0, two.stderr[-2000:]
    assert (tmp_path / "crashed").exists()                       # a worker really died mid-episode
    a = sorted(map(strip, rows(tmp_path / "a")), key=lambda r: r["key"])
    b_rows = rows(tmp_path / "b")
    b = sorted(map(strip, b_rows), key=lambda r: r["key"])
    assert a == b and len(a) == 12
    assert len({r["pid"] for r in b_rows}) >= 2                  # really spread over processes
    assert any(r["attempt"] == 1 for r in b_rows)                # the dead worker's episode was rerun


@pytest.mark.sim
def test_incomplete_suite_is_refused_with_a_reason(tmp_path):
    p = subprocess.run(EVAL + ["--suites", "libero_spatial_env", "--tasks", "0", "--inits", "0", "--out",
                               str(tmp_path / "x")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    assert "refusing suite 'libero_spatial_env'" in p.stderr and "missing" in p.stderr
    assert not (tmp_path / "x" / "results.jsonl").exists()


@pytest.mark.sim
def test_perturbed_suite_uses_its_own_resources():
    from motormind.session.checks import check_grid
    notes = check_grid("libero", ["libero_spatial_lan"], [0, 1])
    assert "'lan' perturbation present" in notes[0]


def test_report_groups_and_labels():
    r = {"key": "k", "suite": "libero_spatial_swap", "ablation": "full", "noise": {}, "success": False,
         "outcome": "step_budget", "steps": 220, "vlm_s": 1.0, "motion_s": 5.0, "overhead_s": 2.0, "episode_s": 8.0,
         "vlm_calls": 20, "verifier_rejections": 1, "controller_rejections": 0, "privileged": True, "brain": "oracle"}
    assert split_suite("libero_object") == ("libero_object", "base")
    assert split_suite("libero_object_swap") == ("libero_object", "swap")
    assert failure_cause(r) == "budget ran out"
    assert failure_cause({**r, "outcome": "claimed_done"}) == "false completion"   # not "verifier rejections"
    md = markdown([r, {**r, "key": "k2", "success": True}])
    assert "privileged" in md and "| libero_spatial_swap | 1/2 |" in md and "| swap | 1/2 |" in md


def test_store_skips_duplicates(tmp_path):
    s = ResultStore(tmp_path)
    assert s.append({"key": "a", "x": 1}) and not s.append({"key": "a", "x": 2})
    assert ResultStore(tmp_path).rows["a"]["x"] == 1


def test_ray_gives_the_same_results_as_local_workers(tmp_path):
    pytest.importorskip("ray")
    base = ["--backend", "fake", "--suites", "fake", "--tasks", "0-1", "--inits", "0-3"]
    loc = subprocess.run(EVAL + base + ["--workers", "1", "--out", str(tmp_path / "a")], capture_output=True,
                         text=True, timeout=120)
    ray = subprocess.run(EVAL + base + ["--ray", "--workers", "2", "--out", str(tmp_path / "r")],
                         capture_output=True, text=True, timeout=300)
    assert loc.returncode == 0 and ray.returncode == 0, ray.stderr[-2000:]
    a = sorted(map(strip, rows(tmp_path / "a")), key=lambda r: r["key"])
    r = sorted(map(strip, rows(tmp_path / "r")), key=lambda r: r["key"])
    assert a == r and len(a) == 8
    con = subprocess.run(EVAL + base + ["--ray", "--workers", "2", "--concurrency", "2", "--out", str(tmp_path / "c"),
                                        "--test-sleep", "0.3"], capture_output=True, text=True, timeout=300)
    assert con.returncode == 0, con.stderr[-2000:]
    c_rows = rows(tmp_path / "c")
    assert sorted(map(strip, c_rows), key=lambda r: r["key"]) == a      # Ray actors, episodes on threads
    by_pid = {}
    for row in c_rows:
        by_pid.setdefault(row["pid"], set()).add(row["slot"])
    assert len(by_pid) == 2 and max(len(s) for s in by_pid.values()) == 2   # 2 actors x 2 episodes at once


def test_the_report_gives_median_steps_against_the_budget():
    from motormind.evaluate.report import _fmt_row, summarize

    def row(steps, budget, ok=True):
        return {"success": ok, "outcome": "success" if ok else "step_budget", "steps": steps, "step_budget": budget,
                "vlm_s": 1.0, "motion_s": 2.0, "overhead_s": 0.1, "episode_s": 3.1, "vlm_calls": 10}
    one = summarize([row(100, 220), row(150, 220), row(220, 220, ok=False)])
    assert "| 150 / 220 |" in _fmt_row("libero_spatial", one)
    mixed = summarize([row(110, 220), row(260, 520)])       # 50% of each budget
    assert "| 50% of budget |" in _fmt_row("all", mixed)


def test_the_report_shows_the_tokens_the_servers_prefix_cache_served():
    from motormind.evaluate.htmlreport import _cells
    from motormind.evaluate.report import _fmt_row, summarize
    r = {"success": True, "outcome": "success", "steps": 100, "step_budget": 220, "vlm_s": 1.0, "motion_s": 2.0,
         "overhead_s": 0.1, "episode_s": 3.1, "vlm_calls": 10, "vlm_tokens": {"input_tokens": 9000, "output_tokens": 1000}}
    s = summarize([{**r, "vlm_cached_tokens": 6000}, {**r, "vlm_cached_tokens": 2000}])
    assert "| 10000 (4000 cached) |" in _fmt_row("all", s) and "10000 (4000 cached)" in _cells("all", s)
    assert "| 10000 |" in _fmt_row("all", summarize([r]))           # a server that says nothing: no claim


@pytest.mark.sim
def test_the_no_planner_ablation_is_measured_not_zero_by_construction(tmp_path):
    # without a Planner the Executor gets the whole instruction as its one subgoal; the oracle
    # scripts the whole task from the goal, so the episode runs and its outcome is recorded
    out = tmp_path / "np"
    p = subprocess.run(EVAL + ["--suites", "libero_spatial", "--tasks", "0", "--inits", "0", "--ablations", "full",
                               "no_planner", "--no-images", "--workers", "0", "--out", str(out)],
                       capture_output=True, text=True, timeout=600, env={**os.environ, "MUJOCO_GL": "osmesa"})
    assert p.returncode == 0, p.stderr[-3000:]
    got = {r["ablation"]: r for r in rows(out)}
    assert set(got) == {"full", "no_planner"}
    np_row = got["no_planner"]
    assert np_row["outcome"] == "success" and np_row["success"] is True and np_row["batches"] >= 2
    assert "no_planner" in p.stdout                      # the report's ablation table
    events = [json.loads(x) for x in (Path(np_row["run_dir"]) / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["kind"] == "vlm_call"]
    assert not [c for c in calls if c["role"] == "planner"]
    ex = [c for c in calls if c["role"] == "executor"]
    assert ex and all(json.loads(c["response"]).get("rationale", "").startswith(("whole task", "every goal"))
                      for c in ex)
    batches = [e for e in events if e["kind"] == "batch"]
    assert len(batches) >= 2 and {b["batch"]["subgoal_id"] for b in batches} == {"s1"}     # the instruction, throughout


def test_grid_checks_on_two_threads_at_once_leave_the_process_output_alone(monkeypatch):
    """check_grid silences LIBERO by swapping sys.stdout and sys.stderr; two threads checking at once (two
    launches built side by side) must not restore each other's swapped streams and leave the process silent."""
    import sys
    import threading
    import time

    from motormind.session import checks
    real = checks._fake

    def slow(name, flag):          # each check holds its swapped streams a while
        time.sleep(0.1)
        return real(name, flag)
    monkeypatch.setattr(checks, "_fake", slow)
    out, err = sys.stdout, sys.stderr
    threads = [threading.Thread(target=checks.check_grid, args=("fake", ["fake"], [0], [0])) for _ in range(2)]
    for i, t in enumerate(threads):
        t.start()
        time.sleep(0.03 * (i + 1))
    for t in threads:
        t.join()
    assert sys.stdout is out and sys.stderr is err
