"""The ``openai`` brain: any OpenAI-compatible chat-completions endpoint through the ``openai`` client.

OpenAI itself, vLLM (e.g. Qwen2.5-VL), Ollama, a llama.cpp server, or MotorMind's own local server
(``motormind serve-brain``). Configured by YAML (``configs/vlm/NAME.yaml``, see ``VLMConfig``),
each field overridable (``--vlm-set key=value``).

One ``respond`` is one role call:

* messages: the system prompt; the user prompt as the first text part of the user turn, then each
  image as a text label ("Image 'agentview':") and an ``image_url`` data URL (PNG or JPEG, sized by
  ``image_rules`` / ``image_size``, ``detail`` as configured); then the request's history (the
  role's repair turns) as assistant / user messages.
* structured output: ``response_format={"type": "json_schema", ...}`` with the role's schema when
  ``structured_output: json_schema``, ``{"type": "json_object"}`` with ``json_object``, nothing with
  ``none`` (the role extracts JSON from the text). A 400 that names ``response_format`` switches
  structured output off for the rest of the run and retries at once (``structured_fallback``).
* retries: the client's own retries are off (``max_retries=0``); this brain retries 429, 5xx,
  timeouts and connection errors itself, with exponential backoff (honouring ``Retry-After``), so
  each attempt is visible: ``BrainReply.meta["retries"]`` (recorded with the call) and a
  ``vlm_retry`` event per retry. When every attempt fails it raises ``VLMError`` naming each one;
  the role records that and fails safe. Other errors (401, 404, 400) are not retried.
* accounting: latency (the whole call, retries and backoff included; per attempt in meta), tokens
  from ``usage``, cost when ``prices`` are given (USD per million tokens), finish reason, request id.
* real servers' ways (docs/vlm-servers.md), each named in ``meta.quirks`` and a ``vlm_quirk`` event:
  the answer is read where the server put it (``content``, else a reasoning parser's
  ``reasoning_content`` / ``reasoning``); thinking is stripped; a truncated answer is asked again at
  once with twice the tokens (never completed by guessing); a whitespace flood under a JSON grammar
  is asked again without ``response_format``; a json_schema answer that is not bare schema-valid
  JSON means the server ignores the schema: structured output off, text extraction.
* images: before the first plan ``preflight`` runs the camera probe (``brains/probe.py``); a server
  that refuses image parts (HTTP 400/500 naming them), or drops them (the probe's colours, or a
  call's ``prompt_tokens`` short of the probe's calibration), makes the brain *unfit*: it raises
  ``BrainUnfit`` and asks that endpoint nothing more, and the episode ends (``Brain.unfit``).
  Images are sized by the model family's rules (``image_rules``, ``grounding/image_sizing.py``).

For MotorMind's own server it can add a ``motormind`` field to the request body (``send_context``:
the role, prompt name and the structured context the prompt was rendered from; ``send_scene``: a
snapshot of the PRIVILEGED simulator scene for a standalone oracle server; ``send_budget``: the
role, the call's timeout and what the episode has left, ``watch_budget``, which is not privileged and
which the manual backend writes into each request's folder). Real servers do not know that field
(OpenAI rejects it), so all three are off unless a config switches them on. Who answered each role,
when the server says (its ``motormind.source``: ``oracle``, ``manual``, ``auto:no-cancel``), is kept in
``answered_by`` and recorded (``vlm_answered_by``; the summary's and the result row's ``answered_by``).
"""
from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable

import numpy as np
import yaml

from ..answers import extract_json, last_json_object
from ..errors import BrainUnfit, ConfigError, MotorMindError, yaml_error
from .base import Brain, BrainReply, BrainRequest
from ..grounding.image_sizing import RULES as IMAGE_RULES
from ..grounding.image_sizing import fit as fit_image
from .probe import MIN_IMAGE_TOKENS

_STRUCTURED = ("json_schema", "json_object", "none")
_DETAIL = ("auto", "low", "high")


class VLMError(MotorMindError):
    """A VLM call failed for good (after its retries, or at once for a non-retryable error)."""


