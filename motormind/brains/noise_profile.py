"""The noisy brain's configuration: error rates, the scope each error persists over, and how new
evidence clears it; presets (``configs/noise/NAME.yaml``) and profiles derived from a diagnostic.

A rate (0..1) is the chance that one scope instance carries the error: each answer (scope
``call``), each plan (``plan``: a misgrounded object stays misgrounded for the whole plan), or the
episode (``episode``: a wrong sense of "left" repeats batch after batch). A persistent error (plan,
episode) outlives its batch; each clearing event (a new plan, a Verifier rejection, a Monitor
cancel) clears it with the chance ``clear_chance``, as new evidence in the prompt would.

Calibration: ``profile_from_report`` reads a ``motormind diagnose run`` report (report.json, or its
directory) and sets the rates the diagnostic measures from its accuracies:

    wrong_direction   = 1 - action accuracy          (a wrong command chosen)
    wrong_magnitude   = 1 - progress accuracy        (how far along, misjudged by a stage)
    missed_completion = 1 - completion accuracy on achieved questions
    premature_done    = 1 - completion accuracy on not-achieved questions
    missed_alarm      = 1 - completion accuracy      (the Monitor judges the same thing: is it failing)

(the oracle under the noise scores 100% on a set, so an error rate is one minus the accuracy; the
noisy brain answering the same set then reproduces the report's accuracies: tests/brains/test_noisy.py).
The diagnostic does not measure grounding (``object_confusion``, ``wrong_region``) or false alarms:
those come from the file or the command line, and default to 0.

A ``--noise`` text is a preset name, a YAML file or a diagnostic report, then ``key=value``
overrides, comma-separated: ``seed_calibrated``, ``seed_calibrated,clear_chance=0.3``,
``wrong_direction=0.2,scope.wrong_direction=call``, ``all=0.15`` (every rate). Strict: an unknown
key is refused naming the nearest, a rate outside 0..1 naming the field and the limit.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Literal

from ..errors import ConfigError
from ..strict_config import check_fields, from_mapping, nearest, to_mapping

Scope = Literal["call", "plan", "episode"]
KINDS = ("wrong_direction", "wrong_magnitude", "object_confusion", "wrong_region", "premature_done",
         "missed_completion", "false_alarm", "missed_alarm")
RATE = {"ge": 0.0, "le": 1.0}


@dataclass(frozen=True)
class Scopes:
    """Over what each error persists (call: today's, one answer)."""
    wrong_direction: Scope = "episode"      # a swapped axis sense (forward/back or left/right)
    wrong_magnitude: Scope = "episode"      # a magnitude bias: every move scaled by one factor
    object_confusion: Scope = "plan"        # the plan names another object
    wrong_region: Scope = "plan"            # the plan puts the object on/in another target
    premature_done: Scope = "plan"          # claims done before the subgoal is finished, batch after batch
    missed_completion: Scope = "call"       # leaves out a done claim
    false_alarm: Scope = "call"             # the Monitor cancels a nominal batch
    missed_alarm: Scope = "call"            # the Monitor lets a failing batch go on


@dataclass(frozen=True)
class NoiseProfile:
    """Rates (0..1) per error kind, their scopes, and the chance a clearing event clears one."""
    wrong_direction: float = field(default=0.0, metadata=RATE)      # per Executor answer / scope
    wrong_magnitude: float = field(default=0.0, metadata=RATE)      # factor in [0.3, 0.7] or [1.4, 2.0]
    object_confusion: float = field(default=0.0, metadata=RATE)     # per plan
    wrong_region: float = field(default=0.0, metadata=RATE)         # per plan
    premature_done: float = field(default=0.0, metadata=RATE)       # per Executor answer / plan
    missed_completion: float = field(default=0.0, metadata=RATE)    # per Executor answer
    false_alarm: float = field(default=0.0, metadata=RATE)          # per Monitor check of a nominal batch
    missed_alarm: float = field(default=0.0, metadata=RATE)         # per Monitor cancel
    scope: Scopes = field(default_factory=Scopes)
    clear_chance: float = field(default=0.5, metadata=RATE)         # per clearing event, per persistent error
    accuracies: dict = field(default_factory=dict)                  # skill -> accuracy the rates came from (a record)
    name: str = ""                                                  # the preset or report it came from

    def __post_init__(self) -> None:
        check_fields(self)

    def rates(self) -> dict:
        return {k: getattr(self, k) for k in KINDS}

    def items(self) -> tuple:
        """The profile as sorted (key, value) pairs, what differs from the defaults only: the
        evaluation's job key and record (``scope.KIND`` for scopes)."""
        d, base = to_mapping(self), to_mapping(NoiseProfile())
        out = {k: v for k, v in d.items() if k not in ("scope", "accuracies") and v != base[k]}
        out.update({f"scope.{k}": v for k, v in d["scope"].items() if v != base["scope"][k]})
        return tuple(sorted(out.items()))


def rates_from_accuracies(action: float, progress: float, completion: float,
                          completion_achieved: float | None = None,
                          completion_not_achieved: float | None = None) -> dict:
    """The rates a diagnostic's accuracies set (module doc)."""
    for k, v in (("action", action), ("progress", progress), ("completion", completion),
                 ("completion_achieved", completion_achieved), ("completion_not_achieved", completion_not_achieved)):
        if v is not None and not 0.0 <= float(v) <= 1.0:
            raise ConfigError(f"accuracies.{k}: must be within 0..1, got {v!r}")
    ca = completion if completion_achieved is None else completion_achieved
    cn = completion if completion_not_achieved is None else completion_not_achieved
    return {"wrong_direction": round(1.0 - action, 6), "wrong_magnitude": round(1.0 - progress, 6),
            "missed_completion": round(1.0 - ca, 6), "premature_done": round(1.0 - cn, 6),
            "missed_alarm": round(1.0 - completion, 6)}


def _accuracy_rates(acc, source: str) -> dict:
    if not isinstance(acc, dict):
        raise ConfigError(f"{source}: accuracies: must be a mapping of action, progress, completion")
    known = ("action", "progress", "completion", "completion_achieved", "completion_not_achieved")
    bad = set(acc) - set(known)
    if bad:
        k = sorted(bad)[0]
        raise ConfigError(f"{source}: accuracies: unknown key {k!r}{nearest(k, known)} (known: {', '.join(known)})")
    missing = [k for k in known[:3] if k not in acc]
    if missing:
        raise ConfigError(f"{source}: accuracies: {', '.join(missing)} missing")
    try:
        return rates_from_accuracies(**{k: float(v) for k, v in acc.items()})
    except (TypeError, ValueError):
        raise ConfigError(f"{source}: accuracies: each must be a number within 0..1, got {acc!r}") from None
    except ConfigError as e:
        raise ConfigError(f"{source}: {e}") from None


def profile_from_mapping(d: dict, source: str = "", name: str = "") -> NoiseProfile:
    """Strictly, from a decoded YAML mapping. ``accuracies:`` sets the derived rates; a rate given
    as well overrides its derived value."""
    d = dict(d or {})
    if "all" in d:
        rate = d.pop("all")
        d = {**{k: rate for k in KINDS}, **d}
    if "accuracies" in d:
        derived = _accuracy_rates(d["accuracies"], source or "noise")
        d = {**derived, **d}
    d.setdefault("name", name)
    return from_mapping(NoiseProfile, d, source=source)


def preset_dir() -> Path:
    from ..paths import config_dir
    return config_dir() / "noise"


def presets() -> list[str]:
    return sorted(p.stem for p in preset_dir().glob("*.yaml"))


def load_profile_file(path: Path, name: str = "") -> NoiseProfile:
    import yaml
    return profile_from_mapping(yaml.safe_load(path.read_text()) or {}, source=str(path), name=name or path.stem)


def profile_from_report(report, name: str = "") -> NoiseProfile:
    """The profile a ``motormind diagnose run`` report's accuracies set (report.json, its directory,
    or the decoded report)."""
    src = "report"
    if not isinstance(report, dict):
        p = Path(report)
        p = p / "report.json" if p.is_dir() else p
        src = str(p)
        report = json.loads(p.read_text())
    skill = report.get("scores", {}).get("skill", {})
    missing = [s for s in ("action", "progress", "completion") if not (skill.get(s) or {}).get("n")]
    if missing:
        raise ConfigError(f"{src}: a diagnostic report with no {', '.join(missing)} questions cannot set their rates")
    acc = {s: float(skill[s]["rate"]) for s in ("action", "progress", "completion")}
    by_truth: dict = {}
    for k, g in (report["scores"].get("completion_by_truth") or {}).items():
        key = "completion_not_achieved" if k.startswith("not achieved") else "completion_achieved"
        n, c = by_truth.get(key, (0, 0))
        by_truth[key] = (n + int(g["n"]), c + int(g["correct"]))
    acc.update({k: c / n for k, (n, c) in by_truth.items() if n})
    return profile_from_mapping({"accuracies": acc}, source=src, name=name or f"diagnostic:{report.get('brain', '?')}")


def _value(key: str, v: str):
    if key.startswith("scope."):
        return v.strip()
    try:
        return float(v)
    except ValueError:
        raise ConfigError(f"--noise: {key} needs a number within 0..1, e.g. {key}=0.2, got {v!r}") from None


def parse_noise(text: str | None) -> NoiseProfile | None:
    """A ``--noise`` text (module doc) -> a profile; None for none."""
    if not text:
        return None
    parts = [p.strip() for p in text.split(",") if p.strip()]
    base: NoiseProfile | None = None
    if parts and "=" not in parts[0]:
        base = resolve_base(parts.pop(0))
    over: dict = {}
    scopes: dict = {}
    for part in parts:
        k, eq, v = part.partition("=")
        k = k.strip()
        if not eq:
            raise ConfigError(f"--noise: {part!r} is not key=value (a preset or report comes first only)")
        if k.startswith("scope."):
            scopes[k.removeprefix("scope.")] = _value(k, v)
        elif k == "all":
            rate = _value(k, v)
            if not 0.0 <= rate <= 1.0:         # also refuses nan
                raise ConfigError(f"--noise: all: every rate must be within 0..1, got {v.strip()}")
            over.update({kind: rate for kind in KINDS})
        else:
            over[k] = _value(k, v)
    d = to_mapping(base) if base is not None else {}
    d.update(over)
    if scopes:
        d["scope"] = {**d.get("scope", {}), **scopes}
    if base is not None and base.name and parts:
        d["name"] = ",".join([base.name, *parts])     # the preset and what was changed on it
    d.setdefault("name", "")
    return from_mapping(NoiseProfile, d, source="--noise")


def resolve_base(word: str) -> NoiseProfile:
    """A preset name, a YAML profile file, or a diagnostic report (its report.json or directory)."""
    p = Path(word)
    if word in presets():
        return load_profile_file(preset_dir() / f"{word}.yaml", word)
    if p.is_dir() or p.name == "report.json":
        return profile_from_report(p)
    if p.suffix in (".yaml", ".yml") and p.is_file():
        return load_profile_file(p)
    raise ConfigError(f"--noise: {word!r} is no preset{nearest(word, presets())}, profile file or diagnostic "
                      f"report (presets: {', '.join(presets()) or 'none'}; or key=value, e.g. wrong_direction=0.2)")


def profile_from_items(items) -> NoiseProfile:
    """The inverse of ``NoiseProfile.items``: a job's noise back into a profile."""
    d: dict = {}
    scopes: dict = {}
    for k, v in items:
        if k.startswith("scope."):
            scopes[k.removeprefix("scope.")] = v
        else:
            d[k] = v
    if scopes:
        d["scope"] = scopes
    return from_mapping(NoiseProfile, d, source="noise")


def legacy(rates: dict) -> NoiseProfile:
    """A plain ``{kind: rate}`` mapping (code and tests), each error per call (the noisy brain's
    behaviour before scopes)."""
    return from_mapping(NoiseProfile, {**rates, "scope": {f.name: "call" for f in fields(Scopes)}},
                        source="noise")


__all__ = ["KINDS", "NoiseProfile", "Scopes", "parse_noise", "profile_from_report", "profile_from_mapping",
           "profile_from_items", "rates_from_accuracies", "legacy", "presets"]
