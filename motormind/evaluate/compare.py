"""``motormind compare DIR DIR...``: two or more evaluation result directories side by side.

For the backbone swap (two VLMs, or two scaffolds, on the same grid): each directory's
``results.jsonl`` is read, episodes are matched across directories by what defines an episode
apart from the brain (suite, task, init state, seed, ablation, noise), and for every group (suite,
perturbation, overall) the success of each directory on the matched episodes is given with its
95% Wilson interval, and the difference of each later directory from the first with a 95%
interval for a difference of paired proportions (Newcombe 1998, method 10: Wilson limits of each
rate, corrected for the correlation of the pairs). Episodes that only some directories have are
counted and left out. Then what an episode costs in each (mean time, control steps, VLM calls,
tokens, cost) with the differences, and the episodes whose success flipped between directories.
Writes ``compare.md`` and ``compare.html`` (``--out``, default the first
directory) and prints the Markdown.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

from motormind.sim.libero_pro.suites import split_suite

from .report import group
from .stats import wilson


def episode_id(r: dict) -> tuple:
    """What an episode is, apart from the brain that ran it."""
    noise = r.get("noise") or {}
    return (r["suite"], int(r["task"]), int(r["init_state"]), int(r.get("seed", 0)), r.get("ablation", "full"),
            json.dumps(noise, sort_keys=True) if isinstance(noise, dict) else str(noise))


def paired_difference(pairs: list[tuple[bool, bool]]) -> tuple[float, float, float]:
    """(p2 - p1, lower, upper): the difference of two success rates on the same episodes and its
    95% interval (Newcombe's method 10). ``pairs``: (first succeeded, second succeeded)."""
    n = len(pairs)
    if n == 0:
        return 0.0, -1.0, 1.0
    a = sum(1 for x, y in pairs if x and y)
    b = sum(1 for x, y in pairs if x and not y)
    c = sum(1 for x, y in pairs if not x and y)
    d = n - a - b - c
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson(a + b, n)
    l2, u2 = wilson(a + c, n)
    den = math.sqrt((a + b) * (c + d) * (a + c) * (b + d))
    phi = (a * d - b * c) / den if den else 0.0
    diff = p2 - p1
    lo = diff - math.sqrt(max(0.0, (p2 - l2) ** 2 - 2 * phi * (p2 - l2) * (u1 - p1) + (u1 - p1) ** 2))
    hi = diff + math.sqrt(max(0.0, (u2 - p2) ** 2 - 2 * phi * (u2 - p2) * (p1 - l1) + (p1 - l1) ** 2))
    return diff, max(-1.0, lo), min(1.0, hi)


def load(d: str | Path) -> list[dict]:
    from ..errors import ConfigError
    from .store import ResultStore
    p = Path(d)
    if not (p / "results.jsonl").exists():
        raise ConfigError(f"compare: {p} holds no results.jsonl (a `motormind eval --out` directory)")
    return list(ResultStore(p).rows.values())


def compare(dirs: list[str | Path]) -> dict:
    """{"labels", "matched", "unmatched": {label: n}, "groups": {table: [(name, [per dir], [diffs])]}}."""
    labels = [Path(d).name or str(d) for d in dirs]
    if len(set(labels)) < len(labels):
        labels = [str(d) for d in dirs]
    runs = [{episode_id(r): r for r in load(d)} for d in dirs]
    common = set(runs[0]).intersection(*runs[1:])
    out = {"labels": labels, "matched": len(common),
           "brains": [sorted({r.get("brain_label") or r.get("brain", "?") for r in run.values()}) for run in runs],
           "unmatched": {lab: len(set(run) - common) for lab, run in zip(labels, runs)}, "groups": {}}
    ids = sorted(common)
    keyfs = {"by suite": lambda i: i[0], "by perturbation": lambda i: split_suite(i[0])[1], "overall": lambda i: "all"}
    for table, keyf in keyfs.items():
        lines = []
        for name, members in group(ids, keyf).items():
            per = []
            for run in runs:
                k = sum(bool(run[i]["success"]) for i in members)
                per.append((k, len(members), wilson(k, len(members))))
            diffs = [paired_difference([(bool(runs[0][i]["success"]), bool(run[i]["success"])) for i in members])
                     for run in runs[1:]]
            lines.append((name, per, diffs))
        out["groups"][table] = lines
    out["costs"] = [_costs([run[i] for i in ids]) for run in runs]
    out["flipped"] = [(_name(i), [bool(run[i]["success"]) for run in runs], [run[i].get("outcome", "") for run in runs])
                      for i in ids if len({bool(run[i]["success"]) for run in runs}) > 1]
    return out


# what an episode costs, compared: (key, label, how it is averaged over the matched episodes)
COST_FIELDS = (("episode_s", "episode s", "mean"), ("steps", "steps", "mean"), ("vlm_calls", "VLM calls", "mean"),
               ("tokens", "tokens", "mean"), ("cost", "cost USD", "mean"))


def _costs(rs: list[dict]) -> dict:
    """Means an episode over ``rs``: time, control steps, VLM calls, tokens, cost (None where no
    episode was priced)."""
    n = max(1, len(rs))
    priced = [float(r["vlm_cost_usd"]) for r in rs if r.get("vlm_cost_usd") is not None]
    return {"episode_s": sum(float(r.get("episode_s", 0.0)) for r in rs) / n,
            "steps": sum(float(r.get("steps", 0) or 0) for r in rs) / n,
            "vlm_calls": sum(float(r.get("vlm_calls", 0) or 0) for r in rs) / n,
            "tokens": sum(sum((r.get("vlm_tokens") or {}).values()) for r in rs) / n,
            "cost": sum(priced) / len(priced) if priced else None}


def _name(i: tuple) -> str:
    """An episode's id as text: suite/task/init/s<seed>/ablation[/noise]."""
    suite, task, init, seed, ab, noise = i
    return f"{suite}/{task}/{init}/s{seed}/{ab}" + ("" if noise in ("{}", "", "None") else f"/{noise}")


def _num(x, key: str) -> str:
    if x is None:
        return "-"
    return f"{x:.4f}" if key == "cost" else f"{x:.1f}"


def _delta(a, b, key: str) -> str:
    if a is None or b is None:
        return "-"
    d = b - a
    pct = f" ({100 * d / a:+.0f}%)" if a else ""
    return (f"{d:+.4f}" if key == "cost" else f"{d:+.1f}") + pct


def cost_rows(res: dict) -> tuple[list[str], list[list[str]]]:
    """(head, rows) of the cost table: each directory's means an episode and each later one's
    difference from the first."""
    labels = res["labels"]
    head = ["per episode (mean)"] + labels + [f"{lab} - {labels[0]}" for lab in labels[1:]]
    rows = []
    for key, name, _ in COST_FIELDS:
        vals = [c[key] for c in res["costs"]]
        rows.append([name, *[_num(v, key) for v in vals], *[_delta(vals[0], v, key) for v in vals[1:]]])
    return head, rows


def flipped_rows(res: dict) -> tuple[list[str], list[list[str]]]:
    head = ["episode"] + res["labels"]
    return head, [[name, *[("success" if ok else f"FAIL {o}") for ok, o in zip(oks, outs)]]
                  for name, oks, outs in res["flipped"]]


def _pct(x: float) -> str:
    return f"{100 * x:+.0f}" if x else "0"


def markdown(res: dict) -> str:
    labels = res["labels"]
    head = ["group", "n"] + labels + [f"{lab} - {labels[0]} [95%]" for lab in labels[1:]]
    lines = [f"# Comparison: {' vs '.join(labels)}", "",
             f"{res['matched']} episodes in every directory (matched by suite, task, init state, seed, ablation, "
             "noise)." + "".join(f" {lab}: {n} unmatched, left out." for lab, n in res["unmatched"].items() if n),
             "Brains: " + "; ".join(f"{lab}: {', '.join(b)}" for lab, b in zip(labels, res["brains"])), ""]
    for table, rows in res["groups"].items():
        lines += [f"## {table.capitalize()}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for name, per, diffs in rows:
            cells = [name, str(per[0][1])]
            cells += [f"{k}/{n} {100 * k / n:.0f}% [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]" for k, n, ci in per]
            cells += [f"{_pct(d)} pts [{_pct(lo)}, {_pct(hi)}]" for d, lo, hi in diffs]
            lines.append("| " + " | ".join(cells) + " |")
        lines.append("")
    head, rows = cost_rows(res)
    lines += ["## What an episode costs", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(r) + " |" for r in rows] + [""]
    head, rows = flipped_rows(res)
    lines += [f"## Flipped episodes ({len(rows)})", ""]
    if rows:
        lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(r) + " |" for r in rows]
    else:
        lines.append("None: every matched episode has the same result in every directory.")
    return "\n".join(lines + [""])


def html_page(res: dict, md: str) -> str:
    from .htmlreport import STYLE, table
    labels = res["labels"]
    head = ["group", "n"] + labels + [f"{lab} − {labels[0]} [95%]" for lab in labels[1:]]
    body = [f"<h1>Comparison: {' vs '.join(labels)}</h1>", f"<p>{md.splitlines()[2]}</p><p>{md.splitlines()[3]}</p>"]
    for tname, rows in res["groups"].items():
        trs = []
        for name, per, diffs in rows:
            trs.append([name, per[0][1], *[f"{k}/{n} {100 * k / n:.0f}% [{100 * ci[0]:.0f}, {100 * ci[1]:.0f}]"
                                           for k, n, ci in per],
                        *[f"{_pct(d)} pts [{_pct(lo)}, {_pct(hi)}]" for d, lo, hi in diffs]])
        body.append(f"<h2>{tname.capitalize()}</h2>" + table(head, trs))
    body.append("<h2>What an episode costs</h2>" + table(*cost_rows(res)))
    fh, fr = flipped_rows(res)
    body.append(f"<h2>Flipped episodes ({len(fr)})</h2>" + (table(fh, fr) if fr else
                                                             "<p>None: every matched episode has the same result.</p>"))
    return (f"<!doctype html><meta charset='utf-8'><title>Comparison</title><style>{STYLE}</style><body>"
            + "\n".join(body) + "</body>")


def register(sub) -> None:
    from ..argtypes import out_dir
    p = sub.add_parser("compare", help="evaluation result directories side by side, with the differences "
                                       "and their 95%% intervals", description=__doc__)
    p.add_argument("dirs", nargs="+", metavar="DIR", help="`motormind eval --out` directories (two or more)")
    p.add_argument("--out", default=None, type=out_dir, help="where compare.md and compare.html go "
                                                             "(default: the first DIR)")
    p.set_defaults(fn=main)


def main(a) -> int:
    from ..errors import ConfigError
    if len(a.dirs) < 2:
        raise ConfigError("compare: give two or more result directories")
    res = compare(a.dirs)
    if not res["matched"]:
        raise ConfigError(f"compare: no episode is in every directory ({', '.join(map(str, a.dirs))})")
    md = markdown(res)
    out = Path(a.out or a.dirs[0])
    out.mkdir(parents=True, exist_ok=True)
    (out / "compare.md").write_text(md)
    (out / "compare.html").write_text(html_page(res, md))
    print(md)
    print(f"[compare] {out / 'compare.md'}, {out / 'compare.html'}", file=sys.stderr)
    return 0
