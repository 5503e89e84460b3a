"""The console's HTTP trust boundary over real sockets: framing (a bad Content-Length, a body cut
short or held back, a chunked body), idle connections, the Host and Origin checks, the strict
decoding of a body, control tied to the key the server issued, and refusals recorded bounded.
(tests/console/test_console.py covers the actions themselves, tests/console/test_console_browser.py the page.)"""
import json
import socket
import threading
import time
import urllib.request

import pytest
from console_client import ConsoleClient
from waiting import wait_for, written_events

from motormind.console.inprocess import InProcessRuntime
from motormind.console.server import REFUSALS_PER_MIN, ConsoleServer, _Refusals
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot

TOKEN = "t0ken"


@pytest.fixture
def srv(tmp_path):
    robot = FakeRobot(image_size=32)
    rec = Recorder(tmp_path / "session")
    rt = InProcessRuntime(robot, record=rec)
    rt.capture()                                   # a camera frame to serve
    server = ConsoleServer(rt, port=0, token=TOKEN, head_timeout_s=1.0, body_timeout_s=1.0).start()
    server.robot, server.rec_path = robot, tmp_path / "session" / "events.jsonl"
    yield server
    server.close(flush_s=0.5)
    rt.close()
    rec.close()


def recorded(server, kind="operator_action"):
    if not server.rec_path.exists():
        return []
    return written_events(server.rec_path, kind)


def exchange(server, data: bytes, timeout: float = 5.0, hold: bool = True) -> tuple[bytes, float]:
    """Send ``data`` on a fresh connection and read until the server closes it (or ``timeout``:
    then the result ends with b"<open>"). ``hold=False``: hang up right after sending."""
    c = socket.create_connection((server.host, server.port), timeout=timeout)
    t0 = time.monotonic()
    c.sendall(data)
    if not hold:
        c.close()
        return b"", 0.0
    out = b""
    try:
        while True:
            b = c.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        out += b"<open>"
    finally:
        c.close()
    return out, time.monotonic() - t0


def head(server, method="POST", path="/api/action/pause", host=None, extra=b"", token=True) -> bytes:
    h = f"{method} {path} HTTP/1.1\r\nHost: {host or f'127.0.0.1:{server.port}'}\r\n".encode()
    if token:
        h += f"X-MotorMind-Token: {TOKEN}\r\n".encode()
    return h + extra


def status(resp: bytes) -> int:
    return int(resp.split(b" ", 2)[1])


def body_of(resp: bytes) -> dict:
    return json.loads(resp.partition(b"\r\n\r\n")[2].split(b"<open>")[0])


# -- framing ------------------------------------------------------------------------------------
@pytest.mark.parametrize("length", [b"-1", b"abc", b"1e3", b"5, 6"])
def test_a_malformed_content_length_is_answered_400_at_once_and_acts_on_nothing(srv, length):
    resp, took = exchange(srv, head(srv, extra=b"Content-Length: " + length + b"\r\n\r\n{}"))
    assert status(resp) == 400 and not resp.endswith(b"<open>")        # answered, and the connection closed
    assert not srv.runtime.desk.paused and recorded(srv) == []


def test_a_body_cut_short_by_a_hang_up_is_never_acted_on(srv):
    exchange(srv, head(srv, path="/api/action/instruction", extra=b"Content-Length: 200\r\n\r\n")
             + b'{"text": "go up"}', hold=False)
    exchange(srv, head(srv, path="/api/action/pause", extra=b"Content-Length: 50\r\n\r\n{}"), hold=False)
    time.sleep(0.5)
    assert srv.runtime.desk.instructions == [] and not srv.runtime.desk.paused
    assert recorded(srv) == []


def test_a_body_held_back_is_refused_408_after_the_body_timeout(srv):
    resp, took = exchange(srv, head(srv, extra=b"Content-Length: 50\r\n\r\n{"))
    assert status(resp) == 408 and body_of(resp)["error"] == "body: not complete within 1 s (the limit of 1 s)"
    assert 0.9 < took < 4.0 and not resp.endswith(b"<open>")
    assert not srv.runtime.desk.paused


