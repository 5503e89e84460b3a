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


def written_events(path, kind=None) -> list:
    """The events of a JSONL record another thread may be writing: whole lines only (the last one
    counts once its newline is written), optionally of one ``kind``."""
    import json
    text = path.read_text()
    lines = text.split("\n")[:-1]          # what follows the last newline is a line being written
    return [e for e in map(json.loads, filter(None, lines)) if kind is None or e["kind"] == kind]
