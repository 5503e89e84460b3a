"""Placement trials on the rehearsal cell: ``motormind trials xarm6 --scene placement -n 40``.

Each trial is one whole MotorMind episode (the five roles around the Controller, in-process)
through the REAL xArm6 backend (robots/xarm6.py: the unmodified SDK over TCP) on a CellEmulator in
this process: a seeded layout, "put the <block> on the <mark>", judged from physics (the scene's
``on`` predicate: over the mark, touching it, released). With ``--interference on`` an outside
hand moves an object mid-episode (motormind/session/interference.py: the fetched block as the
hand reaches for it, or the target mark while the block is carried; seeded), recorded as a
privileged event in the trial's record only. ``both`` runs every layout twice, without and with.

The brain is the oracle (PRIVILEGED: it reads the cell's true object poses through ``emu.scene``,
labelled so) unless ``--brain openai --vlm CONFIG`` names any VLM config (it gets camera images
from the emulated cameras, through the backend's OpenCV capture, as on the real arm, with their depth
images and the calibration the camera server publishes).

Reported per condition: successes with a 95% Wilson interval, the placement error (mm, the block's
centre from the mark's centre in the table plane) over successful trials, episode time (s), and
the outcomes; and the emulator's real-time factor (simulated / wall time; and its capacity,
simulated time per second spent stepping the physics). Written to OUT/summary.json, one folder per
trial with its events.jsonl and summary.json (with ``--videos HZ`` its rollout and episode page too),
and printed. Each trial is opened as every episode is (motormind/session/open.py ``open_episode``,
the trial its task: ``CellTrial``).
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from motormind.evaluate.stats import percentile
from motormind.vlm_calls import vlm_totals_of

CONDITIONS = {"off": ("off",), "on": ("on",), "both": ("off", "on")}
SEED_RESULT = {"all": 0.95, "off": 0.98, "on": 0.92}     # the seed paper's xArm6 placement figures


@dataclass
class TrialResult:
    seed: int
    interference: str                 # off | on
    instruction: str
    success: bool
    outcome: str
    reason: str
    placement_error_mm: float | None
    episode_s: float
    batches: int
    replans: int
    brain: str
    privileged: bool
    event: dict | None = None         # the interference event (privileged), or None
    missed: str = ""                  # why the planned interference could not happen
    fault: str = ""
    trial: dict = field(default_factory=dict)
    interference_measures: dict | None = None   # session/interference.py InterferenceProbe (ms; no steps here)
    sim_s: float | None = None        # the episode on the emulator's clock (simulated seconds)
    rollout: dict | None = None       # --videos: rollout.json (record.py ClockRollout)


def _pct(xs, q):
    return percentile(xs, q, 2)


def summarize(results: list[TrialResult]) -> dict:
    from motormind.evaluate.stats import wilson
    out = {}
    groups = {"all": results, **{c: [r for r in results if r.interference == c] for c in ("off", "on")}}
    for name, rs in groups.items():
        if not rs:
            continue
        k, n = sum(r.success for r in rs), len(rs)
        lo, hi = wilson(k, n)
        err = [r.placement_error_mm for r in rs if r.success and r.placement_error_mm is not None]
        outcomes: dict = {}
        for r in rs:
            outcomes[r.outcome] = outcomes.get(r.outcome, 0) + 1
        out[name] = {"n": n, "successes": k, "rate": round(k / n, 4), "wilson95": [round(lo, 4), round(hi, 4)],
                     "seed_paper": SEED_RESULT.get(name),
                     "placement_error_mm": {"median": _pct(err, 0.5), "p90": _pct(err, 0.9), "max": _pct(err, 1.0),
                                            "mean": round(sum(err) / len(err), 2) if err else None},
                     "episode_s": {"median": _pct([r.episode_s for r in rs], 0.5),
                                   "p90": _pct([r.episode_s for r in rs], 0.9)},
                     "outcomes": outcomes}
        if name == "on":
            from motormind.evaluate.interference import summarize_measures
            ev = [r for r in rs if r.event]
            out[name]["interfered"] = len(ev)
            out[name]["measures"] = summarize_measures([asdict(r) for r in rs])
            out[name]["by_moment"] = {w: {"n": len(g), "successes": sum(r.success for r in g)}
                                      for w in ("reach", "carry") if (g := [r for r in ev if r.event["when"] == w])}
    return out


def _spot_check(profile, z_m: float, emu):
    """Where the outside hand may put an object (session/interference.py ``spot_check``), the
    gripper's position read from the emulator."""
    from motormind.session.interference import spot_check
    return spot_check(profile, z_m, lambda: tuple(v / 1000.0 for v in emu.snapshot()["pose_mm_deg"][:2]))


