"""One LIBERO-PRO episode through the whole stack: the glue behind ``motormind run``."""
from __future__ import annotations

import datetime as _dt
import platform
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from .. import __version__
from ..record import Recorder
from ..vlm_calls import vlm_totals, vlm_trouble
from ..runner import EpisodeRunner
from .config import WALL_BUDGET_S, EpisodeConfig


@dataclass
class RunSpec:
    suite: str = "libero_spatial"
    task: int = 0
    init_state: int = 0
    seed: int = 0
    brain: str = "oracle"
    profile: str = "libero_panda"       # the robot profile (configs/robots/NAME.yaml) the Controller validates with
    max_steps: int | None = None
    wall_budget_s: float = WALL_BUDGET_S
    image_size: int | None = None       # render size, px (square); None: what the VLM config's family reads
                                        # well (render_size_for), 128 for the oracle
    images: bool = True
    out: str | None = None
    media: bool = True
    vlm: str | None = None              # --brain openai: a VLM config (configs/vlm/NAME.yaml or a path)
    vlm_set: tuple = ()                 # overrides of that config, "key=value" (dotted keys)
    mcap: str | None = None             # also record as MCAP (ROS 2 bag format); a relative path is in the run dir
    console: str | None = None          # attach the operator console: "PORT" or "HOST:PORT" (docs/console.md)
    console_token: str | None = None    # its control token (default: a new random one, printed)
    approval: bool = False              # the console starts in approval mode
    console_hold: bool = False          # keep the console up after the episode until Ctrl-C
    console_frame_hz: float = 2.0       # console frames per second mid-command (each render holds the simulator)
    interference: str | None = None     # an object moved mid-episode: "WHAT@WHEN" (evaluate/interference.py), None: off
    interference_shift_m: tuple | None = None   # its displacement range, m (lo, hi); None: evaluate/interference.py's
    video_every: int | None = None      # --videos: a rollout video, a frame every N control steps (record.Rollout),
                                        # and the episode page (episode.html); None: neither


def default_run_dir(spec: RunSpec, root: str = "runs") -> Path:
    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path(root) / f"{stamp}_{spec.suite}_t{spec.task}_i{spec.init_state}_{spec.brain}"


ORACLE_IMAGE_SIZE = 128                 # the oracle reads no pixels: images only for the record and the console


def render_size_for(spec: RunSpec) -> int:
    """The camera render size for ``spec``: as given, else the size the VLM config's model family
    works on (``grounding/image_sizing.py``: a Qwen2.5-VL config at 448 px renders 448, Gemma 3 896),
    so that nothing is upscaled on the way to the model."""
    if spec.image_size:
        return int(spec.image_size)
    if spec.brain == "openai":
        from ..grounding.image_sizing import render_size
        from ..brains.openai_brain import load_vlm_config
        cfg = load_vlm_config(spec.vlm or "openai", spec.vlm_set)
        return render_size(cfg.image_rules, cfg.image_size)
    return ORACLE_IMAGE_SIZE


def brain_config(spec: RunSpec):
    """The brain a run spec names, as the registry builds it (motormind/registry.py)."""
    from ..registry import BrainConfig
    return BrainConfig(spec.brain, vlm=spec.vlm or "openai", vlm_set=tuple(spec.vlm_set))


def robot_config(spec: RunSpec):
    """The LIBERO-PRO task a run spec names (sim/libero_pro/config.py)."""
    from motormind.sim.libero_pro.config import LiberoConfig
    return LiberoConfig(suite=spec.suite, task=spec.task, init_state=spec.init_state, seed=spec.seed,
                        image_size=render_size_for(spec), max_steps=spec.max_steps)


def make_brain(spec: RunSpec, robot, record=None):
    """The run's brain; a bad VLM config is an error naming --vlm."""
    from ..errors import ConfigError
    from ..registry import build_brain
    try:
        return build_brain(brain_config(spec), robot, robot.profile, record)
    except ConfigError as e:
        raise ConfigError(f"--vlm: {e}" if spec.brain == "openai" else f"--brain: {e}") from None


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


def interference_seed(spec: RunSpec) -> int:
    """The seed of an episode's interference (its moment, direction and distance): one per
    suite x task x init state x seed, the same in every ablation and brain."""
    import zlib
    return zlib.crc32(f"{spec.suite}/{spec.task}/{spec.init_state}/{spec.seed}".encode())


def _attach_console(spec: RunSpec, robot, rec: Recorder, progress, sock=None):
    from ..argtypes import split_host_port
    from ..console.session import ConsoleSession
    from ..errors import ConfigError
    from ..webserver import listen_for

    def bad(msg):
        return ConfigError(f"--console: {msg}")
    host, port = split_host_port(spec.console, bad)
    console = ConsoleSession(robot, host, port, spec.console_token, spec.approval, frames=spec.images,
                             frame_hz=spec.console_frame_hz, sock=sock or listen_for("--console", host, port))
    console.runtime.watch(rec)
    progress(console.banner())
    return console


def _hold() -> None:
    import threading
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass


