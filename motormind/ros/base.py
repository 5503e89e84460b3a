"""What every MotorMind node shares: its configuration, QoS from the graph, JSON topics, a worker
thread, heartbeats, the record-event stream, the observation cache and the brain. (rclpy: ROS 2 only.)

A node has one ROS parameter, ``config``: the configuration file it reads (motormind/ros/settings.py;
default the packaged configs/ros/motormind.yaml). Any other parameter given to a node is refused at
start, naming where that setting lives in the file: a value that would be silently ignored is the
kind of mismatch (a Controller validating with one profile while it moves another robot) this prevents."""
from __future__ import annotations

import json
import os
import queue
import sys
import threading
import time
import traceback

import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import Image
from std_msgs.msg import Bool, String

from .. import SCHEMA_VERSION
from ..brains.base import Brain, BrainReply
from ..errors import CommandError, ConfigError, MotorMindError
from ..hard_exit import Deadline, exit_after
from ..mcap_record import dumps
from ..session.setup import stack_setup
from ..strict_json import decode_json
from . import graph
from .lifeline import flush_output, keep_output
from .settings import StackConfig, load_stack

# where the parameters nodes had before one configuration file now live (for the refusal's message)
MOVED = {"profile": "profile", "brain": "brain.type", "vlm": "brain.vlm", "brain_script": "brain.script",
         "backend": "robot.type", "suite": "robot.suite", "task": "robot.task", "init_state": "robot.init_state",
         "seed": "robot.seed", "image_size": "robot.image_size", "robot_ip": "robot.ip",
         "command_port": "robot.command_port", "cameras": "robot.cameras", "fake_realtime": "robot.realtime",
         **{k: f"episode.{k}" for k in ("max_steps", "wall_budget_s", "max_batches", "max_replans",
                                        "max_failures_per_subgoal", "images", "replan", "planner", "monitor",
                                        "verifier", "memory")},
         **{k: f"nodes.{k}" for k in ("heartbeat_period_s", "image_wait_s", "rpc_timeout_s")}}
ROS_OWN_PARAMS = ("config", "use_sim_time", "start_type_description_service")


def qos(topic: graph.Topic) -> QoSProfile:
    return QoSProfile(
        history=HistoryPolicy.KEEP_LAST, depth=topic.depth,
        reliability=ReliabilityPolicy.RELIABLE if topic.reliable else ReliabilityPolicy.BEST_EFFORT,
        durability=DurabilityPolicy.TRANSIENT_LOCAL if topic.latched else DurabilityPolicy.VOLATILE)


_TYPES = {"std_msgs/msg/String": String, "std_msgs/msg/Bool": Bool, "sensor_msgs/msg/Image": Image}
# characters of one JSON message (a bound on what a publisher can make a node hold; the largest of
# ours, an events message with a VLM call's answer or a scene snapshot, is far below it)
MAX_MESSAGE_CHARS = 16 * 1024 * 1024


def msg_type(name: str):
    if name not in _TYPES:
        if name == "sensor_msgs/msg/JointState":
            from sensor_msgs.msg import JointState
            _TYPES[name] = JointState
        elif name == "geometry_msgs/msg/PoseStamped":
            from geometry_msgs.msg import PoseStamped
            _TYPES[name] = PoseStamped
        elif name == "sensor_msgs/msg/CameraInfo":
            from sensor_msgs.msg import CameraInfo
            _TYPES[name] = CameraInfo
    return _TYPES[name]


def stamp_s(stamp) -> float:
    return stamp.sec + stamp.nanosec * 1e-9


def image_from_msg(m) -> np.ndarray:
    return np.frombuffer(bytes(m.data), dtype=np.uint8).reshape(m.height, m.width, 3).copy()


