"""Strict loading of configuration mappings (decoded YAML) into typed dataclasses.

One set of rules for every configuration MotorMind reads (robot profiles, episode settings, VLM
configs, robot backends, the ROS 2 stack file): a key the dataclass does not have is an error
naming it and the nearest valid key; a value of the wrong type is an error naming the field, the
type wanted and the value given; a dataclass checks its own ranges in ``__post_init__`` (raising
``ConfigError("field: why")``). Every error names the file (``source``) and the dotted field.

    from_mapping(EpisodeConfig, {"max_batches": 60}, source="configs/ros/motormind.yaml", where="episode")

Field metadata, when given, adds checks: ``gt`` / ``ge`` / ``le`` (a number above / at least / at
most), ``choices`` (the allowed values); ``load`` is a field's own loader ``(value, source, field)``
(a robot backend's configuration, whose class its ``type`` picks). A field with
``metadata={"internal": True}`` cannot be set from a file.
"""
from __future__ import annotations

import dataclasses
import difflib
import enum
import math
import types
import typing
from typing import Any

from .errors import ConfigError
from .strict_json import show


def nearest(key, known) -> str:
    """' (did you mean 'collision_sensitivity'?)', or '' when nothing is close."""
    close = nearest_key(key, known)
    return f" (did you mean {close!r}?)" if close else ""


def nearest_key(key, known) -> str:
    if not isinstance(key, str):
        return ""
    close = difflib.get_close_matches(key, [str(k) for k in known], n=1, cutoff=0.6)
    return close[0] if close else ""


def unknown_key_message(extra, known, what: str = "key") -> str:
    """The message for keys a mapping may not have: each one, and the nearest valid key of each
    that has one: ``unknown key(s) ['collision_sensitivty'] (did you mean 'collision_sensitivity'?)``."""
    names = sorted(show(k) if not isinstance(k, str) else k for k in extra)
    hints = [(k, nearest_key(k, known)) for k in names]
    hints = [(k, n) for k, n in hints if n]
    if len(hints) == 1 and len(names) == 1:
        hint = f" (did you mean {hints[0][1]!r}?)"
    elif hints:
        hint = " (did you mean " + ", ".join(f"{n!r} for {k!r}" for k, n in hints) + "?)"
    else:
        hint = ""
    return f"unknown {what}(s) {names}{hint} (known: {', '.join(sorted(map(str, known)))})"


def _join(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


def _fail(source: str, field: str, message: str):
    raise ConfigError(f"{source}: {field}: {message}" if source else f"{field}: {message}")


def settable_fields(cls) -> dict:
    """name -> dataclasses.Field for the fields a file may set."""
    return {f.name: f for f in dataclasses.fields(cls) if f.init and not f.metadata.get("internal")}


def check_keys(d: dict, known, source: str, where: str) -> None:
    extra = set(d) - set(known)
    if extra:
        _fail(source, where or "config", unknown_key_message(extra, known))


def coerce(value, hint, source: str, field: str):
    """``value`` as the annotation ``hint`` asks, else a ConfigError naming ``field``."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        rest = [a for a in args if a is not type(None)]
        if len(rest) == 1:
            return coerce(value, rest[0], source, field)
        errors = []
        for a in rest:
            try:
                return coerce(value, a, source, field)
            except ConfigError as e:
                errors.append(str(e))
        _fail(source, field, f"must be one of {' | '.join(_name(a) for a in rest)}, got {show(value)}")
    if origin is typing.Literal:
        if value not in args or any(type(value) is bool and type(a) is not bool for a in args if a == value):
            _fail(source, field, f"must be one of {', '.join(repr(a) for a in args)}, got {show(value)}")
        return value
    if hint is Any:
        return value
    if hint is bool:
        if not isinstance(value, bool):
            _fail(source, field, f"must be true or false, got {show(value)}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or \
                (isinstance(value, float) and (not math.isfinite(value) or value != int(value))):
            _fail(source, field, f"must be a whole number, got {show(value)}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            _fail(source, field, f"must be a finite number, got {show(value)}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            _fail(source, field, f"must be a string, got {show(value)}")
        return value
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        try:
            return hint(value)
        except ValueError:
            _fail(source, field, f"must be one of {', '.join(str(m.value) for m in hint)}, got {show(value)}")
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return from_mapping(hint, value, source, field)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            _fail(source, field, f"must be a list, got {show(value)}")
        item = args[0] if args else Any
        out = [coerce(v, item, source, f"{field}[{i}]") for i, v in enumerate(value)]
        return tuple(out) if origin is tuple else out
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            _fail(source, field, f"must be a mapping, got {show(value)}")
        if args:
            return {coerce(k, args[0], source, f"{field} key"): coerce(v, args[1], source, _join(field, str(k)))
                    for k, v in value.items()}
        return dict(value)
    raise TypeError(f"strict_config: no rule for the annotation {hint!r} of {field}")


def _name(hint) -> str:
    return getattr(hint, "__name__", str(hint))


def _check_metadata(f: dataclasses.Field, v, source: str, field: str) -> None:
    m = f.metadata
    if v is None:
        return
    if "gt" in m and not v > m["gt"]:
        _fail(source, field, f"must be > {m['gt']:g}, got {show(v)}")
    if "ge" in m and not v >= m["ge"]:
        _fail(source, field, f"must be >= {m['ge']:g}, got {show(v)}")
    if "le" in m and not v <= m["le"]:
        _fail(source, field, f"must be <= {m['le']:g}, got {show(v)}")
    if "choices" in m and v not in m["choices"]:
        _fail(source, field, f"must be one of {', '.join(map(str, m['choices']))}, got {show(v)}")


def check_fields(obj, source: str = "", where: str = "") -> None:
    """The metadata checks of a dataclass instance (``__post_init__`` calls this for instances built
    in code, so ``EpisodeConfig(max_batches=0)`` fails like the same value in a file)."""
    for name, f in settable_fields(type(obj)).items():
        _check_metadata(f, getattr(obj, name), source, _join(where, name))


def from_mapping(cls, d, source: str = "", where: str = ""):
    """Build the dataclass ``cls`` from the mapping ``d`` strictly (see the module doc)."""
    if d is None:
        d = {}
    if not isinstance(d, dict):
        _fail(source, where or cls.__name__, f"must be a mapping, got {type(d).__name__}")
    known = settable_fields(cls)
    check_keys(d, known, source, where)
    hints = typing.get_type_hints(cls)
    values = {}
    for k, v in d.items():
        load = known[k].metadata.get("load")      # a field with its own loader (a tagged union: robot backends)
        values[k] = load(v, source, _join(where, k)) if load else coerce(v, hints[k], source, _join(where, k))
        _check_metadata(known[k], values[k], source, _join(where, k))
    try:
        return cls(**values)
    except ConfigError as e:
        prefix = f"{source}: " if source else ""
        msg = str(e)
        if source and msg.startswith(f"{source}: "):
            raise
        raise ConfigError(f"{prefix}{_join(where, msg) if where else msg}") from None


def to_mapping(obj) -> dict:
    """A dataclass instance as plain data (enums as their values), the inverse of ``from_mapping``."""
    def plain(v):
        if isinstance(v, enum.Enum):
            return v.value
        if dataclasses.is_dataclass(v):
            return to_mapping(v)
        if isinstance(v, (list, tuple)):
            return [plain(x) for x in v]
        if isinstance(v, dict):
            return {k: plain(x) for k, x in v.items()}
        return v
    return {name: plain(getattr(obj, name)) for name in settable_fields(type(obj))}
