"""``motormind serve-brain``: the local OpenAI-compatible server, standalone.

    motormind serve-brain --backend oracle --port 8766            # answers remote-oracle.yaml clients
    motormind serve-brain --backend replay --record runs/RUN_DIR  # replays an episode's answers
    motormind serve-brain --backend reach --fault malformed_json=0.2 --fault http_429=0.1
    motormind serve-brain --backend reach --quirk think_block=0.3 --quirk images_ignored=1 --family qwen2.5-vl
    motormind serve-brain --backend oracle --latency 5 --latency monitor=1~0.5   # a VLM-like delay per call
    motormind serve-brain --backend manual --queue DIR --auto monitor=no-cancel,memory=none   # a person answers

For ``motormind run`` nothing needs starting by hand: ``configs/vlm/local-oracle.yaml`` says
``serve: oracle`` and the run starts this server in-process next to the simulation.
"""
from __future__ import annotations

import json
import sys



SERVE_PORT = 8766      # serve-brain's default port: not the console's 8765 (both run side by side)

def register(subparsers) -> None:
    from ..argtypes import non_negative, port
    p = subparsers.add_parser("serve-brain", help="serve a MotorMind brain over an OpenAI-compatible HTTP API "
                                                  "(/v1/models, /v1/chat/completions), with fault injection")
    p.add_argument("--backend", default="oracle", choices=["oracle", "replay", "reach", "manual"],
                   help="oracle: the privileged oracle, fed scene snapshots by send_scene clients "
                        "(configs/vlm/remote-oracle.yaml); replay: the answers of a recorded episode (--record); "
                        "reach: a toy oracle for the kinematic fake arm; manual: each request written to a "
                        "folder under --queue, answered by a person or an agent (docs/manual-vlm.md)")
    p.add_argument("--queue", default=None, metavar="DIR",
                   help="manual: the queue folder (one folder per request, DIR/waiting.json the index)")
    p.add_argument("--auto", action="append", default=[], metavar="ROLE=ANSWER[,...]",
                   help="manual: fixed answers, off by default: monitor=no-cancel, memory=none, probe=look")
    p.add_argument("--answer-timeout", type=non_negative, default=None, metavar="S",
                   help="manual: how long a request waits when the client does not say its timeout "
                        "(default: until answered or the server stops)")
    p.add_argument("--record", default=None, help="replay: an episode's run directory or its events.jsonl")
    p.add_argument("--profile", default="libero_panda", help="oracle: robot profile when the client sends none")
    p.add_argument("--scene", default=None, metavar="URL",
                   help="oracle: read the PRIVILEGED scene from a simulator's evaluator-only channel (e.g. "
                        "`motormind emulate xarm6 --scene placement --privileged-port 8790` prints it) instead "
                        "of snapshots sent by the client")
    p.add_argument("--host", default="127.0.0.1", help="the address to listen on (0.0.0.0: every interface)")
    p.add_argument("--port", type=port, default=SERVE_PORT,
                   help="0 picks a free port (the console uses 8765: both run side by side)")
    p.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                   help="also answer to this Host name (e.g. a container's service name, with --host 0.0.0.0); "
                        "repeatable. Any other name is refused (DNS rebinding)")
    p.add_argument("--model", default=None, help="the model id served (default: motormind-<backend>)")
    p.add_argument("--api-key", default=None, help="require this bearer key (default: accept any)")
    p.add_argument("--fault", action="append", default=[], metavar="NAME=RATE",
                   help="inject a fault at a rate, repeatable: malformed_json, missing_field, bad_magnitude, "
                        "unknown_op, premature_done, injection, slow, http_429, http_500")
    p.add_argument("--quirk", action="append", default=[], metavar="NAME=RATE",
                   help="emulate a real server's quirk at a rate, repeatable: images_refused, images_ignored, "
                        "schema_ignored, whitespace_flood, truncated, answer_in_reasoning, think_block, "
                        "thinking_off_under_json (motormind/serve/quirks.py)")
    p.add_argument("--family", default="generic",
                   choices=["generic", "qwen2.5-vl", "qwen3-vl", "gemma3", "openai"],
                   help="the model family emulated: how images are counted in usage (generic: 85 tokens an "
                        "image) and how the coordinate check is answered (qwen2.5-vl: pixels of its resized image)")
    p.add_argument("--latency", action="append", default=[], metavar="[ROLE=]MEAN[~SPREAD]",
                   help="hold each answer back like a VLM: SECONDS (fixed), MEAN~SPREAD (log-normal, s), or "
                        "ROLE=... for one role; repeatable (motormind/serve/latency.py). Awaited without a "
                        "thread: many calls wait at once. GET /stats counts the calls in flight")
    p.add_argument("--fault-seed", type=int, default=0, help="seeds the fault and the quirk draws")
    p.add_argument("--fault-roles", default=None, help="comma-separated roles the faults apply to (default: all)")
    p.add_argument("--slow-s", type=non_negative, default=None, help="how late a 'slow' answer arrives (default 5 s)")
    p.add_argument("--text-style", default="fenced", choices=["fenced", "raw"],
                   help="answers without response_format: a sentence and a fenced JSON block, or bare JSON")
    p.add_argument("--log", default=None, help="append one JSON line per request (role, fault, status, times) "
                                                "to this file")
    p.add_argument("--quiet", action="store_true", help="no per-request line on stderr")
    p.set_defaults(fn=_serve)


