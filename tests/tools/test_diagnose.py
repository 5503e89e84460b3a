"""The VLM skill diagnostic (motormind/diagnose): generation, ground truth, scoring, the openai path.

The simulation tests share one small set (24 questions, 6 per skill, from one libero_spatial rollout),
built once per module through the CLI; a second build with the same seed must reproduce it byte for byte.
"""
from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from motormind.brains.base import Brain, BrainReply
from motormind.diagnose import SKILLS
from motormind.diagnose.brains import NoisyDiagnoser, OracleDiagnoser, RandomBrain, make_brain, offered_letters
from motormind.diagnose import CHOICE_SKILLS
from motormind.diagnose.build import interleave, moment_key, pick, split
from motormind.diagnose.dataset import load_images, load_set
from motormind.diagnose.role import Diagnoser
from motormind.diagnose.truth import Truth
from motormind.profile import load_profile

SMALL = ["--suites", "libero_spatial", "--tasks", "0", "--inits", "0", "--questions", "24", "--seed", "3"]
N = 24


def _cli(*args, timeout=300, env=None):
    e = {**os.environ, "MUJOCO_GL": "osmesa", **(env or {})}
    return subprocess.run([sys.executable, "-m", "motormind.cli", *args], capture_output=True, text=True,
                          timeout=timeout, env=e)


def _digest(d: Path) -> dict:
    return {p.relative_to(d).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(d.rglob("*")) if p.is_file() and p.name != "manifest.json"}


def _manifest(d: Path) -> dict:
    m = json.loads((d / "manifest.json").read_text())
    m.pop("built")
    return m


# -- no simulator -----------------------------------------------------------------------------------
def _snapshot(eef, width=78.0, bowl_xy=(0.55, 0.0), bowl_z=0.0, plate_xy=(0.55, 0.2), sub=("grasp",),
              start=None, on_plate=False):
    bx, by = bowl_xy
    px, py = plate_xy
    kind = sub[0]
    return {"frame": "base", "units": "m",
            "robot": {"eef_pos_m": list(eef), "gripper_width_mm": width, "gripper_fraction": min(1.0, width / 78.0)},
            "movable": ["bowl_1", "plate_1"],
            "objects": {"bowl_1": {"lo": [bx - 0.05, by - 0.05, bowl_z], "hi": [bx + 0.05, by + 0.05, bowl_z + 0.05]},
                        "plate_1": {"lo": [px - 0.07, py - 0.07, 0.0], "hi": [px + 0.07, py + 0.07, 0.02]}},
            "regions": {}, "goal_state": [["on", "bowl_1", "plate_1"]],
            "predicates": [[["on", "bowl_1", "plate_1"], on_plate]],
            "subgoal": {"kind": kind, "a": "bowl_1", "b": "plate_1", "pred": ["on", "bowl_1", "plate_1"]}
            if kind != "task" else {"kind": "task"},
            "subgoal_start": start or {}}


