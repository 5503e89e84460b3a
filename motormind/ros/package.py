"""The ROS 2 package: its name and its packaged configuration file. Pure Python (no rclpy), below
both the graph (graph.py) and the settings (settings.py), which each read it."""
from __future__ import annotations

from pathlib import Path

PACKAGE = "motormind"


def params_file() -> Path:
    """The packaged configuration file: share/motormind/config/motormind.yaml in a ROS 2 workspace,
    else configs/ros/motormind.yaml (the same file)."""
    try:
        from ament_index_python.packages import get_package_share_directory
        p = Path(get_package_share_directory(PACKAGE)) / "config" / "motormind.yaml"
        if p.is_file():
            return p
    except Exception:  # noqa: BLE001 - not in an ament workspace
        pass
    from ..paths import config_dir
    return config_dir() / "ros" / "motormind.yaml"