def test_a_chunked_body_is_read_whole(srv):
    chunks = b'{"te', b'xt": "lift the', b' tool"}'
    data = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in chunks) + b"0\r\n\r\n"
    resp, _ = exchange(srv, head(srv, path="/api/action/instruction",
                                 extra=b"Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n") + data)
    assert status(resp) == 200, resp
    assert srv.runtime.desk.instructions == ["lift the tool"]


def test_the_request_smuggling_shapes_are_answered_once_and_act_on_nothing(srv, caplog):
    """Both Content-Length and Transfer-Encoding: 400, closed (RFC 9112 section 6.3); a malformed
    chunk in a request without the token: one 400, no ASGI traceback (motormind/webserver.py;
    tests/core/test_webserver.py has the cases on the bare stack)."""
    caplog.set_level("ERROR")
    resp, _ = exchange(srv, head(srv, extra=b"Content-Length: 4\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"))
    assert status(resp) == 400 and resp.count(b"HTTP/1.1 ") == 1 and not resp.endswith(b"<open>"), resp
    resp, _ = exchange(srv, head(srv, token=False, extra=b"Transfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n"))
    assert status(resp) == 400 and resp.count(b"HTTP/1.1 ") == 1 and not resp.endswith(b"<open>"), resp
    time.sleep(0.3)                                # the refused request's handler has run (its log, if any, written)
    assert not srv.runtime.desk.paused and not any(e["ok"] for e in recorded(srv))   # refusals only
    assert [r.getMessage() for r in caplog.records if r.levelname == "ERROR"] == []


def test_a_body_over_the_limit_is_refused_413_declared_or_chunked(srv):
    resp, _ = exchange(srv, head(srv, extra=b"Content-Length: 70000\r\n\r\n"))
    assert status(resp) == 413 and "exceed the limit of 65536" in body_of(resp)["error"]
    big = b"x" * 40000
    data = b"".join(b"%x\r\n%s\r\n" % (len(big), big) for _ in range(2)) + b"0\r\n\r\n"
    resp, _ = exchange(srv, head(srv, extra=b"Transfer-Encoding: chunked\r\n\r\n") + data)
    assert status(resp) == 413 and "the limit of 65536" in body_of(resp)["error"]
    assert not srv.runtime.desk.paused


def test_idle_and_trickling_connections_are_closed_and_hold_no_thread(srv):
    resp, took = exchange(srv, b"")                                     # connects, says nothing
    assert resp == b"" and 0.9 < took < 4.0
    c = socket.create_connection((srv.host, srv.port), timeout=5)       # a head a byte at a time
    t0, closed = time.monotonic(), None
    try:
        for b in head(srv, method="GET", path="/api/state", token=False):
            try:
                c.send(bytes([b]))
                if c.recv(1, socket.MSG_DONTWAIT) == b"":
                    closed = time.monotonic() - t0
            except BlockingIOError:                                     # open, nothing to read
                pass
            except OSError:                                             # reset: closed
                closed = time.monotonic() - t0
            if closed is not None:
                break
            time.sleep(0.15)
    finally:
        c.close()
    assert closed is not None and 0.9 < closed < 4.0, closed
    threads = threading.active_count()
    socks = [socket.create_connection((srv.host, srv.port), timeout=5) for _ in range(60)]
    try:
        assert threading.active_count() - threads < 5               # no thread per connection
        with urllib.request.urlopen(srv.url + "api/state", timeout=5) as r:       # still serving
            assert r.status == 200
        time.sleep(1.6)                                               # past the head timeout
        gone = 0
        for s in socks:
            s.settimeout(2)
            try:
                gone += s.recv(1) == b""
            except OSError:
                gone += 1
        assert gone == 60
    finally:
        for s in socks:
            s.close()


