"""The episode record: a run directory with JSONL events, a summary, and frames.

    RUN_DIR/events.jsonl        one JSON object per line: {"t": s since start, "kind": ..., ...}
    RUN_DIR/summary.json        outcome, budgets, timings, VLM call totals, simulator versions
    RUN_DIR/contact_sheet.png   frames captured whenever a role looked, labelled
    RUN_DIR/video.webm          the same frames as a short video (video.mp4 where OpenCV can write H.264)
    RUN_DIR/rollout.webm        with --videos: the rollout, every camera side by side, at the control rate
                                or a stated fraction (a real-time arm: a stated rate of its emulator's
                                clock); rollout.json says which (rollout.mp4 where OpenCV writes H.264)
    RUN_DIR/episode.html        with --videos: the episode on one page (evaluate/episode_page.py)

Writing is thread-safe and every line is flushed as it is written, so a crashed run keeps
everything up to the crash. An event value JSON cannot hold is written as a bounded description of
itself, never dropped.
"""
from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

import numpy as np

from .strict_json import UNWRITABLE, writable


# A video a browser plays: H.264 in MP4 where this OpenCV's FFmpeg has an encoder for it (the PyPI
# wheels have none), else VP8 in WebM (they all have libvpx). OpenCV's own default, mp4v (MPEG-4
# Part 2), plays in no Chromium.
VIDEO_FORMATS = (("avc1", ".mp4"), ("VP80", ".webm"))
VIDEO_SUFFIXES = tuple(ext for _, ext in VIDEO_FORMATS)
_OPENCV_CHATTER = ("OpenCV: FFMPEG: tag", "cap_ffmpeg_impl", "VIDEOIO/FFMPEG")
_video_format: list = []              # the format this process found that opens, once found


def _opencv_quietly(make):
    """``make()`` with what OpenCV's FFmpeg prints on stderr while a writer opens (a fourcc it maps
    to another tag, an encoder it lacks) left out; anything else printed meanwhile is passed on."""
    import os
    import sys
    import tempfile
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):
        return make()
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), 2)
        try:
            return make()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            tmp.seek(0)
            keep = [ln for ln in tmp.read().decode(errors="replace").splitlines(True)
                    if not any(c in ln for c in _OPENCV_CHATTER)]
            if keep:
                os.write(2, "".join(keep).encode())


def write_video(stem: str | Path, frames, fps: float, size: tuple[int, int]) -> Path | None:
    """``frames`` (RGB, each ``size`` = (w, h), or resized to it) as ``stem.mp4`` (H.264) or
    ``stem.webm`` (VP8), the first of ``VIDEO_FORMATS`` this OpenCV writes; None when it writes none."""
    import cv2
    stem = Path(stem)
    w, h = size
    tried = _video_format or VIDEO_FORMATS
    for fourcc, ext in tried:
        p = stem.with_suffix(ext)
        vw = _opencv_quietly(lambda: cv2.VideoWriter(str(p), cv2.VideoWriter_fourcc(*fourcc), float(fps), (w, h)))
        if not vw.isOpened():
            vw.release()
            p.unlink(missing_ok=True)
            continue
        _video_format[:] = [(fourcc, ext)]
        for img in frames:
            img = cv2.resize(img, (w, h)) if img.shape[:2] != (h, w) else img
            vw.write(cv2.cvtColor(np.ascontiguousarray(img), cv2.COLOR_RGB2BGR))
        vw.release()
        return p
    return None


def video_file(run_dir: str | Path, stem: str) -> Path | None:
    """The video ``stem`` of a run directory, in whichever format it was written (None: none)."""
    for ext in VIDEO_SUFFIXES:
        p = Path(run_dir) / f"{stem}{ext}"
        if p.exists():
            return p
    return None


def json_default(o):
    """``json.dumps(default=...)`` for numpy values, tuples and sets; anything else as its str."""
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, (np.floating, np.integer)):
        return o.item()
    if isinstance(o, (set, tuple)):
        return list(o)
    return str(o)


def _finite(o):
    """JSON has no NaN/Infinity: write them as strings so every line stays valid JSON."""
    if isinstance(o, float) and not math.isfinite(o):
        return str(o)
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    return o


def _dumps(o) -> str:
    return json.dumps(_finite(o), default=json_default)


def _line(ev: dict) -> tuple[str, dict]:
    """(the JSON line, the event as recorded). A value JSON cannot hold (nested past the recursion
    limit, an integer of more than 4300 digits) is recorded as a bounded description of itself, so
    the event is never lost, nor the events after it."""
    try:
        return _dumps(ev), ev
    except UNWRITABLE:
        safe = {k: writable(v, _dumps) for k, v in ev.items()}
        return _dumps(safe), safe


