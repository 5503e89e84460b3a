"""Named OpenCV cameras for the physical robots (``observe(images=True)``).

A camera source is a device index (``0``), a device path (``/dev/video2``), a stream URL
(``rtsp://...``, ``http://.../mjpg``) or a video file (looped: handy for rehearsals). Config::

    cameras:
      front: 0
      wrist: {source: "rtsp://192.168.1.60/stream1", width: 640, height: 480, rotate: 180}

Frames come back as HxWx3 uint8 **RGB**, upright (``rotate`` 0/90/180/270 fixes a camera
mounted upside down or sideways). Every failure names the camera and its source.
OpenCV is imported on first use.

A network stream (a source with ``://``: an IP camera's MJPEG or RTSP URL, the rehearsal cell's
cameras) is read by a background thread that keeps only the newest frame: OpenCV reads a stream in
order, so a reader that looks once per batch would otherwise get frames seconds old from the
socket's backlog. ``read()`` then returns the newest frame, waiting at most ``STREAM_WAIT_S`` for
the first one; a stream that stops delivering for ``STREAM_STALE_S`` is an error.

Depth (docs/grounding.md, docs/xarm6.md). A camera may name a depth source beside its colour one::

    cameras:
      front: {source: "http://cell:8090/front.mjpg", depth: "http://cell:8090/front.depth.png"}
      wrist: {source: pyrealsense2, serial: "123456789012", width: 640, height: 480, fps: 30}

* ``depth: URL``: each GET of the URL gives the newest depth image as a 16-bit single-channel PNG of
  millimetres along the optical axis, 0 where there is no reading (the rehearsal cell's
  ``/<camera>.depth.png``; ``motormind.grounding.camera.encode_depth_png``). A background thread
  fetches it in a loop and keeps the newest, as for a colour stream. The depth image must be
  registered to the colour camera (same optics and viewpoint); a different size is scaled to the
  colour image's by nearest neighbour. Colour and depth are read independently: each is its
  stream's newest frame, so while the scene moves they may be up to a frame period apart.
* ``source: pyrealsense2`` (or ``pyrealsense2:SERIAL``): an Intel RealSense through
  ``pyrealsense2`` (imported on first use: ``pip install pyrealsense2``), colour (bgr8) and depth
  (z16 times the device's depth scale) from one frameset, depth aligned to the colour image
  (``rs.align``); ``depth: false`` reads colour only. Its intrinsics are not read from the device:
  the calibration comes from the calibration file like every camera's. No test runs it (no device
  here).

``CameraSet.read_frames(depth=True)`` gives ``({name: RGB}, {name: depth m, NaN where no reading})``,
each depth image the same size and orientation (``rotate``) as its colour image.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from motormind.errors import ConfigError, RobotFault

STREAM_WAIT_S = 5.0        # read() waits this long for a stream's first frame
STREAM_STALE_S = 5.0       # a stream whose newest frame is older than this has stopped
DEPTH_POLL_S = 0.05        # a depth URL is fetched at most this often (the cell's waits for a fresh frame)
REALSENSE = "pyrealsense2"  # the source kind of an Intel RealSense (pyrealsense2[:SERIAL])


class CameraError(RobotFault):
    """A camera is missing, cannot be opened, or stopped delivering frames (kind 'camera')."""

    def __init__(self, message: str, camera: str = ""):
        super().__init__(message, code=None, kind="camera")
        self.camera = camera


@dataclass(frozen=True)
class CameraConfig:
    name: str
    source: int | str
    width: int | None = None
    height: int | None = None
    rotate: int = 0                 # degrees clockwise applied to each frame: 0, 90, 180, 270
    depth: str | bool | None = None  # a depth PNG URL (mm); a RealSense: True (default) / False
    serial: str | None = None       # a RealSense's serial number (None: the only one connected)
    fps: int | None = None          # a RealSense's frame rate (default 30)

    @property
    def kind(self) -> str:
        """``pyrealsense2`` (an Intel RealSense) or ``opencv`` (everything OpenCV opens)."""
        return REALSENSE if self.source == REALSENSE else "opencv"

    @property
    def has_depth(self) -> bool:
        return bool(self.depth) if self.kind == REALSENSE else isinstance(self.depth, str)

    @classmethod
    def parse(cls, name: str, spec) -> "CameraConfig":
        if isinstance(spec, CameraConfig):
            return spec
        if isinstance(spec, (int, str)) and not isinstance(spec, bool):
            spec = {"source": spec}
        if not isinstance(spec, dict) or "source" not in spec:
            raise ConfigError(f"cameras.{name}: must be a source (index, path or URL) or a mapping "
                              f"with 'source', got {spec!r}")
        unknown = set(spec) - {"source", "width", "height", "rotate", "name", "depth", "serial", "fps"}
        if unknown:
            raise ConfigError(f"cameras.{name}: unknown keys {sorted(unknown)} (known: depth, fps, height, "
                              "name, rotate, serial, source, width)")
        src = spec["source"]
        if isinstance(src, str) and src.strip().isdigit():
            src = int(src)
        if isinstance(src, bool) or not isinstance(src, (int, str)) or src == "":
            raise ConfigError(f"cameras.{name}.source: must be a device index, path or URL, got {src!r}")
        serial = spec.get("serial")
        if isinstance(src, str) and src.startswith(REALSENSE + ":"):      # pyrealsense2:SERIAL
            src, serial = REALSENSE, src[len(REALSENSE) + 1:]
        rot = int(spec.get("rotate", 0))
        if rot not in (0, 90, 180, 270):
            raise ConfigError(f"cameras.{name}.rotate: must be 0, 90, 180 or 270, got {rot!r}")
        dep = spec.get("depth")
        if src == REALSENSE:
            if dep is None:
                dep = True
            if not isinstance(dep, bool):
                raise ConfigError(f"cameras.{name}.depth: a {REALSENSE} camera's depth is true or false, "
                                  f"got {dep!r}")
            if serial is not None and (not isinstance(serial, (str, int)) or str(serial).strip() == ""):
                raise ConfigError(f"cameras.{name}.serial: must be the RealSense's serial number, got {serial!r}")
        else:
            if dep is False:
                dep = None
            if dep is not None and not (isinstance(dep, str) and dep.split("://", 1)[0] in ("http", "https")
                                        and "://" in dep):
                raise ConfigError(f"cameras.{name}.depth: must be the http(s) URL of a 16-bit PNG depth image "
                                  f"in mm (e.g. http://HOST:8090/{name}.depth.png), got {dep!r}")
            if serial is not None:
                raise ConfigError(f"cameras.{name}.serial: only a {REALSENSE} source has a serial number")
        fps = spec.get("fps")
        if fps is not None and (isinstance(fps, bool) or not isinstance(fps, int) or fps < 1):
            raise ConfigError(f"cameras.{name}.fps: must be a whole number of frames per second >= 1, got {fps!r}")
        return cls(name=str(name), source=src, width=spec.get("width"), height=spec.get("height"), rotate=rot,
                   depth=dep, serial=None if serial is None else str(serial).strip(), fps=fps)


def parse_camera_specs(items) -> dict:
    """``NAME=SOURCE`` items (a list, or one string of them separated by commas, as the ``camera:=``
    launch argument and ``--camera`` give them) -> ``{name: source}``. The one rule for every entry
    point: each item names its camera (the profile's ``cameras`` section describes it by that name),
    a name is given once, a source is not empty."""
    if isinstance(items, str):
        items = [i for i in (x.strip() for x in items.split(",")) if i]
    out: dict = {}
    for item in items or ():
        name, sep, src = str(item).partition("=")
        name, src = name.strip(), src.strip()
        if not sep or not name or not src:
            raise ConfigError(f"camera: {item!r} is not NAME=SOURCE (e.g. front=0 or front=rtsp://...)")
        if name in out:
            raise ConfigError(f"camera: {name!r} is given twice")
        out[name] = src
    return out


class Camera:
    """One OpenCV capture. ``open()`` raises CameraError naming the camera if it is missing."""

    def __init__(self, config: CameraConfig):
        self.config = config
        self._cap = None
        self._lock = threading.Lock()
        self._grabber: threading.Thread | None = None
        self._newest = None                    # (time.monotonic(), BGR frame) of a stream
        self._stream_error = ""
        self._closed = threading.Event()
        self._depth_reader: threading.Thread | None = None
        self._newest_depth = None              # (time.monotonic(), HxW float32 m) of the depth URL
        self._depth_error = ""

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def has_depth(self) -> bool:
        return self.config.has_depth

    def _describe(self) -> str:
        src = self.config.source
        return f"device index {src}" if isinstance(src, int) else repr(src)

    @property
    def is_stream(self) -> bool:
        src = self.config.source
        return isinstance(src, str) and "://" in src

    @property
    def _is_file(self) -> bool:
        src = self.config.source
        return isinstance(src, str) and "://" not in src and not src.startswith("/dev/") and os.path.isfile(src)

    def open(self) -> "Camera":
        import cv2
        src = self.config.source
        if isinstance(src, str) and "://" not in src and not os.path.exists(src):
            raise CameraError(f"camera {self.name!r}: {self._describe()} does not exist", self.name)
        cap = cv2.VideoCapture(src)
        if not cap.isOpened():
            cap.release()
            raise CameraError(f"camera {self.name!r}: cannot open {self._describe()} "
                              "(device missing, busy, or stream unreachable)", self.name)
        if self.config.width:
            cap.set(cv2.CAP_PROP_FRAME_WIDTH, int(self.config.width))
        if self.config.height:
            cap.set(cv2.CAP_PROP_FRAME_HEIGHT, int(self.config.height))
        ok, frame = cap.read()
        if not ok or frame is None:
            cap.release()
            raise CameraError(f"camera {self.name!r}: {self._describe()} opened but delivered no frame", self.name)
        if self._is_file:
            cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
        self._cap = cap
        if self.is_stream:
            import time
            self._closed.clear()
            self._newest = (time.monotonic(), frame)
            self._stream_error = ""
            self._grabber = threading.Thread(target=self._grab, args=(cap,), daemon=True,
                                             name=f"camera-{self.name}")
            self._grabber.start()
        if self.has_depth:
            self._open_depth()
        return self

    # -- depth beside the colour: a URL giving the newest 16-bit PNG (mm) per request ---------------
    def _fetch_depth(self) -> np.ndarray:
        import urllib.request

        from motormind.grounding.camera import decode_depth_png
        url = self.config.depth
        try:
            with urllib.request.urlopen(url, timeout=STREAM_WAIT_S) as r:      # noqa: S310 - a configured URL
                data = r.read()
        except Exception as e:  # noqa: BLE001
            raise CameraError(f"camera {self.name!r}: cannot read its depth from {url!r}: {e}", self.name) from None
        try:
            return decode_depth_png(data)
        except ValueError as e:
            raise CameraError(f"camera {self.name!r}: depth from {url!r}: {e}", self.name) from None

    def _open_depth(self) -> None:
        import time
        first = self._fetch_depth()            # a missing depth source is reported at bring-up
        self._closed.clear()
        self._newest_depth, self._depth_error = (time.monotonic(), first), ""
        self._depth_reader = threading.Thread(target=self._poll_depth, daemon=True, name=f"camera-{self.name}-depth")
        self._depth_reader.start()

    def _poll_depth(self) -> None:
        """The depth URL's reader: fetches it in a loop, keeping the newest image (the colour
        stream's newest-frame rule); an error is kept and retried until the reader is closed."""
        import time
        while not self._closed.is_set():
            t0 = time.monotonic()
            try:
                self._newest_depth, self._depth_error = (time.monotonic(), self._fetch_depth()), ""
            except CameraError as e:
                self._depth_error = str(e)
            self._closed.wait(max(0.0, DEPTH_POLL_S - (time.monotonic() - t0)))

    def read_depth(self) -> np.ndarray:
        """The newest depth image: HxW float32 metres along the optical axis, NaN where there is no
        reading, upright as the colour frames (``rotate``)."""
        import time
        if not self.has_depth:
            raise CameraError(f"camera {self.name!r} has no depth source (cameras.{self.name}.depth)", self.name)
        with self._lock:
            if self._depth_reader is None:
                self._open_depth()
        t, depth = self._newest_depth
        age = time.monotonic() - t
        if age > STREAM_STALE_S:
            raise CameraError(f"camera {self.name!r}: no depth from {self.config.depth!r} for {age:.1f} s"
                              + (f" ({self._depth_error})" if self._depth_error else ""), self.name)
        return rotated(depth, self.config.rotate)

    def _grab(self, cap) -> None:
        """A stream's reader: every frame as it arrives, keeping the newest. It owns ``cap`` and
        releases it when it stops (closed, or the stream ended): never while another thread reads."""
        import time
        try:
            while not self._closed.is_set():
                ok, frame = cap.read()
                if not ok or frame is None:
                    self._stream_error = "the stream ended or the connection dropped"
                    return
                self._newest = (time.monotonic(), frame)
        finally:
            cap.release()

    def _read_stream(self):
        import time
        end = time.monotonic() + STREAM_WAIT_S
        while True:
            t, frame = self._newest if self._newest is not None else (None, None)
            age = time.monotonic() - t if t is not None else None
            if age is not None and age <= STREAM_STALE_S:
                return frame
            if self._stream_error or time.monotonic() > end:
                why = self._stream_error or (f"no frame for {age:.1f} s" if age is not None else "no frame")
                raise CameraError(f"camera {self.name!r}: no frame from {self._describe()} ({why})", self.name)
            time.sleep(0.01)

    def read(self) -> np.ndarray:
        """The next frame as HxWx3 uint8 RGB, upright."""
        import cv2
        with self._lock:
            if self._cap is None:
                self.open()
        if self.is_stream:
            frame = self._read_stream()
            return self._upright(frame)
        with self._lock:
            ok, frame = self._cap.read()
            if (not ok or frame is None) and self._is_file:     # a rehearsal video: loop it
                self._cap.set(cv2.CAP_PROP_POS_FRAMES, 0)
                ok, frame = self._cap.read()
            if not ok or frame is None:
                raise CameraError(f"camera {self.name!r}: no frame from {self._describe()} "
                                  "(disconnected or stream ended)", self.name)
        return self._upright(frame)

    def _upright(self, frame) -> np.ndarray:
        return upright(frame, self.config.rotate)

    def close(self) -> None:
        self._closed.set()
        reader, self._depth_reader = self._depth_reader, None
        if reader is not None:
            reader.join(STREAM_WAIT_S + 1.0)
        self._newest_depth = None
        with self._lock:
            grabber, self._grabber = self._grabber, None
            if grabber is not None:        # a stream: its reader releases the capture after its last read
                grabber.join(2.0)
            elif self._cap is not None:
                self._cap.release()
            self._cap = None
            self._newest = None


def rotated(img: np.ndarray, rotate: int) -> np.ndarray:
    """``img`` turned ``rotate`` degrees clockwise (0, 90, 180, 270): any dtype, 2 or 3 dims."""
    import cv2
    if rotate == 90:
        img = cv2.rotate(img, cv2.ROTATE_90_CLOCKWISE)
    elif rotate == 180:
        img = cv2.rotate(img, cv2.ROTATE_180)
    elif rotate == 270:
        img = cv2.rotate(img, cv2.ROTATE_90_COUNTERCLOCKWISE)
    return np.ascontiguousarray(img)


def upright(frame: np.ndarray, rotate: int) -> np.ndarray:
    """An OpenCV frame (BGR or grey) as HxWx3 uint8 RGB, turned ``rotate`` degrees clockwise."""
    import cv2
    frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB if frame.ndim == 2 else cv2.COLOR_BGR2RGB)
    return np.ascontiguousarray(rotated(frame, rotate), dtype=np.uint8)


