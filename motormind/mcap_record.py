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
runner's observations into the file; ``close()`` finishes it (the summary and index).

The file is written as it goes: the header at once, then a compressed chunk whenever
``chunk_size`` bytes of messages are pending or the oldest pending message is ``flush_s`` old
(a background thread closes a quiet chunk too), each handed to the OS when it is written. A
recorder killed without a chance to close (SIGKILL, a crash) therefore loses at most its open
chunk: the last ``flush_s`` seconds. Such a file has no summary or footer; ``read_messages`` reads
it to its last complete chunk, and ``recover(src, dst)`` (``python -m motormind.mcap_record
recover SRC DST``) writes an indexed copy that every MCAP reader opens (docs/ros2.md, "Recording").
"""
from __future__ import annotations

import json
import os
import sys
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


def joint_state_msg(joints_rad, gripper_width_m: float, t_ns: int) -> dict:
    """A JointState dict: the joints in rad, the finger gap in m as "gripper"."""
    joints = [float(j) for j in joints_rad]
    names = [f"joint{i + 1}" for i in range(len(joints))] + ["gripper"]
    return {"header": {"stamp": _stamp(t_ns), "frame_id": "base"}, "name": names,
            "position": joints + [float(gripper_width_m)], "velocity": [], "effort": []}


def pose_msg(pos_m, quat_xyzw, t_ns: int) -> dict:
    """A PoseStamped dict in the base frame: the position in m, the quaternion (x, y, z, w)."""
    p = [float(v) for v in pos_m]
    q = [float(v) for v in quat_xyzw]
    return {"header": {"stamp": _stamp(t_ns), "frame_id": "base"},
            "pose": {"position": {"x": p[0], "y": p[1], "z": p[2]},
                     "orientation": {"x": q[0], "y": q[1], "z": q[2], "w": q[3]}}}


def measured_state_msgs(obs, t_ns: int) -> tuple[dict, dict]:
    """The JointState and PoseStamped of an observation (``robot.Observation``) as measured, not
    rounded: what the state topics carry. (``Observation.state_dict`` is rounded for prompts, to
    0.1 mm and 0.1 degree, and is never published as a sensor message.)"""
    return (joint_state_msg(obs.joints_rad, float(obs.gripper_width_mm) / 1000.0, t_ns),
            pose_msg(obs.eef_pos_m, obs.eef_quat_xyzw, t_ns))


def _state_msgs(state: dict, t_ns: int) -> tuple[dict, dict]:
    """The same messages from a state in the roles' units (mm, degrees; ``McapRecorder.state``)."""
    return (joint_state_msg(np.radians([float(j) for j in state.get("joints_deg", [])]),
                            float(state.get("gripper_width_mm", 0.0)) / 1000.0, t_ns),
            pose_msg([float(v) / 1000.0 for v in state.get("eef_pos_mm", [0, 0, 0])],
                     state.get("eef_quat_xyzw", [0, 0, 0, 1]), t_ns))


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


MCAP_MAGIC = b"\x89MCAP0\r\n"   # opens and closes every MCAP file (the MCAP specification)
FLUSH_S = 1.0               # the longest a message waits in the open chunk (what a SIGKILL can lose)
CHUNK_SIZE = 1024 * 1024    # bytes of messages per chunk at most (before compression)


