"""The cell's cameras as network cameras: rendered from the simulation, served as MJPEG over HTTP,
with a depth image beside each colour stream.

    GET /                      {"cameras": {name: {"stream", "snapshot", "depth", "calibration"}}}
    GET /<name>.mjpg           multipart/x-mixed-replace JPEG stream (what an IP camera serves;
                               OpenCV's VideoCapture opens the URL, robots/cameras.py)
    GET /<name>.jpg            one JPEG of the scene now
    GET /<name>.depth.png      the newest frame's depth: a 16-bit single-channel PNG, millimetres
                               along the optical axis, 0 where nothing was drawn (no reading);
                               headers X-Frame-Seq (the frame's number, shared with its JPEG)
                               and X-Depth-Unit: mm

Colour and depth come from one render (``render_rgbd``): the z-buffer read beside the colour
buffer and linearised with the model's near and far planes by the one function LIBERO's renders use
(``motormind.grounding.camera.linearize_depth``), encoded by ``encode_depth_png``.

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
        self.depth = None           # the newest frame's depth (m, float32, NaN: nothing drawn)
        self.seq = 0
        self.t = 0.0                # time.monotonic() of the newest frame
        self.streams = 0            # open MJPEG streams
        self.wanted_until = 0.0
        self.renders = 0


def render_rgbd(renderer, model) -> tuple[np.ndarray, np.ndarray]:
    """(RGB HxWx3 uint8, depth HxW float32 m along the optical axis, NaN where nothing was drawn),
    both upright, from ONE render of a ``mujoco.Renderer`` whose scene is updated: the colour and
    the z-buffer are read from the same frame buffer (``mujoco.Renderer.render`` would render twice
    for the two), and the z-buffer is linearised by ``linearize_depth`` with ``vis.map.znear`` /
    ``zfar`` times ``stat.extent``, as LIBERO's renders are (sim/libero_pro/render.py). Uses the
    Renderer's context and viewport (MuJoCo 2.3.7's ``_gl_context``, ``_rect``, ``_mjr_context``)."""
    import mujoco

    from motormind.grounding.camera import linearize_depth
    try:
        gl, rect, con, scn = renderer._gl_context, renderer._rect, renderer._mjr_context, renderer._scene
    except AttributeError as e:       # another MuJoCo's Renderer: say so rather than render wrong
        raise RuntimeError(f"mujoco {mujoco.__version__}: Renderer has no {e.name}; render_rgbd needs "
                           "MuJoCo 2.3.x's Renderer internals") from None
    gl.make_current()
    mujoco.mjr_render(rect, scn, con)
    rgb = np.empty((rect.height, rect.width, 3), dtype=np.uint8)
    zbuf = np.empty((rect.height, rect.width), dtype=np.float32)
    mujoco.mjr_readPixels(rgb, zbuf, rect, con)
    extent = float(model.stat.extent)
    depth = linearize_depth(zbuf, float(model.vis.map.znear) * extent, float(model.vis.map.zfar) * extent)
    return np.ascontiguousarray(np.flipud(rgb)), np.ascontiguousarray(np.flipud(depth))


def scene_now(emu, rd) -> None:
    """The simulation's state now into ``rd`` (a MjData of the cell's model) for rendering:
    kinematics only (a picture needs no contacts: about 20 us), under the emulator's lock so that no
    MuJoCo call on this thread overlaps the physics thread's mj_step."""
    import mujoco
    model = emu.physics.model
    with emu._lock:
        st = emu.physics.state()
        rd.qpos[:] = st["qpos"]
        rd.mocap_pos[:] = st["mocap_pos"]
        rd.mocap_quat[:] = st["mocap_quat"]
        mujoco.mj_kinematics(model, rd)
        mujoco.mj_camlight(model, rd)


