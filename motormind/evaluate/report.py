"""Aggregate result rows into tables, and write report.md and report.html (with plots)."""
from __future__ import annotations

from collections import defaultdict

from motormind.sim.libero_pro.suites import split_suite

from .stats import median, wilson

def failure_cause(r: dict) -> str:
    if r.get("success"):
        return ""
    o = r.get("outcome", "")
    if o in ("step_budget", "wall_budget", "batch_budget"):
        return "budget ran out"
    if o == "claimed_done":                  # the stack said done, the success check disagrees
        return "false completion"
    if o in ("fault", "error", "worker_died"):
        return "fault" if o == "fault" else o.replace("_", " ")
    if r.get("verifier_rejections"):
        return "verifier rejections"
    if r.get("controller_rejections"):
        return "controller rejections"
    return o.replace("_", " ") or "unknown"


def group(rows: list[dict], keyf) -> dict:
    g = defaultdict(list)
    for r in rows:
        g[keyf(r)].append(r)
    return dict(sorted(g.items()))


def summarize(rs: list[dict]) -> dict:
    n = len(rs)
    k = sum(bool(r["success"]) for r in rs)
    lo, hi = wilson(k, n)
    causes = defaultdict(int)
    for r in rs:
        c = failure_cause(r)
        if c:
            causes[c] += 1
    tok = [sum((r.get("vlm_tokens") or {}).values()) for r in rs]
    priced = [float(r["vlm_cost_usd"]) for r in rs if r.get("vlm_cost_usd") is not None]
    return {"n": n, "success": k, "rate": k / n if n else 0.0, "ci": (lo, hi),
            "vlm_s": median([r["vlm_s"] for r in rs]), "motion_s": median([r["motion_s"] for r in rs]),
            "overhead_s": median([r["overhead_s"] for r in rs]), "episode_s": median([r["episode_s"] for r in rs]),
            "vlm_calls": sum(r["vlm_calls"] for r in rs) / max(1, n), "tokens": sum(tok) / max(1, n),
            "cached": sum(int(r.get("vlm_cached_tokens") or 0) for r in rs) / max(1, n),
            "steps": median([r["steps"] for r in rs]), "causes": dict(causes),
            "budgets": sorted({int(r["step_budget"]) for r in rs if r.get("step_budget")}),
            "budget_used": median([r["steps"] / r["step_budget"] for r in rs if r.get("step_budget")]),
            "privileged": any(r.get("privileged") for r in rs),
            "cost": sum(priced) / len(priced) if priced else None}       # USD an episode, where priced


def _fmt_row(name: str, s: dict) -> str:
    causes = ", ".join(f"{c} {n}" for c, n in sorted(s["causes"].items())) or "-"
    return (f"| {name} | {s['success']}/{s['n']} | {100 * s['rate']:.0f}% [{100 * s['ci'][0]:.0f}, {100 * s['ci'][1]:.0f}] "
            f"| {s['episode_s']:.1f} | {s['vlm_s']:.2f} / {s['motion_s']:.1f} / {s['overhead_s']:.1f} "
            f"| {_steps(s)} | {s['vlm_calls']:.1f} | {tokens(s)} | {causes} |")


def tokens(s: dict) -> str:
    """Tokens an episode, and of the prompt tokens those the server served from its prefix cache, where it
    said so (OpenAI's and vLLM's ``cached_tokens``; docs/vlm-backends.md, "Prompts that cache")."""
    return f"{s['tokens']:.0f}" + (f" ({s['cached']:.0f} cached)" if s.get("cached") else "")


def _steps(s: dict) -> str:
    """Median control steps against the step budget (one budget: both; several: the share used)."""
    if len(s["budgets"]) == 1:
        return f"{s['steps']:.0f} / {s['budgets'][0]}"
    return f"{100 * s['budget_used']:.0f}% of budget" if s["budgets"] else f"{s['steps']:.0f}"


HEADER = ("| group | success | rate [95% Wilson] | episode s (median) | VLM / motion / overhead s | "
          "steps (median / budget) | VLM calls/ep | tokens/ep | failures by cause |\n"
          "|---|---|---|---|---|---|---|---|---|")


def _noise_label(noise: dict) -> str:
    """A noise profile by its name (a preset's, with its overrides), else its rates."""
    rest = {k: v for k, v in noise.items() if k != "name"}
    return str(noise["name"]) if noise.get("name") else str(rest)


def tables(rows: list[dict]) -> dict[str, list[tuple[str, dict]]]:
    out = {}
    out["by suite"] = [(k, summarize(v)) for k, v in group(rows, lambda r: r["suite"]).items()]
    out["by perturbation"] = [(k, summarize(v)) for k, v in
                              group(rows, lambda r: split_suite(r["suite"])[1]).items()]
    if len({r["ablation"] for r in rows}) > 1 or len({str(r.get("noise")) for r in rows}) > 1:
        out["by ablation"] = [(k, summarize(v)) for k, v in group(
            rows, lambda r: f"{r['ablation']}" + (f" noise={_noise_label(r['noise'])}" if r.get("noise") else "")).items()]
    out["overall"] = [("all", summarize(rows))]
    return out


