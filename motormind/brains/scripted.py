"""A scripted brain: answers each role from a list of canned texts (or a function of the request).

For tests, rehearsals on hardware, and replays. Labelled ``scripted``. When a role's list runs out
it repeats its last answer, so a monitor or memory script of one answer covers a whole episode."""
from __future__ import annotations

import json
import threading
from typing import Callable

from .base import Brain, BrainReply, BrainRequest

DEFAULTS = {
    "monitor": {"schema_version": 1, "cancel": False, "reason": "nominal"},
    "memory": {"schema_version": 1, "summary": "scripted run", "facts": []},
    "verifier": {"schema_version": 1, "achieved": True, "evidence": "scripted verdict"},
}


class ScriptedBrain(Brain):
    name = "scripted"

    def __init__(self, script: dict[str, list | Callable[[BrainRequest], str | dict]], label: str = "scripted"):
        self.script = {k: (v if callable(v) else list(v)) for k, v in script.items()}
        self.name = label
        self.requests: list[BrainRequest] = []
        self._pos: dict = {}
        self._lock = threading.Lock()

    @classmethod
    def from_config(cls, cfg, _robot=None, _profile=None, _record=None) -> "ScriptedBrain":
        """The registry's ``scripted`` brain (motormind/registry.py): ``cfg.script`` is a JSON file
        ``{role: [answers]}``; a missing or malformed file is a ConfigError naming it."""
        from ..errors import CommandError, ConfigError
        from ..strict_json import decode_json
        try:
            with open(cfg.script) as fh:
                script = decode_json(fh.read(), cfg.script)
        except OSError as e:
            raise ConfigError(f"script: cannot read {cfg.script}: {e.strerror or e}") from None
        except CommandError as e:
            raise ConfigError(f"script: {e}") from None
        if not isinstance(script, dict) or not all(isinstance(v, list) for v in script.values()):
            raise ConfigError(f"script: {cfg.script} must hold an object {{role: [answers]}}")
        return cls(script)

    def respond(self, req: BrainRequest) -> BrainReply:
        with self._lock:
            self.requests.append(req)
            src = self.script.get(req.role)
            if callable(src):
                ans = src(req)
            elif src:
                i = self._pos.get(req.role, 0)
                ans = src[min(i, len(src) - 1)]
                self._pos[req.role] = i + 1
            elif req.role in DEFAULTS:
                ans = DEFAULTS[req.role]
            else:
                raise RuntimeError(f"scripted brain has no answer for role {req.role!r}")
        text = ans if isinstance(ans, str) else json.dumps(ans)
        return BrainReply(text, self.name)

    def calls(self, role: str) -> int:
        return sum(1 for r in self.requests if r.role == role)
