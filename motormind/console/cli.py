"""``motormind console``: the operator console, hosting a robot in-process or attached to ROS 2.

    motormind console --robot fake                        # rehearse: the kinematic fake, you drive
    motormind console --robot xarm6 --robot-ip 127.0.0.1  # the arm (or its emulator)
    motormind console --robot xarm6 --robot-ip ... --brain openai --vlm openai   # a VLM drives, you watch
    motormind console --ros                               # a ROS 2 node on /motormind (motormind launch ...)

``motormind run --console`` attaches the same console to a LIBERO-PRO episode.
"""
from __future__ import annotations

import signal
import sys
import time


def register(sub) -> None:
    import argparse

    from ..argtypes import non_negative, out_dir, port
    p = sub.add_parser("console", help="the operator console: watch, approve, jog and stop, from a browser",
                       description=__doc__.split("\n\n")[0])
    p.add_argument("--robot", choices=["fake", "xarm6"], default=None,
                   help="host this robot in-process (episodes start from instructions submitted on the page)")
    p.add_argument("--ros", action="store_true", help="attach to a running ROS 2 graph (/motormind topics) instead")
    p.add_argument("--robot-ip", default=None, help="xArm6 controller IPv4 address (a real arm or `motormind emulate`)")
    p.add_argument("--command-port", type=port, default=502, help="xArm6 command port (the emulator's, if not 502)")
    p.add_argument("--camera", action="append", default=[], metavar="NAME=SOURCE",
                   help="xArm6 camera: an OpenCV device index or stream URL; repeatable")
    p.add_argument("--brain", choices=["operator", "openai"], default="operator",
                   help="operator: no VLM, you write the batches and the verdicts (default); "
                        "openai: a VLM configured by --vlm drives and you supervise")
    p.add_argument("--vlm", default=None, metavar="CONFIG", help="VLM config for --brain openai (configs/vlm/)")
    p.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--host", default="127.0.0.1",
                   help="address to serve on (default 127.0.0.1; anything else is reachable from the network)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer to this Host name (e.g. the machine's address, with --host 0.0.0.0); "
                        "repeatable. Any other name is refused (DNS rebinding)")
    p.add_argument("--port", type=port, default=8765, help="HTTP port (0: any free port)")
    # the same names as `motormind run --console`'s options; --token and --frame-hz, the old spellings, still work
    p.add_argument("--console-token", default=None, help="the control token (default: a new random one, printed)")
    p.add_argument("--token", dest="console_token", default=None, help=argparse.SUPPRESS)
    p.add_argument("--approval", action="store_true", help="start in approval mode: every batch waits for you")
    p.add_argument("--instruction", default=None, help="start a first episode with this instruction")
    p.add_argument("--console-frame-hz", type=non_negative, default=5.0,
                   help="camera frames per second while the arm moves (0: only at action boundaries)")
    p.add_argument("--frame-hz", dest="console_frame_hz", type=non_negative, default=5.0, help=argparse.SUPPRESS)
    p.add_argument("--realtime", action="store_true", help="--robot fake: move in real time (as a real arm would)")
    p.add_argument("--out", default="runs/console", type=out_dir,
                   help="the directory episode records go under (one folder each)")
    p.add_argument("--domain-id", type=int, default=None, help="--ros: ROS_DOMAIN_ID")
    p.add_argument("--manual-queue", default=None, metavar="DIR",
                   help="--ros: the manual VLM endpoint's queue folder (the role nodes' VLM config names it as "
                        "queue): its requests are listed and answered on the page (in-process the console finds "
                        "the episode's queue itself)")
    p.add_argument("--profile", default=None,
                   help="--ros: the robot profile the page describes (fake, xarm6, libero_panda; the Controller "
                        "validates with its own)")
    p.set_defaults(fn=_main)


def _robot(a):
    """The robot ``--robot`` names, through the registry (motormind/registry.py), with its own profile."""
    from ..profile import load_profile
    from ..registry import build_robot, robot_config
    from ..errors import ConfigError
    if a.robot == "fake":
        cfg = {"type": "fake", "realtime": a.realtime, "image_size": 96}
    else:
        if not a.robot_ip:
            raise ConfigError("--robot-ip: required for --robot xarm6 (the controller's IPv4 address)")
        cfg = {"type": "xarm6", "ip": a.robot_ip, "command_port": a.command_port, "cameras": list(a.camera)}
    try:
        cfg = robot_config(cfg, where="--robot")
    except ConfigError as e:
        raise ConfigError(str(e).replace("--robot.cameras", "--camera").replace("--robot.ip", "--robot-ip")) from None
    return build_robot(cfg, load_profile(a.robot))


