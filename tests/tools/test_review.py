"""What a team reviewing a run reads (issue 36): report.html with the interference tables and a
provenance block, the noisy brain's injected errors on every row, one count of VLM calls and the
VLM trouble in the end summary, a timing split that adds up, `compare`'s costs and flipped
episodes, the trials' readable outcomes, and the rollout video and episode page of --videos."""
import json
import subprocess
import sys

import numpy as np
import pytest

from motormind.evaluate.publish import write_reports
from motormind.evaluate.report import markdown

sys.path.insert(0, __import__("os").path.dirname(__file__))
from test_reports import Tables, row  # noqa: E402


def itf_row(key, cond, ok, moved=True):
    r = row(key, "libero_spatial", 0, int(key[-1]), ok)
    r.update(interference=None if cond == "off" else cond, brain_label="oracle", privileged=True,
             simulator={"mujoco": "3.1", "robosuite": "1.4"}, motormind="0.1.0")
    if cond != "off":
        r["interference_event"] = {"object": "bowl", "step": 30} if moved else None
        r["interference_measures"] = {"cancel": {"ms": 120.0, "steps": 2}, "stale_commands": 1,
                                      "next_batch": {"ms": 900.0, "steps": 4}, "next_plan": None, "success": None,
                                      "cancel_boundary": 1, "honoured_boundary": 1,
                                      "recovery_vlm_calls": 3} if moved else None
    return r


def test_the_html_report_holds_the_interference_tables_and_the_provenance(tmp_path):
    rows = [itf_row("a1", "off", True), itf_row("a2", "off", True),
            itf_row("b1", "fetched@reach", False), itf_row("b2", "fetched@reach", True)]
    stamp = {"command": "motormind eval --interference off fetched@reach", "commit": "abc123def456",
             "date": "2025-01-02T03:04:05+00:00", "motormind": "0.1.0"}
    write_reports(rows, tmp_path, stamp=stamp)
    html = (tmp_path / "report.html").read_text()
    t = Tables()
    t.feed(html)
    side = next(x for x in t.tables if x[0][:2] == ["suite", "ablation"] and "fetched@reach" in x[0])
    assert side[0] == ["suite", "ablation", "off", "fetched@reach"]
    assert side[1][2].startswith("2/2") and side[1][3].startswith("1/2")
    cost = next(x for x in t.tables if "Monitor cancels" in x[0])
    assert cost[1][:4] == ["libero_spatial", "full", "fetched@reach", "2/2"]
    assert "Interference, side by side" in html
    prov = dict(r for r in next(x for x in t.tables if x and x[0][0] == "command"))
    assert prov["command"] == stamp["command"] and prov["commit"] == "abc123def456"
    assert prov["date"].startswith("2025-01-02") and prov["MotorMind"] == "0.1.0"
    assert "mujoco 3.1" in prov["simulator"] and prov["brain"] == "oracle (PRIVILEGED simulator state)"
    assert "## Provenance" in (tmp_path / "report.md").read_text()


def test_a_manual_run_is_labelled_by_who_answered():
    r = itf_row("a1", "off", True)
    r.update(brain_label="openai:manual", privileged=False, answered_by={"planner": "manual",
                                                                         "monitor": "auto:no-cancel"})
    md = markdown([r])
    assert "- brain: openai:manual (not privileged)" in md
    assert "- answered by: monitor: auto:no-cancel; planner: manual" in md


class Inner:
    """An inner brain answering every role the same: a two-move batch, a rejecting Verifier."""
    name = "inner"
    privileged = False

    def respond(self, req):
        from motormind.brains.base import BrainReply
        obj = {"planner": {"subgoals": [{"id": "s1", "description": "d", "success_criterion": "c"}]},
               "executor": {"commands": [{"op": "move", "direction": "left", "distance_mm": 20.0},
                                         {"op": "move", "direction": "forward", "distance_mm": 20.0}]},
               "verifier": {"achieved": False, "evidence": "e"}}[req.role]
        return BrainReply(json.dumps(obj), self.name)