def trial_brain(brain: str, vlm: str | None, vlm_set, scene, robot, prof, rec):
    """The brain of one trial: the oracle reads the cell's scene (PRIVILEGED: the true object poses);
    ``openai`` is any VLM config, built as every episode's is (motormind/registry.py)."""
    if brain == "oracle":
        from motormind.brains.oracle import OracleBrain
        return OracleBrain(scene, prof)
    from motormind.registry import BrainConfig, build_brain
    return build_brain(BrainConfig(type="openai", vlm=vlm or "openai", vlm_set=tuple(vlm_set or ())), robot, prof, rec)


class CellTrial:
    """One trial as an episode's task (motormind/session/tasks.py): the emulator's seeded layout and
    instruction, judged from its physics (PRIVILEGED: the scene's ``on`` predicate); the oracle reads
    the cell's true poses; the outside hand and the film are the cell's (its scene, its clock)."""

    task = 0

    def __init__(self, trial, cond: str, seed: int, emu, cell, prof, brain: str, vlm, vlm_set, videos: float):
        self.trial, self.cond, self.init_state, self.seed = trial, cond, seed, 0
        self.emu, self.cell, self.prof = emu, cell, prof
        self.brain_name, self.vlm, self.vlm_set, self.videos = brain, vlm, vlm_set, videos
        self.suite = f"xarm6_{cell.name}"
        self.t0, self.sim_t0 = time.monotonic(), emu.physics.sim_time_s
        self.episode_s = self.sim_s = None
        self.itf = self.robot = None

    label = property(lambda self: f"t{self.init_state:03d}_{self.cond}")
    describe = property(lambda self: f"trial {self.init_state} [{self.cond}]")

    def reuse(self, robot) -> None:
        self.robot = robot
        if robot.fault is not None:            # the layout was reset by the emulator (reset_scene)
            robot.clear_fault()

    def start(self, rec) -> None:
        rec("trial_start", **self.trial.to_json(), interference=self.cond, scene=self.cell.name, profile=self.prof.name)

    def instruction(self, robot=None) -> str:
        return self.trial.instruction

    def header(self, robot) -> dict:
        return {"simulator": {"xarm6_cell": self.cell.name}, "instruction": self.trial.instruction}

    def brain(self, robot, record):
        return trial_brain(self.brain_name, self.vlm, self.vlm_set, self.emu.scene, robot, self.prof, record)

    def judge(self, robot):
        return self.emu.scene.success, (lambda: 0)

    def film(self):
        """The run begins: the trial's clocks start (wall and the emulator's), and its film with --videos."""
        film = _film(self.emu, self.videos)
        self.t0, self.sim_t0 = time.monotonic(), self.emu.physics.sim_time_s
        return film

    def ended(self) -> None:
        self.episode_s, self.sim_s = time.monotonic() - self.t0, self.emu.physics.sim_time_s - self.sim_t0

    def interfere(self, spec, task, runner, robot, rec):
        """The cell's outside hand: the fetched block as the hand reaches (even seeds) or the target
        mark while the block is carried (odd), seeded (session/interference.py)."""
        from motormind.session.interference import InterferencePlan, InterferenceProbe, Interferer
        probe = InterferenceProbe(lambda: -1)      # the real-time arm counts no control steps
        rec.listeners.append(probe.listen)
        plan = InterferencePlan.seeded(self.init_state, spec.setting.partition("@")[2], spec.shift_m)
        self.itf = Interferer(plan, self.emu.scene, self.trial.goal[0], self.emu.scene.table_bounds(),
                              on_event=lambda ev: rec("interference", **ev.to_json()),
                              ok=_spot_check(self.prof, self.cell.table_top_z_m + 0.03, self.emu))
        runner.controller_listeners.append(self.itf.on_controller_event)
        return self.itf, probe, "", tuple(spec.shift_m)

    def finish(self, rec, s: dict) -> dict:
        """The trial's result from the physics (placement error, success), as ``trial_end``."""
        err = self.emu.scene.placement_error_mm()
        itf = s.get("interference") or {}
        r = TrialResult(self.init_state, self.cond, self.trial.instruction, self.emu.scene.success(), s["outcome"],
                        s["reason"], round(err, 2) if err is not None else None, round(self.episode_s, 2),
                        s["batches"], s["replans"], s["brain"], bool(s["privileged"]), itf.get("event"),
                        itf.get("missed", ""), str(self.robot.fault) if self.robot.fault else "", self.trial.to_json(),
                        itf.get("measures"), round(self.sim_s, 3),
                        s.get("rollout"))
        rec("trial_end", **{k: v for k, v in asdict(r).items() if k != "trial"})
        return {"trial_result": asdict(r)}

    def result(self, fault: str, robot) -> TrialResult:
        """A trial that crashed (its record ends where it did): a failed trial, the fault its reason."""
        err = self.emu.scene.placement_error_mm()
        return TrialResult(self.init_state, self.cond, self.trial.instruction, self.emu.scene.success(), "crash",
                           fault, round(err, 2) if err is not None else None, round(time.monotonic() - self.t0, 2),
                           0, 0, self.brain_name, self.brain_name == "oracle",
                           self.itf.event.to_json() if self.itf and self.itf.event else None,
                           self.itf.missed if self.itf else "", fault or (str(robot.fault) if robot.fault else ""),
                           self.trial.to_json())


