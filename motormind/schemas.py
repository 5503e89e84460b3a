"""JSON response schemas of the five roles, and a small strict validator for them.

The same schemas go to servers that support structured output (``response_format``); every
answer, from any brain, is checked here before anything acts on it. The validator covers the
JSON-Schema subset the schemas use: type, properties, required, additionalProperties, enum,
items, minItems, maxItems, minimum, maximum, minLength, maxLength, pattern (anchored at both ends,
``^...$``, matched against the whole string) and anyOf (a command's forms: vocabulary.command_schema,
the same table the Controller's parser reads; an answer's forms, each with a ``title``: the Executor's
batch, look or replan request, the Verifier's verdict or replan request). Every id a model writes is
``commands.ID_PATTERN``. The answer fields for pointing, regions and replan requests are defined once in
``grounding/points.py`` (``FIELDS``).
"""
from __future__ import annotations

import re
from typing import Any

from . import SCHEMA_VERSION
from .commands import ID_MAX_CHARS, ID_PATTERN, ID_RULE, RATIONALE_MAX_CHARS
from .errors import ResponseError
from .grounding.points import answer_forms, fields_for
from .strict_json import finite_number, show
from .vocabulary import command_schema

_SRC = {"type": "string", "maxLength": ID_MAX_CHARS}          # an optional label, e.g. "oracle"
_ID = {"type": "string", "pattern": ID_PATTERN}                # an id (commands.ID_RULE)

PLANNER = {
    "type": "object", "additionalProperties": False,
    "required": ["subgoals"],
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "reasoning": {"type": "string", "maxLength": 4000},
        "subgoals": {"type": "array", "minItems": 1, "maxItems": 12, "items": {
            "type": "object", "additionalProperties": False,
            "required": ["id", "description", "success_criterion"],
            "properties": {"id": _ID,
                           "description": {"type": "string", "maxLength": 500},
                           "success_criterion": {"type": "string", "maxLength": 500}}}},
        **fields_for("planner"),
    },
}

_COMMAND = command_schema()       # from the vocabulary (motormind/commands.py); the Controller checks the rest

# The Executor answers with one of (``anyOf``, each form titled): a batch (commands: what the Controller
# runs, ``commands.BATCH_FIELDS``; points and regions beside them are resolved before it runs), a look
# (points and/or regions, no commands: no control step, no batch; it is asked again at once), or a replan
# request (``replan`` alone: ``grounding.points.check_answer``).
EXECUTOR = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "integer", "enum": [SCHEMA_VERSION]}, "source": _SRC,
        "batch_id": _ID,
        "subgoal_id": _ID,
        "rationale": {"type": "string", "maxLength": RATIONALE_MAX_CHARS},
        "commands": {"type": "array", "minItems": 1, "items": _COMMAND},
        **fields_for("executor"),
    },
    "anyOf": answer_forms("executor"),
}

VERIFIER = {
    "type": "object", "additionalProperties": False,
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "achieved": {"type": "boolean"},
        "evidence": {"type": "string", "maxLength": 2000},
        "confidence": {"type": "number", "minimum": 0, "maximum": 1},
        **fields_for("verifier"),
    },
    "anyOf": answer_forms("verifier"),
}

MONITOR = {
    "type": "object", "additionalProperties": False,
    "required": ["cancel", "reason"],
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "cancel": {"type": "boolean"}, "reason": {"type": "string", "maxLength": 1000},
    },
}

MEMORY = {
    "type": "object", "additionalProperties": False,
    "required": ["summary"],
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "summary": {"type": "string", "maxLength": 2000},
        "facts": {"type": "array", "maxItems": 20, "items": {"type": "string", "maxLength": 300}},
    },
}

DIAGNOSE = {       # the skill diagnostic's multiple-choice answer (motormind/diagnose)
    "type": "object", "additionalProperties": False,
    "required": ["answer"],
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "answer": {"type": "string", "enum": ["A", "B", "C", "D"]},
        "reasoning": {"type": "string", "maxLength": 2000},
    },
}

ROLE_SCHEMAS = {"planner": PLANNER, "executor": EXECUTOR, "verifier": VERIFIER, "monitor": MONITOR,
                "memory": MEMORY, "diagnose": DIAGNOSE}

# The camera checks of an endpoint (motormind/brains/probe.py): not roles, nothing acts on them.
COLOURS = ("red", "green", "blue", "yellow", "magenta", "cyan", "white", "black")
PROBE = {          # "what colour fills each image?"
    "type": "object", "additionalProperties": False,
    "required": ["colours"],
    "properties": {
        "schema_version": {"type": "integer"}, "source": _SRC,
        "colours": {"type": "array", "maxItems": 8, "items": {"type": "string", "enum": [*COLOURS, "none"]}},
    },
}
POINT = {          # "where is the dot?", in the convention the prompt names
    "type": "object", "additionalProperties": False,
    "required": ["x", "y"],
    "properties": {"schema_version": {"type": "integer"}, "source": _SRC,
                   "x": {"type": "number"}, "y": {"type": "number"}},
}
CHECK_SCHEMAS = {"probe": PROBE, "point": POINT}

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def _matches(pattern: str, value: str) -> bool:
    """JSON Schema's ``pattern`` for the anchored patterns used here: ``^...$`` must match the whole
    string (Python's ``$`` would also accept a trailing newline, so the anchors are fullmatch)."""
    if not (pattern.startswith("^") and pattern.endswith("$")):
        raise ValueError(f"schema pattern {pattern!r}: only patterns anchored at both ends (^...$) are supported")
    return re.fullmatch(pattern[1:-1], value) is not None


