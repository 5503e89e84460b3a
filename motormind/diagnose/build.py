"""``motormind diagnose build``: the question set from oracle rollouts.

rollouts (collect.py) -> candidate questions at every moment (ground truth: truth.py, from the
privileged snapshot the question stores) -> a balanced pick -> options shuffled -> the set
(dataset.py). Deterministic for a seed: the simulation and the oracle are deterministic, and every
choice below draws from one ``random.Random(seed)`` in a fixed order.

Balance: the questions are split evenly over the four skills and, within a skill, over the
suites; within a (skill, suite) the pick cycles over answer strata (the correct command's kind for
action, the stage for progress, yes/no for completion, the camera for grounding), subgoal kinds,
rollouts and moments. The correct option's letter cycles evenly over the positions within a skill,
so a brain that always answers "A" scores chance.

One question per moment: a set never asks two questions about the same instant of the same episode
(``moment_key``: suite, task, init state, control step); the pick takes each skill in turn and skips
a candidate whose moment an earlier pick already holds.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
import random
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from . import FORMAT, FORMAT_VERSION, GENERATOR_VERSION, SKILLS
from . import grounding as gnd
from .truth import KINDS, Truth, stage_texts

LETTERS = "ABCD"
MOVE_DISTANCES_MM = (10, 20, 30, 40, 50, 60, 80)
POOL_OVERSAMPLE = 2.5          # candidates kept (and rendered) per task, relative to its share (one question
                               #  per moment: the skills draw on the same moments)
GROUNDING_OVERSAMPLE = 3.0     # ... for grounding: a camera that shows no askable object drops its candidate


@dataclass
class BuildSpec:
    suites: list = field(default_factory=lambda: ["libero_spatial", "libero_object"])
    tasks: list = field(default_factory=lambda: [0, 1, 2, 3])
    inits: list = field(default_factory=lambda: [0, 1, 2])
    seed: int = 0
    n_questions: int = 320          # 80 per skill, as the paper's 240 over three
    image_size: int = 128
    every: int = 4                 # a mid-motion moment every this many control steps


def default_set_dir(spec: BuildSpec, root: str = "runs/diagnose") -> Path:
    return Path(root) / f"set-v{FORMAT_VERSION}-{spec.n_questions}q-seed{spec.seed}"


def _oracle(profile):
    from .geometry import PickPlaceGeometry
    return PickPlaceGeometry(None, profile)


# ------------------------------------------------------------------------------------------------
# candidates
# ------------------------------------------------------------------------------------------------
def _spec(specs: dict, sid):
    s = specs.get(sid)
    if not s:
        return None
    kind, a, b, pred = s
    if kind not in KINDS:
        return None
    return {"id": sid, "kind": kind, "a": a, "b": b, "pred": list(pred) if pred else None}


def _subgoal_text(plan: list, sid: str) -> dict | None:
    for s in plan:
        if s["id"] == sid:
            return {"id": s["id"], "description": s["description"], "success_criterion": s["success_criterion"]}
    return None


def _starts(rollout) -> dict:
    """subgoal id -> {'a_bottom_z_m'} at its first moment (where the carried object rested)."""
    out = {}
    for m in rollout.moments:
        sid = m.subgoal_id
        if sid is None or sid in out:
            continue
        sp = rollout.specs.get(sid)
        a = sp[1] if sp else None
        if a and a in m.priv["objects"]:
            out[sid] = {"a_bottom_z_m": m.priv["objects"][a]["lo"][2]}
        else:
            out[sid] = {}
    return out


def _priv(m, sub: dict, start: dict) -> dict:
    return {**m.priv, "subgoal": sub, "subgoal_start": start}


def _base(r, m) -> dict:
    return {"suite": r.suite, "task": r.task, "init_state": r.init_state, "rollout": r.key, "moment": m.index,
            "step": m.step, "instruction": r.instruction, "plan": m.plan, "state": m.state,
            "scene": dict(getattr(r, "scene_facts", {}) or {})}


def _action_candidate(r, m, sub, start, oracle, rng) -> dict | None:
    cmd = m.command
    if not cmd or m.tag not in ("command", "mid"):
        return None
    priv = _priv(m, sub, start)
    t = Truth(priv, oracle)
    if t.achieved() is not False:
        return None
    dirs = t.dirs
    if cmd.get("op") == "move":
        u = np.asarray(cmd["_unit"], dtype=float)
        w = max(sorted(dirs), key=lambda k: float(dirs[k] @ u))
        rem_mm = float((np.asarray(cmd["_target_m"]) - t.eef) @ dirs[w]) * 1000.0
        if rem_mm < 15.0:
            return None
        d = max([x for x in MOVE_DISTANCES_MM if x <= 0.7 * rem_mm] or [MOVE_DISTANCES_MM[0]])
        correct = {"op": "move", "direction": w, "distance_mm": d}
        move_d = d
    elif cmd.get("op") == "gripper" and cmd.get("action") in ("open", "close"):
        correct = {"op": "gripper", "action": cmd["action"]}
        w, move_d = None, 30
    else:
        return None
    if t.decides(correct, t.delta(correct)) != "progress":
        return None
    moves, others = [], []
    for k in sorted(dirs):
        if k == w:
            continue
        c = {"op": "move", "direction": k, "distance_mm": move_d}
        if t.decides(c, t.delta(c)) == "setback":
            moves.append((c, "wrong_direction"))
    if correct["op"] == "gripper":
        g = {"op": "gripper", "action": "open" if correct["action"] == "close" else "close"}
    else:
        g = {"op": "gripper", "action": "open" if (t.held() or t.frac < 0.5) else "close"}
    if t.decides(g, t.delta(g)) == "setback":
        others.append((g, "wrong_gripper"))
    done = {"op": "done"}
    if t.decides(done, t.delta(done)) == "setback":
        others.append((done, "premature_done"))
    if not moves or len(moves) + len(others) < 3:
        return None
    first = rng.choice(moves)
    rest = [x for x in moves + others if x is not first]
    picked = [first] + rng.sample(rest, 2)
    options = [(correct, "correct")] + picked
    text = (f'The robot is working on subgoal {sub["id"]}: "{_desc(m, sub)}" (success criterion: '
            f'{_crit(m, sub)}). Which ONE of these commands, sent next, makes progress toward this subgoal?')
    return {**_base(r, m), "skill": "action", "subgoal": _subgoal_text(m.plan, sub["id"]), "question": text,
            "_options": [(json.dumps(c), c, k) for c, k in options],
            "meta": {"kind": sub["kind"], "correct_op": correct["op"], "tag": m.tag,
                     "oracle_command": {k: v for k, v in cmd.items() if not k.startswith("_")}},
            "privileged": priv, "_strata": [sub["kind"], correct["op"]]}


def _desc(m, sub):
    s = _subgoal_text(m.plan, sub["id"])
    return s["description"] if s else sub["id"]


def _crit(m, sub):
    s = _subgoal_text(m.plan, sub["id"])
    return s["success_criterion"] if s else ""


def _progress_candidate(r, m, sub, start, oracle) -> dict | None:
    if m.tag == "end" and sub is None:
        return None
    priv = _priv(m, sub, start)
    st = Truth(priv, oracle).stage()
    if st is None:
        return None
    texts = stage_texts(sub["kind"], sub["a"], sub["b"], sub["pred"])
    text = (f'The robot is working on subgoal {sub["id"]}: "{_desc(m, sub)}" (success criterion: '
            f'{_crit(m, sub)}). How far along is this subgoal right now? Pick the description that '
            f'matches the scene.')
    opts = [(t, {"stage": i}, "correct" if i == st else "other_stage") for i, t in enumerate(texts)]
    return {**_base(r, m), "skill": "progress", "subgoal": _subgoal_text(m.plan, sub["id"]), "question": text,
            "_options": opts, "meta": {"kind": sub["kind"], "stage": st, "tag": m.tag},
            "privileged": priv, "_strata": [sub["kind"], str(st)]}


def _completion_candidates(r, m, cur_sid, starts, oracle) -> list[dict]:
    out = []
    ids = [s["id"] for s in m.plan]
    cur_i = ids.index(cur_sid) if cur_sid in ids else None
    for i, s in enumerate(m.plan):
        sub = _spec(r.specs, s["id"])
        if sub is None:
            continue
        priv = _priv(m, sub, starts.get(s["id"], {}))
        ok = Truth(priv, oracle).achieved()
        if ok is None:
            continue
        rel = "current" if i == cur_i else ("earlier" if cur_i is not None and i < cur_i else "later")
        text = (f'Is subgoal {s["id"]} achieved right now? Subgoal: "{s["description"]}". '
                f'Success criterion: {s["success_criterion"]}.')
        out.append({**_base(r, m), "skill": "completion", "subgoal": _subgoal_text(m.plan, s["id"]),
                    "question": text, "_options": _yes_no(ok),
                    "meta": {"kind": sub["kind"], "scope": "subgoal", "relation": rel, "truth": ok, "tag": m.tag},
                    "privileged": priv, "_strata": ["yes" if ok else "no", sub["kind"], s["id"]]})
    priv = _priv(m, {"kind": "task"}, {})
    ok = Truth(priv, oracle).achieved()
    text = f'Is the whole task complete right now? Task: "{r.instruction}".'
    out.append({**_base(r, m), "skill": "completion", "subgoal": None, "question": text, "_options": _yes_no(ok),
                "meta": {"kind": "task", "scope": "task", "truth": ok, "tag": m.tag},
                "privileged": priv, "_strata": ["yes" if ok else "no", "task", "task"]})
    return out


def _yes_no(ok: bool) -> list:
    return [("yes: it is achieved now", {"achieved": True}, "correct" if ok else "premature_done"),
            ("no: it is not achieved now", {"achieved": False}, "missed_completion" if ok else "correct")]


def _grounding_candidates(r, m, cameras) -> list[dict]:
    """One candidate per camera; the object is chosen once the moment is rendered (``finish_grounding``):
    one of the movable objects named uniquely in the scene, visible enough in that camera."""
    out = []
    for cam in cameras:
        out.append({**_base(r, m), "skill": "grounding", "subgoal": None, "question": "", "_options": [],
                    "meta": {"camera": cam, "tag": m.tag}, "privileged": dict(m.priv),
                    "_strata": [cam, m.tag]})
    return out


def askable_objects(priv: dict) -> list[str]:
    """The movable objects a grounding question can name: those whose words name no other object."""
    names = list(priv["objects"])
    words = [gnd.display_name(n) for n in names]
    return [n for n in priv["movable"] if n in priv["objects"] and words.count(gnd.display_name(n)) == 1]


def finish_grounding(c: dict, m, directions: dict, rng: random.Random) -> dict | None:
    """The grounding question of candidate ``c`` at its rendered moment ``m`` (images, depth and
    calibrations), or None when its camera shows no askable object well enough."""
    from ..grounding.camera import eef_pose
    from ..robot import Observation
    cam = c["meta"]["camera"]
    cal, depth = m.cameras.get(cam), m.depth.get(cam)
    if cal is None or depth is None:
        return None
    st = m.state
    obs = Observation(t=0.0, eef_pos_m=np.asarray(st["eef_pos_mm"], dtype=float) / 1000.0,
                      eef_quat_xyzw=np.asarray(st["eef_quat_xyzw"], dtype=float),
                      gripper_width_mm=float(st["gripper_width_mm"]), gripper_fraction=float(st["gripper_fraction"]),
                      joints_rad=np.zeros(0))
    eef = eef_pose(obs)
    options = []
    for name in askable_objects(c["privileged"]):
        t = gnd.object_truth(name, cal, depth, eef, c["privileged"]["objects"])
        if t is not None:
            options.append(t)
    if not options:
        return None
    t = rng.choice(options)
    words = gnd.offset_words(directions)
    neg = [max(sorted(directions), key=lambda k: -float(np.dot(directions[k], directions[w]))) for w in words]
    label = gnd.display_name(t["object"])
    text = (f"Point at the {label} in the {cam} image: give the pixel at the middle of its visible surface, and "
            f"say how far that point is from the grip point, in mm along {', '.join(words)} "
            f"(negative for {', '.join(neg)}).")
    return {**c, "question": text, "privileged": {**c["privileged"], "grounding": t},
            "meta": {**c["meta"], "object": t["object"], "label": label, "chance": t["chance"],
                     "mask_px": t["mask_px"]}}


def candidates(rollout, profile, rng: random.Random, cameras=()) -> list[dict]:
    """Every question the rollout's moments can pose, with its ground truth (grounding questions
    get theirs once their moment is rendered: ``finish_grounding``)."""
    oracle = _oracle(profile)
    starts = _starts(rollout)
    out = []
    for m in rollout.moments:
        out += _grounding_candidates(rollout, m, cameras)
        sub = _spec(rollout.specs, m.subgoal_id)
        if m.tag == "end":
            # the last plan's place subgoal (the episode's end state), if the plan has one
            last = [s for s in (_spec(rollout.specs, x["id"]) for x in m.plan) if s]
            sub = last[-1] if last else None
        start = starts.get(sub["id"], {}) if sub else {}
        if sub is not None:
            a = _action_candidate(rollout, m, sub, start, oracle, rng)
            if a:
                out.append(a)
            p = _progress_candidate(rollout, m, sub, start, oracle)
            if p:
                out.append(p)
        out += _completion_candidates(rollout, m, m.subgoal_id, starts, oracle)
    return out


# ------------------------------------------------------------------------------------------------
# balanced picking
# ------------------------------------------------------------------------------------------------
def interleave(items: list, keyfns: list, rng: random.Random) -> list:
    """Order ``items`` so that every prefix is as balanced as possible over the nested keys:
    round-robin over the groups of the first key, each group ordered the same way by the rest."""
    if not items:
        return []
    if not keyfns:
        items = list(items)
        rng.shuffle(items)
        return items
    groups: dict = {}
    for it in items:
        groups.setdefault(keyfns[0](it), []).append(it)
    names = sorted(groups)
    rng.shuffle(names)
    seqs = [interleave(groups[n], keyfns[1:], rng) for n in names]
    out = []
    for i in range(max(len(s) for s in seqs)):
        out += [s[i] for s in seqs if i < len(s)]
    return out


def moment_key(c: dict) -> tuple:
    """The instant a question is about: (suite, task, init state, control step)."""
    return (c["suite"], int(c["task"]), int(c["init_state"]), int(c["step"]))


def _keys(skill: str) -> list:
    base = [lambda c: c["_strata"][0], lambda c: c["_strata"][1]]
    if skill == "completion":
        base.append(lambda c: c["_strata"][2] if c["meta"]["scope"] == "task" else c["meta"]["relation"])
    return base + [lambda c: c["rollout"], lambda c: c["moment"]]


def split(n: int, parts: list) -> dict:
    """n split as evenly as possible over ``parts`` (the first ones get the remainder)."""
    k = len(parts)
    return {p: n // k + (1 if i < n % k else 0) for i, p in enumerate(parts)}


def _take(order: list, n: int, used: set) -> tuple[list, list]:
    """(the first ``n`` of ``order`` on moments not in ``used``, the rest); marks the taken moments used."""
    took, rest = [], []
    for c in order:
        k = moment_key(c)
        if len(took) < n and k not in used:
            took.append(c)
            used.add(k)
        else:
            rest.append(c)
    return took, rest


def pick(cands: list, quota: dict, rng: random.Random, one_per_moment: bool = True) -> list:
    """quota: {(skill, suite): n}. Balanced within each cell; a short cell is filled from the same
    skill's other suites. With ``one_per_moment`` no two picks share a moment (``moment_key``): the
    skills pick in turn, the one with the fewest candidate moments per question first."""
    out = []
    used: set = set()

    def scarcity(skill):
        n = sum(v for (sk, _), v in quota.items() if sk == skill)
        have = len({moment_key(c) for c in cands if c["skill"] == skill})
        return (have / n if n else float("inf"), SKILLS.index(skill))
    for skill in sorted(SKILLS, key=scarcity) if one_per_moment else SKILLS:
        if not one_per_moment:
            used = set()
        cells = {s: n for (sk, s), n in quota.items() if sk == skill}
        left = []
        short = 0
        for suite in sorted(cells):
            pool = [c for c in cands if c["skill"] == skill and c["suite"] == suite]
            order = interleave(pool, _keys(skill), rng)
            n = cells[suite]
            took, rest = _take(order, n, used)
            out += took
            left += rest
            short += n - len(took)
        if short:
            took = _take(interleave(left, _keys(skill), rng), short, used)[0]
            out += took
            if one_per_moment and len(took) < short:
                out = _swap_in(out, [c for c in left if c not in took], short - len(took), cands, used)
    return out


def _swap_in(out: list, wanted: list, n: int, cands: list, used: set) -> list:
    """Up to ``n`` of ``wanted`` (candidates whose moments other skills' picks hold) swapped in: a
    pick holding such a moment moves to a free moment of its own skill and suite, if it has one."""
    held = {moment_key(c): i for i, c in enumerate(out)}
    for c in wanted:
        if n <= 0:
            break
        i = held.get(moment_key(c))
        if i is None:
            continue
        p = out[i]
        alt = next((a for a in cands if a["skill"] == p["skill"] and a["suite"] == p["suite"]
                    and moment_key(a) not in used), None)
        if alt is None:
            continue
        used.add(moment_key(alt))
        out[i] = alt
        held[moment_key(alt)] = i
        out.append(c)
        held[moment_key(c)] = len(out) - 1
        n -= 1
    return out


# ------------------------------------------------------------------------------------------------
# the set
# ------------------------------------------------------------------------------------------------
def _finish(chosen: list, rng: random.Random, image_paths: dict, cameras: dict) -> list[dict]:
    """Shuffle options (the correct letter cycles evenly per skill), number the questions."""
    by_skill: dict = {}
    for c in chosen:
        by_skill.setdefault(c["skill"], []).append(c)
    pos: dict = {}
    for skill, cs in by_skill.items():
        n_opt = len(cs[0]["_options"])
        if not n_opt:
            continue
        p = [i % n_opt for i in range(len(cs))]
        rng.shuffle(p)
        for c, i in zip(cs, p):
            pos[id(c)] = i
    out = []
    for k, c in enumerate(chosen):
        q = {"id": f"q{k + 1:04d}", "skill": c["skill"]}
        for key in ("suite", "task", "init_state", "rollout", "moment", "step", "instruction", "plan",
                    "subgoal", "state", "scene"):
            q[key] = c[key]
        q["images"] = image_paths[(c["rollout"], c["moment"])]
        q["cameras"] = cameras[(c["rollout"], c["moment"])]
        q["question"] = c["question"]
        if c["skill"] == "grounding":
            t = c["privileged"]["grounding"]
            q["options"] = []
            q["answer"] = {"camera": t["camera"], "object": t["object"], "pixel": t["pixel"],
                           "offset_mm": t["offset_mm"]}
            q["meta"] = dict(c["meta"])
            q["privileged"] = c["privileged"]
            out.append(q)
            continue
        opts = list(c["_options"])
        correct = next(o for o in opts if o[2] == "correct")
        others = [o for o in opts if o is not correct]
        rng.shuffle(others)
        i = pos[id(c)] % len(opts)
        ordered = others[:i] + [correct] + others[i:]
        q["options"] = [{"letter": LETTERS[j], "text": t, "value": v} for j, (t, v, _) in enumerate(ordered)]
        q["answer"] = LETTERS[i]
        q["meta"] = {**c["meta"], "option_kinds": [kd for _, _, kd in ordered]}
        q["privileged"] = c["privileged"]
        out.append(q)
    return out


def build_set(spec: BuildSpec, out: str | Path | None = None, progress=None, collector=None) -> Path:
    """Build the set into ``out`` (default ``runs/diagnose/set-...``). Returns the directory."""
    from .collect import Collector
    from ..profile import load_profile
    from .dataset import write_png, write_set
    progress = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    out = Path(out) if out else default_set_dir(spec)
    t0 = time.monotonic()
    rng = random.Random(spec.seed)
    profile = load_profile("libero_panda")
    tasks = [(s, t) for s in spec.suites for t in spec.tasks]
    if not tasks or not spec.inits:
        raise ValueError("diagnose build: no suites/tasks/init states")
    if spec.n_questions < len(SKILLS) * len(spec.suites):
        raise ValueError(f"diagnose build: --questions must be at least {len(SKILLS) * len(spec.suites)} "
                         f"(every skill x suite gets one)")
    quota = {}
    for skill, n in split(spec.n_questions, list(SKILLS)).items():
        for suite, k in split(n, list(spec.suites)).items():
            quota[(skill, suite)] = k
    own = collector is None
    col = collector or Collector(image_size=spec.image_size, seed=spec.seed, every=spec.every, progress=progress)
    pools, rollouts, images, cameras, walls = [], [], {}, {}, {}
    try:
        progress(f"diagnose build: {len(tasks)} task(s) x {len(spec.inits)} init state(s) -> "
                 f"{spec.n_questions} questions, seed {spec.seed}")
        for suite, task in tasks:
            rs = [col.rollout(suite, task, i) for i in spec.inits]
            cams = list(col.robot.camera_names)
            cands = [c for r in rs for c in candidates(r, profile, rng, cams)]
            n_tasks = sum(1 for s, _ in tasks if s == suite)
            share = {k: max(2, math.ceil((GROUNDING_OVERSAMPLE if k[0] == "grounding" else POOL_OVERSAMPLE)
                                         * n / n_tasks)) for k, n in quota.items() if k[1] == suite}
            pool = pick(cands, share, rng, one_per_moment=False)    # the final pick keeps one per moment
            by_key = {r.key: r for r in rs}
            need: dict = {}
            for c in pool:
                need.setdefault(c["rollout"], set()).add(c["moment"])
            for key, idx in need.items():
                r = by_key[key]
                col.render(r, [r.moments[i] for i in sorted(idx)])
                for i in idx:
                    m = r.moments[i]
                    images[(key, i)] = m.images
                    cameras[(key, i)] = {n: cal.to_json() for n, cal in sorted(m.cameras.items())}
            kept, unseen = [], 0
            for c in pool:
                if c["skill"] == "grounding":
                    c = finish_grounding(c, by_key[c["rollout"]].moments[c["moment"]], profile.directions, rng)
                    unseen += c is None
                if c is not None:
                    kept.append(c)
            for r in rs:
                for m in r.moments:          # depth was for the grounding truth only
                    m.depth = {}
            pool = kept
            for r in rs:
                rollouts.append({"suite": r.suite, "task": r.task, "init_state": r.init_state,
                                 "instruction": r.instruction, "success": r.success, "outcome": r.outcome,
                                 "steps": r.steps, "moments": len(r.moments)})
                walls[r.key] = r.wall_s
                for m in r.moments:          # free the simulator states
                    m.sim_state = None
            pools += pool
            progress(f"  {suite}/{task}: {len(cands)} candidate questions, {len(pool)} kept, "
                     f"{sum(len(v) for v in need.values())} frames rendered"
                     + (f" ({unseen} grounding candidates showed no askable object)" if unseen else ""))
        versions = col.robot.versions() if col.robot is not None else {}
        closing_axis = [float(v) for v in getattr(col.robot, "closing_axis_eef", (0.0, 1.0, 0.0))]
    finally:
        if own:
            col.close()
    chosen = pick(pools, quota, rng)
    chosen.sort(key=lambda c: (SKILLS.index(c["skill"]), spec.suites.index(c["suite"]), c["rollout"], c["moment"]))
    used = sorted({(c["rollout"], c["moment"]) for c in chosen})
    (out / "images").mkdir(parents=True, exist_ok=True)
    for old in (out / "images").glob("*.png"):
        old.unlink()
    paths = {}
    for key, mi in used:
        suite, task, init = key.split("/")
        paths[(key, mi)] = {}
        for cam, img in images[(key, mi)].items():
            rel = f"images/{suite}_t{task}_i{init}_m{mi:04d}_{cam}.png"
            write_png(out / rel, img)
            paths[(key, mi)][cam] = rel
    questions = _finish(chosen, rng, paths, cameras)
    counts: dict = {}
    for q in questions:
        for k in (q["skill"], f'{q["skill"]}/{q["suite"]}', q["suite"]):
            counts[k] = counts.get(k, 0) + 1
    manifest = {
        "format": FORMAT, "format_version": FORMAT_VERSION,
        "generator": "motormind.diagnose.build", "generator_version": GENERATOR_VERSION,
        "seed": spec.seed, "spec": asdict(spec), "skills": list(SKILLS),
        "n_questions": len(questions), "counts": counts, "frames": len(used),
        "chance": {s: _chance([q for q in questions if q["skill"] == s]) for s in SKILLS},
        "grounding": {"point_tolerance_px": gnd.POINT_TOLERANCE_PX, "offset_tolerance_mm": gnd.OFFSET_TOLERANCE_MM,
                      "offset_words": gnd.offset_words(profile.directions),
                      "closing_axis_eef": closing_axis},
        "simulator": versions, "rollouts": rollouts,
        "ground_truth": "privileged simulator state (motormind/diagnose/truth.py); see each question's "
                        "'privileged' key, which no prompt contains",
        "built": {"at": _dt.datetime.now().isoformat(timespec="seconds"),      # (not reproducible)
                  "wall_s": round(time.monotonic() - t0, 1), "rollout_wall_s": walls},
    }
    from .. import __version__
    manifest["motormind"] = __version__
    write_set(out, manifest, questions)
    if len(questions) < spec.n_questions:
        progress(f"diagnose build: only {len(questions)} of {spec.n_questions} questions could be posed; "
                 f"add tasks or init states")
    progress(f"diagnose build: {len(questions)} questions ({', '.join(f'{s} {counts.get(s, 0)}' for s in SKILLS)}), "
             f"{len(used)} frames -> {out} ({time.monotonic() - t0:.0f} s)")
    return out


def _chance(qs: list) -> float:
    """A uniform guess's expected score: 1 / options, or for grounding the frame fraction a random
    pixel lands on the object with (grounding.py)."""
    return round(sum(question_chance(q) for q in qs) / len(qs), 4) if qs else 0.0


def question_chance(q: dict) -> float:
    if q["skill"] == "grounding":
        return float(q["meta"]["chance"])
    return 1.0 / len(q["options"])