def trial_setup(task: CellTrial, run_dir: Path, wall_budget_s: float, images: bool):
    """A trial's episode setup (motormind/session/setup.py): the cell's robot is given open."""
    from motormind.components import EpisodeConfig
    from motormind.interference_setting import DEFAULT_WHAT
    from motormind.session.setup import EpisodeSetup, InterferenceSpec
    when = "reach" if task.init_state % 2 == 0 else "carry"
    itf = InterferenceSpec(f"{DEFAULT_WHAT[when]}@{when}", tuple(task.cell.interference_shift_m)) \
        if task.cond == "on" else None
    return EpisodeSetup(robot=None, brain=None, episode=EpisodeConfig(wall_budget_s=wall_budget_s, images=images),
                        profile=task.prof.name, task=task, out=str(run_dir), media=False, interference=itf)


def run_trials(scene: str = "placement", n: int = 40, interference: str = "both", seed: int = 0,
               out: str | Path | None = None, profile: str = "xarm6", brain: str = "oracle", vlm: str | None = None,
               vlm_set=(), images: bool = False, wall_budget_s: float = 300.0, report_hz: float = 5.0,
               progress=None, videos: float = 0.0) -> dict:
    from motormind.profile import load_profile
    from motormind.robots.xarm6 import XArm6Robot
    from motormind.session.open import open_episode
    from motormind.sim.xarm_cell.config import load_cell
    from motormind.sim.xarm_cell.emulator import CellEmulator
    from motormind.sim.xarm_emulator import free_loopback_host

    say = progress or (lambda s: print(s, file=sys.stderr, flush=True))
    if interference not in CONDITIONS:
        raise ValueError(f"--interference: one of {', '.join(CONDITIONS)}, got {interference!r}")
    cfg = load_cell(scene)
    prof = load_profile(profile)
    root = Path(out) if out else Path("runs") / f"trials_{time.strftime('%Y%m%d-%H%M%S')}_{cfg.name}"
    root.mkdir(parents=True, exist_ok=True)
    emu = CellEmulator(cfg, free_loopback_host(), 0, camera_port=0 if images else None, report_hz=report_hz).start()
    robot = None
    results: list[TrialResult] = []
    t_start, sim0 = time.monotonic(), emu.physics.sim_time_s
    cpu0 = emu.physics.step_cpu_s
    try:
        # the cameras as on a real cell: colour and depth by URL, the calibration from the camera index
        robot = XArm6Robot(emu.host, prof, command_port=emu.port, cameras=emu.camera_configs() if images else None,
                           calibration=emu.cameras.url + "/" if (images and emu.cameras) else None,
                           table_z_mm=cfg.table_top_z_m * 1000.0)     # the cell's config: the table's surface
        for i in range(n):
            s = seed + i
            for cond in CONDITIONS[interference]:
                task = CellTrial(emu.reset_scene(s), cond, s, emu, cfg, prof, brain, vlm, vlm_set, videos)
                try:
                    summ = open_episode(trial_setup(task, root / task.label, wall_budget_s, images),
                                        progress=lambda m: None, robot=robot)
                    r = TrialResult(**summ["trial_result"])
                except Exception as e:  # noqa: BLE001 - a trial that crashes is a failed trial, recorded
                    r = task.result(f"{type(e).__name__}: {e}", robot)
                results.append(r)
                moved = f", moved {r.event['object']} {r.event['shift_m'] * 1000:.0f} mm ({r.event['when']})" \
                    if r.event else (f", interference missed: {r.missed}" if r.missed else "")
                say(f"trial {s} [{cond}] {'SUCCESS' if r.success else 'FAILURE'} {r.outcome}: "
                    f"{r.placement_error_mm} mm, {r.episode_s:.1f} s, {r.batches} batches, {r.replans} replans{moved}"
                    + ("" if r.success else f" - {r.reason[:120]}"))
    finally:
        wall = time.monotonic() - t_start
        sim = emu.physics.sim_time_s - sim0
        cpu = emu.physics.step_cpu_s - cpu0
        if robot is not None:
            robot.close()
        emu.stop()
    summary = {"scene": cfg.name, "profile": prof.name, "brain": results[0].brain if results else brain,
               "privileged": bool(results and results[0].privileged), "trials": len(results), "seed": seed,
               "interference": interference, "images": images, "report_hz": report_hz,
               "conditions": summarize(results),
               "realtime": {"wall_s": round(wall, 1), "sim_s": round(sim, 1),
                            "factor": round(sim / wall, 3) if wall > 0 else None,
                            "physics_capacity": round(sim / cpu, 1) if cpu > 0 else None},
               "results": [asdict(r) for r in results]}
    (root / "summary.json").write_text(json.dumps(summary, indent=1))
    from motormind.evaluate.provenance import stamp
    from motormind.evaluate.publish import write_reports
    rows = report_rows(results, cfg.name, root)
    if videos:                               # a page per trial, linked from the report's episode lines
        from motormind.evaluate.episode_page import write_page
        for row, r in zip(rows, results):
            write_page(row["run_dir"], {**row, "wall_s": r.episode_s, "rollout": r.rollout})
    summary["reports"] = write_reports(rows, root, f"xArm6 placement trials: {cfg.name}", stamp())
    summary["out"] = str(root)
    return summary