def run_episode(spec: RunSpec, progress=None, config: EpisodeConfig | None = None, robot=None,
                brain_wrapper=None, console_sock=None) -> dict:
    """Run one episode; returns the summary dict (also written to RUN_DIR/summary.json).

    ``robot``: an open LiberoRobot of the same suite and task to reuse (it is reset to the spec's
    init state and left open); otherwise one is built and closed here. ``brain_wrapper(brain)``
    wraps the brain (the evaluation's noisy brain). ``console_sock``: the console's listening
    socket, bound by the command line before the simulation was built (``webserver.listen_for``)."""
    from ..profile import load_profile
    from ..registry import build_robot

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
        robot = build_robot(robot_config(spec), load_profile(spec.profile))
    else:
        if (robot.suite_name, robot.task_index) != (spec.suite, spec.task):
            raise ValueError(f"robot is {robot.suite_name}/{robot.task_index}, spec wants {spec.suite}/{spec.task}")
        robot.reset(spec.init_state, seed=spec.seed)
    rec = Recorder(run_dir)         # after the robot: a bad suite/task/init leaves no empty record
    base_brain = None
    mcap = None
    console = None
    frames = None
    try:
        if spec.console is not None:
            console = _attach_console(spec, robot, rec, progress, console_sock)
        if spec.mcap:
            from ..mcap_record import McapRecorder
            mcap = McapRecorder(Path(spec.mcap) if Path(spec.mcap).is_absolute() else run_dir / spec.mcap).attach(rec)
        instruction = robot.language_instruction
        versions = robot.versions()
        vtot = vlm_totals(rec)
        brain = base_brain = make_brain(spec, robot, rec)
        if brain_wrapper is not None:
            brain = brain_wrapper(brain)
        header = {"motormind": __version__, "python": platform.python_version(), "simulator": versions,
                  "suite": spec.suite, "task": spec.task, "init_state": spec.init_state, "seed": spec.seed,
                  "task_name": robot.task_name, "instruction": instruction, "instruction_source":
                  "env.language_instruction (BDDL)", "task_language": robot.task_language,
                  "brain": brain.name, "privileged": brain.privileged,
                  "step_budget": robot.budget, "image_size": robot.image_size, "profile": robot.profile.name,
                  "setup_s": round(time.monotonic() - t0, 3)}
        if getattr(base_brain, "cfg", None) is not None:  # the openai brain: its config, minus secrets
            header["vlm_config"] = base_brain.cfg.public()
        rec("episode_start", **header)
        progress(f"instruction: {instruction!r}  brain: {brain.name}"
                 f"{' (PRIVILEGED simulator state)' if brain.privileged else ''}  budget: {robot.budget} steps")
        cfg = replace(config or EpisodeConfig(), max_steps=robot.budget, wall_budget_s=spec.wall_budget_s,
                      images=spec.images)
        if console is not None:
            runner = console.runner(brain, instruction, rec, cfg, success_fn=robot.success,
                                    steps_fn=lambda: robot.steps_used, progress=progress)
        else:
            runner = EpisodeRunner(robot, brain, instruction, rec, cfg, success_fn=robot.success,
                                   steps_fn=lambda: robot.steps_used, progress=progress)
        if mcap:
            runner.observers.append(mcap.observe)
        if spec.video_every:
            from ..record import Rollout
            frames = Rollout(robot, spec.video_every).attach()
        itf = probe = None
        itf_missed, shift = "", ()
        if spec.interference:
            from ..evaluate.interference import SHIFT_M, attach, parse_setting
            setting = parse_setting(spec.interference)
            shift = tuple(spec.interference_shift_m or SHIFT_M)
            if setting is not None:       # PRIVILEGED: the evaluator's outside hand on the true scene
                itf, probe, itf_missed = attach(runner, robot.scene(), setting, interference_seed(spec), shift, rec,
                                                lambda: robot.steps_used)
        result = runner.run()
        obs = robot.observe(images=spec.images)
        if obs.images:
            rec.frame("end", obs.images)
        if mcap:
            mcap.observe("end", obs)
        summary = {**header, **result.to_json(), "vlm_tokens": {k: runner.vlm[k] for k in
                                                                 ("input_tokens", "output_tokens")},
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
        if frames is not None:
            summary["rollout"] = frames.write(run_dir)
        rec("episode_end", **{k: summary[k] for k in ("success", "outcome", "reason", "steps", "wall_s")})
        if spec.interference:
            summary["interference"] = {
                "setting": spec.interference, "shift_m": list(shift), "privileged": True,
                "event": itf.event.to_json() if itf is not None and itf.event else None,
                "missed": itf_missed or (itf.missed if itf is not None else ""),
                "measures": probe.measures(bool(result.success)) if probe is not None else None}
            rec("interference_measures", **summary["interference"])
        if spec.media:
            summary["media"] = rec.write_media()
        rec.write_json("summary.json", summary)
        if spec.video_every:
            from ..evaluate.episode_page import write_page
            summary["episode_page"] = str(write_page(run_dir))
        if console is not None:
            console.detach(f"the episode ended: {result.outcome}")
            if spec.console_hold:
                progress(f"episode over; the console stays at {console.url} (Ctrl-C to quit)")
                _hold()
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