def test_a_noisy_run_carries_its_injected_errors_per_kind_and_those_active_at_failure():
    from motormind.brains.base import BrainRequest
    from motormind.brains.noise_profile import parse_noise
    from motormind.brains.noisy import NoisyBrain
    from motormind.evaluate.jobs import Job, _row
    b = NoisyBrain(Inner(), parse_noise("wrong_direction=1,wrong_magnitude=0,clear_chance=0"), seed=4)
    for _ in range(3):
        b.respond(BrainRequest("executor", "executor", "", "", {}))
    c = b.counts()
    assert c["injected"] == {"wrong_direction": 3} and c["active_at_end"] == ["wrong_direction"]
    job = Job("libero_spatial", 0, 0, noise=(("wrong_direction", 1.0),))
    s = {"success": False, "outcome": "step_budget", "reason": "r", "steps": 220, "batches": 3, "replans": 0,
         "verifier_rejections": 0, "controller_rejections": 0, "vlm_calls": 4, "wall_s": 10.0,
         "noise_counts": c}
    r = _row(job, s, 10.0)
    assert r["noise_injected"] == {"wrong_direction": 3} and r["noise_active_at_end"] == ["wrong_direction"]
    ok = dict(r, key="k2", success=True, noise_injected={"wrong_direction": 1}, noise_active_at_end=[])
    md = markdown([r, ok])
    line = next(x for x in md.splitlines() if x.startswith("| full noise="))
    assert "| 2 | 1 | wrong_direction 4 | wrong_direction 1 |" in line


def test_the_end_summary_and_summary_json_agree_and_name_the_vlm_trouble(tmp_path):
    from fake_episode import run_fake

    from motormind.evaluate.run import end_lines
    from motormind.session.open import timing
    from motormind.vlm_calls import vlm_trouble
    res, robot, events, srv, tot = run_fake(tmp_path, {"malformed_json": 1.0, "roles": ["executor"]},
                                         max_replans=1, max_batches=10)
    calls = sum(e["kind"] == "vlm_call" for e in events)
    trouble = vlm_trouble(tot)
    assert tot["calls"] == calls and trouble["repairs"] == sum(e["kind"] == "repair_request" for e in events) > 0
    s = {**res.to_json(), "vlm_calls": tot["calls"], "vlm_trouble": trouble, "step_budget": None,
         "episode_wall_s": res.wall_s, **timing(res.to_json(), tot)}
    text = "\n".join(end_lines(s))
    assert trouble["failed_safe"] == sum(e["kind"] == "role_failed" for e in events) > 0
    assert f"VLM calls {calls}," in text and f"repairs {trouble['repairs']}" in text
    assert f"failed safe {trouble['failed_safe']}" in text
    assert s["vlm_s"] + s["motion_s"] + s["overhead_s"] == pytest.approx(res.wall_s, abs=0.01)
    # the two times are told apart: the whole wall (setup included) and the loop the split adds up to
    longer = "\n".join(end_lines({**s, "episode_wall_s": res.wall_s + 30.0}))
    assert f"wall {res.wall_s + 30.0:.1f} s (of it 30.0 s building the scene and closing)" in longer
    assert f"the loop: {res.wall_s:.1f} s = VLM" in longer


def test_the_timing_split_adds_up_and_leaves_the_background_roles_apart():
    from motormind.session.open import timing
    t = timing({"wall_s": 10.0, "motion_s": 4.0},
               {"latency_by_role": {"planner": 1.0, "executor": 2.0, "monitor": 6.0, "memory": 3.0}})
    assert t == {"vlm_s": 3.0, "vlm_background_s": 9.0, "motion_s": 4.0, "overhead_s": 3.0}


