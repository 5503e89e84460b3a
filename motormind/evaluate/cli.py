"""``motormind eval``: LIBERO-PRO evaluation over suites x tasks x init states x seeds."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..ranges import parse_ints as _ints

BASE_SUITES = ["libero_spatial", "libero_object", "libero_goal", "libero_10"]


def _noise(s: str | None) -> tuple:
    """A ``--noise`` text (a preset, a profile file or a diagnostic report, then ``key=value``
    overrides; brains/noise_profile.py) -> the profile's items, what an episode's job carries."""
    from ..brains.noise_profile import parse_noise
    prof = parse_noise(s)
    return prof.items() if prof is not None else ()


def _unique(items: list, what: str) -> list:
    """``items`` with repeats dropped, in order: ``--tasks 0,0`` is task 0 once (each episode runs
    once, and the progress counts what runs); a note says what was dropped."""
    out = list(dict.fromkeys(items))
    if len(out) != len(items):
        print(f"[eval] {what}: repeated values dropped ({len(items)} given, {len(out)} distinct)", file=sys.stderr)
    return out


def _endpoint(a) -> str | None:
    """The base URL every episode of an openai run calls (None: none, or one served per episode)."""
    if a.brain != "openai":
        return None
    from ..brains.openai_brain import load_vlm_config
    cfg = load_vlm_config(a.vlm or "openai", tuple(a.vlm_set))
    return None if cfg.serve else cfg.base_url


def _check_concurrency(a) -> None:
    """--concurrency and --max-in-flight: refused, naming the flag and the limit, before anything runs."""
    from ..errors import ConfigError
    from ..evaluate.pool import EPISODE_MB, MAX_CONCURRENCY, WORKER_MB, available_mb
    if a.brain != "openai":
        for flag, v in (("--max-in-flight", a.max_in_flight), ("--vlm", a.vlm), ("--vlm-set", a.vlm_set)):
            if v:
                raise ConfigError(f"{flag}: only --brain openai calls an endpoint (this run: --brain {a.brain})")
    if a.brain == "openai":                  # a dead endpoint is said now, not as N failed episodes
        from ..brains.endpoint import checked_vlm_config
        checked_vlm_config(a.vlm, a.vlm_set, "--vlm")
    if a.concurrency > MAX_CONCURRENCY:
        raise ConfigError(f"--concurrency: at most {MAX_CONCURRENCY} episodes at once per worker, got {a.concurrency}")
    per, fixed = EPISODE_MB[a.backend], WORKER_MB[a.backend] * max(1, a.workers)
    slots = a.concurrency * max(1, a.workers)
    avail = available_mb()
    if avail is not None and slots > 1 and fixed + slots * per > avail:
        fit = max(1, int((avail - fixed) // per))
        raise ConfigError(f"--concurrency: {a.concurrency} episodes x {max(1, a.workers)} worker(s) need about "
                          f"{(fixed + slots * per) / 1024:.1f} GB ({per} MB an episode in flight and "
                          f"{WORKER_MB[a.backend]} MB a worker, docs/evaluation.md); {avail / 1024:.1f} GB is "
                          f"available: at most {fit} episodes at once")


def register(sub) -> None:
    from ..argtypes import interference, non_negative, non_negative_int, out_dir, positive_int, seconds, shift_mm
    from ..episode.config import WALL_BUDGET_S
    from ..interference_setting import SHIFT_M
    p = sub.add_parser("eval", help="evaluate on LIBERO-PRO suites: parallel, resumable, with reports",
                       description=__doc__)
    p.add_argument("--suites", nargs="+", default=None,
                   help="suite names (default: libero_spatial; with --backend fake its one suite, fake); 'base' = "
                        "the four base suites, 'pro' = their _lan/_object/_swap/_task variants")
    p.add_argument("--tasks", default="0-9")
    p.add_argument("--inits", default="0-4", help="init states, e.g. 0-49")
    p.add_argument("--seeds", default="0")
    p.add_argument("--brain", default=None,
                   help="oracle (privileged; the default), noisy (the oracle with --noise, default seed_calibrated), "
                        "openai; with --backend fake: scripted (the default) or openai")
    p.add_argument("--ablations", nargs="+", default=["full"],
                   help="full no_replan no_planner no_monitor no_verifier no_memory")
    p.add_argument("--noise", default=None,
                   help="wrap the brain in the noisy brain: a preset (seed_calibrated), a profile YAML or a "
                        "diagnostic report, then key=value overrides: a rate per error kind (wrong_direction, "
                        "wrong_magnitude, object_confusion, wrong_region, premature_done, missed_completion, "
                        "false_alarm, missed_alarm, or all), scope.KIND=call|plan|episode, clear_chance "
                        "(docs/evaluation.md)")
    p.add_argument("--interference", nargs="+", type=interference, default=["off"], metavar="WHAT@WHEN",
                   help="conditions side by side: off, and/or an object moved mid-episode by an outside hand "
                        "(PRIVILEGED, never in a prompt): WHAT fetched|target|bystander, WHEN reach|carry|between, "
                        "e.g. --interference off fetched@reach")
    p.add_argument("--interference-mm", type=shift_mm, default=SHIFT_M, metavar="LO-HI",
                   help=f"how far the object is moved, mm (seeded within LO-HI; default "
                        f"{SHIFT_M[0] * 1000:g}-{SHIFT_M[1] * 1000:g})")
    p.add_argument("--workers", type=non_negative_int, default=1, help="local worker processes (0: run inline)")
    p.add_argument("--concurrency", type=positive_int, default=1, metavar="K",
                   help="episodes in flight per worker, each with its own simulator (threads: an episode "
                        "waiting for its VLM holds no core); at most what memory allows (docs/evaluation.md)")
    p.add_argument("--max-in-flight", type=positive_int, default=None, metavar="N",
                   help="--brain openai: at most N requests in flight to the run's endpoint, shared by every "
                        "episode of every worker (a 429 there slows them all); default: no cap")
    p.add_argument("--vlm", default=None, metavar="CONFIG",
                   help="--brain openai: the VLM config (configs/vlm/NAME.yaml or a path), e.g. remote-oracle "
                        "for a standalone `motormind serve-brain`")
    p.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE",
                   help="--brain openai: override a field of the VLM config (repeatable)")
    p.add_argument("--ray", nargs="?", const="auto", default=None, metavar="ADDRESS",
                   help="run on Ray (an address, or none for a local Ray)")
    p.add_argument("--max-steps", type=positive_int, default=None, help="override the suites' standard step budgets")
    p.add_argument("--wall-budget", type=seconds, default=WALL_BUDGET_S, help="per-episode wall-clock budget, s (> 0)")
    p.add_argument("--no-images", action="store_true", help="do not render images for the roles (oracle only)")
    p.add_argument("--videos", nargs="?", type=positive_int, const=1, default=0, metavar="EVERY",
                   help="per episode: a rollout video (both cameras side by side, a frame every EVERY control "
                        "steps; EVERY 1, the control rate, when given without a number), the contact sheet, and "
                        "an episode page (episode.html) linked from the report; default: none")
    p.add_argument("--backend", default="libero", choices=["libero", "fake"],
                   help="fake: the kinematic fake with a scripted brain (to exercise the machinery)")
    p.add_argument("--out", default=None, type=out_dir,
                   help="results directory; rerunning with the same --out resumes")
    # faults for the tests of the evaluation machinery (workers, resume, Ctrl-C): named, never on by default
    p.add_argument("--test-sleep", type=non_negative, default=0.0, metavar="SECONDS",
                   help="tests: each episode waits SECONDS before it starts (episodes overlap; a Ctrl-C lands)")
    p.add_argument("--test-crash-once", default=None, metavar="MARKER",
                   help="tests: the worker running init state 1 exits (code 3) once, making the file MARKER")
    p.set_defaults(fn=main)
    from .steps import register as register_steps     # steps: where the episodes' control steps go
    register_steps(sub)


def main(a) -> int:
    from ..evaluate import pool
    from ..session.checks import check_grid
    from ..evaluate.jobs import ABLATIONS, BRAINS, DEFAULT_SUITE, grid
    from .publish import write_reports
    from ..evaluate.store import ResultStore
    from ..session.setup import TestFaults
    suites = []
    for s in a.suites or [DEFAULT_SUITE[a.backend]]:
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
    a.brain = a.brain or BRAINS[a.backend][0]
    if a.brain not in BRAINS[a.backend]:         # a row names the brain that ran: none runs in another's name
        raise ConfigError(f"--brain: {a.brain!r} does not run on the {a.backend} backend (it runs: "
                          f"{', '.join(BRAINS[a.backend])})")
    if a.brain == "noisy":                       # the oracle inside the noisy brain
        a.brain, a.noise = "oracle", a.noise or "seed_calibrated"
    a.interference = _unique(a.interference, "--interference")
    if a.backend != "libero" and a.interference != ["off"]:
        raise ConfigError(f"--interference: needs --backend libero (the {a.backend} backend has no scene to disturb), "
                          f"got {' '.join(a.interference)}")
    noise = _noise(a.noise)
    if noise and a.backend != "libero":
        raise ConfigError(f"--noise: needs --backend libero (the {a.backend} backend's brains have no noisy "
                          f"variant), got {a.noise}")
    _check_concurrency(a)
    # every suite, task and init state exists on the backend, before any episode runs
    for note in check_grid(a.backend, suites, tasks, inits):
        print(f"[eval] {note}", file=sys.stderr)
    out = Path(a.out or f"runs/eval-{time.strftime('%Y%m%d-%H%M%S')}")
    store = ResultStore(out)
    jobs = grid(suites, tasks, inits, seeds, a.brain, a.ablations, noise, max_steps=a.max_steps,
                wall_budget_s=a.wall_budget, images=not a.no_images, backend=a.backend,
                vlm=a.vlm if a.brain == "openai" else None, vlm_set=tuple(a.vlm_set) if a.brain == "openai" else (),
                interference=a.interference, interference_shift_m=a.interference_mm, video_every=a.videos,
                faults=TestFaults(a.test_sleep, a.test_crash_once))
    todo = [j for j in jobs if not store.done(j.key)]
    from .provenance import load as load_stamp
    from .provenance import stamp
    st = stamp()
    st["first_date"] = load_stamp(out).get("first_date") or st["date"]     # a resumed run keeps its first start
    (out / "eval.json").write_text(json.dumps({"argv": sys.argv[1:], "episodes": len(jobs), "provenance": st},
                                              indent=2))
    keys = {j.key for j in jobs}
    prior = [r for k, r in store.rows.items() if k in keys]
    print(f"[eval] {len(jobs)} episodes, {len(prior)} already finished in {out / 'results.jsonl'}"
          f"{f' (dropped {store.torn} torn line)' if store.torn else ''}; running {len(todo)} on "
          f"{'Ray' if a.ray else f'{a.workers} worker(s)'}"
          f"{f', {a.concurrency} episodes at once each' if a.concurrency > 1 else ''}"
          f"{f', at most {a.max_in_flight} requests in flight per endpoint' if a.max_in_flight else ''}",
          file=sys.stderr)
    progress = pool.Progress(len(jobs), len(prior), sum(bool(r["success"]) for r in prior))

    def on_row(row):
        if store.append(row):
            progress(row)
    stop = _interruptible()
    try:
        if todo:
            if a.ray:
                pool.run_ray(todo, str(out), None if a.ray == "auto" else a.ray, on_row, a.workers,
                             concurrency=a.concurrency, max_in_flight=a.max_in_flight)
            elif a.workers <= 0:
                pool.run_inline(todo, str(out), on_row, a.concurrency, a.max_in_flight, stop=stop)
            else:
                pool.run_local(todo, str(out), a.workers, on_row, concurrency=a.concurrency,
                               max_in_flight=a.max_in_flight, endpoint=_endpoint(a), stop=stop)
    finally:
        stop.restore()
    rows = [store.rows[j.key] for j in jobs if j.key in store.rows]
    paths = write_reports(rows, out)
    print(open(paths["markdown"]).read())
    print(f"[eval] results: {store.path}  report: {paths['markdown']}, {paths['html']}", file=sys.stderr)
    if stop.is_set() and len(rows) < len(jobs):
        import shlex
        again = sys.argv[1:] if "--out" in sys.argv else [*sys.argv[1:], "--out", str(out)]
        print(f"[eval] stopped by Ctrl-C: {len(rows)} of {len(jobs)} episodes finished, the report covers them; "
              f"resume with: motormind {shlex.join(again)}", file=sys.stderr)
        return 130
    return 0


class _Stop:
    """eval's Ctrl-C: the first stops at the next episode boundary (the episodes under way finish,
    their rows are kept, the report covers what finished); a second stops now."""

    def __init__(self):
        import signal
        import threading
        self._event = threading.Event()
        self._signal = signal
        self._old = None
        if threading.current_thread() is threading.main_thread():
            self._old = signal.signal(signal.SIGINT, self._first)

    def _first(self, signum, frame) -> None:
        if self._event.is_set():
            raise KeyboardInterrupt
        self._event.set()
        print("\n[eval] Ctrl-C: stopping after the episodes under way (Ctrl-C again to stop now)",
              file=sys.stderr, flush=True)

    def is_set(self) -> bool:
        return self._event.is_set()

    def set(self) -> None:
        self._event.set()

    def restore(self) -> None:
        if self._old is not None:
            self._signal.signal(self._signal.SIGINT, self._old)
            self._old = None


def _interruptible() -> _Stop:
    return _Stop()
