"""An interference setting as the command line and a job write it: ``WHAT@WHEN`` (e.g. fetched@reach,
target@carry, bystander@between; ``off``), and the range an object may be moved by. The outside
hand that acts on it is motormind/session/interference.py; this grammar sits low so that the
argument types (argtypes.py) read it without importing the episode's assembly."""
from __future__ import annotations

WHEN = ("reach", "carry", "between")
WHAT = ("fetched", "target", "bystander")
DEFAULT_WHAT = {"reach": "fetched", "carry": "target", "between": "fetched"}
SHIFT_M = (0.06, 0.15)             # the default displacement range, m (LIBERO-PRO evaluation)
MAX_SHIFT_M = 0.25                 # the largest shift a setting may ask for, m


def parse_setting(text: str, flag: str = "--interference") -> tuple[str, str] | None:
    """``WHAT@WHEN`` (or ``WHEN`` alone, its default object; ``off``: None) -> (what, when)."""
    t = str(text).strip().lower()
    if t in ("off", "none", ""):
        return None
    what, _, when = t.rpartition("@")
    what = what or DEFAULT_WHAT.get(when, "")
    if when not in WHEN or what not in WHAT:
        raise ValueError(f"{flag}: {text!r} is not WHAT@WHEN with WHAT one of {', '.join(WHAT)} and WHEN one of "
                         f"{', '.join(WHEN)} (e.g. fetched@reach, target@carry), or off")
    return what, when


def setting_name(what: str, when: str) -> str:
    return f"{what}@{when}"
