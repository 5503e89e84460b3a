"""``motormind diagnose``: the VLM skill diagnostic (build a question set, score a brain on it).

    motormind diagnose build [--suites libero_spatial libero_object] [--tasks 0-3] [--inits 0-2]
                             [--questions 320] [--seed 0] [--out runs/diagnose/set-v2-320q-seed0]
    motormind diagnose run --set DIR --brain oracle|random|noisy|openai [--noise kind=rate,...]
                           [--vlm CONFIG] [--vlm-set KEY=VALUE] [--seed 0] [--out DIR]

See docs/diagnostic.md.
"""
from __future__ import annotations

import argparse
import json
import sys

from . import SKILLS
from ..ranges import parse_ints as _ints


def register(sub) -> None:
    p = sub.add_parser("diagnose", help="the VLM skill diagnostic: build a question set from oracle rollouts, "
                                        "score a brain per skill", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    dsub = p.add_subparsers(dest="diagnose_cmd", required=True)
    b = dsub.add_parser("build", help="build a question set (images + JSONL) from oracle rollouts on LIBERO tasks")
    b.add_argument("--suites", nargs="+", default=["libero_spatial", "libero_object"])
    b.add_argument("--tasks", default="0-3", help="task indices per suite, e.g. 0-3 or 0,2")
    b.add_argument("--inits", default="0-2", help="init states per task")
    b.add_argument("--questions", type=int, default=320, help="set size, split evenly over the four skills")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--image-size", type=int, default=128)
    b.add_argument("--every", type=int, default=4, help="a mid-motion moment every N control steps")
    b.add_argument("--out", default=None, help="set directory (default: runs/diagnose/set-v1-<N>q-seed<S>)")
    b.set_defaults(fn=_build)
    r = dsub.add_parser("run", help="ask a brain the questions of a set and score it per skill and per suite")
    r.add_argument("--set", required=True, dest="set_dir", help="a set directory made by `diagnose build`")
    r.add_argument("--brain", default=None,
                   help="oracle (privileged; the default), random (seeded chance baseline), noisy (the oracle with injected "
                        "errors, privileged), openai (any OpenAI-compatible endpoint, configured by --vlm; "
                        "the default when --vlm is given)")
    r.add_argument("--noise", default=None,
                   help="--brain noisy: a preset, profile or report, then key=value rates, as for `motormind eval` "
                        "(default: wrong_direction, wrong_magnitude, premature_done, missed_completion at 0.2)")
    r.add_argument("--vlm", default=None, metavar="CONFIG",
                   help="--brain openai: a VLM config (configs/vlm/NAME.yaml or a path; default: openai). "
                        "local-oracle: this diagnostic's oracle behind serve-brain; local-replay with "
                        "--vlm-set replay=REPORT_DIR/events.jsonl: replay a recorded run")
    r.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one field of the VLM config, e.g. model=gpt-4o-mini; repeatable")
    r.add_argument("--seed", type=int, default=0, help="seed of the random and noisy brains")
    r.add_argument("--skills", nargs="+", default=None, choices=list(SKILLS))
    r.add_argument("--limit", type=int, default=None, help="only the first N questions")
    r.add_argument("--out", default=None, help="report directory (default: runs/diagnose/report-<time>-<set>-<brain>)")
    r.set_defaults(fn=_run)


def _build(a) -> int:
    from .build import BuildSpec, build_set
    spec = BuildSpec(suites=list(a.suites), tasks=_ints(a.tasks, "--tasks"), inits=_ints(a.inits, "--inits"), seed=a.seed,
                     n_questions=a.questions, image_size=a.image_size, every=a.every)
    try:
        out = build_set(spec, a.out)
    except ValueError as e:
        print(f"motormind diagnose build: error: {e}", file=sys.stderr)
        return 2
    man = json.loads((out / "manifest.json").read_text())
    print(f"question set: {out} ({man['n_questions']} questions: "
          + ", ".join(f"{s} {man['counts'].get(s, 0)}" for s in man["skills"]) + f"; {man['frames']} frames)")
    return 0


def _run(a) -> int:
    from ..errors import ConfigError
    from .brains import make_brain
    from .score import run_diagnostic
    noise = None
    if a.noise:
        from ..brains.noise_profile import parse_noise
        try:
            noise = parse_noise(a.noise)
        except ConfigError as e:
            print(f"motormind diagnose run: error: {e}", file=sys.stderr)
            return 2
    brain_name = a.brain or ("openai" if a.vlm else "oracle")
    try:
        brain = make_brain(brain_name, seed=a.seed, noise=noise, vlm=a.vlm, vlm_set=tuple(a.vlm_set))
    except ConfigError as e:
        print(f"motormind diagnose run: error: {e}", file=sys.stderr)
        return 2
    spec = {"brain": brain_name, "seed": a.seed, **({"noise": dict(brain.profile.items())} if brain_name == "noisy" else {}),
            **({"vlm": getattr(brain, "cfg").public()} if hasattr(brain, "cfg") else {})}
    try:
        rep = run_diagnostic(a.set_dir, brain, a.out, limit=a.limit, skills=a.skills, brain_spec=spec)
    except (ConfigError, FileExistsError) as e:
        print(f"motormind diagnose run: error: {e}", file=sys.stderr)
        return 2
    finally:
        brain.close()
    s = rep["scores"]
    label = " [PRIVILEGED simulator state]" if rep["privileged"] else ""
    print(f"brain {rep['brain']}{label}: {s['overall']['correct']}/{s['overall']['n']} correct")
    for skill, g in s["skill"].items():
        print(f"  {skill:<11} {g['correct']:>3}/{g['n']:<3} {100 * g['rate']:5.1f}%  "
              f"[{100 * g['ci95'][0]:.0f}, {100 * g['ci95'][1]:.0f}]  chance {100 * g['chance']:.0f}%"
              + (f"  unanswered {g['unanswered']}" if g["unanswered"] else ""))
    g = s.get("grounding")
    if g:
        print(f"  grounding: median pixel error {g['median_px_error']} px, median offset error {g['median_mm_error']} mm; "
              f"on the object {100 * g['on_object']:.0f}%, offset within {g['thresholds']['offset_tolerance_mm']:g} mm "
              f"{100 * g['within_mm']:.0f}% (chance of a random pixel on the object {100 * g['chance_on_object']:.0f}%)")
    print(f"  report: {rep['out']}/report.md  answers: {rep['out']}/answers.jsonl")
    return 0
