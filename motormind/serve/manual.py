"""The manual backend of serve-brain: a person, or any agent, answers as the VLM through a folder.

    motormind serve-brain --backend manual --queue DIR [--auto monitor=no-cancel,memory=none]
    motormind run --brain openai --vlm manual                    # in-process (configs/vlm/manual.yaml)

Each chat request the server receives becomes one folder under the queue folder, written whole
(built under a dot-name, then renamed), and named ``NNNN-ROLE`` (``NNNN-ROLE-repairK`` for the
role's repair round K). It holds what the model would get, and nothing else:

    request.json    the role, the attempt, when it was asked, how long the answerer has
                    (``answer_within_s``: the client's timeout for the role), what the episode has
                    left (``budget``: steps and wall time, sent by the client, non-privileged), the
                    images' files, the answer's file name
    messages.json   the chat messages exactly as sent, each image part's data URL replaced by the
                    file it was saved to (``images/CAMERA.png``)
    messages.md     the same messages to read: system, user (text, then each image), and for a
                    repair round the earlier answer and the repair request, in order
    images/         every image as it was sent (after sizing), named after its camera
    schema.json     the JSON schema the answer must match
    status.json     written by the server when the request ends: answered, expired, closed

``DIR/waiting.json`` (rewritten atomically) lists the requests waiting for an answer, and says
``"closed": true`` once the episode's brain has closed (no request will come; never the outcome).

The answer is the file ``answer.json`` in the request's folder: the text a model would have said
(one JSON object; a ``<think>`` block before it is stripped as a reasoning model's is). It must
appear WHOLE: write ``answer.json.tmp`` (any other name) and rename it to ``answer.json``
(``answer()`` below does). The server reads no other name, and reads ``answer.json`` only once it
has seen the same size and modification time at two polls in a row. What it reads goes back as the
model's message; everything after that is the openai brain's path for any model (JSON extraction,
thinking stripped, schema validation, the one repair round, the role's fail-safe). A request not
answered within ``answer_within_s`` ends as a slow server's does: the client times out (and
retries, if its config says so: a retry is a new folder); the folder is marked ``expired`` and a
late answer is never read.

Fixed answers (``auto``, per role, off by default) are answered at once and never reach the folder:
``monitor=no-cancel``, ``memory=none``, ``probe=look`` (the colours read from the pixels, as
serve-brain's emulated model does). Every reply names who gave it (``manual`` or ``auto:VALUE``),
which the openai brain records per role (``answered_by``).

Nothing privileged is written: the server is given only the request body (the brain's config has
``send_context`` and ``send_scene`` off; the registry refuses them with ``serve: manual``), and the
folder holds the messages, the images, the schema and the budget, not the ``motormind`` context.

``waiting(queue)``, ``read_request(folder)``, ``read_image(folder, file)`` and ``answer(folder, text)``
are the small API an answering program (or the console, ``motormind/console/manual.py``) uses; they
import nothing heavy. ``answer`` refuses a request that has ended or whose time to answer has passed.
"""
from __future__ import annotations

import base64
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Callable

from ..brains.base import BrainReply, BrainRequest
from ..errors import ConfigError

ANSWER = "answer.json"
INDEX = "waiting.json"
MAX_ANSWER_BYTES = 1 << 20       # an answer longer than this is cut here (it then fails to parse: repaired)
GRACE_S = 1.0                    # the server waits this long past the client's timeout: the client gives up first
_IMAGE_NAME = re.compile(r"Image '(.+)':\s*$")
_MIME_EXT = {"image/png": "png", "image/jpeg": "jpg", "image/jpg": "jpg", "image/webp": "webp"}

# the fixed answers a role may be given instead of the answerer's (``auto``)
AUTO = {
    "monitor": {"no-cancel": {"schema_version": 1, "cancel": False, "reason": "no cancel (fixed answer)"}},
    "memory": {"none": {"schema_version": 1, "summary": "", "facts": []}},
    "probe": {"look": None},     # computed from the images (``_look``)
}


