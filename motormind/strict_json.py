"""JSON from an untrusted source (a VLM's answer, an operator's edit): one strict decoder, and the
one rule for what counts as a number.

``decode_json`` refuses, with a ``CommandError`` that names the JSON path and the limit:

* malformed JSON, and a second JSON value after the first (a text holds exactly one value);
* ``NaN`` / ``Infinity``, and numbers outside the finite double range (``1e999``, an integer of
  400 digits): the standard decoder turns the first into ``inf`` and chokes on integers over 4300
  digits with a bare ``ValueError``;
* a key given twice in one object (the standard decoder keeps the last value silently);
* nesting deeper than ``MAX_DEPTH`` levels, found by a linear scan before the standard decoder
  recurses (it raises ``RecursionError`` at about 1000);
* text longer than ``MAX_CHARS`` characters, and strings that are not valid Unicode (a lone
  surrogate such as ``"\\ud800"`` cannot be written to a UTF-8 record).

``finite_number`` is the number rule of every parser here: ``True`` is not a number, and an integer
too large for a double is not finite. ``show`` renders any value for an error message, bounded in
length and depth (``repr`` of a 5000-digit integer raises, of a 3000-deep list recurses);
``writable`` stands such a description in for a value JSON cannot write.
"""
from __future__ import annotations

import json
import math
import re
import reprlib
from typing import Any

from .errors import CommandError

MAX_DEPTH = 32               # levels of nested arrays/objects; a batch needs 4 (batch, commands, command, vector)
MAX_CHARS = 1_000_000        # characters in one JSON text
DOUBLE_MAX = 1.7976931348623157e308

# a string (skipped whole: brackets inside it do not count) or a bracket; the string written as
# "unrolled" runs, which scans a megabyte of base64 (an image in a request body) 20x faster
_TOKENS = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)


class _Repr(reprlib.Repr):
    def repr_int(self, x, level):        # reprlib calls the builtin repr, which refuses > 4300 digits
        if x.bit_length() <= 200:
            return repr(x)
        return f"<an integer of about {int(x.bit_length() * math.log10(2)) + 1} digits>"


_REPR = _Repr()
_REPR.maxlevel, _REPR.maxstring, _REPR.maxother = 3, 60, 60
_REPR.maxlist = _REPR.maxtuple = _REPR.maxdict = _REPR.maxset = 4


def show(value: Any) -> str:
    """A short, always computable rendering of ``value`` for an error message."""
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a message must never be what fails
        return f"<a {type(value).__name__}>"


UNWRITABLE = (ValueError, TypeError, RecursionError, OverflowError)   # what json.dumps raises on a value


def writable(value: Any, dumps=json.dumps) -> Any:
    """``value`` when ``dumps`` can write it, else a bounded description of it (an echo of a hostile
    command in a report, an event in the record: never the reason a report or a record is lost)."""
    try:
        dumps(value)
        return value
    except UNWRITABLE as e:
        return {"unwritable": type(e).__name__, "repr": show(value)}


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a number (bools are not) or not finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        f = float(value)
    except OverflowError:                # an int beyond the double range
        return None
    return f if math.isfinite(f) else None


