"""The one configuration file every MotorMind ROS 2 node reads (``configs/ros/motormind.yaml``).

A node has one ROS parameter, ``config``: the path of this file (default: the packaged one). Each
node reads the whole file strictly and uses its own sections; ``motormind launch`` and the launch
files write the file once per launch (the packaged one with the launch arguments applied,
``graph.nodes``), so every node of a graph reads the same settings::

    profile: libero_panda              # the robot profile every node describes and the Controller validates with
    robot: {type: libero, suite: libero_spatial, task: 0}    # the backend (motormind/registry.py ROBOTS)
    brain: {type: oracle}              # the roles' brain (motormind/registry.py BRAINS)
    episode: {max_batches: 40}         # motormind/episode/config.py (omitted: its defaults)
    nodes: ...  controller: ...  executor: ...  planner: ...  recorder: ...  console: ...

Pure Python (no rclpy): the launcher and the command line read it anywhere.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..episode.config import EpisodeConfig
from ..errors import ConfigError, yaml_error
from ..mcap_record import FLUSH_S
from ..registry import BrainConfig, check_pairing, robot_config
from ..strict_config import from_mapping, to_mapping
from .package import params_file


@dataclass
class NodeSettings:
    """What every node shares."""
    heartbeat_period_s: float = field(default=0.25, metadata={"gt": 0})   # every node says it is alive this often
    image_wait_s: float = field(default=2.0, metadata={"ge": 0})          # a role waits this long for new images
    rpc_timeout_s: float = field(default=60.0, metadata={"gt": 0})        # privileged oracle / evaluator calls


@dataclass
class ControllerSettings:
    state_rate_hz: float = field(default=10.0, metadata={"ge": 0})        # JointState + PoseStamped
    image_rate_hz: float = field(default=0.0, metadata={"ge": 0})         # images besides those after each batch
    image_repeat_s: float = field(default=1.0, metadata={"ge": 0})        # idle: repeat the last frames (0: never)
    publish_task: bool = True              # simulation: publish the benchmark's instruction on /motormind/task
    privileged_service: bool = True        # simulation: answer oracle and success-check calls (evaluator only)
    watchdog_nodes: tuple[str, ...] = ("executor", "monitor")             # the nodes that feed the Controller
    watchdog_timeout_s: float = field(default=2.0, metadata={"gt": 0})    # silent this long -> stop the robot
    state_dir: str = ""                    # where the restart marker lives (default $ROS_HOME/motormind)


@dataclass
class ExecutorSettings:
    privileged_evaluator: bool = True      # simulation: ask the evaluator for success and steps
    exit_on_end: bool = False              # exit when the episode ends (0 on success)
    wait_for_recorder_s: float = field(default=0.0, metadata={"ge": 0})   # > 0: the first batch waits for the recorder


@dataclass
class PlannerSettings:
    instruction: str = ""                  # start on this task at once (else wait for /motormind/task)
    wait_for_recorder_s: float = field(default=0.0, metadata={"ge": 0})   # > 0: start once the recorder listens


@dataclass
class RecorderSettings:
    path: str = ""                         # the MCAP file (record:=FILE)
    flush_s: float = field(default=FLUSH_S, metadata={"gt": 0})   # on disk within this long (what a SIGKILL loses)


@dataclass
class ConsoleSettings:
    host: str = "127.0.0.1"                # the operator console's web page (console:=true)
    port: int = field(default=8765, metadata={"ge": 0, "le": 65535})     # 0: any free port (printed at start)
    token: str = ""                        # control token; empty: a random one, printed at start
    reply_wait_s: float = field(default=3.0, metadata={"gt": 0})          # a jog waits this long for accept/reject
    frame_hz: float = field(default=5.0, metadata={"ge": 0})              # camera frames shown per second at most
    stale_batch_s: float = field(default=120.0, metadata={"gt": 0})       # a silent batch no longer blocks a jog
    hold_s: float = field(default=2.0, metadata={"ge": 0})                # a new task's events wait for its start
    manual_queue: str = ""                 # the manual VLM endpoint's queue folder, if reachable here (docs/console.md)


def _robot(value, source: str, where: str):
    return robot_config(value, source, where)


@dataclass
class StackConfig:
    profile: str = "libero_panda"
    robot: object = field(default_factory=lambda: robot_config({"type": "libero"}), metadata={"load": _robot})
    brain: BrainConfig = field(default_factory=BrainConfig)
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    nodes: NodeSettings = field(default_factory=NodeSettings)
    controller: ControllerSettings = field(default_factory=ControllerSettings)
    executor: ExecutorSettings = field(default_factory=ExecutorSettings)
    planner: PlannerSettings = field(default_factory=PlannerSettings)
    recorder: RecorderSettings = field(default_factory=RecorderSettings)
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    source: str = field(default="", metadata={"internal": True})

    def load_profile(self):
        """The profile, loaded strictly (a ConfigError names this file's ``profile``)."""
        from ..profile import load_profile
        try:
            return load_profile(self.profile)
        except ConfigError as e:
            raise ConfigError(f"{self.source or 'config'}: profile: {e}") from None

    def check_robot(self, profile=None) -> None:
        """The backend and the profile agree (``registry.check_pairing``), else a ConfigError."""
        try:
            check_pairing(self.robot, profile or self.load_profile())
        except ConfigError as e:
            raise ConfigError(f"{self.source or 'config'}: {e}") from None

    def to_dict(self) -> dict:
        return to_mapping(self)


def stack_from_dict(d: dict, source: str = "") -> StackConfig:
    cfg = from_mapping(StackConfig, d, source)
    cfg.source = source
    return cfg


def read_yaml(path) -> dict:
    p = Path(path)
    try:
        doc = yaml.safe_load(p.read_text())
    except OSError as e:
        raise ConfigError(f"config: cannot read {p}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        raise yaml_error(p, e) from None
    return {} if doc is None else doc


def load_stack(path=None) -> StackConfig:
    """The configuration file at ``path`` (default: the packaged configs/ros/motormind.yaml)."""
    p = Path(path) if path else params_file()
    return stack_from_dict(read_yaml(p), str(p))


def merge(base: dict, overrides: dict) -> dict:
    """``overrides`` ({"robot": {"task": 3}, "profile": "fake"}) laid over ``base``, section by section.
    A ``robot`` of another type replaces the base's robot (its fields are another backend's)."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for k, v in overrides.items():
        if k == "robot" and isinstance(v, dict) and (out.get("robot") or {}).get("type") != v.get("type"):
            out[k] = dict(v)
        elif isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = {**out[k], **v}
        else:
            out[k] = v
    return out


def write(cfg: StackConfig | dict, path) -> Path:
    d = cfg.to_dict() if isinstance(cfg, StackConfig) else cfg
    p = Path(path)
    p.write_text("# written by motormind launch: the packaged configuration with the launch arguments applied\n"
                 + yaml.safe_dump(d, default_flow_style=False, sort_keys=False))
    return p


def write_with(path, overrides: dict, base=None) -> Path:
    """The configuration ``base`` (default: the packaged file) with ``overrides`` laid over it
    (``merge``), checked strictly and written to ``path``: a configuration for one test or bench run."""
    src = Path(base) if base else params_file()
    cfg = stack_from_dict(merge(read_yaml(src), overrides), f"{src} (with {', '.join(overrides)})")
    return write(cfg, path)
