"""Robot backends and brains by type name: the one place every entry point builds them from.

    ROBOTS   type -> "module:Config", a backend's configuration class (lazily imported). Each has
             ``type``, its fields (strict, with units), ``build(profile) -> Robot`` and
             ``any_profile`` (True: it runs with any profile, as the kinematic fake does; False: the
             profile must name the backend in its ``backends``, so a Controller never validates
             with one arm's limits while it moves another).
    BRAINS   type -> "module:builder", a function ``(BrainConfig, robot, profile, record, **kw) -> Brain``
             (or a class with ``from_config`` of that signature), lazily imported.

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

from .errors import ConfigError
from .strict_config import from_mapping, nearest

ROBOTS = {
    "fake": "motormind.robots.fake:FakeConfig",
    "xarm6": "motormind.robots.xarm6:XArm6Config",
    "libero": "motormind.sim.libero_pro.config:LiberoConfig",
}

BRAINS = {
    "oracle": "motormind.registry:oracle_brain",
    "openai": "motormind.registry:openai_brain",
    "scripted": "motormind.brains.scripted:ScriptedBrain",
    "operator": "motormind.console.brain:OperatorOnlyBrain",
}


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
    from .profile import profiles_for
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


def oracle_brain(cfg: BrainConfig, robot, profile, record=None, remote=None):
    """The oracle reads the live privileged scene: of the simulated robot here, or, where the
    simulator runs in another process, through ``remote`` (a brain over the ROS 2 privileged channel,
    ``motormind/ros/base.py``)."""
    if robot is not None and hasattr(robot, "scene"):
        from .brains.oracle import OracleBrain
        return OracleBrain(robot.scene(), profile or robot.profile)
    if remote is not None:
        return remote
    raise ConfigError("brain oracle: it reads the simulator's privileged scene: simulation only "
                      "(this robot has no scene)")


def openai_brain(cfg: BrainConfig, robot, profile, record=None, backend=None, queue_name: str | None = None):
    """Any OpenAI-compatible endpoint (``docs/vlm-backends.md``). A VLM config with ``serve: oracle``,
    ``serve: replay`` or ``serve: manual`` first starts serve-brain in this process
    (``motormind/serve/server.py``) with that brain behind it (or ``backend``, e.g. the diagnostic's
    oracle) and points the client at it; the brain's ``close()`` stops the server. ``manual``
    (``motormind/serve/manual.py``) writes each request to a queue folder for a person or an agent
    to answer, and is sent no context and no scene (nothing privileged). ``queue_name`` names this
    brain's own queue under the config's queue root where no run directory does (a ROS 2 role node:
    each node is its own client, so each gets its own folder and numbering)."""
    from .brains.openai_brain import OpenAIBrain, load_vlm_config
    vcfg = load_vlm_config(cfg.vlm, cfg.vlm_set)
    prof = profile or getattr(robot, "profile", None)
    rec = record or (lambda kind, **data: None)
    server = manual = None
    if vcfg.serve:
        from .serve.server import BrainServer, ReplayBrain
        if backend is None and vcfg.serve == "manual":
            from .serve.manual import ManualBrain
            backend = manual = ManualBrain(manual_queue(vcfg, record, queue_name), vcfg.auto, on_event=rec)
            import sys
            print(f"manual VLM: each request is a folder in {manual.queue}/ (the waiting ones: waiting.json); "
                  "answer by renaming answer.json.tmp to answer.json in it (docs/manual-vlm.md)"
                  + (f"; fixed answers {vcfg.auto}" if vcfg.auto else ""), file=sys.stderr, flush=True)
            vcfg.text_style = "raw"                  # the answer goes back as written, never reshaped
            vcfg.send_budget = True                  # what the episode has left, for the folder
        elif backend is None and vcfg.serve == "oracle":
            if robot is None or not hasattr(robot, "scene"):
                raise ConfigError("serve: oracle needs a simulated robot (its privileged scene)")
            backend = oracle_brain(BrainConfig("oracle"), robot, prof)
        elif backend is None:
            backend = ReplayBrain(vcfg.replay)
        server = BrainServer(backend, model=vcfg.model, faults=vcfg.faults or None, on_event=rec,
                             text_style=vcfg.text_style, quirks=vcfg.quirks or None, family=vcfg.image_rules,
                             latency=vcfg.latency or None).start()
        vcfg.base_url = server.url
        vcfg.send_context = manual is None           # the served brain answers from the role's context
        vcfg.privileged = vcfg.privileged or bool(getattr(backend, "privileged", False))
        if not vcfg.api_key:
            vcfg.api_key, vcfg.api_key_env = "local", None
        if not vcfg.label:
            vcfg.label = f"openai:{vcfg.model}"
    scene_fn = robot.scene if (vcfg.send_scene and robot is not None and hasattr(robot, "scene")) else None
    try:
        brain = OpenAIBrain(vcfg, on_event=rec, scene_fn=scene_fn, profile_name=getattr(prof, "name", None))
    except Exception:
        if manual:
            manual.close()
        if server:
            server.close()
        raise
    if server:
        brain._owned.append(server)
        brain.server = server
    if manual:                                       # closed first: its waiting requests end, then the server
        brain._owned.append(manual)
        brain.manual = manual
    return brain


def manual_queue(vcfg, record=None, name: str | None = None):
    """The queue folder of one episode (``serve: manual``): ``queue``/<the run directory's name>
    when the config names a queue root (so several episodes at once each have their own), else the
    run directory's ``queue/``. Without a run directory, ``queue``/``name`` when a name is given
    (the ROS 2 role nodes: one folder per node, so no two servers share a waiting.json)."""
    from pathlib import Path
    run_dir = getattr(record, "dir", None)
    if vcfg.queue:
        if run_dir is not None:
            return Path(vcfg.queue) / run_dir.name
        return Path(vcfg.queue) / name if name else Path(vcfg.queue)
    if run_dir is None:
        raise ConfigError("serve: manual needs a queue folder: queue: DIR (--vlm-set queue=DIR), or a run "
                          "directory to hold one")
    return Path(run_dir) / "queue"

