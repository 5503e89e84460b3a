"""What every role shares: render its prompt file, ask the brain, parse the answer strictly.

An answer that is not JSON, or does not match the role's schema, gets one repair request quoting
the error. If the repaired answer fails too, the role fails safe: it returns ``None``, the record
says why, and nothing acts on it. Every answer, usable or not, is in the record (``vlm_call``
events carry the raw ``response`` text).
"""
from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..answers import extract_json
from ..brains.base import Brain, BrainReply, BrainRequest, image_stats
from ..prompt_text import (IDS, JSON_TEXT, PROMPT_TEXT, escape_controls, load_prompt,  # noqa: F401 - re-exported
                           prompt_value, quote_id, quote_text, render)
from ..strict_json import show
from ..errors import CommandError, ResponseError
from ..messages import EventKind
from ..schemas import ROLE_SCHEMAS, validate

# ``setup``, ``look`` and ``budget`` are ``roles.facts.PromptFacts``'s (numbers the stack states); a caller
# that renders a role without them gets these words instead of an unfilled placeholder
FACT_DEFAULTS = {"setup": "(the robot's facts are not given)", "look": "(not given)", "budget": "Budget: not known."}


@dataclass
class RoleResult:
    value: Any                      # the parsed, schema-valid object (None when the role failed safe)
    brain: str
    privileged: bool
    calls: int
    error: str = ""


Recorder = Callable[..., None]


class Role:
    name = "role"
    prompt_name = "role"

    def __init__(self, brain: Brain, record: Recorder | None = None, repair: bool = True):
        self.brain = brain
        self.record = record or (lambda kind, **data: None)
        self.repair = repair
        self.schema = ROLE_SCHEMAS[self.name]

    def ask(self, values: dict, images: dict | None = None, context: dict | None = None,
            check: Callable[[Any], None] | None = None) -> RoleResult:
        values = {"schema": json.dumps(self.schema), **FACT_DEFAULTS, **values}
        system, user = render(self.prompt_name, values)
        req = BrainRequest(self.name, self.prompt_name, system, user, self.schema, images or {},
                           context or {})
        phash = hashlib.sha256((system + "\n" + user).encode()).hexdigest()[:16]
        attempts = 2 if self.repair else 1
        error = ""
        reply: BrainReply | None = None
        for attempt in range(attempts):
            t0 = time.monotonic()
            try:
                reply = self.brain.respond(req)
            except Exception as e:  # noqa: BLE001 - transport failures fail safe, recorded
                error = f"brain call failed: {type(e).__name__}: {e}"
                self.record(EventKind.VLM_CALL, role=self.name, prompt=self.prompt_name, prompt_hash=phash,
                            attempt=attempt, ok=False, error=error, brain=getattr(self.brain, "name", "?"),
                            latency_s=round(time.monotonic() - t0, 4))
                break
            try:
                value = extract_json(reply.text)
                validate(value, self.schema)
                if check:
                    check(value)
                ok = True
            except (ResponseError, CommandError) as e:
                value, ok, error = None, False, str(e)
            except Exception as e:  # noqa: BLE001 - fail closed: an answer no check can digest acts on nothing
                value, ok, error = None, False, f"answer not checkable ({type(e).__name__}: {show(e)})"
            self.record(EventKind.VLM_CALL, role=self.name, prompt=self.prompt_name, prompt_hash=phash,
                        attempt=attempt, ok=ok, error=error if not ok else "", brain=reply.brain,
                        privileged=reply.privileged, latency_s=round(reply.latency_s, 4),
                        input_tokens=reply.input_tokens, output_tokens=reply.output_tokens,
                        images=image_stats(req.images),
                        system=system if attempt == 0 else "", user=user if attempt == 0 else "",
                        response=reply.text, **({"meta": reply.meta} if reply.meta else {}))
            if ok:
                return RoleResult(value, reply.brain, reply.privileged, attempt + 1)
            if attempt + 1 < attempts:
                _, repair_text = render("repair", {"error": error})
                req.history = req.history + [{"role": "assistant", "content": reply.text},
                                             {"role": "user", "content": repair_text}]
                self.record(EventKind.REPAIR_REQUEST, role=self.name, error=error)
        self.record(EventKind.ROLE_FAILED, role=self.name, error=error)
        return RoleResult(None, reply.brain if reply else getattr(self.brain, "name", "?"),
                          bool(reply and reply.privileged), attempts, error)
