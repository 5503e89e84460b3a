"""A local OpenAI-compatible HTTP server that answers from a MotorMind brain.

    GET  /v1/models              the one model it serves
    POST /v1/chat/completions    a chat completion (no streaming), ``response_format`` honoured
    GET  /health                 "ok"
    GET  /stats                  requests so far, in flight now, the peak in flight, the latency plan

How a chat request becomes a ``BrainRequest`` (the inverse of ``OpenAIBrain``'s messages):
messages[0] is the system prompt, messages[1] the user turn (its first text part is the rendered
user prompt, its ``image_url`` parts are decoded from their data URLs), later messages are the
repair history. The role comes from the request's ``motormind`` extra field when present, else
from the system prompt ("You are the Executor ..."). The structured context the prompt was
rendered from travels in the same extra field (``motormind.context``) when the client config says
``send_context: true``: real servers ignore or reject unknown fields, so that is only switched on
for this server. The oracle needs that context (subgoal ids, measured state as the prompt shows it)
and privileged simulator state, which it gets one of two ways:

* in-process (``serve: oracle`` in a VLM config): ``episode.make_brain`` starts this server in a
  thread next to the simulation with an ``OracleBrain`` holding the live ``Scene``; nothing
  privileged crosses the wire.
* standalone (``motormind serve-brain --backend oracle``): the client config says
  ``send_scene: true`` and each planner / executor / verifier request carries a snapshot of the
  privileged scene (``Scene.snapshot()``) in ``motormind.scene``; the server keeps one oracle per
  client session. Such a client is labelled privileged.

``response_format``: with ``json_schema`` or ``json_object`` the answer is the bare JSON object
(for ``json_schema`` it is checked against the schema and a violation is logged, as a server with
guided decoding would never produce one); without it the answer comes as a chatty model writes it,
a sentence and a fenced JSON block (``text_style: fenced``), so the client's JSON extraction runs.
Faults (``faults.FaultPlan``) are applied after that step. A latency plan (``latency.LatencyPlan``)
holds each successful answer back by a delay drawn for its role, awaited on the event loop (so
many calls wait at once; the delay is in the ``x-motormind-latency-s`` header and the log entry's
``latency_s``; ``t_end`` is when the answer was ready). The chat requests in flight are counted
at the HTTP layer (``in_flight``, ``peak_in_flight``: ``GET /stats``), so a client's cap on them
can be checked at the server. Usage tokens are estimates (4
characters a token, 85 an image) and say so (``motormind.usage_estimated``).

Every request is logged in ``BrainServer.log`` (role, fault, status, start and end times) and
each injected fault is reported through ``on_event("serve_fault", ...)`` (the episode record, when
in-process) and in the ``x-motormind-fault`` response header, which ``OpenAIBrain`` copies into the
call's record. Concurrent requests are answered on worker threads (Monitor and Memory calls never
wait for the Executor's). HTTP: a Starlette app under uvicorn (``motormind/webserver.py``, with the
console's Host and Origin checks); a request body is at most ``MAX_BODY`` bytes, complete within
``BODY_TIMEOUT_S``, and decoded strictly (``strict_json.decode_json``: 400 naming the path).
"""
from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import math
import re
import sys
import threading
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Callable

import numpy as np
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response
from starlette.routing import Route

from ..brains.base import Brain, BrainReply, BrainRequest
from ..grounding.image_sizing import RULES as FAMILIES
from ..grounding.image_sizing import fit as fit_image
from ..errors import CommandError, ConfigError, ResponseError
from ..messages import EventKind
from ..schemas import CHECK_SCHEMAS, ROLE_SCHEMAS, validate
from ..strict_json import decode_json, show
from ..webserver import Disconnected, Guard, HttpError, HttpServer, decode_body, read_body, served_names
from .faults import HTTP_FAULTS, TEXT_FAULTS, FaultPlan
from .latency import LatencyPlan
from .quirks import IMAGE_QUIRKS, QuirkPlan, refusal, shape

_ROLE_RE = re.compile(r"You are the (\w+)\b")
MAX_BODY = 64 * 1024 * 1024     # bytes of a chat request (its images as data URLs: a few MB in practice)
BODY_TIMEOUT_S = 60.0           # a request body must arrive within this


class BadBrainRequest(ValueError):
    """The request lacks what the backend needs (answered 400, not retried by the client)."""


