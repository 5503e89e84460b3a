#!/usr/bin/env python
"""The cost of the ROS 2 transport: a batch and a cancel through DDS against in-process.

    .venv/bin/python bench/bench_ros.py [--n 30]

Both sides drive the same Controller over the same kinematic fake (real time):
* batch: one 1 mm move, from handing the batch over to holding its report (in-process:
  ``Controller.run``; ROS 2: publish on /motormind/commands -> report on /motormind/report, the
  Controller in its own process, which also publishes the after-batch image and state first).
* cancel: a batch of eight 10 ms waits, cancelled 35 ms after it was handed over (mid-batch); from
  the cancel (``CancelToken.cancel`` / publish on /motormind/cancel) to holding the report that shows
  it honoured (both include the wait for the running command to reach its action boundary, <= 10 ms).
Prints medians (and p90) in milliseconds and the ratio ROS 2 / in-process. Never fails on speed.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from motormind.controller import CancelToken, Controller  # noqa: E402
from motormind.robots.fake import FakeRobot  # noqa: E402

MOVE = [{"op": "move", "direction": "forward", "distance_mm": 1}]
WAITS = [{"op": "wait", "seconds": 0.01}] * 8     # 8 x 10 ms: the cancel lands mid-batch, <= 10 ms from a boundary
CANCEL_AFTER_S = 0.035


def med(xs):
    xs = sorted(xs)
    return statistics.median(xs) * 1000, xs[int(0.9 * (len(xs) - 1))] * 1000


def in_process(n: int) -> tuple[list, list]:
    robot = FakeRobot(realtime=True)
    batch_t, cancel_t = [], []
    for i in range(n):
        c = Controller(robot)
        t0 = time.perf_counter()
        c.run({"batch_id": f"b{i}", "subgoal_id": "s", "commands": MOVE})
        batch_t.append(time.perf_counter() - t0)
    for i in range(n):
        tok = CancelToken()
        c = Controller(robot)
        out = {}
        th = threading.Thread(target=lambda: out.update(rep=c.run({"batch_id": f"c{i}", "subgoal_id": "s",
                                                                   "commands": WAITS}, tok),
                                                        t=time.perf_counter()))
        t0 = time.perf_counter()
        th.start()
        time.sleep(max(0.0, t0 + CANCEL_AFTER_S - time.perf_counter()))
        t_cancel = time.perf_counter()
        tok.cancel("bench", "bench")
        th.join()
        assert out["rep"].status == "cancelled", out["rep"].summary()
        cancel_t.append(out["t"] - t_cancel)
    return batch_t, cancel_t


def over_ros(n: int) -> tuple[list, list]:
    from motormind.ros import graph
    from motormind.ros.launcher import node_argv
    from motormind.ros.probe import Probe
    from motormind.ros.settings import write_with
    domain = random.Random(f"bench{os.getpid()}").randint(230, 232)
    tmp = Path(tempfile.mkdtemp(prefix="motormind-bench-"))
    spec = graph.NodeSpec("controller", "controller")
    cfg = write_with(tmp / "motormind.yaml", {
        "profile": "fake", "robot": {"type": "fake", "realtime": True}, "controller": {
            "publish_task": False, "privileged_service": False, "watchdog_nodes": [""], "state_dir": str(tmp)}})
    proc = subprocess.Popen(node_argv(spec, cfg), env={**os.environ, **graph.ros_env(domain)},
                            stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True)
    pr = Probe(domain_id=domain)
    batch_t, cancel_t = [], []
    try:
        pr.wait_for("progress", lambda m: m.get("event") == "idle", timeout=60)
        pr.wait_for_subscribers("commands")
        pr.wait_for_subscribers("cancel")
        for i in range(3):                              # warm-up: discovery, first allocations
            pr.send("commands", {"batch_id": f"w{i}", "subgoal_id": "s", "commands": MOVE})
            pr.wait_for("report", lambda m, i=i: m.get("batch_id") == f"w{i}", timeout=30)
        for i in range(n):
            bid = f"b{i}"
            t0 = pr.send("commands", {"batch_id": bid, "subgoal_id": "s", "commands": MOVE})
            pr.wait_for("report", lambda m: m.get("batch_id") == bid, timeout=30)
            batch_t.append(pr.arrival_of("report", lambda m: m.get("batch_id") == bid) - t0)
        for i in range(n):
            bid = f"c{i}"
            t_sent = pr.send("commands", {"batch_id": bid, "subgoal_id": "s", "commands": WAITS})
            time.sleep(max(0.0, t_sent + CANCEL_AFTER_S - time.perf_counter()))
            t0 = pr.send("cancel", {"batch_id": bid, "reason": "bench", "source": "bench"})
            rep = pr.wait_for("report", lambda m: m.get("batch_id") == bid, timeout=30)
            assert rep["status"] == "cancelled", rep["status"]
            cancel_t.append(pr.arrival_of("report", lambda m: m.get("batch_id") == bid) - t0)
    finally:
        pr.close()
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
    return batch_t, cancel_t


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=30, help="repetitions of each measurement")
    a = ap.parse_args()
    ib, ic = in_process(a.n)
    rb, rc = over_ros(a.n)
    print(f"ROS 2 transport vs in-process, kinematic fake in real time, n={a.n} each (ms: median / p90)")
    if os.environ.get("BENCH_VERBOSE"):
        print("ros batch ms:", [round(x * 1000, 1) for x in rb])
    for label, i, r in (("batch (1 move)   ", ib, rb), ("cancel -> report ", ic, rc)):
        (im, ip), (rm, rp) = med(i), med(r)
        print(f"  {label} in-process {im:7.2f} / {ip:7.2f}   ROS 2 {rm:7.2f} / {rp:7.2f}   "
              f"ratio {rm / im:5.2f}x  (+{rm - im:.2f} ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