def _film(emu, hz: float):
    """--videos HZ: the trial's rollout, a frame of every camera each 1/HZ s of the emulator's clock
    (the xArm6 backend has no control steps to hook; sim/xarm_cell/cameras.py RolloutFrames)."""
    if not hz:
        return None
    from motormind.record import ClockRollout

    from motormind.sim.xarm_cell.cameras import RolloutFrames
    return ClockRollout(RolloutFrames(emu), lambda: emu.physics.sim_time_s, hz, "the emulator's clock").attach()


def report_rows(results: list[TrialResult], scene: str, root: Path) -> list[dict]:
    """The trials as evaluation rows, for eval's report (report.md, report.html): a suite per
    scene, a trial's seed as its init state, interference as a condition; times and VLM calls
    from each trial's record."""
    rows = []
    for r in results:
        run_dir = root / f"t{r.seed:03d}_{r.interference}"
        tot = vlm_totals_of(run_dir / "events.jsonl")
        calls = tot["calls"]
        vlm_s = sum(v for role, v in tot["latency_by_role"].items() if role in ("planner", "executor", "verifier"))
        itf = "off" if r.interference == "off" else (f"fetched@{r.event['when']}" if r.event else "on")
        rows.append({"key": f"xarm6_{scene}/0/{r.seed}/s0/{r.brain}/full/-/itf={r.interference}",
                     "suite": f"xarm6_{scene}", "task": 0, "init_state": r.seed, "seed": 0, "ablation": "full",
                     "noise": {}, "brain": r.brain, "brain_label": r.brain, "privileged": r.privileged,
                     "success": r.success, "outcome": r.outcome, "reason": r.reason, "steps": 0,
                     "step_budget": None, "batches": r.batches, "replans": r.replans, "verifier_rejections": 0,
                     "controller_rejections": 0, "vlm_calls": calls, "vlm_tokens": {}, "vlm_cost_usd": None,
                     "vlm_s": round(vlm_s, 3), "motion_s": 0.0, "episode_s": r.episode_s,
                     "overhead_s": round(max(0.0, r.episode_s - vlm_s), 3), "instruction": r.instruction,
                     "interference": None if r.interference == "off" else itf,
                     "interference_event": r.event, "interference_missed": r.missed,
                     "interference_measures": r.interference_measures, "run_dir": str(run_dir)})
    return rows