# -- request decoding ---------------------------------------------------------------------------
def decode_data_url(url: str) -> np.ndarray | None:
    """An ``image_url`` data URL -> HxWx3 uint8 RGB (None when it is not a decodable data URL)."""
    m = re.match(r"data:image/[\w.+-]+;base64,(.*)$", url or "", flags=re.S)
    if not m:
        return None
    try:
        import cv2  # lazy
        buf = np.frombuffer(base64.b64decode(m.group(1)), dtype=np.uint8)
        img = cv2.imdecode(buf, cv2.IMREAD_COLOR)
    except Exception:  # noqa: BLE001 - a broken image is logged, not fatal
        return None
    return None if img is None else img[:, :, ::-1].copy()


def _parts(content) -> list[dict]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [p for p in (content or []) if isinstance(p, dict)]


def _text(content) -> str:
    return "\n".join(p.get("text", "") for p in _parts(content) if p.get("type") == "text")


def request_from_body(body: dict) -> tuple[BrainRequest, dict]:
    """(the BrainRequest, extras: session, scene, profile, images sent/decoded)."""
    msgs = body.get("messages")
    if not isinstance(msgs, list) or not msgs:
        raise ValueError("messages: must be a non-empty list")
    extra = body.get("motormind") or {}
    if not isinstance(extra, dict):
        extra = {}
    system, user, images, n_img, history = "", "", {}, 0, []
    rest = list(msgs)
    if rest and rest[0].get("role") in ("system", "developer"):
        system = _text(rest.pop(0).get("content"))
    if rest and rest[0].get("role") == "user":
        parts = _parts(rest.pop(0).get("content"))
        texts = [p.get("text", "") for p in parts if p.get("type") == "text"]
        user = texts[0] if texts else ""
        names = [re.match(r"Image '(.+)':", t) for t in texts[1:]]
        names = [m.group(1) for m in names if m]
        for p in parts:
            if p.get("type") == "image_url":
                url = (p.get("image_url") or {}).get("url", "")
                name = names[n_img] if n_img < len(names) else f"image{n_img}"
                n_img += 1
                img = decode_data_url(url)
                if img is not None:
                    images[name] = img
    for m in rest:
        history.append({"role": m.get("role", "user"), "content": _text(m.get("content"))})
    role = extra.get("role")
    if role not in ROLE_SCHEMAS and role not in CHECK_SCHEMAS:
        m = _ROLE_RE.search(system)
        role = m.group(1).lower() if m else "unknown"
        role = {"pointer": "point"}.get(role, role)
    rf = body.get("response_format") or {}
    schema = ((rf.get("json_schema") or {}).get("schema") if rf.get("type") == "json_schema" else None) \
        or ROLE_SCHEMAS.get(role) or CHECK_SCHEMAS.get(role, {})
    ctx = extra.get("context") if isinstance(extra.get("context"), dict) else {}
    req = BrainRequest(role, extra.get("prompt_name") or role, system, user, schema, images, ctx, history)
    return req, {"session": extra.get("session", ""), "scene": extra.get("scene"),
                 "profile": extra.get("profile"), "images_sent": n_img, "images_decoded": len(images),
                 "max_tokens": body.get("max_tokens") or body.get("max_completion_tokens"),
                 "budget": extra.get("budget"), "timeout_s": extra.get("timeout_s"),   # send_budget (manual.py)
                 "messages": msgs}


def prompt_hash(system: str, user: str) -> str:
    """The hash the roles record (``vlm_call.prompt_hash``)."""
    return hashlib.sha256((system + "\n" + user).encode()).hexdigest()[:16]