def test_ground_truth_from_a_privileged_snapshot():
    prof = load_profile("libero_panda")
    o = OracleDiagnoser(prof).geometry
    # far above the bowl, fingers open: grasp not started; moving away is a setback, down is progress
    t = Truth(_snapshot([0.45, 0.0, 0.30]), o)
    assert t.stage() == 0 and t.achieved() is False
    down = {"op": "move", "direction": "down", "distance_mm": 50}
    back = {"op": "move", "direction": "back", "distance_mm": 50}
    assert t.decides(down, t.delta(down)) == "progress"
    assert t.decides(back, t.delta(back)) == "setback"
    assert t.decides({"op": "done"}, t.delta({"op": "done"})) == "setback"      # no progress
    close = {"op": "gripper", "action": "close"}
    assert t.decides(close, t.delta(close)) == "setback"                       # closing on nothing
    # at the grasp point with open fingers: in position, and closing is the progress
    gp = o._grasp("bowl_1")[0]
    t = Truth(_snapshot(list(gp)), o)
    assert t.stage() == 2 and t.decides(close, t.delta(close)) == "progress"
    # closed on the rim: held, achieved; the carry has not started (not lifted yet)
    t = Truth(_snapshot(list(gp), width=9.0), o)
    assert t.stage() == 3 and t.achieved() is True
    carry = _snapshot(list(gp), width=9.0, sub=("carry",), start={"a_bottom_z_m": 0.0})
    t = Truth(carry, o)
    assert t.stage() == 0 and t.achieved() is False
    up = {"op": "move", "direction": "up", "distance_mm": 40}
    assert t.decides(up, t.delta(up)) == "progress"
    opn = {"op": "gripper", "action": "open"}
    assert t.decides(opn, t.delta(opn)) == "setback"                          # drops it
    # the task: from the goal predicates only
    assert Truth(_snapshot([0.45, 0, 0.3], sub=("task",), on_plate=True), o).achieved() is True
    assert Truth(_snapshot([0.45, 0, 0.3], sub=("task",)), o).achieved() is False
    # near a stage boundary (10 cm from the grasp point): not asked
    t = Truth(_snapshot(list(gp + [0, 0, 0.10])), o)
    assert t.stage() is None


def test_balanced_ordering_is_deterministic_and_seeded():
    items = [{"k": k, "r": r, "i": i} for k in "abc" for r in range(3) for i in range(4)]
    keys = [lambda c: c["k"], lambda c: c["r"]]
    a = interleave(items, keys, random.Random(1))
    assert a == interleave(items, keys, random.Random(1))
    assert a != interleave(items, keys, random.Random(2))
    first = a[:9]
    assert sorted(c["k"] for c in first) == list("aaabbbccc")         # every prefix balanced
    assert split(320, list(SKILLS)) == {"action": 80, "progress": 80, "completion": 80, "grounding": 80}
    assert split(80, ["s", "o"]) == {"s": 40, "o": 40}


def test_a_set_holds_no_two_questions_on_the_same_moment():
    # every moment of two rollouts poses a question of every skill (completion: two); steps repeat
    # across moments (a command's moment and the mid-motion one before it can share a step)
    cands = []
    for init in (0, 1):
        for mi in range(12):
            step = mi // 2 * 4
            base = {"suite": "s", "task": 0, "init_state": init, "rollout": f"s/0/{init}", "moment": mi, "step": step,
                    "meta": {"scope": "subgoal", "relation": "current"}}
            for skill in SKILLS:
                for k in range(2 if skill == "completion" else 1):
                    cands.append({**base, "skill": skill, "_strata": [str(k), "x", "y"]})
    got = pick(cands, {(sk, "s"): 3 for sk in SKILLS}, random.Random(0))
    keys = [moment_key(c) for c in got]
    assert len(got) == 12 and len(set(keys)) == 12, keys
    assert {sk: sum(c["skill"] == sk for c in got) for sk in SKILLS} == {sk: 3 for sk in SKILLS}
    # asked for more than there are distinct moments: fewer questions, never a repeated moment
    got = pick(cands, {(sk, "s"): 5 for sk in SKILLS}, random.Random(1))
    assert len(got) == 12 and len({moment_key(c) for c in got}) == 12


def _question(skill="completion", n=2):
    opts = [{"letter": "A", "text": "yes: it is achieved now", "value": {"achieved": True}},
            {"letter": "B", "text": "no: it is not achieved now", "value": {"achieved": False}}][:n]
    return {"id": "q0001", "skill": skill, "suite": "s", "instruction": "put the bowl on the plate", "plan": [],
            "subgoal": None, "state": {"eef_pos_mm": [450.0, 0.0, 300.0]}, "question": "Is the task complete?",
            "options": opts, "answer": "B", "meta": {"option_kinds": ["premature_done", "correct"]},
            "privileged": _snapshot([0.45, 0, 0.3], sub=("task",))}


