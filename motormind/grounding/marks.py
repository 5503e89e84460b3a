"""Marks on the images a VLM sees, drawn from the cameras' calibration (docs/grounding.md, "Marks").

In every calibrated camera:

* the grip point (the eef position: between the fingertips) as a thin ring, labelled ``grip``;
* the robot's direction words (the profile's, default forward, left, up) as short labelled arrows
  from the grip point, each along the image direction a small move that way would take it (an
  arrow shortened by perspective is drawn shorter; one along the line of sight is left out and
  said so in the info);
* a scale bar of a stated length at the grip point's depth (bottom-left corner, labelled);
* in a gripper camera, the fingers' closing line: the segment the fingertips travel through the
  grip point, ticks where they are now.

Marks never cover what they mark: 1 px lines (thicker only on large images), a ring and no dot,
the lines stop at the ring, labels offset. ``mark_image`` returns a new image and leaves the
frame it was given untouched; with marks off the frame is returned as it is (bit-identical).

Options come from the VLM config's ``marks`` key (``MarkOptions.parse``): ``true`` / absent (all
on), ``false`` (none), or a mapping of the fields below.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np

from ..errors import ConfigError
from .camera import CameraCalibration, eef_pose

SCALE_STEPS_MM = (5, 10, 20, 50, 100, 200, 500, 1000)
COLOURS = {"grip": (255, 0, 255), "closing": (255, 230, 0), "scale": (255, 255, 255), "shadow": (0, 0, 0)}
AXIS_COLOURS = ((255, 60, 60), (60, 230, 60), (70, 130, 255))   # x-ish red, y-ish green, z-ish blue
ALONG_SIGHT = 0.2          # an arrow shorter than this fraction of the longest is along the line of sight


@dataclass(frozen=True)
class MarkOptions:
    enabled: bool = True
    grip_point: bool = True
    arrows: tuple = ("forward", "left", "up")   # direction words drawn as arrows (the profile's words)
    arrow_mm: float = 10.0     # the small move whose image direction an arrow shows (mm)
    scale_bar_mm: float | None = None           # None: the 1-2-5 length that fills about a quarter of the width
    closing_line: bool = True  # gripper cameras: the fingers' closing line
    labels: bool = True        # words beside the marks (grip, the direction words, the bar's length)

    @classmethod
    def parse(cls, value, where: str = "marks") -> "MarkOptions":
        """``true`` / ``None`` / ``{}``: the defaults; ``false``: off; a mapping: those fields."""
        if value is None or value is True:
            return cls()
        if value is False:
            return cls(enabled=False)
        if isinstance(value, MarkOptions):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: must be true, false or a mapping of "
                              f"{', '.join(f.name for f in fields(cls))}, got {value!r}")
        known = {f.name for f in fields(cls)}
        extra = sorted(set(value) - known)
        if extra:
            raise ConfigError(f"{where}: unknown key(s) {extra} (known: {', '.join(sorted(known))})")
        kw = dict(value)
        for k in ("enabled", "grip_point", "closing_line", "labels"):
            if k in kw and not isinstance(kw[k], bool):
                raise ConfigError(f"{where}.{k}: must be true or false, got {kw[k]!r}")
        if "arrows" in kw:
            a = kw["arrows"]
            if isinstance(a, str):
                a = [w.strip() for w in a.split(",") if w.strip()]
            if a is False or a is None:
                a = []
            if not isinstance(a, (list, tuple)) or not all(isinstance(w, str) for w in a):
                raise ConfigError(f"{where}.arrows: must be a list of the profile's direction words, got {a!r}")
            kw["arrows"] = tuple(a)
        for k, lo, hi in (("arrow_mm", 1.0, 200.0), ("scale_bar_mm", 1.0, 2000.0)):
            if k in kw and not (k == "scale_bar_mm" and kw[k] is None):
                v = kw[k]
                if isinstance(v, bool) or not isinstance(v, (int, float)) or not lo <= v <= hi:
                    raise ConfigError(f"{where}.{k}: must be a number of mm within {lo:g}..{hi:g}, got {v!r}")
                kw[k] = float(v)
        return cls(**kw)

    def check_words(self, directions: dict, where: str = "marks.arrows") -> None:
        bad = [w for w in self.arrows if w not in directions]
        if bad:
            raise ConfigError(f"{where}: {bad} not among the profile's direction words ({', '.join(sorted(directions))})")


def _style(w: int, h: int) -> dict:
    s = min(w, h)
    return {"t": max(1, int(round(s / 400))), "ring": max(4, int(round(s * 0.03))),
            "arrow": max(12, int(round(s * 0.13))), "font": max(0.28, s / 900), "pad": max(2, int(round(s * 0.02)))}


def _pt(p) -> tuple[int, int]:
    """A pixel for OpenCV drawing (sub-pixel positions via shift=4: 1/16 px)."""
    return int(round(p[0] * 16)), int(round(p[1] * 16))


def _text(img, text: str, org, colour, st) -> None:
    import cv2
    if not st.get("labels", True):
        return
    o = (int(round(org[0])), int(round(org[1])))
    cv2.putText(img, text, o, cv2.FONT_HERSHEY_SIMPLEX, st["font"], COLOURS["shadow"], st["t"] + 1, cv2.LINE_AA)
    cv2.putText(img, text, o, cv2.FONT_HERSHEY_SIMPLEX, st["font"], colour, st["t"], cv2.LINE_AA)


def _text_box(text: str, st) -> tuple[int, int]:
    import cv2
    (tw, th), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, st["font"], st["t"] + 1)
    return tw, th


def _label_at(img, text: str, anchor, direction, colour, st) -> None:
    """``text`` just beyond ``anchor`` along ``direction`` (a unit 2-vector), kept on the image."""
    h, w = img.shape[:2]
    tw, th = _text_box(text, st)
    x = anchor[0] + direction[0] * (st["pad"] + tw / 2) - tw / 2
    y = anchor[1] + direction[1] * (st["pad"] + th / 2) + th / 2
    x = min(max(1, x), w - tw - 1)
    y = min(max(th + 1, y), h - 2)
    _text(img, text, (x, y), colour, st)


def scale_length_mm(calib: CameraCalibration, depth_m: float, wanted_mm: float | None) -> tuple[float, float]:
    """(length mm, length px) of the scale bar at ``depth_m``: ``wanted_mm``, or the longest 1-2-5
    length within a quarter of the image's width."""
    px_per_mm = 1.0 / calib.mm_per_px(depth_m)
    if wanted_mm is not None:
        return float(wanted_mm), float(wanted_mm) * px_per_mm
    limit = calib.width_px * 0.25
    best = SCALE_STEPS_MM[0]
    for mm in SCALE_STEPS_MM:
        if mm * px_per_mm <= limit:
            best = mm
    return float(best), best * px_per_mm