def _brain_factory(a, robot):
    from ..registry import BrainConfig, build_brain
    cfg = BrainConfig(a.brain, vlm=a.vlm or "openai", vlm_set=tuple(a.vlm_set))
    return lambda rec: build_brain(cfg, robot, robot.profile, rec)      # the episode's record (EpisodeHost)


def _check_host(host: str) -> None:
    """``--host`` names an address of this machine, or says why not (before ``--port`` is blamed)."""
    import errno
    import socket

    from ..errors import ConfigError
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICSERV)
    except (socket.gaierror, UnicodeError) as e:
        raise ConfigError(f"--host: {host!r} is not an address to serve on ({getattr(e, 'strerror', None) or e}); "
                          "e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)") from None
    family, _, _, _, addr = infos[0]
    with socket.socket(family, socket.SOCK_STREAM) as s:
        try:
            s.bind((addr[0], 0))
        except OSError as e:
            if e.errno == errno.EADDRNOTAVAIL:
                raise ConfigError(f"--host: {host} is not an address of this machine ({e.strerror}); "
                                  "e.g. 127.0.0.1 or 0.0.0.0") from None


def _make_out(out: str) -> None:
    from pathlib import Path

    from ..errors import ConfigError
    try:
        Path(out).mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"--out: cannot make the directory {out}: {e.strerror or e}") from None


def _wait_for_signal() -> None:
    done: list = []                 # not a threading.Event: a handler must take no lock (its set() does)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.append(sig))
    while not done:
        time.sleep(0.2)


def _main(a) -> int:
    from ..errors import ConfigError
    if a.ros == bool(a.robot):
        raise ConfigError("console: give either --robot fake|xarm6 (in-process) or --ros (attach to ROS 2)")
    if a.manual_queue and not a.ros:
        raise ConfigError("--manual-queue: only with --ros (in-process the console lists the episode's own queue, "
                          "RUN_DIR/queue/)")
    if a.ros:
        if a.profile:                           # a bad profile is said here, not by the node later
            from ..profile import load_profile
            try:
                load_profile(a.profile)
            except ConfigError as e:
                raise ConfigError(f"--profile: {e}") from None
        if a.domain_id is not None:
            import os
            os.environ["ROS_DOMAIN_ID"] = str(a.domain_id)
        from ..ros.console_node import run_console_node
        _check_host(a.host)
        return run_console_node(a.host, a.port, a.console_token, a.profile, manual_queue=a.manual_queue)
    from ..episode.config import EpisodeConfig
    from ..webserver import listen_for
    from .session import EpisodeHost

    def say(s: str) -> None:
        print(s, file=sys.stderr, flush=True)

    # the command line's mistakes first, before the robot is built or connected: the VLM endpoint,
    # then the port (bound now and held)
    if a.brain == "openai":
        from ..brains.endpoint import checked_vlm_config
        checked_vlm_config(a.vlm, a.vlm_set)
    _check_host(a.host)
    sock = listen_for("--port", a.host, a.port)
    _make_out(a.out)
    robot = _robot(a)
    host = None
    try:
        make = _brain_factory(a, robot)
        host = EpisodeHost(robot, make, a.out, a.host, a.port, a.console_token, a.approval,
                           config=lambda: EpisodeConfig(wall_budget_s=3600.0), progress=say,
                           frame_hz=a.console_frame_hz, robot_label=a.robot, allow_hosts=tuple(a.allow_host),
                           sock=sock).start()
        print(host.session.banner(), flush=True)
        say(f"robot: {robot.profile.description}; brain: {a.brain}; records under {a.out}/. Ctrl-C to quit.")
        if a.instruction:
            host.session.desk.add_instruction(a.instruction)
        _wait_for_signal()
        say("console: stopping (the robot is stopped first)")
        return 0
    finally:
        if host is not None:
            host.session.controller.emergency_stop("console closing")
            host.close()
        robot.stop()
        robot.close()