def _serve(args) -> int:
    from ..errors import ConfigError
    from ..webserver import listen_for
    from .faults import FaultPlan
    from .latency import LatencyPlan
    from .quirks import QuirkPlan
    from .server import BrainServer, ReplayBrain, SnapshotOracle
    # every mistake of the command line is a ConfigError here (one line, by motormind.cli.main)
    if args.scene and args.backend != "oracle":
        raise ConfigError(f"--scene: only --backend oracle reads a scene (not {args.backend})")
    for flag, v in (("--queue", args.queue), ("--auto", args.auto), ("--answer-timeout", args.answer_timeout)):
        if v and args.backend != "manual":
            raise ConfigError(f"{flag}: only --backend manual has a queue (not {args.backend})")
    if args.backend == "manual":
        from .manual import ManualBrain, parse_auto
        if not args.queue:
            raise ConfigError("--backend manual needs --queue DIR (the folder the requests are written to)")
        brain = ManualBrain(args.queue, parse_auto(args.auto, "--auto"), max_wait_s=args.answer_timeout or None)
        args.text_style = "raw"                 # the answer goes back as written
    elif args.backend == "replay":
        if not args.record:
            raise ConfigError("--backend replay needs --record RUN_DIR")
        brain = ReplayBrain(args.record)
    elif args.backend == "reach":
        from .reach import ReachBrain
        brain = ReachBrain()
    else:
        from ..profile import load_profile
        try:
            load_profile(args.profile)           # used at the first request: a bad one is said now
        except ConfigError as e:
            raise ConfigError(f"--profile: {e}") from None
        if args.scene:
            from motormind.sim.scene_channel import RemoteScene, SceneChannelError
            from .server import SceneOracle
            scene = RemoteScene(args.scene)
            try:
                goal = scene.goal_state                 # reachable now, or one line and no server
            except SceneChannelError as e:
                raise ConfigError(f"--scene: {e}") from None
            print(f"serve-brain: oracle over the privileged scene at {scene.url} (goal {goal})", file=sys.stderr)
            brain = SceneOracle(scene, args.profile)
        else:
            brain = SnapshotOracle(args.profile)
    roles = [r.strip() for r in args.fault_roles.split(",")] if args.fault_roles else None
    faults = FaultPlan.from_cli(args.fault, seed=args.fault_seed, slow_s=args.slow_s, roles=roles)
    quirks = QuirkPlan.from_cli(args.quirk, seed=args.fault_seed, roles=roles)
    latency = LatencyPlan.from_cli(args.latency, seed=args.fault_seed)
    sock = listen_for("--port", args.host, args.port)
    model = args.model or f"motormind-{args.backend}"
    srv = BrainServer(brain, host=args.host, port=args.port, model=model, faults=faults if faults.active else None,
                      api_key=args.api_key, text_style=args.text_style, quiet=args.quiet, log_path=args.log,
                      quirks=quirks if quirks.active else None, family=args.family,
                      allow_hosts=tuple(args.allow_host), sock=sock, latency=latency if latency.active else None)
    priv = " (PRIVILEGED: answers from simulator state)" if getattr(brain, "privileged", False) else ""
    print(f"serve-brain: {args.backend} as model {model!r} at {srv.url}{priv}", file=sys.stderr)
    if args.backend == "manual":
        print(f"serve-brain: requests go to {brain.queue}/ (waiting: {brain.queue}/waiting.json); answer each "
              f"by renaming answer.json.tmp to answer.json in its folder"
              f"{'; fixed answers ' + json.dumps(brain.auto) if brain.auto else ''}", file=sys.stderr)
    if faults.active:
        print(f"serve-brain: injecting faults {json.dumps(faults.describe())}", file=sys.stderr)
    if latency.active:
        print(f"serve-brain: latency per call {json.dumps(latency.describe())}", file=sys.stderr)
    if quirks.active:
        print(f"serve-brain: emulating quirks {json.dumps(quirks.describe())}", file=sys.stderr)
    print(srv.url, flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        if hasattr(brain, "close"):
            brain.close()                       # the manual backend's waiting requests end first
        srv.close()
    return 0
