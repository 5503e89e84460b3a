"""``motormind emulate xarm6 [options]``: the xArm6 controller emulator on this machine."""
from __future__ import annotations

import argparse


def register(sub) -> None:
    p = sub.add_parser("emulate", help="run a robot controller emulator (xarm6) for rehearsals without hardware",
                       description="Start the wire-level xArm6 controller emulator that the unmodified "
                                   "xarm-python-sdk connects to. Options after the robot name go to the "
                                   "emulator (see `motormind emulate xarm6 --help`).")
    p.add_argument("robot", choices=["xarm6"], help="the controller to emulate")
    p.add_argument("args", nargs=argparse.REMAINDER, metavar="OPTIONS",
                   help="the emulator's own options, after the robot name (--host, --port, --scene, ...: "
                        "`motormind emulate xarm6 --help` lists them)")
    p.set_defaults(fn=_main)


def _main(a) -> int:
    from .server import main
    return main(a.args)