class _Scripted(Brain):
    name = "scripted"

    def __init__(self, texts):
        self.texts = list(texts)
        self.reqs = []

    def respond(self, req):
        self.reqs.append(req)
        return BrainReply(self.texts.pop(0), self.name)


def test_role_parses_strictly_repairs_once_and_fails_safe():
    prof = load_profile("libero_panda")
    events = []
    rec = lambda kind, **d: events.append((kind, d))  # noqa: E731
    b = _Scripted(['{"answer": "C"}', 'Sure. ```json\n{"answer": "B", "reasoning": "not on the plate"}\n```'])
    res = Diagnoser(b, rec).answer(_question(), {}, prof, privileged=False)
    assert res.value["answer"] == "B" and res.calls == 2
    assert "not one of the offered options A, B" in b.reqs[0].history[-1]["content"] or \
        "not one of the offered options A, B" in [d for k, d in events if k == "repair_request"][0]["error"]
    # a non-privileged brain never gets the snapshot, in the context or the prompt
    assert "privileged" not in b.reqs[0].context
    assert "bowl_1" not in b.reqs[0].user and "0.05" not in b.reqs[0].user
    assert "B. no: it is not achieved now" in b.reqs[0].user
    b2 = _Scripted(["I think B", "the answer is B"])
    res2 = Diagnoser(b2, rec).answer(_question(), {}, prof, privileged=False)
    assert res2.value is None and res2.calls == 2 and [k for k, _ in events].count("role_failed") == 1
    # the oracle answers from the snapshot handed in the context
    res3 = Diagnoser(OracleDiagnoser(prof), rec).answer(_question(), {}, prof, privileged=True)
    assert res3.value["answer"] == "B" and res3.privileged and res3.brain == "oracle"


def test_random_brain_reads_the_offered_letters_from_the_prompt_alone():
    from motormind.brains.base import BrainRequest
    req = BrainRequest("diagnose", "diagnose", "sys", "Options:\nA. yes\nB. no\n", {})
    assert offered_letters(req) == ["A", "B"]
    got = {json.loads(RandomBrain(s).respond(req).text)["answer"] for s in range(20)}
    assert got == {"A", "B"}
    with pytest.raises(Exception, match="unknown brain"):
        make_brain("pilot")


def test_cli_refuses_a_missing_set(tmp_path):
    p = _cli("diagnose", "run", "--set", str(tmp_path / "nope"), "--brain", "random", timeout=60)
    assert p.returncode == 2 and "not a question set" in p.stderr and "Traceback" not in p.stderr


# -- with the simulator ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def qset(tmp_path_factory):
    out = tmp_path_factory.mktemp("diag") / "set"
    p = _cli("diagnose", "build", *SMALL, "--out", str(out))
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "question set:" in p.stdout
    return out