def mark_image(image: np.ndarray, calib: CameraCalibration, eef, gripper_width_mm: float | None,
               directions: dict, options: MarkOptions = MarkOptions(),
               closing_axis_eef=(0.0, 1.0, 0.0), max_width_mm: float | None = None) -> tuple[np.ndarray, dict]:
    """(the image with marks, what was drawn). ``eef``: ``(pos_m, rot 3x3)`` in the base frame;
    ``directions``: the profile's word -> unit vector; ``closing_axis_eef``: the unit vector in the
    eef frame along which the fingers close; ``max_width_mm``: the widest opening. The image may be of any size: the calibration follows
    it. The info says, in this image's pixels: ``grip_px`` [u, v] (or None: behind the camera),
    ``grip_in_view``, ``grip_depth_m``, ``mm_per_px`` at that depth, ``scale_bar`` {mm, px},
    ``arrows`` {word: [du, dv] unit image direction, or "along the line of sight"}."""
    if not options.enabled:
        return image, {"camera": calib.name, "marks": False}
    import cv2
    img = np.ascontiguousarray(np.array(image, dtype=np.uint8, copy=True))
    h, w = img.shape[:2]
    cal = calib.resized(w, h)
    st = {**_style(w, h), "labels": options.labels}
    pos, rot = np.asarray(eef[0], dtype=float), np.asarray(eef[1], dtype=float)
    info: dict = {"camera": calib.name, "marks": True, "size": [w, h]}
    g = cal.project_point(pos, eef)
    info["grip_px"] = None if g is None else [round(g[0], 1), round(g[1], 1)]
    info["grip_in_view"] = bool(g is not None and cal.in_image(g[0], g[1]))
    if g is None:
        info["note"] = "the grip point is behind the camera"
        return img, info
    gu, gv, gz = g
    info["grip_depth_m"] = round(gz, 4)
    info["mm_per_px"] = round(cal.mm_per_px(gz), 3)
    centre = np.array([gu, gv])
    ring = st["ring"]
    t = st["t"]
    if options.grip_point:
        cv2.circle(img, _pt(centre), ring * 16, COLOURS["grip"], t, cv2.LINE_AA, shift=4)
        _label_at(img, "grip", centre + np.array([ring, -ring]) * 0.7, (0.7, -0.7), COLOURS["grip"], st)

    if options.closing_line and cal.mount == "gripper":
        # the segment the fingertips travel (the widest opening), ticks where they are now
        axis = rot @ np.asarray(closing_axis_eef, dtype=float)
        width = max(0.0, float(gripper_width_mm or 0.0))
        reach = max(width, float(max_width_mm or width), 1.0) / 2000.0
        tips = []
        for sign in (-1.0, 1.0):
            far = cal.project_point(pos + sign * axis * reach, eef)
            now = cal.project_point(pos + sign * axis * width / 2000.0, eef)
            if far is None:
                continue
            d = np.array(far[:2]) - centre
            n = float(np.linalg.norm(d))
            if n <= ring + 1:
                continue
            cv2.line(img, _pt(centre + d / n * (ring + 1)), _pt(far[:2]), COLOURS["closing"], t, cv2.LINE_AA, shift=4)
            if now is not None and float(np.linalg.norm(np.array(now[:2]) - centre)) > ring + 1:
                perp = np.array([-d[1], d[0]]) / n * max(3, ring * 0.7)
                cv2.line(img, _pt(np.array(now[:2]) - perp), _pt(np.array(now[:2]) + perp), COLOURS["closing"], t,
                         cv2.LINE_AA, shift=4)
                tips.append([round(now[0], 1), round(now[1], 1)])
        info["fingertips_px"] = tips

    if options.arrows:
        step = options.arrow_mm / 1000.0
        vecs = {}
        for word in options.arrows:
            if word not in directions:
                continue
            q = cal.project_point(pos + np.asarray(directions[word], dtype=float) * step, eef)
            vecs[word] = None if q is None else np.array(q[:2]) - centre
        longest = max([float(np.linalg.norm(v)) for v in vecs.values() if v is not None] + [0.0])
        arrows = {}
        for k, (word, v) in enumerate(vecs.items()):
            n = 0.0 if v is None else float(np.linalg.norm(v))
            if longest <= 0 or n < ALONG_SIGHT * longest:
                arrows[word] = "along the line of sight"
                continue
            unit = v / n
            length = st["arrow"] * max(0.45, n / longest)
            start = centre + unit * (ring + 1)
            tip = centre + unit * (ring + 1 + length)
            vec = np.asarray(directions[word], dtype=float)
            colour = AXIS_COLOURS[int(np.argmax(np.abs(vec)))]
            cv2.arrowedLine(img, _pt(start), _pt(tip), colour, t, cv2.LINE_AA, shift=4,
                            tipLength=min(0.4, max(4.0, ring) / max(length, 1.0)))
            _label_at(img, word, tip, unit, colour, st)
            arrows[word] = [round(float(unit[0]), 3), round(float(unit[1]), 3)]
        info["arrows"] = arrows

    mm, px = scale_length_mm(cal, gz, options.scale_bar_mm)
    if px >= 2:
        pad = st["pad"] * 2
        x0, y0 = pad, h - pad - 1
        x1 = x0 + min(px, w - 2 * pad)
        for colour, extra in ((COLOURS["shadow"], 1), (COLOURS["scale"], 0)):
            th = t + extra
            cv2.line(img, _pt((x0, y0)), _pt((x1, y0)), colour, th, cv2.LINE_AA, shift=4)
            for x in (x0, x1):
                cv2.line(img, _pt((x, y0 - max(3, ring * 0.6))), _pt((x, y0)), colour, th, cv2.LINE_AA, shift=4)
        _text(img, f"{mm:g} mm at grip depth", (x0, y0 - max(3, ring * 0.6) - st["pad"]), COLOURS["scale"], st)
        info["scale_bar"] = {"mm": mm, "px": round(px, 1)}
    return img, info


