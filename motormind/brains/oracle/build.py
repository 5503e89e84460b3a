"""The oracle's builder, named in the registry (``motormind/registry.py`` BRAINS: ``oracle``)."""
from __future__ import annotations

from ...errors import ConfigError
from .brain import OracleBrain


def oracle_brain(cfg, robot, profile, record=None, remote=None):
    """The oracle reads the live privileged scene: of the simulated robot here, or, where the
    simulator runs in another process, through ``remote`` (a brain over the ROS 2 privileged channel,
    ``motormind/ros/base.py``)."""
    if robot is not None and hasattr(robot, "scene"):
        return OracleBrain(robot.scene(), profile or robot.profile)
    if remote is not None:
        return remote
    raise ConfigError("brain oracle: it reads the simulator's privileged scene: simulation only "
                      "(this robot has no scene)")
