"""``motormind diagnose run``: ask a brain every question of a set and score it.

Each question goes through the ``Diagnoser`` role (role.py): the roles' prompt rendering, image
handling (upright RGB frames, passed as the request's images), strict parsing, one repair, fail-safe
and recording. A privileged brain (the oracle, the noisy oracle) also gets the question's
privileged snapshot in the request context; no brain ever gets it in a prompt, and no brain sees
the answer key.

    OUT/report.json     scores: overall, per skill, per suite, per skill x suite, with 95% Wilson
                        intervals and the chance level; error breakdowns; the brain and the set
    OUT/report.md       the same as tables
    OUT/answers.jsonl   one line per question: given, correct, the option kind chosen, latency
    OUT/events.jsonl    the role record (every vlm_call with prompt and response); a replay source
"""
from __future__ import annotations

import datetime as _dt
import json
import statistics
import sys
import time
from pathlib import Path

from . import SKILLS
from . import grounding as gnd
from ..evaluate.stats import wilson
from ..grounding.marks import options_of
from ..grounding.points import convention_of
from ..record import Recorder
from .build import question_chance
from .dataset import load_images, load_set
from .role import Diagnoser

PAPER = {"action": 0.36, "progress": 0.55, "completion": 0.65}   # the paper's one VLM, 240 questions


def default_report_dir(set_dir: Path, brain_name: str, root: str = "runs/diagnose") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in brain_name)
    return Path(root) / f"report-{stamp}-{Path(set_dir).name}-{safe}"


def _group(rows: list) -> dict:
    n = len(rows)
    k = sum(1 for r in rows if r["correct"])
    lo, hi = wilson(k, n)
    return {"n": n, "correct": k, "rate": round(k / n, 4) if n else None, "ci95": [round(lo, 4), round(hi, 4)],
            "chance": round(sum(r["chance"] for r in rows) / n, 4) if n else None,
            "unanswered": sum(1 for r in rows if r["given"] is None)}


def summarise(rows: list) -> dict:
    def by(f) -> dict:
        keys = sorted({f(r) for r in rows} - {None})
        return {k: _group([r for r in rows if f(r) == k]) for k in keys}

    out = {"overall": _group(rows),
           "skill": {s: _group([r for r in rows if r["skill"] == s]) for s in SKILLS if any(r["skill"] == s for r in rows)},
           "suite": by(lambda r: r["suite"]),
           "skill_suite": by(lambda r: f'{r["skill"]}/{r["suite"]}'),
           "action_by_correct_op": by(lambda r: r["meta"].get("correct_op") if r["skill"] == "action" else None),
           "progress_by_stage": by(lambda r: f'{r["meta"]["kind"]}:{r["meta"]["stage"]}' if r["skill"] == "progress" else None),
           "completion_by_truth": by(lambda r: ("achieved" if r["meta"]["truth"] else "not achieved") + f' ({r["meta"]["scope"]})'
                                     if r["skill"] == "completion" else None)}
    errs: dict = {}
    for r in rows:
        if not r["correct"]:
            key = f'{r["skill"]}: {r["chosen_kind"] or "unanswered"}'
            errs[key] = errs.get(key, 0) + 1
    out["errors_by_kind"] = dict(sorted(errs.items()))
    g = [r for r in rows if r["skill"] == "grounding"]
    if g:
        out["grounding"] = grounding_figures(g)
    return out


def grounding_figures(rows: list) -> dict:
    """The grounding skill's continuous figures. Medians over the answered questions; fractions over
    all (an unanswered question is a miss)."""
    n = len(rows)
    fig = [r["grounding"] for r in rows]
    px = [f["px_error"] for f in fig if f["px_error"] is not None]
    mm = [f["mm_error"] for f in fig if f["mm_error"] is not None]
    frac = lambda k: round(sum(1 for f in fig if f[k]) / n, 4) if n else None  # noqa: E731
    return {"n": n, "answered": len(px),
            "median_px_error": round(statistics.median(px), 2) if px else None,
            "median_mm_error": round(statistics.median(mm), 1) if mm else None,
            "on_object": frac("on_object"), "within_mm": frac("within_mm"), "correct": frac("correct"),
            "chance_on_object": round(sum(r["chance"] for r in rows) / n, 4) if n else None,
            "thresholds": {"point_tolerance_px": gnd.POINT_TOLERANCE_PX,
                           "offset_tolerance_mm": gnd.OFFSET_TOLERANCE_MM},
            "pixels": "px of the set's frames (the stored image size)"}


