#!/usr/bin/env python
"""serve-brain's HTTP costs, through the real ``openai`` client (the path every VLM call takes).

    .venv/bin/python bench/bench_serve_brain.py [--n 60] [--threads 8]

- one chat completion's round trip, text only and with two 224 px camera images (PNG data URLs,
  about 0.3 MB of request body), from ``OpenAIBrain.respond`` to its reply;
- throughput with ``--threads`` clients at once (the Monitor and Memory calls overlap the
  Executor's in an episode).
The backend is a scripted brain (no model time), so the figures are the server's and the client's
own. Prints medians and p90. Never fails on speed.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from motormind.brains.base import BrainRequest  # noqa: E402
from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config  # noqa: E402
from motormind.brains.scripted import ScriptedBrain  # noqa: E402
from motormind.schemas import VERIFIER  # noqa: E402
from motormind.serve.server import BrainServer  # noqa: E402

VERDICT = {"schema_version": 1, "achieved": True, "evidence": "the bowl is on the plate"}


def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p * (len(xs) - 1))))]


def request(images: dict) -> BrainRequest:
    return BrainRequest("verifier", "verifier", "You are the Verifier of a robot.", "Is it done?", VERIFIER,
                        images, {"subgoal_id": "s1"}, [])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=60)
    ap.add_argument("--threads", type=int, default=8)
    a = ap.parse_args()
    rng = np.random.default_rng(0)
    cams = {"agentview": rng.integers(0, 255, (224, 224, 3), dtype=np.uint8),
            "wrist": rng.integers(0, 255, (224, 224, 3), dtype=np.uint8)}
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]})) as srv:
        cfg = load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "retries=0"])
        brain = OpenAIBrain(cfg)
        brain.respond(request({}))                           # connect and warm up
        lines = []
        for label, imgs in (("text only", {}), ("two 224 px images", cams)):
            ms = []
            for _ in range(a.n):
                t0 = time.perf_counter()
                brain.respond(request(imgs))
                ms.append((time.perf_counter() - t0) * 1000)
            lines.append(f"chat completion, {label}: median {statistics.median(ms):.2f} ms, p90 {q(ms, .9):.2f} ms "
                         f"(n={len(ms)})")
        per = max(1, a.n // a.threads)
        brains = [OpenAIBrain(cfg) for _ in range(a.threads)]
        for b in brains:
            b.respond(request({}))

        def work(b):
            for _ in range(per):
                b.respond(request({}))
        ts = [threading.Thread(target=work, args=(b,)) for b in brains]
        t0 = time.perf_counter()
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        wall = time.perf_counter() - t0
        lines.append(f"{a.threads} clients at once, text only: {per * a.threads / wall:.0f} completions/s "
                     f"({per * a.threads} in {wall:.2f} s)")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
