"""What an evaluation runs: the grid of episodes, each with a stable key, and one episode's run."""
from __future__ import annotations

import os
import sys
import time
from dataclasses import asdict, dataclass

from ..episode.config import ABLATIONS as _SWITCHES
from ..episode.config import WALL_BUDGET_S, EpisodeConfig
from .interference import SHIFT_M

ABLATIONS = ("full", *(f"no_{s}" for s in _SWITCHES))     # full, no_replan, no_planner, no_monitor, ...


@dataclass(frozen=True)
class Job:
    suite: str
    task: int
    init_state: int
    seed: int = 0
    brain: str = "oracle"
    ablation: str = "full"
    noise: tuple = ()                    # ((kind, rate), ...) for the noisy brain
    max_steps: int | None = None         # None: the suite's standard budget
    wall_budget_s: float = WALL_BUDGET_S
    images: bool = True
    backend: str = "libero"              # "libero", or "fake" (the kinematic fake, for tests of the machinery)
    attempt: int = 0
    interference: str = "off"            # "WHAT@WHEN" (evaluate/interference.py) or "off"
    interference_shift_m: tuple = SHIFT_M

    @property
    def key(self) -> str:
        noise = ",".join(f"{k}={v:g}" for k, v in self.noise) or "-"
        key = f"{self.suite}/{self.task}/{self.init_state}/s{self.seed}/{self.brain}/{self.ablation}/{noise}"
        if self.interference != "off":       # (keys without interference are those of earlier runs)
            key += f"/itf={self.interference}"
            if tuple(self.interference_shift_m) != tuple(SHIFT_M):
                key += ":" + "-".join(f"{v * 1000:g}" for v in self.interference_shift_m) + "mm"
        return key

    def to_json(self) -> dict:
        d = asdict(self)
        d["noise"] = dict(self.noise)
        d["interference_shift_m"] = list(self.interference_shift_m)
        d["key"] = self.key
        return d


def config_for(job: Job) -> EpisodeConfig:
    cfg = EpisodeConfig()
    if job.ablation != "full":
        setattr(cfg, job.ablation.removeprefix("no_"), False)
    return cfg


def run_job(job: Job, run_dir: str, robot_cache: dict | None = None) -> dict:
    """Run one episode; return its result row. ``robot_cache`` keeps one open simulator per worker
    so consecutive episodes of the same task reuse it (a reset instead of a rebuild)."""
    if job.backend == "fake":
        return _run_fake(job, run_dir)
    from ..episode.run import RunSpec, robot_config, run_episode
    from ..profile import load_profile
    from ..registry import build_robot
    spec = RunSpec(suite=job.suite, task=job.task, init_state=job.init_state, seed=job.seed, brain=job.brain,
                   max_steps=job.max_steps, wall_budget_s=job.wall_budget_s, images=job.images, out=run_dir,
                   media=False, interference=None if job.interference == "off" else job.interference,
                   interference_shift_m=tuple(job.interference_shift_m))
    robot = None
    if robot_cache is not None:
        cached = robot_cache.get("robot")
        if cached is not None and (cached.suite_name, cached.task_index) == (job.suite, job.task):
            robot = cached
        else:
            if cached is not None:
                cached.close()
            robot = build_robot(robot_config(spec), load_profile(spec.profile))
            robot_cache["robot"] = robot
    wrapper = None
    if job.noise:
        from ..brains.noisy import NoisyBrain

        def wrapper(brain):
            return NoisyBrain(brain, dict(job.noise), seed=job.seed * 1000003 + job.init_state * 101 + job.task)
    t0 = time.monotonic()
    s = run_episode(spec, progress=lambda m: None, config=config_for(job), robot=robot, brain_wrapper=wrapper)
    return _row(job, s, time.monotonic() - t0)