def run_diagnostic(set_dir, brain, out=None, limit: int | None = None, skills=None, progress=None,
                   brain_spec: dict | None = None) -> dict:
    """Score ``brain`` on the set at ``set_dir``; writes the report into ``out``. Returns the report."""
    from ..profile import load_profile
    progress = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    set_dir = Path(set_dir)
    man, qs = load_set(set_dir)
    if skills:
        qs = [q for q in qs if q["skill"] in skills]
    if limit:
        qs = qs[:int(limit)]
    out = Path(out) if out else default_report_dir(set_dir, brain.name)
    if (out / "events.jsonl").exists():
        raise FileExistsError(f"--out: {out} already holds a diagnostic run; pick another directory")
    profile = load_profile("libero_panda")
    rec = Recorder(out)
    privileged = bool(getattr(brain, "privileged", False))
    t0 = time.monotonic()
    rows = []
    try:
        rec("diagnose_start", set=str(set_dir), set_format_version=man.get("format_version"),
            generator_version=man.get("generator_version"), seed=man.get("seed"), questions=len(qs),
            brain=brain.name, privileged=privileged, **({"brain_spec": brain_spec} if brain_spec else {}))
        role = Diagnoser(brain, rec)
        marks = options_of(brain)          # the images marked as the roles' are (the brain's VLM config)
        closing_axis = (man.get("grounding") or {}).get("closing_axis_eef") or (0.0, 1.0, 0.0)
        progress(f"diagnose run: {len(qs)} questions from {set_dir} -> brain {brain.name}"
                 f"{' (PRIVILEGED simulator state)' if privileged else ''}")
        with open(out / "answers.jsonl", "w", buffering=1) as fh:
            for i, q in enumerate(qs):
                tq = time.monotonic()
                rec("question", id=q["id"], skill=q["skill"], suite=q["suite"])
                images = load_images(set_dir, q)
                conv = None
                if images:
                    h, w = next(iter(images.values())).shape[:2]
                    conv = convention_of(brain, "diagnose", w, h)    # the brain's model family's, as the roles'
                res = role.answer(q, images, profile, privileged, marks, conv, closing_axis)
                row = {"id": q["id"], "skill": q["skill"], "suite": q["suite"], "rollout": q["rollout"],
                       "answer": q["answer"], "chance": question_chance(q), "brain": res.brain,
                       "privileged": res.privileged, "calls": res.calls, "error": res.error,
                       "reasoning": (res.value or {}).get("reasoning", "")[:300],
                       "wall_s": round(time.monotonic() - tq, 4), "meta": q["meta"]}
                if q["skill"] == "grounding":
                    given = {k: res.value[k] for k in ("point", "offset_mm")} if res.value else None
                    fig = gnd.score(q["privileged"]["grounding"], given, conv, profile.directions)
                    chosen = None if fig["correct"] else ("unanswered" if given is None else
                                                          "off the object" if not fig["on_object"] and fig["within_mm"]
                                                          else "offset off" if fig["on_object"] else
                                                          "off the object, offset off")
                    row.update(given=given, correct=fig["correct"], chosen_kind=chosen, grounding=fig,
                               convention=conv.to_json())
                else:
                    given = res.value["answer"] if res.value else None
                    kinds = q["meta"].get("option_kinds") or []
                    letters = [o["letter"] for o in q["options"]]
                    chosen = kinds[letters.index(given)] if given in letters and kinds else None
                    row.update(given=given, correct=given == q["answer"], chosen_kind=chosen)
                rows.append(row)
                fh.write(json.dumps({k: v for k, v in row.items() if k != "meta"}) + "\n")
                if (i + 1) % 40 == 0 or i + 1 == len(qs):
                    k = sum(r["correct"] for r in rows)
                    progress(f"  {i + 1}/{len(qs)} answered, {k} correct")
        report = {"brain": brain.name, "privileged": privileged, "set": str(set_dir),
                  "set_manifest": {k: man.get(k) for k in ("format", "format_version", "generator",
                                                           "generator_version", "seed", "n_questions", "spec")},
                  "questions": len(rows), "wall_s": round(time.monotonic() - t0, 3),
                  "calls": sum(r["calls"] for r in rows), "brain_spec": brain_spec or {},
                  "scores": summarise(rows), "paper_reference": PAPER,
                  "injected": dict(getattr(brain, "injected", {}) or {})}
        rec("diagnose_end", **{k: report[k] for k in ("questions", "wall_s")},
            overall=report["scores"]["overall"])
        rec.write_json("report.json", report)
        (out / "report.md").write_text(markdown(report))
        report["out"] = str(out)
        return report
    finally:
        rec.close()


