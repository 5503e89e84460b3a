"""Robot profiles: per-command limits, workspace box, orientation bound, direction words, speeds,
tolerances, the arm's own safety layer, and the backends the profile describes.

Profiles are YAML files in ``configs/robots/``; ``load_profile("libero_panda")`` finds them by name.
All lengths are millimetres and all angles degrees, in the robot's base frame. A profile is
immutable once loaded: its mappings (workspace, directions, axes) are read-only, their vectors too.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from .errors import ConfigError, yaml_error
from .geometry import tilt_deg
from .paths import config_dir
from .strict_config import from_mapping, unknown_key_message
from .views import parse_views


def apart(value: float, limit: float, spec: str = "g", limit_spec: str = "g") -> str:
    """``value`` as text in ``spec``, with as many more digits as it takes to read on its own side
    of ``limit`` as written (in ``limit_spec``): a refusal never contradicts itself, so 0.4999999
    against a 0.5 mm minimum reads "0.4999999 mm is below the minimum move 0.5 mm", not "0.5 mm"."""
    value, limit = float(value), float(limit)
    if not (math.isfinite(value) and math.isfinite(limit)) or value == limit:
        return format(value, spec)
    shown = float(format(limit, limit_spec))
    for sp in (spec, ".4g", ".7g", ".10g", ".13g"):
        text = format(value, sp)
        if (float(text) - shown) * (value - limit) > 0:
            return text
    return repr(value)


class ReadOnly(Mapping):
    """A mapping that cannot be changed (a profile's workspace box, direction words, axes)."""

    def __init__(self, items: dict):
        self._d = dict(items)

    def __getitem__(self, key):
        return self._d[key]

    def __iter__(self):
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __repr__(self) -> str:
        return f"ReadOnly({self._d!r})"


def _frozen_vector(a: np.ndarray) -> np.ndarray:
    a = np.array(a, dtype=float)
    a.setflags(write=False)
    return a


MAX_TCP_OFFSET_MM = 500.0      # a tool longer than this is not a gripper on an xArm6 (reach ~700 mm)


@dataclass(frozen=True)
class Safety:
    """The arm's own safety layer, which the xArm6 backend writes on connect and reads back
    (robots/xarm6.py): the TCP boundary is the profile's workspace box; these are the rest.

    The TCP offset says where the tool centre point is in the flange frame. The arm's fence, the
    workspace box and every pose the arm reports are about that point, so it is required: a profile
    that leaves it out would put the fence at the flange, with the fingertips ~170 mm beyond it."""
    fence: bool = True                                   # the TCP boundary is enforced by the arm
    reduced_mode: bool = True                            # the arm's reduced (slow) mode
    reduced_tcp_speed_mm_s: float | None = field(default=None, metadata={"gt": 0})   # its TCP speed cap
    collision_sensitivity: int | None = field(default=None, metadata={"ge": 0, "le": 5})   # 0..5
    tcp_load_kg: float | None = field(default=None, metadata={"ge": 0})          # the payload: the tool's mass
    tcp_load_com_mm: tuple[float, ...] = (0.0, 0.0, 0.0)                           # its centre of mass, flange frame
    tcp_offset_mm: tuple[float, ...] | None = None        # the TCP in the flange frame: x, y, z (required)
    tcp_offset_rpy_deg: tuple[float, ...] = (0.0, 0.0, 0.0)  # the TCP frame's roll, pitch, yaw in the flange frame

    def __post_init__(self) -> None:
        if len(self.tcp_load_com_mm) != 3:
            raise ConfigError(f"tcp_load_com_mm: must be [x, y, z] mm, got {list(self.tcp_load_com_mm)!r}")
        if self.reduced_mode and self.reduced_tcp_speed_mm_s is None:
            raise ConfigError("reduced_tcp_speed_mm_s: missing (reduced_mode is on: the arm needs its speed cap)")
        if self.tcp_offset_mm is None:
            raise ConfigError("tcp_offset_mm: missing (where the tool centre point is in the flange frame, "
                              "[x, y, z] mm: the fence and the workspace box apply to it; [0, 0, 0] only "
                              "for a bare flange)")
        if len(self.tcp_offset_mm) != 3:
            raise ConfigError(f"tcp_offset_mm: must be [x, y, z] mm, got {list(self.tcp_offset_mm)!r}")
        if any(abs(v) > MAX_TCP_OFFSET_MM for v in self.tcp_offset_mm):
            raise ConfigError(f"tcp_offset_mm: each of x, y, z must be within +-{MAX_TCP_OFFSET_MM:g} mm, "
                              f"got {list(self.tcp_offset_mm)!r}")
        if len(self.tcp_offset_rpy_deg) != 3 or any(abs(v) > 180 for v in self.tcp_offset_rpy_deg):
            raise ConfigError("tcp_offset_rpy_deg: must be [roll, pitch, yaw] deg, each within +-180, "
                              f"got {list(self.tcp_offset_rpy_deg)!r}")

    @property
    def tcp_offset(self) -> tuple[float, ...]:
        """The TCP offset as the controller stores it: x, y, z (mm), roll, pitch, yaw (deg)."""
        return tuple(float(v) for v in (*self.tcp_offset_mm, *self.tcp_offset_rpy_deg))


@dataclass(frozen=True)
class Reach:
    """How far the arm reaches comfortably: the wrist flange at most ``radius_mm`` from the shoulder,
    with the tool pointing down the flange ``flange_above_grip_mm`` above the grip point. Planners that
    choose where to grasp weigh it (the oracle: motormind/brains/oracle/tuning.py); the Controller
    does not (the workspace box is its bound)."""
    shoulder_mm: tuple[float, ...] | None = None                        # the shoulder's centre, base frame: x, y, z
    radius_mm: float | None = field(default=None, metadata={"gt": 0})   # the flange's comfortable distance from it
    flange_above_grip_mm: float | None = field(default=None, metadata={"ge": 0})   # the flange over a top-down grip

    def __post_init__(self) -> None:
        for name, why in (("shoulder_mm", "[x, y, z] mm, base frame"), ("radius_mm", "mm from the shoulder"),
                          ("flange_above_grip_mm", "mm")):
            if getattr(self, name) is None:
                raise ConfigError(f"{name}: missing ({why})")
        if len(self.shoulder_mm) != 3:
            raise ConfigError(f"shoulder_mm: must be [x, y, z] mm, got {list(self.shoulder_mm)!r}")


@dataclass(frozen=True)
class Limits:
    max_move_mm: float
    min_move_mm: float
    max_rotate_deg: float
    min_rotate_deg: float
    max_wait_s: float
    max_batch: int
    guarded_moves: bool = False       # a move may say ``until: contact`` (the backend reports contact in
                                      # MotionResult.contact); false: such a move is refused, naming this


@dataclass(frozen=True)
class Tolerances:
    position_mm: float
    rotation_deg: float
    settle_mm_per_step: float
    max_steps_per_command: int
    continue_mm: float = 0.0          # a move that settles this close to its target without contact is
                                      # done (reported with its error); farther, or against contact: blocked
    blend_mm: float = 0.0             # a move followed by another move passes within this of its target
                                      # without stopping (0: every move settles); the next one is aimed
                                      # from this one's target, so a chain of moves does not drift
    blend_deg: float = 0.0            # the same for a rotation followed by another rotation
    blend_fraction: float = 0.0       # a blend is at most this fraction of its command's distance (angle):
                                      # it never eats a command (required when blend_mm or blend_deg > 0)
    no_progress_steps: int = 0        # control steps: a move farther than position_mm from its target that
    no_progress_mm: float = 0.0       # has come no closer than this (mm) over that many steps ends early,
                                      # stalled (e.g. against the arm's reach limit, creeping without
                                      # contact), instead of running to max_steps_per_command (0: off)


@dataclass(frozen=True)
class RobotProfile:
    name: str
    description: str
    limits: Limits
    workspace_mm: dict            # axis -> (lo, hi)
    directions: dict              # word -> unit np.ndarray(3)
    rotation_frame: str
    rotation_axes: dict           # roll/pitch/yaw -> unit np.ndarray(3)
    gripper_max_width_mm: float
    gripper_min_width_mm: float
    move_mm_s: float
    rotate_deg_s: float
    tolerances: Tolerances
    period_s: float
    max_tilt_deg: float           # the tool's approach axis (z) at most this far from straight down (base -z)
    safety: Safety | None = None  # the arm's own safety layer (None: the profile has none)
    source: str = ""
    cameras: dict = field(default_factory=dict)   # name -> views.CameraView: where each camera looks from
    backends: tuple = ()          # the robot backends whose hardware this profile describes (motormind/registry.py)
    finger_length_mm: float | None = None   # the fingers' length, palm to tips (None: not stated); prompts say it
    tip_past_grip_mm: float | None = None   # the fingertips' ends reach this far past the grip point, along the
                                            # fingers (None: not stated)
    reach: Reach | None = None    # the arm's comfortable reach (None: not stated; the oracle needs it)

    def in_workspace(self, pos_mm) -> list[str]:
        """The workspace limits that ``pos_mm`` (base frame) violates, e.g. ['z=-45.0 < -40.0']; a
        position that is not finite violates them all (the check fails closed)."""
        out = []
        for i, ax in enumerate("xyz"):
            lo, hi = self.workspace_mm[ax]
            if not math.isfinite(pos_mm[i]):
                out.append(f"{ax}={pos_mm[i]} is not a finite position")
            elif pos_mm[i] < lo - 1e-9:
                out.append(f"{ax}={apart(pos_mm[i], lo, '.1f', '.1f')} < {lo:.1f}")
            elif pos_mm[i] > hi + 1e-9:
                out.append(f"{ax}={apart(pos_mm[i], hi, '.1f', '.1f')} > {hi:.1f}")
        return out

    def orientation_issue(self, rot_target: np.ndarray, rot_now: np.ndarray | None = None) -> str:
        """Why orienting the tool at ``rot_target`` breaks the tilt bound ("" when it does not). A
        rotation that brings an already too tilted tool back toward gripper-down is allowed."""
        t = tilt_deg(rot_target)
        if t <= self.max_tilt_deg + 1e-6:
            return ""
        if rot_now is not None and t <= tilt_deg(rot_now) + 1e-6:
            return ""
        return f"tilt {apart(t, self.max_tilt_deg, '.1f')} deg from gripper-down > max_tilt_deg {self.max_tilt_deg:g}"

    def describe_limits(self) -> dict:
        """The limits as plain data, for prompts and docs."""
        lim = self.limits
        return {
            "max_move_mm": lim.max_move_mm, "min_move_mm": lim.min_move_mm,
            "max_rotate_deg": lim.max_rotate_deg, "min_rotate_deg": lim.min_rotate_deg,
            "max_wait_s": lim.max_wait_s, "max_batch": lim.max_batch, "max_tilt_deg": self.max_tilt_deg,
            "guarded_moves": lim.guarded_moves,
            "workspace_mm": {k: list(v) for k, v in self.workspace_mm.items()},
            "directions": sorted(self.directions), "rotation_axes": sorted(self.rotation_axes),
            "rotation_frame": self.rotation_frame,
        }


_SECTIONS = {         # section -> its keys (None: free-form); every section but the _OPTIONAL ones is required
    "name": None, "description": None, "backends": None,
    "safety": tuple(f for f in Safety.__dataclass_fields__),
    "reach": tuple(f for f in Reach.__dataclass_fields__),
    "cameras": None,  # camera name -> its view (motormind/views.py checks each)
    "limits": ("max_move_mm", "min_move_mm", "max_rotate_deg", "min_rotate_deg", "max_wait_s", "max_batch",
               "guarded_moves"),
    "workspace_mm": ("x", "y", "z"),
    "orientation": ("max_tilt_deg",),
    "directions": None, "rotation": ("frame", "axes"),
    "gripper": ("max_width_mm", "min_width_mm", "finger_length_mm", "tip_past_grip_mm"),
    "speeds": ("move_mm_s", "rotate_deg_s"),
    "tolerances": ("position_mm", "rotation_deg", "settle_mm_per_step", "max_steps_per_command", "continue_mm",
                   "blend_mm", "blend_deg", "blend_fraction", "no_progress_steps", "no_progress_mm"),
    "control": ("period_s",),
}
_OPTIONAL = ("description", "safety", "cameras", "backends", "reach")


class _Reader:
    """Reads one profile file; every error names the file and the field, and says the rule."""

    def __init__(self, source: str):
        self.source = source or "profile"

    def fail(self, field: str, message: str):
        raise ConfigError(f"{self.source}: {field}: {message}")

    def section(self, d: dict, key: str) -> dict:
        v = d[key]
        if not isinstance(v, dict):
            self.fail(key, f"must be a mapping, got {type(v).__name__}")
        keys = _SECTIONS[key]
        if keys is not None:
            extra = set(v) - set(keys)
            if extra:
                self.fail(key, unknown_key_message(extra, keys))
        return v

    def num(self, d: dict, key: str, where: str, positive: bool = True) -> float:
        f = f"{where}.{key}"
        if key not in d:
            self.fail(f, "missing")
        v = d[key]
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(f, f"must be a finite number, got {v!r}")
        if positive and v <= 0:
            self.fail(f, f"must be > 0, got {v!r}")
        return float(v)

    def flag(self, d: dict, key: str, where: str, default: bool = False) -> bool:
        """An optional true/false (absent: ``default``)."""
        v = d.get(key, default)
        if not isinstance(v, bool):
            self.fail(f"{where}.{key}", f"must be true or false, got {v!r}")
        return v

    def count(self, d: dict, key: str, where: str) -> int:
        """A whole number >= 1 (``2.0`` is fine, ``0.5`` and ``true`` are not)."""
        v = self.num(d, key, where)
        if v != int(v) or v < 1:
            self.fail(f"{where}.{key}", f"must be a whole number >= 1, got {d[key]!r}")
        return int(v)

    def ordered(self, lo: float, hi: float, field: str, lo_name: str, hi_name: str, strict: bool = False) -> None:
        if lo > hi or (strict and lo == hi):
            self.fail(field, f"{lo_name} {lo:g} must be {'<' if strict else '<='} {hi_name} {hi:g}")

    def unit(self, v, field: str) -> np.ndarray:
        nums = v if isinstance(v, list) and len(v) == 3 else None
        if nums is None or any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x)
                               for x in nums) or math.sqrt(sum(float(x) ** 2 for x in nums)) < 1e-9:
            self.fail(field, f"must be a non-zero 3-vector [x, y, z] of finite numbers, got {v!r}")
        a = np.asarray(nums, dtype=float)
        return a / np.linalg.norm(a)

    def views(self, section, directions: dict) -> dict:
        try:
            return parse_views(section, directions)
        except ConfigError as e:
            raise ConfigError(f"{self.source}: {e}") from None

    def words(self, d, field: str) -> dict:
        if not isinstance(d, dict) or not d:
            self.fail(field, f"must be a non-empty mapping word -> [x, y, z], got {type(d).__name__}")
        out = {}
        for k, v in d.items():
            if not isinstance(k, str) or not k.strip():
                self.fail(field, f"{k!r} is not a word")
            out[k] = self.unit(v, f"{field}.{k}")
        return out


