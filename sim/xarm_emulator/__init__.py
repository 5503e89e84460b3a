"""Wire-level xArm6 controller emulator for the unmodified ``xarm-python-sdk`` (see server.py).

    from motormind.sim.xarm_emulator import XArmEmulator
    with XArmEmulator("127.0.0.1", 5020, report_hz=20) as emu:
        ...  # XArm6Robot(profile, "127.0.0.1", command_port=emu.port)

``serve(host, port)`` runs one until Ctrl-C; ``main(argv)`` is the command line
(``python -m motormind.sim.xarm_emulator --port 5020``).
"""
from .cli import main
from .server import DEFAULT_POSE, DEFAULT_VERSION, XArmEmulator, free_loopback_host, serve

__all__ = ["XArmEmulator", "serve", "main", "free_loopback_host", "DEFAULT_POSE", "DEFAULT_VERSION"]
