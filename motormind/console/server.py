"""The console's web server: the page, its state as JSON and as a live stream, camera frames, and
the operator's actions. A Starlette app under uvicorn (motormind/webserver.py: the stack, its
framing and timeouts, the Host and Origin checks).

    GET  /                      the console page (read-only until a token is given)
    GET  /api/state             the whole view as JSON
    GET  /api/stream            Server-Sent Events: the view, pushed on every change (<= 10 per s)
    GET  /api/frame/<camera>    the latest frame of that camera (JPEG)
    POST /api/action/<name>     an operator action; JSON body (at most MAX_BODY bytes, strictly
                                decoded); headers X-MotorMind-Token (required), X-MotorMind-Control
                                (the control key this server issued, see below), X-MotorMind-Name
                                (shown to all)

Binds 127.0.0.1 unless told otherwise, and answers only to the names it is bound to (a rebound DNS
name is refused, ``webserver.served_names``). Without the token (printed at start) every POST is
refused with 401 and the page stays a read-only view; such refusals are recorded, at most
``REFUSALS_PER_MIN`` a minute, each bounded in size (the rest are counted).

Control: one operator at a time (``desk.OperatorDesk``). The server, not the browser, names who
that is: an action taken with no control key gets a fresh identity, and when that action makes it
the holder (the first action when nobody holds control, or an explicit claim) the answer carries
``"control": KEY``. KEY is ``<id>.<mac>``: the page sends it back as X-MotorMind-Control; the id is
what the token-less state shows as the holder, the MAC (an HMAC under a secret of this server's
process) is never shown, so knowing the token and reading the state is not enough to act as the
holder: one has to take control, which every viewer sees.
"""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import secrets
import threading
import time
from importlib import resources

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from ..record import json_default
from ..strict_json import show
from ..webserver import Disconnected, Guard, HttpError, HttpServer, decode_body, read_body, served_names
from .runtime import ActionError, Runtime

_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/static/console.js": ("console.js", "text/javascript; charset=utf-8"),
           "/static/console.css": ("console.css", "text/css; charset=utf-8")}
