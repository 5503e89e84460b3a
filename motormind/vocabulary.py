"""The command vocabulary (``commands.VOCABULARY``, one ``OpSpec`` per op) rendered for its readers:

    command_schema()        the JSON schema of one command in the Executor's response schema (schemas.py):
                            one form per op (and per choice of its one_of fields), the very fields the
                            parser (commands.parse_command) allows and requires
    prompt_block(...)       the vocabulary lines of the Executor's prompt (prompts/executor.md ``${vocabulary}``)
    markdown_table()        the op table of docs/commands.md (between its ``vocabulary`` markers)
    describe(command, ...)  one command as an operator reads it: ``move 149.2 mm down-forward`` (the console)

A new op is its type in ``commands.py`` (with its ``SPEC``) and its execution in the Controller;
every rendering here follows. ``python -m motormind.vocabulary`` rewrites the docs table.
"""
from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from pathlib import Path

from .commands import COMMON_DOC, COMMON_PROMPT, VOCABULARY

DOCS_BEGIN = "<!-- vocabulary: rendered from motormind/commands.py by `python -m motormind.vocabulary` -->"
DOCS_END = "<!-- /vocabulary -->"
DOCS_FILE = Path(__file__).resolve().parent.parent / "docs" / "commands.md"


def command_schema() -> dict:
    """One command's JSON schema: ``anyOf`` one form per op and choice (``OpSpec.forms``), each an
    object of exactly the fields the parser allows for it, the required ones required. What a schema
    cannot say (the profile's limits and words, the workspace box, the tilt bound, ``done`` last) the
    Controller checks, and the Executor's prompt states."""
    forms = []
    for spec in VOCABULARY:
        for required, fields in spec.forms():
            forms.append({"type": "object", "additionalProperties": False, "required": ["op", *required],
                          "properties": {"op": {"type": "string", "enum": [spec.op]},
                                         **{f.name: dict(f.schema) for f in fields}}})
    return {"anyOf": forms}


def prompt_block(directions: str, axes: str, rotation_frame: str) -> str:
    """The vocabulary as the Executor's prompt tells it, with the profile's words filled in."""
    words = {"directions": directions, "axes": axes, "rotation_frame": rotation_frame}
    lines = [f"- {line.format(**words)}" for spec in VOCABULARY for line in spec.prompt]
    return "\n".join([*lines, f"- {COMMON_PROMPT}"])


def markdown_table() -> str:
    rows = ["| op | fields | meaning |", "|---|---|---|"]
    rows += [f"| {s.op} | {s.fields_doc} | {s.meaning} |" for s in VOCABULARY]
    return "\n".join(rows)


def markdown_example() -> str:
    """A batch holding every op's example (docs/commands.md)."""
    import json
    cmds = ",\n".join(f"   {json.dumps(c)}" for s in VOCABULARY for c in s.example)
    return f'```json\n{{"schema_version": 1, "batch_id": "b3", "subgoal_id": "s1",\n "commands": [\n{cmds}]}}\n```'


def markdown_block() -> str:
    return (f"{DOCS_BEGIN}\nA batch (JSON, `schema_version` 1):\n\n{markdown_example()}\n\n{markdown_table()}\n\n"
            f"{COMMON_DOC}\n{DOCS_END}")


def _num(v) -> str:
    return f"{v:g}" if isinstance(v, (int, float)) and not isinstance(v, bool) else str(v)


def _words(vector, directions: Mapping | None) -> str:
    """A base-frame vector in the profile's direction words: the words it points along, strongest
    first (``down-forward``); without words, the vector itself."""
    try:
        v = [float(x) for x in vector]
        n = math.sqrt(sum(x * x for x in v))
    except (TypeError, ValueError):
        return f"along {vector!r}"
    if not directions or len(v) != 3 or n < 1e-9:
        return f"along {vector!r}"
    u = [x / n for x in v]
    dots = []
    for k, (word, w) in enumerate(directions.items()):
        d = sum(a * float(b) for a, b in zip(u, w))
        if d > 0.2:
            vertical = abs(float(w[2])) > 0.9
            dots.append((-round(d, 6), 0 if vertical else 1, k, word))
    if not dots:
        return f"along {vector!r}"
    return "-".join(w for *_, w in sorted(dots))


def describe(command, directions: Mapping | None = None) -> str:
    """One command (its wire form) in the words an operator reads fastest, e.g. ``move 149.2 mm
    down-forward``, ``rotate yaw -15 deg``, ``gripper close``. Anything that is not a command of the
    vocabulary reads as its JSON (it will be rejected, and the reason says why)."""
    import json
    c = command if isinstance(command, dict) else {}
    op = c.get("op")
    try:
        if op == "move":
            where = c["direction"] if "direction" in c else _words(c.get("vector"), directions)
            guard = " until contact" if c.get("until") == "contact" else ""
            return f"move {_num(c['distance_mm'])} mm {where}{guard}"
        if op == "rotate":
            a = c["angle_deg"]
            return f"rotate {c['axis']} {'+' if isinstance(a, (int, float)) and a > 0 else ''}{_num(a)} deg"
        if op == "gripper":
            return f"gripper {c['action']}" if "action" in c else f"gripper to {_num(c['width'])} of its stroke"
        if op == "wait":
            return f"wait {_num(c['seconds'])} s"
        if op == "done":
            return "done" + (f": {c['note']}" if c.get("note") else " (claims the subgoal)")
    except (KeyError, TypeError):
        pass
    try:
        return json.dumps(command)[:200]
    except (TypeError, ValueError):
        return repr(command)[:200]


def render_docs(path: Path = DOCS_FILE) -> bool:
    """Rewrite the op table of docs/commands.md; True when it changed."""
    text = path.read_text()
    head, _, rest = text.partition(DOCS_BEGIN)
    _, _, tail = rest.partition(DOCS_END)
    new = head + markdown_block() + tail
    if new != text:
        path.write_text(new)
    return new != text


if __name__ == "__main__":
    changed = render_docs()
    print(f"{DOCS_FILE}: {'rewritten' if changed else 'already current'}", file=sys.stderr)