class Recorder:
    def __init__(self, run_dir: str | Path | None, clock=time.monotonic):
        self.dir = Path(run_dir) if run_dir else None
        self.clock = clock
        self.t0 = clock()
        self._lock = threading.Lock()
        self._fh = None
        self.frames: list[tuple[str, np.ndarray]] = []
        self.counts: dict = {}
        self.listeners: list = []
        if self.dir:
            self.dir.mkdir(parents=True, exist_ok=True)
            self._fh = open(self.dir / "events.jsonl", "a", buffering=1)

    def __call__(self, kind: str, **data) -> None:
        self.event(kind, **data)

    def event(self, kind: str, **data) -> dict:
        ev = {"t": round(self.clock() - self.t0, 4), "kind": kind, **data}
        line, ev = _line(ev)
        with self._lock:
            self.counts[kind] = self.counts.get(kind, 0) + 1
            if self._fh:
                self._fh.write(line + "\n")
        for fn in list(self.listeners):
            fn(ev)
        return ev

    def frame(self, label: str, images: dict, max_frames: int = 400) -> None:
        if not images or len(self.frames) >= max_frames:
            return
        tiles = [np.asarray(v) for v in images.values()]
        h = min(t.shape[0] for t in tiles)
        tiles = [t[:h] for t in tiles]
        with self._lock:
            self.frames.append((label, np.concatenate(tiles, axis=1)))

    def write_json(self, name: str, obj) -> Path | None:
        if not self.dir:
            return None
        p = self.dir / name
        tmp = p.with_suffix(p.suffix + ".tmp")
        tmp.write_text(json.dumps(_finite(obj), indent=2, default=json_default))
        tmp.replace(p)
        return p

    def write_media(self, fps: float = 2.0) -> dict:
        """contact_sheet.png and the video (``write_video``) of the captured frames. Returns the paths written."""
        out: dict = {}
        if not self.dir or not self.frames:
            return out
        import cv2  # lazy: OpenCV is only needed here
        frames = self.frames
        pick = frames if len(frames) <= 24 else [frames[int(i)] for i in np.linspace(0, len(frames) - 1, 24)]
        h, w = pick[0][1].shape[:2]
        cols = min(6, len(pick))
        rows = math.ceil(len(pick) / cols)
        sheet = np.full((rows * (h + 18), cols * w, 3), 255, dtype=np.uint8)
        for k, (label, img) in enumerate(pick):
            r, c = divmod(k, cols)
            y, x = r * (h + 18), c * w
            sheet[y + 18:y + 18 + h, x:x + w] = cv2.resize(img, (w, h)) if img.shape[:2] != (h, w) else img
            cv2.putText(sheet, label[:28], (x + 2, y + 13), cv2.FONT_HERSHEY_SIMPLEX, 0.35, (0, 0, 0), 1)
        p = self.dir / "contact_sheet.png"
        cv2.imwrite(str(p), cv2.cvtColor(sheet, cv2.COLOR_RGB2BGR))
        out["contact_sheet"] = str(p)
        vp = write_video(self.dir / "video", (img for _, img in frames), fps, (w, h))
        if vp is not None:
            out["video"] = str(vp)
        return out

    def close(self) -> None:
        with self._lock:
            if self._fh:
                self._fh.close()
                self._fh = None


ROLLOUT_PX = 128            # each camera's tile in the rollout video, px high (small: cheap to write and load)


