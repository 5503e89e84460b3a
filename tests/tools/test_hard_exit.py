"""Ending a process at a deadline without the interpreter (motormind/hard_exit.py): it works while
a native call holds the GIL, where a deadline written in Python never runs."""
from __future__ import annotations

import subprocess
import sys

import pytest

from motormind.hard_exit import exit_after

# Arms the deadline and a Python timer, then blocks in a native call that keeps the GIL
# (a ctypes.PyDLL call does not release it), as Fast DDS's participant teardown can.
HOLD = """
import ctypes, sys, threading
from motormind.hard_exit import exit_after
h = exit_after(float(sys.argv[1]), int(sys.argv[2]))
threading.Timer(0.05, lambda: print("the Python timer ran", flush=True)).start()
print(h.how, flush=True)
if sys.argv[3] == "cancel":
    h.cancel()
    h.cancel()                     # again: harmless
    import time; time.sleep(float(sys.argv[1]) + 1.0)
    print("still here", flush=True)
    sys.exit(3)
ctypes.PyDLL(None).sleep(120)
print("the native call returned", flush=True)
"""


def _run(*args):
    return subprocess.run([sys.executable, "-c", HOLD, *map(str, args)], capture_output=True, text=True, timeout=90)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the native timer is Linux's")
@pytest.mark.parametrize("code", [0, 7])
def test_the_process_ends_with_its_code_while_a_native_call_holds_the_gil(code):
    p = _run(0.5, code, "hold")
    assert p.stdout.splitlines()[0] == "timer", p.stdout + p.stderr
    assert p.returncode == code, p.stdout + p.stderr
    assert "the Python timer ran" not in p.stdout           # starved: why the deadline is native
    assert "the native call returned" not in p.stdout


def test_a_cancelled_deadline_leaves_the_process_alone():
    p = _run(0.3, 9, "cancel")
    assert p.returncode == 3 and "still here" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize("seconds, code, field", [(0, 0, "seconds"), (-1, 0, "seconds"), (float("nan"), 0, "seconds"),
                                                  (float("inf"), 0, "seconds"),
                                                  (1, 256, "code"), (1, -1, "code")])
def test_a_bad_deadline_is_refused_naming_the_field(seconds, code, field):
    with pytest.raises(ValueError, match=f"^{field}: "):
        exit_after(seconds, code)