def _itf(r: dict) -> str:
    return r.get("interference") or "off"


def _rate(rs: list[dict], sep: str = " ") -> str:
    if not rs:
        return "-"
    k, n = sum(bool(r["success"]) for r in rs), len(rs)
    lo, hi = wilson(k, n)
    return f"{k}/{n}{sep}{100 * k / n:.0f}% [{100 * lo:.0f}, {100 * hi:.0f}]"


def _mid(d: dict | None, unit: str) -> str:
    """Median / p90 of one measure; "-" where none was measured (the real-time cell counts no steps)."""
    if not d or not d.get("n") or d.get(unit + "_median") is None:
        return "-"
    p90 = d.get(unit + "_p90")
    return f"{d[unit + '_median']:g} / " + ("-" if p90 is None else f"{p90:g}")


def _parts(d: dict, keys) -> str:
    return "-" if d.get(keys[0]) is None else " / ".join(f"{d[k]:g}" for k in keys)


def interference_tables(rows: list[dict]) -> list[str]:
    """Markdown: success with and without interference side by side per suite and ablation, and
    the interference measures (session/interference.py InterferenceProbe) per condition. Empty without interference."""
    from .interference import summarize_measures
    conds = list(dict.fromkeys(["off"] + [_itf(r) for r in rows]))
    if conds == ["off"]:
        return []
    lines = ["## Interference, side by side", "",
             "An outside hand (PRIVILEGED: the evaluator's, never in a prompt) moves an object mid-episode "
             "(session/interference.py). Success [95% Wilson] per condition:", "",
             "| suite | ablation | " + " | ".join(conds) + " |", "|---|---|" + "---|" * len(conds)]
    for (suite, ab), rs in group(rows, lambda r: (r["suite"], r["ablation"])).items():
        lines.append(f"| {suite} | {ab} | " + " | ".join(_rate([r for r in rs if _itf(r) == c]) for c in conds) + " |")
    lines += ["", "What it cost, over the episodes where the object was moved (median / p90; ms of wall "
              "clock and control steps from the moment it was moved):", "",
              "| suite | ablation | condition | moved / episodes | Monitor cancels | to cancel ms | to cancel steps "
              "| boundary seen; honoured (median / max) | to next batch ms | to next batch steps | to success ms "
              "| to success steps | stale commands (median / p90 / max) | VLM calls after (median) |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for (suite, ab, c), rs in group([r for r in rows if _itf(r) != "off"],
                                    lambda r: (r["suite"], r["ablation"], _itf(r))).items():
        m = summarize_measures(rs)
        b, h, st = m["cancel_boundary"], m["honoured_boundary"], m["stale_commands"]
        lines.append(f"| {suite} | {ab} | {c} | {m['interfered']}/{len(rs)} | {m['cancel']['n']} "
                     f"| {_mid(m['cancel'], 'ms')} | {_mid(m['cancel'], 'steps')} "
                     f"| {_parts(b, ('median', 'max'))}; {_parts(h, ('median', 'max'))} "
                     f"| {_mid(m['next_batch'], 'ms')} | {_mid(m['next_batch'], 'steps')} "
                     f"| {_mid(m['success'], 'ms')} | {_mid(m['success'], 'steps')} "
                     f"| {_parts(st, ('median', 'p90', 'max'))} "
                     f"| {'-' if m['recovery_vlm_calls_median'] is None else m['recovery_vlm_calls_median']} |")
    missed = [r for r in rows if _itf(r) != "off" and not r.get("interference_event")]
    if missed:
        why = defaultdict(int)
        for r in missed:
            why[r.get("interference_missed") or "its moment never came"] += 1
        lines += ["", "Not moved: " + "; ".join(f"{n} x {w}" for w, n in sorted(why.items()))]
    return lines + [""]


def noise_section(rows: list[dict]) -> list[str]:
    """The noisy brain's errors per ablation: episodes, errors injected per kind (total), and over
    the failed episodes, the persistent errors still in force at their end. Empty without noise."""
    noisy = [r for r in rows if r.get("noise_injected") is not None]
    if not noisy:
        return []
    kinds = sorted({k for r in noisy for k in (r.get("noise_injected") or {})} |
                   {k for r in noisy for k in (r.get("noise_active_at_end") or [])})
    lines = ["## Injected errors (noisy brain)", "",
             "Errors the noisy brain injected, totals per kind over the episodes; and, over the failed "
             "episodes, how many ended with each persistent error still in force.", "",
             "| ablation | episodes | failed | injected: " + (", ".join(kinds) or "none") +
             " | active at failure |", "|---|---|---|---|---|"]
    for ab, rs in group(noisy, lambda r: f"{r['ablation']}" + (f" noise={_noise_label(r['noise'])}"
                                                                   if r.get("noise") else "")).items():
        tot = {k: sum((r.get("noise_injected") or {}).get(k, 0) for r in rs) for k in kinds}
        failed = [r for r in rs if not r["success"]]
        act = defaultdict(int)
        for r in failed:
            for k in r.get("noise_active_at_end") or []:
                act[k] += 1
        lines.append(f"| {ab} | {len(rs)} | {len(failed)} | " + (", ".join(f"{k} {tot[k]}" for k in kinds) or "0")
                     + " | " + (", ".join(f"{k} {n}" for k, n in sorted(act.items())) or "-") + " |")
    return lines + [""]