def depth_from_msg(m) -> np.ndarray:
    """A ``32FC1`` depth image (metres along the optical axis, NaN: no reading) as HxW float32."""
    if m.encoding != "32FC1":
        raise ValueError(f"depth image encoding {m.encoding!r}: expected 32FC1 (metres)")
    dt = np.dtype(">f4" if m.is_bigendian else "<f4")
    rows = np.frombuffer(bytes(m.data), dtype=np.uint8).reshape(m.height, m.step)[:, :m.width * 4]
    return np.ascontiguousarray(rows).view(dt).reshape(m.height, m.width).astype(np.float32)


def observation_of(state: dict, images: dict | None = None, depth: dict | None = None):
    """An Observation from the measured state a role node holds (the ``progress`` / report dict, mm and
    degrees) and the frames of one look: what the marks, the prompt facts and the grounding read."""
    from ..robot import Observation
    q = state.get("eef_quat_xyzw") or [0.0, 0.0, 0.0, 1.0]
    return Observation(t=float(state.get("t_s", 0.0) or 0.0),
                       eef_pos_m=np.asarray(state.get("eef_pos_mm") or [0.0, 0.0, 0.0], dtype=float) / 1000.0,
                       eef_quat_xyzw=np.asarray(q, dtype=float),
                       gripper_width_mm=float(state.get("gripper_width_mm", 0.0) or 0.0),
                       gripper_fraction=float(state.get("gripper_fraction", 0.0) or 0.0),
                       images=dict(images or {}), depth=dict(depth or {}))


class Worker:
    """One thread that runs a node's jobs in order: decisions never race, callbacks never block."""

    def __init__(self, name: str, log):
        self.q: queue.Queue = queue.Queue()
        self.log = log
        self._t = threading.Thread(target=self._loop, name=f"motormind-{name}-worker", daemon=True)
        self._t.start()

    def put(self, fn, *args) -> None:
        self.q.put((fn, args))

    def _loop(self) -> None:
        while True:
            fn, args = self.q.get()
            if fn is None:
                return
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - a bad job is logged; the node goes on
                self.log(f"error in {getattr(fn, '__name__', fn)}:\n{traceback.format_exc()}")

    def close(self) -> None:
        self.q.put((None, ()))