def _any_of(value: Any, forms: list, path: str) -> None:
    """``anyOf``: the value matches one of ``forms``; else the reasons of the forms of its op (a command
    of a known op is told what that op's forms want), or of the titled forms whose required fields it
    holds (an answer's forms), or what ops or forms there are."""
    why = []
    for form in forms:
        try:
            validate(value, form, path)
            return
        except ResponseError as e:
            op = form.get("properties", {}).get("op", {}).get("enum")
            if isinstance(value, dict) and op is not None and value.get("op") in op:
                why.append(str(e))
            elif isinstance(value, dict) and "title" in form and all(k in value for k in form.get("required", [])):
                why.append(f"as a {form['title']}: {e}")
    if not why and isinstance(value, dict):     # an answer begun in one form: what that form still wants
        for form in forms:
            if "title" in form and any(k in value for k in form.get("required", [])):
                try:
                    validate(value, form, path)
                except ResponseError as e:
                    why.append(f"as a {form['title']}: {e}")
    if why:
        why = list(dict.fromkeys(why))
        titled_only = all("title" in f for f in forms)
        raise ResponseError(why[0] if len(why) == 1 else f"{path}: matches no form{'' if titled_only else ' of its op'}: " + "; or ".join(why))
    ops = [o for f in forms for o in f.get("properties", {}).get("op", {}).get("enum", [])]
    if ops:
        got = value.get("op") if isinstance(value, dict) else value
        raise ResponseError(f"{path}: must be an object whose op is one of {sorted(set(ops), key=ops.index)}, "
                            f"got {show(got)}")
    titled = [f for f in forms if "title" in f]
    if titled:
        if not isinstance(value, dict):
            raise ResponseError(f"{path}: must be an object, got {type(value).__name__}")
        kinds = "; or ".join(f"{' and '.join(f['required'])} (a {f['title']})" for f in titled)
        raise ResponseError(f"{path}: missing (required): {kinds}")
    raise ResponseError(f"{path}: matches none of {len(forms)} allowed forms")


def validate(value: Any, schema: dict, path: str = "$") -> None:
    """Raise ResponseError naming the JSON path and the rule broken (and nothing else, for any value)."""
    if "anyOf" in schema:
        _any_of(value, schema["anyOf"], path)
    t = schema.get("type")
    if t == "integer":
        if isinstance(value, bool) or not isinstance(value, int) or finite_number(value) is None:
            raise ResponseError(f"{path}: must be an integer, got {show(value)}")
    elif t == "number":
        if finite_number(value) is None:
            raise ResponseError(f"{path}: must be a finite number, got {show(value)}")
    elif t is not None and not isinstance(value, _TYPES[t]):
        raise ResponseError(f"{path}: must be {t}, got {type(value).__name__}")
    if "enum" in schema and not any(type(value) is type(e) and value == e for e in schema["enum"]):
        raise ResponseError(f"{path}: must be one of {schema['enum']}, got {show(value)}")
    if isinstance(value, str) and "minLength" in schema and len(value) < schema["minLength"]:
        raise ResponseError(f"{path}: must hold at least {schema['minLength']} character(s)")
    if isinstance(value, str) and "maxLength" in schema and len(value) > schema["maxLength"]:
        raise ResponseError(f"{path}: {len(value)} characters exceed the limit of {schema['maxLength']}")
    if isinstance(value, str) and "pattern" in schema and not _matches(schema["pattern"], value):
        rule = ID_RULE if schema["pattern"] == ID_PATTERN else f"the pattern {schema['pattern']}"
        raise ResponseError(f"{path}: must be {rule}, got {show(value)}")
    if t == "number" or t == "integer":
        if "minimum" in schema and value < schema["minimum"]:
            raise ResponseError(f"{path}: {value:g} is below the minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ResponseError(f"{path}: {value:g} is above the maximum {schema['maximum']}")
    if isinstance(value, dict):
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise ResponseError(f"{path}.{key}: missing (required)")
        if schema.get("additionalProperties") is False:
            extra = sorted(show(k) for k in set(value) - set(props))
            if extra:
                raise ResponseError(f"{path}: unexpected field(s) {extra}")
        for key, sub in props.items():
            if key in value:
                validate(value[key], sub, f"{path}.{key}")
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            raise ResponseError(f"{path}: needs at least {schema['minItems']} item(s)")
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            raise ResponseError(f"{path}: at most {schema['maxItems']} items, got {len(value)}")
        if "items" in schema:
            for i, item in enumerate(value):
                validate(item, schema["items"], f"{path}[{i}]")