def _import_realsense():
    try:
        import pyrealsense2 as rs
    except ImportError:
        raise ConfigError(f"a camera source '{REALSENSE}' needs the Python package pyrealsense2 (Intel "
                          "RealSense SDK), which is not installed: .venv/bin/pip install pyrealsense2") from None
    return rs


class RealSenseCamera:
    """An Intel RealSense through ``pyrealsense2``: colour and, unless ``depth: false``, depth from
    one frameset, the depth aligned to the colour image and scaled to metres (the device's depth
    scale; 0 = no reading). A background thread keeps the newest frameset. The calibration comes
    from the calibration file (the device's intrinsics are not read). No test runs this class: it
    needs the device."""

    def __init__(self, config: CameraConfig):
        self.config = config
        self._pipe = None
        self._newest = None                    # (time.monotonic(), BGR, depth m or None)
        self._error = ""
        self._closed = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        return self.config.name

    @property
    def has_depth(self) -> bool:
        return self.config.has_depth

    def _describe(self) -> str:
        return f"RealSense {self.config.serial}" if self.config.serial else "the RealSense"

    def open(self) -> "RealSenseCamera":
        import time
        rs = _import_realsense()
        c = self.config
        w, h, fps = int(c.width or 640), int(c.height or 480), int(c.fps or 30)
        cfg = rs.config()
        if c.serial:
            cfg.enable_device(c.serial)
        cfg.enable_stream(rs.stream.color, w, h, rs.format.bgr8, fps)
        if self.has_depth:
            cfg.enable_stream(rs.stream.depth, w, h, rs.format.z16, fps)
        pipe = rs.pipeline()
        try:
            prof = pipe.start(cfg)
        except RuntimeError as e:
            raise CameraError(f"camera {self.name!r}: cannot start {self._describe()} at {w}x{h} {fps} fps: {e}",
                              self.name) from None
        scale = float(prof.get_device().first_depth_sensor().get_depth_scale()) if self.has_depth else 0.0
        align = rs.align(rs.stream.color) if self.has_depth else None
        self._pipe, self._closed = pipe, threading.Event()
        self._newest, self._error = None, ""
        self._thread = threading.Thread(target=self._grab, args=(pipe, align, scale), daemon=True,
                                        name=f"camera-{self.name}")
        self._thread.start()
        end = time.monotonic() + STREAM_WAIT_S
        while self._newest is None and not self._error and time.monotonic() < end:
            time.sleep(0.01)
        if self._newest is None:
            self.close()
            raise CameraError(f"camera {self.name!r}: {self._describe()} delivered no frame "
                              f"({self._error or f'within {STREAM_WAIT_S:g} s'})", self.name)
        return self

    def _grab(self, pipe, align, scale: float) -> None:
        import time

        from motormind.grounding.camera import depth_from_units
        try:
            while not self._closed.is_set():
                frames = pipe.wait_for_frames(int(STREAM_STALE_S * 1000))
                if align is not None:
                    frames = align.process(frames)
                colour = frames.get_color_frame()
                dep = frames.get_depth_frame() if align is not None else None
                if not colour or (align is not None and not dep):
                    continue
                depth = depth_from_units(np.asanyarray(dep.get_data()).copy(), scale) if dep else None
                self._newest = (time.monotonic(), np.asanyarray(colour.get_data()).copy(), depth)
        except RuntimeError as e:          # pyrealsense2's timeout or a disconnect
            self._error = str(e)
        finally:
            try:
                pipe.stop()
            except Exception:  # noqa: BLE001
                pass

    def _frames(self):
        import time
        with self._lock:
            if self._pipe is None:
                self.open()
        t, bgr, depth = self._newest
        age = time.monotonic() - t
        if self._error or age > STREAM_STALE_S:
            raise CameraError(f"camera {self.name!r}: no frame from {self._describe()} "
                              f"({self._error or f'for {age:.1f} s'})", self.name)
        return bgr, depth

    def read(self) -> np.ndarray:
        return upright(self._frames()[0], self.config.rotate)

    def read_depth(self) -> np.ndarray:
        if not self.has_depth:
            raise CameraError(f"camera {self.name!r}: depth is off (cameras.{self.name}.depth: false)", self.name)
        return rotated(self._frames()[1], self.config.rotate)

    def close(self) -> None:
        self._closed.set()
        if self._thread is not None:
            self._thread.join(STREAM_STALE_S + 1.0)
        self._thread, self._pipe, self._newest = None, None, None


