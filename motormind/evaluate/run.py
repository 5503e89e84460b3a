"""``motormind run``: one LIBERO-PRO episode through the whole stack, headless, from its command line
(its setup: session/setup.py ``run_setup``; opened by session/open.py ``open_episode``), and its
end summary. An evaluation driver of one episode, beside ``eval`` and ``trials``; registered by
motormind/cli.py (PLUGINS); light to import."""
from __future__ import annotations


def register(sub) -> None:
    from ..argtypes import (host_port, interference, non_negative, non_negative_int, out_dir, positive_int, seconds,
                            shift_mm)
    from ..episode.config import WALL_BUDGET_S
    from ..interference_setting import SHIFT_M
    r = sub.add_parser("run", help="run one LIBERO-PRO episode headless through the whole stack")
    r.add_argument("--suite", default="libero_spatial")
    r.add_argument("--task", type=non_negative_int, default=0)
    r.add_argument("--init-state", type=non_negative_int, default=0)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--brain", default=None, choices=["oracle", "openai"],
                   help="oracle (privileged, offline; the default) or openai (any OpenAI-compatible endpoint, "
                        "configured by --vlm; the default when --vlm is given)")
    r.add_argument("--vlm", default=None, metavar="CONFIG",
                   help="VLM config for --brain openai: a YAML path or a name in configs/vlm/ "
                        "(openai, vllm-qwen2.5-vl, ollama, llamacpp, local-oracle, remote-oracle; default: openai)")
    r.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE",
                   help="override one field of the VLM config (dotted keys, YAML values), e.g. model=gpt-4o-mini "
                        "or faults.malformed_json=0.2; repeatable")
    r.add_argument("--max-steps", type=positive_int, default=None,
                   help="control-step budget (default: the suite's standard LIBERO budget)")
    r.add_argument("--wall-budget", type=seconds, default=WALL_BUDGET_S, help="wall-clock budget in seconds (> 0)")
    r.add_argument("--image-size", type=positive_int, default=None,
                   help="camera render size in px (default: the size the VLM config's model family works on, "
                        "e.g. 448 for vllm-qwen2.5-vl, 896 for Gemma 3; 128 for the oracle)")
    r.add_argument("--no-images", action="store_true", help="do not render camera images for the roles")
    r.add_argument("--no-media", action="store_true", help="do not write the contact sheet and video")
    r.add_argument("--videos", nargs="?", type=positive_int, const=1, default=None, metavar="EVERY",
                   help="also a rollout video (both cameras side by side, a frame every EVERY control steps; "
                        "1, the control rate, when given without a number) and the episode page episode.html; "
                        "default: none")
    r.add_argument("--out", default=None, type=out_dir,
                   help="run directory (default: runs/<time>_<suite>_t<task>_i<init>_<brain>)")
    r.add_argument("--mcap", default=None, metavar="FILE",
                   help="also record the episode as MCAP (ROS 2 bag format; relative to the run directory)")
    r.add_argument("--console", nargs="?", const="127.0.0.1:8765", default=None, metavar="[HOST:]PORT", type=host_port,
                   help="attach the operator console (default 127.0.0.1:8765; port 0: any free port); "
                        "prints its URL and control token")
    r.add_argument("--console-token", default=None, help="the console's control token (default: random, printed)")
    r.add_argument("--approval", action="store_true", help="with --console: every batch waits for the operator")
    r.add_argument("--console-frame-hz", type=non_negative, default=2.0,
                   help="with --console: camera frames per second mid-command (0: only at action boundaries; "
                        "each render pauses the simulation briefly)")
    r.add_argument("--console-hold", action="store_true",
                   help="with --console: keep the console up after the episode until Ctrl-C")
    r.add_argument("--interference", type=interference, default="off", metavar="WHAT@WHEN",
                   help="an outside hand moves an object mid-episode (PRIVILEGED, recorded, never in a prompt): "
                        "WHAT fetched|target|bystander, WHEN reach|carry|between, e.g. fetched@reach; off (default)")
    r.add_argument("--interference-mm", type=shift_mm, default=SHIFT_M, metavar="LO-HI",
                   help=f"how far it is moved, mm (seeded within LO-HI; default {SHIFT_M[0] * 1000:g}-{SHIFT_M[1] * 1000:g})")
    r.set_defaults(fn=main)