def parse_auto(spec, where: str = "auto") -> dict:
    """``"monitor=no-cancel,memory=none"`` (or a mapping, or a list of such items) -> {role: value},
    checked against ``AUTO``; an error names ``where`` and the role or value."""
    if spec is None or spec == "" or spec == {}:
        return {}
    items: list[tuple[str, object]] = []
    if isinstance(spec, dict):
        items = list(spec.items())
    else:
        for part in ([spec] if isinstance(spec, str) else list(spec)):
            for item in str(part).split(","):
                if not item.strip():
                    continue
                role, eq, value = item.partition("=")
                if not eq:
                    raise ConfigError(f"{where}: {item.strip()!r}: expected ROLE=ANSWER (e.g. monitor=no-cancel)")
                items.append((role.strip(), value.strip()))
    out: dict = {}
    for role, value in items:
        if role not in AUTO:
            raise ConfigError(f"{where}.{role}: no fixed answer for this role (roles with one: {', '.join(AUTO)})")
        if value not in AUTO[role]:
            raise ConfigError(f"{where}.{role}: unknown fixed answer {value!r} (known: {', '.join(AUTO[role])})")
        out[role] = value
    return out


# -- writing files whole --------------------------------------------------------------------------
def _write_whole(path: Path, data: bytes | str) -> None:
    """``path`` appears with all of ``data`` or not at all (a temporary name, then a rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    with open(tmp, "wb") as fh:
        fh.write(data.encode() if isinstance(data, str) else data)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def _json(obj) -> str:
    return json.dumps(obj, indent=2, ensure_ascii=False) + "\n"


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(name)).strip("._") or "image"


# -- the answerer's API ---------------------------------------------------------------------------
def waiting(queue: str | Path) -> list[dict]:
    """The requests waiting for an answer under ``queue``: its own ``waiting.json`` and those of its
    subfolders (one per episode), oldest first; each entry with ``path``, the request's folder."""
    root = Path(queue)
    out: list[dict] = []
    for index in [root / INDEX, *sorted(root.glob(f"*/{INDEX}"))]:
        try:
            data = json.loads(index.read_text())
        except (OSError, ValueError):
            continue
        for e in data.get("waiting", []):
            out.append({**e, "path": str(index.parent / e["folder"])})
    return sorted(out, key=lambda e: (e.get("created", 0), e["path"]))


def read_request(folder: str | Path) -> dict:
    """A request folder's ``request.json`` with its ``messages`` (messages.json), ``schema`` and
    ``state`` (waiting, answered, expired, closed) added."""
    f = Path(folder)
    req = json.loads((f / "request.json").read_text())
    req["messages"] = json.loads((f / "messages.json").read_text())
    req["schema"] = json.loads((f / "schema.json").read_text())
    try:
        req["state"] = json.loads((f / "status.json").read_text()).get("state", "waiting")
    except (OSError, ValueError):
        req["state"] = "answered" if (f / ANSWER).exists() else "waiting"
    return req


def answer(folder: str | Path, text) -> Path:
    """Answer the request in ``folder`` with ``text`` (a string as a model would say it, or a JSON
    object), written whole. Refused when the request was already answered or has ended."""
    f = Path(folder)
    if not (f / "request.json").exists():
        raise ValueError(f"{f}: not a request folder (no request.json)")
    if (f / ANSWER).exists():
        raise ValueError(f"{f}: already answered ({ANSWER} exists)")
    try:
        state = json.loads((f / "status.json").read_text()).get("state")
    except (OSError, ValueError):
        state = None
    if state and state != "waiting":
        raise ValueError(f"{f}: the request has ended ({state}); an answer now is never read")
    try:
        by = json.loads((f / "request.json").read_text()).get("answer_by_unix")
    except (OSError, ValueError):
        by = None
    if isinstance(by, (int, float)) and time.time() > by:     # the client has given up: it would never be read
        raise ValueError(f"{f}: the request has ended (expired: its {ANSWER} was due {time.time() - by:.1f} s "
                         f"ago, when the role timed out); an answer now is never read")
    body = text if isinstance(text, str) else json.dumps(text)
    _write_whole(f / ANSWER, body)
    return f / ANSWER


