"""LIBERO-PRO backend for MotorMind.

    from motormind.sim.libero_pro import LiberoRobot
    robot = LiberoRobot("libero_spatial", task=0, init_state=0)
    obs = robot.observe(images=True)

``suites`` (registry helpers) is light to import; ``backend`` and ``scene`` import libero, robosuite
and mujoco on first use (this module loads them lazily).
"""
from .suites import (DEFAULT_BUDGETS, SuiteError, base_suite, default_budget, list_suites,
                     require_complete, suite_info)

__all__ = ["LiberoRobot", "BudgetExhausted", "Scene", "DEFAULT_BUDGETS", "SuiteError", "base_suite",
           "default_budget", "list_suites", "require_complete", "suite_info"]


def __getattr__(name):
    if name in ("LiberoRobot", "BudgetExhausted"):
        from . import backend
        return getattr(backend, name)
    if name == "Scene":
        from .scene import Scene
        return Scene
    raise AttributeError(name)
