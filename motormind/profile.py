"""Robot profiles: per-command limits, workspace box, direction words, speeds, tolerances.

Profiles are YAML files in ``configs/robots/``; ``load_profile("libero_panda")`` finds them by name.
All lengths are millimetres and all angles degrees, in the robot's base frame.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

from .errors import ConfigError
from .paths import config_dir


@dataclass(frozen=True)
class Limits:
    max_move_mm: float
    min_move_mm: float
    max_rotate_deg: float
    min_rotate_deg: float
    max_wait_s: float
    max_batch: int


@dataclass(frozen=True)
class Tolerances:
    position_mm: float
    rotation_deg: float
    settle_mm_per_step: float
    max_steps_per_command: int
    continue_mm: float = 0.0          # a move that settles this close to its target without contact is
                                      # done (reported with its error); farther, or against contact: blocked


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
    safety: dict = field(default_factory=dict)
    source: str = ""

    def in_workspace(self, pos_mm) -> list[str]:
        """Names of the workspace limits that ``pos_mm`` (base frame) violates, e.g. ['z<-20.0']."""
        out = []
        for i, ax in enumerate("xyz"):
            lo, hi = self.workspace_mm[ax]
            if pos_mm[i] < lo - 1e-9:
                out.append(f"{ax}={pos_mm[i]:.1f} < {lo:.1f}")
            elif pos_mm[i] > hi + 1e-9:
                out.append(f"{ax}={pos_mm[i]:.1f} > {hi:.1f}")
        return out

    def describe_limits(self) -> dict:
        """The limits as plain data, for prompts and docs."""
        lim = self.limits
        return {
            "max_move_mm": lim.max_move_mm, "min_move_mm": lim.min_move_mm,
            "max_rotate_deg": lim.max_rotate_deg, "min_rotate_deg": lim.min_rotate_deg,
            "max_wait_s": lim.max_wait_s, "max_batch": lim.max_batch,
            "workspace_mm": {k: list(v) for k, v in self.workspace_mm.items()},
            "directions": sorted(self.directions), "rotation_axes": sorted(self.rotation_axes),
            "rotation_frame": self.rotation_frame,
        }


def _num(d: dict, key: str, where: str, positive: bool = True) -> float:
    if key not in d:
        raise ConfigError(f"{where}.{key}: missing")
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
        raise ConfigError(f"{where}.{key}: must be a finite number, got {v!r}")
    if positive and v <= 0:
        raise ConfigError(f"{where}.{key}: must be > 0, got {v!r}")
    return float(v)


def _unit(v, where: str) -> np.ndarray:
    a = np.asarray(v, dtype=float)
    if a.shape != (3,) or not np.all(np.isfinite(a)) or np.linalg.norm(a) < 1e-9:
        raise ConfigError(f"{where}: must be a non-zero 3-vector, got {v!r}")
    return a / np.linalg.norm(a)


def profile_from_dict(d: dict, source: str = "") -> RobotProfile:
    if not isinstance(d, dict):
        raise ConfigError(f"{source or 'profile'}: must be a mapping")
    for key in ("name", "limits", "workspace_mm", "directions", "rotation", "gripper", "speeds",
                "tolerances", "control"):
        if key not in d:
            raise ConfigError(f"profile {source}: missing section '{key}'")
    lim = d["limits"]
    limits = Limits(
        max_move_mm=_num(lim, "max_move_mm", "limits"), min_move_mm=_num(lim, "min_move_mm", "limits"),
        max_rotate_deg=_num(lim, "max_rotate_deg", "limits"),
        min_rotate_deg=_num(lim, "min_rotate_deg", "limits"),
        max_wait_s=_num(lim, "max_wait_s", "limits"), max_batch=int(_num(lim, "max_batch", "limits")))
    ws = {}
    for ax in "xyz":
        box = d["workspace_mm"].get(ax)
        if not (isinstance(box, list) and len(box) == 2 and box[0] < box[1]):
            raise ConfigError(f"workspace_mm.{ax}: must be [lo, hi] with lo < hi, got {box!r}")
        ws[ax] = (float(box[0]), float(box[1]))
    dirs = {str(k): _unit(v, f"directions.{k}") for k, v in d["directions"].items()}
    rot = d["rotation"]
    axes = {str(k): _unit(v, f"rotation.axes.{k}") for k, v in rot.get("axes", {}).items()}
    if rot.get("frame") not in ("base", "tool"):
        raise ConfigError(f"rotation.frame: must be 'base' or 'tool', got {rot.get('frame')!r}")
    tol = d["tolerances"]
    tolerances = Tolerances(
        position_mm=_num(tol, "position_mm", "tolerances"),
        rotation_deg=_num(tol, "rotation_deg", "tolerances"),
        settle_mm_per_step=_num(tol, "settle_mm_per_step", "tolerances"),
        max_steps_per_command=int(_num(tol, "max_steps_per_command", "tolerances")),
        continue_mm=_num(tol, "continue_mm", "tolerances") if "continue_mm" in tol else _num(tol, "position_mm", "tolerances"))
    if tolerances.continue_mm < tolerances.position_mm:
        raise ConfigError(f"tolerances.continue_mm: must be >= position_mm ({tolerances.position_mm:g}), "
                          f"got {tolerances.continue_mm:g}")
    return RobotProfile(
        name=str(d["name"]), description=str(d.get("description", "")), limits=limits,
        workspace_mm=ws, directions=dirs, rotation_frame=rot["frame"], rotation_axes=axes,
        gripper_max_width_mm=_num(d["gripper"], "max_width_mm", "gripper"),
        gripper_min_width_mm=_num(d["gripper"], "min_width_mm", "gripper", positive=False),
        move_mm_s=_num(d["speeds"], "move_mm_s", "speeds"),
        rotate_deg_s=_num(d["speeds"], "rotate_deg_s", "speeds"),
        tolerances=tolerances, period_s=_num(d["control"], "period_s", "control"),
        safety=dict(d.get("safety") or {}), source=source)


def load_profile(name_or_path: str | Path) -> RobotProfile:
    """Load a profile by name (``configs/robots/NAME.yaml``) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_dir() / "robots" / f"{name_or_path}.yaml"
    if not p.exists():
        known = sorted(x.stem for x in (config_dir() / "robots").glob("*.yaml"))
        raise ConfigError(f"robot profile {name_or_path!r} not found (known: {', '.join(known)})")
    with open(p) as f:
        return profile_from_dict(yaml.safe_load(f), source=str(p))
