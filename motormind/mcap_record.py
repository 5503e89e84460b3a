"""Episode recording to MCAP, the ROS 2 bag format: the same file from an in-process run and from
the ROS 2 nodes (``motormind.ros.recorder``), readable by Foxglove and ``ros2 bag``.

Pure Python (``mcap``, ``mcap-ros2-support``): no rclpy. The file uses the ``ros2`` profile, ROS 2
message schemas (``ros2msg``, the ``.msg`` text with its dependencies, as rosbag2 writes them) and
CDR-encoded messages, one channel per topic of the MotorMind graph (docs/ros2.md):

    /motormind/task, plan, commands, report, cancel, verdict, memory, progress, escalation,
    episode, events            std_msgs/msg/String (the JSON messages, each with schema_version)
    /motormind/estop           std_msgs/msg/Bool
    /motormind/state           sensor_msgs/msg/JointState (joints rad; the finger gap in m as "gripper")
    /motormind/eef_pose        geometry_msgs/msg/PoseStamped (m, quaternion; frame "base")
    /motormind/camera/NAME/image  sensor_msgs/msg/Image (rgb8, upright)

``events`` carries the record's events (``vlm_call`` with prompt, response, latency and tokens,
``role_failed``, ``repair_request``, ``monitor_cancel``, ``replan``, ...), one JSON object each.

In-process: ``McapRecorder(path).attach(recorder, runner)`` mirrors the episode record and the
runner's observations into the file; ``close()`` finishes it (a file that was not closed lacks its
index but its messages can still be recovered by ``mcap recover``).
"""
from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np

from . import SCHEMA_VERSION
from .record import json_default

NAMESPACE = "/motormind"

_SEP = "\n" + "=" * 80 + "\n"
_TIME = "int32 sec\nuint32 nanosec"
_HEADER = "builtin_interfaces/Time stamp\nstring frame_id"


def _with_deps(main: str, deps: list[tuple[str, str]]) -> str:
    return main + "".join(f"{_SEP}MSG: {name}\n{text}" for name, text in deps)


# ROS 2 message definitions (Jazzy and later; identical in earlier distributions)
SCHEMAS = {
    "std_msgs/msg/String": "string data",
    "std_msgs/msg/Bool": "bool data",
    "sensor_msgs/msg/Image": _with_deps(
        "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\n"
        "uint32 step\nuint8[] data", [("std_msgs/Header", _HEADER), ("builtin_interfaces/Time", _TIME)]),
    "sensor_msgs/msg/JointState": _with_deps(
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort",
        [("std_msgs/Header", _HEADER), ("builtin_interfaces/Time", _TIME)]),
    "geometry_msgs/msg/PoseStamped": _with_deps(
        "std_msgs/Header header\nPose pose",
        [("std_msgs/Header", _HEADER), ("builtin_interfaces/Time", _TIME),
         ("geometry_msgs/Pose", "Point position\nQuaternion orientation"),
         ("geometry_msgs/Point", "float64 x\nfloat64 y\nfloat64 z"),
         ("geometry_msgs/Quaternion", "float64 x 0\nfloat64 y 0\nfloat64 z 0\nfloat64 w 1")]),
}

# topic (relative to the namespace) -> message type, for the fixed topics
TOPIC_TYPES = {
    "task": "std_msgs/msg/String", "plan": "std_msgs/msg/String", "commands": "std_msgs/msg/String",
    "report": "std_msgs/msg/String", "cancel": "std_msgs/msg/String", "verdict": "std_msgs/msg/String",
    "memory": "std_msgs/msg/String", "progress": "std_msgs/msg/String", "escalation": "std_msgs/msg/String",
    "episode": "std_msgs/msg/String", "events": "std_msgs/msg/String", "estop": "std_msgs/msg/Bool",
    "state": "sensor_msgs/msg/JointState", "eef_pose": "geometry_msgs/msg/PoseStamped",
}

# a minimal rosbag2 QoS description per channel (what ``ros2 bag play`` offers again)
_QOS = ("- history: 1\n  depth: {depth}\n  reliability: {rel}\n  durability: {dur}\n"
        "  deadline:\n    sec: 2147483647\n    nsec: 4294967295\n"
        "  lifespan:\n    sec: 2147483647\n    nsec: 4294967295\n  liveliness: 1\n"
        "  liveliness_lease_duration:\n    sec: 2147483647\n    nsec: 4294967295\n"
        "  avoid_ros_namespace_conventions: false")