def test_compare_gives_the_cost_deltas_and_lists_the_flipped_episodes(tmp_path):
    for name, oks, secs in (("a", [True, True, False], 10.0), ("b", [True, False, True], 15.0)):
        d = tmp_path / name
        d.mkdir()
        rs = []
        for i, ok in enumerate(oks):
            r = row(f"{name}{i}", "libero_spatial", 0, i, ok)
            r["episode_s"] = secs
            rs.append(r)
        (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    p = subprocess.run([sys.executable, "-m", "motormind.cli", "compare", str(tmp_path / "a"), str(tmp_path / "b"),
                        "--out", str(tmp_path / "cmp")], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "| episode s | 10.0 | 15.0 | +5.0 (+50%) |" in p.stdout
    assert "| VLM calls | 10.0 | 10.0 | +0.0 (+0%) |" in p.stdout
    assert "## Flipped episodes (2)" in p.stdout
    assert "| libero_spatial/0/1/s0/full | success | FAIL step_budget |" in p.stdout
    assert "| libero_spatial/0/2/s0/full | FAIL step_budget | success |" in p.stdout
    t = Tables()
    t.feed((tmp_path / "cmp" / "compare.html").read_text())
    assert t.tables[-1][0] == ["episode", "a", "b"] and len(t.tables[-1]) == 3


def test_the_trials_print_outcomes_as_words():
    from motormind.results import Outcome
    from motormind.evaluate.trials import TrialResult, format_summary, summarize
    rs = [TrialResult(i, "off", "put", True, str(Outcome.SUCCESS), "", 1.0, 5.0, 2, 0, "oracle", True)
          for i in range(4)]
    s = {"trials": 4, "scene": "placement", "brain": "oracle", "privileged": True, "conditions": summarize(rs),
         "realtime": {"factor": 1.0, "sim_s": 1, "wall_s": 1, "physics_capacity": 2}, "out": "x"}
    text = format_summary(s)
    assert "outcomes success 4" in text and "Outcome." not in text


class Stepper:
    """A backend with a per-control-step call and two cameras, as LIBERO has."""
    camera_names = ["agentview", "robot0_eye_in_hand"]
    step_s = 0.05

    def __init__(self):
        self.steps_used = 0

    def _raw_step(self, action):
        self.steps_used += 1

    def render(self, camera, size=None):
        return np.full((64, 64, 3), 10 if camera == "agentview" else 200, np.uint8)


@pytest.mark.parametrize("every", [1, 3])
def test_a_rollout_films_every_control_step_or_the_stated_fraction(tmp_path, every):
    from motormind.record import Rollout
    robot = Stepper()
    ro = Rollout(robot, every=every, px=32).attach()
    for _ in range(10):
        robot._raw_step(None)
    info = ro.write(tmp_path)
    assert robot.steps_used == 10 and info["control_steps"] == 10
    assert info["frames"] == 10 // every and info["fps"] == pytest.approx(20.0 / every, abs=1e-3)
    assert ro.frames[0].shape == (32, 64, 3)                  # both cameras side by side, 32 px high
    assert "_raw_step" not in robot.__dict__                  # the reused simulator goes on unfilmed
    if info.get("video"):
        import cv2
        cap = cv2.VideoCapture(info["video"])
        assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 10 // every
    assert json.loads((tmp_path / "rollout.json").read_text())["frames"] == 10 // every


def test_the_episode_page_shows_plans_batches_reports_and_verdicts_and_the_report_links_it(tmp_path):
    from motormind.evaluate.episode_page import write_page
    ep = tmp_path / "episodes" / "e1"
    ep.mkdir(parents=True)
    evs = [{"t": 0.1, "kind": "plan", "subgoals": [{"id": "s1", "description": "grasp the bowl",
                                                   "success_criterion": "held"}], "brain": "oracle"},
           {"t": 0.2, "kind": "vlm_call", "role": "executor", "latency_s": 0.5, "input_tokens": 10, "output_tokens": 5},
           {"t": 0.3, "kind": "batch", "batch": {"batch_id": "b1", "subgoal_id": "s1",
                                                 "commands": [{"op": "move", "direction": "down", "distance_mm": 40}]}},
           {"t": 0.9, "kind": "report", "batch_id": "b1", "status": "blocked",
            "results": [{"command": {"op": "move", "direction": "down", "distance_mm": 40}, "status": "blocked",
                         "reason": "contact"}]},
           {"t": 1.0, "kind": "verdict", "subgoal_id": "s1", "achieved": False, "evidence": "not held"}]
    (ep / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in evs))
    (ep / "summary.json").write_text(json.dumps({"suite": "libero_spatial", "task": 0, "init_state": 0,
                                                 "outcome": "step_budget", "instruction": "pick the bowl"}))
    (ep / "rollout.mp4").write_bytes(b"")
    write_page(ep)
    t = Tables()
    t.feed((ep / "episode.html").read_text())
    timeline = next(x for x in t.tables if x[0] == ["t s", "what", "who", "detail"])
    whats = [r[1] for r in timeline[1:]]
    assert whats == ["plan", "batch b1 (s1)", "report b1: blocked", "verdict s1: not achieved"]
    assert "move down distance_mm=40: blocked (contact)" in timeline[3][3]
    assert "<video src='rollout.mp4'" in (ep / "episode.html").read_text()
    write_reports([row("e1", "libero_spatial", 0, 0, False, str(ep))], tmp_path)
    t = Tables()
    t.feed((tmp_path / "report.html").read_text())
    assert "episodes/e1/episode.html" in t.links and "episodes/e1/rollout.mp4" in t.links


def test_eval_writes_its_provenance_and_the_rerun_keeps_the_first_date(tmp_path):
    out = tmp_path / "ev"
    cmd = [sys.executable, "-m", "motormind.cli", "eval", "--backend", "fake", "--tasks", "0", "--inits", "0-1",
           "--workers", "0", "--out", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    st = json.loads((out / "eval.json").read_text())["provenance"]
    assert st["command"].startswith("motormind eval --backend fake") and st["date"] == st["first_date"]
    assert "- command: motormind eval --backend fake" in (out / "report.md").read_text()


def test_one_ctrl_c_stops_eval_at_an_episode_boundary_with_a_report_and_the_rerun_resumes(tmp_path):
    import os
    import signal
    import time
    out = tmp_path / "ev"
    args = [sys.executable, "-m", "motormind.cli", "eval", "--backend", "fake", "--suites", "fake", "--tasks", "0-1",
            "--inits", "0-4", "--workers", "1", "--out", str(out), "--test-sleep", "0.5"]
    p = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         start_new_session=True)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if (out / "results.jsonl").exists() and (out / "results.jsonl").read_text().count("\n") >= 2:
            break
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGINT)             # as a terminal's Ctrl-C: the coordinator and its workers
    stdout, stderr = p.communicate(timeout=90)
    assert p.returncode == 130, stderr[-2000:]
    assert "Traceback" not in stderr and "SpawnProcess" not in stderr
    done = (out / "results.jsonl").read_text().count("\n")
    assert 2 <= done < 10
    assert f"stopped by Ctrl-C: {done} of 10 episodes finished" in stderr and "resume with: motormind eval" in stderr
    assert f"{done} episodes" in (out / "report.md").read_text() and (out / "report.html").exists()
    again = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert again.returncode == 0, again.stderr[-2000:]
    assert f"{done} already finished" in again.stderr
    keys = [json.loads(x)["key"] for x in (out / "results.jsonl").read_text().splitlines()]
    assert len(keys) == len(set(keys)) == 10


