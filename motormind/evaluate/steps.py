"""Where an episode's control steps go, from its record (``events.jsonl``): ``motormind steps RUN_DIR...``.

Every execution report carries each command's ``steps``; this splits them by category:

* ``travel``: what a move or rotation needs at the profile's top speed (``speeds.move_mm_s`` and
  ``rotate_deg_s`` times the control period: 12.5 mm and 3 deg a step on the LIBERO Panda), for the
  distance it commanded (or, when it ended short, achieved);
* ``settle``: a move's or rotation's steps beyond that: the approach into tolerance at the end of a
  command, and the stop at the target of a move passed through (blended) before a gripper action, a
  wait, a ``done`` or the batch's end (``settle_steps`` in the report);
* ``stopped``: a move's or rotation's steps beyond its travel when it did not end done (blocked:
  contact, a stall, a timeout; cancelled);
* ``gripper``: gripper commands; ``wait``: wait commands;
* ``other``: the episode's steps that no report carries (the difference to ``episode_end.steps``).

A RUN_DIR is an episode's record directory, or an evaluation's ``--out`` (its ``episodes/*``).
"""
from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

CATEGORIES = ("travel", "settle", "stopped", "gripper", "wait", "other")


def _speeds(profile_name: str | None) -> tuple[float, float]:
    """(mm, deg) a control step at the profile's top speed."""
    from ..profile import load_profile
    prof = load_profile(profile_name or "libero_panda")
    return prof.move_mm_s * prof.period_s, prof.rotate_deg_s * prof.period_s


def command_steps(result: dict, mm_step: float, deg_step: float) -> dict:
    """One command's steps by category (``result``: a report's ``results[k]``)."""
    out = dict.fromkeys(CATEGORIES, 0)
    steps = int(result.get("steps") or 0)
    if steps <= 0:
        return out
    op = (result.get("command") or {}).get("op")
    if op == "gripper":
        out["gripper"] = steps
        return out
    if op == "wait":
        out["wait"] = steps
        return out
    if op not in ("move", "rotate"):
        out["other"] = steps
        return out
    done = result.get("status") == "done"
    ach, com = result.get("achieved") or {}, result.get("commanded") or {}
    if op == "move":
        vec = com.get("translation_mm") if done else ach.get("translation_mm")
        need = math.ceil(math.hypot(*(vec or [0.0])) / mm_step - 1e-9)
    else:
        ang = abs(float(com.get("rotation_deg") or 0.0)) if done else float(ach.get("rotation_deg") or 0.0)
        need = math.ceil(ang / deg_step - 1e-9)
    travel = min(steps, max(need, 0))
    out["travel"] = travel
    out["settle" if done else "stopped"] = steps - travel
    return out


def _add(a: dict, b: dict) -> None:
    for k in CATEGORIES:
        a[k] = a.get(k, 0) + b.get(k, 0)


def episode_steps(run_dir: str | Path) -> dict:
    """An episode's steps by category, per batch and in total, from ``run_dir/events.jsonl``."""
    path = Path(run_dir) / "events.jsonl"
    if not path.is_file():
        raise FileNotFoundError(f"{run_dir}: no events.jsonl (an episode's record directory, or an eval's --out)")
    start, end, reports = {}, {}, []
    with path.open() as f:
        for line in f:
            try:
                e = json.loads(line)
            except ValueError:
                continue                          # a line cut short by a killed run
            kind = e.get("kind")
            if kind == "episode_start":
                start = e
            elif kind == "episode_end":
                end = e
            elif kind == "report":
                reports.append(e)
    mm_step, deg_step = _speeds(start.get("profile"))
    batches, total = [], dict.fromkeys(CATEGORIES, 0)
    for rep in reports:
        b = dict.fromkeys(CATEGORIES, 0)
        for r in rep.get("results") or []:
            _add(b, command_steps(r, mm_step, deg_step))
        batches.append({"batch_id": rep.get("batch_id", ""), "status": rep.get("status", ""),
                        "steps": sum(b.values()), "by": b})
        _add(total, b)
    steps = int(end.get("steps", sum(total.values())) or 0)
    total["other"] += max(0, steps - sum(total.values()))
    return {"run_dir": str(run_dir), "suite": start.get("suite"), "task": start.get("task"),
            "init_state": start.get("init_state"), "budget": start.get("step_budget"),
            "success": end.get("success"), "outcome": end.get("outcome"), "steps": steps,
            "by": total, "batches": batches}