def vlm_trouble_section(rows: list[dict]) -> list[str]:
    """VLM trouble over the episodes (record.py ``vlm_trouble``): calls failed safe, repair
    rounds, truncation retries, answers read from the reasoning field. Empty when there was none."""
    tot: dict = defaultdict(int)
    eps: dict = defaultdict(int)
    for r in rows:
        for k, n in (r.get("vlm_trouble") or {}).items():
            tot[k] += int(n)
            eps[k] += 1
    if not tot:
        return []
    return ["## VLM trouble", "", "| trouble | total | episodes |", "|---|---|---|",
            *[f"| {k.replace('_', ' ')} | {tot[k]} | {eps[k]}/{len(rows)} |" for k in sorted(tot)], ""]


def perturbation_grid(rows: list[dict]) -> list[str]:
    """Success per base suite (rows) and perturbation (columns), with 95% Wilson intervals, and a
    row over all suites: the shape of the oracle's grid in docs/evaluation.md. Empty unless the
    rows span more than one perturbation."""
    cells = group(rows, lambda r: split_suite(r["suite"]))
    kinds = sorted({k[1] for k in cells}, key=lambda p: (p != "base", p))
    if len(kinds) < 2:
        return []
    names = ["base" if p == "base" else f"_{p}" for p in kinds]
    out = ["## Suite by perturbation", "", "| suite | " + " | ".join(names) + " |",
           "|---" * (len(kinds) + 1) + "|"]
    for base in sorted({k[0] for k in cells}):
        out.append(f"| {base} | " + " | ".join(_rate(cells.get((base, p), []), ", ") for p in kinds) + " |")
    if len({k[0] for k in cells}) > 1:
        out.append("| all suites | " + " | ".join(
            _rate([r for r in rows if split_suite(r["suite"])[1] == p], ", ") for p in kinds) + " |")
    return out + [""]


def failing_tasks(rows: list[dict]) -> list[str]:
    """Per suite with a failure: each failing task's failures of its episodes ("3: 6/10")."""
    out = []
    for suite, rs in group([r for r in rows if r.get("task") is not None], lambda r: r["suite"]).items():
        tasks = group(rs, lambda r: int(r["task"]))
        bad = [f"{t}: {sum(not r['success'] for r in trs)}/{len(trs)}" for t, trs in tasks.items()
               if any(not r["success"] for r in trs)]
        if bad:
            out.append(f"| {suite} | {', '.join(bad)} |")
    if not out:
        return []
    return ["## Failing tasks", "", "| suite | task: failures / episodes |", "|---|---|"] + out + [""]


def markdown(rows: list[dict], title: str = "MotorMind evaluation", stamp: dict | None = None) -> str:
    lines = [f"# {title}", ""]
    if not rows:
        return "\n".join(lines + ["No finished episodes."])
    brains = sorted({r.get("brain_label") or r["brain"] for r in rows})
    lines.append(f"{len(rows)} episodes; brain(s): {', '.join(brains)}.")
    if any(r.get("privileged") for r in rows):
        lines.append("**Results of the oracle brain read privileged simulator state: an upper bound for the stack, "
                     "not a VLM's score.**")
    sims = {str(r.get("simulator")) for r in rows if r.get("simulator")}
    if sims:
        lines.append(f"Simulator: {'; '.join(sorted(sims))}")
    cost = summarize(rows)["cost"]
    if cost is not None:
        lines.append(f"VLM cost: {cost:.4f} USD an episode (the VLM config's prices).")
    lines.append("")
    for name, tab in tables(rows).items():
        lines += [f"## {name.capitalize()}", "", HEADER] + [_fmt_row(k, s) for k, s in tab] + [""]
    lines += perturbation_grid(rows) + failing_tasks(rows)
    lines += interference_tables(rows) + noise_section(rows) + vlm_trouble_section(rows)
    from .steps import section
    lines += section(rows)
    from .provenance import lines as provenance
    pv = provenance(rows, stamp)
    if pv:
        lines += ["## Provenance", ""] + [f"- {k}: {v}" for k, v in pv] + [""]
    return "\n".join(lines)