class McapRecorder:
    """An MCAP file with ROS 2 schemas, written as it goes (module docstring). Thread-safe;
    ``flush()`` writes the open chunk now; ``close()`` writes the index and summary.
    ``flush_s``: 0 or None writes chunks by size only (and at ``flush()`` / ``close()``)."""

    def __init__(self, path: str | Path, namespace: str = NAMESPACE, metadata: dict | None = None,
                 flush_s: float | None = FLUSH_S, chunk_size: int = CHUNK_SIZE):
        from mcap.writer import CompressionType, Writer   # lazy: only recording needs mcap
        if flush_s is not None and not flush_s >= 0:
            raise ValueError(f"flush_s: {flush_s!r} must be >= 0 seconds (0: by size only)")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.ns = namespace.rstrip("/")
        self._fh = open(self.path, "wb")
        self._w = Writer(self._fh, chunk_size=int(chunk_size), compression=CompressionType.ZSTD)
        self._w.start(profile="ros2", library="motormind")
        self._lock = threading.Lock()
        self._schemas: dict[str, int] = {}
        self._encoders: dict = {}
        self._channels: dict[str, int] = {}
        self._seq: dict[int, int] = {}
        self.counts: dict[str, int] = {}
        self.chunks_flushed = 0
        self.closed = False
        self._pending_since: float | None = None     # monotonic time of the oldest message not on disk
        if metadata:
            self._w.add_metadata("motormind", {k: str(v) for k, v in metadata.items()})
        self._fh.flush()            # the header is on disk at once: even an instant crash leaves a readable file
        self.flush_s = float(flush_s or 0.0)
        self._stop = threading.Event()
        self._flusher = None
        if self.flush_s > 0:
            self._flusher = threading.Thread(target=self._flush_loop, name="motormind-mcap-flush", daemon=True)
            self._flusher.start()

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
            now = time.monotonic()
            if self._pending_since is None:
                self._pending_since = now
            elif self.flush_s and now - self._pending_since >= self.flush_s:
                self._flush_locked()

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
        """A measured state given in the roles' units as JointState and PoseStamped."""
        t_ns = time.time_ns() if t_ns is None else t_ns
        self._state_msgs(*_state_msgs(state, t_ns), t_ns)

    def _state_msgs(self, js: dict, pose: dict, t_ns: int) -> None:
        self.write("state", "sensor_msgs/msg/JointState", js, t_ns, reliable=False)
        self.write("eef_pose", "geometry_msgs/msg/PoseStamped", pose, t_ns, reliable=False)

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
        self._state_msgs(*measured_state_msgs(obs, t_ns), t_ns)     # as measured, as the state topics carry it
        if obs.images:
            self.images(obs.images, t_ns)

    # -- on disk as it goes -----------------------------------------------------------------------
    def flush(self) -> None:
        """Write the open chunk (if it holds a message) and hand it to the OS."""
        with self._lock:
            if not self.closed:
                self._flush_locked()

    def _flush_locked(self) -> None:
        if self._pending_since is None:
            return
        self._w.flush()             # finishes the chunk, writes it and its message index, flushes the file
        self._pending_since = None
        self.chunks_flushed += 1

    def _flush_loop(self) -> None:
        """A quiet recorder's last messages reach the disk within ``flush_s`` too."""
        while not self._stop.wait(self.flush_s / 4):
            with self._lock:
                if self.closed:
                    return
                if self._pending_since is not None and time.monotonic() - self._pending_since >= self.flush_s:
                    self._flush_locked()

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            if self.closed:
                return
            self.closed = True
            try:
                self._w.finish()
                self._fh.flush()
                os.fsync(self._fh.fileno())
            finally:
                self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def is_complete(path: str | Path) -> bool:
    """True when the file was closed (it ends with the footer's magic), False for one whose writer
    died (no summary, no footer)."""
    magic = MCAP_MAGIC
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        if size < 2 * len(magic):
            return False
        fh.seek(size - len(magic))
        return fh.read() == magic


def _salvage(fh, out: dict):
    """The records of the data section in file order, to the first one that is cut short or
    damaged (the open chunk of a killed writer). ``out`` gets ``complete``, ``chunks`` and
    ``good_bytes`` (the offset after the last whole record)."""
    from mcap.records import Chunk, DataEnd
    from mcap.stream_reader import StreamReader, breakup_chunk
    out.update(complete=False, chunks=0, good_bytes=0)
    records = StreamReader(fh, emit_chunks=True).records
    while True:
        try:
            rec = next(records)
        except StopIteration:
            out["complete"] = True
            return
        except Exception:  # noqa: BLE001 - the cut-off tail: a short read, a bad length, a broken field
            return
        if isinstance(rec, Chunk):
            try:
                inner = breakup_chunk(rec, validate_crc=True)
            except Exception:  # noqa: BLE001 - a chunk cut short fails its CRC or its decompression
                return
            out["chunks"] += 1
            out["good_bytes"] = fh.tell()
            yield from inner
        elif isinstance(rec, DataEnd):
            out["complete"] = True       # the writer got to finish(); the summary is not needed here
            out["good_bytes"] = fh.tell()
            return
        else:
            out["good_bytes"] = fh.tell()
            yield rec


