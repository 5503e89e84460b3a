"""An episode's setup, frozen and built once: the robot (a backend config and a profile), the
brain, the episode's budgets and ablations (EpisodeConfig), and what is attached to it.

Budgets and the render size are known here, before anything is built: a LIBERO-PRO task's step
budget is its config's (``LiberoConfig.step_budget``: ``max_steps`` or the suite's standard one),
and its render size comes from the VLM config (``render_size``), so nothing changes a validated
config afterwards.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..episode.config import EpisodeConfig, with_step_budget
from ..registry import BrainConfig

ORACLE_IMAGE_SIZE = 128                 # the oracle reads no pixels: images only for the record and the console


@dataclass(frozen=True)
class ConsoleSpec:
    """The operator console attached to an episode (docs/console.md)."""
    address: str                        # "PORT" or "HOST:PORT"
    token: str | None = None            # its control token (None: a new random one, printed)
    approval: bool = False              # it starts in approval mode
    hold: bool = False                  # keep it up after the episode until Ctrl-C
    frame_hz: float = 2.0               # frames per second mid-command (each render holds the simulator)


@dataclass(frozen=True)
class InterferenceSpec:
    """An object moved mid-episode by an outside hand (session/attach.py; PRIVILEGED)."""
    setting: str                        # "WHAT@WHEN" (session/interference.py parse_setting)
    shift_m: tuple | None = None        # its displacement range, m (lo, hi); None: interference.SHIFT_M


@dataclass(frozen=True)
class TestFaults:
    """Faults a test of the evaluation machinery asks for by name (``motormind eval --test-sleep``,
    ``--test-crash-once``); none by default."""
    sleep_s: float = 0.0                # wait this long before the episode (episodes overlap, a Ctrl-C lands)
    crash_once: str | None = None       # a marker file: the worker of init state 1 exits (code 3) once, making it

    def apply(self, init_state: int) -> None:
        import os
        import time
        if self.sleep_s:
            time.sleep(self.sleep_s)
        if self.crash_once and init_state == 1 and not os.path.exists(self.crash_once):
            open(self.crash_once, "w").close()
            os._exit(3)


@dataclass(frozen=True)
class EpisodeSetup:
    robot: object                       # a backend config (registry.robot_config), render size and budget in it
    brain: BrainConfig | None           # None: the task answers for itself (the fake's scripted move task)
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)   # its max_steps: the robot's budget
    profile: str = "libero_panda"       # the robot profile (configs/robots/NAME.yaml) the Controller validates with
    task: object | None = None          # what is asked (session/tasks.py); None: the robot's own task (LIBERO-PRO)
    out: str | None = None              # the run directory (None: runs/<time>_<task>_<brain>)
    media: bool = True                  # the contact sheet and video
    mcap: str | None = None             # also record as MCAP; a relative path is in the run dir
    console: ConsoleSpec | None = None
    interference: InterferenceSpec | None = None
    video_every: int | None = None      # a rollout video, a frame every N control steps, and the episode page
    noise: tuple = ()                   # a noise profile's items: the brain wrapped in the noisy brain
    faults: TestFaults = field(default_factory=TestFaults)

    @property
    def brain_name(self) -> str:
        return self.brain.type if self.brain is not None else "scripted"


def stack_setup(stack) -> EpisodeSetup:
    """The setup a ROS 2 stack's configuration file describes (motormind/ros/settings.py StackConfig:
    robot, profile, brain, episode), built once per node: its episode config carries the robot's step
    budget, as the in-process runner's does. The attachments are the launch's own nodes."""
    return EpisodeSetup(robot=stack.robot, brain=stack.brain, episode=with_step_budget(stack.episode, stack.robot),
                        profile=stack.profile, media=False)


def render_size(brain: BrainConfig, image_size: int | None = None) -> int:
    """The camera render size: as given, else the size the VLM config's model family works on
    (``grounding/image_sizing.py``: a Qwen2.5-VL config at 448 px renders 448, Gemma 3 896), so that
    nothing is upscaled on the way to the model; ORACLE_IMAGE_SIZE for the oracle."""
    if image_size:
        return int(image_size)
    if brain.type == "openai":
        from ..grounding.image_sizing import render_size as family_size
        from ..brains.openai_brain import load_vlm_config
        cfg = load_vlm_config(brain.vlm or "openai", brain.vlm_set)
        return family_size(cfg.image_rules, cfg.image_size)
    return ORACLE_IMAGE_SIZE


def libero_setup(suite: str = "libero_spatial", task: int = 0, init_state: int = 0, seed: int = 0,
                 brain: BrainConfig | None = None, max_steps: int | None = None, image_size: int | None = None,
                 episode: EpisodeConfig | None = None, wall_budget_s: float | None = None,
                 images: bool | None = None, **attachments) -> EpisodeSetup:
    """A LIBERO-PRO episode's setup: the task's config with its render size and step budget, the
    episode config with that budget (``wall_budget_s`` and ``images``, when given, over ``episode``'s)."""
    from motormind.sim.libero_pro.config import LiberoConfig
    brain = brain or BrainConfig("oracle")
    robot = LiberoConfig(suite=suite, task=task, init_state=init_state, seed=seed,
                         image_size=render_size(brain, image_size), max_steps=max_steps)
    over = {k: v for k, v in (("wall_budget_s", wall_budget_s), ("images", images)) if v is not None}
    cfg = replace(episode or EpisodeConfig(), max_steps=robot.step_budget(), **over)
    return EpisodeSetup(robot=robot, brain=brain, episode=cfg, **attachments)


def run_setup(a) -> EpisodeSetup:
    """``motormind run``'s setup from its command line (motormind/evaluate/run.py)."""
    brain = BrainConfig(a.brain or ("openai" if a.vlm else "oracle"), vlm=a.vlm or "openai", vlm_set=tuple(a.vlm_set))
    console = None if a.console is None else ConsoleSpec(a.console, a.console_token, a.approval, a.console_hold,
                                                         a.console_frame_hz)
    itf = None if a.interference == "off" else InterferenceSpec(a.interference, a.interference_mm)
    return libero_setup(a.suite, a.task, a.init_state, a.seed, brain, a.max_steps, a.image_size,
                        wall_budget_s=a.wall_budget, images=not a.no_images, out=a.out, media=not a.no_media,
                        mcap=a.mcap, console=console, interference=itf, video_every=a.videos)
