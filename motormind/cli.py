"""The ``motormind`` command line."""
from __future__ import annotations

import argparse
import sys


# Subcommands that live beside their code: each module has ``register(subparsers)`` which adds its
# parser and sets ``fn``. Modules are imported lazily only to register (they must import lightly).
PLUGINS = [
    "motormind.evaluate.run",     # run: one LIBERO-PRO episode through the whole stack
    "motormind.serve.cli",        # serve-brain: the local OpenAI-compatible server
    "motormind.diagnose.endpoint_check",     # vlm check: is an endpoint fit to drive a robot?
    "motormind.evaluate.cli",     # eval: LIBERO-PRO evaluation at scale
    "motormind.evaluate.compare", # compare: result directories side by side
    "motormind.diagnose.cli",     # diagnose: the VLM skill diagnostic
    "motormind.sim.xarm_emulator.cli",  # emulate: the xArm6 controller emulator (--scene: the physics cell)
    "motormind.evaluate.trials",  # trials: placement trials on the xArm6 rehearsal cell
    "motormind.ros.cli",          # launch: start the ROS 2 nodes without the ros2 CLI
    "motormind.console.cli",      # console: the operator console
]


def build_parser() -> argparse.ArgumentParser:
    import importlib

    from . import __version__
    from .argtypes import Parser
    p = Parser(prog="motormind", description=__doc__)
    p.add_argument("--version", action="version", version=f"motormind {__version__}")
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in PLUGINS:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name and name.startswith(e.name):   # that part is not built (yet)
                continue
            raise
        mod.register(sub)
    return p


def main(argv=None) -> int:
    from .errors import MotorMindError
    args = build_parser().parse_args(argv)
    try:
        return args.fn(args)
    except MotorMindError as e:          # bad input: one clear line, no traceback
        from .argtypes import one_line
        print(f"motormind {args.cmd}: error: {one_line(e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"motormind {args.cmd}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
