"""``open_episode(setup)``: the one function that opens an episode, runs it and closes it, for
``motormind run``, ``motormind eval`` (LIBERO-PRO and the fake) and the console: the robot (built,
or an open one reset), the record, the brain (with the evaluation's gates and noisy brain), the
runner and the attachments of the setup (session/setup.py); the summary (RUN_DIR/summary.json).
The episode page of ``--videos`` (RUN_DIR/episode.html) is the caller's: evaluate/episode_page.py."""
from __future__ import annotations

import datetime as _dt
import platform
import sys
import time
from pathlib import Path

from .. import __version__
from ..record import Recorder
from ..vlm_calls import vlm_totals, vlm_trouble
from ..runner import EpisodeRunner
from .attach import attach_interference, attach_mcap, attach_rollout, hold, interference_summary
from .tasks import task_of

# the roles the episode waits for; the Monitor and the Memory answer on their own threads, beside motion
BLOCKING_ROLES = ("planner", "executor", "verifier")


def timing(result: dict, tot: dict) -> dict:
    """The episode's wall time split so it adds up: VLM time the loop waited for (the blocking
    roles' calls), motion (the reports' durations), and the rest (overhead: rendering, marking,
    validation, bookkeeping). The Monitor's and the Memory's calls run beside the others and are
    given apart (``vlm_background_s``)."""
    by_role = tot.get("latency_by_role") or {}
    blocking = sum(v for r, v in by_role.items() if r in BLOCKING_ROLES)
    background = sum(v for r, v in by_role.items() if r not in BLOCKING_ROLES)
    wall, motion = float(result.get("wall_s", 0.0)), float(result.get("motion_s", 0.0))
    return {"vlm_s": round(blocking, 3), "vlm_background_s": round(background, 3), "motion_s": round(motion, 3),
            "overhead_s": round(max(0.0, wall - blocking - motion), 3)}


def run_dir_for(setup, task, progress, root: str = "runs") -> Path:
    """The setup's run directory (default runs/<time>_<task>_<brain>); one that holds an episode
    already gets a suffix: two episodes never mix in one record."""
    if setup.out:
        run_dir = Path(setup.out)
    else:
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        run_dir = Path(root) / f"{stamp}_{task.label}_{setup.brain_name}"
    if (run_dir / "events.jsonl").exists():
        k = 2
        while (run_dir.parent / f"{run_dir.name}_{k}" / "events.jsonl").exists():
            k += 1
        run_dir = run_dir.parent / f"{run_dir.name}_{k}"
        progress(f"{setup.out} already holds an episode; writing to {run_dir}")
    return run_dir


def make_brain(setup, task, robot, record=None, gates=None):
    """(the brain the roles ask, the brain built): built by the registry (motormind/registry.py) or
    the task's own; through the worker's ``gates``; inside the noisy brain when the setup has noise.
    A bad VLM config is an error naming --vlm."""
    from ..errors import ConfigError
    from ..registry import build_brain
    base = task.brain(robot, record) if setup.brain is None else None
    if base is None:
        try:
            base = build_brain(setup.brain, robot, robot.profile, record)
        except ConfigError as e:
            raise ConfigError(f"--vlm: {e}" if setup.brain.type == "openai" else f"--brain: {e}") from None
    base.use_gates(gates)
    if not setup.noise:
        return base, base
    from ..brains.noise_profile import profile_from_items
    from ..brains.noisy import NoisyBrain
    return NoisyBrain(base, profile_from_items(setup.noise), seed=task.noise_seed()), base


def _header(task_header: dict, robot, brain, base_brain, t0: float) -> dict:
    """The record's ``episode_start``: versions, the task's facts, the brain, budgets, the setup time."""
    header = {"motormind": __version__, "python": platform.python_version(), **task_header,
              "brain": brain.name, "privileged": brain.privileged,
              "step_budget": getattr(robot, "budget", None), "image_size": getattr(robot, "image_size", None),
              "profile": robot.profile.name, "setup_s": round(time.monotonic() - t0, 3)}
    if getattr(base_brain, "cfg", None) is not None:  # the openai brain: its config, minus secrets
        header["vlm_config"] = base_brain.cfg.public()
    return header


def _summary(header: dict, result, vlm: dict, vtot: dict, t0: float, run_dir: Path, rec, mcap, brain,
             base_brain) -> dict:
    """The episode's summary (summary.json): the header, the result, the VLM calls and the timing split."""
    summary = {**header, **result.to_json(), "vlm_tokens": {k: vlm[k] for k in ("input_tokens", "output_tokens")},
               "vlm": dict(vtot),
               # one count of calls everywhere: every recorded call, the Memory's last flush included
               "vlm_calls": vtot["calls"], "vlm_trouble": vlm_trouble(vtot), **timing(result.to_json(), vtot),
               "episode_wall_s": round(time.monotonic() - t0, 3), "run_dir": str(run_dir),
               "events": rec.counts, **({"mcap": str(mcap.path)} if mcap else {}),
               # who answered each role, as the served endpoint said (manual, auto:no-cancel, oracle)
               **({"answered_by": dict(base_brain.answered_by)} if getattr(base_brain, "answered_by", None)
                  else {})}
    counts = getattr(brain, "counts", None)     # the noisy brain: the errors it injected
    if callable(counts) and brain is not base_brain:
        summary["noise_counts"] = counts()
    return summary


