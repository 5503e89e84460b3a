"""The console's web server: the page, its state as JSON and as a live stream, camera frames, and
the operator's actions. Standard library only (http.server), one thread per connection.

    GET  /                      the console page (read-only until a token is given)
    GET  /api/state             the whole view as JSON
    GET  /api/stream            Server-Sent Events: the view, pushed on every change (<= 10 per s)
    GET  /api/frame/<camera>    the latest frame of that camera (JPEG)
    POST /api/action/<name>     an operator action; JSON body; headers X-MotorMind-Token (required),
                                X-MotorMind-Client (this browser's id), X-MotorMind-Name (shown to all)

Binds 127.0.0.1 unless told otherwise. Without the token (printed at start) every POST is refused
with 401 and the page stays a read-only view.
"""
from __future__ import annotations

import hmac
import json
import secrets
import threading
import time
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from urllib.parse import unquote, urlparse

from ..record import json_default
from .runtime import ActionError, Runtime

_STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
           "/static/console.js": ("console.js", "text/javascript; charset=utf-8"),
           "/static/console.css": ("console.css", "text/css; charset=utf-8")}
MAX_BODY = 64 * 1024


def _static(name: str) -> bytes:
    return resources.files("motormind.console.static").joinpath(name).read_bytes()


class ConsoleServer:
    def __init__(self, runtime: Runtime, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                 push_hz: float = 10.0):
        self.runtime = runtime
        self.view = runtime.view
        self.token = token or secrets.token_urlsafe(18)
        self.push_period = 1.0 / push_hz
        self._changed = threading.Condition()
        self.view.listeners.append(self._on_change)
        self._closing = False
        self._streams: dict[int, int] = {}       # open state streams -> the view revision each has sent
        server = self

        class Handler(_Handler):
            console = server

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        self.host, self.port = self.httpd.server_address[:2]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/"

    @property
    def control_url(self) -> str:
        """The page with the token in the fragment (never sent to the server, never in a log)."""
        return f"{self.url}#token={self.token}"

    def _on_change(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_change(self, rev: int, timeout: float) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.view.rev != rev or self._closing, timeout)

    def start(self) -> "ConsoleServer":
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2},
                                        name="motormind-console", daemon=True)
        self._thread.start()
        return self

    def close(self, flush_s: float = 3.0) -> None:
        """Stop serving, after every open stream has sent the last state (the episode's end), or
        ``flush_s`` has passed."""
        end = time.monotonic() + flush_s
        while time.monotonic() < end and any(r != self.view.rev for r in list(self._streams.values())):
            time.sleep(0.02)
        self._closing = True
        self._on_change()
        self.httpd.shutdown()
        self.httpd.server_close()

    def authorised(self, given: str | None) -> bool:
        return bool(given) and hmac.compare_digest(given.encode(), self.token.encode())


class _Handler(BaseHTTPRequestHandler):
    console: ConsoleServer
    protocol_version = "HTTP/1.1"
    server_version = "MotorMindConsole"

    def log_message(self, fmt, *args):   # quiet: the record holds what matters
        pass

    def _send(self, code: int, body: bytes, ctype: str, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def _json(self, code: int, obj) -> None:
        self._send(code, json.dumps(obj, default=json_default).encode(), "application/json")

    def do_GET(self):  # noqa: N802 - http.server's name
        path = urlparse(self.path).path
        if path in _STATIC:
            name, ctype = _STATIC[path]
            extra = {"Content-Security-Policy": "default-src 'self'; img-src 'self' blob: data:; "
                                                "style-src 'self'; script-src 'self'; connect-src 'self'"}
            return self._send(200, _static(name), ctype, extra)
        if path == "/api/state":
            return self._json(200, self._state())
        if path == "/api/stream":
            return self._stream()
        if path.startswith("/api/frame/"):
            cam = unquote(path[len("/api/frame/"):])
            f = self.console.view.frame(cam)
            if f is None:
                return self._json(404, {"ok": False, "error": f"camera: no frame from {cam!r} yet"})
            return self._send(200, f[1], "image/jpeg", {"X-Frame-Seq": str(f[0])})
        return self._json(404, {"ok": False, "error": f"path: {path} is not served here"})

    def _state(self) -> dict:
        c = self.console
        st = c.view.state()
        st["transport"] = c.runtime.transport
        return st

    def _stream(self) -> None:
        c = self.console
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-store")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        rev = -1
        key = id(self)
        c._streams[key] = rev
        try:
            while not c._closing:
                if c.view.rev != rev:
                    st = self._state()
                    rev = st["rev"]
                    self.wfile.write(b"event: state\ndata: " + json.dumps(st, default=json_default).encode() + b"\n\n")
                    self.wfile.flush()
                    c._streams[key] = rev
                    time.sleep(c.push_period)
                else:
                    c.wait_change(rev, 5.0)
                    if c.view.rev == rev:
                        self.wfile.write(b": keep-alive\n\n")
                        self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, OSError):
            return
        finally:
            c._streams.pop(key, None)

    def do_POST(self):  # noqa: N802
        c = self.console
        path = urlparse(self.path).path
        if not path.startswith("/api/action/"):
            return self._json(404, {"ok": False, "error": f"path: {path} takes no POST"})
        action = path[len("/api/action/"):]
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            return self._json(413, {"ok": False, "error": f"body: {n} bytes exceed the limit of {MAX_BODY}"})
        raw = self.rfile.read(n) if n else b"{}"
        client = (self.headers.get("X-MotorMind-Client") or self.client_address[0])[:64]
        name = (self.headers.get("X-MotorMind-Name") or "operator")[:40]
        if not c.authorised(self.headers.get("X-MotorMind-Token")):
            try:
                c.runtime.record("operator_action", action=action, by=name, ok=False,
                                 detail="refused: no valid token (read-only view)")
            except Exception:  # noqa: BLE001 - the refusal stands even if recording fails
                pass
            return self._json(HTTPStatus.UNAUTHORIZED, {"ok": False, "error": "token: a control action needs the "
                                                        "console's token (printed when it started); this view is read-only"})
        try:
            args = json.loads(raw or b"{}")
        except ValueError as e:
            return self._json(400, {"ok": False, "error": f"body: not JSON ({e})"})
        try:
            out = c.runtime.act(action, args, {"client": client, "name": name})
        except ActionError as e:
            return self._json(e.status, {"ok": False, "error": str(e)})
        except Exception as e:  # noqa: BLE001 - an unexpected failure is reported, the server goes on
            return self._json(500, {"ok": False, "error": f"{action}: {type(e).__name__}: {e}"})
        return self._json(200, out)