def _row(job: Job, s: dict, wall: float) -> dict:
    vlm_s, motion_s = float(s.get("vlm_s", 0.0)), float(s.get("motion_s", 0.0))
    return {**job.to_json(), "success": bool(s["success"]), "outcome": s["outcome"], "reason": s["reason"],
            "fault_kind": s.get("fault_kind"),
            "steps": s["steps"], "step_budget": s.get("step_budget"), "batches": s["batches"],
            "replans": s["replans"], "verifier_rejections": s["verifier_rejections"],
            "controller_rejections": s["controller_rejections"], "vlm_calls": s["vlm_calls"],
            "vlm_tokens": s.get("vlm_tokens", {}), "vlm_s": round(vlm_s, 3), "motion_s": round(motion_s, 3),
            "episode_s": round(float(s["wall_s"]), 3), "job_s": round(wall, 3),
            "overhead_s": round(max(0.0, float(s["wall_s"]) - vlm_s - motion_s), 3),
            "brain_label": s.get("brain"), "privileged": bool(s.get("privileged")),
            "instruction": s.get("instruction", ""), "simulator": s.get("simulator", {}),
            "run_dir": s.get("run_dir", ""), "pid": os.getpid(),
            **_interference_cols(s.get("interference"))}


def _interference_cols(itf: dict | None) -> dict:
    """The row's interference columns (PRIVILEGED, the evaluator's): the event, why it did not
    happen, and its measures (evaluate/interference.py ``InterferenceProbe``)."""
    if not itf:
        return {}
    return {"interference_event": itf.get("event"), "interference_missed": itf.get("missed", ""),
            "interference_measures": itf.get("measures")}


def _run_fake(job: Job, run_dir: str) -> dict:
    """The same machinery on the kinematic fake with a scripted brain: fast, for tests of
    resume / workers / reports. Its 'task' is reaching a target picked from the seed and init state."""
    import random

    from ..brains.scripted import ScriptedBrain
    from ..profile import load_profile
    from ..record import Recorder
    from ..registry import build_robot, robot_config
    from ..runner import EpisodeRunner
    rng = random.Random(f"{job.seed}/{job.task}/{job.init_state}")
    dx = rng.choice([10, 20, 30, 40])
    if os.environ.get("MOTORMIND_FAKE_JOB_SLEEP"):
        time.sleep(float(os.environ["MOTORMIND_FAKE_JOB_SLEEP"]))
    crash = os.environ.get("MOTORMIND_FAKE_CRASH_ONCE")      # a marker file: kill this worker once
    if crash and job.init_state == 1 and not os.path.exists(crash):
        open(crash, "w").close()
        os._exit(3)
    robot = build_robot(robot_config({"type": "fake"}), load_profile("fake"))
    x0 = float(robot.pos[0])
    plan = {"subgoals": [{"id": "s1", "description": f"move {dx} mm forward", "success_criterion": "moved"}]}
    fail = job.init_state % 3 == 2           # a deterministic share of failures
    batch = {"commands": [{"op": "move", "direction": "back" if fail else "forward", "distance_mm": dx},
                          {"op": "done"}]}
    brain = ScriptedBrain({"planner": [plan], "executor": [batch]}, label="scripted")
    rec = Recorder(run_dir)
    t0 = time.monotonic()
    cfg = config_for(job)
    cfg.max_batches = 3
    res = EpisodeRunner(robot, brain, "reach", rec, cfg,
                        success_fn=lambda: robot.pos[0] - x0 > dx / 1000 - 0.002).run()
    rec.close()
    s = {**res.to_json(), "step_budget": None, "instruction": f"move {dx} mm forward", "simulator": {"fake": True},
         "run_dir": run_dir}
    return _row(job, s, time.monotonic() - t0)


def grid(suites, tasks, inits, seeds=(0,), brain="oracle", ablations=("full",), noise=(), interference=("off",),
         **kw) -> list[Job]:
    """Episodes ordered so consecutive ones share a task (a worker then reuses its simulator)."""
    jobs = []
    for s in suites:
        for t in tasks:
            for ab in ablations:
                for itf in interference:
                    for seed in seeds:
                        for i in inits:
                            jobs.append(Job(s, t, i, seed, brain, ab, tuple(sorted(noise)), interference=itf, **kw))
    return jobs


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
