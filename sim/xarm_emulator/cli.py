"""``motormind emulate xarm6 [options]``: the xArm6 controller emulator on this machine."""
from __future__ import annotations

import argparse
import logging
import sys


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
    return main(a.args)

def main(argv: list[str] | None = None) -> int:
    from motormind.argtypes import Parser, port, positive

    from .server import DEFAULT_POSE, DEFAULT_VERSION, XArmEmulator, hold
    ap = Parser(prog="motormind emulate xarm6",
                description="Wire-level xArm6 controller emulator for xarm-python-sdk 1.18.4")
    ap.add_argument("--host", default="127.0.0.1", help="IPv4 address to bind (default 127.0.0.1)")
    ap.add_argument("--port", type=port, default=502,
                    help="command port (default 502, needs root; otherwise pick e.g. 5020 and pass "
                         "command_port=5020 to XArm6Robot)")
    ap.add_argument("--report-type", choices=("rich", "normal", "real"), default="rich",
                    help="report stream served on 30002/30001/30003")
    ap.add_argument("--report-hz", type=positive, default=5.0, help="report rate (the real arm: 5 Hz; > 0)")
    ap.add_argument("--version", default=DEFAULT_VERSION, help="version string the SDK parses")
    ap.add_argument("--pose", type=float, nargs=6, default=DEFAULT_POSE, metavar=("X", "Y", "Z", "R", "P", "YAW"),
                    help="initial TCP pose, mm and degrees")
    ap.add_argument("--enabled", action="store_true", help="start with the motors enabled")
    cell = ap.add_argument_group("the physics-backed cell (sim/xarm_cell/, docs/xarm-cell.md)")
    cell.add_argument("--scene", default=None, metavar="NAME",
                      help="simulate the arm, its gripper, a table and objects in MuJoCo: a scene in "
                           "configs/cells/ (placement) or a YAML path; without it, the kinematic emulator")
    cell.add_argument("--seed", type=int, default=0, help="--scene: the layout drawn for the scene")
    cell.add_argument("--camera-port", type=port, default=8090,
                      help="--scene: serve the scene's cameras as MJPEG streams on this port (0: any free port)")
    cell.add_argument("--privileged-port", type=port, default=None,
                      help="--scene: also serve the PRIVILEGED scene (goal, object poses) for an evaluator or "
                           "`serve-brain --backend oracle --scene URL` on this port; off by default")
    cell.add_argument("--no-collision-detection", action="store_true",
                      help="--scene: never stop on contact force (C31)")
    ap.add_argument("-v", "--verbose", action="store_true")
    a = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO if a.verbose else logging.WARNING,
                        format="%(asctime)s %(name)s %(message)s")
    if a.scene is None:
        extra = [f for f, v in (("--seed", a.seed != 0), ("--privileged-port", a.privileged_port is not None),
                                ("--no-collision-detection", a.no_collision_detection)) if v]
        if extra:
            print(f"motormind emulate xarm6: error: {extra[0]}: only with --scene NAME", file=sys.stderr)
            return 2
    report_port = {"rich": 30002, "normal": 30001, "real": 30003}[a.report_type]
    common = dict(report_port=report_port, report_type=a.report_type, report_hz=a.report_hz, version=a.version,
                  enabled=a.enabled)
    try:
        if a.scene is not None:
            from motormind.errors import ConfigError
            from motormind.sim.xarm_cell.config import load_cell
            try:
                cfg = load_cell(a.scene)
            except ConfigError as e:
                print(f"motormind emulate xarm6: error: {e}", file=sys.stderr)
                return 2
            from motormind.sim.xarm_cell.emulator import CellEmulator
            emu = CellEmulator(cfg, a.host, a.port, camera_port=a.camera_port, privileged_port=a.privileged_port,
                               seed=a.seed, collision_detection=not a.no_collision_detection, **common).start()
        else:
            emu = XArmEmulator(a.host, a.port, initial_pose=tuple(a.pose), **common).start()
    except (OSError, ValueError, OverflowError) as e:
        print(f"motormind emulate xarm6: error: cannot serve on {a.host}:{a.port}: {getattr(e, 'strerror', None) or e}",
              file=sys.stderr)
        return 2
    print(f"xArm6 emulator: command {a.host}:{emu.port}, report {a.host}:{emu.report_port} "
          f"({a.report_type}, {a.report_hz:g} Hz). Ctrl-C to stop.", flush=True)
    if a.scene is not None:
        urls = emu.camera_urls()
        print(f"scene {emu.cell.name!r} (seed {a.seed}): {emu.scene.language_instruction}", flush=True)
        for name, url in urls.items():
            print(f"camera {name}: {url}", flush=True)
        if emu.channel is not None:
            print(f"PRIVILEGED scene (evaluator only): {emu.channel.url}", flush=True)
        cams = ",".join(f"{n}={u}" for n, u in urls.items())
        print(f"run the stack on it: motormind launch xarm6 robot_ip:={a.host} command_port:={emu.port}"
              + (f" camera:={cams}" if cams else ""), flush=True)
    hold(emu)
    return 0