def read_image(folder: str | Path, file: str) -> bytes:
    """The bytes of one of the request's images, ``file`` as ``request.json`` lists it
    (``images/front.png``); a file it does not list is refused (ValueError)."""
    f = Path(folder)
    listed = [i.get("file") for i in json.loads((f / "request.json").read_text()).get("images") or []]
    if file not in listed:
        raise ValueError(f"{f}: {file!r} is not one of the request's images ({', '.join(map(str, listed)) or 'none'})")
    return (f / file).read_bytes()


# -- the backend ----------------------------------------------------------------------------------
class ManualBrain:
    """serve-brain's backend that writes each request to ``queue`` and waits for its answer file."""

    privileged = False
    name = "manual"
    answers_checks = True            # the camera probe and the coordinate check go to the answerer too

    def __init__(self, queue: str | Path, auto=None, on_event: Callable[..., None] | None = None,
                 poll_s: float = 0.1, max_wait_s: float | None = None):
        self.queue = Path(queue)
        self.auto = parse_auto(auto)
        self.on_event = on_event or (lambda kind, **data: None)
        self.poll_s = float(poll_s)
        self.max_wait_s = max_wait_s
        self.queue.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._waiting: dict[str, dict] = {}
        self._n = max([int(m.group(1)) for p in self.queue.iterdir()
                       if (m := re.match(r"(\d+)-", p.name))] + [0])     # a reused queue goes on counting
        self.answered = 0
        self.expired = 0
        self._index()

    # the server calls this (``BrainServer._respond``) with the body's extras
    def respond_with(self, req: BrainRequest, extras: dict) -> BrainReply:
        fixed = self.auto.get(req.role)
        if fixed:
            text = self._look(req, extras) if fixed == "look" else json.dumps(AUTO[req.role][fixed])
            self._event("manual_answer", role=req.role, by=f"auto:{fixed}", folder=None, wait_s=0.0)
            return BrainReply(text, f"auto:{fixed}")
        folder, entry = self._write(req, extras)
        text = self._wait(folder, entry)
        return BrainReply(text, "manual")

    def respond(self, req: BrainRequest) -> BrainReply:
        return self.respond_with(req, {})

    def close(self) -> None:
        """Every request still waiting ends (``closed``); the server's threads are released.
        ``waiting.json`` then says ``"closed": true``: no request will come (an answerer's signal to
        stop; it says nothing of the outcome, which is privileged)."""
        self._closed.set()
        with self._lock:
            self._index()

    # -- a request's folder ---------------------------------------------------------------------
    def _write(self, req: BrainRequest, extras: dict) -> tuple[Path, dict]:
        attempt = len(req.history) // 2
        with self._lock:
            self._n += 1
            n = self._n
        rid = f"{n:04d}-{_safe(req.role)}" + (f"-repair{attempt}" if attempt else "")
        now = time.time()
        timeout = extras.get("timeout_s")
        timeout = float(timeout) if isinstance(timeout, (int, float)) and not isinstance(timeout, bool) \
            and timeout > 0 else None
        limit = timeout if timeout is not None else self.max_wait_s
        tmp = self.queue / f".{rid}.partial"
        (tmp / "images").mkdir(parents=True, exist_ok=True)
        messages, images = self._messages(req, extras, tmp / "images")
        budget = extras.get("budget") if isinstance(extras.get("budget"), dict) else None
        request = {"schema_version": 1, "id": rid, "role": req.role, "attempt": attempt,
                   "created_unix": round(now, 3),
                   "created": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(now)),
                   "answer_within_s": limit, "answer_by_unix": round(now + limit, 3) if limit else None,
                   "budget": budget, "images": images, "messages": "messages.json", "readable": "messages.md",
                   "schema": "schema.json", "answer": ANSWER,
                   "how_to_answer": f"write the answer (one JSON object matching schema.json) to "
                                    f"{ANSWER}.tmp, then rename it to {ANSWER}"}
        _write_whole(tmp / "request.json", _json(request))
        _write_whole(tmp / "messages.json", _json(messages))
        _write_whole(tmp / "messages.md", _markdown(rid, req.role, attempt, messages))
        _write_whole(tmp / "schema.json", _json(req.schema))
        folder = self.queue / rid
        os.replace(tmp, folder)          # the folder appears whole
        entry = {"id": rid, "folder": rid, "role": req.role, "attempt": attempt, "created": round(now, 3),
                 "answer_by_unix": request["answer_by_unix"],
                 "deadline": time.monotonic() + limit + (GRACE_S if timeout is not None else 0.0) if limit else None}
        with self._lock:
            self._waiting[rid] = entry
            self._index()
        self._event("manual_request", role=req.role, attempt=attempt, folder=str(folder),
                    answer_within_s=limit, images=[i["file"] for i in images])
        return folder, entry

    def _messages(self, req: BrainRequest, extras: dict, image_dir: Path) -> tuple[list, list]:
        """The messages as sent, with each image saved as sent (the data URL's bytes) and its part
        pointing at the file; rebuilt from ``req`` when the server kept no body (a direct call)."""
        raw = extras.get("messages")
        if not isinstance(raw, list):
            raw = _rebuild(req)
        out, images, label = [], [], None
        for m in raw:
            if not isinstance(m, dict):
                continue
            content = m.get("content")
            if not isinstance(content, list):
                out.append({"role": m.get("role", "user"), "content": content if isinstance(content, str) else ""})
                continue
            parts = []
            for p in content:
                if not isinstance(p, dict):
                    continue
                if p.get("type") == "text":
                    parts.append({"type": "text", "text": str(p.get("text", ""))})
                    mm = _IMAGE_NAME.match(str(p.get("text", "")).strip())
                    label = mm.group(1) if mm else None
                elif p.get("type") == "image_url":
                    iu = p.get("image_url") or {}
                    camera = label or f"image{len(images)}"
                    name, label = _safe(camera), None
                    data, ext = _decode(iu.get("url", ""))
                    fname = f"{name}.{ext}"
                    k = 2
                    while (image_dir / fname).exists():
                        fname = f"{name}_{k}.{ext}"
                        k += 1
                    if data is not None:
                        _write_whole(image_dir / fname, data)
                    info = {"camera": camera, "file": f"images/{fname}", "bytes": len(data or b"")}
                    info.update(_png_size(data))
                    images.append(info)
                    part = {"type": "image_url", "image_url": {"url": f"images/{fname}"}}
                    if "detail" in iu:
                        part["image_url"]["detail"] = iu["detail"]
                    parts.append(part)
            out.append({"role": m.get("role", "user"), "content": parts})
        return out, images

    def _wait(self, folder: Path, entry: dict) -> str:
        """The answer's text once ``answer.json`` is whole; TimeoutError past the deadline."""
        path, seen, t0 = folder / ANSWER, None, time.monotonic()
        while True:
            try:
                st = path.stat()
                mark = (st.st_size, st.st_mtime_ns)
                if mark == seen:
                    with open(path, "rb") as fh:
                        data = fh.read(MAX_ANSWER_BYTES)
                    self._end(folder, entry, "answered", wait_s=round(time.monotonic() - t0, 3))
                    with self._lock:
                        self.answered += 1
                    self._event("manual_answer", role=entry["role"], by="manual", folder=str(folder),
                                wait_s=round(time.monotonic() - t0, 3))
                    return data.decode("utf-8", errors="replace")
                seen = mark
            except FileNotFoundError:
                seen = None
            if entry["deadline"] is not None and time.monotonic() > entry["deadline"]:
                self._end(folder, entry, "expired", wait_s=round(time.monotonic() - t0, 3))
                with self._lock:
                    self.expired += 1
                self._event("manual_expired", role=entry["role"], folder=str(folder),
                            waited_s=round(time.monotonic() - t0, 3))
                raise TimeoutError(f"manual: no answer in {folder.name} within {entry.get('answer_by_unix')}")
            if self._closed.wait(self.poll_s):
                self._end(folder, entry, "closed", wait_s=round(time.monotonic() - t0, 3))
                raise RuntimeError("manual: the server closed before the request was answered")

    def _end(self, folder: Path, entry: dict, state: str, **info) -> None:
        _write_whole(folder / "status.json", _json({"state": state, "ended_unix": round(time.time(), 3), **info}))
        with self._lock:
            self._waiting.pop(entry["id"], None)
            self._index()

    def _index(self) -> None:
        """Rewrite ``waiting.json`` (whole) from the requests waiting now. Call with the lock held
        (or before any thread runs)."""
        items = [{k: v for k, v in e.items() if k != "deadline"} for e in self._waiting.values()]
        _write_whole(self.queue / INDEX, _json({"schema_version": 1, "updated_unix": round(time.time(), 3),
                                                "waiting": items, "closed": self._closed.is_set()}))

    def _look(self, req: BrainRequest, extras: dict) -> str:
        """``probe=look``: the colour of each image, read from its pixels."""
        from ..brains.probe import name_colour
        imgs = list(req.images.values())
        n = max(int(extras.get("images_sent", 0) or 0), len(imgs))
        colours = [name_colour(im) for im in imgs] + ["none"] * (n - len(imgs))
        return json.dumps({"schema_version": 1, "colours": colours})

    def _event(self, kind: str, **data) -> None:
        try:
            self.on_event(kind, **data)
        except Exception:  # noqa: BLE001 - a recorder problem must not lose an answer
            pass


