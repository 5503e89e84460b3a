"""The cell's cameras as network cameras: rendered from the simulation, served as MJPEG over HTTP.

    GET /                      {"cameras": {name: {"stream", "snapshot", "calibration"}}}
    GET /<name>.mjpg           multipart/x-mixed-replace JPEG stream (what an IP camera serves;
                               OpenCV's VideoCapture opens the URL, robots/cameras.py)
    GET /<name>.jpg            one JPEG of the scene now

A camera is rendered only while someone watches it (a stream is open, or a snapshot was asked
for in the last second), at most at its configured ``fps``, on one renderer thread that owns the
OpenGL context (``MUJOCO_GL=osmesa`` headless). The renderer copies the simulation's state under the
emulator's lock and renders outside it, so the controller never waits for a frame. A slow client
gets the newest frame when it is ready for one, never a backlog (uvicorn's flow control holds the
stream until the socket drains). HTTP is the project's stack (motormind/webserver.py: Starlette on
uvicorn with the Host check). Times in seconds.
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time

import numpy as np
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from motormind.webserver import Guard, HttpServer, served_names

log = logging.getLogger("motormind.sim.xarm_cell.cameras")

BOUNDARY = "motormindframe"
JPEG_QUALITY = 85
WANTED_S = 1.0              # a snapshot keeps its camera rendering this long


class _Feed:
    def __init__(self, spec):
        self.spec = spec
        self.jpeg: bytes = b""
        self.seq = 0
        self.t = 0.0                # time.monotonic() of the newest frame
        self.streams = 0            # open MJPEG streams
        self.wanted_until = 0.0
        self.renders = 0


class CameraServer:
    """Renders ``emulator``'s cameras and serves them on ``host:port`` (0: a free port)."""

    def __init__(self, emulator, host: str = "127.0.0.1", port: int = 0, allow_hosts=()):
        self.emu = emulator
        self.feeds = {n: _Feed(c) for n, c in emulator.cell.cameras.items()}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        app = Starlette(routes=[Route("/", self._index), Route("/{name}.mjpg", self._stream),
                                Route("/{name}.jpg", self._snapshot)])
        guard = Guard(app, served_names(host, tuple(allow_hosts)), lambda s, m: {"error": m},
                      {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        self.http = HttpServer(guard, host, port, name="xarm-cell-cameras")
        self.host, self.port = self.http.host, self.http.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stream_url(self, name: str) -> str:
        return f"{self.url}/{name}.mjpg"

    def start(self) -> "CameraServer":
        self._thread = threading.Thread(target=self._render_loop, name="xarm-cell-render", daemon=True)
        self._thread.start()
        self.http.start()
        return self

    def close(self) -> None:
        self._stop.set()
        with self._cond:
            self._cond.notify_all()
        self.http.close()
        if self._thread is not None:
            self._thread.join(5.0)

    # -- rendering ------------------------------------------------------------------------------
    def _due(self, now: float) -> list:
        return [f for f in self.feeds.values()
                if (f.streams > 0 or f.wanted_until > now) and now - f.t >= 1.0 / f.spec.fps]

    def _render_loop(self) -> None:
        try:
            import cv2
            import mujoco
            ph = self.emu.physics
            model = ph.model
            rd = mujoco.MjData(model)
            renderers = {n: mujoco.Renderer(model, f.spec.height, f.spec.width) for n, f in self.feeds.items()}
        except BaseException as e:  # noqa: BLE001 - a missing GL is reported on every request
            self.error = e
            log.error("the cell's cameras cannot render: %s (headless: MUJOCO_GL=osmesa)", e)
            return
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                due = self._due(now)
                if not due:
                    with self._cond:
                        self._cond.wait(0.02)
                    continue
                # kinematics only (a picture needs no contacts: about 20 us), under the emulator's
                # lock so that no MuJoCo call on this thread overlaps the physics thread's mj_step
                with self.emu._lock:
                    st = ph.state()
                    rd.qpos[:] = st["qpos"]
                    rd.mocap_pos[:] = st["mocap_pos"]
                    rd.mocap_quat[:] = st["mocap_quat"]
                    mujoco.mj_kinematics(model, rd)
                    mujoco.mj_camlight(model, rd)
                for f in due:
                    r = renderers[f.spec.name]
                    r.update_scene(rd, camera=f.spec.name)
                    rgb = r.render()
                    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]),
                                           [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                    if not ok:
                        continue
                    with self._cond:
                        f.jpeg, f.seq, f.t = buf.tobytes(), f.seq + 1, time.monotonic()
                        f.renders += 1
                        self._cond.notify_all()
        finally:
            for r in renderers.values():
                try:
                    r.close()
                except Exception:  # noqa: BLE001
                    pass

    # -- HTTP -----------------------------------------------------------------------------------
    def _feed(self, request: Request) -> _Feed | None:
        return self.feeds.get(request.path_params["name"])

    def _unavailable(self) -> Response | None:
        if self.error is not None:
            return JSONResponse({"error": f"the cameras cannot render: {self.error}"}, 503)
        return None

    async def _index(self, request: Request) -> Response:
        return JSONResponse({"cameras": {n: {"stream": self.stream_url(n), "snapshot": f"{self.url}/{n}.jpg",
                                             "calibration": f.spec.calibration()} for n, f in self.feeds.items()}})

    async def _snapshot(self, request: Request) -> Response:
        f = self._feed(request)
        if f is None:
            return JSONResponse({"error": f"no camera {request.path_params['name']!r} (cameras: "
                                          f"{', '.join(self.feeds)})"}, 404)
        bad = self._unavailable()
        if bad is not None:
            return bad
        f.wanted_until = time.monotonic() + WANTED_S
        self._wake()
        fresh = time.monotonic() - f.t <= 1.0 / f.spec.fps    # the newest frame is current: serve it
        got = await self._next(f, f.seq - 1 if fresh else f.seq, 5.0)
        if got is None:
            return JSONResponse({"error": f"camera {f.spec.name!r}: no frame within 5 s"}, 503)
        return Response(got[1], media_type="image/jpeg")

    async def _stream(self, request: Request) -> Response:
        f = self._feed(request)
        if f is None:
            return JSONResponse({"error": f"no camera {request.path_params['name']!r} (cameras: "
                                          f"{', '.join(self.feeds)})"}, 404)
        bad = self._unavailable()
        if bad is not None:
            return bad
        return StreamingResponse(self._frames(f), media_type=f"multipart/x-mixed-replace; boundary={BOUNDARY}")

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    async def _next(self, f: _Feed, after_seq: int, timeout: float) -> tuple[int, bytes] | None:
        """The first frame newer than ``after_seq`` within ``timeout`` s, without holding a thread."""
        end = time.monotonic() + timeout
        while f.seq <= after_seq:
            if self._stop.is_set() or time.monotonic() > end:
                return None
            await asyncio.sleep(0.01)
        return f.seq, f.jpeg

    async def _frames(self, f: _Feed):
        f.streams += 1
        self._wake()
        seq = 0
        try:
            while not self._stop.is_set():
                got = await self._next(f, seq, 1.0)
                if got is None:
                    continue
                seq, jpeg = got
                yield (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n"
                       .encode("ascii") + jpeg + b"\r\n")
        finally:
            f.streams -= 1
