"""Command-line index ranges: "0-4", "0,2,5", "0-2,7" -> [0, 1, 2, 7]."""
from __future__ import annotations

from .errors import ConfigError


def parse_ints(s: str, what: str = "range") -> list[int]:
    """The indices ``s`` names, in order. A malformed or empty range is a ConfigError naming
    ``what`` (the argument, e.g. ``--tasks``). Repeats are kept: the caller says what they mean."""
    out: list[int] = []
    for part in str(s).split(","):
        a, _, b = part.strip().partition("-")
        try:
            lo, hi = int(a), int(b or a)
        except ValueError:
            raise ConfigError(f"{what}: expected integers like 0-4 or 0,2,5, got {s!r}") from None
        if hi < lo:
            raise ConfigError(f"{what}: empty range {part!r} in {s!r}")
        out += list(range(lo, hi + 1))
    return out
