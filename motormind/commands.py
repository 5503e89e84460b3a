"""The command vocabulary: typed commands and the strict JSON batch parser.

A batch on the wire::

    {"schema_version": 1, "batch_id": "b3", "subgoal_id": "s1",
     "commands": [{"op": "move", "direction": "forward", "distance_mm": 12.2},
                  {"op": "move", "vector": [1, 1, 0], "distance_mm": 20},
                  {"op": "move", "direction": "down", "distance_mm": 60, "until": "contact"},  # guarded
                  {"op": "rotate", "axis": "yaw", "angle_deg": 15},
                  {"op": "gripper", "action": "close"},        # or "open", or {"width": 0.4}
                  {"op": "wait", "seconds": 0.5},
                  {"op": "done"}]}

Any command may carry a ``note`` (kept, echoed in the report, never acted on). Each op's fields are
one table (``OpSpec``): the response schema a model is shown (``vocabulary.command_schema``) and this
parser read it, so the two cannot disagree (tests/core/test_schema_parser_agree.py).

Parsing checks shape and types and the profile's per-command limits; it never clips. Every
error names the field (``commands[2].distance_mm``) and the limit it broke. It takes any decoded
value (from ``strict_json.decode_json`` or a transport's dict) and only ever raises
``CommandError``: a list where a word belongs, an integer too large for a double, a 10,000
character note are rejections like any other. Checks that need the robot's measured state (the
workspace box, the orientation bound) are the Controller's.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Union

import numpy as np

from . import SCHEMA_VERSION
from .errors import CommandError
from .messages import Batch
from .profile import RobotProfile, apart
from .strict_json import check_depth, decode_json, finite_number, show

NOTE_MAX_CHARS = 500         # a command's note (any op)
ID_MAX_CHARS = 64            # batch_id, subgoal_id, source
# An id (a batch's, a subgoal's, a cancel's batch id: every id of a JSON payload) is a short token of a
# safe alphabet: it is echoed into prompts and logs, so a newline, a quote or a control character in one
# could read as prompt structure. ID_PATTERN is what the schemas shown to a model say (anchored, as JSON
# Schema's ``pattern`` wants); ``check_id`` is the one check, refusing anything else naming the rule.
ID_ALPHABET = "A-Z a-z 0-9 _ . : -"
ID_PATTERN = f"^[A-Za-z0-9_.:-]{{1,{ID_MAX_CHARS}}}$"
ID_RULE = f"1 to {ID_MAX_CHARS} characters of {ID_ALPHABET}"
_ID_RE = re.compile(ID_PATTERN[1:-1])
RATIONALE_MAX_CHARS = 2000   # the Executor's rationale beside its commands
VECTOR_ELEMENT_MAX = 1e4     # |element| of an explicit move vector (a direction: only its sense counts)
BATCH_FIELDS = ("schema_version", "batch_id", "subgoal_id", "commands", "source", "rationale")


# -- the vocabulary: each op's wire fields, what they mean, how it reads -----------------------------------
@dataclass(frozen=True)
class FieldSpec:
    name: str
    schema: dict             # the field's JSON schema (what the schema can say; the Controller checks the
                             # profile's limits, the workspace box and the tilt bound, which the prompt states)
    doc: str = ""
    required: bool = False   # every command of the op gives it


@dataclass(frozen=True)
class OpSpec:
    """One op of the vocabulary, the one definition every reader follows: the response schema a model
    is shown (``vocabulary.command_schema``: one form per op and choice), the parser that judges its
    answer (``parse_command``: the allowed, required and exactly-one-of fields come from here), the
    Executor's prompt, docs/commands.md and the console's queue (``motormind/vocabulary.py``)."""
    op: str
    fields: tuple            # FieldSpec, in wire order (the COMMON ones follow on every op)
    meaning: str             # docs/commands.md
    fields_doc: str          # docs/commands.md: the fields and their rules
    prompt: tuple            # the Executor's prompt lines ({directions}, {axes}, {rotation_frame}: the profile's)
    example: tuple           # wire forms, for the docs
    one_of: tuple = ()       # field names of which exactly one is given (a move's direction or vector)

    @property
    def all_fields(self) -> tuple:
        return (*self.fields, *COMMON_FIELDS)

    @property
    def names(self) -> set:
        return {"op", *(f.name for f in self.all_fields)}

    @property
    def required(self) -> tuple:
        return tuple(f.name for f in self.fields if f.required)

    def forms(self) -> list[tuple[tuple, tuple]]:
        """(required field names, allowed FieldSpecs) of each form a command of this op takes: one
        per choice of ``one_of`` (the schema's ``anyOf``), else one."""
        choices = self.one_of or (None,)
        return [(self.required + ((c,) if c else ()),
                 tuple(f for f in self.all_fields if f.name not in self.one_of or f.name == c)) for c in choices]


# A note may ride on any command: a model explains its commands (3 of the first 9 real-VLM episodes
# did). It is kept, echoed in the report with the command it rides on (a report quotes it as data), and
# never acted on.
COMMON_FIELDS = (FieldSpec("note", {"type": "string", "maxLength": NOTE_MAX_CHARS},
                           f"optional, at most {NOTE_MAX_CHARS} characters: kept and echoed in the report, "
                           "never acted on"),)
UNTIL = ("contact",)          # what a guarded move stops at


_NUMBER = {"type": "number"}
_WORD = {"type": "string"}


def _with_note(d: dict, note: str) -> dict:
    return {**d, "note": note} if note else d


@dataclass(frozen=True)
class Move:
    vector: tuple            # unit vector, base frame
    distance_mm: float
    direction: str = ""      # the word, when one was used
    until: str = ""          # "contact": a guarded move (ends done at the first contact, the batch goes on)
    note: str = ""

    op = "move"
    SPEC = OpSpec(
        "move",
        (FieldSpec("direction", _WORD, "a direction word of the profile"),
         FieldSpec("vector", {"type": "array", "minItems": 3, "maxItems": 3,
                              "items": {"type": "number", "minimum": -VECTOR_ELEMENT_MAX,
                                        "maximum": VECTOR_ELEMENT_MAX}}, "[x, y, z], base frame"),
         FieldSpec("distance_mm", _NUMBER, "mm, > 0", required=True),
         FieldSpec("until", {"type": "string", "enum": list(UNTIL)}, "contact: a guarded move")),
        "relative translation of the grip point; with `until: contact` a guarded move: it ends `done` at the "
        "first contact and the batch goes on; one that travels its whole distance without contact is `blocked` "
        "(nothing was met: what was queued for the contact is not run)",
        "`direction` (a word of the profile) **or** `vector` [x, y, z] (base frame, normalised; each element within "
        "-10000..10000, not the zero vector), and `distance_mm` > 0; optional `until`: `contact` (a robot whose "
        "profile has `limits.guarded_moves` false refuses it)",
        ('{{"op": "move", "direction": <one of {directions}>, "distance_mm": d}}   (d > 0)',
         '{{"op": "move", "vector": [x, y, z], "distance_mm": d}}   (direction given as a base-frame vector, not [0, 0, 0])',
         '{{"op": "move", "direction": "down", "distance_mm": d, "until": "contact"}}   (a guarded move, any direction: '
         'stops at the first contact (of the hand, the fingers or a held object), ends done there and the batch goes '
         'on, e.g. to a close; if it travels all of d '
         'without contact it is blocked and the rest of the batch is not run; only where limits.guarded_moves is '
         'true)'),
        ({"op": "move", "direction": "forward", "distance_mm": 12.2},
         {"op": "move", "vector": [1, 1, 0], "distance_mm": 20},
         {"op": "move", "direction": "down", "distance_mm": 60, "until": "contact",
          "note": "down onto the can's top, then close"}),
        one_of=("direction", "vector"))

    @property
    def displacement_mm(self) -> np.ndarray:
        return np.asarray(self.vector) * self.distance_mm

    @property
    def guarded(self) -> bool:
        return self.until == "contact"

    def to_json(self) -> dict:
        if self.direction:
            d = {"op": "move", "direction": self.direction, "distance_mm": self.distance_mm}
        else:
            d = {"op": "move", "vector": [round(v, 6) for v in self.vector], "distance_mm": self.distance_mm}
        return _with_note({**d, **({"until": self.until} if self.until else {})}, self.note)


@dataclass(frozen=True)
class Rotate:
    axis: str
    axis_vector: tuple
    angle_deg: float
    note: str = ""

    op = "rotate"
    SPEC = OpSpec(
        "rotate",
        (FieldSpec("axis", _WORD, "roll, pitch or yaw (the profile's axes)", required=True),
         FieldSpec("angle_deg", _NUMBER, "degrees, signed", required=True)),
        "rotation about the grip point",
        "`axis` (roll, pitch, yaw: base-frame axes per the profile), `angle_deg` (signed)",
        ('{{"op": "rotate", "axis": <one of {axes}>, "angle_deg": a}}   (about {rotation_frame}-frame axes; sign '
         'gives the sense)',),
        ({"op": "rotate", "axis": "yaw", "angle_deg": -15},))

    def to_json(self) -> dict:
        return _with_note({"op": "rotate", "axis": self.axis, "angle_deg": self.angle_deg}, self.note)


@dataclass(frozen=True)
class Gripper:
    width: float             # fraction of the full stroke: 0 closed, 1 open
    action: str = ""         # "open" / "close" when the word was used
    note: str = ""

    op = "gripper"
    SPEC = OpSpec(
        "gripper",
        (FieldSpec("action", {"type": "string", "enum": ["open", "close"]}, "open or close"),
         FieldSpec("width", {"type": "number", "minimum": 0, "maximum": 1}, "fraction of the full stroke, 0..1")),
        "",
        "`action` open/close **or** `width` 0..1 (fraction of the full stroke)",
        ('{{"op": "gripper", "action": "open" | "close"}}  or  {{"op": "gripper", "width": w}}  (w in 0..1 of the '
         'full stroke)',),
        ({"op": "gripper", "action": "close"}, {"op": "gripper", "width": 0.4}),
        one_of=("action", "width"))

    def to_json(self) -> dict:
        return _with_note({"op": "gripper", "action": self.action} if self.action
                          else {"op": "gripper", "width": self.width}, self.note)


@dataclass(frozen=True)
class Wait:
    seconds: float
    note: str = ""

    op = "wait"
    SPEC = OpSpec(
        "wait",
        (FieldSpec("seconds", _NUMBER, "s, > 0", required=True),),
        "hold the pose",
        "`seconds` > 0",
        ('{{"op": "wait", "seconds": s}}   (s > 0)',),
        ({"op": "wait", "seconds": 0.5},))

    def to_json(self) -> dict:
        return _with_note({"op": "wait", "seconds": self.seconds}, self.note)


@dataclass(frozen=True)
class Done:
    note: str = ""

    op = "done"
    SPEC = OpSpec(
        "done",
        (),
        "the Executor's claim that the subgoal is achieved; only last in a batch; the Verifier decides",
        "none of its own",
        ('{{"op": "done"}}   (last command only: your claim that the subgoal is achieved; a Verifier checks it)',),
        ({"op": "done", "note": "the bowl is between the fingers"},))

    def to_json(self) -> dict:
        return _with_note({"op": "done"}, self.note)


Command = Union[Move, Rotate, Gripper, Wait, Done]
COMMANDS = (Move, Rotate, Gripper, Wait, Done)           # the vocabulary, in the order it is told
VOCABULARY = tuple(c.SPEC for c in COMMANDS)
OPS = tuple(s.op for s in VOCABULARY)
_SPECS = {s.op: s for s in VOCABULARY}
# How every command may end: docs/commands.md and the Executor's prompt say it once, beside the ops
COMMON_DOC = (f"Every command may carry a `note` (at most {NOTE_MAX_CHARS} characters): it is kept and echoed in "
              "the report with its command, and never acted on.")
COMMON_PROMPT = (f'Any command may carry "note": "..." (at most {NOTE_MAX_CHARS} characters): echoed in the report, '
                 "never acted on.")


@dataclass
class Issue:
    """One reason a command (or the batch) is invalid."""
    index: int | None        # command index, None for the batch as a whole
    field: str               # e.g. "commands[2].distance_mm"
    message: str             # names the limit

    def __str__(self) -> str:
        return f"{self.field}: {self.message}"


def _names(keys) -> list[str]:
    return sorted(show(k) if not isinstance(k, str) else k for k in keys)


def _word(obj: dict, key: str, where: str, known, what: str) -> str:
    """A word field: a string among ``known``, else a CommandError naming the field and the words."""
    f = f"{where}.{key}"
    v = obj.get(key)
    if not isinstance(v, str) or v not in known:
        got = f"unknown {what} {show(v)}" if isinstance(v, str) else f"must be a word, got {show(v)}"
        raise CommandError(f"{f}: {got} (known: {', '.join(known)})", f)
    return v


def parse_command(obj: Any, profile: RobotProfile, where: str = "command") -> Command:
    """Parse one command dict, raising CommandError that names the field and the limit."""
    lim = profile.limits
    if not isinstance(obj, dict):
        raise CommandError(f"{where}: must be an object, got {type(obj).__name__}", where)
    op = _word(obj, "op", where, OPS, "op")
    spec = _SPECS[op]                       # the fields the response schema allows, from the same table
    extra = set(obj) - spec.names
    if extra:
        raise CommandError(f"{where}: unknown field(s) {_names(extra)} for op '{op}' "
                           f"(allowed: {sorted(spec.names)})", f"{where}.{_names(extra)[0]}")
    for key in spec.required:
        if key not in obj:
            raise CommandError(f"{where}.{key}: missing", f"{where}.{key}")
    if spec.one_of and sum(k in obj for k in spec.one_of) != 1:
        raise CommandError(f"{where}: give exactly one of {' or '.join(repr(k) for k in spec.one_of)}",
                           f"{where}.{spec.one_of[0]}")
    note = obj.get("note", "")
    fn = f"{where}.note"
    if not isinstance(note, str):
        raise CommandError(f"{fn}: must be a string, got {show(note)}", fn)
    if len(note) > NOTE_MAX_CHARS:
        raise CommandError(f"{fn}: {len(note)} characters exceed the limit of {NOTE_MAX_CHARS} "
                           "(nothing is cut: shorten it)", fn)

    def need_number(key: str) -> float:
        f = f"{where}.{key}"
        if key not in obj:
            raise CommandError(f"{f}: missing", f)
        raw = obj[key]
        v = finite_number(raw)
        if v is None:
            if isinstance(raw, bool) or not isinstance(raw, (int, float)):
                raise CommandError(f"{f}: must be a number, got {show(raw)}", f)
            raise CommandError(f"{f}: must be a finite number within the double range, got {show(raw)}", f)
        return v

    if op == "move":
        d = need_number("distance_mm")
        f = f"{where}.distance_mm"
        if d <= 0:
            raise CommandError(f"{f}: must be > 0 (give the direction instead of a sign), got {d:g}", f)
        if d < lim.min_move_mm:
            raise CommandError(f"{f}: {apart(d, lim.min_move_mm)} mm is below the minimum move {lim.min_move_mm:g} mm", f)
        if d > lim.max_move_mm:
            raise CommandError(f"{f}: {apart(d, lim.max_move_mm)} mm exceeds the per-command limit {lim.max_move_mm:g} mm",
                               f)
        until = ""
        if "until" in obj:
            until = _word(obj, "until", where, UNTIL, "until")
            if not lim.guarded_moves:
                fu = f"{where}.until"
                raise CommandError(f"{fu}: this robot senses no contact, so a guarded move cannot tell contact "
                                   f"from a blocked move (limits.guarded_moves false in profile {profile.name})", fu)
        if "direction" in obj:
            word = _word(obj, "direction", where, sorted(profile.directions), "direction")
            return Move(tuple(float(x) for x in profile.directions[word]), d, word, until, note)
        vec = obj["vector"]
        fv = f"{where}.vector"
        if not (isinstance(vec, list) and len(vec) == 3):
            raise CommandError(f"{fv}: must be a list of 3 numbers [x, y, z] in the base frame", fv)
        nums = [finite_number(x) for x in vec]
        if any(x is None for x in nums):
            raise CommandError(f"{fv}: every element must be a finite number, got {show(vec)}", fv)
        big = next((k for k, x in enumerate(nums) if abs(x) > VECTOR_ELEMENT_MAX), None)
        if big is not None:
            raise CommandError(f"{fv}: element {big} is {nums[big]:g}, outside -{VECTOR_ELEMENT_MAX:g}.."
                               f"{VECTOR_ELEMENT_MAX:g} (a direction: only its sense counts, e.g. [1, 1, 0])", fv)
        n = math.sqrt(sum(x * x for x in nums))
        if n < 1e-9:
            raise CommandError(f"{fv}: must not be the zero vector (its length must be at least 1e-9)", fv)
        return Move(tuple(x / n for x in nums), d, "", until, note)

    if op == "rotate":
        a = need_number("angle_deg")
        f = f"{where}.angle_deg"
        if abs(a) > lim.max_rotate_deg:
            raise CommandError(f"{f}: |{apart(a, math.copysign(lim.max_rotate_deg, a))}| deg exceeds the per-command "
                               f"limit {lim.max_rotate_deg:g} deg", f)
        if abs(a) < lim.min_rotate_deg:
            raise CommandError(f"{f}: |{apart(a, math.copysign(lim.min_rotate_deg, a))}| deg is below the minimum "
                               f"rotation {lim.min_rotate_deg:g} deg", f)
        axis = _word(obj, "axis", where, sorted(profile.rotation_axes), "axis")
        return Rotate(axis, tuple(float(x) for x in profile.rotation_axes[axis]), a, note)

    if op == "gripper":
        if "action" in obj:
            act = obj["action"]
            if not isinstance(act, str) or act not in ("open", "close"):
                raise CommandError(f"{where}.action: must be 'open' or 'close', got {show(act)}", f"{where}.action")
            return Gripper(1.0 if act == "open" else 0.0, act, note)
        w = need_number("width")
        if not 0.0 <= w <= 1.0:
            raise CommandError(f"{where}.width: must be within 0..1 (fraction of the stroke), got "
                               f"{apart(w, 1.0 if w > 1.0 else 0.0)}",
                               f"{where}.width")
        return Gripper(w, "", note)

    if op == "wait":
        s = need_number("seconds")
        if s <= 0:
            raise CommandError(f"{where}.seconds: must be > 0, got {s:g}", f"{where}.seconds")
        if s > lim.max_wait_s:
            raise CommandError(f"{where}.seconds: {apart(s, lim.max_wait_s)} s exceeds the limit {lim.max_wait_s:g} s",
                               f"{where}.seconds")
        return Wait(s, note)

    return Done(note)


def is_id(value: Any) -> bool:
    """``value`` is an id: a string of ``ID_RULE`` (``ID_PATTERN``)."""
    return isinstance(value, str) and _ID_RE.fullmatch(value) is not None


def check_id(value: Any, field: str) -> str:
    """``value`` as an id (an integer is taken as its digits), else a CommandError naming ``field``
    and the rule (the value shown escaped: never echoed raw)."""
    if isinstance(value, int) and not isinstance(value, bool):
        if value.bit_length() > 4 * ID_MAX_CHARS:
            raise CommandError(f"{field}: longer than {ID_MAX_CHARS} characters ({ID_RULE})", field)
        value = str(value)
    if is_id(value):
        return value
    if not isinstance(value, str):
        raise CommandError(f"{field}: must be a string of {ID_RULE}, got {show(value)}", field)
    if len(value) > ID_MAX_CHARS:
        raise CommandError(f"{field}: {len(value)} characters exceed the limit of {ID_MAX_CHARS} ({ID_RULE})", field)
    raise CommandError(f"{field}: must be {ID_RULE} (an id, echoed into prompts), got {show(value)}", field)


def _id(obj: dict, key: str, required: bool) -> str:
    v = obj.get(key)
    if v is None:
        if required:
            raise CommandError(f"{key}: missing", key)
        return ""
    return check_id(v, key)


def _text(obj: dict, key: str, limit: int) -> str:
    """An optional free-text batch field: a string of at most ``limit`` characters ("" if absent)."""
    v = obj.get(key, "")
    if not isinstance(v, str):
        raise CommandError(f"{key}: must be a string, got {show(v)}", key)
    if len(v) > limit:
        raise CommandError(f"{key}: {len(v)} characters exceed the limit of {limit}", key)
    return v


def check_batch(obj: Any, profile: RobotProfile) -> tuple[dict, list, list[Issue]]:
    """Check a decoded batch. Returns (header, per-command parse results, issues).

    Each per-command result is a Command or None (invalid). Issues list every problem found, so one
    answer can be told all its mistakes at once. A value that is not an object raises CommandError.
    It reads a fixed depth into ``obj`` whatever its nesting (``strict_json.check_depth`` bounds a
    transport's dict before anything echoes it)."""
    issues: list[Issue] = []
    if not isinstance(obj, dict):
        raise CommandError(f"batch: must be a JSON object, got {type(obj).__name__}", "batch")
    ver = obj.get("schema_version", SCHEMA_VERSION)
    if isinstance(ver, bool) or not isinstance(ver, int) or ver != SCHEMA_VERSION:
        issues.append(Issue(None, "schema_version",
                            f"unsupported version {show(ver)} (supported: the integer {SCHEMA_VERSION})"))
    header = {"batch_id": "", "subgoal_id": ""}
    for key, check in (("batch_id", lambda: _id(obj, "batch_id", False)),
                       ("subgoal_id", lambda: _id(obj, "subgoal_id", False)),
                       ("source", lambda: _text(obj, "source", ID_MAX_CHARS)),
                       ("rationale", lambda: _text(obj, "rationale", RATIONALE_MAX_CHARS))):
        try:
            v = check()
            if key in header:
                header[key] = v
        except CommandError as e:
            issues.append(Issue(None, e.field, str(e).split(": ", 1)[1]))
    extra = set(obj) - set(BATCH_FIELDS)
    if extra:
        issues.append(Issue(None, _names(extra)[0], f"unknown batch field(s) {_names(extra)} "
                            f"(allowed: {', '.join(BATCH_FIELDS)})"))
    cmds = obj.get("commands")
    if not isinstance(cmds, list):
        issues.append(Issue(None, "commands", "missing or not a list"))
        return header, [], issues
    if not cmds:
        issues.append(Issue(None, "commands", "empty: a batch holds 1 to "
                            f"{profile.limits.max_batch} commands"))
    if len(cmds) > profile.limits.max_batch:
        issues.append(Issue(None, "commands", f"{len(cmds)} commands exceed the batch limit "
                            f"{profile.limits.max_batch}"))
    parsed: list = []
    for i, c in enumerate(cmds):
        try:
            parsed.append(parse_command(c, profile, f"commands[{i}]"))
        except CommandError as e:
            parsed.append(None)
            issues.append(Issue(i, e.field, str(e).split(": ", 1)[1] if ": " in str(e) else str(e)))
    for i, c in enumerate(parsed):
        if isinstance(c, Done) and i != len(parsed) - 1:
            issues.append(Issue(i, f"commands[{i}].op", "'done' must be the last command of a batch"))
    return header, parsed, issues


def parse_batch(data: str | bytes | dict, profile: RobotProfile, source: str = "") -> Batch:
    """Strictly parse a batch (JSON text or a decoded dict). Raises CommandError listing every issue."""
    if isinstance(data, (str, bytes)):
        obj = decode_json(data, "batch")
    else:
        obj = data
        check_depth(obj, "batch")
    header, parsed, issues = check_batch(obj, profile)
    if issues:
        err = CommandError("; ".join(str(i) for i in issues), issues[0].field)
        err.issues = issues  # type: ignore[attr-defined]
        raise err
    return Batch(header["batch_id"], header["subgoal_id"], tuple(parsed), source, raw=obj, profile=profile)
