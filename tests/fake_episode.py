"""Whole episodes on the kinematic fake arm, every role answered by serve-brain's toy oracle through
the real openai client (imported as ``fake_episode``: pytest puts tests/ on sys.path). The fault
tests (test_faults.py) and the quirk tests (test_quirks.py) share it."""
import json

import numpy as np

from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
from motormind.vlm_calls import vlm_totals
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner
from motormind.schemas import EXECUTOR, validate
from motormind.serve.reach import ReachBrain
from motormind.serve.server import BrainServer


class GuardRobot(FakeRobot):
    """A FakeRobot that checks every motion it is handed: finite, and within one command's limits."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.violations = []

    def execute(self, motion, estop):
        lim = self.profile.limits
        tgt = np.asarray(motion.target_pos_m, dtype=float)
        if not np.all(np.isfinite(tgt)) or not np.all(np.isfinite(motion.target_rot)):
            self.violations.append(f"non-finite target {motion.to_json()}")
        elif np.linalg.norm(tgt - self.pos) * 1000 > lim.max_move_mm + 1.0:
            self.violations.append(f"move of {np.linalg.norm(tgt - self.pos) * 1000:.0f} mm {motion.to_json()}")
        return super().execute(motion, estop)


def run_fake(tmp_path, faults=None, *, quirks=None, timeout_s=5.0, max_batches=24, max_replans=6,
             realtime=False, sets=(), family="generic"):
    """-> (EpisodeResult, robot, events, server, vlm totals)."""
    rb = ReachBrain()
    rec = Recorder(tmp_path)
    tot = vlm_totals(rec)
    srv = BrainServer(rb, faults=faults, quirks=quirks, on_event=rec, family=family).start()
    cfg = load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "send_context=true",
                                           "privileged=true", f"timeout_s={timeout_s}", "backoff_s=0.01", *sets])
    brain = OpenAIBrain(cfg, on_event=rec)
    robot = GuardRobot(realtime=realtime)
    try:
        res = EpisodeRunner(robot, brain, "reach the target and close the gripper", rec,
                            EpisodeConfig(max_batches=max_batches, max_replans=max_replans),
                            success_fn=lambda: rb.success(robot)).run()
    finally:
        brain.close()
        srv.close()
        rec.close()
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    return res, robot, events, srv, tot


def check_invariants(res, robot, events):
    """Nothing that failed validation moved the robot; the episode ended with a reason."""
    assert robot.violations == []
    assert res.outcome and res.reason
    for e in events:
        if e["kind"] == "batch":                      # only schema-valid answers ever became a batch
            validate({k: v for k, v in e["batch"].items()}, EXECUTOR)
        if e["kind"] == "report" and e["status"] == "rejected":
            assert all(r["steps"] == 0 for r in e["results"])      # a rejected batch moved nothing
    for e in events:                                  # an answer that failed its check was never used
        if e["kind"] == "vlm_call" and e["role"] == "executor" and not e["ok"]:
            assert not any(b["kind"] == "batch" and b["batch"].get("rationale") and
                           json.dumps(b["batch"]["commands"]) in e["response"] for b in events)


def kinds(events, kind):
    return [e for e in events if e["kind"] == kind]
