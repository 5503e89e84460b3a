"""The openai brain's builder, named in the registry (``motormind/registry.py`` BRAINS: ``openai``):
it lives with serve-brain because a VLM config with ``serve:`` starts one in this process.
"""
from __future__ import annotations

from ..errors import ConfigError
from ..registry import BrainConfig


def openai_brain(cfg: BrainConfig, robot, profile, record=None, backend=None, queue_name: str | None = None):
    """Any OpenAI-compatible endpoint (``docs/vlm-backends.md``). A VLM config with ``serve: oracle``,
    ``serve: replay`` or ``serve: manual`` first starts serve-brain in this process
    (``motormind/serve/server.py``) with that brain behind it (or ``backend``, e.g. the diagnostic's
    oracle) and points the client at it; the brain's ``close()`` stops the server. ``manual``
    (``motormind/serve/manual.py``) writes each request to a queue folder for a person or an agent
    to answer, and is sent no context and no scene (nothing privileged). ``queue_name`` names this
    brain's own queue under the config's queue root where no run directory does (a ROS 2 role node:
    each node is its own client, so each gets its own folder and numbering)."""
    from ..brains.openai_brain import OpenAIBrain, load_vlm_config
    vcfg = load_vlm_config(cfg.vlm, cfg.vlm_set)
    prof = profile or getattr(robot, "profile", None)
    rec = record or (lambda kind, **data: None)
    server = manual = None
    if vcfg.serve:
        from .server import BrainServer, ReplayBrain
        if backend is None and vcfg.serve == "manual":
            from .manual import ManualBrain
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
            from ..brains.oracle.build import oracle_brain
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

