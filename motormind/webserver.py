"""The HTTP stack under both of MotorMind's servers (the operator console and ``serve-brain``):
uvicorn, with its h11 parser, serving a Starlette app on a thread and an event loop of its own,
and the checks both make at their trust boundary. Why this stack: docs/architecture.md.

    HttpServer   bind at construction (a port in use or out of range fails there), ``start()``
                 serves on a thread, ``serve_forever()`` in the caller's thread (Ctrl-C ends it),
                 ``close()``; port 0 picks a free port
    Guard        ASGI middleware: the Host check on every request (DNS rebinding), the Origin check
                 on every POST (a foreign page), and the headers every answer carries
    read_body    a request body within a byte limit and a time limit, whole or not at all
    decode_body  that body through the project's strict JSON decoder (strict_json.decode_json)

What uvicorn and h11 already answer: a malformed Content-Length (``-1``, ``abc``) or request line
is a 400 and the connection closes; chunked bodies are decoded; a body cut short by the client's
hang-up is never handed to a handler whole (``read_body`` raises ``Disconnected``). What is added
here, because uvicorn leaves it open: a connection must send a whole request head within
``head_timeout_s`` (an idle or trickling connection is closed; uvicorn itself times out only idle
keep-alive connections), and a body must arrive within ``body_timeout_s`` (else 408). And two
framing rules h11 leaves to its user: a request with both Content-Length and Transfer-Encoding is a
400 and the connection closes (RFC 9112 section 6.3: the two lengths of a request-smuggling
attempt), and a request gets exactly one answer (a body that goes bad after the app answered, or
while it answers, closes the connection; it never starts a second, racing 400).
Times in seconds, sizes in bytes.
"""
from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
import time
from typing import Any, Callable

import h11
import uvicorn
from h11._connection import DEFAULT_MAX_INCOMPLETE_EVENT_SIZE
from starlette.requests import ClientDisconnect, Request
from uvicorn.protocols.http.h11_impl import H11Protocol

from .errors import CommandError, ConfigError
from .strict_json import MAX_CHARS, decode_json, show

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
UNSAFE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


