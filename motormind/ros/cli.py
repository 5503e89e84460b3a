"""``motormind launch sim|xarm6|fake [name:=value ...]``: the ROS 2 nodes as separate processes.

For machines without the ros2 command line (rclpy from the PyPI wheels is enough). The same nodes
and parameters as ``ros2 launch motormind sim.launch.py`` (both read ``motormind/ros/graph.py``).
This module imports neither rclpy nor the node code: the CLI works without the ROS 2 extra.
"""
from __future__ import annotations

import argparse
import importlib.util
import sys


def register(subparsers) -> None:
    from . import graph
    lines = []
    for setup in graph.SETUPS:
        args = ", ".join(f"{a.name}:={a.default or repr('')}" for a in graph.ARGS[setup])
        lines.append(f"  {setup}: {args}")
    p = subparsers.add_parser(
        "launch", help="start the ROS 2 nodes (sim, xarm6, fake) as processes, without the ros2 CLI",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="launch arguments (as for ros2 launch):\n" + "\n".join(lines)
               + "\n\nexamples:\n  motormind launch sim task:=3 record:=runs/t3.mcap\n"
                 "  motormind launch xarm6 robot_ip:=192.168.1.222 camera:=front=0")
    p.add_argument("setup", choices=graph.SETUPS,
                   help="which graph: sim (LIBERO-PRO), xarm6 (the arm or its emulator), fake (the kinematic fake)")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="name:=value", help="launch arguments")
    p.add_argument("--domain-id", type=int, default=None, help="ROS_DOMAIN_ID for the nodes (default: inherited)")
    p.add_argument("--network", action="store_true",
                   help="discover peers on the network (default: this machine only, "
                        "ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST)")
    p.add_argument("--no-respawn", action="store_true", help="do not restart a Controller that dies")
    p.add_argument("--dry-run", action="store_true", help="print the nodes, parameters and commands (JSON); start nothing")
    p.set_defaults(fn=_launch)


def _parse(items: list[str]) -> dict:
    out = {}
    for it in items:
        name, sep, value = it.partition(":=")
        if not sep:
            name, sep, value = it.partition("=")
        if not sep or not name:
            raise ValueError(f"arguments are name:=value, got {it!r}")
        out[name.lstrip("-").replace("-", "_")] = value
    return out


def _flags(args) -> list[str]:
    """Options given after the launch arguments (argparse leaves them in the remainder)."""
    rest, items = [], list(args.args)
    while items:
        it = items.pop(0)
        if it == "--dry-run":
            args.dry_run = True
        elif it == "--network":
            args.network = True
        elif it == "--no-respawn":
            args.no_respawn = True
        elif it == "--domain-id" and items:
            args.domain_id = int(items.pop(0))
        elif it.startswith("--domain-id="):
            args.domain_id = int(it.split("=", 1)[1])
        else:
            rest.append(it)
    return rest


def _launch(args) -> int:
    from . import graph
    from .launcher import Launcher
    try:
        given = _parse(_flags(args))
        launcher = Launcher(args.setup, given, env=graph.ros_env(args.domain_id, not args.network),
                            respawn=not args.no_respawn)
    except ValueError as e:             # a bad launch argument, found before any node starts: one line, status 2
        print(f"launch: {e}", file=sys.stderr)
        return 2
    if args.dry_run:
        import json
        print(json.dumps(launcher.describe(), indent=2))
        return 0
    if importlib.util.find_spec("rclpy") is None:
        print("launch: rclpy is not installed; install the ROS 2 extra: pip install -e '.[ros]'", file=sys.stderr)
        return 2
    return launcher.run()