class MotorMindNode(Node):
    """A node of the graph: ``self.send(topic, obj)``, ``self.listen(topic, fn)`` with JSON payloads;
    ``self.settings`` (the configuration file), ``self.setup`` (the episode's setup it describes:
    session/setup.py ``stack_setup``), ``self.profile``, ``self.cfg`` (the episode's config, its budgets)."""

    role = "node"
    sections: tuple = ()     # the configuration sections this node reads besides profile, brain, episode, nodes
    # the topics this node publishes, made at start: a publisher made at its first message may lose that
    # message for subscribers not yet matched with it (volatile topics: a first verdict, a first batch)
    outputs: tuple = ()

    def __init__(self, overrides: dict | None = None):
        super().__init__(self.role, allow_undeclared_parameters=True,
                         automatically_declare_parameters_from_overrides=True)
        self.settings = self._load_settings(overrides)
        self.profile = self.settings.load_profile()
        # the episode's setup, built once from the file: its config carries the step budget, known before
        # anything is built (a LIBERO-PRO robot config's: what the Controller's evaluator reports), in
        # every node as in the in-process runner
        self.setup = stack_setup(self.settings)
        self.cfg = self.setup.episode
        self._pubs: dict = {}
        self._subs: list = []
        self.worker = Worker(self.get_name(), self.log)
        self.t0 = time.monotonic()
        self._hb_seq = 0
        self.clean_exit = False
        self.create_timer(float(self.settings.nodes.heartbeat_period_s), self._heartbeat)
        for name in ("events", *self.outputs):
            self.publisher(name)

    # -- the configuration ----------------------------------------------------------------------
    def _load_settings(self, overrides: dict | None) -> StackConfig:
        given = {n: p.value for n, p in self.get_parameters_by_prefix("").items() if n not in ROS_OWN_PARAMS}
        if given:
            where = "; ".join(f"{n} -> {MOVED[n]}" if n in MOVED else n for n in sorted(given))
            raise ConfigError(f"parameter(s) {', '.join(sorted(given))}: a MotorMind node has one parameter, "
                              f"config:=FILE, and reads every setting from that file (motormind/ros/settings.py; "
                              f"configs/ros/motormind.yaml); set them there ({where})")
        path = self.get_parameter("config").value if self.has_parameter("config") else ""
        cfg = load_stack(path or None)
        if overrides:
            from .settings import merge, stack_from_dict
            cfg = stack_from_dict(merge(cfg.to_dict(), overrides), f"{cfg.source} (with {', '.join(overrides)})")
        return cfg

    # -- topics ---------------------------------------------------------------------------------
    def full(self, name: str) -> str:
        return f"{graph.NAMESPACE}/{name}"

    def publisher(self, name: str):
        if name not in self._pubs:
            t = graph.topic_spec(name)
            self._pubs[name] = self.create_publisher(msg_type(t.type), self.full(name), qos(t))
        return self._pubs[name]

    def send(self, name: str, obj: dict) -> None:
        """Publish a JSON message (schema_version added when missing)."""
        obj = obj if "schema_version" in obj else {"schema_version": SCHEMA_VERSION, **obj}
        self.publisher(name).publish(String(data=dumps(obj)))

    def listen(self, name: str, fn, raw: bool = False) -> None:
        """Subscribe; ``fn(dict)`` for JSON topics, ``fn(msg)`` otherwise. A JSON message is decoded
        by the project's strict decoder (strict_json.decode_json: one value, no duplicate keys, no
        NaN or 1e999, at most MAX_DEPTH levels, at most MAX_MESSAGE_CHARS); one it refuses is logged,
        bounded, and dropped: anything on the graph may publish."""
        t = graph.topic_spec(name)
        if t.type == "std_msgs/msg/String" and not raw:
            def cb(msg, fn=fn, name=name):
                try:
                    obj = decode_json(msg.data, self.full(name), MAX_MESSAGE_CHARS)
                except CommandError as e:
                    self.log(f"dropped a message on {name}: {str(e)[:300]}")
                    return
                if isinstance(obj, dict):
                    fn(obj)
        else:
            cb = fn
        self._subs.append(self.create_subscription(msg_type(t.type), self.full(name), cb, qos(t)))

    def _heartbeat(self) -> None:
        self._hb_seq += 1
        self.publisher("heartbeat").publish(String(data=json.dumps(
            {"node": self.get_name(), "pid": os.getpid(), "seq": self._hb_seq})))

    # -- records and logs -----------------------------------------------------------------------
    def log(self, text: str) -> None:
        try:
            print(text, flush=True)
        except (BrokenPipeError, OSError):   # the launcher that read our output is gone: go on stopping
            pass

    def record(self, kind: str, **data) -> None:
        """The node's record events (roles call this as their recorder): on /motormind/events."""
        ev = {"t": round(time.monotonic() - self.t0, 4), "kind": kind, "node": self.get_name(), **data}
        try:
            self.send("events", {"schema_version": SCHEMA_VERSION, **ev})
        except Exception as e:  # noqa: BLE001 - never let recording break a role
            self.log(f"could not publish event {kind}: {e}")

    def close(self) -> None:
        self.worker.close()


