"""The MotorMind ROS 2 graph as data: topics and their QoS, the nodes of each setup, the launch
arguments and the configuration they give the nodes. The one source of truth for
``launch/*.launch.py`` (real ROS 2 launch files) and ``motormind launch`` (separate processes
without the ros2 CLI): both write ``nodes(setup, args)``'s configuration to one file and start every node with
``config:=`` that file (``motormind/ros/settings.py``).

Pure Python: nothing here imports rclpy, so the CLI and the launch files can read it anywhere.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .package import params_file

NAMESPACE = "/motormind"


@dataclass(frozen=True)
class Topic:
    name: str                  # relative to the namespace
    type: str                  # ROS 2 type, e.g. std_msgs/msg/String
    reliable: bool = True
    latched: bool = False      # transient local: a late subscriber gets the last message(s)
    depth: int = 10
    why: str = ""


# QoS per topic (docs/ros2.md explains each choice)
TOPICS = {t.name: t for t in [
    Topic("task", "std_msgs/msg/String", True, True, 1, "the current task; latched so a late Planner gets it"),
    Topic("plan", "std_msgs/msg/String", True, True, 1, "the Planner's last decision; latched for late joiners"),
    Topic("commands", "std_msgs/msg/String", True, False, 10,
          "batches; reliable, never latched: a restarted Controller must not replay an old batch"),
    Topic("report", "std_msgs/msg/String", True, False, 10, "execution reports and Controller stop notices"),
    Topic("cancel", "std_msgs/msg/String", True, False, 10, "cancel requests; reliable: a lost cancel is unsafe"),
    Topic("estop", "std_msgs/msg/Bool", True, True, 1,
          "emergency stop; reliable and latched: a Controller that starts later still sees it"),
    Topic("verdict", "std_msgs/msg/String", True, False, 10, "Verifier verdicts"),
    Topic("escalation", "std_msgs/msg/String", True, False, 10, "Executor -> Planner: replan requests"),
    Topic("memory", "std_msgs/msg/String", True, True, 1, "Memory's summary; latched"),
    Topic("progress", "std_msgs/msg/String", True, True, 10,
          "Controller action-boundary events with the measured state (Monitor, state for prompts)"),
    Topic("events", "std_msgs/msg/String", True, False, 100, "record events (vlm_call, role_failed, ...)"),
    Topic("episode", "std_msgs/msg/String", True, True, 1, "episode start/end with the result; latched"),
    Topic("heartbeat", "std_msgs/msg/String", False, False, 10, "liveness for the Controller's watchdog"),
    Topic("state", "sensor_msgs/msg/JointState", False, False, 5, "measured joints (sensor data: best effort)"),
    Topic("eef_pose", "geometry_msgs/msg/PoseStamped", False, False, 5, "measured end-effector pose"),
    Topic("privileged/request", "std_msgs/msg/String", True, False, 10,
          "EVALUATOR ONLY: oracle brain calls and the success check, answered next to the simulator"),
    Topic("privileged/response", "std_msgs/msg/String", True, False, 10, "EVALUATOR ONLY: the answers"),
    # the operator console (motormind/ros/console_node.py, docs/console.md)
    Topic("pause", "std_msgs/msg/Bool", True, True, 1,
          "operator pause; latched: the Controller holds at its next action boundary, the Executor before "
          "its next batch, until false"),
    Topic("console/mode", "std_msgs/msg/String", True, True, 1,
          "the console's approval mode and taken-over roles; latched for the Executor and Verifier"),
    Topic("console/request", "std_msgs/msg/String", True, False, 10,
          "Executor/Verifier -> console: a batch to approve, a taken-over role's question"),
    Topic("console/response", "std_msgs/msg/String", True, False, 10, "console -> Executor/Verifier: the answers"),
    # grounding (docs/grounding.md, "Over ROS 2"): what a role node needs to mark frames and measure points
    Topic("cameras", "std_msgs/msg/String", True, True, 1,
          "each camera's calibration (CameraCalibration.to_json: intrinsics, mount, pose, depth or why not) "
          "and the fingers' closing axis; latched for late joiners"),
    Topic("scene_facts", "std_msgs/msg/String", True, True, 1,
          "what the backend knows of the scene (Robot.scene_facts: the table's height); latched"),
]}
# what the recorder writes (record:=FILE): every topic but the liveness beat and the evaluator's channel
NOT_RECORDED = ("heartbeat", "privileged/request", "privileged/response")
RECORDED = tuple(n for n in TOPICS if n not in NOT_RECORDED)
RECORDER_WAIT_S = 30.0     # with record:=FILE the episode starts once the recorder listens, or after this

IMAGE_TOPIC = Topic("camera/{name}/image", "sensor_msgs/msg/Image", False, False, 1,
                    "camera images; best effort (a late frame is useless); the Controller repeats the last "
                    "frames every image_repeat_s for late joiners (best effort cannot be latched)")
DEPTH_TOPIC = Topic("camera/{name}/depth", "sensor_msgs/msg/Image", False, False, 1,
                    "depth images (32FC1, metres along the optical axis, NaN: no reading), stamped as the colour "
                    "frame of the same look; best effort and repeated like the images")
CAMERA_INFO_TOPIC = Topic("camera/{name}/camera_info", "sensor_msgs/msg/CameraInfo", True, True, 1,
                          "the camera's intrinsics as ROS tools read them (rviz, image_proc); latched. The pose, "
                          "the mount and depth availability are on the cameras topic")
CAMERA_TOPICS = {"image": IMAGE_TOPIC, "depth": DEPTH_TOPIC, "camera_info": CAMERA_INFO_TOPIC}
SERVICES = {"reset": "std_srvs/srv/Trigger", "stop": "std_srvs/srv/Trigger"}


def camera_topic(name: str) -> tuple[str, str] | None:
    """("camera name", "image" | "depth" | "camera_info") of a per-camera topic name, else None."""
    parts = name.split("/")
    if len(parts) == 3 and parts[0] == "camera" and parts[1] and parts[2] in CAMERA_TOPICS:
        return parts[1], parts[2]
    return None


def topic_spec(name: str) -> Topic:
    cam = camera_topic(name)
    if cam is not None:
        t = CAMERA_TOPICS[cam[1]]
        return Topic(name, t.type, t.reliable, t.latched, t.depth, t.why)
    if name.startswith("camera/"):
        raise KeyError(f"{name}: a camera topic is camera/NAME/{{{', '.join(CAMERA_TOPICS)}}}")
    return TOPICS[name]


# -- parameters -------------------------------------------------------------------------------------
ROLES = ("controller", "planner", "executor", "verifier", "monitor", "memory", "recorder", "console")
EXECUTABLES = {r: f"motormind-{r}" for r in ROLES}     # console scripts, installed under lib/motormind


@dataclass(frozen=True)
class Arg:
    name: str
    default: str
    help: str
    kind: type = str


SHARED_ARGS = [
    Arg("config", "", "the configuration file the launch starts from (default: the installed config/motormind.yaml)"),
    Arg("record", "", "write the episode to this MCAP file (empty: no recording)"),
    Arg("vlm", "openai", "with brain:=openai, the VLM config (configs/vlm/NAME.yaml or a path)"),
    Arg("console", "false", "start the operator console node (a web page; docs/console.md)", bool),
    Arg("console_host", "127.0.0.1", "with console:=true, the address the page is served on"),
    Arg("console_port", "8765", "with console:=true, the port (0: any free one)", int),
    Arg("console_token", "", "with console:=true, the control token (empty: a random one, printed at start)"),
    Arg("console_manual_queue", "", "with console:=true, the manual VLM endpoint's queue folder (vlm:=manual): "
        "its requests are listed and answered on the page"),
]
ARGS = {
    "sim": [Arg("suite", "libero_spatial", "LIBERO-PRO suite"), Arg("task", "0", "task index", int),
            Arg("init_state", "0", "init state index", int), Arg("seed", "0", "env seed", int),
            Arg("brain", "oracle", "oracle (privileged) | openai | scripted"),
            Arg("brain_script", "", "with brain:=scripted, a JSON file {role: [answers]}"),
            Arg("exit_on_end", "true", "stop everything when the episode ends (exit code 0 on success)", bool),
            *SHARED_ARGS],
    "xarm6": [Arg("robot_ip", "", "the xArm6 controller's IPv4 address (required)"),
              Arg("camera", "", "cameras, name=source[,name=source]: a device index, path or URL"),
              Arg("command_port", "502", "the controller's command port (the emulator may use another)", int),
              Arg("brain", "openai", "openai | scripted"),
              Arg("brain_script", "", "with brain:=scripted, a JSON file {role: [answers]}"),
              Arg("instruction", "", "the task (else publish one on /motormind/task)"),
              Arg("exit_on_end", "false", "stop everything when the episode ends", bool),
              *SHARED_ARGS],
    "fake": [Arg("brain", "scripted", "scripted | openai"),
             Arg("brain_script", "", "with brain:=scripted, a JSON file {role: [answers]}"),
             Arg("instruction", "", "the task (else publish one on /motormind/task)"),
             Arg("exit_on_end", "false", "stop everything when the episode ends", bool),
             *SHARED_ARGS],
}
SETUPS = tuple(ARGS)


def _bool(v) -> bool:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise ValueError(f"not a boolean: {v!r}")


def resolve_args(setup: str, given: dict | None = None) -> dict:
    """Launch argument values (strings, as a launch file or a command line gives them) -> typed."""
    if setup not in ARGS:
        raise ValueError(f"unknown setup {setup!r} (one of {', '.join(SETUPS)})")
    given = dict(given or {})
    specs = {a.name: a for a in ARGS[setup]}
    unknown = sorted(set(given) - set(specs))
    if unknown:
        from ..strict_config import nearest
        hint = nearest(unknown[0], specs) if len(unknown) == 1 else ""
        raise ValueError(f"unknown argument(s) for {setup}: {', '.join(unknown)}{hint} "
                         f"(known: {', '.join(specs)})")
    out = {}
    for name, a in specs.items():
        v = given.get(name, a.default)
        try:
            out[name] = _bool(v) if a.kind is bool else a.kind(v)
        except ValueError:
            want = {bool: "true or false", int: "a whole number"}.get(a.kind, f"a {a.kind.__name__}")
            raise ValueError(f"{name}: must be {want}, got {v!r}") from None
    return out


@dataclass
class NodeSpec:
    name: str
    role: str
    respawn: bool = False
    respawn_delay_s: float = 1.0
    exit_ends_launch: bool = False                   # its exit stops the whole launch

    @property
    def executable(self) -> str:
        return EXECUTABLES[self.role]

    def to_json(self) -> dict:
        return {"name": self.name, "role": self.role, "executable": self.executable, "respawn": self.respawn,
                "respawn_delay_s": self.respawn_delay_s, "exit_ends_launch": self.exit_ends_launch}


BRAINS = {"sim": ("oracle", "openai", "scripted"), "xarm6": ("openai", "scripted"), "fake": ("scripted", "openai")}


def check_args(setup: str, a: dict) -> None:
    """Every launch argument is checked here, before any node starts (a bad one found by a node
    would surface only once the graph is up: the Controller with its robot, the arm connected),
    each refusal a ValueError naming the argument. What would leave a part of the graph running:
    every role node needs a brain that can answer (a role node without one exits, and a Controller
    whose watchdog never hears an Executor never arms it), the xArm6 needs its address. Then each
    value: the brain's script or VLM config loads; the simulation's suite, task and init state exist
    (``session.checks.check_grid``, the check ``motormind eval`` makes); the arm's address, port and
    cameras are well formed; the recording can be written; the console's port is free."""
    from ..errors import ConfigError
    if a["brain"] not in BRAINS[setup]:
        why = " (it reads the simulator's privileged state: simulation only)" if a["brain"] == "oracle" else ""
        raise ValueError(f"brain: {a['brain']!r} is not one of {' | '.join(BRAINS[setup])} for {setup}{why}")
    if a["brain"] == "scripted":
        if not a["brain_script"]:
            raise ValueError("brain_script: brain:=scripted needs its script, a JSON file {role: [answers]} "
                             "(brain_script:=FILE)")
        if not Path(a["brain_script"]).is_file():
            raise ValueError(f"brain_script: no such file: {a['brain_script']}")
    if setup == "xarm6" and not a["robot_ip"]:
        raise ValueError("robot_ip: required for the xArm6 (robot_ip:=192.168.1.222)")
    try:
        _check_values(setup, a)
    except ConfigError as e:
        raise ValueError(str(e)) from None


