#!/usr/bin/env python
"""What a SIGKILLed MCAP recorder loses (motormind/mcap_record.py, docs/ros2.md "Recording").

A writer process records a message every 10 ms (about the rate of the graph's state topic) with
the default flush_s; it is killed with SIGKILL at a random moment. The loss is the time between
the last message it wrote and the newest one that reads back from the file. Prints the median and
the worst over the trials, and the cost of writing as it goes (messages per second with flush_s
and by size only).

    .venv/bin/python bench/bench_recording.py [--trials 10]
"""
import argparse
import json
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from motormind.mcap_record import FLUSH_S, McapRecorder, read_messages  # noqa: E402

WRITER = textwrap.dedent("""
    import os, sys, time
    from motormind.mcap_record import McapRecorder
    rec = McapRecorder(sys.argv[1])
    i = 0
    while True:
        t = time.time()
        rec.json("report", {"i": i, "t": t})
        with open(sys.argv[2] + ".tmp", "w") as fh:   # the last message written, for the parent
            fh.write(repr(t))
        os.replace(sys.argv[2] + ".tmp", sys.argv[2])
        i += 1
        time.sleep(0.01)
""")


def trial(tmp: Path, n: int) -> float:
    mcap, last = tmp / f"t{n}.mcap", tmp / f"t{n}.last"
    p = subprocess.Popen([sys.executable, "-c", WRITER, str(mcap), str(last)])
    while not last.exists():
        time.sleep(0.05)
    time.sleep(random.uniform(1.5, 4.0))
    p.send_signal(signal.SIGKILL)
    p.wait()
    t_last = float(last.read_text())
    kept = [json.loads(m.data)["t"] for t, _, m, _ in read_messages(mcap) if t == "/motormind/report"]
    return t_last - (max(kept) if kept else t_last - 999)


def throughput(tmp: Path, flush_s) -> float:
    n = 20000
    with McapRecorder(tmp / f"tp{flush_s}.mcap", flush_s=flush_s) as rec:
        t0 = time.perf_counter()
        for i in range(n):
            rec.json("report", {"i": i})
        dt = time.perf_counter() - t0
    return n / dt


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=10)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        lost = [trial(tmp, i) for i in range(a.trials)]
        print(f"MCAP recorder killed by SIGKILL, a message every 10 ms, flush_s={FLUSH_S:g} s, n={a.trials}")
        print(f"  lost (last written - last on disk): median {statistics.median(lost):.2f} s, "
              f"worst {max(lost):.2f} s")
        tp_flush, tp_size = throughput(tmp, FLUSH_S), throughput(tmp, 0)
        print(f"  writing 20000 small messages: {tp_flush:,.0f} msg/s with flush_s={FLUSH_S:g}, "
              f"{tp_size:,.0f} msg/s by size only (ratio {tp_flush / tp_size:.2f})")


if __name__ == "__main__":
    main()
