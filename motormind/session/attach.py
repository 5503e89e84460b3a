"""What is attached to an episode besides its robot and brain, each from its part of the setup
(session/setup.py): the operator console, the MCAP recorder, the outside hand of interference and
the rollout video. Each ``attach_*`` returns what ``open_episode`` closes (None: not attached)."""
from __future__ import annotations

from pathlib import Path


def attach_console(spec, robot, rec, progress, images: bool, sock=None):
    """The operator console (console/session.py), watching the record; ``sock``: its listening
    socket, bound by the command line before the simulation was built (``webserver.listen_for``)."""
    from ..argtypes import split_host_port
    from ..console.session import ConsoleSession
    from ..errors import ConfigError
    from ..webserver import listen_for

    def bad(msg):
        return ConfigError(f"--console: {msg}")
    host, port = split_host_port(spec.address, bad)
    console = ConsoleSession(robot, host, port, spec.token, spec.approval, frames=images, frame_hz=spec.frame_hz,
                             sock=sock or listen_for("--console", host, port))
    console.runtime.watch(rec)
    progress(console.banner())
    return console


def attach_mcap(path: str | None, run_dir: Path, rec):
    """Also record as MCAP (ROS 2 bag format); a relative path is in the run dir."""
    if not path:
        return None
    from ..mcap_record import McapRecorder
    return McapRecorder(Path(path) if Path(path).is_absolute() else run_dir / path).attach(rec)


def attach_interference(spec, task, runner, robot, rec):
    """The outside hand (session/interference.py), PRIVILEGED: the evaluator's on the true scene.
    Returns (Interferer or None, probe or None, why it cannot happen or "", the shift range)."""
    from ..interference_setting import SHIFT_M, parse_setting
    from .interference import attach
    setting = parse_setting(spec.setting)
    shift = tuple(spec.shift_m or SHIFT_M)
    if setting is None:
        return None, None, "", shift
    itf, probe, missed = attach(runner, robot.scene(), setting, task.interference_seed(), shift, rec,
                                lambda: robot.steps_used)
    return itf, probe, missed, shift


def interference_summary(spec, attached, success: bool) -> dict:
    itf, probe, missed, shift = attached
    return {"setting": spec.setting, "shift_m": list(shift), "privileged": True,
            "event": itf.event.to_json() if itf is not None and itf.event else None,
            "missed": missed or (itf.missed if itf is not None else ""),
            "measures": probe.measures(success) if probe is not None else None}


def attach_rollout(every: int | None, robot):
    """A rollout video, a frame every ``every`` control steps (record.Rollout)."""
    if not every:
        return None
    from ..record import Rollout
    return Rollout(robot, every).attach()


def hold() -> None:
    """Wait for Ctrl-C (the console stays up after the episode)."""
    import threading
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        pass