def dumps(obj) -> str:
    """JSON for the wire and the file (numpy values become plain numbers)."""
    return json.dumps(obj, default=json_default)


def _stamp(t_ns: int) -> dict:
    return {"sec": int(t_ns // 1_000_000_000), "nanosec": int(t_ns % 1_000_000_000)}


def joint_state_msg(state: dict, t_ns: int) -> dict:
    """A JointState dict from the roles' state (mm, degrees): joints in rad, the gap in m."""
    joints = [float(np.radians(j)) for j in state.get("joints_deg", [])]
    names = [f"joint{i + 1}" for i in range(len(joints))] + ["gripper"]
    return {"header": {"stamp": _stamp(t_ns), "frame_id": "base"}, "name": names,
            "position": joints + [float(state.get("gripper_width_mm", 0.0)) / 1000.0], "velocity": [], "effort": []}


def pose_msg(state: dict, t_ns: int) -> dict:
    p = [float(v) / 1000.0 for v in state.get("eef_pos_mm", [0, 0, 0])]
    q = [float(v) for v in state.get("eef_quat_xyzw", [0, 0, 0, 1])]
    return {"header": {"stamp": _stamp(t_ns), "frame_id": "base"},
            "pose": {"position": {"x": p[0], "y": p[1], "z": p[2]},
                     "orientation": {"x": q[0], "y": q[1], "z": q[2], "w": q[3]}}}


def image_msg(img: np.ndarray, t_ns: int, frame_id: str) -> dict:
    img = np.ascontiguousarray(img, dtype=np.uint8)
    h, w = img.shape[:2]
    return {"header": {"stamp": _stamp(t_ns), "frame_id": frame_id}, "height": h, "width": w,
            "encoding": "rgb8", "is_bigendian": 0, "step": w * 3, "data": img.tobytes()}


def event_message(ev: dict) -> tuple[str, dict] | None:
    """The graph topic and message an in-process record event corresponds to (None: events only)."""
    kind = ev.get("kind")
    data = {k: v for k, v in ev.items() if k not in ("t", "kind")}
    sv = {"schema_version": SCHEMA_VERSION}
    if kind == "plan":
        return "plan", {**sv, "decision": "plan", "plan_id": data.get("plan_id", 0),
                        "subgoals": data.get("subgoals", []), "reason": data.get("replan_reason", ""),
                        "replans": data.get("replans", 0), "brain": data.get("brain", ""),
                        "privileged": bool(data.get("privileged", False))}
    if kind == "batch":
        return "commands", {**sv, **data.get("batch", {})}
    if kind in ("report", "verdict"):
        return kind, {**sv, **data}
    if kind == "memory":
        return "memory", {**sv, "summary": data.get("summary", ""), "facts": data.get("facts", [])}
    if kind == "monitor_cancel":
        return "cancel", {**sv, "batch_id": data.get("batch_id", ""), "reason": data.get("reason", ""),
                          "source": "monitor"}
    if kind in ("command_start", "command_end"):
        return "progress", {**sv, "event": kind, **data}
    if kind == "episode_start":
        return "task", {**sv, "instruction": data.get("instruction", ""), "source": "benchmark"}
    if kind == "episode_end":
        return "episode", {**sv, "event": "end", "result": data}
    return None


class McapRecorder:
    """An MCAP file with ROS 2 schemas. Thread-safe; ``close()`` writes the index and summary."""

    def __init__(self, path: str | Path, namespace: str = NAMESPACE, metadata: dict | None = None):
        from mcap.writer import CompressionType, Writer   # lazy: only recording needs mcap
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ns = namespace.rstrip("/")
        self._fh = open(self.path, "wb")
        self._w = Writer(self._fh, compression=CompressionType.ZSTD)
        self._w.start(profile="ros2", library="motormind")
        self._lock = threading.Lock()
        self._schemas: dict[str, int] = {}
        self._encoders: dict = {}
        self._channels: dict[str, int] = {}
        self._seq: dict[int, int] = {}
        self.counts: dict[str, int] = {}
        self.closed = False
        if metadata:
            self._w.add_metadata("motormind", {k: str(v) for k, v in metadata.items()})

    # -- low level ------------------------------------------------------------------------------
    def topic(self, name: str) -> str:
        return name if name.startswith("/") else f"{self.ns}/{name}"

    def _schema(self, type_name: str) -> int:
        if type_name not in self._schemas:
            self._schemas[type_name] = self._w.register_schema(type_name, "ros2msg", SCHEMAS[type_name].encode())
        return self._schemas[type_name]

    def _channel(self, topic: str, type_name: str, reliable: bool = True, latched: bool = False) -> int:
        if topic not in self._channels:
            qos = _QOS.format(depth=1 if latched else 10, rel=1 if reliable else 2, dur=1 if latched else 2)
            self._channels[topic] = self._w.register_channel(topic, "cdr", self._schema(type_name),
                                                             {"offered_qos_profiles": qos})
        return self._channels[topic]

    def write_cdr(self, topic: str, type_name: str, data: bytes, t_ns: int | None = None,
                  reliable: bool = True, latched: bool = False) -> None:
        """Write an already serialized (CDR) ROS 2 message, as a subscription with raw=True gets it."""
        t_ns = time.time_ns() if t_ns is None else int(t_ns)
        topic = self.topic(topic)
        with self._lock:
            if self.closed:
                return
            ch = self._channel(topic, type_name, reliable, latched)
            seq = self._seq.get(ch, 0)
            self._seq[ch] = seq + 1
            self._w.add_message(ch, log_time=t_ns, data=bytes(data), publish_time=t_ns, sequence=seq)
            self.counts[topic] = self.counts.get(topic, 0) + 1

    def write(self, topic: str, type_name: str, msg: dict, t_ns: int | None = None, **qos) -> None:
        """Encode a message given as a dict (field names as in the .msg) and write it."""
        enc = self._encoders.get(type_name)
        if enc is None:
            from mcap_ros2._dynamic import serialize_dynamic
            enc = self._encoders[type_name] = serialize_dynamic(type_name, SCHEMAS[type_name])[type_name]
        self.write_cdr(topic, type_name, enc(msg), t_ns, **qos)

    # -- MotorMind messages ---------------------------------------------------------------------
    def json(self, topic: str, obj: dict, t_ns: int | None = None, latched: bool = False) -> None:
        self.write(topic, "std_msgs/msg/String", {"data": dumps(obj)}, t_ns, latched=latched)

    def state(self, state: dict, t_ns: int | None = None) -> None:
        """The measured state (roles' units) as JointState and PoseStamped."""
        t_ns = time.time_ns() if t_ns is None else t_ns
        self.write("state", "sensor_msgs/msg/JointState", joint_state_msg(state, t_ns), t_ns, reliable=False)
        self.write("eef_pose", "geometry_msgs/msg/PoseStamped", pose_msg(state, t_ns), t_ns, reliable=False)

    def images(self, images: dict, t_ns: int | None = None) -> None:
        t_ns = time.time_ns() if t_ns is None else t_ns
        for name, img in images.items():
            self.write(f"camera/{name}/image", "sensor_msgs/msg/Image", image_msg(img, t_ns, name), t_ns,
                       reliable=False)

    def event(self, ev: dict) -> None:
        """One in-process record event: on ``events``, and on its own topic when it has one."""
        t_ns = time.time_ns()
        self.json("events", {"schema_version": SCHEMA_VERSION, **ev}, t_ns)
        m = event_message(ev)
        if m is not None:
            self.json(m[0], m[1], t_ns, latched=m[0] in ("task", "memory", "plan", "episode"))

    # -- in-process wiring ----------------------------------------------------------------------
    def attach(self, recorder, runner=None) -> "McapRecorder":
        """Mirror ``recorder``'s events and ``runner``'s observations (state, images) into the file."""
        recorder.listeners.append(self.event)
        if runner is not None:
            runner.observers.append(self.observe)
        return self

    def observe(self, label: str, obs) -> None:
        """An observation (``robot.Observation``) the roles looked at: state, and images if rendered."""
        t_ns = time.time_ns()
        self.state(obs.state_dict(), t_ns)
        if obs.images:
            self.images(obs.images, t_ns)

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._w.finish()
            finally:
                self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def read_messages(path: str | Path):
    """(topic, type name, decoded message, log_time ns) for every message of a MotorMind MCAP file."""
    from mcap.reader import make_reader
    from mcap_ros2.decoder import DecoderFactory
    with open(path, "rb") as fh:
        reader = make_reader(fh, decoder_factories=[DecoderFactory()])
        for schema, channel, message, decoded in reader.iter_decoded_messages():
            yield channel.topic, schema.name, decoded, message.log_time
