"""Oracle rollouts on LIBERO tasks, sampled into *moments*: measured + privileged state at chosen times.

One rollout is one ordinary oracle episode through the stack (``EpisodeRunner``: planner, executor
batches, Controller, verifier; monitor and memory off, no images for the roles). The recorder's
listener sees every event; a moment is taken

* before each command (the state the oracle's next command is chosen in),
* every ``every`` control steps while a ``move`` runs (mid-motion), and
* once at the end of the episode (after a successful episode that ended with the object still
  gripped, once the Controller has opened the gripper: LIBERO's ``In`` check can hold before the
  release).

A moment keeps the flattened MuJoCo state only. After the episode each moment is restored
(``set_state_from_flattened`` + ``forward``) to read the measured state the roles would see, the
privileged snapshot (the same instant: positions, contacts, predicates), and, for the moments the
generator keeps, the camera images. Restoring gives images consistent with the snapshot, and only
kept moments pay for rendering.

Simulator imports happen inside functions: importing this module is light.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from .truth import round_list


@dataclass
class Moment:
    rollout: str                   # "suite/task/init"
    index: int                     # order within the rollout
    step: int                      # control steps used so far
    tag: str                       # command | mid | end
    sim_state: np.ndarray
    subgoal_id: str | None
    plan: list                     # the plan at that time: [{"id", "description", "success_criterion"}]
    command: dict | None = None    # the oracle's command about to run / running (with its target)
    state: dict = field(default_factory=dict)       # measured state, prompt units (Observation.state_dict)
    priv: dict = field(default_factory=dict)        # privileged snapshot (truth.SnapshotScene layout)
    images: dict = field(default_factory=dict)      # name -> HxWx3 uint8 (rendered on demand)
    depth: dict = field(default_factory=dict)       # name -> HxW float32 m, the same render (grounding truth only)
    cameras: dict = field(default_factory=dict)     # name -> CameraCalibration at the image size (Robot.cameras())


@dataclass
class Rollout:
    suite: str
    task: int
    init_state: int
    instruction: str
    success: bool
    outcome: str
    steps: int
    specs: dict                    # subgoal id -> (kind, a, b, pred), the oracle's own
    moments: list
    wall_s: float = 0.0
    scene_facts: dict = field(default_factory=dict)   # Robot.scene_facts(): the table's height (not privileged)

    @property
    def key(self) -> str:
        return f"{self.suite}/{self.task}/{self.init_state}"


def _capture_class():
    from motormind.sim.libero_pro.backend import LiberoRobot

    class CapturingRobot(LiberoRobot):
        """LiberoRobot that calls ``on_step()`` after every control step of a motion."""
        on_step = None

        def _step_servo(self, p_tgt, r_tgt) -> None:
            super()._step_servo(p_tgt, r_tgt)
            if self.on_step is not None:
                self.on_step()

    return CapturingRobot


class Collector:
    """Keeps one simulator per (suite, task) open across its init states (a reset, not a rebuild)."""

    def __init__(self, image_size: int = 128, seed: int = 0, every: int = 4, progress=None):
        self.image_size = int(image_size)
        self.seed = int(seed)
        self.every = max(1, int(every))
        self.progress = progress or (lambda s: None)
        self.robot = None
        self._key = None

    def close(self) -> None:
        if self.robot is not None:
            self.robot.close()
            self.robot = None
            self._key = None

    def _robot(self, suite: str, task: int, init: int):
        if self._key == (suite, task):
            self.robot.reset(init, seed=self.seed)
            return self.robot
        self.close()
        cls = _capture_class()
        self.robot = cls(suite, task, init, seed=self.seed, image_size=self.image_size)
        self._key = (suite, task)
        return self.robot

    def rollout(self, suite: str, task: int, init: int) -> Rollout:
        from motormind.record import Recorder
        from motormind.registry import BrainConfig, build_brain
        from motormind.runner import EpisodeConfig, EpisodeRunner

        t0 = time.monotonic()
        robot = self._robot(suite, task, init)
        key = f"{suite}/{task}/{init}"
        scene = robot.scene()
        brain = build_brain(BrainConfig("oracle"), robot, robot.profile)
        rec = Recorder(None)
        moments: list[Moment] = []
        cur = {"sid": None, "plan": [], "cmd": None}
        sim = lambda: robot._env.env.sim  # noqa: E731 - re-fetched: hard resets rebuild it

        def take(tag: str) -> None:
            moments.append(Moment(key, len(moments), int(robot.steps_used), tag,
                                  sim().get_state().flatten().copy(), cur["sid"], list(cur["plan"]),
                                  dict(cur["cmd"]) if cur["cmd"] else None))

        def listen(ev: dict) -> None:
            k = ev["kind"]
            if k == "plan":
                cur["plan"] = [dict(s) for s in ev["subgoals"]]
            elif k == "batch":          # its first command's moment is the same instant
                cur["sid"] = ev["batch"].get("subgoal_id")
                cur["cmd"] = None
            elif k == "command_start":
                c = dict(ev["command"])
                if c.get("op") == "move":
                    obs = robot.observe()
                    v = np.asarray(c.get("vector") or robot.profile.directions[c["direction"]], dtype=float)
                    v = v / (np.linalg.norm(v) or 1.0)
                    c["_target_m"] = round_list(obs.eef_pos_m + v * float(c["distance_mm"]) / 1000.0, 6)
                    c["_unit"] = round_list(v, 6)
                cur["cmd"] = c
                take("command")
            elif k == "command_end":
                cur["cmd"] = None

        def on_step() -> None:
            c = cur["cmd"]
            if c and c.get("op") == "move" and robot.steps_used % self.every == 0:
                take("mid")

        rec.listeners.append(listen)
        robot.on_step = on_step
        try:
            cfg = EpisodeConfig(images=False, monitor=False, memory=False, max_steps=robot.budget)
            runner = EpisodeRunner(robot, brain, robot.language_instruction, rec, cfg,
                                   success_fn=robot.success, steps_fn=lambda: robot.steps_used)
            res = runner.run()
            if res.success and robot.observe().gripper_fraction < 0.95 and not robot.budget_exhausted:
                # LIBERO's check can hold before the release (an object inside a basket region, still
                # gripped): finish the place as the oracle's batch would have, so the end state is
                # the released one. The wait keeps the open command integrating: from a wide grasp
                # the gripper command alone can return before the fingers start to move.
                runner.controller.run({"batch_id": "release", "subgoal_id": cur["sid"] or "",
                                       "commands": [{"op": "gripper", "action": "open"},
                                                    {"op": "wait", "seconds": 0.6}]}, source="diagnose")
        finally:
            robot.on_step = None
        cur["cmd"] = None
        take("end")
        # restore each moment: measured state + privileged snapshot of the same instant
        for m in moments:
            self._restore(m.sim_state)
            m.state = robot.observe().state_dict()
            m.priv = snapshot(robot, scene)
        out = Rollout(suite, int(task), int(init), robot.language_instruction, bool(res.success), res.outcome,
                      int(res.steps), dict(brain.specs), moments, round(time.monotonic() - t0, 3),
                      dict(robot.scene_facts()) if hasattr(robot, "scene_facts") else {})
        self.progress(f"  {key}: {'success' if res.success else res.outcome}, {res.steps} steps, "
                      f"{len(moments)} moments, {out.wall_s:.1f} s")
        return out

    def _restore(self, state: np.ndarray) -> None:
        sim = self.robot._env.env.sim
        sim.set_state_from_flattened(state)
        sim.forward()

    def render(self, rollout: Rollout, moments: list) -> None:
        """Camera images (upright), their depth images and the cameras' calibrations for ``moments``
        of the rollout just collected."""
        robot = self.robot
        if self._key != (rollout.suite, rollout.task):
            raise RuntimeError("render() must follow rollout() of the same task")
        for m in moments:
            if m.images:
                continue
            self._restore(m.sim_state)
            for cam in robot.camera_names:
                m.images[cam], m.depth[cam] = robot.render(cam, depth=True)
            m.cameras = robot.cameras()


def snapshot(robot, scene) -> dict:
    """The privileged snapshot a question stores (truth.SnapshotScene layout), base frame, m."""
    obs = robot.observe()
    goal = scene.goal_state
    movable = list(scene.object_names)
    regions_all = set(scene.region_names)
    named = {str(x) for p in goal for x in p[1:]}
    objects = {}
    for n in movable + sorted(named - set(movable) - regions_all):
        try:
            lo, hi = scene.object_aabb(n)
        except KeyError:
            continue
        objects[n] = {"lo": round_list(lo), "hi": round_list(hi)}
    regions = {}
    for n in sorted(named & regions_all):
        r = scene.region(n)
        regions[n] = {"lo": round_list(r["lo"]), "hi": round_list(r["hi"])}
    return {
        "frame": "base", "units": "m",
        "robot": {"eef_pos_m": round_list(obs.eef_pos_m), "gripper_width_mm": round(float(obs.gripper_width_mm), 3),
                  "gripper_fraction": round(float(obs.gripper_fraction), 4)},
        "movable": movable, "objects": objects, "regions": regions,
        "goal_state": goal, "predicates": [[p, bool(scene.predicate(p))] for p in goal],
    }
