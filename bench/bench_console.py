#!/usr/bin/env python
"""The operator console's costs and latencies (in-process, the kinematic fake moving in real time).

    .venv/bin/python bench/bench_console.py [--n 30]

- folding one record event into the view, and rendering the whole state as JSON (what each push sends);
- an action's HTTP round trip (POST /api/action/pause with the token, to its answer);
- the e-stop, while a 100 mm move is under way: from sending the POST to its answer (the latch is
  set before the answer leaves), and to the arm's last movement, and how far the arm travelled in
  that time (at the fake's 200 mm/s);
- a state change reaching an open stream (Server-Sent Events) after an event is recorded.
Prints medians and p90 and the ratio to one 10 ms control period of the fake. Never fails on speed.
"""
from __future__ import annotations

import argparse
import http.client
import json
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from motormind.console.session import ConsoleSession  # noqa: E402
from motormind.robots.fake import FakeRobot  # noqa: E402

TOKEN = "bench"


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


CONTROL = {"key": ""}       # the control key the console issued to this client (its first action)


def post(port: int, action: str, body: dict) -> dict:
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    c.request("POST", f"/api/action/{action}", json.dumps(body), {"X-MotorMind-Token": TOKEN,
                                                                   "X-MotorMind-Control": CONTROL["key"]})
    out = json.loads(c.getresponse().read())
    c.close()
    CONTROL["key"] = out.get("control") or CONTROL["key"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=30)
    a = ap.parse_args()
    robot = FakeRobot(realtime=True, image_size=64)
    s = ConsoleSession(robot, port=0, token=TOKEN, frame_hz=0)
    port = s.server.port
    try:
        ev = {"kind": "report", "batch_id": "b1", "subgoal_id": "s", "status": "done", "reason": "",
              "results": [{"index": i, "command": {"op": "move", "direction": "up", "distance_mm": 10},
                           "status": "done", "reason": "", "achieved": {"translation_mm": [0, 0, 10]},
                           "commanded": {"translation_mm": [0, 0, 10]}} for i in range(8)],
              "end_state": robot.observe().state_dict()}
        for _ in range(200):
            s.view.on_event(ev)
        t0 = time.perf_counter()
        for _ in range(2000):
            s.view.on_event(ev)
        fold_us = (time.perf_counter() - t0) / 2000 * 1e6
        t0 = time.perf_counter()
        for _ in range(200):
            json.dumps(s.view.state())
        state_us = (time.perf_counter() - t0) / 200 * 1e6

        rtt = []
        for i in range(a.n):
            t0 = time.perf_counter()
            post(port, "pause" if i % 2 == 0 else "resume", {})
            rtt.append((time.perf_counter() - t0) * 1000)

        # SSE: an event recorded -> the stream has sent it
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        c.request("GET", "/api/stream")
        resp = c.getresponse()
        got = threading.Event()
        marks: dict = {}

        def read():
            for line in resp:
                if line.startswith(b"data:") and b"bench-mark" in line:
                    marks["t"] = time.perf_counter()
                    got.set()
        threading.Thread(target=read, daemon=True).start()
        time.sleep(0.3)
        sse = []
        for i in range(a.n):
            got.clear()
            time.sleep(0.12)                       # past the stream's push period
            t0 = time.perf_counter()
            s.view.on_event({"kind": "memory", "summary": f"bench-mark {i}", "facts": []})
            if got.wait(5):
                sse.append((marks["t"] - t0) * 1000)
        c.close()

        # e-stop: POST while a 100 mm move runs; when did the arm stop moving, how far past the POST
        stop_ms, travel_mm, estop_rtt = [], [], []
        for i in range(max(5, a.n // 3)):
            if s.controller.estopped:
                post(port, "reset", {})
            post(port, "resume", {})
            s.runtime.wait_jog()
            post(port, "jog", {"command": {"op": "move", "direction": "up" if i % 2 == 0 else "down",
                                           "distance_mm": 100}})
            time.sleep(0.15)                       # mid-command
            last = {"t": time.perf_counter(), "z": robot.pos[2]}

            def hook(r, last=last):
                if r.pos[2] != last["z"]:
                    last.update(t=time.perf_counter(), z=r.pos[2])
            robot.step_hook = hook
            z0 = robot.pos[2]
            t0 = time.perf_counter()
            post(port, "estop", {})
            estop_rtt.append((time.perf_counter() - t0) * 1000)
            s.runtime.wait_jog()
            robot.step_hook = None
            stop_ms.append(max(0.0, last["t"] - t0) * 1000)
            travel_mm.append(abs(robot.pos[2] - z0) * 1000)

        period_ms = robot.profile.period_s * 1000
        print(f"view: fold one report event {fold_us:.1f} us; whole state as JSON {state_us:.0f} us")
        print(f"action round trip (HTTP, token checked, recorded): median {statistics.median(rtt):.2f} ms, "
              f"p90 {q(rtt, .9):.2f} ms  (n={len(rtt)})")
        print(f"event -> open stream: median {statistics.median(sse):.2f} ms, p90 {q(sse, .9):.2f} ms  (n={len(sse)})")
        print(f"e-stop POST -> its answer (the latch is set before it): median {statistics.median(estop_rtt):.2f} ms, "
              f"p90 {q(estop_rtt, .9):.2f} ms  (n={len(estop_rtt)})")
        print(f"e-stop POST -> last arm movement: median {statistics.median(stop_ms):.2f} ms, "
              f"p90 {q(stop_ms, .9):.2f} ms = {statistics.median(stop_ms) / period_ms:.2f} control periods of "
              f"{period_ms:.0f} ms; travel after the POST: median {statistics.median(travel_mm):.2f} mm, "
              f"max {max(travel_mm):.2f} mm at {robot.profile.move_mm_s:.0f} mm/s  (n={len(stop_ms)})")
    finally:
        s.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