def _pct(g: dict) -> str:
    if not g.get("n"):
        return "-"
    return f'{100 * g["rate"]:.0f}% [{100 * g["ci95"][0]:.0f}, {100 * g["ci95"][1]:.0f}]'


def _table(title: str, groups: dict, paper: bool = False) -> list[str]:
    head = "| group | correct | rate [95% Wilson] | chance | unanswered |" + (" paper's VLM |" if paper else "")
    lines = [f"## {title}", "", head, "|---|---|---|---|---|" + ("---|" if paper else "")]
    for k, g in groups.items():
        row = f'| {k} | {g["correct"]}/{g["n"]} | {_pct(g)} | {100 * g["chance"]:.0f}% | {g["unanswered"]} |'
        if paper:
            row += f' {100 * PAPER[k]:.0f}% |' if k in PAPER else " - |"
        lines.append(row)
    return lines + [""]


def markdown(rep: dict) -> str:
    s = rep["scores"]
    lines = [f'# VLM skill diagnostic: {rep["brain"]}', ""]
    if rep["privileged"]:
        lines += ["**This brain read privileged simulator state: an upper bound / a check of the set, "
                  "not a VLM's score.**", ""]
    m = rep["set_manifest"]
    lines += [f'Set: `{rep["set"]}` (format v{m.get("format_version")}, generator {m.get("generator_version")}, '
              f'seed {m.get("seed")}), {rep["questions"]} questions, {rep["calls"]} brain calls, '
              f'{rep["wall_s"]:.1f} s.', ""]
    lines += _table("By skill", {**s["skill"], "all": s["overall"]}, paper=True)
    lines += _table("By suite", s["suite"])
    lines += _table("By skill and suite", s["skill_suite"])
    lines += _table("Action, by the correct command", s["action_by_correct_op"])
    lines += _table("Progress, by the true stage (subgoal kind:stage 0-3)", s["progress_by_stage"])
    lines += _table("Completion, by the truth", s["completion_by_truth"])
    if s.get("grounding"):
        g = s["grounding"]
        t = g["thresholds"]
        pct = lambda x: "-" if x is None else f"{100 * x:.0f}%"  # noqa: E731
        lines += ["## Grounding: point at a named object, say its offset from the grip point", "",
                  f'| questions | answered | median pixel error (px of the set\'s frames, to the object\'s centre on '
                  f'its visible surface) | on the object (within {t["point_tolerance_px"]:g} px of its visible surface) | '
                  f'median offset error (mm) | offset within {t["offset_tolerance_mm"]:g} mm | both | chance of a random '
                  f'pixel on the object |', "|---|---|---|---|---|---|---|---|",
                  f'| {g["n"]} | {g["answered"]} | {"-" if g["median_px_error"] is None else g["median_px_error"]} | '
                  f'{pct(g["on_object"])} | {"-" if g["median_mm_error"] is None else g["median_mm_error"]} | '
                  f'{pct(g["within_mm"])} | {pct(g["correct"])} | {pct(g["chance_on_object"])} |', ""]
    if s["errors_by_kind"]:
        lines += ["## Wrong answers, by the kind of option chosen", "", "| skill: option kind | count |", "|---|---|"]
        lines += [f"| {k} | {v} |" for k, v in s["errors_by_kind"].items()] + [""]
    if rep.get("injected") and any(rep["injected"].values()):
        lines += [f'Errors injected by the noisy brain: {json.dumps(rep["injected"])}', ""]
    return "\n".join(lines)