def make_camera(config: CameraConfig):
    """The camera object for a config: a RealSenseCamera or an (OpenCV) Camera."""
    return RealSenseCamera(config) if config.kind == REALSENSE else Camera(config)


class CameraSet:
    """Named cameras. ``CameraSet({"front": 0, "wrist": "rtsp://..."})``; opened at construction
    (``open=True``) so a missing camera is reported at bring-up, not at the first observation."""

    def __init__(self, cameras=None, open: bool = True):
        self.cameras: dict = {}                # name -> Camera | RealSenseCamera
        items = []
        if cameras is None:
            items = []
        elif isinstance(cameras, dict):
            items = list(cameras.items())
        elif isinstance(cameras, (list, tuple)):
            for i, c in enumerate(cameras):
                if isinstance(c, CameraConfig):
                    items.append((c.name, c))
                elif isinstance(c, dict) and "name" in c:
                    items.append((c["name"], c))
                else:
                    raise ConfigError(f"cameras[{i}]: needs a 'name', got {c!r}")
        else:
            raise ConfigError(f"cameras: must be a mapping name -> source, got {type(cameras).__name__}")
        for name, spec in items:
            if name in self.cameras:
                raise ConfigError(f"cameras: duplicate name {name!r}")
            self.cameras[str(name)] = make_camera(CameraConfig.parse(str(name), spec))
        if open:
            try:
                for cam in self.cameras.values():
                    cam.open()
            except Exception:
                self.close()
                raise

    @property
    def names(self) -> list[str]:
        return list(self.cameras)

    def read_all(self) -> dict[str, np.ndarray]:
        return {name: cam.read() for name, cam in self.cameras.items()}

    @property
    def depth_names(self) -> list[str]:
        """The cameras with a depth source."""
        return [n for n, c in self.cameras.items() if c.has_depth]

    def read_frames(self, depth: bool = False) -> tuple[dict, dict]:
        """({name: HxWx3 RGB}, {name: HxW float32 m, NaN where no reading}): with ``depth``, each
        camera that has depth also gives its newest depth image, scaled (nearest neighbour) to its
        colour image's size if it differs."""
        images = self.read_all()
        depths = {}
        if depth:
            for name in self.depth_names:
                d = self.cameras[name].read_depth()
                h, w = images[name].shape[:2]
                if d.shape != (h, w):
                    import cv2
                    d = cv2.resize(d, (w, h), interpolation=cv2.INTER_NEAREST)
                depths[name] = np.ascontiguousarray(d, dtype=np.float32)
        return images, depths

    def close(self) -> None:
        for cam in self.cameras.values():
            cam.close()

    def __len__(self) -> int:
        return len(self.cameras)
