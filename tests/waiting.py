"""Polling helper the console tests share (imported as ``waiting``: pytest puts tests/ on sys.path)."""
import time


def wait_for(cond, timeout=20.0, what="condition", poll=0.02):
    """Poll ``cond()`` until it is truthy (returned) or ``timeout`` s pass (AssertionError naming ``what``)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(poll)
    raise AssertionError(f"timed out waiting for {what}")