# codecs every browser plays (H.264 in MP4; VP8 / VP9 in WebM); mp4v (MPEG-4 Part 2, FMP4) plays in no Chromium
BROWSER_FOURCCS = {b"avc1", b"h264", b"H264", b"VP80", b"VP90"}


def test_the_rollout_is_written_in_a_codec_a_browser_plays_and_the_pages_show_it(tmp_path, capfd):
    import cv2

    from motormind.evaluate.episode_page import write_page
    from motormind.record import Rollout
    robot = Stepper()
    ro = Rollout(robot, every=1, px=32).attach()
    for _ in range(6):
        robot._raw_step(None)
    ep = tmp_path / "episodes" / "e1"
    ep.mkdir(parents=True)
    info = ro.write(ep)
    video = info.get("video")
    assert video, info
    cap = cv2.VideoCapture(video)
    fourcc = int(cap.get(cv2.CAP_PROP_FOURCC)).to_bytes(4, "little")
    assert fourcc in BROWSER_FOURCCS, f"{video}: {fourcc!r} plays in no browser"
    assert int(cap.get(cv2.CAP_PROP_FRAME_COUNT)) == 6
    assert "OpenCV: FFMPEG" not in capfd.readouterr().err            # the writer's probing says nothing
    name = video.rsplit("/", 1)[-1]
    assert name in ("rollout.mp4", "rollout.webm")
    (ep / "events.jsonl").write_text("")
    (ep / "summary.json").write_text(json.dumps({"outcome": "success", "rollout": info}))
    write_page(ep)
    assert f"<video src='{name}'" in (ep / "episode.html").read_text()
    write_reports([row("e1", "libero_spatial", 0, 0, True, str(ep))], tmp_path)
    t = Tables()
    t.feed((tmp_path / "report.html").read_text())
    assert f"episodes/e1/{name}" in t.links
