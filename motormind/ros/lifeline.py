"""A node process's tie to the ``motormind launch`` process that started it (pure Python, no rclpy).

The launcher puts its pid in every node's environment (``MOTORMIND_LAUNCHER_PID``). A node
process calls ``follow_launcher()`` first thing: from then on the node gets SIGTERM when the
launcher dies, however it dies (``kill -9`` included), so no node outlives its launch. SIGTERM is
a node's ordinary stop (``base.spin``): the Controller stops the robot and removes its restart
marker, and a node whose stop hangs ends itself (``base.SHUTDOWN_GRACE_S``, ``base.TEARDOWN_S``). A node
whose main thread is stuck in a call, so that its SIGTERM handler never runs, is ended
``ORPHAN_EXIT_S`` after the launcher died (``lifeline.exit_when_orphaned``).

The tie is ``motormind/lifeline.py``'s (the kernel's parent-death signal, which fires when the
*thread* that started the child ends), so the launcher starts (and restarts) every node from the one
thread that supervises them.
A node started by ``ros2 launch`` (no such variable) is left to ``ros2 launch``.

A node whose launcher is gone has lost the pipe its output went to: ``keep_output()`` sends what
it prints from then on (its shutdown) to ``$ROS_HOME/log/motormind/NAME-PID.log``.
"""
from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

from ..lifeline import exit_when_orphaned, follow_parent

ENV = "MOTORMIND_LAUNCHER_PID"
ORPHAN_EXIT_S = 15.0       # a node still running this long after its launcher died ends itself, stuck or not
                           # (longer than an orderly stop's own grace, base.SHUTDOWN_GRACE_S: 10 s)


def follow_launcher(env=None) -> int | None:
    """Tie this process to the launcher named in ``env`` (default ``os.environ``). Returns the
    launcher's pid, or None when no launcher started this process. A launcher that is already
    gone ends this process at once (exit code 1), before it starts a node."""
    value = (os.environ if env is None else env).get(ENV, "")
    try:
        parent = int(value)
    except ValueError:
        return None
    if parent <= 1:
        return None
    if not follow_parent(parent, signal.SIGTERM):   # it died before the tie was made: no signal will come
        print(f"the launcher (pid {parent}) is gone: not starting", file=sys.stderr, flush=True)
        raise SystemExit(1)
    exit_when_orphaned(parent, ORPHAN_EXIT_S)       # (a main thread stuck in a call never runs the SIGTERM handler)
    return parent


def orphaned(env=None) -> bool:
    """True when the launcher that started this process is no longer its parent."""
    value = (os.environ if env is None else env).get(ENV, "")
    return value.isdigit() and int(value) > 1 and os.getppid() != int(value)


def keep_output(name: str, wait_s: float = 0.0, env=None) -> Path | None:
    """If the launcher is gone, point this process's stdout and stderr at a log file (returned).
    ``wait_s``: how long to look. The parent-death signal comes when the launcher's thread that
    started this node ends, and the launcher's other threads may end a moment later: until they
    have, this process still has the launcher for parent."""
    env = os.environ if env is None else env
    if ENV not in env:
        return None
    deadline = time.monotonic() + wait_s
    while not orphaned(env):
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.02)
    root = Path(env.get("ROS_HOME") or Path.home() / ".ros") / "log" / "motormind"
    try:
        root.mkdir(parents=True, exist_ok=True)
        path = root / f"{name}-{os.getpid()}.log"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        return None
    flush_output()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    print(f"the launcher (pid {env.get(ENV)}) is gone: {name} stops; its output continues here", flush=True)
    return path


def flush_output() -> None:
    """Hand what this process has printed to its stdout and stderr now (a pipe that is gone is no error)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