def _check_values(setup: str, a: dict) -> None:
    """The values of ``check_args``: a ConfigError naming the launch argument."""
    from ..errors import ConfigError
    from ..registry import BrainConfig
    if a["brain"] == "scripted":                 # the script the brain will load, loaded the same way
        from ..brains.scripted import ScriptedBrain
        try:
            ScriptedBrain.from_config(BrainConfig("scripted", script=a["brain_script"]))
        except ConfigError as e:
            raise ConfigError(f"brain_script: {str(e).removeprefix('script: ')}") from None
    if a["brain"] == "openai":                   # the VLM config exists and is valid (its endpoint may come later)
        from ..brains.openai_brain import load_vlm_config
        try:
            vlm = load_vlm_config(a["vlm"] or "openai")
        except ConfigError as e:
            raise ConfigError(f"vlm: {e}") from None
        if vlm.serve == "oracle" and setup != "sim":
            raise ConfigError("vlm: serve: oracle reads the simulator's privileged state: simulation only "
                              "(over ROS 2 the oracle behind serve-brain is the sim Controller's)")
    if setup == "sim":
        from ..session.checks import check_grid
        check_grid("libero", [a["suite"]], [a["task"]], [a["init_state"]], flags=("suite", "task", "init_state"))
        if not 0 <= a["seed"] < 2 ** 32:
            raise ConfigError(f"seed: must be within 0..{2 ** 32 - 1}, got {a['seed']}")
    if setup == "xarm6":
        from motormind.robots.cameras import parse_camera_specs
        from motormind.robots.xarm6 import check_ipv4
        try:
            check_ipv4(a["robot_ip"])
        except ConfigError as e:
            raise ConfigError(f"robot_ip: {e}") from None
        if not 1 <= a["command_port"] <= 65535:
            raise ConfigError(f"command_port: must be within 1..65535, got {a['command_port']}")
        parse_camera_specs(a["camera"])          # its errors name camera
    if a["record"]:
        _check_writable("record", Path(a["record"]))
    if a["console"]:
        _check_port(a["console_host"], a["console_port"])