class HttpError(Exception):
    """An answer other than 200, with a message that names the field and the limit."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


class Disconnected(Exception):
    """The client hung up before its request body was complete: nothing is acted on."""


# -- which names this server answers to ---------------------------------------------------------
def _is_wildcard(host: str) -> bool:
    return host in ("", "0.0.0.0", "::")


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def served_names(bound_host: str, extra: tuple[str, ...] | list[str] = ()) -> frozenset[str]:
    """The Host names a server bound to ``bound_host`` answers to: the bound loopback address and
    ``localhost`` when it is loopback; the configured host when it is a name or an address; on a
    wildcard address (0.0.0.0, ::) the loopback names and this machine's host names; and ``extra``
    (``--allow-host``). Anything else is refused: a page on evil.example.com whose name was made to
    resolve to 127.0.0.1 (DNS rebinding) still sends ``Host: evil.example.com``."""
    names = {_norm(h) for h in extra if h}
    b = _norm(bound_host)
    if _is_wildcard(b):
        names |= {b, *LOOPBACK_NAMES, _norm(socket.gethostname()), _norm(socket.getfqdn())}
    elif _is_loopback(b):
        names |= {b, "localhost"}
    else:
        names.add(b)
    return frozenset(n for n in names if n)


def _norm(name: str) -> str:
    return str(name).strip().lower().rstrip(".")


def host_name(value: str) -> str:
    """The name part of a Host header value (``[::1]:8765`` -> ``::1``, ``a.b:80`` -> ``a.b``)."""
    v = value.strip()
    if v.startswith("["):
        end = v.find("]")
        return _norm(v[1:end]) if end > 0 else ""
    if v.count(":") == 1:
        v = v.split(":", 1)[0]
    return _norm(v)


# -- the guard ----------------------------------------------------------------------------------
def _header(scope, name: bytes) -> str | None:
    for k, v in scope.get("headers", ()):
        if k == name:
            return v.decode("latin-1")
    return None


class Guard:
    """ASGI middleware in front of an app.

    * Host: every request names one of ``names`` (``served_names``), else 400 (nothing is served
      to a rebound name: not the page, not the state, not a camera frame).
    * Origin, on every POST (PUT, PATCH, DELETE): a browser sends it; it must be this server's own
      origin, ``http://`` + the request's Host, else 403. A request without Origin is not from a
      web page (curl, the ``openai`` client, tests) and passes; ``Sec-Fetch-Site: cross-site`` or
      ``same-site`` is refused as well.
    * Every answer carries ``headers`` (e.g. nosniff, no-store).

    ``error(status, message)`` renders a refusal (each server answers in its own JSON shape);
    ``on_refused(method, path, message)`` is told of each refusal (to log it, bounded)."""

    def __init__(self, app, names: frozenset[str], error: Callable[[int, str], dict],
                 headers: dict[str, str] | None = None,
                 on_refused: Callable[[str, str, str], None] | None = None):
        self.app = app
        self.names = names
        self.error = error
        self.headers = [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
        self.on_refused = on_refused

    def check(self, scope) -> tuple[int, str] | None:
        raw = _header(scope, b"host")
        if raw is None:
            return 400, "host: the Host header is required"
        name = host_name(raw)
        if name not in self.names:
            return 400, (f"host: {show(raw)} is not a name this server answers to (it answers to "
                         f"{', '.join(sorted(self.names))}; start it with --allow-host NAME to add one)")
        if scope["method"] in UNSAFE_METHODS:
            origin = _header(scope, b"origin")
            site = (_header(scope, b"sec-fetch-site") or "").lower()
            if site in ("cross-site", "same-site"):
                return 403, f"origin: a {scope['method']} from another site (Sec-Fetch-Site: {site}) is refused"
            if origin is not None and origin.rstrip("/").lower() != f"{scope.get('scheme', 'http')}://{raw}".lower():
                return 403, (f"origin: {show(origin)} is not this server's own origin "
                             f"({scope.get('scheme', 'http')}://{raw[:100]}): a {scope['method']} from "
                             "another page is refused")
        return None

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        extra = self.headers

        async def send_with_headers(message):
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", ()), *extra]}
            await send(message)
        refused = self.check(scope)
        if refused is None:
            return await self.app(scope, receive, send_with_headers)
        status, msg = refused
        if self.on_refused is not None:
            try:
                self.on_refused(scope["method"], scope.get("path", ""), msg)
            except Exception:  # noqa: BLE001 - the refusal stands even if its log fails
                pass
        from starlette.responses import JSONResponse
        await JSONResponse(self.error(status, msg), status, headers={"Connection": "close"})(
            scope, receive, send_with_headers)


# -- bodies -------------------------------------------------------------------------------------
async def read_body(request: Request, limit: int, timeout_s: float) -> bytes:
    """The whole body, at most ``limit`` bytes, within ``timeout_s``. Raises HttpError (413: too
    large, declared or counted as it streams, chunked or not; 408: too slow) or Disconnected."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise HttpError(413, f"body: {declared} bytes exceed the limit of {limit}")

    async def whole() -> bytes:
        parts, n = [], 0
        async for chunk in request.stream():
            n += len(chunk)
            if n > limit:
                raise HttpError(413, f"body: more than {limit} bytes (the limit of {limit})")
            parts.append(chunk)
        return b"".join(parts)
    try:
        return await asyncio.wait_for(whole(), timeout_s)
    except asyncio.TimeoutError:
        raise HttpError(408, f"body: not complete within {timeout_s:g} s (the limit of {timeout_s:g} s)") from None
    except ClientDisconnect:
        raise Disconnected() from None


def decode_body(raw: bytes, what: str = "body", max_chars: int = MAX_CHARS) -> Any:
    """``raw`` as one JSON value, strictly (duplicate keys, NaN, 1e999, nesting past
    strict_json.MAX_DEPTH and a second value are refused): HttpError 400 naming the path."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise HttpError(400, f"{what}: not UTF-8 at byte {e.start}") from None
    try:
        return decode_json(text, what, max_chars)
    except CommandError as e:
        raise HttpError(400, str(e)) from None


# -- the server ---------------------------------------------------------------------------------
def framing_issue(headers) -> str:
    """Why a request head's framing is refused ("" when it is not): both Content-Length and
    Transfer-Encoding (RFC 9112 section 6.3; h11 would read the body as chunked and go on, and a
    front end that read the Content-Length would see a different request: request smuggling).
    ``headers``: (name, value) byte pairs, names lower-case (h11's)."""
    names = {bytes(k).lower() for k, _ in headers}
    if b"content-length" in names and b"transfer-encoding" in names:
        return ("transfer-encoding: a request with both Content-Length and Transfer-Encoding is refused "
                "(RFC 9112 section 6.3); send one of them")
    return ""


class _Connection(h11.Connection):
    """h11's server connection with ``framing_issue`` checked on every request head: a refused head
    is a RemoteProtocolError, which uvicorn answers with a 400 and a closed connection."""

    refusal = ""

    def next_event(self):  # noqa: D102 - h11's
        event = super().next_event()
        if isinstance(event, h11.Request):
            why = framing_issue(event.headers)
            if why:
                self.refusal = why
                raise h11.RemoteProtocolError(why, 400)
        return event


class _Protocol(H11Protocol):
    """uvicorn's h11 protocol with

    * a deadline for each request head (``head_timeout_s`` from the connection's start or the
      previous answer): a connection that sends nothing, or its head a byte at a time, is closed
      instead of being held open for ever;
    * the framing rule of ``framing_issue`` (a 400 naming it, and the connection closed);
    * one answer per request: uvicorn's own 400 for a request h11 cannot parse (a malformed chunk)
      is sent only when the app has not begun an answer, and then the app's answer, if it comes, is
      dropped; else the connection is closed (two 400s raced: the loser's h11 LocalProtocolError
      was logged as an ASGI traceback)."""

    head_timeout_s = 10.0
    _head_timer = None

    def __init__(self, config, *args, **kwargs) -> None:
        super().__init__(config, *args, **kwargs)
        self.conn = _Connection(h11.SERVER, config.h11_max_incomplete_event_size or DEFAULT_MAX_INCOMPLETE_EVENT_SIZE)

    def send_400_response(self, msg: str) -> None:  # noqa: D102 - uvicorn's
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True        # the request is void: the app reads a disconnect, its answer is dropped
            cycle.message_event.set()
        if self.conn.our_state in (h11.IDLE, h11.SEND_RESPONSE):
            super().send_400_response(self.conn.refusal or msg)
        elif not self.transport.is_closing():
            self.transport.close()           # an answer is already on the wire: it is the only one

    def _arm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._head_expired)

    def _head_expired(self) -> None:
        self._head_timer = None
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.transport.close()

    def connection_made(self, transport) -> None:  # noqa: D102 - asyncio's
        super().connection_made(transport)
        self._arm()

    def on_response_complete(self) -> None:  # noqa: D102 - uvicorn's
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm()

    def connection_lost(self, exc) -> None:  # noqa: D102 - asyncio's
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)


