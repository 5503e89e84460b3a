"""``robot: {type: libero, suite: libero_spatial, task: 0}``: a LIBERO-PRO task as a robot backend.

Light to import (the simulator is imported by ``build``): the configuration is read and checked
where the simulation is not installed, and the registry (motormind/registry.py) names this class.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from motormind.profile import RobotProfile


@dataclass
class LiberoConfig:
    type: Literal["libero"] = "libero"
    suite: str = "libero_spatial"                       # a registered, complete suite
    task: int = field(default=0, metadata={"ge": 0})    # task index in the suite
    init_state: int = field(default=0, metadata={"ge": 0})
    seed: int = 0                                       # env.seed before every reset
    image_size: int = field(default=128, metadata={"ge": 8})   # render size, px (square)
    max_steps: int | None = field(default=None, metadata={"ge": 1})   # step budget (None: the suite's standard one)

    any_profile: ClassVar[bool] = False

    def step_budget(self) -> int:
        """The episode's control-step budget, known before the simulator is built: ``max_steps``,
        else the suite's standard one (suites.default_budget; the backend's ``budget`` is the same)."""
        from .suites import default_budget
        return int(self.max_steps) if self.max_steps is not None else default_budget(self.suite)

    def build(self, profile: RobotProfile):
        from .backend import LiberoRobot
        return LiberoRobot(self.suite, self.task, self.init_state, seed=self.seed, image_size=self.image_size,
                           profile=profile, max_env_steps=self.max_steps)