def test_a_kept_alive_connection_serves_several_requests_then_times_out(srv):
    c = socket.create_connection((srv.host, srv.port), timeout=10)
    try:
        for _ in range(3):
            c.sendall(head(srv, method="GET", path="/api/state", token=False) + b"\r\n")
            buf = b""
            while b"\r\n\r\n" not in buf:
                buf += c.recv(65536)
            hdr, _, body = buf.partition(b"\r\n\r\n")
            n = int(next(line.split(b":")[1] for line in hdr.split(b"\r\n") if line.lower().startswith(b"content-length")))
            while len(body) < n:
                body += c.recv(65536)
            assert status(hdr) == 200 and json.loads(body)["rev"] >= 0
        t0 = time.monotonic()
        assert c.recv(1) == b""                                       # closed when idle (keep-alive 5 s)
        assert time.monotonic() - t0 < 8
    finally:
        c.close()


# -- Host and Origin ----------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["/", "/api/state", "/api/stream", "/api/frame/front", "/static/console.js"])
def test_a_foreign_host_is_served_nothing(srv, path):
    resp, _ = exchange(srv, head(srv, method="GET", path=path, host=f"evil.example.com:{srv.port}", token=False)
                       + b"\r\n")
    assert status(resp) == 400 and body_of(resp)["error"].startswith("host: 'evil.example.com:")
    assert b"image/jpeg" not in resp and b"event: state" not in resp and b"<html" not in resp.lower()


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "127.0.0.1"])
def test_the_bound_loopback_names_are_served(srv, host):
    resp, _ = exchange(srv, head(srv, method="GET", path="/api/frame/front", host=host.format(port=srv.port),
                                 token=False, extra=b"Connection: close\r\n") + b"\r\n")
    assert status(resp) == 200 and b"image/jpeg" in resp


def test_a_request_without_host_is_refused(srv):
    resp, _ = exchange(srv, b"GET /api/state HTTP/1.0\r\n\r\n")
    assert status(resp) == 400


@pytest.mark.parametrize("origin, code", [
    ("Origin: http://evil.example.com", 403), ("Origin: null", 403),
    ("Origin: http://127.0.0.1:1", 403),                           # another port is another origin
    ("Origin: http://127.0.0.1:{port}\r\nSec-Fetch-Site: cross-site", 403),
    ("Origin: http://127.0.0.1:{port}", 200), ("", 200)])
def test_a_post_from_another_origin_is_refused(srv, origin, code):
    extra = (origin.format(port=srv.port) + "\r\n" if origin else "").encode()
    resp, _ = exchange(srv, head(srv, extra=extra + b"Content-Length: 2\r\nConnection: close\r\n\r\n{}"))
    assert status(resp) == code, resp
    assert srv.runtime.desk.paused is (code == 200)
    if code == 403:
        assert body_of(resp)["error"].startswith("origin: ")


def test_the_page_forbids_framing_and_answers_carry_the_safe_headers(srv):
    with urllib.request.urlopen(srv.url, timeout=5) as r:
        csp = r.headers["Content-Security-Policy"]
        assert "frame-ancestors 'none'" in csp and r.headers["X-Frame-Options"] == "DENY"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
    with urllib.request.urlopen(srv.url + "api/state", timeout=5) as r:
        assert r.headers["Cross-Origin-Resource-Policy"] == "same-origin" and r.headers["Cache-Control"] == "no-store"


# -- the body through the strict decoder --------------------------------------------------------
@pytest.mark.parametrize("body, error", [
    (b"[" * 3000 + b"]" * 3000, "body: nested deeper than 32 levels at line 1 column 33 (the limit of 32)"),
    (b'{"text": "a", "text": "b"}', "body: duplicate key 'text' (given 2 times; a key may appear once in an object)"),
    (b'{"text": "a"} {"text": "b"}', "body: more text after the first JSON value"),
    (b'{"text": NaN}', "text: non-finite number NaN is not valid JSON"),
    (b'{"text": "\xff"}', "body: not UTF-8 at byte 10"),
])
def test_a_hostile_body_is_refused_400_naming_the_path_and_recorded(srv, body, error):
    op = ConsoleClient(srv.url, TOKEN)
    code, out = op.act("instruction", body)
    assert code == 400 and out["error"].startswith(error), out
    assert srv.runtime.desk.instructions == []
    assert [(e["action"], e["ok"]) for e in recorded(srv)] == [("instruction", False)]
    assert op.act("instruction", {"text": "go"})[0] == 200            # the server goes on


