"""Setuptools entry for colcon (ament_python). Metadata, dependencies and entry points live in
pyproject.toml; this file only adds what a ROS 2 workspace needs installed under share/motormind:
the package marker in the ament resource index, package.xml, the launch files and the config."""
from glob import glob

from setuptools import setup
from setuptools.dist import Distribution


class _Distribution(Distribution):
    """colcon reads the configured distribution back with ``ast.literal_eval``: keep
    ``python_requires`` (a SpecifierSet once pyproject.toml is applied) a plain string."""

    def parse_config_files(self, *args, **kwargs):
        super().parse_config_files(*args, **kwargs)
        for holder in (self, self.metadata):
            value = getattr(holder, "python_requires", None)
            if value is not None and not isinstance(value, str):
                holder.python_requires = str(value)


setup(
    distclass=_Distribution,
    data_files=[
        ("share/ament_index/resource_index/packages", ["resource/motormind"]),
        ("share/motormind", ["package.xml"]),
        ("share/motormind/launch", sorted(glob("launch/*.launch.py"))),
        ("share/motormind/config", ["configs/ros/motormind.yaml"]),
    ],
)
