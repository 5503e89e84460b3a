"""A latency model for the local brain server: how long the emulated model takes per call, in seconds.

A real VLM answers in seconds (the paper's episodes averaged 223.4 s, about 20 role calls); the
oracle answers in milliseconds. With a latency plan the server holds each successful answer back
by a delay drawn for the call's role, so the throughput of an evaluation against a VLM-like
endpoint can be measured offline (docs/evaluation.md). The delay is awaited on the
server's event loop (``asyncio.sleep``), not on a worker thread: a server with a 5 s latency holds
hundreds of calls in flight at once, as a batching inference server does.

A distribution is ``mean_s`` and ``spread_s`` (seconds): spread 0 is a fixed delay; otherwise a
log-normal with that mean and standard deviation (positive, with the long right tail real
endpoints show). One for every role, and optionally one per role::

    latency: {mean_s: 5, spread_s: 1, roles: {monitor: {mean_s: 1}}, seed: 0}

or on the command line (``motormind serve-brain``): ``--latency 5``, ``--latency 5~1``,
``--latency monitor=1``. Each draw comes from a generator seeded by (seed, role, the role's
request count), so a plan reproduces whatever the order in which concurrent calls arrive.
"""
from __future__ import annotations

import math
import random
import threading
from dataclasses import dataclass, field

from ..errors import ConfigError


@dataclass(frozen=True)
class Delay:
    mean_s: float = 0.0      # mean delay, s
    spread_s: float = 0.0    # standard deviation, s (0: always mean_s)

    def draw(self, rng: random.Random) -> float:
        if self.spread_s <= 0 or self.mean_s <= 0:
            return self.mean_s
        sigma2 = math.log(1.0 + (self.spread_s / self.mean_s) ** 2)
        return rng.lognormvariate(math.log(self.mean_s) - sigma2 / 2, math.sqrt(sigma2))

    def describe(self) -> str:
        return f"{self.mean_s:g}" + (f"~{self.spread_s:g}" if self.spread_s else "") + " s"


def _delay(d, where: str) -> Delay:
    if isinstance(d, (int, float)) and not isinstance(d, bool):
        d = {"mean_s": d}
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must be seconds or {{mean_s, spread_s}}, got {d!r}")
    bad = sorted(set(d) - {"mean_s", "spread_s"})
    if bad:
        raise ConfigError(f"{where}: unknown key(s) {bad} (known: mean_s, spread_s)")
    out = {}
    for k in ("mean_s", "spread_s"):
        v = d.get(k, 0.0)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
            raise ConfigError(f"{where}.{k}: must be a finite number of seconds >= 0, got {v!r}")
        out[k] = float(v)
    return Delay(**out)


@dataclass
class LatencyPlan:
    default: Delay = field(default_factory=Delay)     # every role without its own
    roles: dict = field(default_factory=dict)         # role -> Delay
    seed: int = 0

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict = {}                          # role -> requests drawn for

    @property
    def active(self) -> bool:
        return self.default.mean_s > 0 or any(d.mean_s > 0 for d in self.roles.values())

    def delay(self, role: str) -> float:
        """The delay for the next call of ``role``, s."""
        with self._lock:
            k = self._seen.get(role, 0)
            self._seen[role] = k + 1
        d = self.roles.get(role, self.default)
        return d.draw(random.Random(f"{self.seed}/{role}/{k}"))

    def describe(self) -> dict:
        return {"default": self.default.describe(), **{r: d.describe() for r, d in sorted(self.roles.items())},
                "seed": self.seed}

    @classmethod
    def from_dict(cls, d: dict | None, where: str = "latency") -> "LatencyPlan":
        if d is None:
            return cls()
        if isinstance(d, (int, float)) and not isinstance(d, bool):
            return cls(_delay(d, where))
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be a mapping {{mean_s, spread_s, roles, seed}}, got {d!r}")
        d = dict(d)
        roles = d.pop("roles", None) or {}
        seed = d.pop("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise ConfigError(f"{where}.seed: must be an integer, got {seed!r}")
        if not isinstance(roles, dict):
            raise ConfigError(f"{where}.roles: must be a mapping role -> {{mean_s, spread_s}}, got {roles!r}")
        return cls(_delay(d, where), {r: _delay(v, f"{where}.roles.{r}") for r, v in _checked_roles(roles, where)},
                   seed)

    @classmethod
    def from_cli(cls, items: list[str], seed: int = 0) -> "LatencyPlan":
        """``["5"]``, ``["5~1"]``, ``["3", "monitor=1~0.5"]`` -> a plan (``--latency``)."""
        default, roles = Delay(), {}
        for item in items or ():
            role, eq, spec = str(item).rpartition("=")
            mean, _, spread = spec.partition("~")
            try:
                d = _delay({"mean_s": float(mean), "spread_s": float(spread or 0)}, "--latency")
            except ValueError:
                raise ConfigError(f"--latency {item!r}: expected SECONDS, MEAN~SPREAD or ROLE=MEAN[~SPREAD] "
                                  "(e.g. 5, 5~1, monitor=1)") from None
            if eq:
                roles[role] = d
            else:
                default = d
        dict(_checked_roles(roles, "--latency"))
        return cls(default, roles, seed)


def _checked_roles(roles: dict, where: str):
    from ..schemas import CHECK_SCHEMAS, ROLE_SCHEMAS
    known = [*ROLE_SCHEMAS, *CHECK_SCHEMAS]
    for r, v in roles.items():
        if r not in known:
            raise ConfigError(f"{where}: unknown role {r!r} (known: {', '.join(known)})")
        yield r, v
