"""Entry points of the node executables (installed as ``motormind-<role>``, under lib/motormind in
a ROS 2 workspace) and of ``python -m motormind.ros <role>``.

Arguments before ``--ros-args`` are the executable's own: ``-h`` / ``--help`` prints the node's
parameters and exits without starting it (no ROS context, no robot, no simulation); anything else
is refused. ROS arguments (``--ros-args -p name:=value --params-file FILE ...``) go to rclpy.
"""
from __future__ import annotations

import sys

from .graph import ROLES


def node_class(role: str):
    """The node class of ``role`` (importing it starts nothing)."""
    if role == "console":
        from .console_node import ConsoleNode as cls
    elif role == "controller":
        from .controller_node import ControllerNode as cls
    elif role == "recorder":
        from .recorder_node import RecorderNode as cls
    else:
        from .role_nodes import NODES
        cls = NODES[role]
    return cls


def node_settings(role: str) -> dict:
    """What the node of ``role`` reads from the configuration file, with the packaged defaults
    (dotted keys: ``episode.wall_budget_s``)."""
    from .settings import load_stack
    d = load_stack().to_dict()
    sections = ["profile", "brain", "episode", "nodes", *node_class(role).sections]
    out = {}
    for section in sections:
        v = d[section]
        if isinstance(v, dict):
            out.update({f"{section}.{k}": x for k, x in v.items()})
        else:
            out[section] = v
    return out


def help_text(role: str, prog: str) -> str:
    from .package import params_file
    doc = (sys.modules[node_class(role).__module__].__doc__ or "").strip().split("\n\n")[0]
    lines = [f"usage: {prog} [-h] [--ros-args [-r __ns:=/motormind] [-p config:=FILE]]", "",
             doc, "",
             "Started with the others by `motormind launch sim|xarm6|fake` or `ros2 launch motormind sim.launch.py`,",
             "which write one configuration file for every node. The node's one parameter:", "",
             f"  config  the configuration file (default: {params_file()})", "",
             "what it reads from that file (packaged default):"]
    params = node_settings(role)
    width = max(len(k) for k in params)
    lines += [f"  {k:<{width}}  {v!r}" for k, v in params.items()]
    return "\n".join(lines)


def run(role: str, args: list[str] | None = None, prog: str | None = None) -> int:
    """Run the node of ``role``; ``args`` are the executable's own arguments (default: those of
    ``sys.argv`` before ``--ros-args``)."""
    prog = prog or f"motormind-{role}"
    if args is None:
        args = sys.argv[1:]
    if "--ros-args" in args:
        args = args[:args.index("--ros-args")]
    if "-h" in args or "--help" in args:
        print(help_text(role, prog))
        return 0
    if args:
        print(f"{prog}: unknown argument {args[0]!r} (the configuration file goes after --ros-args: "
              f"-p config:=FILE; --help lists what the node reads from it)", file=sys.stderr)
        return 2
    from .lifeline import follow_launcher
    follow_launcher()                         # started by `motormind launch`: end with it
    if role == "console":                     # not a plain node: it also serves the console's web page
        from .console_node import main as console_main
        return console_main()
    from .base import spin
    return spin(node_class(role))


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
        print(f"usage: python -m motormind.ros {{{','.join(ROLES)}}} [-h] [--ros-args ...]", file=sys.stderr)
        return 2
    return run(argv[0], argv[1:], prog=f"python -m motormind.ros {argv[0]}")
