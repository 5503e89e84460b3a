"""One LIBERO-PRO episode through the whole stack: the glue behind ``motormind run``."""
from __future__ import annotations

import datetime as _dt
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from . import __version__
from .record import Recorder
from .runner import EpisodeConfig, EpisodeRunner


@dataclass
class RunSpec:
    suite: str = "libero_spatial"
    task: int = 0
    init_state: int = 0
    seed: int = 0
    brain: str = "oracle"
    max_steps: int | None = None
    wall_budget_s: float = 900.0
    image_size: int = 128
    images: bool = True
    out: str | None = None
    media: bool = True


def default_run_dir(spec: RunSpec, root: str = "runs") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stamp}_{spec.suite}_t{spec.task}_i{spec.init_state}_{spec.brain}"


def make_brain(name: str, robot, profile):
    if name == "oracle":
        from .brains.oracle import OracleBrain
        return OracleBrain(robot.scene(), profile)
    raise SystemExit(f"--brain: unknown brain {name!r} (available here: oracle)")


def run_episode(spec: RunSpec, progress=None, config: EpisodeConfig | None = None, robot=None,
                brain_wrapper=None) -> dict:
    """Run one episode; returns the summary dict (also written to RUN_DIR/summary.json).

    ``robot``: an open LiberoRobot of the same suite and task to reuse (it is reset to the spec's
    init state and left open); otherwise one is built and closed here. ``brain_wrapper(brain)``
    wraps the brain (the evaluation's noisy brain)."""
    from .sim.libero_pro.backend import LiberoRobot   # lazy: the core does not import the simulator

    progress = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    run_dir = Path(spec.out) if spec.out else default_run_dir(spec)
    if (run_dir / "events.jsonl").exists():     # never mix two episodes in one record
        k = 2
        while (run_dir.parent / f"{run_dir.name}_{k}" / "events.jsonl").exists():
            k += 1
        run_dir = run_dir.parent / f"{run_dir.name}_{k}"
        progress(f"{spec.out} already holds an episode; writing to {run_dir}")
    t0 = time.monotonic()
    progress(f"building {spec.suite} task {spec.task} init state {spec.init_state} ...")
    own = robot is None
    if own:
        robot = LiberoRobot(spec.suite, spec.task, spec.init_state, seed=spec.seed, image_size=spec.image_size,
                            max_env_steps=spec.max_steps)
    else:
        if (robot.suite_name, robot.task_index) != (spec.suite, spec.task):
            raise ValueError(f"robot is {robot.suite_name}/{robot.task_index}, spec wants {spec.suite}/{spec.task}")
        robot.reset(spec.init_state, seed=spec.seed)
    rec = Recorder(run_dir)         # after the robot: a bad suite/task/init leaves no empty record
    try:
        instruction = robot.language_instruction
        versions = robot.versions()
        brain = make_brain(spec.brain, robot, robot.profile)
        if brain_wrapper is not None:
            brain = brain_wrapper(brain)
        header = {"motormind": __version__, "python": platform.python_version(), "simulator": versions,
                  "suite": spec.suite, "task": spec.task, "init_state": spec.init_state, "seed": spec.seed,
                  "task_name": robot.task_name, "instruction": instruction, "instruction_source":
                  "env.language_instruction (BDDL)", "task_language": robot.task_language,
                  "brain": brain.name, "privileged": brain.privileged,
                  "step_budget": robot.budget, "image_size": spec.image_size, "profile": robot.profile.name,
                  "setup_s": round(time.monotonic() - t0, 3)}
        rec("episode_start", **header)
        progress(f"instruction: {instruction!r}  brain: {brain.name}"
                 f"{' (PRIVILEGED simulator state)' if brain.privileged else ''}  budget: {robot.budget} steps")
        cfg = config or EpisodeConfig()
        cfg.max_steps = robot.budget
        cfg.wall_budget_s = spec.wall_budget_s
        cfg.images = spec.images
        runner = EpisodeRunner(robot, brain, instruction, rec, cfg, success_fn=robot.success,
                               steps_fn=lambda: robot.steps_used, progress=progress)
        result = runner.run()
        if result.outcome == "fault" and "budget_exhausted" in result.reason:
            result.outcome = "step_budget"
        obs = robot.observe(images=spec.images)
        if obs.images:
            rec.frame("end", obs.images)
        summary = {**header, **result.to_json(), "vlm_tokens": {k: runner.vlm[k] for k in
                                                                 ("input_tokens", "output_tokens")},
                   "episode_wall_s": round(time.monotonic() - t0, 3), "run_dir": str(run_dir),
                   "events": rec.counts}
        rec("episode_end", **{k: summary[k] for k in ("success", "outcome", "reason", "steps", "wall_s")})
        if spec.media:
            summary["media"] = rec.write_media()
        rec.write_json("summary.json", summary)
        return summary
    finally:
        rec.close()
        if own:
            robot.close()