def _check_writable(name: str, path: Path) -> None:
    """``path`` can be created (its directories made, as the recorder does) and written."""
    from ..errors import ConfigError
    path = path.absolute()
    if path.is_dir():
        raise ConfigError(f"{name}: {path} is a directory, not a file")
    parent = path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ConfigError(f"{name}: cannot write {path}: {parent} is not a directory")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise ConfigError(f"{name}: cannot write {path}: permission denied")


def _check_port(host: str, port: int) -> None:
    """The console's address can be served: bound now and released (the console node binds it again)."""
    import errno

    from ..errors import ConfigError
    from ..webserver import bind
    if not 0 <= port <= 65535:
        raise ConfigError(f"console_port: {port} is outside 0..65535")
    try:
        bind(host, port).close()
    except OSError as e:
        name = "console_port" if e.errno in (errno.EADDRINUSE, errno.EACCES) else "console_host"
        raise ConfigError(f"{name}: cannot serve on {host}:{port}: {e.strerror or e}") from None


def overrides_for(setup: str, a: dict) -> dict:
    """What a setup and its launch arguments change in the configuration (``settings.merge``)."""
    script = str(Path(a["brain_script"]).absolute()) if a["brain_script"] else ""
    out = {"brain": {"type": a["brain"], "script": script, "vlm": a["vlm"]}}
    if setup == "sim":
        out.update(profile="libero_panda",
                   robot={"type": "libero", "suite": a["suite"], "task": a["task"], "init_state": a["init_state"],
                          "seed": a["seed"]},
                   controller={"publish_task": True, "privileged_service": True},
                   executor={"privileged_evaluator": True, "exit_on_end": a["exit_on_end"]})
    elif setup == "xarm6":
        out.update(profile="xarm6",
                   robot={"type": "xarm6", "ip": a["robot_ip"], "command_port": a["command_port"],
                          "cameras": [c for c in (x.strip() for x in a["camera"].split(",")) if c]},
                   controller={"publish_task": False, "privileged_service": False},
                   executor={"privileged_evaluator": False, "exit_on_end": a["exit_on_end"]},
                   planner={"instruction": a["instruction"]})
    else:
        out.update(profile="fake", robot={"type": "fake", "realtime": True},
                   controller={"publish_task": False, "privileged_service": False},
                   executor={"privileged_evaluator": False, "exit_on_end": a["exit_on_end"]},
                   planner={"instruction": a["instruction"]})
    # with record:=FILE the episode waits for the recorder (role_nodes.RoleNode.await_recorder)
    wait = RECORDER_WAIT_S if a["record"] else 0.0
    out["planner"] = {**out.get("planner", {}), "wait_for_recorder_s": wait}
    out["executor"]["wait_for_recorder_s"] = wait
    if a["record"]:
        out["recorder"] = {"path": str(Path(a["record"]).absolute())}
    if a["console"]:
        out["console"] = {"host": a["console_host"], "port": a["console_port"], "token": a["console_token"],
                          "manual_queue": a["console_manual_queue"]}
    return out