# -- backends -----------------------------------------------------------------------------------
class ReplayBrain(Brain):
    """Replays the answers recorded in an episode (``events.jsonl``: every ``vlm_call``'s response,
    failed attempts included). A request gets the first unused recorded answer of its role with
    the same prompt hash and attempt number, else the role's next unused answer, else the role's
    last one again. Answers recorded from a privileged brain stay labelled privileged."""

    def __init__(self, record: str | Path):
        p = Path(record)
        p = p / "events.jsonl" if p.is_dir() else p
        if not p.exists():
            raise ConfigError(f"replay: no episode record at {p}")
        self.path = p
        self.name = f"replay:{p.parent.name}"
        self.entries: dict[str, list[dict]] = {}
        for line in p.read_text().splitlines():
            ev = json.loads(line)
            if ev.get("kind") == EventKind.VLM_CALL and "response" in ev:
                self.entries.setdefault(ev["role"], []).append(
                    {"hash": ev.get("prompt_hash"), "attempt": ev.get("attempt", 0), "text": ev["response"],
                     "privileged": bool(ev.get("privileged")), "used": False})
        if not self.entries:
            raise ConfigError(f"replay: {p} holds no recorded vlm_call responses")
        self.privileged = any(e["privileged"] for v in self.entries.values() for e in v)
        self._lock = threading.Lock()
        self.matched = self.fallback = 0

    def respond(self, req: BrainRequest) -> BrainReply:
        h, att = prompt_hash(req.system, req.user), len(req.history) // 2
        with self._lock:
            pool = self.entries.get(req.role)
            if not pool:
                raise RuntimeError(f"replay: the record has no answers for role {req.role!r}")
            pick = next((e for e in pool if not e["used"] and e["hash"] == h and e["attempt"] == att), None)
            if pick:
                self.matched += 1
            else:
                self.fallback += 1
                pick = next((e for e in pool if not e["used"] and e["attempt"] == att), None) \
                    or next((e for e in pool if not e["used"]), None) or pool[-1]
            pick["used"] = True
        return BrainReply(pick["text"], self.name, privileged=pick["privileged"])


class SnapshotScene:
    """The oracle's view of a scene from ``Scene.snapshot()`` data (standalone serve-brain)."""

    def __init__(self, snap: dict):
        self.snap = snap
        objs = snap.get("objects", {})
        self.goal_state = [list(p) for p in snap.get("goal_state", [])]
        self.object_names = [n for n, o in objs.items() if o.get("kind", "object") == "object"]
        self.region_names = list(snap.get("regions", {}))
        self._status = {json.dumps(list(p)): bool(t) for p, t in snap.get("goal_status", [])}

    def object_aabb(self, name: str):
        o = self.snap["objects"][name]
        return np.asarray(o["aabb_lo_m"], dtype=float), np.asarray(o["aabb_hi_m"], dtype=float)

    def region(self, name: str) -> dict:
        r = self.snap["regions"][name]
        return {k: (np.asarray(v, dtype=float) if isinstance(v, list) else v) for k, v in r.items()}

    def world(self) -> dict:
        """The oracle's geometry (``Scene.world()``), sent inside the snapshot."""
        if not isinstance(self.snap.get("world"), dict):
            raise BadBrainRequest("the scene snapshot has no 'world' (the oracle's geometry): the client's "
                                  "Scene.snapshot() is older than this server")
        return self.snap["world"]

    def predicate(self, pred) -> bool:
        key = json.dumps([str(x) for x in pred])
        if key not in self._status:
            raise KeyError(f"the scene snapshot has no truth value for {pred}")
        return self._status[key]


class SnapshotOracle:
    """One OracleBrain per client session, its scene replaced by each request's snapshot."""

    privileged = True
    name = "oracle"

    def __init__(self, default_profile: str = "libero_panda"):
        self.default_profile = default_profile
        self.sessions: dict = {}
        self._lock = threading.Lock()

    def respond_with(self, req: BrainRequest, extras: dict) -> BrainReply:
        from ..brains.oracle import OracleBrain
        from ..profile import load_profile
        key = extras.get("session") or "default"
        with self._lock:
            if key not in self.sessions:
                prof = load_profile(extras.get("profile") or self.default_profile)
                self.sessions[key] = (OracleBrain(SnapshotScene({}), prof), threading.Lock())
            oracle, lock = self.sessions[key]
        with lock:
            if req.role in ("planner", "executor", "verifier"):
                if not isinstance(extras.get("scene"), dict):
                    raise BadBrainRequest("the oracle needs the privileged scene snapshot in motormind.scene "
                                     "(set send_scene: true in the client's VLM config)")
                oracle.scene = SnapshotScene(extras["scene"])
            return oracle.respond(req)


