"""Before an evaluation runs: the grid exists on its backend, and a perturbed suite really is perturbed.

``check_grid`` is the one check of a grid (suites x tasks x init states) for every backend: each
suite exists there, each task and init state is in its range; otherwise a ConfigError names the
flag, the value and what exists, before any episode runs (a grid the backend does not have is
refused, never run as invented episodes). ``motormind eval`` calls it with its flags, ``motormind
launch sim`` with its launch arguments.

For LIBERO-PRO a variant that silently used its base suite's instruction or init states would
report base-suite numbers under a perturbation's name. For each task to run we compare the variant
with its base: ``_lan`` and ``_task`` must change the BDDL instruction, ``_object`` the objects,
``_swap`` the initial placements, and every variant must ship init states of its own.
"""
from __future__ import annotations

import contextlib
import io
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError
from motormind.sim.libero_pro.suites import split_suite

FLAGS = ("--suites", "--tasks", "--inits")      # what the errors name (a launch gives its own argument names)
# LIBERO's chatter is silenced by swapping the process's sys.stdout and sys.stderr: one check at a time, or
# two threads checking at once restore each other's swapped streams and leave the process silent
_QUIET = threading.RLock()


@dataclass
class _Suite:
    n_tasks: int
    n_inits: Callable[[int], int]                # task -> its init states
    notes: Callable[[list], list[str]] = field(default=lambda tasks: [])   # more checks of the tasks to run


def _listed(values: list[int]) -> str:
    """Values for an error: all of a few, the first and last of many (``--tasks 0-99``)."""
    if len(values) <= 10:
        return str(values)
    return f"[{values[0]}, {values[1]}, ..., {values[-1]}] ({len(values)} values)"


def check_grid(backend: str, suites, tasks, inits=(), flags=FLAGS) -> list[str]:
    """Raise ConfigError naming the flag, the value and what exists when a suite, a task or an init
    state is not on ``backend`` (libero or fake); return notes on what was checked. LIBERO's own
    chatter ("[info] Applying task order ...", which sim/libero_pro/suites.py sends to stderr) is
    dropped: what went wrong is in the ConfigError, the one line the command prints."""
    suite_flag, task_flag, init_flag = flags
    backends = {"libero": _libero, "fake": _fake}
    if backend not in backends:
        raise ConfigError(f"--backend: unknown {backend!r} (known: {', '.join(backends)})")
    opener = backends[backend]
    notes = []
    chatter = io.StringIO()
    with _QUIET, contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        for name in suites:
            suite = opener(name, suite_flag)
            n = suite.n_tasks
            bad = [t for t in tasks if not 0 <= t < n]
            if bad:
                raise ConfigError(f"{task_flag}: {_listed(bad)} out of range for {name!r} (0..{n - 1})")
            for t in tasks:
                m = suite.n_inits(t)
                bad = [i for i in inits if not 0 <= i < m]
                if bad:
                    raise ConfigError(f"{init_flag}: {_listed(bad)} out of range for {name!r} task {t} (0..{m - 1})")
            notes += suite.notes(list(tasks))
    return notes


def _fake(name: str, flag: str) -> _Suite:
    """The kinematic fake's suites (``tasks.FAKE_SUITES``)."""
    from .tasks import FAKE_SUITES
    if name not in FAKE_SUITES:
        raise ConfigError(f"{flag}: no suite {name!r} on the fake backend (it has: {', '.join(FAKE_SUITES)})")
    n_tasks, n_inits = FAKE_SUITES[name]
    return _Suite(n_tasks, lambda t: n_inits, lambda tasks: [f"{name}: the kinematic fake's suite, {n_tasks} tasks"])


def _libero(name: str, flag: str) -> _Suite:
    """A LIBERO-PRO suite: registered, complete (BDDL, init states, assets), a variant perturbed."""
    from motormind.sim.libero_pro.suites import SuiteError, require_complete
    try:
        suite = require_complete(name)
    except SuiteError as e:
        raise ConfigError(f"{flag}: refusing suite {name!r}: {e}") from None
    return _Suite(suite.get_num_tasks(), lambda t: int(suite.get_task_init_states(t).shape[0]),
                  lambda tasks: _perturbation_notes(name, suite, tasks, flag))


def _bddl(suite, t: int) -> str:
    from motormind.sim.libero_pro.suites import task_paths
    bddl, _ = task_paths(suite, t)
    return open(bddl).read()


def _section(text: str, name: str) -> str:
    i = text.find(f"(:{name}")
    if i < 0:
        return ""
    depth, j = 0, i
    while j < len(text):
        depth += text[j] == "("
        depth -= text[j] == ")"
        j += 1
        if depth == 0:
            break
    return " ".join(text[i:j].split()).lower()


def _perturbation_notes(name: str, suite, tasks: list[int], flag: str) -> list[str]:
    from motormind.sim.libero_pro.suites import require_complete
    n = suite.get_num_tasks()
    base, pert = split_suite(name)
    if pert == "base":
        return [f"{name}: complete, {n} tasks"]
    base_suite = require_complete(base)
    sections = {"lan": ("language",), "task": ("goal",), "object": ("objects", "fixtures"), "swap": ("init",)}[pert]
    want = " or ".join(sections)
    for t in tasks:
        v_text, b_text = _bddl(suite, t), _bddl(base_suite, t)
        if all(_section(v_text, sec) == _section(b_text, sec) for sec in sections):
            raise ConfigError(f"{flag}: refusing suite {name!r}: task {t}'s BDDL has the same ({want} ...) as "
                              f"{base!r}: the perturbation is missing (would silently evaluate the base task)")
        v_states = suite.get_task_init_states(t)
        b_states = base_suite.get_task_init_states(t)
        if v_states.shape == b_states.shape and np.array_equal(v_states, b_states):
            raise ConfigError(f"{flag}: refusing suite {name!r}: task {t} uses {base!r}'s init states, not its own")
    return [f"{name}: complete, {n} tasks; '{pert}' perturbation present in the BDDL ({want}) and own init "
            f"states for tasks {tasks}"]
