"""An episode's settings: budgets and the ablation switches, each with its one default.

Every entry point reads these defaults from here (the command line's ``--wall-budget``, the
evaluation's jobs, the ROS 2 configuration file's ``episode:`` section), so a default is written
once. Built strictly from a file (``strict_config.from_mapping``) or in code; either way the
ranges are checked: ``EpisodeConfig(max_batches=0)`` is a ConfigError naming the field. Frozen: a
validated config is never changed; a variant is ``dataclasses.replace(cfg, max_batches=3)`` (checked
again), and the step budget is known before the robot is built (``with_step_budget``).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..strict_config import check_fields


@dataclass(frozen=True)
class EpisodeConfig:
    max_steps: int | None = field(default=None, metadata={"ge": 1})   # control steps (None: the backend's budget)
    wall_budget_s: float = field(default=900.0, metadata={"gt": 0})   # wall clock, s
    max_batches: int = field(default=60, metadata={"ge": 1})          # batches proposed
    max_replans: int = field(default=6, metadata={"ge": 0})
    max_failures_per_subgoal: int = field(default=3, metadata={"ge": 1})   # failed batches on one subgoal before a replan
    max_looks: int = field(default=3, metadata={"ge": 0})  # the Executor's looks (points, regions, no commands) before each batch
    images: bool = True                 # render camera images for the roles
    replan: bool = True                 # ablations (docs/evaluation.md)
    planner: bool = True
    monitor: bool = True
    verifier: bool = True
    memory: bool = True
    # The stack's own word ends the episode: once every subgoal is accepted (verified, or claimed
    # with the Verifier off) the episode ends, and in simulation the success check scores it
    # (claimed_done when it does not hold). False: that plan goes back to the Planner, so the
    # privileged check steers the episode (the behaviour before issue 20; a premature claim then
    # costs only a replan, and removing the Verifier could not hurt).
    end_when_plan_done: bool = True

    def __post_init__(self) -> None:
        check_fields(self)


def with_step_budget(cfg: EpisodeConfig, robot_cfg) -> EpisodeConfig:
    """``cfg`` with the robot's step budget when it names none (a backend config with ``step_budget``:
    LIBERO-PRO's; the others count no budget)."""
    if cfg.max_steps is not None:
        return cfg
    budget = getattr(robot_cfg, "step_budget", None)
    return replace(cfg, max_steps=budget()) if budget is not None else cfg


DEFAULTS = EpisodeConfig()
WALL_BUDGET_S = DEFAULTS.wall_budget_s
ABLATIONS = ("replan", "planner", "monitor", "verifier", "memory")   # the switches an ablation turns off