class SceneOracle:
    """ONE OracleBrain for every client, reading one live PRIVILEGED scene (``RemoteScene``: a
    simulator's evaluator-only channel, sim/scene_channel.py). One scene is one
    episode: the ROS 2 role nodes are separate clients (sessions) of the same episode, and the
    Executor and Verifier must know the subgoals the Planner made. The clients send only their
    context (``send_context: true``), never a scene."""

    privileged = True
    name = "oracle"

    def __init__(self, scene, default_profile: str = "libero_panda"):
        self.scene = scene
        self.default_profile = default_profile
        self.oracle = None
        self._lock = threading.Lock()

    def respond_with(self, req: BrainRequest, extras: dict) -> BrainReply:
        from ..brains.oracle import OracleBrain
        from ..profile import load_profile
        with self._lock:
            if self.oracle is None:
                self.oracle = OracleBrain(self.scene, load_profile(extras.get("profile") or self.default_profile))
            return self.oracle.respond(req)


# -- the server ---------------------------------------------------------------------------------
def _estimate_tokens(chars: int) -> int:
    return int(math.ceil(chars / 4.0))


class BrainServer:
    """``BrainServer(brain).start()`` serves ``brain`` at ``server.url`` until ``close()``."""

    def __init__(self, brain, *, host: str = "127.0.0.1", port: int = 0, model: str = "motormind",
                 faults: FaultPlan | dict | None = None, on_event: Callable[..., None] | None = None,
                 api_key: str | None = None, text_style: str = "fenced", keep_bodies: int = 0,
                 quiet: bool = True, log_path: str | Path | None = None, max_log: int = 100000,
                 quirks: QuirkPlan | dict | None = None, family: str = "generic",
                 allow_hosts: tuple[str, ...] = (), sock=None, latency: LatencyPlan | dict | None = None):
        if text_style not in ("fenced", "raw"):
            raise ConfigError(f"text_style: must be 'fenced' or 'raw', got {text_style!r}")
        if family not in FAMILIES:
            raise ConfigError(f"family: must be one of {', '.join(FAMILIES)}, got {family!r}")
        self.brain = brain
        self.model = model
        self.family = family
        self.faults = faults if isinstance(faults, FaultPlan) or faults is None else FaultPlan.from_dict(faults)
        self.quirks = quirks if isinstance(quirks, QuirkPlan) or quirks is None else QuirkPlan.from_dict(quirks)
        self.latency = latency if isinstance(latency, LatencyPlan) or latency is None else \
            LatencyPlan.from_dict(latency)
        if self.latency is not None and not self.latency.active:
            self.latency = None
        self.in_flight = 0                               # chat requests being answered now (HTTP layer)
        self.peak_in_flight = 0                          # the most at once since start
        self.on_event = on_event or (lambda kind, **data: None)
        self.api_key = api_key
        self.text_style = text_style
        self.quiet = quiet
        self.log: deque = deque(maxlen=max_log)          # one entry per request, newest last
        self._log_fh = open(log_path, "a", buffering=1) if log_path else None
        self.bodies: deque = deque(maxlen=keep_bodies or None) if keep_bodies else deque(maxlen=0)
        self._n = 0
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self.names = served_names(host, allow_hosts)
        app = Guard(self._app(), self.names, lambda status, msg: _error(msg, "invalid_request_error"),
                    headers={"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        self._http_server = HttpServer(app, host, port, name="motormind-serve-brain", sock=sock)
        self.created = int(time.time())

    # -- lifecycle ------------------------------------------------------------------------------
    @property
    def host(self) -> str:
        return self._http_server.host

    @property
    def port(self) -> int:
        return self._http_server.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def start(self) -> "BrainServer":
        self._http_server.start()
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C (``motormind serve-brain``)."""
        self._http_server.serve_forever()

    def close(self) -> None:
        self._closing.set()             # slow answers stop waiting
        self._http_server.close()
        if self._log_fh:
            self._log_fh.close()
            self._log_fh = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.close()

    # -- answering ------------------------------------------------------------------------------
    def _respond(self, req: BrainRequest, extras: dict) -> BrainReply:
        if req.role in CHECK_SCHEMAS and not getattr(self.brain, "answers_checks", False):
            return self._look(req, extras)   # the camera checks: the emulated model looks at the pixels
        if hasattr(self.brain, "respond_with"):
            return self.brain.respond_with(req, extras)
        return self.brain.respond(req)

    def handle_chat(self, body: dict) -> tuple[int, dict, dict]:
        """(HTTP status, JSON body, extra headers) for one chat completion request."""
        t0 = time.time()
        with self._lock:
            self._n += 1
            n = self._n
        rid = f"chatcmpl-mm{n}-{uuid.uuid4().hex[:8]}"
        entry = {"n": n, "id": rid, "t_start": t0, "role": None, "fault": None, "status": None,
                 "attempt": 0, "images": 0}
        self.log.append(entry)
        try:
            code, obj, headers = self._chat(body, n, rid, entry)
            if code == 200 and self.latency is not None:      # awaited by the HTTP layer (_http)
                entry["latency_s"] = round(self.latency.delay(entry["role"] or "unknown"), 3)
                headers["x-motormind-latency-s"] = f"{entry['latency_s']:.3f}"
            return code, obj, headers
        finally:
            entry["t_end"] = time.time()
            if self._log_fh:
                with self._lock:
                    self._log_fh.write(json.dumps(entry) + "\n")
            if not self.quiet:
                print(f"[serve-brain] #{n} {entry['role']} attempt {entry['attempt']} -> {entry['status']}"
                      f"{' FAULT ' + entry['fault'] if entry['fault'] else ''} "
                      f"({entry['t_end'] - t0:.2f} s)", file=sys.stderr, flush=True)

    def _chat(self, body: dict, n: int, rid: str, entry: dict) -> tuple[int, dict, dict]:
        if body.get("stream"):
            entry["status"] = 400
            return 400, _error("streaming is not supported by this server", "invalid_request_error"), {}
        try:
            req, extras = request_from_body(body)
        except (ValueError, TypeError, AttributeError) as e:
            entry["status"] = 400
            return 400, _error(f"bad request: {e}", "invalid_request_error"), {}
        entry.update(role=req.role, attempt=len(req.history) // 2, images=extras["images_sent"])
        rf_type = (body.get("response_format") or {}).get("type", "text")
        fault, k = self.faults.choose(req.role) if self.faults else (None, 0)
        quirk, kq = (None, 0)
        if not fault and self.quirks:
            quirk, kq = self.quirks.choose(req.role, {"images": extras["images_sent"], "response_format": rf_type})
            kq = self.quirks.injection_index(req.role, kq) if quirk else 0
        headers = {"x-request-id": rid}
        if fault:
            entry["fault"] = fault
            headers["x-motormind-fault"] = fault
        if quirk:
            entry["quirk"] = quirk
            headers["x-motormind-quirk"] = quirk
        if quirk == "images_refused":
            code, err, what = refusal(kq)
            self._quirk_event(quirk, req, n, what)
            entry["status"] = code
            return code, err, headers
        if quirk == "images_ignored":
            self._quirk_event(quirk, req, n, f"{extras['images_sent']} image part(s) dropped before the model")
            req.images = {}
            extras["images_decoded"] = 0
        if fault in HTTP_FAULTS:
            code = HTTP_FAULTS[fault]
            self._fault_event(fault, req, n, k, f"HTTP {code}")
            entry["status"] = code
            if code == 429:
                headers["retry-after"] = f"{self.faults.retry_after_s:g}"
                return 429, _error("Rate limit reached for requests (injected fault)", "rate_limit_exceeded",
                                   "rate_limit_exceeded"), headers
            return 500, _error("The server had an error while processing your request (injected fault)",
                               "server_error"), headers
        if fault == "slow":
            self._fault_event(fault, req, n, k, f"answer held back {self.faults.slow_s:g} s")
            self._closing.wait(self.faults.slow_s)
        try:
            reply = self._respond(req, extras)
        except BadBrainRequest as e:
            entry["status"] = 400
            entry["error"] = str(e)
            return 400, _error(str(e), "invalid_request_error"), headers
        except Exception as e:  # noqa: BLE001 - a backend failure is a 500, logged, not a fault
            entry["status"] = 500
            entry["error"] = f"{type(e).__name__}: {e}"
            return 500, _error(f"backend error: {type(e).__name__}: {e}", "server_error"), headers
        text = reply.text
        if rf_type == "json_schema":
            try:
                validate(decode_json(text, "answer"), req.schema)     # strict: a hostile backend's answer
                entry["schema_ok"] = True                               # (3000 deep, 1e999) is logged, not raised
            except (CommandError, ResponseError) as e:
                entry["schema_ok"] = False
                entry["schema_error"] = str(e)[:300]
        if fault in TEXT_FAULTS:
            text, detail = self.faults.corrupt(fault, req.role, text, k)
            self._fault_event(fault, req, n, k, detail)
        if rf_type not in ("json_schema", "json_object") and self.text_style == "fenced":
            text = f"Here is my answer.\n```json\n{text}\n```"
        message, finish, billed = {"role": "assistant", "content": text}, "stop", None
        if quirk and quirk not in IMAGE_QUIRKS:
            message, finish, detail, billed = shape(quirk, kq, text, rf_type, int(extras.get("max_tokens") or 1024))
            self._quirk_event(quirk, req, n, detail)
        chars = len(req.system) + len(req.user) + sum(len(h["content"]) for h in req.history)
        said = len(message.get("content") or "") + len(message.get("reasoning_content") or "") + \
            len(message.get("reasoning") or "")
        usage = {"prompt_tokens": _estimate_tokens(chars) + self.image_tokens(req.images),
                 "completion_tokens": billed if billed is not None else _estimate_tokens(said)}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        usage["prompt_tokens_details"] = {"cached_tokens": self._cached_tokens(req.system + "\x00" + req.user)}
        entry["status"] = 200
        mm = {"source": getattr(reply, "brain", "?"), "privileged": bool(reply.privileged),
              "fault": fault, "quirk": quirk, "role": req.role, "images_received": extras["images_decoded"],
              "usage_estimated": True, "response_format": rf_type}
        if quirk == "images_ignored":      # a server that drops images does not say so
            mm.pop("images_received")
        out = {
            "id": rid, "object": "chat.completion", "created": int(time.time()), "model": self.model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish, "logprobs": None}],
            "usage": usage, "motormind": mm,
        }
        return 200, out, headers

    CACHE_BLOCK = 16          # tokens per cached block (vLLM's default block size)
    CACHE_PROMPTS = 64        # the recent prompts a prefix may be shared with

    def _cached_tokens(self, text: str) -> int:
        """The emulated prefix cache: the tokens of the longest prefix this prompt (system, then user text)
        shares with a recent one, in whole blocks, as vLLM's automatic prefix caching counts them and
        reports them (``usage.prompt_tokens_details.cached_tokens``, like OpenAI's). Estimated, as the
        prompt tokens are."""
        with self._lock:
            recent = getattr(self, "_recent", None)
            if recent is None:
                recent = self._recent = []
            best = 0
            for old in recent:
                n = min(len(old), len(text))
                k = next((i for i in range(n) if old[i] != text[i]), n)
                best = max(best, k)
            recent.append(text)
            del recent[:-self.CACHE_PROMPTS]
        return (int(best / 4.0) // self.CACHE_BLOCK) * self.CACHE_BLOCK

    def image_tokens(self, images: dict) -> int:
        """Prompt tokens for the images the emulated model received, by the family's rules
        (``generic``: 85 an image, OpenAI's low-detail price)."""
        total = 0
        for img in images.values():
            h, w = np.asarray(img).shape[:2]
            t = fit_image(self.family, w, h, max(w, h)).tokens      # the image as it came
            total += 85 if t is None else t
        return total

    def _look(self, req: BrainRequest, extras: dict) -> BrainReply:
        """The emulated model's answer to a camera check, from the pixels it received: the colour
        of each image (``probe``), or where the dot is (``point``), in the family's convention for
        coordinates (Qwen2.5-VL: absolute pixels of its resized image; the others: the 0..1000
        the prompt asks for)."""
        from ..brains.probe import find_dot, name_colour
        imgs = list(req.images.values())
        if req.role == "probe":
            n = max(extras.get("images_sent", 0), len(imgs))
            colours = [name_colour(im) for im in imgs] + ["none"] * (n - len(imgs))
            return BrainReply(json.dumps({"schema_version": 1, "colours": colours}), f"serve-brain:{self.family}")
        x, y = 500.0, 500.0                 # blind: a guess
        if imgs:
            h, w = np.asarray(imgs[0]).shape[:2]
            dot = find_dot(imgs[0])
            if dot is not None:
                if self.family == "qwen2.5-vl":
                    t = fit_image(self.family, w, h, max(w, h))
                    x, y = dot[0] * t.width / w, dot[1] * t.height / h
                else:
                    x, y = dot[0] / w * 1000.0, dot[1] / h * 1000.0
        return BrainReply(json.dumps({"schema_version": 1, "x": round(x, 1), "y": round(y, 1)}),
                          f"serve-brain:{self.family}")

    def _quirk_event(self, quirk: str, req: BrainRequest, n: int, detail: str) -> None:
        try:
            self.on_event("serve_quirk", quirk=quirk, role=req.role, request=n,
                          attempt=len(req.history) // 2, detail=detail)
        except Exception:  # noqa: BLE001 - a recorder problem must not break the answer
            pass

    def _fault_event(self, fault: str, req: BrainRequest, n: int, k: int, detail: str) -> None:
        try:
            self.on_event("serve_fault", fault=fault, role=req.role, request=n, role_request=k,
                          attempt=len(req.history) // 2, detail=detail)
        except Exception:  # noqa: BLE001 - a recorder problem must not break the answer
            pass

    def models(self) -> dict:
        return {"object": "list", "data": [{"id": self.model, "object": "model", "created": self.created,
                                            "owned_by": "motormind"}]}

    # -- HTTP -----------------------------------------------------------------------------------
    def _app(self):
        """The Starlette app: one route that dispatches as the old hand-written server did
        (a trailing slash and a query string are ignored; ``/v1`` may be left out)."""
        return Starlette(routes=[Route("/{path:path}", self._http, methods=["GET", "HEAD", "POST"])])

    def _unauthorised(self, request) -> bool:
        return bool(self.api_key) and request.headers.get("authorization", "") != f"Bearer {self.api_key}"

    async def _http(self, request):
        path = request.url.path.rstrip("/")
        close = {"Connection": "close"}                   # a body left unread: the connection ends
        if request.method in ("GET", "HEAD"):
            if path == "/health":
                return Response(b"ok", media_type="text/plain")
            if path in ("/stats", "/v1/stats"):
                return _reply(200, self.stats())
            if self._unauthorised(request):
                return _reply(401, _error("invalid API key", "invalid_request_error", "invalid_api_key"))
            if path in ("/v1/models", "/models"):
                return _reply(200, self.models())
            if path.startswith("/v1/models/") and path[len("/v1/models/"):] == self.model:
                return _reply(200, self.models()["data"][0])
            return _reply(404, _error(f"no route {show(request.url.path)}", "invalid_request_error", "not_found"))
        if self._unauthorised(request):
            return _reply(401, _error("invalid API key", "invalid_request_error", "invalid_api_key"), close)
        if path not in ("/v1/chat/completions", "/chat/completions"):
            return _reply(404, _error(f"no route {show(request.url.path)}", "invalid_request_error", "not_found"),
                          close)
        try:
            raw = await read_body(request, MAX_BODY, BODY_TIMEOUT_S)
        except HttpError as e:
            return _reply(e.status, _error(str(e), "invalid_request_error"), close)
        except Disconnected:                              # cut short: nothing is answered from it
            return _reply(400, _error("body: the client hung up before the body was complete",
                                      "invalid_request_error"), close)
        with self._lock:
            self.in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        try:
            code, obj, headers = await run_in_threadpool(self._post_chat, raw)   # decoding MBs of images: off the loop
            delay = float(headers.get("x-motormind-latency-s", 0) or 0)
            if delay > 0:
                await asyncio.sleep(delay)                # the emulated model's latency: no thread held
        finally:
            with self._lock:
                self.in_flight -= 1
        return _reply(code, obj, headers)

    def stats(self) -> dict:
        """What ``GET /stats`` answers: chat requests so far, in flight now and at most at once."""
        with self._lock:
            return {"requests": self._n, "in_flight": self.in_flight, "peak_in_flight": self.peak_in_flight,
                    "latency": self.latency.describe() if self.latency else None}

    def _post_chat(self, raw: bytes) -> tuple[int, dict, dict]:
        try:
            body = decode_body(raw or b"{}", "body", MAX_BODY)
            if not isinstance(body, dict):
                raise HttpError(400, f"body: must be a JSON object, got {type(body).__name__}")
        except HttpError as e:
            return 400, _error(f"body is not valid JSON: {e}", "invalid_request_error"), {}
        if self.bodies.maxlen:
            self.bodies.append(body)
        return self.handle_chat(body)


def _reply(code: int, obj, headers: dict | None = None) -> Response:
    return Response(json.dumps(obj).encode(), code, headers=headers, media_type="application/json")


def _error(message: str, typ: str, code: str | None = None) -> dict:
    return {"error": {"message": message, "type": typ, "param": None, "code": code}}
