"""Robot backends and brains by type name: the one place every entry point builds them from.

    ROBOTS   type -> "module:Config", a backend's configuration class (lazily imported; the table is
             ``motormind/backends.py``'s, which the robot profile reads without importing this). Each has
             ``type``, its fields (strict, with units), ``build(profile) -> Robot`` and
             ``any_profile`` (True: it runs with any profile, as the kinematic fake does; False: the
             profile must name the backend in its ``backends``, so a Controller never validates
             with one arm's limits while it moves another).
    BRAINS   type -> "module:builder", a function ``(BrainConfig, robot, profile, record, **kw) -> Brain``
             (or a class with ``from_config`` of that signature), lazily imported. A builder lives with
             what it builds: the oracle's in ``brains/oracle/build.py``, the openai brain's (which
             starts serve-brain in-process for ``serve:`` configs) in ``serve/build.py``.

Adding a backend is its module (robot class + ``Config``) and one line in ``ROBOTS``; adding a
brain is its module and one line in ``BRAINS``. Nothing here imports a backend, a brain, a
simulator or a server at module level: ``motormind run``, ``motormind console``, the evaluation,
the diagnostic and the ROS 2 nodes import only what their configuration names.

``robots/`` and ``sim/`` are installed as ``motormind.robots`` and ``motormind.sim`` (pyproject.toml,
``[tool.setuptools] package-dir``); every import names them that way.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable

from .backends import ROBOTS
from .errors import ConfigError
from .profile import profiles_for
from .strict_config import from_mapping, nearest

BRAINS = {
    "oracle": "motormind.brains.oracle.build:oracle_brain",
    "openai": "motormind.serve.build:openai_brain",
    "scripted": "motormind.brains.scripted:ScriptedBrain",
    "operator": "motormind.console.brain:OperatorOnlyBrain",
}


# the builders' old addresses (they lived here; they live with what they build now)
MOVED = {"oracle_brain": "motormind.brains.oracle.build:oracle_brain",
         "openai_brain": "motormind.serve.build:openai_brain",
         "manual_queue": "motormind.serve.build:manual_queue"}


def __getattr__(name: str):
    if name in MOVED:
        return _load(MOVED[name])
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _load(target: str):
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _unknown(what: str, name, known) -> ConfigError:
    return ConfigError(f"{what}: unknown type {name!r}{nearest(name, known)} (known: {', '.join(known)})")


# -- robots ---------------------------------------------------------------------------------------------
def robot_config_class(type_name: str):
    if type_name not in ROBOTS:
        raise _unknown("robot.type", type_name, ROBOTS)
    return _load(ROBOTS[type_name])


def robot_config(d, source: str = "", where: str = "robot"):
    """A backend's configuration from its mapping (``{type: fake, realtime: true}``), strictly."""
    if isinstance(d, str):
        d = {"type": d}
    if not isinstance(d, dict):
        raise ConfigError(f"{source + ': ' if source else ''}{where}: must be a mapping with a type, got {d!r}")
    t = d.get("type")
    if t not in ROBOTS:
        e = _unknown(f"{where}.type", t, ROBOTS)
        raise ConfigError(f"{source}: {e}" if source else str(e))
    return from_mapping(robot_config_class(t), d, source, where)


def pairing_issue(cfg, profile) -> str:
    """Why the backend ``cfg`` must not run with ``profile`` ("" when it may)."""
    cls = type(cfg)
    extra = getattr(cls, "profile_issue", None)
    if getattr(cls, "any_profile", False) or cfg.type in profile.backends:
        return (extra(profile) if extra else "") or ""
    fits = profiles_for(cfg.type)
    return (f"backend {cfg.type} and profile {profile.name} disagree: profile {profile.name} "
            f"({profile.source or 'in code'}) describes {', '.join(profile.backends) or 'no backend'} (its "
            f"'backends'), not {cfg.type}; the Controller would validate with one arm's limits and move another"
            + (f". Use {' or '.join(fits)}" if fits else ""))


def check_pairing(cfg, profile) -> None:
    why = pairing_issue(cfg, profile)
    if why:
        raise ConfigError(why)


def build_robot(cfg, profile):
    """The robot ``cfg`` describes, moving with ``profile`` (refused when they disagree)."""
    check_pairing(cfg, profile)
    robot = cfg.build(profile)
    if robot.profile is not profile:     # a backend that kept its own profile would validate apart
        robot.close()
        raise ConfigError(f"backend {cfg.type} did not take profile {profile.name}")
    return robot


# -- brains ---------------------------------------------------------------------------------------------
@dataclass
class BrainConfig:
    type: str = "oracle"                                  # a key of BRAINS
    vlm: str = "openai"                                   # type openai: a VLM config (configs/vlm/NAME.yaml or a path)
    vlm_set: tuple[str, ...] = ()                         # type openai: overrides of that config, "key=value"
    script: str = ""                                      # type scripted: a JSON file {role: [answers]}

    def __post_init__(self) -> None:
        if self.type not in BRAINS:
            raise _unknown("type", self.type, BRAINS)
        if self.type == "scripted" and not self.script:
            raise ConfigError("script: brain scripted needs its script, a JSON file {role: [answers]}")


def brain_config(d, source: str = "", where: str = "brain") -> BrainConfig:
    if isinstance(d, str):
        d = {"type": d}
    return from_mapping(BrainConfig, d, source, where)


def build_brain(cfg: BrainConfig, robot=None, profile=None, record: Callable | None = None, **kw):
    """The brain ``cfg`` names (see ``BRAINS``); ``kw`` goes to its builder (``remote`` for the
    oracle across processes, ``backend`` for an openai brain served in-process)."""
    target = _load(BRAINS[cfg.type])
    make = getattr(target, "from_config", target)
    return make(cfg, robot, profile, record, **kw)