def episode_dirs(paths) -> list[Path]:
    """Every episode record under ``paths`` (an episode directory, or an eval's --out)."""
    out = []
    for p in map(Path, paths):
        if (p / "events.jsonl").is_file():
            out.append(p)
        elif (p / "episodes").is_dir():
            out += sorted(d for d in (p / "episodes").iterdir() if (d / "events.jsonl").is_file())
        else:
            raise FileNotFoundError(f"{p}: neither an episode's record (events.jsonl) nor an eval's --out (episodes/)")
    return out


def summarize(episodes: list[dict]) -> dict:
    """Totals and shares by category, successes, and the median steps of an episode."""
    total = dict.fromkeys(CATEGORIES, 0)
    for e in episodes:
        _add(total, e["by"])
    n = sum(total.values())
    return {"episodes": len(episodes), "successes": sum(1 for e in episodes if e.get("success")),
            "median_steps": statistics.median([e["steps"] for e in episodes]) if episodes else None,
            "steps": n, "by": total, "share": {k: (v / n if n else 0.0) for k, v in total.items()},
            "per_episode": {k: (v / len(episodes) if episodes else 0.0) for k, v in total.items()}}


def _row(label: str, by: dict, steps: int) -> str:
    return f"| {label} | {steps} | " + " | ".join(f"{by[k]}" for k in CATEGORIES) + " |"


HEADER = ["| | steps | " + " | ".join(CATEGORIES) + " |", "|---|---:|" + "---:|" * len(CATEGORIES)]


def markdown(episodes: list[dict], batches: bool = False) -> str:
    """The breakdown as markdown: the totals with shares, then one row per episode (and per batch)."""
    s = summarize(episodes)
    lines = [f"{s['episodes']} episodes, {s['successes']} successes, median {s['median_steps']} steps an episode; "
             f"{s['steps']} steps in all:", "", *HEADER,
             _row("all", s["by"], s["steps"]),
             "| share | | " + " | ".join(f"{100 * s['share'][k]:.0f}%" for k in CATEGORIES) + " |",
             "| per episode | | " + " | ".join(f"{s['per_episode'][k]:.1f}" for k in CATEGORIES) + " |", ""]
    lines += [*HEADER]
    for e in episodes:
        name = f"{e['suite']}/{e['task']}/{e['init_state']} ({e['outcome']})"
        lines.append(_row(name, e["by"], e["steps"]))
        if batches:
            lines += [_row(f"&nbsp;&nbsp;{b['batch_id']} ({b['status']})", b["by"], b["steps"]) for b in e["batches"]]
    return "\n".join(lines) + "\n"


def section(rows: list[dict]) -> list[str]:
    """report.md's "Where the steps go" section, from the result rows' record directories."""
    dirs = [Path(r["run_dir"]) for r in rows if r.get("run_dir") and (Path(r["run_dir"]) / "events.jsonl").is_file()]
    if not dirs:
        return []
    eps = [episode_steps(d) for d in dict.fromkeys(dirs)]
    s = summarize(eps)
    return ["## Where the steps go", "",
            "Control steps by category, from the records (`motormind steps OUT`; docs/evaluation.md).", "",
            *HEADER, _row("all", s["by"], s["steps"]),
            "| share | | " + " | ".join(f"{100 * s['share'][k]:.0f}%" for k in CATEGORIES) + " |",
            "| per episode | | " + " | ".join(f"{s['per_episode'][k]:.1f}" for k in CATEGORIES) + " |", ""]


def register(sub) -> None:
    p = sub.add_parser("steps", help="where episodes' control steps go: travel, settling, gripper, waits, stops",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                   help="an episode's record directory, or an evaluation's --out")
    p.add_argument("--batches", action="store_true", help="also one row per batch")
    p.add_argument("--json", action="store_true", help="print JSON instead of markdown")
    p.set_defaults(fn=_main)


def _main(args) -> int:
    import sys
    try:
        eps = [episode_steps(d) for d in episode_dirs(args.run_dirs)]
    except FileNotFoundError as e:
        print(f"steps: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps({"summary": summarize(eps), "episodes": eps}, indent=1))
    else:
        print(markdown(eps, batches=args.batches), end="")
    return 0
