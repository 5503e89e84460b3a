"""What an episode is asked, and how it is judged: a LIBERO-PRO task (the robot's own: its BDDL
instruction and success check), or one of the kinematic fake's tasks for tests of the evaluation
machinery (``MoveTask`` with its scripted answers, ``ReachTask`` for a VLM endpoint).

A task gives ``open_episode`` (session/open.py): ``describe`` and ``label`` (progress, run dir),
``instruction(robot)``, ``header(robot)`` (the task's part of the record's ``episode_start``),
``judge(robot)`` -> (success_fn, steps_fn) (PRIVILEGED: the evaluator's; asked as the run begins),
``reuse(robot)`` (an open robot reset for this episode), ``brain(robot, record)`` (a task that
answers for itself; None otherwise), and the seeds of its interference and its noisy brain.
Optionally ``start(rec)`` (its first event), ``film()`` and ``interfere(spec, task, runner, robot,
rec)`` (its own rollout and outside hand instead of session/attach.py's; the film is attached as the
run begins), ``ended()`` (the run is over) and ``finish(rec, summary)`` -> more summary fields: an
xArm6 cell trial (evaluate/trials.py ``CellTrial``) has them.
"""
from __future__ import annotations

import zlib
from dataclasses import dataclass

# the kinematic fake's suites: name -> (tasks, init states of each task). A task, an init state and
# a seed pick the fake's move (evaluate/jobs.py fake_task); anything else is refused (checks.check_grid)
FAKE_SUITES = {"fake": (10, 50)}


def task_of(setup):
    """The setup's task: as given, else the robot's own (a LIBERO-PRO config)."""
    if setup.task is not None:
        return setup.task
    if getattr(setup.robot, "type", None) == "libero":
        return LiberoTask(setup.robot)
    raise ValueError(f"robot {getattr(setup.robot, 'type', setup.robot)!r} has no task of its own: "
                     "the setup must name one")


class _Seeded:
    suite: str
    task: int
    init_state: int
    seed: int

    def interference_seed(self) -> int:
        """The seed of an episode's interference (its moment, direction and distance): one per
        suite x task x init state x seed, the same in every ablation and brain."""
        return zlib.crc32(f"{self.suite}/{self.task}/{self.init_state}/{self.seed}".encode())

    def noise_seed(self) -> int:
        """The noisy brain's seed (brains/noisy.py): one per task x init state x seed."""
        return self.seed * 1000003 + self.init_state * 101 + self.task

    @property
    def label(self) -> str:
        return f"{self.suite}_t{self.task}_i{self.init_state}"

    @property
    def describe(self) -> str:
        return f"{self.suite} task {self.task} init state {self.init_state}"

    def brain(self, robot=None, record=None):
        return None


class LiberoTask(_Seeded):
    """A LIBERO-PRO task: the config's suite, task, init state and seed."""

    def __init__(self, cfg):
        self.cfg = cfg
        self.suite, self.task, self.init_state, self.seed = cfg.suite, cfg.task, cfg.init_state, cfg.seed

    def reuse(self, robot) -> None:
        if (robot.suite_name, robot.task_index) != (self.suite, self.task):
            raise ValueError(f"robot is {robot.suite_name}/{robot.task_index}, "
                             f"the setup wants {self.suite}/{self.task}")
        robot.reset(self.init_state, seed=self.seed)

    def instruction(self, robot) -> str:
        return robot.language_instruction

    def header(self, robot) -> dict:
        return {"simulator": robot.versions(), "suite": self.suite, "task": self.task, "init_state": self.init_state,
                "seed": self.seed, "task_name": robot.task_name, "instruction": robot.language_instruction,
                "instruction_source": "env.language_instruction (BDDL)", "task_language": robot.task_language}

    def judge(self, robot):
        return robot.success, lambda: robot.steps_used


@dataclass(frozen=True)
class _FakeTask(_Seeded):
    suite: str = "fake"
    task: int = 0
    init_state: int = 0
    seed: int = 0

    def reuse(self, robot) -> None:
        raise ValueError("the fake's tasks build their robot for each episode")

    def header(self, robot) -> dict:
        return {"simulator": {"fake": True}, "instruction": self.instruction(robot)}


@dataclass(frozen=True)
class MoveTask(_FakeTask):
    """Move ``dx_mm`` forward; the scripted answers move back instead when ``fail`` (a deterministic
    share of failures). Success: the gripper ended ``dx_mm`` forward, within 2 mm."""
    dx_mm: int = 10
    fail: bool = False

    def instruction(self, robot=None) -> str:
        return f"move {self.dx_mm} mm forward"

    def brain(self, robot=None, record=None):
        from ..brains.scripted import ScriptedBrain
        text = self.instruction()
        plan = {"subgoals": [{"id": "s1", "description": text, "success_criterion": "moved"}]}
        batch = {"commands": [{"op": "move", "direction": "back" if self.fail else "forward",
                               "distance_mm": self.dx_mm}, {"op": "done"}]}
        return ScriptedBrain({"planner": [plan], "executor": [batch]}, label="scripted")

    def judge(self, robot):
        x0 = float(robot.pos[0])
        return (lambda: robot.pos[0] - x0 > self.dx_mm / 1000 - 0.002), None


@dataclass(frozen=True)
class ReachTask(_FakeTask):
    """The reach task of ``serve-brain --backend reach`` (serve/reach.py), for a brain that calls a
    VLM endpoint: its success is ReachBrain's check on the fake."""

    def instruction(self, robot=None) -> str:
        return "reach the target point, then close the gripper"

    def judge(self, robot):
        from ..serve.reach import ReachBrain
        return (lambda: ReachBrain().success(robot)), None