def _salvaged_messages(path, out: dict):
    """(schema, channel, message) from a file whose writer may have died."""
    from mcap.records import Channel, Message, Schema
    schemas, channels = {}, {}
    with open(path, "rb") as fh:
        for rec in _salvage(fh, out):
            if isinstance(rec, Schema):
                schemas[rec.id] = rec
            elif isinstance(rec, Channel):
                channels[rec.id] = rec
            elif isinstance(rec, Message) and rec.channel_id in channels:
                ch = channels[rec.channel_id]
                yield schemas.get(ch.schema_id), ch, rec


def read_messages(path: str | Path):
    """(topic, type name, decoded message, log_time ns) for every message of a MotorMind MCAP file.
    A closed file is read through its index (log-time order); a file whose recorder was killed is
    read in file order up to its last complete chunk."""
    from mcap_ros2.decoder import DecoderFactory
    if is_complete(path):
        from mcap.reader import make_reader
        with open(path, "rb") as fh:
            reader = make_reader(fh, decoder_factories=[DecoderFactory()])
            for schema, channel, message, decoded in reader.iter_decoded_messages():
                yield channel.topic, schema.name, decoded, message.log_time
        return
    factory, decoders = DecoderFactory(), {}
    for schema, channel, message in _salvaged_messages(path, {}):
        if schema is None:
            continue
        dec = decoders.get(channel.id)
        if dec is None:
            dec = decoders[channel.id] = factory.decoder_for(channel.message_encoding, schema)
        yield channel.topic, schema.name, dec(message.data), message.log_time


def recover(src: str | Path, dst: str | Path) -> dict:
    """Write ``dst``: every message of ``src`` that is whole (all of them for a closed file, up to
    the last complete chunk for one whose recorder was killed), with its schema and channel, as a
    closed, indexed MCAP file. Returns ``{messages, chunks, complete, dropped_bytes}``:
    ``complete`` False says ``src`` was cut off; ``dropped_bytes`` is what followed its last
    whole record."""
    from mcap.writer import CompressionType, Writer
    if Path(src).resolve() == Path(dst).resolve():
        raise ValueError("recover: dst must be another file than src")
    out: dict = {}
    n = 0
    schema_ids: dict = {}
    channel_ids: dict = {}
    with open(dst, "wb") as fh:
        w = Writer(fh, compression=CompressionType.ZSTD)
        w.start(profile="ros2", library="motormind recover")
        for schema, channel, message in _salvaged_messages(src, out):
            if channel.id not in channel_ids:
                sid = 0
                if schema is not None:
                    if schema.id not in schema_ids:
                        schema_ids[schema.id] = w.register_schema(schema.name, schema.encoding, schema.data)
                    sid = schema_ids[schema.id]
                channel_ids[channel.id] = w.register_channel(channel.topic, channel.message_encoding, sid,
                                                             dict(channel.metadata))
            w.add_message(channel_ids[channel.id], log_time=message.log_time, data=message.data,
                          publish_time=message.publish_time, sequence=message.sequence)
            n += 1
        w.finish()
    size = Path(src).stat().st_size
    return {"messages": n, "chunks": out.get("chunks", 0), "complete": bool(out.get("complete")),
            "dropped_bytes": 0 if out.get("complete") else max(0, size - int(out.get("good_bytes", 0)))}


def main(argv=None) -> int:
    """``python -m motormind.mcap_record recover SRC DST``: an indexed copy of a recording whose
    recorder was killed (what is whole of it)."""
    import argparse
    ap = argparse.ArgumentParser(prog="python -m motormind.mcap_record",
                                 description="Recover a MotorMind MCAP recording whose recorder died.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    rp = sub.add_parser("recover", help="write an indexed copy of what is whole in SRC to DST")
    rp.add_argument("src")
    rp.add_argument("dst")
    a = ap.parse_args(argv)
    try:
        r = recover(a.src, a.dst)
    except (OSError, ValueError) as e:
        print(f"recover: {e}", file=sys.stderr)
        return 1
    state = "closed" if r["complete"] else "not closed: the recorder died" + (
        f"; {r['dropped_bytes']} bytes of a chunk cut short dropped" if r["dropped_bytes"] else "")
    print(f"recover: {r['messages']} messages in {r['chunks']} chunks from {a.src} ({state}) -> {a.dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
