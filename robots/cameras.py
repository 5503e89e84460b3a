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
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

import numpy as np

from motormind.errors import ConfigError, RobotFault

STREAM_WAIT_S = 5.0        # read() waits this long for a stream's first frame
STREAM_STALE_S = 5.0       # a stream whose newest frame is older than this has stopped


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

    @classmethod
    def parse(cls, name: str, spec) -> "CameraConfig":
        if isinstance(spec, CameraConfig):
            return spec
        if isinstance(spec, (int, str)) and not isinstance(spec, bool):
            spec = {"source": spec}
        if not isinstance(spec, dict) or "source" not in spec:
            raise ConfigError(f"cameras.{name}: must be a source (index, path or URL) or a mapping "
                              f"with 'source', got {spec!r}")
        unknown = set(spec) - {"source", "width", "height", "rotate", "name"}
        if unknown:
            raise ConfigError(f"cameras.{name}: unknown keys {sorted(unknown)}")
        src = spec["source"]
        if isinstance(src, str) and src.strip().isdigit():
            src = int(src)
        if isinstance(src, bool) or not isinstance(src, (int, str)) or src == "":
            raise ConfigError(f"cameras.{name}.source: must be a device index, path or URL, got {src!r}")
        rot = int(spec.get("rotate", 0))
        if rot not in (0, 90, 180, 270):
            raise ConfigError(f"cameras.{name}.rotate: must be 0, 90, 180 or 270, got {rot!r}")
        return cls(name=str(name), source=src, width=spec.get("width"), height=spec.get("height"), rotate=rot)


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

    @property
    def name(self) -> str:
        return self.config.name

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
        return self

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
        import cv2
        if frame.ndim == 2:
            frame = cv2.cvtColor(frame, cv2.COLOR_GRAY2RGB)
        else:
            frame = cv2.cvtColor(frame, cv2.COLOR_BGR2RGB)
        rot = self.config.rotate
        if rot == 90:
            frame = cv2.rotate(frame, cv2.ROTATE_90_CLOCKWISE)
        elif rot == 180:
            frame = cv2.rotate(frame, cv2.ROTATE_180)
        elif rot == 270:
            frame = cv2.rotate(frame, cv2.ROTATE_90_COUNTERCLOCKWISE)
        return np.ascontiguousarray(frame, dtype=np.uint8)

    def close(self) -> None:
        self._closed.set()
        with self._lock:
            grabber, self._grabber = self._grabber, None
            if grabber is not None:        # a stream: its reader releases the capture after its last read
                grabber.join(2.0)
            elif self._cap is not None:
                self._cap.release()
            self._cap = None
            self._newest = None


class CameraSet:
    """Named cameras. ``CameraSet({"front": 0, "wrist": "rtsp://..."})``; opened at construction
    (``open=True``) so a missing camera is reported at bring-up, not at the first observation."""

    def __init__(self, cameras=None, open: bool = True):
        self.cameras: dict[str, Camera] = {}
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
            self.cameras[str(name)] = Camera(CameraConfig.parse(str(name), spec))
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

    def close(self) -> None:
        for cam in self.cameras.values():
            cam.close()

    def __len__(self) -> int:
        return len(self.cameras)
