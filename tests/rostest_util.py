"""Helpers the ROS 2 tests share (imported as ``rostest_util``: pytest puts tests/ on sys.path)."""
import os
import re
import signal


class Log:
    """A file-like sink for the launcher's output, readable as text."""

    def __init__(self):
        self.lines = []

    def write(self, s):
        self.lines.append(s)

    def flush(self):
        pass

    def text(self):
        return "".join(self.lines)


def kill_nodes(log: str) -> None:
    """The launcher could not stop its nodes: end each one it started (checked by command line)."""
    for m in re.finditer(r"started \S+ \(pid (\d+)\)", log):
        pid = int(m.group(1))
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                if b"motormind.ros" in fh.read():
                    os.kill(pid, signal.SIGKILL)
        except (OSError, ProcessLookupError):
            pass