def main(args) -> int:
    from ..session.open import open_episode
    from ..session.setup import run_setup
    # what the command line can get wrong is found here, before the simulation is built: the values
    # by their argparse types; the VLM endpoint (a dead port); the console's port (bound now, held)
    if args.brain == "openai" or (args.brain is None and args.vlm):
        from ..brains.endpoint import checked_vlm_config
        checked_vlm_config(args.vlm, args.vlm_set)
    setup = run_setup(args)
    console = None
    if setup.console is not None:
        from ..argtypes import split_host_port
        from ..console.session import open_console
        from ..webserver import listen_for
        console = open_console(setup.console, setup.episode.images,
                               listen_for("--console", *split_host_port(setup.console.address)))
    s = open_episode(setup, console=console)
    if setup.video_every:
        from ..evaluate.episode_page import write_page
        s["episode_page"] = str(write_page(s["run_dir"]))
    label = " [oracle: privileged simulator state]" if s["privileged"] else ""
    print(f"{'SUCCESS' if s['success'] else 'FAILURE'}: {s['outcome']} - {s['reason']}{label}")
    for line in end_lines(s):
        print(line)
    itf = s.get("interference")
    if itf:
        ev, m = itf["event"], itf["measures"] or {}
        if ev:
            c = m.get("cancel")
            print(f"  interference [privileged]: {ev['object']} ({ev['role']}) moved {ev['shift_m'] * 1000:.0f} mm at "
                  f"step {ev['step']}; Monitor cancel "
                  + (f"after {c['ms']:.0f} ms / {c['steps']} steps" if c else "none")
                  + f"; {m.get('stale_commands')} command(s) ran on the stale plan")
        else:
            print(f"  interference [privileged]: did not happen ({itf['missed'] or 'its moment never came'})")
    print(f"  record: {s['run_dir']}/events.jsonl  summary: {s['run_dir']}/summary.json")
    if s.get("media"):
        print("  media: " + ", ".join(s["media"].values()))
    ro = s.get("rollout")
    if ro:
        print(f"  rollout: {ro.get('video') or ro.get('note', 'not written')} ({ro['frames']} frames, "
              f"{ro['rate']}, {ro['fps']:g} fps)")
    if s.get("episode_page"):
        print(f"  episode page: {s['episode_page']}")
    return 0 if s["success"] else 1


def end_lines(s: dict) -> list[str]:
    """An episode's end summary: budgets, the VLM calls (the count summary.json gives) and their
    trouble, and the timing split (VLM the loop waited for / motion / overhead; adds up to the wall)."""
    trouble = s.get("vlm_trouble") or {}
    setup = float(s.get("episode_wall_s", 0) or 0) - float(s.get("wall_s", 0) or 0)
    out = [f"  steps {s['steps']}/{s['step_budget']}, batches {s['batches']}, replans {s['replans']}, "
           f"VLM calls {s['vlm_calls']}, wall {s['episode_wall_s']:.1f} s"
           + (f" (of it {setup:.1f} s building the scene and closing)" if setup >= 0.05 else ""),
           f"  the loop: {s.get('wall_s', 0):.1f} s = VLM {s.get('vlm_s', 0):.1f} + motion {s.get('motion_s', 0):.1f} "
           f"+ overhead {s.get('overhead_s', 0):.1f}"
           + (f" (Monitor and Memory calls beside them: {s['vlm_background_s']:.1f} s)"
              if s.get("vlm_background_s") else "")]
    if trouble:
        out.append("  VLM trouble: " + ", ".join(f"{k.replace('_', ' ')} {n}" for k, n in trouble.items()))
    return out
