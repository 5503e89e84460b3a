"""A child's tie to its parent (motormind/lifeline.py): the backstop that ends a process whose
orderly stop cannot begin once its parent is gone."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

# The parent starts the child and prints its pid. The child ignores SIGTERM (as a main thread stuck
# in a call never runs its handler), arms the backstop for its parent, reports it is armed and
# blocks its main thread for good.
CHILD = """
import os, signal, sys, threading
from motormind.lifeline import exit_when_orphaned
signal.signal(signal.SIGTERM, signal.SIG_IGN)
exit_when_orphaned(os.getppid(), float(sys.argv[1]), period_s=0.05)
print("armed", flush=True)
threading.Event().wait()
"""
PARENT = """
import json, subprocess, sys
child = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], stdout=subprocess.PIPE, text=True)
assert child.stdout.readline().strip() == "armed"
print(json.dumps({"child": child.pid}), flush=True)
sys.stdin.read()
"""


def _running(pid: int) -> bool:
    """The process exists and is not a zombie (an adopted child that ended may wait to be reaped)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return not any(ln.startswith("State:") and "Z" in ln.split()[1] for ln in f)
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_child_that_cannot_stop_ends_itself_a_while_after_its_parent_dies():
    parent = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, "3"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    child = None
    try:
        child = json.loads(parent.stdout.readline())["child"]
        time.sleep(1.0)
        assert _running(child)                    # the parent lives: the child goes on
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait(timeout=10)
        assert _running(child)                    # ... and its backstop waits before it ends it
        deadline = time.monotonic() + 20.0
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _running(child)
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _running(child):
            os.kill(child, signal.SIGKILL)