class RemoteCall:
    """Request/response over the two privileged topics (the evaluator's channel)."""

    def __init__(self, node: MotorMindNode):
        self.node = node
        self._lock = threading.Lock()
        self._waiting: dict = {}
        self._n = 0
        self._closed = threading.Event()
        node.listen("privileged/response", self._on_response)

    def close(self) -> None:
        """The node stops: calls under way end at once (RuntimeError) instead of waiting for an
        answer that the stopping graph will not send (a Monitor's check held its node's shutdown)."""
        self._closed.set()
        with self._lock:
            slots = list(self._waiting.values())
        for slot in slots:
            slot["ev"].set()

    def _on_response(self, msg: dict) -> None:
        with self._lock:
            slot = self._waiting.get(msg.get("id"))
        if slot is not None:
            slot["msg"] = msg
            slot["ev"].set()

    def call(self, op: str, timeout: float, **payload) -> dict:
        pub = self.node.publisher("privileged/request")
        t_end = time.monotonic() + timeout
        while pub.get_subscription_count() == 0:            # the Controller is not (yet) there
            if self._closed.is_set():
                raise RuntimeError(f"privileged {op} call abandoned: the node is stopping")
            if time.monotonic() > t_end:
                raise TimeoutError("no privileged service on /motormind/privileged/request "
                                   "(the sim Controller hosts it)")
            time.sleep(0.05)
        with self._lock:
            self._n += 1
            rid = f"{self.node.get_name()}-{os.getpid()}-{self._n}"
            slot = self._waiting[rid] = {"ev": threading.Event(), "msg": None}
        req = {"schema_version": SCHEMA_VERSION, "id": rid, "op": op, "from": self.node.get_name(), **payload}
        try:
            while True:
                self.node.send("privileged/request", req)   # resent if lost (the server de-duplicates)
                if slot["ev"].wait(min(5.0, max(0.01, t_end - time.monotonic()))):
                    break
                if self._closed.is_set():
                    break
                if time.monotonic() > t_end:
                    raise TimeoutError(f"privileged {op} call timed out after {timeout:g} s")
        finally:
            with self._lock:
                self._waiting.pop(rid, None)
        msg = slot["msg"]
        if msg is None:                                     # woken by close()
            raise RuntimeError(f"privileged {op} call abandoned: the node is stopping")
        if not msg.get("ok", False):
            raise RuntimeError(f"privileged {op} failed: {msg.get('error')}")
        return msg


class RemoteOracleBrain(Brain):
    """The oracle brain as seen from a node without the simulator: each request goes to the one
    OracleBrain in the Controller's process (live privileged scene, one plan memory for all roles).
    Only the role's structured context crosses; the answer is the oracle's JSON text. Labelled
    ``oracle`` and privileged, like the in-process oracle."""

    name = "oracle"
    privileged = True

    def __init__(self, rpc: RemoteCall, timeout: float):
        self.rpc = rpc
        self.timeout = timeout

    def respond(self, req):
        t0 = time.perf_counter()
        msg = self.rpc.call("respond", self.timeout, role=req.role, prompt_name=req.prompt_name,
                            context=req.context)
        return BrainReply(msg["text"], msg.get("brain", "oracle"), time.perf_counter() - t0,
                          privileged=True, meta={"transport": "ros2 privileged channel"})

    def close(self) -> None:
        pass


def serves_oracle(cfg) -> bool:
    """An openai brain whose VLM config serves the oracle (``serve: oracle``): over ROS 2 the oracle behind
    the node's serve-brain is the sim Controller's, reached over the privileged channel (``make_brain``)."""
    if cfg.type != "openai":
        return False
    from ..brains.openai_brain import load_vlm_config
    return load_vlm_config(cfg.vlm, cfg.vlm_set).serve == "oracle"


def make_brain(node: MotorMindNode, rpc: RemoteCall | None):
    """The roles' brain from the configuration's ``brain`` (motormind/registry.py). The oracle runs
    next to the simulator, in the Controller: here it is reached over the privileged channel, as the
    brain itself (``brain: oracle``) or behind this node's serve-brain (an openai brain whose VLM config
    has ``serve: oracle``: every answer through the openai client, the config's latency model and overlap
    as in-process)."""
    from ..registry import build_brain
    cfg = node.setup.brain
    remote = RemoteOracleBrain(rpc, float(node.settings.nodes.rpc_timeout_s)) if rpc is not None else None
    served = serves_oracle(cfg)
    if (cfg.type == "oracle" or served) and remote is None:
        raise ConfigError(f"brain {cfg.type}{' (serve: oracle)' if served else ''}: needs the privileged channel")
    kw = {"remote": remote} if cfg.type == "oracle" else {"queue_name": node.get_name()} if cfg.type == "openai" else {}
    if served:
        kw["backend"] = remote
    return build_brain(cfg, None, node.profile, node.record, **kw)


