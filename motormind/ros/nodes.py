"""Entry points of the node executables (installed as ``motormind-<role>``, under lib/motormind in
a ROS 2 workspace) and of ``python -m motormind.ros <role>``."""
from __future__ import annotations

import sys

from .graph import ROLES


def run(role: str) -> int:
    if role == "console":                     # not a plain node: it also serves the console's web page
        from .console_node import main as console_main
        return console_main()
    if role == "controller":
        from .controller_node import ControllerNode as cls
    elif role == "recorder":
        from .recorder_node import RecorderNode as cls
    else:
        from .role_nodes import NODES
        cls = NODES[role]
    from .base import spin
    return spin(cls)


def _entry(role: str):
    def main() -> int:
        return run(role)
    main.__name__ = f"{role}_main"
    return main


controller = _entry("controller")
planner = _entry("planner")
executor = _entry("executor")
verifier = _entry("verifier")
monitor = _entry("monitor")
memory = _entry("memory")
recorder = _entry("recorder")
console = _entry("console")


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ROLES:
        print(f"usage: python -m motormind.ros {{{','.join(ROLES)}}} [--ros-args ...]", file=sys.stderr)
        return 2
    return run(argv[0])