def profile_from_dict(d: dict, source: str = "") -> RobotProfile:
    """Build a profile from its YAML mapping. Anything that would loosen a check (a missing, unknown,
    non-finite or inverted value) is a ConfigError naming ``source`` and the field: a profile that
    does not load is safer than one that fails open."""
    r = _Reader(source)
    if not isinstance(d, dict):
        r.fail("profile", f"must be a mapping, got {type(d).__name__}")
    extra = set(d) - set(_SECTIONS)
    if extra:           # first: a misspelt section is named as such, not reported as its missing namesake
        r.fail("profile", unknown_key_message(extra, _SECTIONS, "section"))
    for key in _SECTIONS:
        if key not in d and key not in _OPTIONAL:
            r.fail(key, "missing section")
    if not isinstance(d["name"], str) or not d["name"].strip():
        r.fail("name", f"must be a non-empty string, got {d['name']!r}")
    lim = r.section(d, "limits")
    limits = Limits(
        max_move_mm=r.num(lim, "max_move_mm", "limits"), min_move_mm=r.num(lim, "min_move_mm", "limits"),
        max_rotate_deg=r.num(lim, "max_rotate_deg", "limits"),
        min_rotate_deg=r.num(lim, "min_rotate_deg", "limits"),
        max_wait_s=r.num(lim, "max_wait_s", "limits"), max_batch=r.count(lim, "max_batch", "limits"),
        guarded_moves=r.flag(lim, "guarded_moves", "limits"))
    r.ordered(limits.min_move_mm, limits.max_move_mm, "limits.min_move_mm", "min_move_mm", "max_move_mm")
    r.ordered(limits.min_rotate_deg, limits.max_rotate_deg, "limits.min_rotate_deg", "min_rotate_deg",
              "max_rotate_deg")
    wsd = r.section(d, "workspace_mm")
    ws = {}
    for ax in "xyz":
        f = f"workspace_mm.{ax}"
        box = wsd.get(ax)
        if not (isinstance(box, list) and len(box) == 2):
            r.fail(f, f"must be [lo, hi] in mm, got {box!r}")
        lo, hi = r.num({"lo": box[0]}, "lo", f, False), r.num({"hi": box[1]}, "hi", f, False)
        r.ordered(lo, hi, f, "lo", "hi", strict=True)
        ws[ax] = (lo, hi)
    ori = r.section(d, "orientation")
    max_tilt = r.num(ori, "max_tilt_deg", "orientation")
    if max_tilt > 180:
        r.fail("orientation.max_tilt_deg", f"must be within 0..180 deg, got {max_tilt:g}")
    dirs = r.words(d["directions"], "directions")
    rot = r.section(d, "rotation")
    if rot.get("frame") not in ("base", "tool"):
        r.fail("rotation.frame", f"must be 'base' or 'tool', got {rot.get('frame')!r}")
    axes = r.words(rot.get("axes"), "rotation.axes")
    grip = r.section(d, "gripper")
    gmax = r.num(grip, "max_width_mm", "gripper")
    gmin = r.num(grip, "min_width_mm", "gripper", positive=False)
    if gmin < 0:
        r.fail("gripper.min_width_mm", f"must be >= 0, got {gmin:g}")
    r.ordered(gmin, gmax, "gripper.min_width_mm", "min_width_mm", "max_width_mm", strict=True)
    finger_len = r.num(grip, "finger_length_mm", "gripper") if "finger_length_mm" in grip else None
    tip_past = r.num(grip, "tip_past_grip_mm", "gripper", positive=False) if "tip_past_grip_mm" in grip else None
    if tip_past is not None and tip_past < 0:
        r.fail("gripper.tip_past_grip_mm", f"must be >= 0, got {tip_past:g}")
    speeds = r.section(d, "speeds")
    tol = r.section(d, "tolerances")
    tolerances = Tolerances(
        position_mm=r.num(tol, "position_mm", "tolerances"),
        rotation_deg=r.num(tol, "rotation_deg", "tolerances"),
        settle_mm_per_step=r.num(tol, "settle_mm_per_step", "tolerances"),
        max_steps_per_command=r.count(tol, "max_steps_per_command", "tolerances"),
        continue_mm=r.num(tol, "continue_mm", "tolerances") if "continue_mm" in tol
        else r.num(tol, "position_mm", "tolerances"),
        blend_mm=r.num(tol, "blend_mm", "tolerances", False) if "blend_mm" in tol else 0.0,
        blend_deg=r.num(tol, "blend_deg", "tolerances", False) if "blend_deg" in tol else 0.0,
        blend_fraction=r.num(tol, "blend_fraction", "tolerances", False) if "blend_fraction" in tol else 0.0,
        no_progress_steps=r.count(tol, "no_progress_steps", "tolerances") if "no_progress_steps" in tol else 0,
        no_progress_mm=r.num(tol, "no_progress_mm", "tolerances") if "no_progress_mm" in tol else 0.0)
    if ("no_progress_steps" in tol) != ("no_progress_mm" in tol):
        r.fail("tolerances.no_progress_mm" if "no_progress_steps" in tol else "tolerances.no_progress_steps",
               "missing (the no-progress stall rule needs both: no_progress_steps control steps, no_progress_mm mm)")
    for key in ("blend_mm", "blend_deg"):
        if getattr(tolerances, key) < 0:
            r.fail(f"tolerances.{key}", f"must be >= 0, got {getattr(tolerances, key):g}")
    if (tolerances.blend_mm or tolerances.blend_deg) and "blend_fraction" not in tol:
        r.fail("tolerances.blend_fraction", "missing (required when blend_mm or blend_deg > 0: the largest fraction "
                                            "of a command's distance or angle a blend may leave to the next command)")
    if not 0 <= tolerances.blend_fraction < 1:
        r.fail("tolerances.blend_fraction", f"must be within 0..1 (excluded), got {tolerances.blend_fraction:g}")
    r.ordered(tolerances.position_mm, tolerances.continue_mm, "tolerances.continue_mm", "position_mm",
              "continue_mm")
    safety = from_mapping(Safety, r.section(d, "safety"), source or "profile", "safety") \
        if d.get("safety") is not None else None
    reach = from_mapping(Reach, r.section(d, "reach"), source or "profile", "reach") \
        if d.get("reach") is not None else None
    backends = d.get("backends") or []
    from .backends import ROBOTS
    if not isinstance(backends, list) or any(b not in ROBOTS for b in backends):
        r.fail("backends", f"must be a list of robot backends ({', '.join(ROBOTS)}), got {backends!r}")
    views = r.views(d.get("cameras"), dirs)
    return RobotProfile(
        name=d["name"], description=str(d.get("description", "")), limits=limits,
        workspace_mm=ReadOnly(ws), directions=ReadOnly({k: _frozen_vector(v) for k, v in dirs.items()}),
        rotation_frame=rot["frame"], rotation_axes=ReadOnly({k: _frozen_vector(v) for k, v in axes.items()}),
        gripper_max_width_mm=gmax, gripper_min_width_mm=gmin,
        move_mm_s=r.num(speeds, "move_mm_s", "speeds"), rotate_deg_s=r.num(speeds, "rotate_deg_s", "speeds"),
        tolerances=tolerances, period_s=r.num(r.section(d, "control"), "period_s", "control"),
        max_tilt_deg=max_tilt, safety=safety, source=source, cameras=ReadOnly(views), backends=tuple(backends),
        finger_length_mm=finger_len, tip_past_grip_mm=tip_past, reach=reach)


def load_profile(name_or_path: str | Path) -> RobotProfile:
    """Load a profile by name (``configs/robots/NAME.yaml``) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_dir() / "robots" / f"{name_or_path}.yaml"
    if not p.exists():
        from .strict_config import nearest
        known = profile_names()
        raise ConfigError(f"robot profile {name_or_path!r} not found{nearest(str(name_or_path), known)} "
                          f"(known: {', '.join(known)})")
    try:
        with open(p) as f:
            doc = yaml.safe_load(f)
    except yaml.YAMLError as e:
        raise yaml_error(p, e) from None
    return profile_from_dict(doc, source=str(p))


def profile_names() -> list[str]:
    """The profiles in ``configs/robots/``."""
    return sorted(x.stem for x in (config_dir() / "robots").glob("*.yaml"))


def profiles_for(backend: str) -> list[str]:
    """The packaged profiles that describe ``backend`` (for a message that says what would fit)."""
    out = []
    for name in profile_names():
        try:
            if backend in load_profile(name).backends:
                out.append(name)
        except ConfigError:
            pass
    return out