class ObservationCache:
    """What a role node knows of the robot: the measured state (from the Controller's progress
    events and reports, in the roles' units, exactly as in-process), the latest camera images and
    depth images, and what the Controller says of its cameras and scene (the latched ``cameras`` and
    ``scene_facts`` topics). ``robot()`` is that knowledge in the shape of the Robot interface's
    calibration side (``GraphRobot``), for the same ``Marker`` and ``PromptFacts`` the runner uses."""

    def __init__(self, node: MotorMindNode, images: bool, image_wait_s: float):
        self.node = node
        self.want_images = images
        self.image_wait_s = float(image_wait_s)     # how long a look waits for images newer than the last batch
        self._cv = threading.Condition()
        self.state: dict | None = None
        self.cameras: list | None = None   # what the Controller's idle events say it publishes
        self.images: dict = {}
        self._image_t: dict = {}
        self.depth: dict = {}              # camera -> the newest depth image (m) and its stamp
        self._depth_t: dict = {}
        self.calibrations: dict | None = None   # camera -> CameraCalibration (None: not heard yet)
        self.closing_axis_eef: tuple = (0.0, 1.0, 0.0)
        self.scene: dict | None = None          # Robot.scene_facts() (None: not heard yet)
        self.batch_t = 0.0                 # wall time this node saw the last batch go out
        self._cams: set = set()
        node.listen("progress", self._on_progress)
        node.listen("report", self._on_report)
        node.listen("commands", self._on_commands)
        node.listen("cameras", self._on_cameras)
        node.listen("scene_facts", self._on_scene)
        if images:
            node.create_timer(0.5, self._discover)

    def _on_progress(self, msg: dict) -> None:
        if isinstance(msg.get("state"), dict):
            with self._cv:
                self.state = msg["state"]
                if isinstance(msg.get("cameras"), list):
                    self.cameras = [str(c) for c in msg["cameras"]]
                self._cv.notify_all()

    def _on_report(self, msg: dict) -> None:
        if isinstance(msg.get("end_state"), dict) and msg.get("end_state"):
            with self._cv:
                self.state = msg["end_state"]
                self._cv.notify_all()

    def _on_commands(self, _msg: dict) -> None:
        with self._cv:
            self.batch_t = time.time()

    def _on_cameras(self, msg: dict) -> None:
        """The Controller's calibrations (``CameraCalibration.to_json`` per camera); one that does not
        parse is left out and said (that camera is then uncalibrated: no marks, no measuring)."""
        from ..grounding.camera import CameraCalibration
        cams, out = msg.get("cameras"), {}
        for name, entry in (cams.items() if isinstance(cams, dict) else ()):
            try:
                out[str(name)] = CameraCalibration.from_json(entry, str(name), where=f"cameras.{name}",
                                                             source="/motormind/cameras")
            except MotorMindError as e:
                self.node.log(f"dropped the calibration of camera {name}: {str(e)[:300]}")
        axis = msg.get("closing_axis_eef")
        with self._cv:
            self.calibrations = out
            if isinstance(axis, list) and len(axis) == 3 and all(isinstance(v, (int, float)) for v in axis):
                self.closing_axis_eef = tuple(float(v) for v in axis)
            self._cv.notify_all()

    def _on_scene(self, msg: dict) -> None:
        with self._cv:
            self.scene = {k: v for k, v in msg.items() if k != "schema_version"}
            self._cv.notify_all()

    def _discover(self) -> None:
        pre = f"{graph.NAMESPACE}/"
        for name, _types in self.node.get_topic_names_and_types():
            cam = graph.camera_topic(name[len(pre):]) if name.startswith(pre) else None
            if cam is None or cam[1] not in ("image", "depth") or name in self._cams:
                continue
            self._cams.add(name)
            fn = self._on_image if cam[1] == "image" else self._on_depth
            self.node.listen(f"camera/{cam[0]}/{cam[1]}", lambda m, c=cam[0], fn=fn: fn(c, m))

    def _on_image(self, cam: str, m) -> None:
        try:
            img = image_from_msg(m)
        except ValueError:
            return
        with self._cv:
            self.images[cam] = img
            self._image_t[cam] = stamp_s(m.header.stamp)
            self._cv.notify_all()

    def _on_depth(self, cam: str, m) -> None:
        try:
            d = depth_from_msg(m)
        except ValueError as e:
            self.node.log(f"dropped a depth image of {cam}: {e}")
            return
        with self._cv:
            self.depth[cam] = d
            self._depth_t[cam] = stamp_s(m.header.stamp)
            self._cv.notify_all()

    def wait_state(self, timeout: float = 30.0) -> dict | None:
        with self._cv:
            self._cv.wait_for(lambda: self.state is not None, timeout)
            return self.state

    def wait_setup(self, timeout: float) -> bool:
        """Wait up to ``timeout`` for the Controller's calibrations and scene facts (latched: a
        Controller that is up has sent them); False when they did not come."""
        with self._cv:
            return self._cv.wait_for(lambda: self.calibrations is not None and self.scene is not None, timeout)

    def _has_depth(self, cam: str) -> bool:
        cal = (self.calibrations or {}).get(cam)
        return bool(cal is not None and cal.depth)

    def observe(self, label: str = "", after: float | None = None) -> tuple[dict, dict, dict]:
        """(state, images, depth) now: images newer than ``after`` (default: the last batch) when they
        come within image_wait_s, else the latest ones; each camera's depth image where it has the
        same stamp as its colour frame (the same look), waited for within the same time. A
        Controller that says it has no cameras (an arm without ``camera:=``) is not waited for."""
        state = self.wait_state()
        if not self.want_images or self.cameras == []:
            return state or {}, {}, {}
        after = self.batch_t if after is None else after

        def fresh() -> bool:
            return bool(self.images) and all(t > after for t in self._image_t.values()) and all(
                self._depth_t.get(c) == t for c, t in self._image_t.items() if self._has_depth(c))
        with self._cv:
            self._cv.wait_for(fresh, self.image_wait_s)
            depth = {c: d for c, d in self.depth.items()
                     if c in self._image_t and self._depth_t.get(c) == self._image_t[c]}
            return self.state or state or {}, dict(self.images), depth

    def look(self, label: str = "", after: float | None = None) -> tuple[dict, dict]:
        """(state, images): ``observe`` without the depth images."""
        state, images, _ = self.observe(label, after)
        return state, images

    def robot(self, profile) -> "GraphRobot":
        return GraphRobot(self, profile)


