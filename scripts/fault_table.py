#!/usr/bin/env python
"""Each serve-brain fault (or quirk) at one rate against episode success and VLM calls per episode.

Every episode runs the whole stack on LIBERO-PRO with the ORACLE behind the in-process
OpenAI-compatible server (configs/vlm/local-oracle.yaml): every role's answer travels through the
real openai client over HTTP, and the server corrupts answers at the given rate, one fault kind
per row (plus a row without faults).

    .venv/bin/python scripts/fault_table.py                       # 20%, libero_spatial tasks 0,2,3 x inits 0-1
    .venv/bin/python scripts/fault_table.py --rate 0.2 --tasks libero_spatial:0,2,3 --inits 0-1 --out runs/faults
    .venv/bin/python scripts/fault_table.py --quirks all --rate 0.3 --out runs/quirks-30pct   # real servers' quirks

Episodes run one at a time (one simulation; the robot is reused across the episodes of a task).
Each episode's line goes to OUT/results.jsonl as it finishes; rerunning with the same --out skips
the episodes already there. Prints a Markdown table and writes it to OUT/table.md. The oracle reads
privileged simulator state: these numbers measure the stack's fault handling, not a VLM.

Columns: success rate; VLM calls per episode (role-level calls, repair requests included); HTTP
requests per episode (calls + the brain's retries); faults the server injected, repair requests,
retries, role fail-safes, Controller rejections, Verifier rejections and replans per episode; mean
control steps; mean episode wall time. With ``--quirks`` the rows are serve-brain's quirks
(motormind/serve/quirks.py) and two more columns count the quirks the server emulated and those
the openai brain named and handled (``vlm_quirk`` events) per episode.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

from motormind.ranges import parse_ints as _range

os.environ.setdefault("MUJOCO_GL", "osmesa")


def _grid(spec: str) -> list[tuple[str, int]]:
    """"libero_spatial:0,2,3 libero_object:0-1" -> [(suite, task), ...]"""
    out = []
    for item in spec.split():
        suite, _, tasks = item.partition(":")
        out += [(suite, t) for t in _range(tasks or "0")]
    return out


def _mean(xs):
    xs = list(xs)
    return sum(xs) / len(xs) if xs else float("nan")


def main(argv=None) -> int:
    from motormind.registry import BrainConfig
    from motormind.session.open import open_episode
    from motormind.session.setup import libero_setup
    from motormind.serve.faults import FAULTS
    from motormind.serve.quirks import QUIRKS
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rate", type=float, default=0.2, help="each fault's rate per applicable request")
    ap.add_argument("--faults", default="all", help="comma-separated fault names (default: all)")
    ap.add_argument("--quirks", default=None, metavar="all|NAMES",
                    help="rows are quirks instead of faults: comma-separated quirk names, or all")
    ap.add_argument("--no-baseline", action="store_true", help="skip the row without faults")
    ap.add_argument("--tasks", default="libero_spatial:0,2,3", help="suite:tasks items, space separated")
    ap.add_argument("--inits", default="0-1")
    ap.add_argument("--seed", type=int, default=0, help="base of the per-episode fault seeds")
    ap.add_argument("--vlm", default="local-oracle")
    ap.add_argument("--timeout-s", type=float, default=3.0, help="the client's timeout")
    ap.add_argument("--slow-s", type=float, default=4.0, help="how late a 'slow' answer arrives (> timeout)")
    ap.add_argument("--out", default=None)
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args(argv)
    kind, known = ("quirks", QUIRKS) if a.quirks else ("faults", FAULTS)
    names = a.quirks if a.quirks else a.faults
    faults = list(known) if names == "all" else [f.strip() for f in names.split(",")]
    bad = sorted(set(faults) - set(known))
    if bad:
        ap.error(f"unknown {kind[:-1]}(s) {bad}; known: {', '.join(known)}")
    conditions = ([] if a.no_baseline else ["none"]) + faults
    out = Path(a.out or f"runs/faults-{datetime.datetime.now():%Y%m%d-%H%M%S}")
    out.mkdir(parents=True, exist_ok=True)
    res_path = out / "results.jsonl"
    done = {}
    if res_path.exists():
        for line in res_path.read_text().splitlines():
            r = json.loads(line)
            done[(r["fault"], r["suite"], r["task"], r["init_state"])] = r
    grid = _grid(a.tasks)
    inits = _range(a.inits)
    total = len(conditions) * len(grid) * len(inits)
    n = 0
    t0 = time.monotonic()
    from motormind.sim.libero_pro.backend import LiberoRobot
    for suite, task in grid:
        todo = [(f, i) for f in conditions for i in inits if (f, suite, task, i) not in done]
        n += len(conditions) * len(inits) - len(todo)
        if not todo:
            continue
        robot = LiberoRobot(suite, task, todo[0][1])
        try:
            for fault, init in todo:
                n += 1
                seed = a.seed * 1000 + task * 10 + init     # reproducible, different per episode
                sets = [f"timeout_s={a.timeout_s}", f"faults.seed={seed}", f"faults.slow_s={a.slow_s}"]
                if fault != "none":
                    sets.append(f"{kind}.{fault}={a.rate}")
                if kind == "quirks":
                    sets.append(f"quirks.seed={seed}")
                setup = libero_setup(suite, task, init, brain=BrainConfig("openai", vlm=a.vlm or "openai",
                                                                         vlm_set=tuple(sets)),
                                     media=False, out=str(out / f"{fault}_{suite}_t{task}_i{init}"))
                s = open_episode(setup, progress=lambda m: None, robot=robot)
                v = s["vlm"]
                row = {"fault": fault, "rate": a.rate if fault != "none" else 0.0, "suite": suite, "task": task,
                       "init_state": init, "fault_seed": seed, "success": s["success"], "outcome": s["outcome"],
                       "reason": s["reason"], "steps": s["steps"], "step_budget": s["step_budget"],
                       "batches": s["batches"], "replans": s["replans"],
                       "verifier_rejections": s["verifier_rejections"],
                       "controller_rejections": s["controller_rejections"], "vlm_calls": v["calls"],
                       "http_requests": v["calls"] + v["retries"], "retries": v["retries"],
                       "repairs": v["repairs"], "failed_safe": v["failed_safe"],
                       "server_faults": v["server_faults"], "transport_failures": v["transport_failures"],
                       "server_quirks": v.get("server_quirks", 0), "quirks_handled": sum(v.get("quirks", {}).values()),
                       "quirk_names": v.get("quirks", {}),
                       "episode_wall_s": s["episode_wall_s"], "brain": s["brain"], "privileged": s["privileged"]}
                with open(res_path, "a") as f:
                    f.write(json.dumps(row) + "\n")
                done[(fault, suite, task, init)] = row
                if not a.quiet:
                    print(f"[{n}/{total} {time.monotonic() - t0:6.0f}s] {fault:15s} {suite} t{task} i{init}: "
                          f"{'SUCCESS' if row['success'] else 'FAIL ' + row['outcome']} calls {row['vlm_calls']} "
                          f"faults {row['server_faults']} quirks {row['server_quirks']}/{row['quirks_handled']} "
                          f"steps {row['steps']}", file=sys.stderr, flush=True)
        finally:
            robot.close()
    table = render(conditions, list(done.values()), a, kind)
    (out / "table.md").write_text(table + "\n")
    print(table)
    print(f"\nresults: {res_path}  table: {out / 'table.md'}", file=sys.stderr)
    return 0


def render(conditions, rows, a, kind="faults") -> str:
    quirky = kind == "quirks"
    cols = ["quirk" if quirky else "fault", "episodes", "success", "VLM calls/ep", "HTTP req/ep",
            *(["quirks/ep", "handled/ep"] if quirky else ["faults/ep"]), "repairs/ep",
            "retries/ep", "fail-safes/ep", "ctrl rej/ep", "verif rej/ep", "replans/ep", "steps", "wall s/ep"]
    lines = [f"{kind.title()} at {a.rate:.0%} per applicable request, oracle behind serve-brain (PRIVILEGED), "
             f"tasks {a.tasks}, inits {a.inits}, client timeout {a.timeout_s:g} s, slow answers {a.slow_s:g} s.", "",
             "| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    for c in conditions:
        rs = [r for r in rows if r["fault"] == c]
        if not rs:
            continue
        k = len(rs)
        ok = sum(r["success"] for r in rs)
        fails = sorted({r["outcome"] for r in rs if not r["success"]})
        counted = ([f"{_mean(r.get('server_quirks', 0) for r in rs):.1f}", f"{_mean(r.get('quirks_handled', 0) for r in rs):.1f}"]
                   if quirky else [f"{_mean(r['server_faults'] for r in rs):.1f}"])
        lines.append("| " + " | ".join([
            c, str(k), f"{ok}/{k} ({ok / k:.0%})" + (f" [{', '.join(fails)}]" if fails else ""),
            f"{_mean(r['vlm_calls'] for r in rs):.1f}", f"{_mean(r['http_requests'] for r in rs):.1f}",
            *counted, f"{_mean(r['repairs'] for r in rs):.1f}",
            f"{_mean(r['retries'] for r in rs):.1f}", f"{_mean(r['failed_safe'] for r in rs):.1f}",
            f"{_mean(r['controller_rejections'] for r in rs):.1f}", f"{_mean(r['verifier_rejections'] for r in rs):.1f}",
            f"{_mean(r['replans'] for r in rs):.1f}", f"{_mean(r['steps'] for r in rs):.0f}",
            f"{_mean(r['episode_wall_s'] for r in rs):.1f}"]) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
