"""A role's prompt: its file (``prompts/NAME.md``) rendered with values, each placeholder written the
way its kind needs (``prompt_value``): what others wrote reaches a prompt as data, never as its
structure. One definition, used by the roles (``roles/base.py``) and by the brains' own probes
(``brains/probe.py``), which must not import the roles.
"""
from __future__ import annotations

import json
import re
import unicodedata
from string import Template
from typing import Any

from .commands import is_id
from .paths import prompt_dir

_CACHE: dict = {}


def load_prompt(name: str) -> dict:
    """Sections of prompts/NAME.md: {'system': ..., 'user': ...}."""
    if name not in _CACHE:
        text = (prompt_dir() / f"{name}.md").read_text()
        parts = re.split(r"^## (\w+)\s*$", text, flags=re.M)
        _CACHE[name] = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}
    return _CACHE[name]


# -- what a prompt echoes, quoted as data ---------------------------------------------------------
def _unsafe(ch: str) -> bool:
    """A character that must not reach a prompt raw: a control character (C0, DEL, C1), a format
    character (bidi overrides, zero-width marks) or a line or paragraph separator."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every unsafe character (``_unsafe``) but those in ``keep`` written as ``\\uXXXX``."""
    if all(not _unsafe(ch) or ch in keep for ch in text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if _unsafe(ch) and ch not in keep else ch for ch in text)


def quote_text(text: Any) -> str:
    """Text a model, an operator or a publisher wrote, as a prompt shows it: one JSON string literal
    (its quotes, backslashes, newlines and every control character escaped), so that nothing in it
    can read as a line of the prompt (a fake ``SYSTEM:`` line, a ``## system`` heading)."""
    return escape_controls(json.dumps(text if isinstance(text, str) else str(text), ensure_ascii=False))


def quote_id(value: Any) -> str:
    """An id as a prompt shows it: bare when it is one (``commands.ID_RULE``), quoted otherwise."""
    return value if is_id(value) else quote_text(value)


# How each placeholder's value reaches a prompt (``render``), default-deny:
#   PROMPT_TEXT  text the stack composes from the robot profile, its config and its own code, passed as
#                is (control characters but newline and tab escaped). ``last_report`` is
#                ``components.brief_report``'s, ``replan`` ``Planner.plan``'s and ``measurements``
#                ``grounding.points.Grounding``'s: they quote what they echo (a point's label, a camera).
#   JSON_TEXT    JSON the stack wrote (``json.dumps``: every string in it quoted); one that is not JSON
#                is quoted as data.
#   IDS          an id, bare when it matches ``commands.ID_PATTERN``, quoted otherwise.
#   anything else is data (an instruction, a subgoal and its criterion, Memory's summary, an error that
#   quotes an answer): one JSON string (``quote_text``).
PROMPT_TEXT = frozenset({"schema", "vocabulary", "robot_description", "directions", "axes", "rotation_frame",
                         "cameras", "image_names", "what", "question", "options", "letters", "skill", "colour",
                         "setup", "look", "budget", "last_report", "replan", "pointing", "measurements"})
JSON_TEXT = frozenset({"state", "plan", "limits", "last_verdict", "batch", "progress", "events"})
IDS = frozenset({"subgoal_id", "batch_id"})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def prompt_value(key: str, value: Any) -> str:
    """``value`` of placeholder ``key`` as the prompt shows it (the table above)."""
    if not isinstance(value, str):
        return escape_controls(json.dumps(value, default=str))
    if key in PROMPT_TEXT:
        return escape_controls(value, keep="\n\t")
    if key in JSON_TEXT and _is_json(value):
        return escape_controls(value)
    if key in IDS:
        return quote_id(value)
    return quote_text(value)


def render(name: str, values: dict) -> tuple[str, str]:
    p = load_prompt(name)
    vals = {k: prompt_value(k, v) for k, v in values.items()}
    return (Template(p.get("system", "")).safe_substitute(vals),
            Template(p.get("user", "")).safe_substitute(vals))