PAGE_CSP = ("default-src 'self'; img-src 'self' blob: data:; style-src 'self'; script-src 'self'; "
            "connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
MAX_BODY = 64 * 1024          # bytes of an action's body
BODY_TIMEOUT_S = 10.0         # an action's body must arrive within this
REFUSALS_PER_MIN = 20         # refused requests recorded a minute (the rest are counted)
SHOWN_CHARS = 60              # of a refused request's path or name, in the record


def _static(name: str) -> bytes:
    return resources.files("motormind.console.static").joinpath(name).read_bytes()


def _error(status: int, message: str) -> dict:
    return {"ok": False, "error": message}


def _json(status: int, obj, headers: dict | None = None) -> Response:
    return Response(json.dumps(obj, default=json_default).encode(), status, headers=headers,
                    media_type="application/json")


class ControlKeys:
    """The control keys this server issues: ``<id>.<mac>``, checked without keeping a list."""

    def __init__(self):
        self._secret = secrets.token_bytes(32)

    def _mac(self, cid: str) -> str:
        return hmac.new(self._secret, cid.encode(), hashlib.sha256).hexdigest()[:32]

    def issue(self) -> tuple[str, str]:
        cid = secrets.token_hex(6)
        return cid, f"{cid}.{self._mac(cid)}"

    def client(self, key: str | None) -> str | None:
        """The id a key was issued to, or None (absent, malformed, or not issued here)."""
        cid, _, mac = (key or "").strip().partition(".")
        if not cid or len(cid) > 32 or not hmac.compare_digest(mac.encode(), self._mac(cid).encode()):
            return None
        return cid


class _Refusals:
    """Records refused requests, at most ``per_min`` a minute; the others are counted and the count
    goes with the next one recorded."""

    def __init__(self, record, per_min: int = REFUSALS_PER_MIN, clock=time.monotonic):
        self.record = record
        self.per_min = per_min
        self.clock = clock
        self._lock = threading.Lock()
        self._window = (float("-inf"), 0)    # (start of this minute, refusals recorded in it)
        self.suppressed = 0

    def __call__(self, kind: str, **data) -> None:
        now = self.clock()
        with self._lock:
            start, n = self._window
            if now - start >= 60.0:
                start, n = now, 0
            if n >= self.per_min:
                self._window = (start, n)
                self.suppressed += 1
                return
            self._window = (start, n + 1)
            extra, self.suppressed = ({"suppressed": self.suppressed} if self.suppressed else {}), 0
        try:
            self.record(kind, **data, **extra)
        except Exception:  # noqa: BLE001 - the refusal stands even if recording fails
            pass


class ConsoleServer:
    def __init__(self, runtime: Runtime, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                 push_hz: float = 10.0, allow_hosts: tuple[str, ...] = (), head_timeout_s: float = 10.0,
                 body_timeout_s: float = BODY_TIMEOUT_S, sock=None):
        self.runtime = runtime
        self.view = runtime.view
        self.token = token or secrets.token_urlsafe(18)
        self.keys = ControlKeys()
        self.push_period = 1.0 / push_hz
        self.refusals = _Refusals(runtime.record)
        self._closing = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wakers: set[asyncio.Event] = set()
        self._streams: dict[int, int] = {}       # open state streams -> the view revision each has sent
        self._cache: tuple[int, bytes] = (-1, b"")
        self._cache_lock = threading.Lock()
        self.view.listeners.append(self._on_change)
        app = Starlette(routes=[
            Route("/", self._page), Route("/static/{name}", self._page),
            Route("/api/state", self._state_route), Route("/api/stream", self._stream),
            Route("/api/frame/{camera:path}", self._frame),
            Route("/api/action/{action:path}", self._action, methods=["POST"]),
            Route("/{path:path}", self._not_found, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        ])
        self.names = served_names(host, allow_hosts)
        guarded = Guard(app, self.names, _error, on_refused=self._guard_refused, headers={
            "Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
            "Cross-Origin-Resource-Policy": "same-origin", "Referrer-Policy": "no-referrer"})
        self.body_timeout_s = body_timeout_s
        self.http = HttpServer(guarded, host, port, name="motormind-console", head_timeout_s=head_timeout_s,
                               sock=sock)          # sock: bound by the command line before the robot
        self.host, self.port = self.http.host, self.http.port

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    @property
    def control_url(self) -> str:
        """The page with the token in the fragment (never sent to the server, never in a log)."""
        return f"{self.url}#token={self.token}"

    def start(self) -> "ConsoleServer":
        self.http.start()
        return self

    def close(self, flush_s: float = 3.0) -> None:
        """Stop serving, after every open stream has sent the last state (the episode's end), or
        ``flush_s`` has passed."""
        end = time.monotonic() + flush_s
        while time.monotonic() < end and any(r != self.view.rev for r in list(self._streams.values())):
            time.sleep(0.02)
        self._closing = True
        self._on_change()
        self.http.close()

    def authorised(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())

    # -- the live state -------------------------------------------------------------------------
    def _on_change(self) -> None:
        """From any thread (the view's listeners): wake every open stream."""
        loop = self._loop
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._wake)
            except RuntimeError:                 # the loop has closed: nobody to wake
                pass

    def _wake(self) -> None:
        for ev in list(self._wakers):
            ev.set()

    def _state(self) -> dict:
        st = self.view.state()
        st["transport"] = self.runtime.transport
        return st

    def _state_bytes(self) -> tuple[int, bytes]:
        """(revision, the state as JSON), made once a revision however many streams are open."""
        with self._cache_lock:
            if self._cache[0] == self.view.rev:
                return self._cache
            st = self._state()
            self._cache = (st["rev"], json.dumps(st, default=json_default).encode())
            return self._cache

    # -- routes ---------------------------------------------------------------------------------
    async def _page(self, request: Request) -> Response:
        path = request.url.path
        if path not in _STATIC:
            return self._not_found_response(path)
        name, ctype = _STATIC[path]
        return Response(_static(name), headers={"Content-Security-Policy": PAGE_CSP, "X-Frame-Options": "DENY"},
                        media_type=ctype)

    async def _state_route(self, request: Request) -> Response:
        return Response(self._state_bytes()[1], media_type="application/json")

    async def _frame(self, request: Request) -> Response:
        cam = request.path_params["camera"]
        f = self.view.frame(cam)
        if f is None:
            return _json(404, _error(404, f"camera: no frame from {show(cam)} yet"))
        return Response(f[1], media_type="image/jpeg", headers={"X-Frame-Seq": str(f[0])})

    def _not_found_response(self, path: str) -> Response:
        return _json(404, _error(404, f"path: {show(path)} is not served here"))

    async def _not_found(self, request: Request) -> Response:
        what = "takes no POST" if request.method == "POST" else "is not served here"
        return _json(404, _error(404, f"path: {show(request.url.path)} {what}"))

    async def _stream(self, request: Request) -> Response:
        self._loop = asyncio.get_running_loop()
        return StreamingResponse(self._events(), media_type="text/event-stream",
                                 headers={"Connection": "close", "X-Accel-Buffering": "no"})

    async def _events(self):
        wake = asyncio.Event()
        self._wakers.add(wake)
        key, rev = id(wake), -1
        self._streams[key] = rev
        try:
            while not self._closing:
                wake.clear()                     # before the look: a change after it wakes the wait
                if self.view.rev != rev:
                    rev, data = self._state_bytes()
                    yield b"event: state\ndata: " + data + b"\n\n"
                    self._streams[key] = rev
                    await asyncio.sleep(self.push_period)
                    continue
                try:
                    await asyncio.wait_for(wake.wait(), 5.0)
                except asyncio.TimeoutError:
                    yield b": keep-alive\n\n"
        finally:
            self._wakers.discard(wake)
            self._streams.pop(key, None)

    # -- actions --------------------------------------------------------------------------------
    def _guard_refused(self, method: str, path: str, message: str) -> None:
        if method == "POST" and path.startswith("/api/action/"):
            self.refusals("operator_action", action=path[len("/api/action/"):][:SHOWN_CHARS], by="?",
                          ok=False, detail=f"refused: {message}")
        else:
            self.refusals("http_refused", method=method[:10], path=path[:SHOWN_CHARS], detail=message)

    async def _action(self, request: Request) -> Response:
        action = request.path_params["action"]
        name = (request.headers.get("x-motormind-name") or "operator")[:40]
        close = {"Connection": "close"}             # an unread or refused body: the connection ends
        if not self.authorised(request.headers.get("x-motormind-token")):
            self.refusals("operator_action", action=action[:SHOWN_CHARS], by=name, ok=False,
                          detail="refused: no valid token (read-only view)")
            return _json(401, _error(401, "token: a control action needs the console's token (printed when it "
                                          "started); this view is read-only"), close)
        try:
            raw = await read_body(request, MAX_BODY, self.body_timeout_s)
        except HttpError as e:
            return _json(e.status, _error(e.status, str(e)), close)
        except Disconnected:                         # cut short: nothing is acted on
            return _json(400, _error(400, "body: the client hung up before the body was complete"), close)
        status, out = await run_in_threadpool(self._act, action, raw, request.headers.get("x-motormind-control"),
                                              name)
        return _json(status, out)

    def _act(self, action: str, raw: bytes, key: str | None, name: str) -> tuple[int, dict]:
        """(status, answer) of one action, on a worker thread (an action may take a moment)."""
        try:
            args = decode_body(raw, "body", MAX_BODY) if raw.strip() else {}
        except HttpError as e:
            if action in self.runtime.ACTIONS:
                self.runtime.record("operator_action", action=action, by=name, ok=False, detail=str(e))
            return e.status, _error(e.status, str(e))
        cid, fresh = self.keys.client(key), None
        if cid is None:
            cid, fresh = self.keys.issue()
        try:
            status, out = 200, self.runtime.act(action, args, {"client": cid, "name": name})
        except ActionError as e:
            status, out = e.status, _error(e.status, str(e))
        except Exception as e:  # noqa: BLE001 - an unexpected failure is reported, the server goes on
            status, out = 500, _error(500, f"{show(action)}: {type(e).__name__}: {e}")
        if fresh is not None and self.runtime.desk.in_control(cid):
            out["control"] = fresh      # this request made its sender the holder (even if the action was refused)
        return status, out
