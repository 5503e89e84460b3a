"""The LIBERO-PRO simulation: the MotorMind nodes around a Controller that owns the simulator.

    ros2 launch motormind sim.launch.py suite:=libero_spatial task:=0 brain:=oracle record:=/tmp/t0.mcap

The oracle brain (privileged, evaluator only) answers next to the simulator, in the Controller.

A real ROS 2 launch file (Jazzy and later). Its nodes and their one configuration file come from
motormind/ros/graph.py, the same source `motormind launch sim` uses on machines without the
ros2 CLI: `motormind launch sim --dry-run` prints what this file starts.
"""
import tempfile
from pathlib import Path

from launch import LaunchDescription
from launch.actions import DeclareLaunchArgument, OpaqueFunction, Shutdown
from launch.substitutions import LaunchConfiguration
from launch_ros.actions import Node

from motormind.ros import graph, package, settings

SETUP = "sim"


def _nodes(context, *args, **kwargs):
    given = {a.name: LaunchConfiguration(a.name).perform(context) for a in graph.ARGS[SETUP]}
    specs, config = graph.nodes(SETUP, given)
    # the launch's one configuration file (the launch arguments applied), read by every node
    config_file = settings.write(config, Path(tempfile.mkdtemp(prefix="motormind-launch-")) / "motormind.yaml")
    out = []
    for spec in specs:
        extra = {"on_exit": Shutdown(reason=f"{spec.name} ended the episode")} if spec.exit_ends_launch else {}
        out.append(Node(package=package.PACKAGE, executable=spec.executable, name=spec.name,
                        namespace=graph.NAMESPACE, parameters=[{"config": str(config_file)}],
                        respawn=spec.respawn, respawn_delay=spec.respawn_delay_s, output="screen",
                        emulate_tty=True, **extra))
    return out


def generate_launch_description():
    return LaunchDescription(
        [DeclareLaunchArgument(a.name, default_value=a.default, description=a.help) for a in graph.ARGS[SETUP]]
        + [OpaqueFunction(function=_nodes)])