# -- control: tied to the key the server issued -------------------------------------------------
def test_control_is_tied_to_the_key_the_server_issued(srv):
    alice, bob = ConsoleClient(srv.url, TOKEN, "alice"), ConsoleClient(srv.url, TOKEN, "bob")
    code, out = alice.act("pause")
    assert code == 200 and out["control"] and alice.control == out["control"]
    holder = ConsoleClient(srv.url, None).state()["desk"]["holder"]    # what anyone can read, token-less
    assert holder["name"] == "alice" and holder["client"] == alice.control.split(".")[0]
    assert alice.control not in json.dumps(ConsoleClient(srv.url, None).state())   # the MAC is never shown
    for forged in ("", holder["client"], f"{holder['client']}.{'0' * 32}", f"{holder['client']}.", "x" * 5000):
        bob.control = forged
        code, out = bob.act("resume")
        assert code == 409 and "alice is in control: take control first" in out["error"], forged
        assert "control" not in out
    req = urllib.request.Request(srv.url + "api/action/resume", b"{}", {       # the old self-asserted header
        "X-MotorMind-Token": TOKEN, "X-MotorMind-Client": holder["client"]})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req, timeout=5)
    assert e.value.code == 409
    assert srv.runtime.desk.paused                                          # none of them resumed
    assert alice.act("resume")[0] == 200 and alice.act("pause")[0] == 200  # the holder acts with its key
    bob.control = ""
    code, out = bob.act("claim", {"force": True})                           # taking control: seen by all
    assert code == 200 and out["detail"] == "took control from alice" and out["control"]
    assert ConsoleClient(srv.url, None).state()["desk"]["holder"]["name"] == "bob"
    code, out = alice.act("resume")
    assert code == 409 and "bob is in control" in out["error"]
    assert bob.act("resume")[0] == 200
    assert alice.act("estop")[0] == 200 and srv.runtime.controller.estopped   # the e-stop needs only the token


def test_an_action_refused_after_taking_control_still_hands_over_the_key(srv):
    op = ConsoleClient(srv.url, TOKEN)
    code, out = op.act("instruction", {"text": ""})                        # refused, but it took control
    assert code == 400 and out["control"]
    assert op.act("pause")[0] == 200


# -- refusals recorded, bounded -----------------------------------------------------------------
def test_refused_token_less_posts_are_recorded_bounded(srv):
    size0 = srv.rec_path.stat().st_size if srv.rec_path.exists() else 0
    long_path = "/api/action/" + "a" * 60000                              # the 60 kB path
    for i in range(40):
        resp, _ = exchange(srv, head(srv, path=long_path if i % 2 else "/api/action/pause", token=False)
                           + b"Content-Length: 2\r\n\r\n{}")
        assert status(resp) == 401
    refused = recorded(srv)
    assert len(refused) == REFUSALS_PER_MIN and all(not e["ok"] for e in refused)
    assert max(len(e["action"]) for e in refused) == 60
    assert srv.rec_path.stat().st_size - size0 < REFUSALS_PER_MIN * 400
    assert not srv.runtime.desk.paused


def test_refusals_beyond_the_minutes_budget_are_counted_and_reported_with_the_next():
    got, now = [], [0.0]
    log = _Refusals(lambda kind, **d: got.append(d), per_min=3, clock=lambda: now[0])
    for _ in range(10):
        log("operator_action", action="pause")
    assert len(got) == 3 and log.suppressed == 7
    now[0] = 61.0
    log("operator_action", action="jog")
    assert got[-1] == {"action": "jog", "suppressed": 7} and log.suppressed == 0


def test_a_dns_rebinding_read_is_refused_and_recorded_once_a_request(srv):
    for _ in range(3):
        exchange(srv, head(srv, method="GET", path="/api/state", host="rebind.example.com", token=False) + b"\r\n")
    wait_for(lambda: len(recorded(srv, "http_refused")) == 3, what="three refusals in the record")
    ev = recorded(srv, "http_refused")[0]
    assert ev["method"] == "GET" and ev["path"] == "/api/state" and "rebind.example.com" in ev["detail"]
