"""The HTTP stack both servers stand on (motormind/webserver.py), over raw sockets: the framing
rules h11 leaves to its user. A request with both Content-Length and Transfer-Encoding is refused
400 and its connection closed (RFC 9112 section 6.3, the request-smuggling guard), and a request
gets exactly one answer: a body whose chunk framing goes bad while the app refuses it (a missing
token, a foreign Host) is not answered twice, and nothing is logged as a traceback.
(tests/console/test_console_http.py covers the console's own boundary on this stack.)"""
from __future__ import annotations

import logging
import socket

import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route
from waiting import wait_for

from motormind.webserver import Disconnected, Guard, HttpServer, read_body, served_names

TOKEN = "k"


@pytest.fixture
def srv():
    calls = {"echo": 0, "disconnected": 0}

    async def echo(request):
        if request.headers.get("x-token") != TOKEN:          # refused before its body is read, as the console does
            return JSONResponse({"error": "token: missing"}, 401)
        calls["echo"] += 1
        try:
            body = await read_body(request, 65536, 5.0)
        except Disconnected:
            calls["disconnected"] += 1
            return JSONResponse({"error": "cut short"}, 400)
        return JSONResponse({"bytes": len(body)})

    app = Guard(Starlette(routes=[Route("/echo", echo, methods=["POST"])]), served_names("127.0.0.1"),
                lambda status, msg: {"error": msg})
    server = HttpServer(app, "127.0.0.1", 0).start()
    server.calls = calls
    yield server
    server.close()


def idle(server) -> bool:
    """No request of the server is still being handled (its app has returned or raised: whatever it
    logs is logged)."""
    return not server._server.server_state.tasks


def read_all(c: socket.socket) -> bytes:
    """Everything until the server closes the connection (b"<open>" appended if it does not within
    the socket's timeout)."""
    out = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                return out
            out += b
    except socket.timeout:
        return out + b"<open>"


def read_until(c: socket.socket, end: bytes) -> bytes:
    """What the server sends until ``end`` (an answer on a connection that stays open)."""
    out = b""
    while end not in out:
        b = c.recv(65536)
        assert b, out
        out += b
    return out


def exchange(server, data: bytes, timeout: float = 5.0) -> bytes:
    with socket.create_connection((server.host, server.port), timeout=timeout) as c:
        c.sendall(data)
        return read_all(c)


def head(server, extra: bytes = b"", token: bool = True, host: str | None = None) -> bytes:
    h = f"POST /echo HTTP/1.1\r\nHost: {host or f'127.0.0.1:{server.port}'}\r\n".encode()
    return h + (f"X-Token: {TOKEN}\r\n".encode() if token else b"") + extra


def answers(resp: bytes) -> list[int]:
    """The status of every answer on the connection, in order."""
    return [int(part.split(b" ", 1)[0]) for part in resp.split(b"HTTP/1.1 ")[1:]]


@pytest.fixture
def errors(caplog):
    """The ERROR records any logger writes meanwhile (uvicorn's 'Exception in ASGI application',
    asyncio's 'Fatal error: protocol.data_received() call failed')."""
    caplog.set_level(logging.ERROR)
    return lambda: [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_chunked_body_is_still_read_whole_on_a_kept_alive_connection(srv):
    with socket.create_connection((srv.host, srv.port), timeout=5) as c:
        c.sendall(head(srv, b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"))
        first = read_until(c, b'{"bytes":5}')
        c.sendall(head(srv, b"Content-Length: 2\r\nConnection: close\r\n\r\nxy"))
        rest = read_all(c)
    assert answers(first) == [200] and first.endswith(b'{"bytes":5}')
    assert answers(rest) == [200] and rest.endswith(b'{"bytes":2}')


@pytest.mark.parametrize("te, why", [(b"chunked", b"both Content-Length and Transfer-Encoding is refused (RFC 9112"),
                                     (b"gzip, chunked", b"")])      # h11 refuses a coding it does not know
def test_content_length_and_transfer_encoding_together_are_refused_400_and_the_connection_closed(srv, te, why, errors):
    """The smuggling shape: a front end that reads the Content-Length sees a 5-byte body; read as
    chunked, the rest would be a second request on the kept-alive connection. Neither is served."""
    smuggled = b"GET /echo HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    resp = exchange(srv, head(srv, b"Content-Length: 5\r\nTransfer-Encoding: " + te + b"\r\n\r\n0\r\n\r\n" + smuggled))
    assert answers(resp) == [400], resp                       # one answer: the smuggled request is not served
    assert not resp.endswith(b"<open>")                        # and the connection is closed
    assert why in resp
    wait_for(lambda: idle(srv), 5, "the server to be idle")
    assert srv.calls["echo"] == 0 and errors() == []


@pytest.mark.parametrize("token", [False, True], ids=["unauthenticated", "authenticated"])
def test_a_malformed_chunk_gets_exactly_one_400_and_logs_no_traceback(srv, token, errors):
    """Head and bad chunk in one packet: uvicorn's parser refuses the chunk while the app answers
    the same request (401 without reading the body, or reads it): one answer, nothing logged."""
    resp = exchange(srv, head(srv, b"Transfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", token=token))
    assert answers(resp) == [400], resp
    assert not resp.endswith(b"<open>")
    wait_for(lambda: idle(srv), 5, "the server to be idle")
    assert errors() == []


def test_a_malformed_chunk_on_a_foreign_host_gets_one_400_and_logs_no_traceback(srv, errors):
    resp = exchange(srv, head(srv, b"Transfer-Encoding: chunked\r\n\r\nzz\r\n", token=False, host="evil.example.com"))
    assert answers(resp) == [400] and not resp.endswith(b"<open>"), resp
    wait_for(lambda: idle(srv), 5, "the server to be idle")
    assert errors() == []


def test_a_chunk_that_goes_bad_after_the_refusal_closes_the_connection_without_a_second_answer(srv, errors):
    """The app refused (401) on the head alone; the body's next chunk is malformed: the connection
    closes, no second answer is started on it, and nothing is logged."""
    with socket.create_connection((srv.host, srv.port), timeout=5) as c:
        c.sendall(head(srv, b"Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n", token=False))
        first = read_until(c, b"token: missing")
        c.sendall(b"zz\r\nabc\r\n")
        rest = read_all(c)
    assert answers(first) == [401] and rest == b"", rest
    wait_for(lambda: idle(srv), 5, "the server to be idle")
    assert errors() == []