def mark_frames(images: dict, calibrations: dict, obs, directions: dict, options: MarkOptions = MarkOptions(),
                closing_axis_eef=(0.0, 1.0, 0.0), max_width_mm: float | None = None) -> tuple[dict, dict]:
    """(marked images, info per camera) for an Observation's frames. A frame without a calibration
    is passed on unmarked (its info says so); with marks off every frame is passed on as it is."""
    if not options.enabled:
        return dict(images), {}
    eef = eef_pose(obs)
    out, infos = {}, {}
    for name, img in images.items():
        cal = calibrations.get(name)
        if cal is None:
            out[name] = img
            infos[name] = {"camera": name, "marks": False, "note": "no calibration for this camera"}
            continue
        out[name], infos[name] = mark_image(img, cal, eef, getattr(obs, "gripper_width_mm", None), directions,
                                            options, closing_axis_eef, max_width_mm)
    return out, infos


class Marker:
    """The marks of one robot's cameras with one set of options: ``marker(obs) -> (marked, infos)``.
    Calibrations are asked of the robot at each call (``Robot.cameras()``), so a backend whose
    calibration changes (a reset rebuilding the simulator) is followed."""

    def __init__(self, robot, options: MarkOptions = MarkOptions()):
        self.robot = robot
        self.options = options
        self.directions = robot.profile.directions
        if options.arrows != MarkOptions().arrows:    # words a config names must be the profile's
            options.check_words(self.directions)      # (the default words are drawn where they exist)

    def __call__(self, obs) -> tuple[dict, dict]:
        if not self.options.enabled or not obs.images:
            return dict(obs.images), {}
        cams = self.robot.cameras() if hasattr(self.robot, "cameras") else {}
        axis = getattr(self.robot, "closing_axis_eef", (0.0, 1.0, 0.0))
        return mark_frames(obs.images, cams, obs, self.directions, self.options, axis,
                           self.robot.profile.gripper_max_width_mm)


def options_of(brain) -> MarkOptions:
    """The marks a brain's VLM config asks for (``VLMConfig.marks``), through wrappers; the defaults
    (all on) for a brain without one (the oracle and scripted brains read no pixels)."""
    seen = 0
    while brain is not None and seen < 8:
        cfg = getattr(brain, "cfg", None)
        if cfg is not None and hasattr(cfg, "marks"):
            return MarkOptions.parse(cfg.marks)
        brain = getattr(brain, "inner", None)
        seen += 1
    return MarkOptions()
