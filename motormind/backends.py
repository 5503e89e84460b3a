"""The robot backends by type name: type -> "module:Config", a backend's configuration class, imported
only when a configuration names it (``motormind/registry.py``). Its own module, below both the
registry and the robot profile, so that a profile checks its ``backends`` without importing the
registry (which builds brains and servers).
"""

ROBOTS = {
    "fake": "motormind.robots.fake:FakeConfig",
    "xarm6": "motormind.robots.xarm6:XArm6Config",
    "libero": "motormind.sim.libero_pro.config:LiberoConfig",
}