class RolloutFrames:
    """``grab()``: every camera of the cell rendered now, ``px`` high, side by side (RGB), for a rollout
    video (``motormind.record.ClockRollout``: ``motormind trials xarm6 --videos HZ``). Rendered from the
    simulation's state like the served frames (``scene_now``) but on the caller's thread and GL context,
    made at the first grab; ``close()`` on that thread."""

    def __init__(self, emu, px: int = 128):
        self.emu, self.px = emu, int(px)
        self._rd = self._renderers = None

    def __call__(self) -> np.ndarray:
        import mujoco
        model = self.emu.physics.model
        if self._renderers is None:
            self._rd = mujoco.MjData(model)
            self._renderers = {n: mujoco.Renderer(model, self.px, max(2, round(c.width * self.px / c.height / 2) * 2))
                               for n, c in self.emu.cell.cameras.items()}
        scene_now(self.emu, self._rd)
        tiles = []
        for name, r in self._renderers.items():
            r.update_scene(self._rd, camera=name)
            tiles.append(r.render())
        return np.concatenate(tiles, axis=1)

    def close(self) -> None:
        for r in (self._renderers or {}).values():
            try:
                r.close()
            except Exception:  # noqa: BLE001
                pass
        self._renderers = None


class CameraServer:
    """Renders ``emulator``'s cameras and serves them on ``host:port`` (0: a free port)."""

    def __init__(self, emulator, host: str = "127.0.0.1", port: int = 0, allow_hosts=()):
        self.emu = emulator
        self.feeds = {n: _Feed(c) for n, c in emulator.cell.cameras.items()}
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        app = Starlette(routes=[Route("/", self._index), Route("/{name}.depth.png", self._depth),
                                Route("/{name}.mjpg", self._stream), Route("/{name}.jpg", self._snapshot)])
        guard = Guard(app, served_names(host, tuple(allow_hosts)), lambda s, m: {"error": m},
                      {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"})
        self.http = HttpServer(guard, host, port, name="xarm-cell-cameras")
        self.host, self.port = self.http.host, self.http.port

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def stream_url(self, name: str) -> str:
        return f"{self.url}/{name}.mjpg"

    def depth_url(self, name: str) -> str:
        return f"{self.url}/{name}.depth.png"

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
            model = self.emu.physics.model
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
                scene_now(self.emu, rd)
                for f in due:
                    r = renderers[f.spec.name]
                    r.update_scene(rd, camera=f.spec.name)
                    rgb, depth = render_rgbd(r, model)
                    ok, buf = cv2.imencode(".jpg", np.ascontiguousarray(rgb[:, :, ::-1]),
                                           [cv2.IMWRITE_JPEG_QUALITY, JPEG_QUALITY])
                    if not ok:
                        continue
                    with self._cond:
                        f.jpeg, f.depth, f.seq, f.t = buf.tobytes(), depth, f.seq + 1, time.monotonic()
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
                                             "depth": self.depth_url(n), "calibration": f.spec.calibration()}
                                         for n, f in self.feeds.items()}})

    async def _current(self, request: Request):
        """The newest frame if it is current (at most one frame period old), else the next one:
        (feed, seq, jpeg, depth), or an error Response."""
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
        return f, got[0], got[1], got[2]

    async def _snapshot(self, request: Request) -> Response:
        got = await self._current(request)
        if isinstance(got, Response):
            return got
        return Response(got[2], media_type="image/jpeg", headers={"X-Frame-Seq": str(got[1])})

    async def _depth(self, request: Request) -> Response:
        got = await self._current(request)
        if isinstance(got, Response):
            return got
        from motormind.grounding.camera import encode_depth_png
        return Response(encode_depth_png(got[3]), media_type="image/png",
                        headers={"X-Frame-Seq": str(got[1]), "X-Depth-Unit": "mm"})

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

    async def _next(self, f: _Feed, after_seq: int, timeout: float) -> tuple[int, bytes, object] | None:
        """(seq, JPEG, depth) of the first frame newer than ``after_seq`` within ``timeout`` s,
        without holding a thread."""
        end = time.monotonic() + timeout
        while f.seq <= after_seq:
            if self._stop.is_set() or time.monotonic() > end:
                return None
            await asyncio.sleep(0.01)
        with self._cond:
            return f.seq, f.jpeg, f.depth

    async def _frames(self, f: _Feed):
        f.streams += 1
        self._wake()
        seq = 0
        try:
            while not self._stop.is_set():
                got = await self._next(f, seq, 1.0)
                if got is None:
                    continue
                seq, jpeg, _ = got
                yield (f"--{BOUNDARY}\r\nContent-Type: image/jpeg\r\nContent-Length: {len(jpeg)}\r\n\r\n"
                       .encode("ascii") + jpeg + b"\r\n")
        finally:
            f.streams -= 1
