"""A child process's tie to its parent: the child gets a signal when the parent dies, however the
parent dies (``kill -9`` included), so no worker outlives the process that started it.

On Linux the kernel sends it: ``prctl(PR_SET_PDEATHSIG, sig)``, which fires when the *thread* that
started the child ends, so a parent starts its children from one thread. Elsewhere a daemon thread
watches the parent pid twice a second. Used by ``motormind eval``'s worker processes
(``evaluate/pool.py``) and by the ROS 2 nodes of ``motormind launch`` (``ros/lifeline.py``).
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time

from .hard_exit import Deadline

_PR_SET_PDEATHSIG = 1          # linux/prctl.h


def parent_death_signal(sig: int) -> bool:
    """Ask the kernel for ``sig`` when the parent dies (Linux); False where that is not available."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def wait_orphaned(parent: int, period_s: float = 0.5) -> None:
    """Return once ``parent`` is no longer this process's parent (polling)."""
    while os.getppid() == parent:
        time.sleep(period_s)


def watch_parent(parent: int, sig: int = signal.SIGTERM, period_s: float = 0.5) -> None:
    """Send ``sig`` to this process once ``parent`` is no longer its parent (polling)."""
    wait_orphaned(parent, period_s)
    os.kill(os.getpid(), sig)


def exit_when_orphaned(parent: int, after_s: float, period_s: float = 0.5) -> threading.Thread:
    """A backstop for a stop that cannot begin: once ``parent`` is no longer this process's parent,
    a daemon thread arms a ``hard_exit.Deadline`` that ends the process ``after_s`` later, exit code
    1. The parent-death signal asks for an orderly stop, but a Python signal handler runs only between
    the main thread's bytecodes: a main thread blocked in a call that does not return never runs it.
    ``after_s`` should exceed the orderly stop's own grace. A native call that holds the GIL starves
    any Python timer too: the Deadline's native timer then ends the process 2 s later."""
    def watch():
        wait_orphaned(parent, period_s)
        Deadline(after_s, f"still running {after_s:g} s after its parent (pid {parent}) ended: exiting now")
    t = threading.Thread(target=watch, name="motormind-orphan-exit", daemon=True)
    t.start()
    return t


def follow_parent(parent: int, sig: int = signal.SIGTERM) -> bool:
    """Tie this process to ``parent`` (its parent's pid when it was started). Returns False when the
    parent is already gone: the signal will never come, and the caller should not start work."""
    if not parent_death_signal(sig):
        threading.Thread(target=watch_parent, args=(parent, sig), name="motormind-lifeline", daemon=True).start()
    return os.getppid() == parent
