"""Where a result came from: the command, the source commit, the date, the versions (MotorMind,
the simulator), the brain and whether it read privileged state, and who answered a manual run.

``stamp()`` is taken when a run starts (``eval.json`` keeps it); ``lines(rows, stamp)`` is the
provenance block both reports show (report.md as a list, report.html as a table).
"""
from __future__ import annotations

import datetime as _dt
import shlex
import subprocess
import sys
from pathlib import Path


def source_commit() -> str:
    """The git commit MotorMind runs from ("abc1234", "+dirty" with uncommitted changes); "" when
    it is not a git checkout (an installed wheel)."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "rev-parse", "--short=12", "HEAD"], cwd=here, capture_output=True,
                              text=True, timeout=5)
        if head.returncode != 0:
            return ""
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=here,
                               capture_output=True, text=True, timeout=5)
        return head.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        return ""


def stamp(argv: list[str] | None = None) -> dict:
    """The command (as typed, ``motormind ...``), the commit and the date (UTC, ISO 8601)."""
    from .. import __version__
    argv = list(sys.argv[1:] if argv is None else argv)
    return {"command": "motormind " + shlex.join(argv), "argv": argv, "commit": source_commit(),
            "date": _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat(),
            "motormind": __version__}


def _versions(d) -> str:
    if isinstance(d, dict):
        return ", ".join(f"{k} {v}" for k, v in sorted(d.items()) if v not in (None, "", True)) or \
            ", ".join(sorted(k for k, v in d.items() if v is True))
    return str(d)


def lines(rows: list[dict], st: dict | None) -> list[tuple[str, str]]:
    """(label, value) pairs of the provenance block. Values a row set does not hold are left out."""
    st = st or {}
    out = []
    if st.get("command"):
        out.append(("command", st["command"]))
    if st.get("commit"):
        out.append(("commit", st["commit"]))
    if st.get("date"):
        out.append(("date", st["date"] + (f" (resumed; first started {st['first_date']})"
                                          if st.get("first_date") and st["first_date"] != st["date"] else "")))
    mm = sorted({str(r["motormind"]) for r in rows if r.get("motormind")} |
                ({str(st["motormind"])} if st.get("motormind") else set()))
    if mm:
        out.append(("MotorMind", ", ".join(mm)))
    sims = sorted({_versions(r["simulator"]) for r in rows if r.get("simulator")})
    if sims:
        out.append(("simulator", "; ".join(sims)))
    brains = {}
    for r in rows:
        label = r.get("brain_label") or r.get("brain", "?")
        brains[label] = brains.get(label, False) or bool(r.get("privileged"))
    if brains:
        out.append(("brain", "; ".join(f"{b} ({'PRIVILEGED simulator state' if p else 'not privileged'})"
                                       for b, p in sorted(brains.items()))))
    answered: dict = {}
    for r in rows:                                   # manual runs: who answered each role (docs/manual-vlm.md)
        for role, who in (r.get("answered_by") or {}).items():
            for w in (who if isinstance(who, (list, tuple)) else [who]):
                answered.setdefault(role, set()).add(str(w))
    if answered:
        out.append(("answered by", "; ".join(f"{role}: {', '.join(sorted(w))}" for role, w in sorted(answered.items()))))
    return out


def load(out_dir: str | Path) -> dict:
    """The stamp ``motormind eval`` kept in OUT/eval.json ({} when there is none)."""
    import json
    p = Path(out_dir) / "eval.json"
    try:
        d = json.loads(p.read_text())
    except (OSError, ValueError):
        return {}
    return d.get("provenance") or {}
