"""Before an evaluation runs: every suite is complete, and a perturbed suite really is perturbed.

A LIBERO-PRO variant that silently used its base suite's instruction or init states would report
base-suite numbers under a perturbation's name. For each task to run we compare the variant with
its base: ``_lan`` and ``_task`` must change the BDDL instruction, ``_object`` the objects, ``_swap``
the initial placements, and every variant must ship init states of its own.
"""
from __future__ import annotations

import contextlib
import io

import numpy as np

from ..errors import ConfigError
from .report import split_suite


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


def check_suite(name: str, tasks: list[int], inits: list[int] = ()) -> list[str]:
    """Raise ConfigError naming what is wrong (a task or an init state that is not there: before
    any episode runs, not as an error row); return notes on what was checked. LIBERO's own chatter
    ("[info] Applying task order ...", which sim/libero_pro/suites.py sends to stderr) is dropped:
    what went wrong is in the ConfigError, the one line the command prints."""
    chatter = io.StringIO()
    with contextlib.redirect_stdout(chatter), contextlib.redirect_stderr(chatter):
        return _check_suite(name, tasks, inits)


def _check_suite(name: str, tasks: list[int], inits) -> list[str]:
    from motormind.sim.libero_pro.suites import SuiteError, require_complete
    try:
        suite = require_complete(name)
    except SuiteError as e:
        raise ConfigError(f"refusing suite {name!r}: {e}") from None
    n = suite.get_num_tasks()
    bad = [t for t in tasks if not 0 <= t < n]
    if bad:
        raise ConfigError(f"--tasks: {bad} out of range for {name!r} (0..{n - 1})")
    for t in tasks:
        m = int(suite.get_task_init_states(t).shape[0])
        bad = [i for i in inits if not 0 <= i < m]
        if bad:
            raise ConfigError(f"--inits: {bad[:10]} out of range for {name!r} task {t} (0..{m - 1})")
    base, pert = split_suite(name)
    if pert == "base":
        return [f"{name}: complete, {n} tasks"]
    base_suite = require_complete(base)
    sections = {"lan": ("language",), "task": ("goal",), "object": ("objects", "fixtures"), "swap": ("init",)}[pert]
    want = " or ".join(sections)
    for t in tasks:
        v_text, b_text = _bddl(suite, t), _bddl(base_suite, t)
        if all(_section(v_text, sec) == _section(b_text, sec) for sec in sections):
            raise ConfigError(f"refusing suite {name!r}: task {t}'s BDDL has the same ({want} ...) as "
                              f"{base!r}: the perturbation is missing (would silently evaluate the base task)")
        v_states = suite.get_task_init_states(t)
        b_states = base_suite.get_task_init_states(t)
        if v_states.shape == b_states.shape and np.array_equal(v_states, b_states):
            raise ConfigError(f"refusing suite {name!r}: task {t} uses {base!r}'s init states, not its own")
    return [f"{name}: complete, {n} tasks; '{pert}' perturbation present in the BDDL ({want}) and own init "
            f"states for tasks {tasks}"]