def depth_of(value: Any, limit: int = MAX_DEPTH) -> int:
    """Nesting depth of decoded data (a scalar is 0, ``[]`` is 1), counted without recursion;
    stops counting once it passes ``limit``."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (dict, list, tuple)):
            deepest = max(deepest, d)
            if deepest > limit:
                return deepest
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))
    return deepest


def check_depth(value: Any, what: str, limit: int = MAX_DEPTH) -> None:
    """Raise CommandError when decoded data (a dict from any transport) nests deeper than ``limit``."""
    if depth_of(value, limit) > limit:
        raise CommandError(f"{what}: nested deeper than {limit} levels (the limit of {limit})", what)


def _text_depth(text: str, limit: int) -> tuple[int, int]:
    """(depth, position) of the first bracket that passes ``limit`` levels, or (max depth, -1)."""
    if text.count("[") + text.count("{") <= limit:       # cannot nest deeper than it has brackets
        return 0, -1
    depth = deepest = 0
    for m in _TOKENS.finditer(text):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limit:
                return depth, m.start()
            deepest = max(deepest, depth)
        elif c in "]}":
            depth -= 1
    return deepest, -1


class _Bad:
    """Stands in for a value the decoder refuses; found with its path after decoding."""

    def __init__(self, message: str):
        self.message = message


_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")   # the only way JSON text spells a lone surrogate


def _parse_int(s: str):
    if len(s) > 400:
        return _Bad(f"an integer of {len(s.lstrip('-'))} digits is outside the finite double range "
                    f"(|x| <= {DOUBLE_MAX:.4g})")
    v = int(s)
    return v if finite_number(v) is not None else _Bad(
        f"an integer of {len(s.lstrip('-'))} digits is outside the finite double range (|x| <= {DOUBLE_MAX:.4g})")


def _parse_float(s: str):
    v = float(s)
    if not math.isfinite(v):
        return _Bad(f"non-finite number {s[:40]} (JSON numbers here must be finite, |x| <= {DOUBLE_MAX:.4g})")
    return v


def _parse_constant(name: str):
    return _Bad(f"non-finite number {name} is not valid JSON")


def _object(pairs: list):
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        dup = next(k for k, _ in pairs if k in seen or seen.add(k))
        n = sum(1 for k, _ in pairs if k == dup)
        return _Bad(f"duplicate key {show(dup)} (given {n} times; a key may appear once in an object)")
    return d


def _valid_unicode(s: str) -> bool:
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _first_bad(value: Any, root: str) -> tuple[str, str] | None:
    """(path, message) of the first refused value in document order (depth is already bounded)."""
    stack = [(value, "")]
    while stack:
        v, path = stack.pop()
        where = path or root
        if isinstance(v, _Bad):
            return where, v.message
        if isinstance(v, str) and not _valid_unicode(v):
            return where, f"string {show(v)} is not valid Unicode (an unpaired surrogate)"
        if isinstance(v, dict):
            for k, x in reversed(list(v.items())):
                if not _valid_unicode(k):
                    return where, f"key {show(k)} is not valid Unicode (an unpaired surrogate)"
                stack.append((x, f"{path}.{k}" if path else k))
        elif isinstance(v, list):
            stack.extend((x, f"{path}[{i}]") for i, x in reversed(list(enumerate(v))))
    return None


def decode_json(data: str | bytes, what: str, max_chars: int = MAX_CHARS) -> Any:
    """Decode one JSON value from ``data`` strictly (see the module docstring). ``what`` names the
    text in errors ("batch", "answer"); an error inside it names the path, e.g.
    ``commands[0].distance_mm: non-finite number 1e999 ...``. ``max_chars``: a boundary that
    carries more than a command (a chat request with images) sets its own length limit."""
    if isinstance(data, bytes):
        data = data.decode("utf-8", errors="replace")
    if not isinstance(data, str):
        raise CommandError(f"{what}: must be JSON text, got {type(data).__name__}", what)
    if len(data) > max_chars:
        raise CommandError(f"{what}: {len(data)} characters exceed the limit of {max_chars}", what)
    depth, pos = _text_depth(data, MAX_DEPTH)
    if pos >= 0:
        line = data.count("\n", 0, pos) + 1
        col = pos - (data.rfind("\n", 0, pos) + 1) + 1
        raise CommandError(f"{what}: nested deeper than {MAX_DEPTH} levels at line {line} column {col} "
                           f"(the limit of {MAX_DEPTH})", what)
    made: list = []                       # the refusals this decode made (found with their path below)

    def mark(v):
        if isinstance(v, _Bad):
            made.append(v)
        return v
    try:
        value = json.loads(data, parse_int=lambda s: mark(_parse_int(s)),
                           parse_float=lambda s: mark(_parse_float(s)),
                           parse_constant=lambda s: mark(_parse_constant(s)),
                           object_pairs_hook=lambda p: mark(_object(p)))
    except json.JSONDecodeError as e:
        if e.msg == "Extra data":
            raise CommandError(f"{what}: more text after the first JSON value, at line {e.lineno} column "
                               f"{e.colno}: exactly one JSON value is expected", what) from None
        raise CommandError(f"{what}: malformed JSON at line {e.lineno} column {e.colno}: {e.msg}", what) from None
    except (ValueError, RecursionError) as e:    # the scan above should leave none: refuse, never crash
        raise CommandError(f"{what}: not decodable JSON ({type(e).__name__})", what) from None
    if not (made or _SURROGATE_ESCAPE.search(data) or not _valid_unicode(data)):
        return value                      # nothing to find: skip the walk
    bad = _first_bad(value, what)
    if bad:
        raise CommandError(f"{bad[0]}: {bad[1]}", bad[0])
    return value