@dataclass
class VLMConfig:
    name: str = "openai"
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o"
    api_key_env: str | None = "OPENAI_API_KEY"  # the environment variable that holds the key
    api_key: str | None = None                  # a literal key (local servers that want any string)
    organization: str | None = None
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    max_tokens: int = 1024
    max_tokens_param: str = "max_tokens"        # or max_completion_tokens (newer OpenAI models)
    image_size: int | None = None               # longest side in px; None: the image_rules default
    image_rules: str = "generic"                # how the model family sizes images (grounding/image_sizing.py)
    image_detail: str = "auto"                  # auto | low | high
    image_format: str = "png"                   # png | jpeg
    jpeg_quality: int = 90
    send_images: bool = True                    # false for text-only models
    marks: bool | dict = True                   # marks drawn on the images (grounding/marks.py): true, false or
                                                #  {grip_point, arrows, arrow_mm, scale_bar_mm, closing_line, labels}
    timeout_s: float = 60.0
    retries: int = 3                            # retries after the first attempt (429, 5xx, timeouts)
    backoff_s: float = 1.0                      # first backoff; doubles each retry
    backoff_max_s: float = 20.0
    structured_output: str = "json_schema"      # json_schema | json_object | none
    strict_schema: bool = False                 # OpenAI strict mode (needs every field required)
    structured_fallback: bool = True            # a 400 naming response_format: retry without it
    strip_thinking: bool = True                 # drop <think>...</think> blocks (reasoning models)
    truncation_retry: bool = True               # a truncated answer is asked again at once, max_tokens doubled
    max_tokens_cap: int | None = None           # ... up to this (default 4 x max_tokens)
    probe: bool = True                          # the camera probe before the first plan (brains/probe.py)
    prices: dict = field(default_factory=dict)  # {input_per_mtok: USD, output_per_mtok: USD}
    extra_body: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    roles: dict = field(default_factory=dict)   # per-role overrides: {monitor: {timeout_s: 10, max_tokens: 200}}
    label: str | None = None                    # the brain label in records (default openai:<model>)
    privileged: bool = False                    # the endpoint answers from privileged state (the oracle)
    send_context: bool = False                  # MotorMind's server only (see the module doc)
    send_scene: bool = False                    # MotorMind's server only: ships PRIVILEGED scene state
    send_budget: bool = False                   # MotorMind's server only: the role, the call's timeout and what
                                                #  the episode has left (steps, wall time), non-privileged
    serve: str | None = None                    # oracle | replay | manual: start serve-brain in-process first
    replay: str | None = None                   # serve: replay -> the episode record to replay
    queue: str | None = None                    # serve: manual -> the queue folder ROOT (each episode in ROOT/<run
                                                #  dir's name>); None: the run directory's queue/
    auto: dict = field(default_factory=dict)    # serve: manual -> fixed answers per role, {monitor: no-cancel}
    faults: dict = field(default_factory=dict)  # serve-brain fault plan (motormind.serve.faults)
    quirks: dict = field(default_factory=dict)  # serve-brain quirk plan (motormind.serve.quirks)
    latency: dict = field(default_factory=dict)  # serve-brain latency plan, s (motormind.serve.latency)
    text_style: str = "fenced"                  # serve-brain: how it answers without response_format
    overlap: dict | bool = field(default_factory=dict)   # the model's thinking beside the arm's motion
                                                #  (episode/overlap.py): {speculate: false, verify_ahead: false}
    source: str = field(default="", metadata={"internal": True})   # where the config came from (the loader's)

    def __post_init__(self) -> None:
        if self.structured_output not in _STRUCTURED:
            raise ConfigError(f"structured_output: must be one of {', '.join(_STRUCTURED)}, "
                              f"got {self.structured_output!r}")
        if self.image_detail not in _DETAIL:
            raise ConfigError(f"image_detail: must be one of {', '.join(_DETAIL)}, got {self.image_detail!r}")
        if self.image_rules not in IMAGE_RULES:
            raise ConfigError(f"image_rules: must be one of {', '.join(IMAGE_RULES)}, got {self.image_rules!r}")
        if self.max_tokens_cap is not None and (isinstance(self.max_tokens_cap, bool) or
                                                not isinstance(self.max_tokens_cap, int) or self.max_tokens_cap < 1):
            raise ConfigError(f"max_tokens_cap: must be a positive integer (or null), got {self.max_tokens_cap!r}")
        if self.image_format not in ("png", "jpeg"):
            raise ConfigError(f"image_format: must be png or jpeg, got {self.image_format!r}")
        if self.max_tokens_param not in ("max_tokens", "max_completion_tokens"):
            raise ConfigError(f"max_tokens_param: must be max_tokens or max_completion_tokens, "
                              f"got {self.max_tokens_param!r}")
        if self.serve not in (None, "oracle", "replay", "manual"):
            raise ConfigError(f"serve: must be oracle, replay or manual (or absent), got {self.serve!r}")
        if self.serve == "manual":
            for k in ("send_context", "send_scene", "privileged"):
                if getattr(self, k):
                    raise ConfigError(f"{k}: must be false with serve: manual (nothing privileged may reach the "
                                      "answerer's folder: it holds what the prompt holds)")
        elif self.auto:
            raise ConfigError("auto: fixed answers are for serve: manual only")
        if self.serve == "replay" and not self.replay:
            raise ConfigError("replay: serve: replay needs the episode record to replay (replay: RUN_DIR)")
        for k in ("timeout_s", "backoff_s", "backoff_max_s"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ConfigError(f"{k}: must be a number >= 0, got {v!r}")
        if self.timeout_s <= 0:
            raise ConfigError(f"timeout_s: must be > 0, got {self.timeout_s!r}")
        if isinstance(self.retries, bool) or not isinstance(self.retries, int) or self.retries < 0:
            raise ConfigError(f"retries: must be an integer >= 0, got {self.retries!r}")
        if isinstance(self.max_tokens, bool) or not isinstance(self.max_tokens, int) or self.max_tokens < 1:
            raise ConfigError(f"max_tokens: must be a positive integer, got {self.max_tokens!r}")
        from ..episode.overlap import Overlap
        Overlap.parse(self.overlap)                 # a bad setting is an error naming overlap.<field>
        from ..grounding.marks import MarkOptions
        MarkOptions.parse(self.marks)               # a bad option is an error naming marks.<field>
        if self.image_size is not None and (not isinstance(self.image_size, int) or self.image_size < 8):
            raise ConfigError(f"image_size: must be an integer >= 8 (or null), got {self.image_size!r}")
        bad = sorted(set(self.prices) - {"input_per_mtok", "output_per_mtok"})
        if bad:
            raise ConfigError(f"prices: unknown key(s) {bad} (known: input_per_mtok, output_per_mtok)")
        role_keys = {"timeout_s", "max_tokens", "temperature", "retries", "image_size", "image_detail",
                     "send_images"}
        from ..schemas import ROLE_SCHEMAS
        for role, ov in self.roles.items():
            if role not in ROLE_SCHEMAS:
                raise ConfigError(f"roles.{role}: unknown role (known: {', '.join(ROLE_SCHEMAS)})")
            extra = sorted(set(ov or {}) - role_keys)
            if extra:
                raise ConfigError(f"roles.{role}: unknown key(s) {extra} (allowed: {sorted(role_keys)})")

    @property
    def label_or_default(self) -> str:
        return self.label or f"openai:{self.model}"

    def public(self) -> dict:
        """The config for records: everything but a literal key."""
        d = asdict(self)
        if d.get("api_key"):
            d["api_key"] = "***"
        return d


# -- loading ------------------------------------------------------------------------------------
_VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}")