class GraphRobot:
    """The calibration side of the Robot interface as a role node hears it from the Controller:
    ``cameras()``, ``scene_facts()``, ``closing_axis_eef``, ``camera_names`` and the profile. What
    ``grounding.marks.Marker`` and ``roles.facts.PromptFacts.of_robot`` read of a robot in-process."""

    def __init__(self, cache: ObservationCache, profile):
        self.cache = cache
        self.profile = profile

    def cameras(self) -> dict:
        return dict(self.cache.calibrations or {})

    def scene_facts(self) -> dict:
        return dict(self.cache.scene or {})

    @property
    def closing_axis_eef(self) -> tuple:
        return self.cache.closing_axis_eef

    @property
    def camera_names(self) -> list | None:
        return list(self.cache.cameras) if self.cache.cameras else (list(self.cache.calibrations or {}) or None)


SHUTDOWN_GRACE_S = 10.0   # a node whose orderly stop takes longer ends itself, exit code 1
# Once the orderly stop is done, the middleware's teardown (the DDS participant, the interpreter's exit)
# has this long; then the node ends with the exit code it had (motormind/hard_exit.py: why, and how)
TEARDOWN_S = 5.0
# A second SIGINT/SIGTERM within this long of the first is the same stop said again (the parent-death
# signal comes once for each of the launcher's threads as they end); a later one insists: the node ends.
REPEAT_SIGNAL_S = 1.0


