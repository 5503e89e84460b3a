"""What an evaluation runs: the grid of episodes, each with a stable key, and one episode's run."""
from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from ..episode.config import ABLATIONS as _SWITCHES
from ..episode.config import WALL_BUDGET_S, EpisodeConfig
from ..interference_setting import SHIFT_M
from ..session.setup import TestFaults

ABLATIONS = ("full", *(f"no_{s}" for s in _SWITCHES))     # full, no_replan, no_planner, no_monitor, ...

# the backends an evaluation runs on: the brains each runs (the first is the default; a row's
# ``brain`` is the brain that ran) and the suite it runs when none is named
BRAINS = {"libero": ("oracle", "noisy", "openai"), "fake": ("scripted", "openai")}
DEFAULT_SUITE = {"libero": "libero_spatial", "fake": "fake"}


def noise_key(items) -> str:
    """A noise profile's items as the job key writes them (every setting: the key must tell profiles apart)."""
    return ",".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in items) or "-"


def short_key(row: dict) -> str:
    """A row's key for a person: the noise profile by its name (``noise=seed_calibrated``), not its
    every setting (about 200 characters); the key itself (results.jsonl, resume) keeps them all."""
    key, noise = str(row.get("key", "")), row.get("noise") or {}
    if not noise:
        return key
    name = noise.get("name") or f"{len(noise)} setting(s)"
    return key.replace(f"/{noise_key(noise.items())}", f"/noise={name}", 1)


@dataclass(frozen=True)
class Job:
    suite: str
    task: int
    init_state: int
    seed: int = 0
    brain: str = "oracle"
    ablation: str = "full"
    noise: tuple = ()                    # a noise profile's items (brains/noise_profile.py): the noisy brain
    max_steps: int | None = None         # None: the suite's standard budget
    wall_budget_s: float = WALL_BUDGET_S
    images: bool = True
    backend: str = "libero"              # "libero", or "fake" (the kinematic fake, for tests of the machinery)
    vlm: str | None = None               # brain openai: the VLM config (configs/vlm/NAME.yaml or a path)
    vlm_set: tuple = ()                  # brain openai: overrides of it, "key=value"
    attempt: int = 0
    interference: str = "off"            # "WHAT@WHEN" (session/interference.py) or "off"
    interference_shift_m: tuple = SHIFT_M
    video_every: int = 0                 # --videos: a rollout video, a frame every N control steps (0: none)
    faults: TestFaults = field(default_factory=TestFaults, compare=False)   # --test-*: not in the key nor the row

    @property
    def key(self) -> str:
        noise = noise_key(self.noise)
        brain = f"{self.brain}:{Path(self.vlm).stem}" if self.vlm else self.brain    # the VLM config's name
        key = f"{self.suite}/{self.task}/{self.init_state}/s{self.seed}/{brain}/{self.ablation}/{noise}"
        if self.interference != "off":       # (keys without interference are those of earlier runs)
            key += f"/itf={self.interference}"
            if tuple(self.interference_shift_m) != tuple(SHIFT_M):
                key += ":" + "-".join(f"{v * 1000:g}" for v in self.interference_shift_m) + "mm"
        return key

    def to_json(self) -> dict:
        d = asdict(self)
        del d["faults"]
        d["noise"] = dict(self.noise)
        d["interference_shift_m"] = list(self.interference_shift_m)
        d["key"] = self.key
        return d


def config_for(job: Job) -> EpisodeConfig:
    if job.ablation == "full":
        return EpisodeConfig()
    return EpisodeConfig(**{job.ablation.removeprefix("no_"): False})


def job_setup(job: Job, run_dir: str):
    """The episode a job names, as every episode is set up (motormind/session/setup.py): the job's
    fields are its key and its row's columns; its setup is this."""
    from ..errors import ConfigError
    from ..registry import BrainConfig
    from ..session.setup import EpisodeSetup, InterferenceSpec, libero_setup
    attached = dict(out=run_dir, media=bool(job.video_every), video_every=job.video_every or None, noise=job.noise,
                    faults=job.faults, interference=None if job.interference == "off" else
                    InterferenceSpec(job.interference, tuple(job.interference_shift_m)))
    brain = BrainConfig(job.brain, vlm=job.vlm or "openai", vlm_set=tuple(job.vlm_set)) \
        if job.brain in ("oracle", "openai") else None
    if job.backend == "libero":
        return libero_setup(job.suite, job.task, job.init_state, job.seed, brain, job.max_steps, None, config_for(job),
                            job.wall_budget_s, job.images, **attached)
    if job.brain not in BRAINS["fake"]:              # eval's check_grid and brain check refuse it first
        raise ConfigError(f"--brain: {job.brain!r} does not run on the fake backend (it runs: "
                          f"{', '.join(BRAINS['fake'])})")
    from ..registry import robot_config
    task, batches = fake_task(job)
    return EpisodeSetup(robot=robot_config({"type": job.backend}), brain=brain, profile="fake", task=task,
                        episode=replace(config_for(job), max_batches=batches), **attached)


