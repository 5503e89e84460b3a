"""``motormind eval``: LIBERO-PRO evaluation over suites x tasks x init states x seeds."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..ranges import parse_ints as _ints

BASE_SUITES = ["libero_spatial", "libero_object", "libero_goal", "libero_10"]


def _noise(s: str | None) -> tuple:
    """``kind=rate,...`` (or ``all=rate``) -> ((kind, rate), ...); each rate within 0..1."""
    if not s:
        return ()
    from ..brains.noisy import KINDS
    from ..errors import ConfigError
    out = []
    for part in s.split(","):
        k, _, v = part.partition("=")
        k = k.strip()
        if k != "all" and k not in KINDS:
            raise ConfigError(f"--noise: unknown error kind {k!r} (known: {', '.join(KINDS)}, all)")
        try:
            rate = float(v)
        except ValueError:
            raise ConfigError(f"--noise: {k} needs a rate within 0..1, e.g. {k}=0.2, got {v!r}") from None
        if not 0 <= rate <= 1:           # also refuses nan
            raise ConfigError(f"--noise: {k} rate must be within 0..1, got {v.strip()}")
        out += [(kind, rate) for kind in KINDS] if k == "all" else [(k, rate)]
    return tuple(sorted(dict(out).items()))


def _unique(items: list, what: str) -> list:
    """``items`` with repeats dropped, in order: ``--tasks 0,0`` is task 0 once (each episode runs
    once, and the progress counts what runs); a note says what was dropped."""
    out = list(dict.fromkeys(items))
    if len(out) != len(items):
        print(f"[eval] {what}: repeated values dropped ({len(items)} given, {len(out)} distinct)", file=sys.stderr)
    return out


def register(sub) -> None:
    from ..argtypes import interference, non_negative_int, out_dir, positive_int, seconds, shift_mm
    from ..episode.config import WALL_BUDGET_S
    from .interference import SHIFT_M
    p = sub.add_parser("eval", help="evaluate on LIBERO-PRO suites: parallel, resumable, with reports",
                       description=__doc__)
    p.add_argument("--suites", nargs="+", default=["libero_spatial"],
                   help="suite names; 'base' = the four base suites, 'pro' = their _lan/_object/_swap/_task variants")
    p.add_argument("--tasks", default="0-9")
    p.add_argument("--inits", default="0-4", help="init states, e.g. 0-49")
    p.add_argument("--seeds", default="0")
    p.add_argument("--brain", default="oracle")
    p.add_argument("--ablations", nargs="+", default=["full"],
                   help="full no_replan no_planner no_monitor no_verifier no_memory")
    p.add_argument("--noise", default=None,
                   help="wrap the brain in the noisy brain: kind=rate,... (wrong_direction, wrong_magnitude, "
                        "object_confusion, premature_done, missed_completion, or all=rate)")
    p.add_argument("--interference", nargs="+", type=interference, default=["off"], metavar="WHAT@WHEN",
                   help="conditions side by side: off, and/or an object moved mid-episode by an outside hand "
                        "(PRIVILEGED, never in a prompt): WHAT fetched|target|bystander, WHEN reach|carry|between, "
                        "e.g. --interference off fetched@reach")
    p.add_argument("--interference-mm", type=shift_mm, default=SHIFT_M, metavar="LO-HI",
                   help=f"how far the object is moved, mm (seeded within LO-HI; default "
                        f"{SHIFT_M[0] * 1000:g}-{SHIFT_M[1] * 1000:g})")
    p.add_argument("--workers", type=non_negative_int, default=1, help="local worker processes (0: run inline)")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="run on Ray (an address, or none for a local Ray)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="override the suites' standard step budgets")
    p.add_argument("--wall-budget", type=seconds, default=WALL_BUDGET_S, help="per-episode wall-clock budget, s (> 0)")
    p.add_argument("--no-images", action="store_true", help="do not render images for the roles (oracle only)")
    p.add_argument("--videos", action="store_true", help="write a contact sheet and video per episode")
    p.add_argument("--backend", default="libero", choices=["libero", "fake"],
                   help="fake: the kinematic fake with a scripted brain (to exercise the machinery)")
    p.add_argument("--out", default=None, type=out_dir,
                   help="results directory; rerunning with the same --out resumes")
    p.set_defaults(fn=main)


def main(a) -> int:
    from ..evaluate import pool
    from ..evaluate.jobs import ABLATIONS, grid
    from ..evaluate.report import write_reports
    from ..evaluate.store import ResultStore
    suites = []
    for s in a.suites:
        if s == "base":
            suites += BASE_SUITES
        elif s == "pro":
            suites += [f"{b}_{p}" for b in BASE_SUITES for p in ("lan", "object", "swap", "task")]
        else:
            suites.append(s)
    from ..errors import ConfigError
    for ab in a.ablations:
        if ab not in ABLATIONS:
            raise ConfigError(f"--ablations: unknown {ab!r} (known: {', '.join(ABLATIONS)})")
    tasks, inits, seeds = (_ints(v, name) for v, name in ((a.tasks, "--tasks"), (a.inits, "--inits"),
                                                          (a.seeds, "--seeds")))
    suites, tasks, inits, seeds = (_unique(v, name) for v, name in ((suites, "--suites"), (tasks, "--tasks"),
                                                                     (inits, "--inits"), (seeds, "--seeds")))
    a.ablations = _unique(a.ablations, "--ablations")
    a.interference = _unique(a.interference, "--interference")
    if a.backend != "libero" and a.interference != ["off"]:
        raise ConfigError(f"--interference: needs --backend libero (the {a.backend} backend has no scene to disturb), "
                          f"got {' '.join(a.interference)}")
    noise = _noise(a.noise)
    if a.backend == "libero":                    # every suite, task and init state exists, before any runs
        from ..evaluate.checks import check_suite
        notes = [note for s in suites for note in check_suite(s, tasks, inits)]
        for note in notes:
            print(f"[eval] {note}", file=sys.stderr)
    out = Path(a.out or f"runs/eval-{time.strftime('%Y%m%d-%H%M%S')}")
    store = ResultStore(out)
    jobs = grid(suites, tasks, inits, seeds, a.brain, a.ablations, noise, max_steps=a.max_steps,
                wall_budget_s=a.wall_budget, images=not a.no_images, backend=a.backend,
                interference=a.interference, interference_shift_m=a.interference_mm)
    todo = [j for j in jobs if not store.done(j.key)]
    (out / "eval.json").write_text(json.dumps({"argv": sys.argv[1:], "episodes": len(jobs)}, indent=2))
    keys = {j.key for j in jobs}
    prior = [r for k, r in store.rows.items() if k in keys]
    print(f"[eval] {len(jobs)} episodes, {len(prior)} already finished in {out / 'results.jsonl'}"
          f"{f' (dropped {store.torn} torn line)' if store.torn else ''}; running {len(todo)} on "
          f"{'Ray' if a.ray else f'{a.workers} worker(s)'}", file=sys.stderr)
    progress = pool.Progress(len(jobs), len(prior), sum(bool(r["success"]) for r in prior))

    def on_row(row):
        if store.append(row):
            progress(row)
    if todo:
        if a.ray:
            pool.run_ray(todo, str(out), None if a.ray == "auto" else a.ray, on_row, a.workers)
        elif a.workers <= 0:
            pool.run_inline(todo, str(out), on_row)
        else:
            pool.run_local(todo, str(out), a.workers, on_row)
    rows = [store.rows[j.key] for j in jobs if j.key in store.rows]
    paths = write_reports(rows, out)
    print(open(paths["markdown"]).read())
    print(f"[eval] results: {store.path}  report: {paths['markdown']}, {paths['html']}", file=sys.stderr)
    return 0