def _expand(v):
    """``${VAR}`` and ``${VAR:-default}`` in string values."""
    if isinstance(v, str):
        def sub(m):
            val = os.environ.get(m.group(1))
            if val is None:
                if m.group(2) is None:
                    raise ConfigError(f"environment variable {m.group(1)} is not set (used in the VLM config)")
                return m.group(2)
            return val
        return _VAR.sub(sub, v)
    if isinstance(v, dict):
        return {k: _expand(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_expand(x) for x in v]
    return v


def resolve_vlm_path(name_or_path: str | Path) -> Path:
    p = Path(name_or_path)
    if p.suffix in (".yaml", ".yml") and p.exists():
        return p
    from ..paths import config_dir
    try:
        cand = config_dir() / "vlm" / (p.name if p.suffix in (".yaml", ".yml") else f"{p.name}.yaml")
    except FileNotFoundError:
        cand = None
    if cand is not None and cand.exists():
        return cand
    known = sorted(q.stem for q in cand.parent.glob("*.yaml")) if cand is not None else []
    raise ConfigError(f"no VLM config {str(name_or_path)!r} (a YAML path, or a name in configs/vlm/: "
                      f"{', '.join(known)})")


def apply_overrides(d: dict, overrides) -> dict:
    """``["model=qwen", "faults.malformed_json=0.2", "roles.monitor.timeout_s=5"]`` -> nested keys;
    values are parsed as YAML scalars."""
    d = json.loads(json.dumps(d))
    for item in overrides or ():
        key, eq, raw = str(item).partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--vlm-set {item!r}: expected KEY=VALUE")
        val = yaml.safe_load(raw) if raw.strip() else None
        cur = d
        parts = key.strip().split(".")
        for p in parts[:-1]:
            if not isinstance(cur.get(p), dict):
                cur[p] = {}
            cur = cur[p]
        cur[parts[-1]] = val
    return d


def vlm_config_from_dict(d: dict, source: str = "") -> VLMConfig:
    """A VLM config from its mapping, strictly (``strict_config``): an unknown key names the nearest
    valid one, a value of the wrong type names the field, and every error names ``source``."""
    from ..strict_config import from_mapping
    where = source or "VLM config"
    if not isinstance(d, dict):
        raise ConfigError(f"{where}: must be a mapping")
    d = _expand(d)
    for k in ("prices", "extra_body", "headers", "roles", "faults", "quirks", "latency", "auto"):
        if k in d and d.get(k) is None:
            d.pop(k, None)
    if "source" in d:
        raise ConfigError(f"{where}: source: set by the loader (where the config came from), not by the file")
    cfg = from_mapping(VLMConfig, d, where)
    cfg.source = source
    return cfg


def load_vlm_config(name_or_path: str | Path | dict, overrides=()) -> VLMConfig:
    if isinstance(name_or_path, dict):
        return vlm_config_from_dict(apply_overrides(name_or_path, overrides), "dict")
    p = resolve_vlm_path(name_or_path)
    try:
        d = yaml.safe_load(p.read_text()) or {}
    except yaml.YAMLError as e:
        raise yaml_error(p, e) from None
    return vlm_config_from_dict(apply_overrides(d, overrides), str(p))


# -- images -------------------------------------------------------------------------------------
def image_data_url(img, size: int | None = None, fmt: str = "png", quality: int = 90, rules: str = "generic",
                   detail: str = "auto") -> str:
    """An image as a data URL, sized by the family's ``rules`` (``generic`` with no size: as it is)."""
    import cv2  # lazy
    a = np.ascontiguousarray(np.asarray(img, dtype=np.uint8))
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    h, w = a.shape[:2]
    if rules != "generic" or size:
        t = fit_image(rules, w, h, size, detail)
        if (t.width, t.height) != (w, h):
            a = cv2.resize(a, (t.width, t.height),
                           interpolation=cv2.INTER_AREA if t.width * t.height < w * h else cv2.INTER_LINEAR)
    bgr = cv2.cvtColor(a[:, :, :3], cv2.COLOR_RGB2BGR)
    if fmt == "jpeg":
        ok, buf = cv2.imencode(".jpg", bgr, [int(cv2.IMWRITE_JPEG_QUALITY), int(quality)])
        mime = "image/jpeg"
    else:
        ok, buf = cv2.imencode(".png", bgr)
        mime = "image/png"
    if not ok:
        raise VLMError("image encoding failed")
    return f"data:{mime};base64,{base64.b64encode(buf.tobytes()).decode()}"


def _jsonable(o):
    from ..record import _finite, json_default
    return json.loads(json.dumps(_finite(o), default=json_default))


_THINK = re.compile(r"<(think|thinking)>.*?</\1>", flags=re.S)
_IMAGE_REFUSAL = re.compile(r"\bimages?\b|mmproj|multimodal|cannot unmarshal array.*content", flags=re.I | re.S)
FLOOD_LIMIT = 2                 # whitespace floods before structured output goes off for the run


def strip_thinking(text: str) -> tuple[str, int]:
    """(the answer without a reasoning model's thinking, characters dropped). Handles closed
    ``<think>`` / ``<thinking>`` blocks, a closing tag whose opening the chat template wrote, and
    an opening tag never closed (the thinking ran to max_tokens: nothing is left)."""
    if "<think" not in text and "</think" not in text:
        return text, 0
    s = _THINK.sub("", text)
    for close in ("</think>", "</thinking>"):
        if close in s:
            s = s.rsplit(close, 1)[1]
    for opening in ("<think>", "<thinking>"):
        if opening in s:
            s = s.split(opening, 1)[0]
    s = s.strip()
    return s, max(0, len(text.strip()) - len(s))


def _reasoning(msg) -> tuple[str, str]:
    """(field name, text) of a reasoning parser's output: vLLM's ``reasoning_content`` (``reasoning``
    in newer releases, and OpenRouter's)."""
    if msg is None:
        return "", ""
    extra = getattr(msg, "model_extra", None) or {}
    for name in ("reasoning_content", "reasoning"):
        v = getattr(msg, name, None)
        if v is None:
            v = extra.get(name)
        if isinstance(v, str) and v.strip():
            return name, v
    return "", ""


def _parses(text: str) -> bool:
    try:
        extract_json(text)
        return True
    except MotorMindError:
        return False


def _flooded(text: str) -> bool:
    """An answer that is mostly whitespace, or ends in a long run of it (a JSON grammar's flood)."""
    n = len(text)
    ws = n - len("".join(text.split()))
    tail = n - len(text.rstrip())
    return n > 0 and (ws > 0.5 * n or tail >= 64)


def _schema_miss(text: str, schema: dict) -> str:
    """Why ``text`` is not what a server enforcing ``schema`` returns: bare JSON matching it ("")."""
    from ..commands import decode_json
    from ..errors import CommandError, ResponseError
    from ..schemas import validate
    try:
        validate(decode_json(text.strip(), "answer"), schema)
    except (CommandError, ResponseError) as e:
        return str(e)[:200]
    return ""


def _count_images(messages: list) -> int:
    return sum(1 for m in messages if isinstance(m["content"], list) for p in m["content"]
               if p.get("type") == "image_url")


# -- the brain ----------------------------------------------------------------------------------
class OpenAIBrain(Brain):
    def __init__(self, config: VLMConfig, client=None, on_event: Callable[..., None] | None = None,
                 scene_fn: Callable[[], Any] | None = None, profile_name: str | None = None,
                 sleep: Callable[[float], None] = time.sleep):
        self.cfg = config
        self.name = config.label_or_default
        self.privileged = bool(config.privileged or config.send_scene)
        from ..episode.overlap import Overlap
        self.overlap = Overlap.parse(config.overlap)   # read by the episode's driver (runner.py)
        self.on_event = on_event or (lambda kind, **data: None)
        self.scene_fn = scene_fn
        self.profile_name = profile_name
        self.session = uuid.uuid4().hex[:12]
        self._sleep = sleep
        self._structured = config.structured_output
        self.unfit = ""                          # set when the endpoint refuses or ignores images
        self.unfit_quirk = ""
        self.calibration: dict | None = None     # the probe's token accounting (brains/probe.py)
        self.floods = 0
        self._owned: list = []                  # things close() closes (an in-process server)
        self.gate = None                         # the worker's EndpointGate for base_url (use_gates)
        self.budget_fn: Callable[[], dict] | None = None   # what the episode has left (watch_budget)
        self.answered_by: dict = {}              # role -> who answered it, as the server says (meta.server.source)
        self._lock = threading.Lock()
        self.totals = {"calls": 0, "attempts": 0, "retries": 0, "input_tokens": 0, "output_tokens": 0,
                       "cost_usd": 0.0, "failures": 0}
        if config.send_scene and scene_fn is None:
            raise ConfigError("send_scene: true needs the simulator's scene (only a simulated robot has one)")
        if client is None:
            import openai  # lazy: the core imports lightly
            key = config.api_key
            if not key and config.api_key_env:
                key = os.environ.get(config.api_key_env)
                if not key:
                    raise ConfigError(f"{config.source or 'VLM config'}: the API key variable "
                                      f"${config.api_key_env} is not set (api_key_env)")
            client = openai.OpenAI(base_url=config.base_url, api_key=key or "EMPTY",
                                   organization=config.organization, timeout=config.timeout_s, max_retries=0,
                                   default_headers=config.headers or None)
        self.client = client

    def use_gates(self, gates) -> None:
        self.gate = gates.get(self.cfg.base_url) if gates is not None else None

    def watch_budget(self, fn: Callable[[], dict]) -> None:
        self.budget_fn = fn

    # -- building the request -------------------------------------------------------------------
    def _opt(self, role: str, key: str):
        ov = self.cfg.roles.get(role) or {}
        return ov[key] if key in ov else getattr(self.cfg, key)

    def messages(self, req: BrainRequest) -> list[dict]:
        msgs: list[dict] = [{"role": "system", "content": req.system}]
        imgs = req.images if self._opt(req.role, "send_images") else {}
        if imgs:
            content: list[dict] = [{"type": "text", "text": req.user}]
            for name, img in imgs.items():
                content.append({"type": "text", "text": f"Image '{name}':"})
                content.append({"type": "image_url", "image_url": {
                    "url": image_data_url(img, self._opt(req.role, "image_size"), self.cfg.image_format,
                                          self.cfg.jpeg_quality, self.cfg.image_rules,
                                          self._opt(req.role, "image_detail")),
                    "detail": self._opt(req.role, "image_detail")}})
            msgs.append({"role": "user", "content": content})
        else:
            msgs.append({"role": "user", "content": req.user})
        for h in req.history:
            msgs.append({"role": h["role"], "content": h["content"]})
        return msgs

    def response_format(self, req: BrainRequest) -> dict | None:
        if self._structured == "json_schema" and req.schema:
            return {"type": "json_schema", "json_schema": {"name": f"motormind_{req.role}", "schema": req.schema,
                                                           "strict": bool(self.cfg.strict_schema)}}
        if self._structured == "json_object":
            return {"type": "json_object"}
        return None

    def request_kwargs(self, req: BrainRequest) -> dict:
        kw: dict = {"model": self.cfg.model, "messages": self.messages(req),
                    self.cfg.max_tokens_param: int(self._opt(req.role, "max_tokens"))}
        temp = self._opt(req.role, "temperature")
        if temp is not None:
            kw["temperature"] = float(temp)
        if self.cfg.top_p is not None:
            kw["top_p"] = self.cfg.top_p
        if self.cfg.seed is not None:
            kw["seed"] = self.cfg.seed
        rf = self.response_format(req)
        if rf:
            kw["response_format"] = rf
        extra = dict(self.cfg.extra_body or {})
        mm: dict = {}
        if self.cfg.send_context or self.cfg.send_scene:
            mm = {"role": req.role, "prompt_name": req.prompt_name, "session": self.session,
                  "context": _jsonable(req.context)}
            if self.profile_name:
                mm["profile"] = self.profile_name
            if self.cfg.send_scene and req.role in ("planner", "executor", "verifier"):
                mm["scene"] = _jsonable(self.scene_fn().snapshot())   # PRIVILEGED
        if self.cfg.send_budget:            # non-privileged: what a teleoperator knows of the episode
            mm.update(role=req.role, prompt_name=req.prompt_name, session=self.session,
                      timeout_s=float(self._opt(req.role, "timeout_s")),
                      budget=_jsonable(self.budget_fn()) if self.budget_fn is not None else None)
        if mm:
            extra["motormind"] = mm
        if extra:
            kw["extra_body"] = extra
        kw["timeout"] = float(self._opt(req.role, "timeout_s"))
        return kw

    # -- calling --------------------------------------------------------------------------------
    def respond(self, req: BrainRequest) -> BrainReply:
        if self.unfit:                      # found unfit: asked nothing more
            raise BrainUnfit(self.unfit, self.unfit_quirk)
        t0 = time.perf_counter()
        kw = self.request_kwargs(req)
        attempts: list[dict] = []
        notes: list[str] = []
        quirks: list[dict] = []
        n_images = _count_images(kw["messages"])
        comp, headers, ta = self._send(req, kw, attempts, notes, n_images)
        out = self._read(req, kw, comp, quirks)
        retry = self._quirk_retry(req, kw, out, quirks, notes)
        if retry is not None:               # one more request for a truncated or flooded answer
            first = out
            kw = retry
            self.on_event("vlm_retry", role=req.role, prompt=req.prompt_name, attempt=len(attempts),
                          error=f"quirk_{quirks[-1]['quirk']}", backoff_s=0.0, note=notes[-1])
            with self._lock:
                self.totals["retries"] += 1
            comp, headers, ta = self._send(req, kw, attempts, notes, n_images)
            out = self._read(req, kw, comp, quirks)
            out["first_answer"] = first["text"][:300]
            for q in quirks:
                q["action"] = q["action"] or "already asked again once: the role gets it as it is (repair or fail-safe)"
        latency = time.perf_counter() - t0
        usage = comp.usage
        tin = int(getattr(usage, "prompt_tokens", 0) or 0) if usage else 0
        tout = int(getattr(usage, "completion_tokens", 0) or 0) if usage else 0
        # the server's prefix cache (OpenAI's usage.prompt_tokens_details.cached_tokens; vLLM's the same)
        cached = getattr(getattr(usage, "prompt_tokens_details", None), "cached_tokens", None) if usage else None
        extra = (getattr(comp, "model_extra", None) or {}).get("motormind") or {}
        n_calls = len(attempts) + (1 if retry is None else 2)     # every HTTP request this call made
        meta: dict = {"model": comp.model, "request_id": comp.id, "attempts": n_calls,
                      "finish_reason": out["finish_reason"], "answer_from": out["answer_from"],
                      "structured_output": "response_format" in kw and kw["response_format"]["type"] or "none",
                      "http_latency_s": round(time.perf_counter() - ta, 4), "images_sent": n_images}
        for k in ("thinking_chars", "reasoning_chars", "first_answer"):
            if out.get(k):
                meta[k] = out[k]
        if attempts:
            meta["retries"] = attempts
        if notes:
            meta["notes"] = notes
        if out.get("refusal"):
            meta["refusal"] = str(out["refusal"])[:500]
        if out["finish_reason"] == "length":
            meta["truncated"] = f"the answer hit max_tokens ({kw[self.cfg.max_tokens_param]})"
        fault = headers.get("x-motormind-fault")
        if fault:
            meta["server_fault"] = fault
        if headers.get("x-motormind-quirk"):
            meta["server_quirk"] = headers.get("x-motormind-quirk")
        if extra:
            meta["server"] = {k: extra[k] for k in ("source", "images_received", "usage_estimated") if k in extra}
            self._answered(req.role, extra.get("source"))
        if cached is not None:
            meta["cached_tokens"] = int(cached or 0)
        cost = self.cost(tin, tout)
        if cost is not None:
            meta["cost_usd"] = cost
        blind = self._blind(req, n_images, tin, extra)
        if blind:
            quirks.append({"quirk": "images_ignored", "detail": blind,
                           "action": "answer not used; the brain asks this endpoint nothing more"})
        if quirks:
            meta["quirks"] = quirks
            for q in quirks:
                self.on_event("vlm_quirk", role=req.role, prompt=req.prompt_name, **q)
        with self._lock:
            t = self.totals
            t["calls"] += 1
            t["attempts"] += n_calls
            t["retries"] += len(attempts)
            t["input_tokens"] += tin
            t["output_tokens"] += tout
            t["cached_tokens"] = t.get("cached_tokens", 0) + int(cached or 0)
            t["cost_usd"] += cost or 0.0
        if blind:
            self._set_unfit("images_ignored", f"images_ignored: {blind}")
            raise BrainUnfit(self.unfit, "images_ignored")
        return BrainReply(out["text"], self.name, latency, tin, tout,
                          privileged=bool(self.privileged or extra.get("privileged")), meta=meta)

    def _send(self, req: BrainRequest, kw: dict, attempts: list, notes: list, n_images: int):
        """One request with its retries (429, 5xx, timeouts; the response_format fallback).
        -> (completion, headers, start of the last attempt). Failed attempts go to ``attempts``."""
        import openai
        retries = int(self._opt(req.role, "retries"))
        first = len(attempts)
        while True:
            attempt = len(attempts)
            ta = time.perf_counter()
            try:
                if self.gate is not None:
                    with self.gate.slot():
                        ta = time.perf_counter()            # the wait for a slot is not the endpoint's
                        raw = self.client.chat.completions.with_raw_response.create(**kw)
                else:
                    raw = self.client.chat.completions.with_raw_response.create(**kw)
                return raw.parse(), raw.headers, ta
            except openai.BadRequestError as e:
                msg = _err_text(e)
                if n_images and _IMAGE_REFUSAL.search(msg):
                    self._fail(attempts, self._attempt(attempt, ta, e))
                    self._refused(req, 400, msg)
                if "response_format" in kw and self.cfg.structured_fallback and "response_format" in msg.lower():
                    self._structured = "none"
                    kw.pop("response_format")
                    notes.append(f"the server refused response_format ({msg[:160]}); structured output off")
                    attempts.append(self._attempt(attempt, ta, e, backoff=0.0))
                    self.on_event("vlm_retry", role=req.role, **attempts[-1], note=notes[-1])
                    continue
                self._fail(attempts, self._attempt(attempt, ta, e))
                raise VLMError(f"HTTP 400 from {self.cfg.base_url}: {msg[:300]}") from None
            except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                    openai.InternalServerError, openai.APIStatusError) as e:
                status = getattr(e, "status_code", None)
                if n_images and status is not None and status >= 500 and _IMAGE_REFUSAL.search(_err_text(e)):
                    self._fail(attempts, self._attempt(attempt, ta, e))
                    self._refused(req, status, _err_text(e))
                retryable = status is None or status == 429 or status >= 500 or status in (408, 409)
                info = self._attempt(attempt, ta, e)
                if not retryable:
                    self._fail(attempts, info)
                    raise VLMError(f"HTTP {status} from {self.cfg.base_url}: {_err_text(e)[:300]}") from None
                if attempt - first >= retries:
                    self._fail(attempts, info)
                    raise VLMError(f"{len(attempts)} attempt(s) failed ({retries} retries): "
                                   + "; ".join(_brief(a) for a in attempts)) from None
                info["backoff_s"] = round(self._backoff(attempt - first, e), 3)
                attempts.append(info)
                self.on_event("vlm_retry", role=req.role, prompt=req.prompt_name, **info)
                if self.gate is not None and _overloaded(e):
                    self.gate.slow_down(info["backoff_s"])    # every episode on this endpoint waits,
                else:                                         # this one at its next slot()
                    self._sleep(info["backoff_s"])

    def _answered(self, role: str, source) -> None:
        """Who answered ``role`` (the server's ``motormind.source``: ``manual``, ``auto:no-cancel``,
        ``oracle``): kept per role, and recorded (``vlm_answered_by``) the first time, or when it changes."""
        if not isinstance(source, str) or not source:
            return
        with self._lock:
            had = self.answered_by.get(role, "")
            if source in had.split("+"):
                return
            self.answered_by[role] = f"{had}+{source}" if had else source
            now = self.answered_by[role]
        self.on_event("vlm_answered_by", role=role, by=now)

    def _refused(self, req: BrainRequest, status: int, msg: str) -> None:
        """The server will not take images: the brain is unfit (raises BrainUnfit)."""
        hint = ("llama.cpp's server needs the model's multimodal projector (--mmproj)" if "mmproj" in msg else
                "the model or server does not take images this way (a vision model? `ollama show MODEL` lists "
                "'vision' among its capabilities)")
        detail = f"HTTP {status} to a request with images: {msg[:200]}"
        self.on_event("vlm_quirk", role=req.role, prompt=req.prompt_name, quirk="images_refused", detail=detail,
                      action="no retry; the brain asks this endpoint nothing more")
        self._set_unfit("images_refused", f"images_refused: the endpoint refuses camera images ({detail}); {hint}")
        raise BrainUnfit(self.unfit, "images_refused")

    def _set_unfit(self, quirk: str, message: str) -> None:
        if not self.unfit:
            self.unfit, self.unfit_quirk = message, quirk

    def _read(self, req: BrainRequest, kw: dict, comp, quirks: list) -> dict:
        """Where the server put the answer, with thinking stripped; names what it had to do."""
        choice = comp.choices[0] if comp.choices else None
        msg = choice.message if choice else None
        content = (msg.content if msg is not None else None) or ""
        field_name, reasoning = _reasoning(msg)
        out = {"finish_reason": getattr(choice, "finish_reason", None), "answer_from": "content",
               "refusal": getattr(msg, "refusal", None) if msg is not None else None,
               "reasoning_chars": len(reasoning)}
        text = content
        if not content.strip() and reasoning.strip():
            text = last_json_object(reasoning) or reasoning
            out["answer_from"] = field_name
            quirks.append({"quirk": "answer_in_reasoning", "detail": f"content empty; {len(reasoning)} characters "
                           f"in {field_name}", "action": f"the answer read from {field_name}"})
        if self.cfg.strip_thinking:
            text, dropped = strip_thinking(text)
            if dropped:
                out["thinking_chars"] = dropped
                quirks.append({"quirk": "think_block", "detail": f"{dropped} characters of thinking before the answer",
                               "action": "thinking dropped"})
        out["text"] = text
        if out["finish_reason"] == "length":
            if _flooded(text):
                out["flood"] = True
                quirks.append({"quirk": "whitespace_flood", "detail": f"{len(text)} characters, "
                               f"{len(text) - len(''.join(text.split()))} of them whitespace, at max_tokens",
                               "action": ""})
            elif not _parses(text):
                out["truncated"] = True
                quirks.append({"quirk": "truncated", "detail": f"finish_reason length after {len(text)} characters, "
                               "no complete JSON object", "action": ""})
        elif (kw.get("response_format") or {}).get("type") == "json_schema" and req.schema:
            why = _schema_miss(text, req.schema)
            if why:
                self._structured = "none"
                quirks.append({"quirk": "schema_ignored", "detail": f"under response_format json_schema: {why}",
                               "action": "structured output off for the rest of the run; JSON extracted from text"})
        return out

    def _quirk_retry(self, req: BrainRequest, kw: dict, out: dict, quirks: list, notes: list) -> dict | None:
        """The request to send once more for a flooded or truncated answer (None: none)."""
        if out.get("flood"):
            self.floods += 1
            kw2 = {k: v for k, v in kw.items() if k != "response_format"}
            act = "asked again at once without response_format"
            if self.floods >= FLOOD_LIMIT and self._structured != "none":
                self._structured = "none"
                act += f"; structured output off for the rest of the run ({self.floods} floods)"
            quirks[-1]["action"] = act
            notes.append(f"whitespace flood under a JSON grammar: {act}")
            return kw2
        if out.get("truncated"):
            key = self.cfg.max_tokens_param
            cap = self.cfg.max_tokens_cap or 4 * int(self.cfg.max_tokens)
            more = min(cap, 2 * int(kw[key]))
            if not self.cfg.truncation_retry or more <= int(kw[key]):
                quirks[-1]["action"] = "not asked again (truncation_retry off or max_tokens_cap reached); the role repairs"
                return None
            quirks[-1]["action"] = f"asked again at once with {key} {more}"
            notes.append(f"truncated at {kw[key]} tokens: asked again with {more}")
            return {**kw, key: more}
        return None

    def _blind(self, req: BrainRequest, n_images: int, tin: int, extra: dict) -> str:
        """Evidence in a call's own usage that the server dropped its images ("" when none)."""
        if not n_images:
            return ""
        got = extra.get("images_received")
        if isinstance(got, int) and got < n_images:
            return f"the server says it received {got} of {n_images} images"
        cal = self.calibration
        if not cal or not tin or cal["image_tokens"] < MIN_IMAGE_TOKENS:
            return ""
        chars = len(req.system) + len(req.user) + sum(len(str(h.get("content", ""))) for h in req.history)
        text = cal["overhead_tokens"] + cal["text_tokens_per_char"] * chars
        counted = tin - text
        if counted < 0.5 * n_images * cal["image_tokens"]:
            return (f"{tin} prompt tokens for {chars} characters and {n_images} images: about {text:.0f} for the "
                    f"text, so {max(0.0, counted):.0f} for the images, not the {n_images * cal['image_tokens']:.0f} "
                    "the start-up probe measured")
        return ""

    def preflight(self, images: dict) -> dict | None:
        """The camera probe (``brains/probe.py``) before the first plan; an endpoint that refuses or
        ignores the images makes the brain unfit."""
        if not self.cfg.probe or not images or not self._opt("executor", "send_images"):
            return None
        from .probe import probe_images
        names = list(images)
        shape = np.asarray(images[names[0]]).shape

        def probe():
            return probe_images(self, names, shape, at_once=self.overlap.plan_with_probe)
        shared = False
        if self.gate is not None:               # one probe per endpoint and camera set in a worker
            res, shared = self.gate.once(("probe", tuple(names), tuple(shape)), probe,
                                         keep=lambda r: r.verdict in ("ok", "unfit"))
        else:
            res = probe()
        if res.verdict == "ok" and res.calibration:
            self.calibration = res.calibration
        if res.verdict == "unfit":
            self._set_unfit(res.quirk, f"{res.quirk}: {res.message}")
            if res.quirk != "images_refused" or shared:     # a refusal was named as it happened, to its prober
                self.on_event("vlm_quirk", role="probe", prompt="probe", quirk=res.quirk, detail=res.message,
                              action="the episode ends before the first plan; nothing moved")
        out = res.to_json()
        if shared:
            out["shared"] = "the probe of another episode on this endpoint, in this worker (brains/gate.py)"
        self.on_event("vlm_probe", **out)
        return out

    def cost(self, tin: int, tout: int) -> float | None:
        p = self.cfg.prices
        if not p:
            return None
        return round(tin * float(p.get("input_per_mtok", 0)) / 1e6 + tout * float(p.get("output_per_mtok", 0)) / 1e6, 8)

    def _attempt(self, attempt: int, ta: float, e: Exception, backoff: float | None = None) -> dict:
        status = getattr(e, "status_code", None)
        resp = getattr(e, "response", None)
        fault = None
        try:
            fault = resp.headers.get("x-motormind-fault") if resp is not None else None
        except Exception:  # noqa: BLE001
            pass
        kind = "timeout" if type(e).__name__ == "APITimeoutError" else \
            "connection" if type(e).__name__ == "APIConnectionError" else f"http_{status}"
        info = {"attempt": attempt, "error": kind, "status": status, "message": _err_text(e)[:200],
                "latency_s": round(time.perf_counter() - ta, 4)}
        if backoff is not None:
            info["backoff_s"] = backoff
        if fault:
            info["server_fault"] = fault
        return info

    def _fail(self, attempts: list, info: dict) -> None:
        attempts.append(info)
        with self._lock:
            self.totals["failures"] += 1
            self.totals["attempts"] += len(attempts)
            self.totals["retries"] += len(attempts) - 1

    def _backoff(self, attempt: int, e: Exception) -> float:
        b = min(self.cfg.backoff_max_s, self.cfg.backoff_s * (2 ** attempt))
        resp = getattr(e, "response", None)
        try:
            ra = resp.headers.get("retry-after") if resp is not None else None
            if ra is not None:
                b = min(self.cfg.backoff_max_s, max(0.0, float(ra)))
        except (ValueError, TypeError, AttributeError):
            pass
        return b

    def close(self) -> None:
        try:
            self.client.close()
        except Exception:  # noqa: BLE001
            pass
        for o in reversed(self._owned):
            try:
                o.close()
            except Exception:  # noqa: BLE001
                pass
        self._owned.clear()


def _overloaded(e: Exception) -> bool:
    """A 429, or any answer that says when to come back (Retry-After): the endpoint, not the call."""
    if getattr(e, "status_code", None) == 429:
        return True
    resp = getattr(e, "response", None)
    try:
        return resp is not None and resp.headers.get("retry-after") is not None
    except AttributeError:
        return False


def _err_text(e: Exception) -> str:
    body = getattr(e, "body", None)
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
    text, root, seen = str(e), e, set()
    while (root.__cause__ or root.__context__) is not None and id(root) not in seen:   # the client's
        seen.add(id(root))                      # "Connection error." says nothing of refused, DNS, reset
        root = root.__cause__ or root.__context__
    if root is not e and str(root) and str(root) not in text:
        text += f" ({type(root).__name__}: {root})"
    return text


def _brief(a: dict) -> str:
    s = f"[{a['attempt']}] {a['error']}"
    if a.get("server_fault"):
        s += f" (server fault {a['server_fault']})"
    elif a.get("message"):
        s += f" ({a['message'][:120]})"
    return s