def open_episode(setup, progress=None, robot=None, gates=None, console=None) -> dict:
    """Run the episode ``setup`` describes; returns its summary (also RUN_DIR/summary.json).

    ``robot``: an open robot of the same task to reuse (reset to the setup's init state and left
    open); otherwise one is built and closed here. ``gates``: the evaluation worker's per-endpoint
    gates (brains/gate.py). ``console(robot, record, progress)``: opens the operator console the
    setup's ``console`` describes (console/session.py ``open_console``, or the console host's own),
    which runs the episode under the operator's eye (``runner``), is told when it ended (``detach``)
    and closed (``close``)."""
    from ..profile import load_profile
    from ..registry import build_robot

    task = task_of(setup)
    setup.faults.apply(task.init_state)
    progress = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    run_dir = run_dir_for(setup, task, progress)
    t0 = time.monotonic()
    progress(f"building {task.describe} ...")
    own = robot is None
    if own:
        robot = build_robot(setup.robot, load_profile(setup.profile))
    else:
        task.reuse(robot)
    rec = Recorder(run_dir)         # after the robot: a bad suite/task/init leaves no empty record
    opener, console = console, None
    base_brain = mcap = frames = None
    try:
        if hasattr(task, "start"):      # the task's own first event (an xArm6 cell trial's trial_start)
            task.start(rec)
        if opener is not None:
            console = opener(robot, rec, progress)
        mcap = attach_mcap(setup.mcap, run_dir, rec)
        instruction = task.instruction(robot)
        task_header = task.header(robot)
        vtot = vlm_totals(rec)
        brain, base_brain = make_brain(setup, task, robot, rec, gates)
        header = _header(task_header, robot, brain, base_brain, t0)
        rec("episode_start", **header)
        budget = setup.episode.max_steps
        progress(f"instruction: {instruction!r}  brain: {brain.name}"
                 f"{' (PRIVILEGED simulator state)' if brain.privileged else ''}  budget: {budget} steps")
        success_fn, steps_fn = task.judge(robot)
        kw = {"success_fn": success_fn, **({"steps_fn": steps_fn} if steps_fn else {}), "progress": progress}
        if console is not None:
            runner = console.runner(brain, instruction, rec, setup.episode, **kw)
        else:
            runner = EpisodeRunner(robot, brain, instruction, rec, setup.episode, **kw)
        if mcap:
            runner.observers.append(mcap.observe)
        # the task's own film and outside hand where it has them (the xArm6 cell's: its clock, its scene)
        frames = task.film() if hasattr(task, "film") else attach_rollout(setup.video_every, robot)
        interfere = getattr(task, "interfere", attach_interference)
        itf = interfere(setup.interference, task, runner, robot, rec) if setup.interference else None
        result = runner.run()
        if hasattr(task, "ended"):      # the run is over: a task timing it on its own clock stops it here
            task.ended()
        obs = robot.observe(images=setup.episode.images)
        if obs.images:
            rec.frame("end", obs.images)
        if mcap:
            mcap.observe("end", obs)
        summary = _summary(header, result, runner.vlm, vtot, t0, run_dir, rec, mcap, brain, base_brain)
        if frames is not None:
            summary["rollout"] = frames.write(run_dir)
        rec("episode_end", **{k: summary[k] for k in ("success", "outcome", "reason", "steps", "wall_s")})
        if itf is not None:
            summary["interference"] = interference_summary(setup.interference, itf, bool(result.success))
            rec("interference_measures", **summary["interference"])
        if hasattr(task, "finish"):     # the task's own last word (a cell trial's placement error, trial_end)
            summary.update(task.finish(rec, summary))
        if setup.media:
            summary["media"] = rec.write_media()
        rec.write_json("summary.json", summary)
        if console is not None:
            console.detach(f"the episode ended: {result.outcome}")
            if setup.console is not None and setup.console.hold:
                progress(f"episode over; the console stays at {console.url} (Ctrl-C to quit)")
                hold()
        return summary
    finally:
        if frames is not None:
            frames.detach()               # a reused simulator goes on unfilmed
        if console is not None:
            console.close()
        if mcap:
            mcap.close()
        if base_brain is not None:
            base_brain.close()     # an in-process serve-brain stops before the simulation goes
        rec.close()
        if own:
            robot.close()
