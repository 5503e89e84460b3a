"""Interference over many episodes: the median and p90 of what it cost (the per-episode measures
are ``InterferenceProbe``'s, motormind/session/interference.py, beside the outside hand itself)."""
from __future__ import annotations

from .stats import percentile


def _pct(xs, q):
    return percentile(xs, q, 1)


def summarize_measures(rows: list[dict]) -> dict:
    """Median and p90 of the per-episode measures (``InterferenceProbe.measures``) over ``rows``
    (result rows with an ``interference_measures`` entry)."""
    ms = [r["interference_measures"] for r in rows if r.get("interference_measures")]
    out: dict = {"interfered": len(ms)}
    for key in ("cancel", "next_batch", "next_plan", "success"):
        got = [m[key] for m in ms if m.get(key)]
        out[key] = {"n": len(got), "ms_median": _pct([g["ms"] for g in got], 0.5),
                    "ms_p90": _pct([g["ms"] for g in got], 0.9),
                    "steps_median": _pct([g["steps"] for g in got], 0.5),
                    "steps_p90": _pct([g["steps"] for g in got], 0.9)}   # (None: no step counter)
    out["stale_commands"] = {"median": _pct([m["stale_commands"] for m in ms], 0.5),
                             "p90": _pct([m["stale_commands"] for m in ms], 0.9),
                             "max": _pct([m["stale_commands"] for m in ms], 1.0)}
    for key in ("cancel_boundary", "honoured_boundary"):
        out[key] = {"median": _pct([m.get(key) for m in ms], 0.5), "max": _pct([m.get(key) for m in ms], 1.0)}
    out["recovery_vlm_calls_median"] = _pct([m["recovery_vlm_calls"] for m in ms], 0.5)
    return out
