"""Where each camera looks from, in the robot's base frame: what a VLM needs to turn what it sees
into base-frame directions ("the bowl is right of the gripper in agentview" -> the robot's left).

A robot profile's ``cameras`` section holds one entry per camera (direction words are the
profile's own, ``directions``)::

    cameras:
      agentview:
        mount: fixed                  # fixed | gripper (moves and turns with the gripper)
        where: in front of the robot, across the table, above it
        looks: [back, down]           # the directions the camera looks along
        image_right: left             # the robot's direction that points to the image's right
        image_up: up                  # ... and to the image's top

Every role whose prompt carries images is told these in words (``describe``), for example
"agentview: a fixed camera in front of the robot ...; in its image, right is the robot's left
(+y) ...", and, where the backend calibrates the camera (``Robot.cameras()``), in numbers
(``describe_calibration``): its field of view and image size, where it stands (a fixed camera: in
base-frame mm; a gripper camera: from the grip point along and off the fingers), rounded for prompts.
Positions in MotorMind's commands are always base-frame millimetres; the pixels a prompt states
(the grip point's, ``roles/facts.py``) are the image's own (u right, v down from the top-left).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .errors import ConfigError
from .strict_config import unknown_key_message

MOUNTS = ("fixed", "gripper")
_KEYS = {"mount", "where", "looks", "image_right", "image_up"}


@dataclass(frozen=True)
class CameraView:
    name: str
    mount: str                      # fixed | gripper
    where: str                      # free text: where it stands ("" when not said)
    looks: tuple                    # direction words it looks along
    image_right: str                # direction word pointing to the image's right
    image_up: str                   # direction word pointing to the image's top


def parse_views(section: dict | None, directions: dict, where: str = "cameras") -> dict:
    """The profile's ``cameras`` section -> {name: CameraView}, every word checked."""
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise ConfigError(f"{where}: must be a mapping of camera name -> view, got {section!r}")
    out = {}
    for name, d in section.items():
        at = f"{where}.{name}"
        if not isinstance(d, dict):
            raise ConfigError(f"{at}: must be a mapping (mount, where, looks, image_right, image_up)")
        extra = set(d) - _KEYS
        if extra:
            raise ConfigError(f"{at}: {unknown_key_message(extra, _KEYS)}")
        for k in ("mount", "looks", "image_right", "image_up"):
            if k not in d:
                raise ConfigError(f"{at}.{k}: missing")
        if d["mount"] not in MOUNTS:
            raise ConfigError(f"{at}.mount: must be one of {', '.join(MOUNTS)}, got {d['mount']!r}")
        looks = d["looks"] if isinstance(d["looks"], list) else [w.strip() for w in str(d["looks"]).split(",")]
        for k, words in (("looks", looks), ("image_right", [d["image_right"]]), ("image_up", [d["image_up"]])):
            bad = [w for w in words if w not in directions]
            if bad or not words:
                raise ConfigError(f"{at}.{k}: {bad or words} not among the profile's direction words "
                                  f"({', '.join(sorted(directions))})")
        r, u = np.asarray(directions[d["image_right"]]), np.asarray(directions[d["image_up"]])
        if abs(float(np.dot(r, u))) > 0.5:
            raise ConfigError(f"{at}: image_right {d['image_right']!r} and image_up {d['image_up']!r} "
                              "must be (roughly) perpendicular")
        out[str(name)] = CameraView(str(name), d["mount"], str(d.get("where", "") or ""), tuple(looks),
                                    d["image_right"], d["image_up"])
    return out


def _axis(vec) -> str:
    """'+y', '-x', ... the base axis a direction vector mostly points along."""
    v = np.asarray(vec, dtype=float)
    i = int(np.argmax(np.abs(v)))
    return f"{'+' if v[i] >= 0 else '-'}{'xyz'[i]}"


def _opposite(word: str, directions: dict) -> str:
    v = -np.asarray(directions[word], dtype=float)
    return max(directions, key=lambda w: float(np.dot(np.asarray(directions[w], dtype=float), v)))


def describe_view(v: CameraView, directions: dict) -> str:
    def word(w: str) -> str:
        return f"{w} ({_axis(directions[w])})"
    looks = " and ".join(v.looks)
    if v.mount == "gripper":
        head = f"{v.name}: on the gripper, moving and turning with it" + (f" ({v.where})" if v.where else "") + \
               f"; with the gripper as at the start it looks {looks}"
    else:
        head = f"{v.name}: a fixed camera" + (f" {v.where}" if v.where else "") + f", looking {looks}"
    left = _opposite(v.image_right, directions)
    down = _opposite(v.image_up, directions)
    s = (f"{head}. In its image, right is the robot's {word(v.image_right)}, left the robot's {word(left)}, "
         f"up the robot's {word(v.image_up)} and down the robot's {word(down)}.")
    if float(np.dot(np.asarray(directions[v.image_right], dtype=float), [0.0, 1.0, 0.0])) > 0.5:   # +y: left
        s += " It faces the robot: the robot's left appears on the image's right."
    return s


def describe_calibration(cal) -> str:
    """A camera's calibration (``grounding.camera.CameraCalibration``) as one prompt sentence, rounded:
    field of view and image size; a fixed camera's position (base frame, mm) and how far its optical
    axis points below the horizontal; a gripper camera's place relative to the grip point (the eef
    frame's z runs along the fingers toward their tips)."""
    fh, fv = cal.fov_deg
    s = (f"Field of view {fh:.0f} x {fv:.0f} deg ({cal.width_px} x {cal.height_px} px); "
         + ("it measures depth (a point you give in it is measured)" if cal.depth else
            "it has no depth (a point in it cannot be measured)"))
    axis = np.asarray(cal.rot, dtype=float)[:, 2]             # the optical axis (OpenCV z) in the mount frame
    p = np.asarray(cal.position_m, dtype=float) * 1000.0
    if cal.mount == "gripper":
        along, off = -p[2], float(np.hypot(p[0], p[1]))
        tilt = float(np.degrees(np.arccos(np.clip(axis[2], -1.0, 1.0))))
        where = "behind" if along >= 0 else "beyond"
        return (f"{s}; it sits {abs(along):.0f} mm {where} the grip point along the fingers and {off:.0f} mm "
                f"off their axis, its optical axis {tilt:.0f} deg from the fingers' direction.")
    down = float(np.degrees(np.arcsin(np.clip(-axis[2], -1.0, 1.0))))
    return (f"{s}; it stands at x {p[0]:.0f}, y {p[1]:.0f}, z {p[2]:.0f} mm, its optical axis {down:.0f} deg "
            f"below the horizontal.")


def describe(views: dict, directions: dict, names=None, calibrations: dict | None = None) -> str:
    """The prompt text for the cameras ``names`` (default: all described): each one's words from the
    profile and, for those in ``calibrations`` (name -> CameraCalibration), its numbers."""
    cals = calibrations or {}
    names = list(views) if names is None else list(names)
    lines = []
    for n in names:
        if n in views:
            lines.append(describe_view(views[n], directions) + (f" {describe_calibration(cals[n])}" if n in cals else ""))
        elif n in cals:
            lines.append(f"{n}: no view description in the robot profile. {describe_calibration(cals[n])}")
    missing = [n for n in names if n not in views and n not in cals]
    if missing:
        lines.append(f"{', '.join(missing)}: no view description in the robot profile")
    return "\n".join(f"- {ln}" for ln in lines) if lines else \
        "- no camera view descriptions in the robot profile: judge directions from the measured state"