def fake_task(job: Job):
    """The kinematic fake's task for a job, and its batch budget: with the scripted brain, moving
    forward a distance picked from the seed, task and init state (failing on a third of the init
    states); with ``brain openai`` the reach task of ``serve-brain --backend reach``, every role call
    through the real openai client to the VLM config's endpoint (``--vlm``)."""
    import random

    from ..session.tasks import MoveTask, ReachTask
    ids = dict(suite=job.suite, task=job.task, init_state=job.init_state, seed=job.seed)
    if job.brain == "openai":
        return ReachTask(**ids), 12
    dx = random.Random(f"{job.seed}/{job.task}/{job.init_state}").choice([10, 20, 30, 40])
    return MoveTask(**ids, dx_mm=dx, fail=job.init_state % 3 == 2), 3


def run_job(job: Job, run_dir: str, robot_cache: dict | None = None, gates=None) -> dict:
    """Run one episode; return its result row. ``robot_cache`` keeps one open simulator per
    episode slot so consecutive episodes of the same task reuse it (a reset instead of a rebuild).
    ``gates``: the worker's per-endpoint gates (``brains/gate.py``), shared by its episodes."""
    from ..session.open import open_episode
    started = time.time()
    setup = job_setup(job, run_dir)
    robot = None
    if robot_cache is not None and job.backend == "libero":
        from ..profile import load_profile
        from ..registry import build_robot
        cached = robot_cache.get("robot")
        # same seed too: a simulator pins its fixtures' draw per seed at its first reset with it
        # (sim/libero_pro/backend.py _pin_fixtures), so a new seed gets a fresh simulator
        if cached is not None and (cached.suite_name, cached.task_index, cached.seed) == (job.suite, job.task, job.seed):
            robot = cached
        else:
            if cached is not None:
                cached.close()
            robot = build_robot(setup.robot, load_profile(setup.profile))
            robot_cache["robot"] = robot
    t0 = time.monotonic()
    s = open_episode(setup, progress=lambda m: None, robot=robot, gates=gates)
    if setup.video_every:
        from .episode_page import write_page
        write_page(s["run_dir"])
    return {**_row(job, s, time.monotonic() - t0), "started_at": round(started, 3), "ended_at": round(time.time(), 3)}


def _row(job: Job, s: dict, wall: float) -> dict:
    from .. import __version__
    vlm_s, motion_s = float(s.get("vlm_s", 0.0)), float(s.get("motion_s", 0.0))
    noise = s.get("noise_counts") or {}
    return {**job.to_json(), "success": bool(s["success"]), "outcome": s["outcome"], "reason": s["reason"],
            "fault_kind": s.get("fault_kind"),
            "steps": s["steps"], "step_budget": s.get("step_budget"), "batches": s["batches"],
            "replans": s["replans"], "verifier_rejections": s["verifier_rejections"],
            "controller_rejections": s["controller_rejections"], "vlm_calls": s["vlm_calls"],
            "vlm_tokens": s.get("vlm_tokens", {}), "vlm_cost_usd": _cost(s),
            # the prompt tokens the server said it served from its prefix cache (0 where it says nothing)
            "vlm_cached_tokens": int((s.get("vlm") or {}).get("cached_tokens", 0) or 0), "vlm_s": round(vlm_s, 3), "motion_s": round(motion_s, 3),
            "episode_s": round(float(s["wall_s"]), 3), "job_s": round(wall, 3),
            "overhead_s": round(max(0.0, float(s["wall_s"]) - vlm_s - motion_s), 3),
            "vlm_background_s": s.get("vlm_background_s"), "vlm_trouble": s.get("vlm_trouble") or {},
            "motormind": s.get("motormind") or __version__,
            # the noisy brain: errors injected per kind, and those still in force when the episode ended
            **({"noise_injected": noise.get("injected", {}), "noise_active_at_end": noise.get("active_at_end", [])}
               if noise else {}),
            "brain_label": s.get("brain"), "privileged": bool(s.get("privileged")),
            "answered_by": s.get("answered_by"),
            # Executor calls made ahead (episode/overlap.py): asked / used / dropped, the dropped calls' cost
            **({"overlap": s["overlap"]} if s.get("overlap") else {}),
            "instruction": s.get("instruction", ""), "simulator": s.get("simulator", {}),
            "run_dir": s.get("run_dir", ""), "pid": os.getpid(), "slot": threading.current_thread().name,
            **_interference_cols(s.get("interference"))}


def _interference_cols(itf: dict | None) -> dict:
    """The row's interference columns (PRIVILEGED, the evaluator's): the event, why it did not
    happen, and its measures (session/interference.py ``InterferenceProbe``)."""
    if not itf:
        return {}
    return {"interference_event": itf.get("event"), "interference_missed": itf.get("missed", ""),
            "interference_measures": itf.get("measures")}


def _cost(s: dict) -> float | None:
    """The episode's VLM cost, USD, when its VLM config gives prices (None: no price configured)."""
    if not ((s.get("vlm_config") or {}).get("prices")):
        return None
    return (s.get("vlm") or {}).get("cost_usd")


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