@pytest.mark.sim
def test_set_format_balance_and_versions(qset):
    man, qs = load_set(qset)
    assert man["format"] == "motormind-diagnose-set" and man["format_version"] == 2
    assert man["generator"] == "motormind.diagnose.build" and man["generator_version"]
    assert man["seed"] == 3 and man["simulator"]["mujoco"] == "2.3.7"
    assert len(qs) == N and {s: sum(q["skill"] == s for q in qs) for s in SKILLS} == \
        {"action": 6, "progress": 6, "completion": 6, "grounding": 6}
    assert [q["id"] for q in qs] == [f"q{i:04d}" for i in range(1, N + 1)]
    # one question per moment (episode, task, init state, control step)
    keys = [(q["suite"], q["task"], q["init_state"], q["step"]) for q in qs]
    assert len(set(keys)) == len(keys), sorted(keys)
    for q in qs:
        assert set(q["cameras"]) == {"agentview", "robot0_eye_in_hand"}       # calibrations, for the marks
        if q["skill"] == "grounding":
            g = q["privileged"]["grounding"]
            assert q["options"] == [] and g["camera"] == q["meta"]["camera"] and g["size"] == [128, 128]
            assert g["object"] in q["privileged"]["movable"] and q["meta"]["label"] in q["question"]
            assert 0 < g["chance"] < 0.5 and g["mask_px"] >= 12
            # the reference point is on the object: inside its AABB (grown by the mask's margin)
            o = q["privileged"]["objects"][g["object"]]
            p = np.asarray(g["point_m"])
            assert np.all(p >= np.asarray(o["lo"]) - 0.006) and np.all(p <= np.asarray(o["hi"]) + 0.006), (q["id"], p, o)
            assert np.allclose(np.asarray(g["offset_mm"]), (p - np.asarray(q["privileged"]["robot"]["eef_pos_m"])) * 1000,
                               atol=0.2)
            continue
        letters = [o["letter"] for o in q["options"]]
        assert letters == list("ABCD"[:len(letters)]) and q["answer"] in letters
        assert len(letters) == (2 if q["skill"] == "completion" else 4)
        assert q["meta"]["option_kinds"].count("correct") == 1
        assert q["meta"]["option_kinds"][letters.index(q["answer"])] == "correct"
        assert {"robot", "objects", "goal_state", "predicates", "subgoal"} <= set(q["privileged"])
        imgs = load_images(qset, q)
        assert set(imgs) == {"agentview", "robot0_eye_in_hand"}
        assert all(v.shape == (128, 128, 3) and v.dtype == np.uint8 for v in imgs.values())
    # answer letters spread over the positions (a fixed-letter brain scores chance)
    for s in ("action", "progress"):
        pos = [q["answer"] for q in qs if q["skill"] == s]
        assert len(set(pos)) >= 3
    assert sum(q["answer"] == "A" for q in qs if q["skill"] == "completion") == 3
    assert {k: man["chance"][k] for k in CHOICE_SKILLS} == {"action": 0.25, "progress": 0.25, "completion": 0.5}
    assert 0 < man["chance"]["grounding"] < 0.5
    assert sum(p.stat().st_size for p in qset.rglob("*")) < 5e6


@pytest.mark.sim
def test_the_set_is_reproducible_for_a_seed(qset, tmp_path):
    from motormind.diagnose.build import BuildSpec, build_set
    again = build_set(BuildSpec(suites=["libero_spatial"], tasks=[0], inits=[0], seed=3, n_questions=N),
                      tmp_path / "again", progress=lambda s: None)
    assert _digest(again) == _digest(qset)          # questions.jsonl and every PNG, byte for byte
    assert _manifest(again) == _manifest(qset)


