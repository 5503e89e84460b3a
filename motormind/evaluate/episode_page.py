"""An episode on one page (RUN_DIR/episode.html): what happened, in order, from its record.

The outcome and its numbers (summary.json), the rollout video and the frames the roles saw, then
one line per decision: each plan with its subgoals, each batch with its commands, each execution
report with what every command achieved, each verdict with its evidence, the Monitor's cancels,
the roles' repair rounds, fail-safes and replan requests, looks, the outside hand's move, and each
VLM call (role, latency, tokens) folded into its role's line. Links are relative to the run
directory, so it can be moved or served as it is. Written by ``motormind run --videos`` and
``motormind eval --videos``; ``write_page(RUN_DIR)`` writes it for any record.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..messages import EventKind
from ..record import video_file
from .htmlreport import STYLE, _e, table

PAGE_STYLE = STYLE + (".t{white-space:nowrap;color:#666}.ok{color:#070}.bad{color:#a00}"
                      "video,img.sheet{max-width:100%;border:1px solid #ccc}")


def _events(run_dir: Path) -> list[dict]:
    out = []
    p = run_dir / "events.jsonl"
    if not p.exists():
        return out
    for line in p.read_text().splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue                                # a torn last line of a crashed run
    return out


def _cmd(c: dict) -> str:
    if not isinstance(c, dict):
        return str(c)
    op = c.get("op", "?")
    rest = " ".join(f"{v}" if k in ("direction", "axis", "action") else f"{k}={v}"
                    for k, v in c.items() if k not in ("op",) and v is not None)
    return f"{op} {rest}".strip()


def _line(ev: dict) -> tuple[str, str, str] | None:
    """(what, who, detail) of an event shown on the page; None: not shown on its own."""
    k = ev.get("kind")
    if k == "plan":
        subs = "; ".join(f"{s.get('id')}: {s.get('description')} [done when: {s.get('success_criterion', '')}]"
                         for s in ev.get("subgoals") or [])
        why = f" (replan: {ev['replan_reason']})" if ev.get("replan_reason") else ""
        return "plan", str(ev.get("brain", "")), subs + why
    if k == "batch":
        b = ev.get("batch") or {}
        cmds = ", ".join(_cmd(c) for c in b.get("commands", []))
        why = f" - {b['rationale']}" if b.get("rationale") else ""
        return f"batch {b.get('batch_id', '')} ({b.get('subgoal_id', '')})", str(ev.get("brain", "")), cmds + why
    if k == "report":
        res = "; ".join(f"{_cmd(r.get('command'))}: {r.get('status')}"
                        + (f" ({r['reason']})" if r.get("reason") else "") for r in ev.get("results") or [])
        return f"report {ev.get('batch_id', '')}: {ev.get('status')}", "controller", res or str(ev.get("reason", ""))
    if k == "verdict":
        ok = "achieved" if ev.get("achieved") else "not achieved"
        return f"verdict {ev.get('subgoal_id', '')}: {ok}", str(ev.get("brain", "")), str(ev.get("evidence", ""))
    if k in ("monitor_cancel", "role_failed", "repair_request", "replan_request", "look", "look_refused",
             "interference", "review_decision", "vlm_quirk", "vlm_probe", "instruction"):
        rest = {a: b for a, b in ev.items() if a not in ("t", "kind", "system", "user", "prompt", "response")}
        who = str(rest.pop("role", "") or rest.pop("source", "") or "")
        return k.replace("_", " "), who, ", ".join(f"{a}={b}" for a, b in rest.items())[:600]
    if k == "episode_end":
        return "end", "", f"{ev.get('outcome')}: {ev.get('reason', '')} ({ev.get('steps')} steps)"
    return None


def page(run_dir: str | Path, summary: dict | None = None) -> str:
    d = Path(run_dir)
    try:
        s = summary if summary is not None else json.loads((d / "summary.json").read_text())
    except (OSError, ValueError):
        s = {}
    events = _events(d)
    title = f"{s.get('suite', '')} task {s.get('task', '')} init {s.get('init_state', '')}: {s.get('outcome', '?')}"
    body = [f"<h1>{_e(title)}</h1>",
            f"<p><b>{_e(s.get('instruction', ''))}</b></p>"]
    facts = [("brain", f"{s.get('brain', '')}" + (" (PRIVILEGED simulator state)" if s.get("privileged") else "")),
             ("outcome", f"{'SUCCESS' if s.get('success') else 'FAILURE'}: {s.get('outcome', '')} - {s.get('reason', '')}"),
             ("steps", f"{s.get('steps', '')} / {s.get('step_budget', '')}" if s.get("step_budget") is not None
              else "none counted (a real-time arm)"),
             ("batches / replans", f"{s.get('batches', '')} / {s.get('replans', '')}"),
             ("time s (VLM / motion / overhead)", f"{s.get('wall_s', '')} ({s.get('vlm_s', '')} / "
                                                  f"{s.get('motion_s', '')} / {s.get('overhead_s', '')})"),
             ("VLM calls", f"{s.get('vlm_calls', '')}" + (f"; trouble: {', '.join(f'{k} {v}' for k, v in s['vlm_trouble'].items())}"
                                                          if s.get("vlm_trouble") else ""))]
    if s.get("answered_by"):
        facts.append(("answered by", ", ".join(f"{r}: {w}" for r, w in sorted(s["answered_by"].items()))))
    if s.get("noise_counts"):
        nc = s["noise_counts"]
        facts.append(("injected errors", ", ".join(f"{k} {n}" for k, n in sorted(nc.get("injected", {}).items()))
                      or "none"))
        facts.append(("active at the end", ", ".join(nc.get("active_at_end") or []) or "none"))
    body.append(table(("", ""), facts, "facts"))
    ro = s.get("rollout") or {}
    video = video_file(d, "rollout")
    if video is not None:
        if "hz" in ro:                              # a real-time arm: frames at a rate of the emulator's clock
            what = (f"{ro.get('frames', '?')} frames at {_e(ro.get('rate', ''))} over {ro.get('span_s', '?')} s of it"
                    + (f" ({ro['late']} repeated: rendering fell behind)" if ro.get("late") else ""))
        else:
            what = (f"{ro.get('frames', '?')} frames, one every {ro.get('every', '?')} control step(s) of "
                    f"{ro.get('control_steps', '?')} ({_e(ro.get('rate', ''))})")
        body.append(f"<h2>Rollout</h2><p>{what}, played at {ro.get('fps', '?')} fps.</p>"
                    f"<video src='{_e(video.name)}' controls muted loop></video>")
    elif ro.get("note"):
        body.append(f"<h2>Rollout</h2><p>{_e(ro['note'])}</p>")
    if (d / "contact_sheet.png").exists():
        body.append("<h2>What the roles saw</h2><img class='sheet' alt='frames the roles saw' src='contact_sheet.png'>")
    calls: dict = {}
    rows = []
    for ev in events:
        if ev.get("kind") == EventKind.VLM_CALL:
            c = calls.setdefault(str(ev.get("role", "?")), [0, 0.0, 0])
            c[0] += 1
            c[1] += float(ev.get("latency_s", 0.0) or 0.0)
            c[2] += int(ev.get("input_tokens", 0) or 0) + int(ev.get("output_tokens", 0) or 0)
            continue
        ln = _line(ev)
        if ln is not None:
            rows.append([f"{float(ev.get('t', 0.0)):.1f}", *ln])
    body.append("<h2>What happened</h2>" + table(("t s", "what", "who", "detail"), rows, "timeline"))
    if calls:
        body.append("<h2>VLM calls</h2>" + table(("role", "calls", "latency s", "tokens"),
                                                 [[r, n, f"{s_:.2f}", tok] for r, (n, s_, tok) in sorted(calls.items())]))
    links = [f"<a href='{n}'>{n}</a>" for n in ("events.jsonl", "summary.json") if (d / n).exists()]
    links += [f"<a href='{_e(v.name)}'>{_e(v.name)}</a>" for v in (video_file(d, "rollout"), video_file(d, "video"))
              if v is not None]
    body.append("<p>Record: " + " ".join(links) + "</p>")
    return (f"<!doctype html><meta charset='utf-8'><title>{_e(title)}</title><style>{PAGE_STYLE}</style><body>"
            + "\n".join(body) + "</body>")


def write_page(run_dir: str | Path, summary: dict | None = None) -> Path:
    """RUN_DIR/episode.html; ``summary``: the page's facts where the record has no summary.json (an
    xArm6 trial's report row, evaluate/trials.py)."""
    p = Path(run_dir) / "episode.html"
    p.write_text(page(run_dir, summary))
    return p