def nodes(setup: str, given: dict | None = None):
    """The nodes of a setup and the one configuration they all read (a ``settings.StackConfig``:
    the configuration file, ``config:=`` or the packaged one, with the launch arguments applied,
    loaded strictly and its robot checked against its profile). ValueError (naming the argument or
    the field) for a launch that could start only a part of the graph."""
    from ..errors import ConfigError
    from . import settings
    a = resolve_args(setup, given)
    check_args(setup, a)
    base = Path(a["config"]) if a["config"] else params_file()
    try:
        cfg = settings.stack_from_dict(settings.merge(settings.read_yaml(base), overrides_for(setup, a)),
                                       f"{base} (with the {setup} launch arguments)")
        cfg.check_robot()
    except ConfigError as e:
        raise ValueError(str(e)) from None
    out = [
        # the only node that owns the robot; a restarted Controller comes up stopped (docs/ros2.md)
        NodeSpec("controller", "controller", respawn=True),
        NodeSpec("planner", "planner"),
        NodeSpec("executor", "executor", exit_ends_launch=bool(a["exit_on_end"])),
        NodeSpec("verifier", "verifier"),
        NodeSpec("monitor", "monitor"),
        NodeSpec("memory", "memory"),
    ]
    if a["console"]:
        out.append(NodeSpec("console", "console"))
    if a["record"]:
        out.append(NodeSpec("recorder", "recorder"))
    return out, cfg


def ros_env(domain_id: int | None = None, localhost: bool = True) -> dict:
    """Environment for the node processes: a domain and loopback-only discovery."""
    env = {}
    if domain_id is not None:
        env["ROS_DOMAIN_ID"] = str(int(domain_id))
    if localhost:
        env["ROS_AUTOMATIC_DISCOVERY_RANGE"] = "LOCALHOST"
    env.setdefault("RMW_IMPLEMENTATION", os.environ.get("RMW_IMPLEMENTATION", "rmw_fastrtps_cpp"))
    return env
