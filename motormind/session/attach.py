"""What is attached to an episode besides its robot and brain, each from its part of the setup
(session/setup.py): the MCAP recorder, the outside hand of interference and the rollout video. Each
``attach_*`` returns what ``open_episode`` closes (None: not attached). The operator console is
opened by the console's own code (console/session.py ``open_console``), handed to ``open_episode``
as an opener: this package imports nothing of the console."""
from __future__ import annotations

from pathlib import Path


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