@pytest.mark.sim
def test_the_oracle_scores_100_percent_from_privileged_state_alone(qset, tmp_path):
    from motormind.diagnose.score import run_diagnostic
    rep = run_diagnostic(qset, make_brain("oracle"), tmp_path / "oracle", progress=lambda s: None)
    assert rep["brain"] == "oracle" and rep["privileged"] is True
    assert rep["scores"]["overall"]["correct"] == N
    assert all(g["rate"] == 1.0 for g in rep["scores"]["skill"].values()) and set(rep["scores"]["skill"]) == set(SKILLS)
    g = rep["scores"]["grounding"]
    assert g["n"] == 6 and g["on_object"] == g["within_mm"] == g["correct"] == 1.0
    assert g["median_px_error"] <= 0.5 and g["median_mm_error"] <= 1.0
    assert "## Grounding" in (tmp_path / "oracle" / "report.md").read_text()
    assert (tmp_path / "oracle" / "report.md").read_text().startswith("# VLM skill diagnostic: oracle")
    assert "privileged simulator state" in (tmp_path / "oracle" / "report.md").read_text()
    # the oracle never reads the answer key: without it (and the generator's notes) it answers the same
    _, qs = load_set(qset)
    prof = load_profile("libero_panda")
    role = Diagnoser(OracleDiagnoser(prof))
    for q in qs:
        if q["skill"] == "grounding":
            continue                 # the fake camera's test: tests/grounding/test_diagnose_grounding.py
        blind = {k: v for k, v in q.items() if k not in ("answer", "meta")}
        assert role.answer(blind, {}, prof, privileged=True).value["answer"] == q["answer"], q["id"]
    # and no prompt carries privileged state
    events = [json.loads(x) for x in (tmp_path / "oracle" / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["kind"] == "vlm_call"]
    assert len(calls) == N and all(c["role"] == "diagnose" and c["ok"] for c in calls)
    aabb = json.dumps(qs[0]["privileged"]["objects"][qs[0]["privileged"]["movable"][0]]["lo"][0])
    for c in calls:
        text = c["system"] + c["user"]
        assert "privileged" not in text and '"lo"' not in text and aabb not in text and "mask_rle" not in text
        assert c["images"] == {"agentview": [128, 128, 3], "robot0_eye_in_hand": [128, 128, 3]}
        # the cameras in the roles' words, the wrist view included, and their numbers
        assert "robot0_eye_in_hand: on the gripper" in c["user"] and "right is the robot's" in c["user"]
        assert "Field of view" in c["user"] and "Marks drawn on the images" in c["user"]
        assert "Table surface (what the objects stand on): z = " in c["user"]        # the set's scene facts


@pytest.mark.sim
def test_a_random_brain_scores_near_chance(qset, tmp_path):
    _, qs = load_set(qset)
    prof = load_profile("libero_panda")
    imgs = {q["id"]: load_images(qset, q) for q in qs}
    from motormind.diagnose import grounding as gnd
    from motormind.grounding.pixels import PixelConvention
    hits = {s: [] for s in SKILLS}
    on = []
    conv = PixelConvention("pixels", 128, 128)
    for seed in range(60):
        role = Diagnoser(RandomBrain(seed))
        for q in qs:
            v = role.answer(q, imgs[q["id"]], prof, privileged=False, convention=conv).value
            if q["skill"] == "grounding":
                fig = gnd.score(q["privileged"]["grounding"], v, conv, prof.directions)
                hits["grounding"].append(fig["correct"])
                on.append(fig["on_object"])
            else:
                hits[q["skill"]].append(v["answer"] == q["answer"])
    for s, chance in (("action", 0.25), ("progress", 0.25), ("completion", 0.5)):
        assert abs(np.mean(hits[s]) - chance) < 0.085, (s, np.mean(hits[s]))
    chance = np.mean([q["meta"]["chance"] for q in qs if q["skill"] == "grounding"])
    assert abs(np.mean(on) - chance) < 0.05 and np.mean(hits["grounding"]) <= 0.02, (np.mean(on), chance)
    # and through the CLI: labelled random, not privileged, a report written
    p = _cli("diagnose", "run", "--set", str(qset), "--brain", "random", "--seed", "1", "--out", str(tmp_path / "r"),
             timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads((tmp_path / "r" / "report.json").read_text())
    assert rep["brain"] == "random" and rep["privileged"] is False and rep["questions"] == N
    assert rep["scores"]["grounding"]["n"] == 6 and rep["scores"]["grounding"]["median_mm_error"] > 100


@pytest.mark.sim
def test_the_noisy_brain_errs_at_its_rates_and_stays_labelled(qset):
    _, qs = load_set(qset)
    prof = load_profile("libero_panda")
    rates = {"wrong_direction": 0.5, "wrong_magnitude": 0.5, "premature_done": 0.5, "missed_completion": 0.5}
    right = 0
    brain = NoisyDiagnoser(OracleDiagnoser(prof), rates, seed=0)
    role = Diagnoser(brain)
    qs = [q for q in qs if q["skill"] in CHOICE_SKILLS]      # no episode error kind maps onto a point
    for _ in range(5):
        for q in qs:
            res = role.answer(q, {}, prof, privileged=True)
            assert res.brain == "noisy(oracle)" and res.privileged
            right += res.value["answer"] == q["answer"]
    n = 5 * len(qs)
    assert 0.3 * n < right < 0.8 * n
    assert brain.injected["missed_completion"] + brain.injected["premature_done"] > 0
    assert brain.injected["wrong_direction"] > 0 and brain.injected["wrong_magnitude"] > 0


@pytest.mark.sim
def test_a_profile_from_a_report_reproduces_its_accuracies_on_the_noisy_brain(qset, tmp_path):
    from motormind.brains.noise_profile import profile_from_report
    from motormind.diagnose.score import run_diagnostic
    from motormind.evaluate.stats import wilson
    # a real report: the random brain's (far from the oracle's 100% on every skill)
    src = run_diagnostic(qset, make_brain("random", seed=2), tmp_path / "src", progress=lambda s: None)
    prof = profile_from_report(tmp_path / "src")
    assert prof.wrong_direction == pytest.approx(1 - src["scores"]["skill"]["action"]["rate"])
    # the noisy brain under that profile, asked the set 12 times over (12 x 6 questions per skill)
    got = {s: [0, 0] for s in SKILLS}
    for seed in range(12):
        rep = run_diagnostic(qset, make_brain("noisy", seed=seed, noise=prof), tmp_path / f"n{seed}",
                             progress=lambda s: None)
        for s, g in rep["scores"]["skill"].items():
            got[s][0] += g["correct"]
            got[s][1] += g["n"]
    for s in CHOICE_SKILLS:
        lo, hi = wilson(*got[s])
        assert lo <= src["scores"]["skill"][s]["rate"] <= hi, (s, got[s], src["scores"]["skill"][s])


@pytest.mark.sim
def test_answers_arrive_through_the_real_openai_client_from_serve_brain(qset, tmp_path):
    # 1. serve-brain in-process with the diagnostic's oracle behind it (configs/vlm/local-oracle.yaml)
    p = _cli("diagnose", "run", "--set", str(qset), "--vlm", "local-oracle", "--out", str(tmp_path / "oai"), timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    rep = json.loads((tmp_path / "oai" / "report.json").read_text())
    assert rep["brain"] == "openai:motormind-oracle" and rep["privileged"] is True
    assert rep["scores"]["overall"]["correct"] == N
    calls = [json.loads(x) for x in (tmp_path / "oai" / "events.jsonl").read_text().splitlines()]
    calls = [c for c in calls if c["kind"] == "vlm_call"]
    assert len(calls) == N and all(c["meta"]["request_id"].startswith("chatcmpl-") for c in calls)
    assert all(c["meta"]["images_sent"] == 2 for c in calls)
    # 2. a standalone `motormind serve-brain` replaying a random run, the client pointed at its URL
    p = _cli("diagnose", "run", "--set", str(qset), "--brain", "random", "--seed", "5", "--out", str(tmp_path / "rnd"),
             timeout=120)
    assert p.returncode == 0, p.stderr[-2000:]
    srv = subprocess.Popen([sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "replay", "--record",
                            str(tmp_path / "rnd" / "events.jsonl"), "--port", "0", "--quiet"],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = srv.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1"), srv.stderr.read()[-2000:]
        cfg = tmp_path / "replay.yaml"
        cfg.write_text(f"name: served\nbase_url: {url}\nmodel: motormind-replay\napi_key: local\napi_key_env: null\n"
                       f"timeout_s: 20\nretries: 1\nbackoff_s: 0.05\nstructured_output: json_schema\n")
        p = _cli("diagnose", "run", "--set", str(qset), "--brain", "openai", "--vlm", str(cfg),
                 "--out", str(tmp_path / "served"), timeout=120)
        assert p.returncode == 0, p.stderr[-2000:]
    finally:
        srv.terminate()
        srv.wait(timeout=10)
    a = [json.loads(x) for x in (tmp_path / "rnd" / "answers.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (tmp_path / "served" / "answers.jsonl").read_text().splitlines()]
    assert [r["given"] for r in a] == [r["given"] for r in b]
    assert {r["brain"] for r in b} == {"openai:motormind-replay"} and not any(r["privileged"] for r in b)