def format_summary(s: dict) -> str:
    lines = [f"{s['trials']} trials on scene {s['scene']!r}, brain {s['brain']}"
             + (" (PRIVILEGED: the cell's true object poses)" if s["privileged"] else "")]
    for name, c in s["conditions"].items():
        e = c["placement_error_mm"]
        lines.append(f"  {name:>3}: {c['successes']}/{c['n']} = {c['rate']:.1%} (95% Wilson {c['wilson95'][0]:.1%}-"
                     f"{c['wilson95'][1]:.1%}; seed paper {c['seed_paper']:.0%}); placement error median "
                     f"{e['median']} mm, p90 {e['p90']} mm, max {e['max']} mm; episode median "
                     f"{c['episode_s']['median']} s; outcomes "
                     + (", ".join(f"{o} {k}" for o, k in sorted(c["outcomes"].items())) or "none"))
        m = c.get("measures")
        if m and m["interfered"]:
            lines.append(f"       moved {m['interfered']}; Monitor cancels {m['cancel']['n']} (interference -> cancel "
                         f"median {m['cancel']['ms_median']} ms, p90 {m['cancel']['ms_p90']} ms; -> success median "
                         f"{m['success']['ms_median']} ms); stale commands median {m['stale_commands']['median']}, "
                         f"max {m['stale_commands']['max']}")
    rt = s["realtime"]
    lines.append(f"  real-time factor {rt['factor']} ({rt['sim_s']} s simulated in {rt['wall_s']} s); the physics "
                 f"alone steps {rt['physics_capacity']}x faster than real time")
    lines.append(f"  record: {s['out']}/summary.json"
                 + (f"  report: {s['reports']['markdown']}, {s['reports']['html']}" if s.get("reports") else ""))
    return "\n".join(lines)


def register(sub) -> None:
    from motormind.argtypes import non_negative_int, positive, positive_int, rollout_hz, seconds
    p = sub.add_parser("trials", help="placement trials on the xArm6 rehearsal cell through the real xArm6 backend",
                       description="Run N placement episodes on the physics-backed xArm6 emulator (a scene of "
                                   "configs/cells/) through the unmodified SDK, with and without interference; "
                                   "report success with 95% Wilson intervals and the placement error.")
    p.add_argument("robot", choices=["xarm6"], help="the robot whose rehearsal cell runs the trials")
    p.add_argument("--scene", default="placement", help="a scene in configs/cells/ or a YAML path")
    p.add_argument("-n", "--trials", type=positive_int, default=40, help="layouts (seeds seed .. seed+n-1)")
    p.add_argument("--interference", choices=list(CONDITIONS), default="both",
                   help="off, on (an object moved mid-episode), or both (each layout twice)")
    p.add_argument("--seed", type=non_negative_int, default=0)
    p.add_argument("--brain", choices=["oracle", "openai"], default="oracle")
    p.add_argument("--vlm", default=None, help="--brain openai: a VLM config (configs/vlm/NAME.yaml or a path)")
    p.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE")
    p.add_argument("--images", action="store_true",
                   help="serve the scene's cameras and give the roles their frames (the oracle reads none)")
    p.add_argument("--profile", default="xarm6", help="robot profile (configs/robots/)")
    p.add_argument("--wall-budget", type=seconds, default=300.0, help="per episode, seconds")
    p.add_argument("--report-hz", type=positive, default=5.0, help="the emulator's report rate (the real arm: 5)")
    p.add_argument("--videos", nargs="?", type=rollout_hz, const=10.0, default=0.0, metavar="HZ",
                   help="per trial: a rollout video (every camera side by side, a frame every 1/HZ s of the "
                        "emulator's simulated clock, played at HZ fps; 10 Hz when given without a number; the "
                        "real-time arm has no control steps to count) and an episode page (episode.html) linked "
                        "from the report; default: none")
    p.add_argument("--out", default=None, help="output directory (default runs/trials_<time>_<scene>)")
    p.set_defaults(fn=_main)


def _main(a) -> int:
    from motormind.errors import ConfigError
    from motormind.sim.xarm_cell.config import load_cell
    load_cell(a.scene)                       # a bad scene is one line, before anything starts
    if a.brain == "openai":
        from motormind.brains.endpoint import checked_vlm_config
        checked_vlm_config(a.vlm, a.vlm_set)
    try:
        s = run_trials(a.scene, a.trials, a.interference, a.seed, a.out, a.profile, a.brain, a.vlm, a.vlm_set,
                       a.images or a.brain == "openai", a.wall_budget, a.report_hz, videos=a.videos)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    print(format_summary(s))
    return 0
