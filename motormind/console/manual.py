"""The manual VLM endpoint's requests on the console (docs/manual-vlm.md, docs/console.md).

When the episode the console watches has its VLM answered by hand (``configs/vlm/manual.yaml``:
each request a folder in a queue), the console lists the requests waiting there (role, age, time
left, what the episode had left) and lets the operator in control open one (its messages as sent,
its images, its schema) and answer it, for any role. The answer is written into the request's
folder, and from there takes the path any model's answer takes (JSON extraction, schema
validation, the repair round, the fail-safe).

The queue is read and answered only through ``motormind.serve.manual``'s API (``waiting``,
``read_request``, ``read_image``, ``answer``). A request is named by its folder's path relative to
the queue root (``0004-planner``, or ``EPISODE/0004-planner`` under a root of several episodes'
queues); a name that is not such a folder under the root is refused.

    queue = ManualQueue(on_change)     # on_change(snapshot) when the list changes (and each second
    queue.watch(DIR)                   # while something waits: its age and time left move)
    queue.snapshot()  queue.open(key)  queue.answer(key, text)
"""
from __future__ import annotations

import base64
import re
import threading
import time
from pathlib import Path
from typing import Callable

from ..errors import CommandError
from ..serve import manual as api
from ..strict_json import decode_json, show

POLL_S = 0.25              # how often the queue's index is read
REFRESH_S = 1.0            # while requests wait, the list is pushed again this often (age, time left)
_KEY = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}(/[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127})?$")
_MIME = {"png": "image/png", "jpg": "image/jpeg", "webp": "image/webp"}
NOT_USED = "this episode's VLM is not the manual endpoint"