def bind(host: str, port: int, what: str = "port") -> socket.socket:
    """A listening TCP socket on ``host:port``. Raises OSError (in use, no such address) and
    ValueError (port outside 0..65535)."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        raise ValueError(f"{what}: {port!r} is outside 0..65535")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto given: asyncio sets TCP_NODELAY only on sockets whose proto says TCP, and without it an
    # answer's head and body (two writes) wait 40 ms for the client's delayed ACK on a kept-alive
    # connection (measured: 44 ms a request, 1 ms with it; bench/bench_serve_brain.py)
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(128)
    except BaseException:
        sock.close()
        raise
    return sock


def listen_for(what: str, host: str, port: int) -> socket.socket:
    """``bind`` for a command line: a port in use, out of range or on no such address is a
    ConfigError naming the argument (``--port: cannot serve on 127.0.0.1:8765: Address already in
    use``). A command binds first, then builds its robot or simulator, and hands the socket on."""
    try:
        return bind(host, port, what)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    except OSError as e:
        raise ConfigError(f"{what}: cannot serve on {host}:{port}: {e.strerror or e}") from None


class HttpServer:
    """``app`` (ASGI) served by uvicorn on ``host:port``, or on ``sock`` (``listen_for``). The socket
    is bound here, so a port in use fails in the constructor (OSError), before anything starts."""

    def __init__(self, app, host: str = "127.0.0.1", port: int = 0, *, name: str = "motormind-http",
                 head_timeout_s: float = 10.0, keep_alive_s: int = 5, max_connections: int = 256,
                 max_head_bytes: int = 16 * 1024, sock: socket.socket | None = None):
        self.name = name
        self._sock = sock if sock is not None else bind(host, port)
        self.host, self.port = self._sock.getsockname()[:2]
        proto = type("Protocol", (_Protocol,), {"head_timeout_s": float(head_timeout_s)})
        self.config = uvicorn.Config(app, http=proto, ws="none", lifespan="off", loop="asyncio",
                                     interface="asgi3", access_log=False, log_config=None, log_level="error",
                                     server_header=False, date_header=True, timeout_keep_alive=keep_alive_s,
                                     limit_concurrency=max_connections, timeout_graceful_shutdown=3,
                                     h11_max_incomplete_event_size=max_head_bytes)
        self._server = uvicorn.Server(self.config)
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def _run(self) -> None:
        try:
            asyncio.run(self._server.serve(sockets=[self._sock]))
        except BaseException as e:  # noqa: BLE001 - start() reports it
            self._error = e

    def start(self, timeout_s: float = 10.0) -> "HttpServer":
        self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        self._thread.start()
        end = time.monotonic() + timeout_s
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                raise RuntimeError(f"{self.name}: the server did not start: {self._error!r}")
            if time.monotonic() > end:
                raise RuntimeError(f"{self.name}: the server did not start within {timeout_s:g} s")
            time.sleep(0.005)
        return self

    def serve_forever(self) -> None:
        """Serve in this thread until Ctrl-C / SIGTERM (uvicorn's signal handling) or ``close()``."""
        self._server.run(sockets=[self._sock])

    def close(self, timeout_s: float = 5.0) -> None:
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout_s)
            if self._thread.is_alive():         # a stuck answer: stop waiting for it
                self._server.force_exit = True
                self._thread.join(timeout_s)
        try:
            self._sock.close()
        except OSError:
            pass
