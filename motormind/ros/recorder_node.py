"""The recorder node: every topic of the graph into one MCAP file (ROS 2 schemas, CDR as on the
wire), like ``ros2 bag record`` but without the ros2 CLI. The in-process runner writes the same
channels with ``motormind.mcap_record.McapRecorder``. The privileged channel and heartbeats are
not recorded. The file is written as it goes: a recorder killed by SIGKILL loses at most its last
``flush_s`` seconds (``motormind/mcap_record.py``; docs/ros2.md, "Recording")."""
from __future__ import annotations

import time

from ..errors import ConfigError
from ..mcap_record import McapRecorder
from . import graph
from .base import MotorMindNode, msg_type, qos, spin


class RecorderNode(MotorMindNode):
    role = "recorder"
    sections = ("recorder",)

    def __init__(self):
        super().__init__()
        self.exit_code = None
        path = self.settings.recorder.path
        if not path:
            raise ConfigError("recorder.path: the MCAP file to write (record:=FILE)")
        try:
            self.mcap = McapRecorder(path, graph.NAMESPACE, {"profile": self.profile.name, "started": time.time()},
                                     flush_s=float(self.settings.recorder.flush_s))
        except (OSError, ValueError) as e:
            raise ConfigError(f"recorder.path: cannot record to {path}: {e}") from None
        self._topics: set = set()
        for name in graph.RECORDED:
            self._record(name)
        self.create_timer(0.5, self._discover)
        self.log(f"recording to {path} (on disk every {self.mcap.flush_s:g} s)")

    def _record(self, name: str) -> None:
        t = graph.topic_spec(name)
        self._topics.add(name)

        def cb(data: bytes, name=name, t=t):
            self.mcap.write_cdr(name, t.type, data, time.time_ns(), reliable=t.reliable, latched=t.latched)
        self._subs.append(self.create_subscription(msg_type(t.type), self.full(name), cb, qos(t), raw=True))

    def _discover(self) -> None:
        pre = f"{graph.NAMESPACE}/"
        for full, _types in self.get_topic_names_and_types():
            name = full[len(pre):] if full.startswith(pre) else ""
            cam = graph.camera_topic(name)
            # colour and depth images; camera_info is left out: the cameras topic holds the same calibration
            if cam is not None and cam[1] in ("image", "depth") and name not in self._topics:
                self._record(name)

    def close(self) -> None:
        self.mcap.close()
        self.log(f"wrote {self.mcap.path}: {sum(self.mcap.counts.values())} messages on "
                 f"{len(self.mcap.counts)} topics")
        super().close()


def main(argv=None) -> int:
    return spin(RecorderNode)