class QueueError(Exception):
    """A refused open or answer: the message names the field and the reason; ``status`` the HTTP code."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


class ManualQueue:
    def __init__(self, on_change: Callable[[dict], None] | None = None, poll_s: float = POLL_S,
                 refresh_s: float = REFRESH_S, clock: Callable[[], float] = time.time):
        self.on_change = on_change or (lambda snap: None)
        self.poll_s, self.refresh_s, self.clock = float(poll_s), float(refresh_s), clock
        self._lock = threading.Lock()
        self.root: Path | None = None
        self.note = NOT_USED
        self._budgets: dict[str, dict] = {}       # key -> the request's budget (read once)
        self._listed: tuple = ()                  # (the keys listed, the note) at the last push
        self._pushed = 0.0
        self._snap: dict = self._empty()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _empty(self) -> dict:
        return {"queue": str(self.root) if self.root else None, "note": self.note, "waiting": [],
                "checked_unix": round(self.clock(), 3)}

    # -- what it watches ------------------------------------------------------------------------
    def watch(self, root, note: str = "") -> None:
        """Watch the queue ``root`` (one episode's queue, or a root of several); None: none
        (``note`` says why, shown on the page)."""
        with self._lock:
            self.root = Path(root).resolve() if root else None
            self.note = note or ("" if root else NOT_USED)
            self._budgets.clear()
            self._listed, self._pushed = (), 0.0
        if root and self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="motormind-console-manual", daemon=True)
            self._thread.start()
        self.poll(force=True)

    def close(self) -> None:
        self._stop.set()
        t = self._thread
        if t is not None and t is not threading.current_thread():
            t.join(5.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.poll_s):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - a queue being rewritten is read again next poll
                pass

    # -- the list -------------------------------------------------------------------------------
    def poll(self, force: bool = False) -> dict:
        """Read the queue's index; push (``on_change``) when the list changed, or while something
        waits every ``refresh_s``. -> the snapshot."""
        with self._lock:
            root, note = self.root, self.note
        now = self.clock()
        items = []
        if root is not None and not root.is_dir():
            note = note or f"the queue folder {root} does not exist here (yet): its requests appear once it does"
        elif root is not None:
            for e in api.waiting(root):
                key = self._key(root, e.get("path", ""))
                if key is None:
                    continue
                items.append(self._item(key, e, now))
        snap = {"queue": str(root) if root else None, "note": note, "waiting": items, "checked_unix": round(now, 3)}
        keys = tuple(i["id"] for i in items)
        with self._lock:
            if root != self.root:                 # watch() changed it meanwhile: its own poll pushes
                return snap
            self._snap = snap
            changed = force or (keys, note) != self._listed or (items and now - self._pushed >= self.refresh_s)
            if changed:
                self._listed, self._pushed = (keys, note), now
                for k in [k for k in self._budgets if k not in keys]:
                    del self._budgets[k]
        if changed:
            self.on_change(snap)
        return snap

    def _item(self, key: str, e: dict, now: float) -> dict:
        if key not in self._budgets:
            try:
                self._budgets[key] = api.read_request(self.root / key).get("budget") or {}
            except (OSError, ValueError):
                self._budgets[key] = {}
        created, by = e.get("created"), e.get("answer_by_unix")
        return {"id": key, "role": e.get("role", "?"), "attempt": e.get("attempt", 0),
                "created_unix": created, "answer_by_unix": by,
                "age_s": round(now - created, 1) if isinstance(created, (int, float)) else None,
                "time_left_s": round(by - now, 1) if isinstance(by, (int, float)) else None,
                "budget": self._budgets[key]}

    @staticmethod
    def _key(root: Path, path: str) -> str | None:
        try:
            rel = Path(path).resolve().relative_to(root)
        except ValueError:
            return None
        key = rel.as_posix()
        return key if _KEY.match(key) else None

    def snapshot(self) -> dict:
        with self._lock:
            return dict(self._snap)

    # -- one request ----------------------------------------------------------------------------
    def folder(self, key) -> Path:
        """The folder of the request named ``key`` (a path relative to the queue root)."""
        with self._lock:
            root = self.root
        if root is None:
            raise QueueError(f"id: no manual VLM queue is watched here ({self.note or NOT_USED})", 404)
        if not isinstance(key, str) or not _KEY.match(key) or ".." in key.split("/"):
            raise QueueError(f"id: {show(key)} does not name a request (a folder such as 0004-planner)", 404)
        f = root / key
        if not (f / "request.json").is_file():
            raise QueueError(f"id: no request {key!r} in the queue", 404)
        return f

    def open(self, key) -> dict:
        """The request as the model would get it: its messages in order (each image part pointing at
        an entry of ``images``), its images (PNG data URLs, as sent), its schema, its budget, its
        state and time left."""
        f = self.folder(key)
        try:
            req = api.read_request(f)
        except (OSError, ValueError) as e:
            raise QueueError(f"id: {key}: the request cannot be read ({type(e).__name__}: {e})", 409) from None
        images = []
        for im in req.get("images") or []:
            file = str(im.get("file", ""))
            ext = file.rsplit(".", 1)[-1].lower()
            try:
                data = api.read_image(f, file)
                url = f"data:{_MIME.get(ext, 'application/octet-stream')};base64," + base64.b64encode(data).decode()
            except (OSError, ValueError):
                url = ""
            images.append({**{k: im.get(k) for k in ("camera", "file", "width", "height", "bytes")}, "url": url})
        by = req.get("answer_by_unix")
        now = self.clock()
        return {"id": key, "role": req.get("role"), "attempt": req.get("attempt", 0), "state": req.get("state"),
                "created": req.get("created"), "answer_within_s": req.get("answer_within_s"),
                "time_left_s": round(by - now, 1) if isinstance(by, (int, float)) else None,
                "budget": req.get("budget") or {}, "messages": req.get("messages") or [], "images": images,
                "schema": req.get("schema")}

    def answer(self, key, text) -> dict:
        """Write ``text`` (JSON text, or an object) as the request's answer, once it is checked to be
        one JSON object (the strict decoder a model's batch meets). Refused, with the reason, when
        the request has been answered, has expired or has ended."""
        f = self.folder(key)
        if isinstance(text, (dict, list)):
            import json
            text = json.dumps(text)
        if not isinstance(text, str) or not text.strip():
            raise QueueError("answer: the role's answer, one JSON object, is required")
        try:
            obj = decode_json(text, "answer")
        except CommandError as e:
            msg = str(e)
            raise QueueError(msg if msg.startswith("answer") else f"answer: {msg}") from None
        if not isinstance(obj, dict):
            raise QueueError(f"answer: one JSON object is expected (the role's schema is an object), got "
                             f"{type(obj).__name__}")
        try:
            role = api.read_request(f).get("role", "?")
            api.answer(f, text)
        except (OSError, ValueError) as e:
            raise QueueError(f"id: {str(e).replace(str(f), key)}", 409) from None
        self.poll(force=True)
        return {"id": key, "role": role}