class Rollout:
    """A rollout video (``--videos``): every camera side by side, one frame every ``every`` control
    steps, taken while the robot executes (not only when a role looks).

    The hook is the backend's per-control-step call (``_raw_step``: LIBERO's env step), wrapped on
    this robot instance while attached and restored by ``detach`` (an evaluation's simulator is
    reused by the next episode). A backend without one has no control steps to film: ``attach``
    says so and the video is not written. Each frame renders the cameras at the backend's image
    size and is shrunk to ``px`` high; the video plays at the control rate / ``every``
    (``control_hz``: the backend's ``STEP_S``, LIBERO 20 Hz), as ``rollout.json`` states."""

    def __init__(self, robot, every: int = 1, px: int = ROLLOUT_PX, control_hz: float | None = None):
        if int(every) < 1:
            raise ValueError(f"rollout every: at least 1 control step a frame, got {every}")
        self.robot, self.every, self.px = robot, int(every), int(px)
        import sys
        step_s = getattr(robot, "step_s", None) or getattr(sys.modules.get(type(robot).__module__), "STEP_S", None)
        self.control_hz = float(control_hz or (1.0 / step_s if step_s else 20.0))
        self.frames: list[np.ndarray] = []
        self.steps = 0
        self.note = ""
        self._orig = None

    def attach(self) -> "Rollout":
        raw = getattr(self.robot, "_raw_step", None)
        if raw is None or not hasattr(self.robot, "render"):
            self.note = f"{type(self.robot).__name__} has no per-step hook to film: no rollout video"
            return self
        self._orig = raw

        def step(action, _raw=raw):
            _raw(action)
            self.steps += 1
            if self.steps % self.every == 0:
                self._grab()
        self.robot._raw_step = step          # this instance only; detach() restores the class's
        return self

    def detach(self) -> None:
        if self._orig is not None:
            self.robot.__dict__.pop("_raw_step", None)
            self._orig = None

    def _grab(self) -> None:
        import cv2
        tiles = []
        for cam in list(getattr(self.robot, "camera_names", []) or []):
            img = np.asarray(self.robot.render(cam))
            h, w = img.shape[:2]
            if h != self.px:
                img = cv2.resize(img, (max(1, round(w * self.px / h)), self.px), interpolation=cv2.INTER_AREA)
            tiles.append(img)
        if tiles:
            self.frames.append(np.concatenate(tiles, axis=1))

    def write(self, run_dir: str | Path) -> dict:
        """The rollout video (``write_video``: rollout.mp4 or rollout.webm) and rollout.json: frames,
        steps, fps, the fraction, the file."""
        self.detach()
        return _write_rollout(run_dir, self.frames, {
            "frames": len(self.frames), "control_steps": self.steps, "every": self.every,
            "control_hz": self.control_hz, "fps": round(self.control_hz / self.every, 3),
            "rate": "the control rate" if self.every == 1 else f"1/{self.every} of the control rate",
            **({"note": self.note} if self.note else {})})


def _write_rollout(run_dir: str | Path, frames: list, info: dict) -> dict:
    """``frames`` as RUN_DIR/rollout.webm (or .mp4) at ``info["fps"]``, and ``info`` as rollout.json."""
    d = Path(run_dir)
    if frames:
        h, w = frames[0].shape[:2]
        vp = write_video(d / "rollout", frames, info["fps"], (w, h))
        if vp is not None:
            info["video"] = str(vp)
        else:
            info["note"] = "this OpenCV writes no video a browser plays (" + \
                ", ".join(f"{c} {e}" for c, e in VIDEO_FORMATS) + ")"
    (d / "rollout.json").write_text(json.dumps(info, indent=1))
    return info


class ClockRollout:
    """A rollout video for a robot with no control steps to hook (the xArm6: a real-time arm): a frame
    every ``1/hz`` s of ``clock`` (the cell emulator's simulated time) by ``grab()`` on a thread of its
    own. Frame k shows ``t0 + k/hz``: S clock seconds give ``floor(S * hz) + 1`` frames, played at
    ``hz`` fps. A frame due while the previous one was taken repeats the newest picture (``late``
    counts them). ``grab.close()``, if any, runs on that thread (a GL context is its maker's)."""
    POLL_S = 0.005

    def __init__(self, grab, clock, hz: float, what: str = "the clock"):
        if not float(hz) > 0:
            raise ValueError(f"rollout hz: frames per second of the clock, above 0, got {hz}")
        self.grab, self.clock, self.hz, self.what = grab, clock, float(hz), what
        self.frames: list[np.ndarray] = []
        self.late, self.t0, self.t1, self.note = 0, None, None, ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def attach(self) -> "ClockRollout":
        self.t0 = float(self.clock())
        self._thread = threading.Thread(target=self._run, name="rollout", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                due = int((float(self.clock()) - self.t0) * self.hz + 1e-9) + 1
                if due <= len(self.frames):
                    self._stop.wait(self.POLL_S)
                    continue
                img = np.asarray(self.grab())
                self.late += due - len(self.frames) - 1
                self.frames += [img] * (due - len(self.frames))
        except Exception as e:  # noqa: BLE001 - a rollout that cannot render says why; the episode goes on
            self.note = f"the rollout stopped: {type(e).__name__}: {e}"
        finally:
            close = getattr(self.grab, "close", None)
            if close is not None:
                close()

    def detach(self) -> None:
        t, self._thread = self._thread, None
        if t is not None:
            self._stop.set()
            t.join(10.0)
            self.t1 = float(self.clock())

    def write(self, run_dir: str | Path) -> dict:
        """rollout.webm (or .mp4) at ``hz`` fps and rollout.json: frames, the rate, the span filmed."""
        self.detach()
        return _write_rollout(run_dir, self.frames, {
            "frames": len(self.frames), "hz": self.hz, "fps": self.hz, "clock": self.what,
            "span_s": round((self.t1 or self.t0 or 0.0) - (self.t0 or 0.0), 3), "late": self.late,
            "rate": f"{self.hz:g} Hz of {self.what}", **({"note": self.note} if self.note else {})})