def spin(make_node, argv=None) -> int:
    """Run one node (``make_node()``: its class, or any factory) until SIGINT/SIGTERM; exit code
    from ``node.exit_code``; 2 when it could not start (its message printed).

    The first SIGINT or SIGTERM asks for an orderly stop (the node's ``close()``: the Controller
    stops the robot); another one more than ``REPEAT_SIGNAL_S`` later (the launcher's SIGTERM after
    its grace, a second Ctrl-C) ends the node at once, by that signal's default action. However the
    node stops, its orderly stop has ``SHUTDOWN_GRACE_S`` (then it ends itself, exit code 1), and
    the middleware's teardown after it ``TEARDOWN_S`` (then it ends with its exit code: the stop
    that matters is done)."""
    import signal
    rclpy.init(args=argv)
    node = ex = None
    stopped_by: list = []
    code = 1                                   # until known: what an uncaught exception gives
    try:
        node = make_node()

        # A handler takes no lock (a threading.Event's set() does): it runs between any two bytecodes
        # of the main thread, which may hold that lock, and a second signal interrupts the first's set()
        # (the parent-death signal comes in bursts): either deadlocks the node. The loop polls.
        def on_signal(signum, _frame):
            now = time.monotonic()
            if stopped_by and now - stopped_by[0][1] > REPEAT_SIGNAL_S:
                signal.signal(signum, signal.SIG_DFL)     # it insists: end now, whatever the shutdown does
                os.kill(os.getpid(), signum)
                return
            if not stopped_by:
                stopped_by.append((signum, now))
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, on_signal)
        from rclpy.executors import SingleThreadedExecutor
        ex = SingleThreadedExecutor()          # callbacks only queue work: one thread is enough
        ex.add_node(node)
        while not stopped_by and getattr(node, "exit_code", None) is None and rclpy.ok():
            ex.spin_once(timeout_sec=0.1)
        node.clean_exit = True          # asked to stop, or done: not a crash
        code = int(node.exit_code or 0)
    except MotorMindError as e:                # it cannot start: a bad configuration, a port in use
        try:
            print(f"error: {e}", flush=True)
        except (BrokenPipeError, OSError):
            pass
        code = 2
    except SystemExit as e:
        msg = e.code if isinstance(e.code, str) else ""
        if msg:
            try:
                print(f"error: {msg}", flush=True)
            except (BrokenPipeError, OSError):
                pass
        code = 2 if msg else int(e.code or 0)
    except Exception:  # noqa: BLE001 - a crash: said here, before a teardown that could hang
        try:
            traceback.print_exc()
        except (BrokenPipeError, OSError):
            pass
        code = 1
    finally:
        deadline = Deadline(SHUTDOWN_GRACE_S, f"shutdown did not finish within {SHUTDOWN_GRACE_S:g} s: exiting now")
        # a launcher that died took the pipe this node printed to: the rest of its output goes to a log
        kept = keep_output(node.get_name()) if node is not None and stopped_by else None
        if ex is not None:
            ex.shutdown(timeout_sec=2.0)
        if node is not None:
            try:
                node.close()                   # first: the Controller stops the robot without delay
            except Exception:  # noqa: BLE001
                try:
                    traceback.print_exc()
                except (BrokenPipeError, OSError):
                    pass
            if stopped_by and kept is None and stopped_by[0][0] == signal.SIGTERM:
                keep_output(node.get_name(), wait_s=1.0)   # the launcher's last threads may still be ending
        # the orderly stop is done; the DDS participant's teardown can spin with the GIL held (hard_exit)
        deadline.cancel()
        flush_output()
        exit_after(TEARDOWN_S, code & 0xFF)
        if node is not None:
            node.destroy_node()
        if rclpy.ok():
            rclpy.shutdown()
    return code
