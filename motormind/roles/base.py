"""What every role shares: render its prompt file, ask the brain, parse the answer strictly.

An answer that is not JSON, or does not match the role's schema, gets one repair request quoting
the error. If the repaired answer fails too, the role fails safe: it returns ``None``, the record
says why, and nothing acts on it. Every answer, usable or not, is in the record (``vlm_call``
events carry the raw ``response`` text).
"""
from __future__ import annotations

import hashlib
import json
import re
import time
import unicodedata
from dataclasses import dataclass
from string import Template
from typing import Any, Callable

from ..brains.base import Brain, BrainReply, BrainRequest, image_stats
from ..commands import is_id
from ..strict_json import decode_json, show
from ..errors import CommandError, ResponseError
from ..paths import prompt_dir
from ..schemas import ROLE_SCHEMAS, validate

_CACHE: dict = {}


def load_prompt(name: str) -> dict:
    """Sections of prompts/NAME.md: {'system': ..., 'user': ...}."""
    if name not in _CACHE:
        text = (prompt_dir() / f"{name}.md").read_text()
        parts = re.split(r"^## (\w+)\s*$", text, flags=re.M)
        _CACHE[name] = {parts[i]: parts[i + 1].strip() for i in range(1, len(parts), 2)}
    return _CACHE[name]


# -- what a prompt echoes, quoted as data ---------------------------------------------------------
def _unsafe(ch: str) -> bool:
    """A character that must not reach a prompt raw: a control character (C0, DEL, C1), a format
    character (bidi overrides, zero-width marks) or a line or paragraph separator."""
    return unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Co", "Cs")


def escape_controls(text: str, keep: str = "") -> str:
    """``text`` with every unsafe character (``_unsafe``) but those in ``keep`` written as ``\\uXXXX``."""
    if all(not _unsafe(ch) or ch in keep for ch in text):
        return text
    return "".join(f"\\u{ord(ch):04x}" if _unsafe(ch) and ch not in keep else ch for ch in text)


def quote_text(text: Any) -> str:
    """Text a model, an operator or a publisher wrote, as a prompt shows it: one JSON string literal
    (its quotes, backslashes, newlines and every control character escaped), so that nothing in it
    can read as a line of the prompt (a fake ``SYSTEM:`` line, a ``## system`` heading)."""
    return escape_controls(json.dumps(text if isinstance(text, str) else str(text), ensure_ascii=False))


def quote_id(value: Any) -> str:
    """An id as a prompt shows it: bare when it is one (``commands.ID_RULE``), quoted otherwise."""
    return value if is_id(value) else quote_text(value)


# How each placeholder's value reaches a prompt (``render``), default-deny:
#   PROMPT_TEXT  text the stack composes from the robot profile, its config and its own code, passed as
#                is (control characters but newline and tab escaped). ``last_report`` is
#                ``components.brief_report``'s, ``replan`` ``Planner.plan``'s and ``measurements``
#                ``grounding.points.Grounding``'s: they quote what they echo (a point's label, a camera).
#   JSON_TEXT    JSON the stack wrote (``json.dumps``: every string in it quoted); one that is not JSON
#                is quoted as data.
#   IDS          an id, bare when it matches ``commands.ID_PATTERN``, quoted otherwise.
#   anything else is data (an instruction, a subgoal and its criterion, Memory's summary, an error that
#   quotes an answer): one JSON string (``quote_text``).
PROMPT_TEXT = frozenset({"schema", "vocabulary", "robot_description", "directions", "axes", "rotation_frame",
                         "cameras", "image_names", "what", "question", "options", "letters", "skill", "colour",
                         "setup", "look", "budget", "last_report", "replan", "pointing", "measurements"})
# ``setup``, ``look`` and ``budget`` are ``roles.facts.PromptFacts``'s (numbers the stack states); a caller
# that renders a role without them gets these words instead of an unfilled placeholder
FACT_DEFAULTS = {"setup": "(the robot's facts are not given)", "look": "(not given)", "budget": "Budget: not known."}
JSON_TEXT = frozenset({"state", "plan", "limits", "last_verdict", "batch", "progress", "events"})
IDS = frozenset({"subgoal_id", "batch_id"})


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
        return True
    except ValueError:
        return False


def prompt_value(key: str, value: Any) -> str:
    """``value`` of placeholder ``key`` as the prompt shows it (the table above)."""
    if not isinstance(value, str):
        return escape_controls(json.dumps(value, default=str))
    if key in PROMPT_TEXT:
        return escape_controls(value, keep="\n\t")
    if key in JSON_TEXT and _is_json(value):
        return escape_controls(value)
    if key in IDS:
        return quote_id(value)
    return quote_text(value)


def render(name: str, values: dict) -> tuple[str, str]:
    p = load_prompt(name)
    vals = {k: prompt_value(k, v) for k, v in values.items()}
    return (Template(p.get("system", "")).safe_substitute(vals),
            Template(p.get("user", "")).safe_substitute(vals))


_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", flags=re.S)


def _embedded(s: str) -> str:
    """From the first '{' to the last '}' of ``s`` ("" when there is no such span)."""
    i, j = s.find("{"), s.rfind("}")
    return s[i:j + 1] if i >= 0 and j > i else ""


def extract_json(text: str) -> Any:
    """The one JSON object in an answer: the whole text, one fenced block, or one {...} block in
    prose. An answer that holds two (two fenced blocks, a block and an object beside it, two objects
    one after the other) is refused: which one was meant is not ours to guess."""
    if not isinstance(text, str):
        raise ResponseError(f"answer: must be text, got {type(text).__name__}")
    s = text.strip()
    fences = _FENCE.findall(s)
    if len(fences) > 1:
        raise ResponseError(f"answer: {len(fences)} fenced code blocks; exactly one JSON object is expected")
    if fences:
        beside = _embedded(_FENCE.sub(" ", s))
        if beside:
            try:
                other = decode_json(beside, "answer")
            except CommandError:
                other = None          # braces in prose, not a second answer
            if isinstance(other, dict):
                raise ResponseError("answer: a JSON object outside the fenced block as well as inside it; "
                                    "exactly one JSON object is expected")
        s = fences[0].strip()
    if not s.startswith("{"):
        s = _embedded(s) or s
    try:
        return decode_json(s, "answer")
    except CommandError as e:
        raise ResponseError(str(e)) from None


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
                self.record("vlm_call", role=self.name, prompt=self.prompt_name, prompt_hash=phash,
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
            self.record("vlm_call", role=self.name, prompt=self.prompt_name, prompt_hash=phash,
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
                self.record("repair_request", role=self.name, error=error)
        self.record("role_failed", role=self.name, error=error)
        return RoleResult(None, reply.brain if reply else getattr(self.brain, "name", "?"),
                          bool(reply and reply.privileged), attempts, error)