def _decode(url: str) -> tuple[bytes | None, str]:
    m = re.match(r"data:(image/[\w.+-]+);base64,(.*)$", url or "", flags=re.S)
    if not m:
        return None, "bin"
    try:
        return base64.b64decode(m.group(2)), _MIME_EXT.get(m.group(1), m.group(1).split("/")[1])
    except (ValueError, TypeError):
        return None, "bin"


def _png_size(data: bytes | None) -> dict:
    """Width and height from a PNG's header ({} for another format)."""
    if data and data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) >= 24:
        return {"width": int.from_bytes(data[16:20], "big"), "height": int.from_bytes(data[20:24], "big")}
    return {}


def _rebuild(req: BrainRequest) -> list:
    """The messages the openai brain sends for ``req`` (images as PNG), for a request with no body."""
    msgs: list = [{"role": "system", "content": req.system}]
    if req.images:
        from ..brains.openai_brain import image_data_url
        content: list = [{"type": "text", "text": req.user}]
        for name, img in req.images.items():
            content += [{"type": "text", "text": f"Image '{name}':"},
                        {"type": "image_url", "image_url": {"url": image_data_url(img)}}]
        msgs.append({"role": "user", "content": content})
    else:
        msgs.append({"role": "user", "content": req.user})
    msgs += [{"role": h.get("role", "user"), "content": h.get("content", "")} for h in req.history]
    return msgs


def _markdown(rid: str, role: str, attempt: int, messages: list) -> str:
    """The messages to read, in order; images as links to their files."""
    lines = [f"# {rid}: {role}" + (f", repair round {attempt}" if attempt else ""), ""]
    for m in messages:
        lines += [f"## {m['role']}", ""]
        content = m["content"]
        if isinstance(content, str):
            lines += [content, ""]
            continue
        for p in content:
            if p["type"] == "text":
                lines += [p["text"], ""]
            else:
                f = p["image_url"]["url"]
                lines += [f"![{Path(f).stem}]({f})", ""]
    return "\n".join(lines)
