"""Helpers the ROS 2 tests share (imported as ``rostest_util``: pytest puts tests/ on sys.path)."""
import os
import random
import re
import signal
import time


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


_GIVEN: set = set()     # domains this test process handed out (one may not have bound its ports yet)


def free_domain(tag: str = "") -> int:
    """A ROS_DOMAIN_ID whose DDS ports (7400 + 250 * id ...) nobody on this machine has bound, and
    that this process has not handed out before: other test runs may share the machine, and a graph
    that hears another graph's "b1" is a flaky test."""
    bound = set()
    for f in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            for line in open(f).read().splitlines()[1:]:
                bound.add(int(line.split()[1].rsplit(":", 1)[1], 16))
        except OSError:
            pass
    ids = [d for d in range(1, 233) if d not in _GIVEN]
    random.Random(f"{tag}{os.getpid()}{time.time()}").shuffle(ids)
    d = next((d for d in ids if not any(7400 + 250 * d <= p < 7400 + 250 * (d + 1) for p in bound)), ids[0])
    _GIVEN.add(d)
    return d


def fake_stack_config(tmp_path) -> str:
    """The package's parameters for a quick `motormind launch fake` episode, written under ``tmp_path``: the
    kinematic fake in real time at 64 px, its Controller's state there, no Monitor and no Memory. Its path."""
    import yaml

    from motormind.ros import package
    cfg = yaml.safe_load(package.params_file().read_text())
    cfg["robot"] = {"type": "fake", "realtime": True, "image_size": 64}
    cfg["controller"]["state_dir"] = str(tmp_path)
    cfg["episode"] = {"monitor": False, "memory": False}
    path = tmp_path / "motormind.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return str(path)


def bare_node(cls, name: str, **fields):
    """A role node of ``cls`` as RoleNode builds it, without DDS, its topics captured: (node, sent
    [(topic, message)]). ``fields``: the node's own attributes (its config, brain, role state)."""
    import threading
    node = cls.__new__(cls)
    sent = []
    node.get_name = lambda: name
    node.send = lambda topic, obj: sent.append((topic, obj))
    node.t0 = time.monotonic()
    node._call_lock, node._call_no = threading.Lock(), {}
    for k, v in fields.items():
        setattr(node, k, v)
    return node, sent
