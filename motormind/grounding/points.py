"""Pointing, measuring and looking closer: a role's points and regions, resolved against what it saw.

A VLM points; the stack measures (docs/grounding.md, "Pointing and measuring"). Any role's answer may
hold

    points   [{"camera", "pixel": [x, y], "label"}]     what it points at, in its model family's pixel
                                                        convention (``grounding/pixels.py``)
    regions  [{"camera", "box": [x1, y1, x2, y2], "label"?}]   a part of one camera's image to see at
                                                        full resolution in its next prompt
    replan   {"reason"}                                 (Executor, Verifier) the plan cannot work as
                                                        planned: the Planner makes a new one

and this module is their one definition: the JSON schema of each field (``FIELDS``: ``schemas.py``
builds the roles' response schemas from it), the prompt text that states them (``prompt_text``), and
the reading of a schema-valid answer (``points_of``, ``regions_of``, ``replan_of``). Each point is
resolved from the depth image of the look the role answered from (``Frame``) to a base-frame
position and its offset from the grip point in the profile's direction words (``resolve``); a point
outside the image, on nothing (no depth reading: background, beyond the far plane) or on a camera
without depth is refused with the reason. A measurement is a fact given back in a prompt, never a
command: the Controller stays the only judge of motion.

``Grounding`` keeps one episode's: the frame of the last look, the measurements (``facts``) and the
crops waiting for the next prompt (``take_crops``), and records what it resolves (``points``,
``region`` events). Over a transport without depth or calibrations it refuses every point with its
``unavailable`` reason. Pure core: numpy; no simulator imports.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .camera import CameraCalibration, eef_pose, sample_depth
from .pixels import PixelConvention, convention_for

# -- the answer fields: one definition (schemas.py, the prompts and the readers below all read it) ------
MAX_POINTS = 8                 # points in one answer
MAX_REGIONS = 2                # regions in one answer
CAMERA_MAX_CHARS = 64
LABEL_MAX_CHARS = 80
REASON_MAX_CHARS = 1000
MAX_FACTS = 16                 # measurements a prompt keeps showing (newest first; a label measured again replaces its old one);
                               # 8 dropped a Planner's five points (the burner's centre) by the seventh batch in a real-VLM trial
REGION_OUT_PX = 448            # a region is shown with about this many px on its longest side
REGION_MAX_RENDER_PX = 1024    # the largest render of a camera a region asks for
DEPTH_WINDOW_PX = 0            # depth read at the nearest pixel (a patch median would mix a rim with what lies behind it)

_CAMERA = {"type": "string", "maxLength": CAMERA_MAX_CHARS}
_LABEL = {"type": "string", "maxLength": LABEL_MAX_CHARS}
POINT = {"type": "object", "additionalProperties": False, "required": ["camera", "pixel", "label"],
         "properties": {"camera": _CAMERA,
                        "pixel": {"type": "array", "minItems": 2, "maxItems": 2, "items": {"type": "number"}},
                        "label": _LABEL}}
REGION = {"type": "object", "additionalProperties": False, "required": ["camera", "box"],
          "properties": {"camera": _CAMERA,
                         "box": {"type": "array", "minItems": 4, "maxItems": 4, "items": {"type": "number"}},
                         "label": _LABEL}}
REPLAN = {"type": "object", "additionalProperties": False, "required": ["reason"],
          "properties": {"reason": {"type": "string", "minLength": 1, "maxLength": REASON_MAX_CHARS}}}
FIELDS = {
    "points": {"type": "array", "minItems": 1, "maxItems": MAX_POINTS, "items": POINT},
    "regions": {"type": "array", "minItems": 1, "maxItems": MAX_REGIONS, "items": REGION},
    "replan": REPLAN,
}
ROLE_FIELDS = {"planner": ("points", "regions"), "executor": ("points", "regions", "replan"),
               "verifier": ("points", "regions", "replan")}
GROUNDING_KEYS = ("points", "regions")


# What an answer must hold (``anyOf`` of titled forms in the role's schema); ``replan`` stands alone
# (``check_answer``: a schema cannot say it without ``not``).
FORMS = {"executor": (("batch", ("commands",)), ("look", ("points",)), ("look", ("regions",)),
                      ("replan request", ("replan",))),
         "verifier": (("verdict", ("achieved", "evidence")), ("replan request", ("replan",)))}


def fields_for(role: str, *names: str) -> dict:
    """The answer fields ``role`` may use (those of ``names`` only, when given)."""
    return {k: FIELDS[k] for k in ROLE_FIELDS.get(role, ()) if not names or k in names}


def answer_forms(role: str) -> list:
    """The ``anyOf`` of ``role``'s response schema: one titled form per kind of answer."""
    return [{"title": t, "required": list(req)} for t, req in FORMS[role]]


def check_answer(role: str, answer: dict) -> None:
    """What the schema cannot say: a replan request stands alone (the prompt says "and nothing else")."""
    from ..errors import ResponseError
    if "replan" in answer:
        beside = [k for k in ("commands", "points", "regions", "achieved", "evidence", "confidence") if k in answer]
        if beside:
            raise ResponseError(f"$.replan: a replan request stands alone, without {', '.join(beside)} "
                                "(answer either the replan request or the rest)")


@dataclass(frozen=True)
class Point:
    camera: str
    x: float
    y: float
    label: str


@dataclass(frozen=True)
class Region:
    camera: str
    box: tuple                # x1, y1, x2, y2 in the model's convention
    label: str = ""


def points_of(answer: dict) -> list[Point]:
    """The points of a schema-valid answer (``FIELDS['points']``)."""
    return [Point(p["camera"], float(p["pixel"][0]), float(p["pixel"][1]), p["label"])
            for p in answer.get("points") or []]


def regions_of(answer: dict) -> list[Region]:
    return [Region(r["camera"], tuple(float(v) for v in r["box"]), r.get("label", ""))
            for r in answer.get("regions") or []]


def replan_of(answer: dict) -> str | None:
    """The reason of a replan request (None: the answer asks for none)."""
    r = answer.get("replan")
    return None if r is None else str(r["reason"])


def is_look(answer: dict) -> bool:
    """An Executor answer that points or asks for a region and holds no commands."""
    return "commands" not in answer and "replan" not in answer and any(answer.get(k) for k in GROUNDING_KEYS)


def prompt_text(role: str, conventions: dict[str, PixelConvention], max_looks: int | None = None,
                unavailable: str = "", looks_left: int | None = None) -> str:
    """What a role's prompt says about its answer's optional fields (the same limits as ``FIELDS``):
    pointing, regions, and for the Executor and the Verifier a replan request. ``conventions``: each
    camera's pixel convention for this role (``convention_of``)."""
    have = ROLE_FIELDS.get(role, ())
    lines = []
    if unavailable:
        lines.append(f"Pointing and regions are not available here ({unavailable}): points are refused with "
                     "that reason.")
    else:
        if conventions:
            convs = {}
            for cam, c in conventions.items():
                convs.setdefault(c.describe(), []).append(cam)
            where = "; ".join(f"{', '.join(cams)}: {text}" for text, cams in convs.items())
        else:
            where = "pixels of each image as you see it: x to the right, y down, (0, 0) the top-left corner"
        lines += [
            f"Pointing (optional): add \"points\": [{{\"camera\": NAME, \"pixel\": [x, y], \"label\": \"what it is\"}}] "
            f"(at most {MAX_POINTS}; label at most {LABEL_MAX_CHARS} characters) to point at things instead of "
            "guessing distances: the stack reads each point's depth and gives back, in your next prompt, its "
            "base-frame position (mm) and its offset from the grip point in direction words. A point on nothing "
            "(no depth there), outside the image or on a camera without depth is refused with the reason. "
            f"Pixel coordinates (points and regions, of the full camera images): {where}.",
            f"Looking closer (optional): \"regions\": [{{\"camera\": NAME, \"box\": [x1, y1, x2, y2], \"label\": "
            f"\"...\"}}] (at most {MAX_REGIONS}; x1 < x2, y1 < y2) shows that part of the camera at full "
            "resolution as an extra image in your next prompt.",
            "Measurements are facts for you to choose from; they never move the robot."]
        if role == "executor":
            limit = "" if max_looks is None else f" (at most {max_looks} looks before each batch" + (
                f"; {looks_left} left now)" if looks_left is not None else ")")
            lines.append("An answer with points or regions and no commands is a look: it costs no control step and "
                         f"no batch, and you are asked again at once with the measurements{limit}.")
    if "replan" in have:
        lines.append("If the plan cannot work as planned (the subgoal or its success criterion asks for the "
                     "impossible), answer {\"replan\": {\"reason\": \"why\"}} and nothing else: the plan ends and the "
                     f"Planner makes a new one with your reason (at most {REASON_MAX_CHARS} characters); it counts "
                     "against the episode's replan budget.")
    return "\n".join(f"- {ln}" for ln in lines)


# -- pixel conventions of a brain ---------------------------------------------------------------------
def _vlm_cfg(brain):
    seen = 0
    while brain is not None and seen < 8:
        cfg = getattr(brain, "cfg", None)
        if cfg is not None and hasattr(cfg, "image_rules"):
            return cfg
        brain = getattr(brain, "inner", None)
        seen += 1
    return None


def convention_of(brain, role: str, width_px: int, height_px: int) -> PixelConvention:
    """The pixel convention ``brain`` answers ``role`` in for a ``width_px`` x ``height_px`` frame: its
    VLM config's ``image_rules`` and ``image_size`` / ``image_detail`` (the role's override first), as
    ``brains.openai_brain`` sizes the image it sends; pixels of the frame as it is for a brain without
    a VLM config (the oracle, scripted)."""
    cfg = _vlm_cfg(brain)
    if cfg is None:
        return PixelConvention("pixels", int(width_px), int(height_px))
    ov = (getattr(cfg, "roles", None) or {}).get(role) or {}
    return convention_for(cfg.image_rules, width_px, height_px, ov.get("image_size", cfg.image_size),
                          ov.get("image_detail", getattr(cfg, "image_detail", "auto")))


# -- what a role saw ------------------------------------------------------------------------------------
@dataclass
class Frame:
    """One look as the roles saw it: enough to resolve their points and cut their regions."""
    label: str
    eef: tuple                                   # (pos_m, rot 3x3) of the grip point, base frame
    calibrations: dict                           # camera -> CameraCalibration at the frame's size
    sizes: dict                                  # camera -> (w, h) of the frame the roles were sent
    depth: dict = field(default_factory=dict)    # camera -> depth image (m), where the backend gave one
    images: dict = field(default_factory=dict)   # camera -> the raw frame (cut when no render is at hand)

    @classmethod
    def of(cls, label: str, obs, calibrations: dict) -> "Frame":
        sizes = {k: (int(v.shape[1]), int(v.shape[0])) for k, v in (obs.images or {}).items()}
        return cls(label, eef_pose(obs), dict(calibrations or {}), sizes, dict(obs.depth or {}), dict(obs.images or {}))

    def calibration(self, camera: str) -> CameraCalibration | None:
        cal = self.calibrations.get(camera)
        if cal is None or camera not in self.sizes:
            return cal
        return cal.resized(*self.sizes[camera])


# -- resolving ------------------------------------------------------------------------------------------
def offset_words(delta_mm, directions: dict) -> str:
    """A base-frame offset (mm) in the profile's direction words, one per base axis (``147 forward,
    266 left, 216 down``); the vector itself where the words are not along the base axes."""
    d = [float(v) for v in delta_mm]
    parts = []
    for i, v in enumerate(d):
        want = np.eye(3)[i] * (1.0 if v >= 0 else -1.0)
        word = next((w for w, u in directions.items() if np.allclose(np.asarray(u, dtype=float), want, atol=1e-6)), None)
        if word is None:
            return "[" + ", ".join(f"{x:.0f}" for x in d) + "] mm (base frame)"
        parts.append(f"{abs(v):.0f} {word}")
    return ", ".join(parts)


@dataclass
class Measurement:
    """A point resolved (``ok``) or refused (``reason``)."""
    point: Point
    ok: bool
    reason: str = ""
    look: str = ""                   # the look it was measured at
    role: str = ""
    u: float | None = None           # the frame's pixel it maps to
    v: float | None = None
    depth_m: float | None = None
    pos_m: tuple | None = None       # base frame
    grip_m: tuple | None = None      # the grip point at that look

    def text(self, grip_now_m=None, directions: dict | None = None) -> str:
        """``"bowl rim" (agentview 212, 305): x 596 y 251 z 48 mm; from the grip point 147 forward, ...``;
        the offset is from ``grip_now_m`` when given (the grip point now), else from the look's."""
        p = self.point
        head = f"{json.dumps(p.label, ensure_ascii=False)} ({json.dumps(p.camera, ensure_ascii=False)[1:-1]} " \
               f"{p.x:g}, {p.y:g}; at {self.look})"
        if not self.ok:
            return f"{head}: refused: {self.reason}"
        pos = np.asarray(self.pos_m) * 1000.0
        grip = np.asarray(grip_now_m if grip_now_m is not None else self.grip_m) * 1000.0
        return (f"{head}: x {pos[0]:.0f} y {pos[1]:.0f} z {pos[2]:.0f} mm; from the grip point "
                f"{offset_words(pos - grip, directions or {})}")

    def to_json(self) -> dict:
        p = self.point
        d = {"camera": p.camera, "pixel": [p.x, p.y], "label": p.label, "ok": self.ok, "look": self.look,
             "role": self.role}
        if self.ok:
            d.update(frame_px=[round(self.u, 2), round(self.v, 2)], depth_m=round(self.depth_m, 5),
                     pos_mm=[round(v * 1000.0, 1) for v in self.pos_m],
                     offset_mm=[round((a - b) * 1000.0, 1) for a, b in zip(self.pos_m, self.grip_m)])
        else:
            d["reason"] = self.reason
        return d


def _camera_issue(camera: str, frame: Frame) -> str:
    if camera not in frame.sizes:
        return f"no camera {json.dumps(camera)} in this look (cameras: {', '.join(frame.sizes) or 'none'})"
    if frame.calibrations.get(camera) is None:
        return f"camera {camera} has no calibration: nothing can be measured in it"
    return ""


def _range_text(conv: PixelConvention) -> str:
    return f"x 0..{conv.x_max:g}, y 0..{conv.y_max:g}"


def resolve(point: Point, frame: Frame, convention: PixelConvention, role: str = "") -> Measurement:
    """``point`` resolved against ``frame`` (refused with the reason when it cannot be)."""
    m = Measurement(point, False, look=frame.label, role=role)
    why = _camera_issue(point.camera, frame)
    if why:
        m.reason = why
        return m
    if not convention.in_range(point.x, point.y):
        m.reason = f"outside the image: ({point.x:g}, {point.y:g}) is not within {_range_text(convention)}"
        return m
    cal = frame.calibration(point.camera)
    if not cal.depth:
        m.reason = f"camera {point.camera} has no depth: {cal.no_depth_reason}"
        return m
    dep = frame.depth.get(point.camera)
    if dep is None:
        m.reason = f"no depth image of camera {point.camera} in this look"
        return m
    w, h = cal.size
    u, v = convention.to_image(point.x, point.y, w, h)
    d = sample_depth(dep, u, v, size=(w, h), window_px=DEPTH_WINDOW_PX)
    if not (math.isfinite(d) and d > 0):
        m.reason = "on nothing: no depth reading at that pixel (background, or beyond the camera's far plane)"
        return m
    pos = cal.unproject(u, v, d, frame.eef)
    m.ok, m.u, m.v, m.depth_m = True, float(u), float(v), float(d)
    m.pos_m = tuple(float(x) for x in pos)
    m.grip_m = tuple(float(x) for x in frame.eef[0])
    return m


@dataclass
class Shot:
    """A region cut (``image``) or refused (``reason``)."""
    region: Region
    look: str
    role: str = ""
    image: np.ndarray | None = None
    reason: str = ""
    frame_px: tuple = ()              # the frame's pixels cut: columns c0 .. c1 - 1, rows r0 .. r1 - 1
    rendered_px: int = 0              # the render's longest side it was cut from (0: the frame itself)
    name: str = ""                    # the image's name in the prompt

    def text(self) -> str:
        r = self.region
        head = (f"region {json.dumps(r.label, ensure_ascii=False) + ' ' if r.label else ''}of "
                f"{json.dumps(r.camera, ensure_ascii=False)[1:-1]}, box [{', '.join(f'{v:g}' for v in r.box)}] "
                f"(at {self.look})")
        if self.image is None:
            return f"{head}: refused: {self.reason}"
        h, w = self.image.shape[:2]
        src = f"cut from a {self.rendered_px} px render" if self.rendered_px else "cut from the frame"
        return f"{head}: shown as image '{self.name}', {w} x {h} px ({src})"

    def to_json(self) -> dict:
        r = self.region
        d = {"camera": r.camera, "box": list(r.box), "label": r.label, "look": self.look, "role": self.role,
             "ok": self.image is not None}
        if self.image is None:
            d["reason"] = self.reason
        else:
            d.update(name=self.name, frame_px=[int(v) for v in self.frame_px],
                     size=[int(self.image.shape[1]), int(self.image.shape[0])], rendered_px=self.rendered_px)
        return d


Render = Callable[[str, int], np.ndarray]     # (camera, size px) -> an upright HxWx3 frame


def cut(region: Region, frame: Frame, convention: PixelConvention, render: Render | None = None,
        role: str = "") -> Shot:
    """The part of ``region.camera``'s image inside ``region.box``: cut from a render of the camera at
    up to ``REGION_MAX_RENDER_PX`` (so the part is about ``REGION_OUT_PX`` px on its longest side) when
    ``render`` is given, else from the frame the role saw."""
    s = Shot(region, frame.label, role)
    if region.camera not in frame.sizes:
        s.reason = _camera_issue(region.camera, frame)
        return s
    x1, y1, x2, y2 = region.box
    if not (convention.in_range(x1, y1) and convention.in_range(x2, y2)):
        s.reason = f"outside the image: a box corner is not within {_range_text(convention)}"
        return s
    if not (x1 < x2 and y1 < y2):
        s.reason = f"an empty box: it needs x1 < x2 and y1 < y2, got [{x1:g}, {y1:g}, {x2:g}, {y2:g}]"
        return s
    w, h = frame.sizes[region.camera]
    u0, v0 = convention.to_image(x1, y1, w, h)
    u1, v1 = convention.to_image(x2, y2, w, h)
    # the frame's pixels whose centres the box spans (columns c0 .. c1 - 1, rows r0 .. r1 - 1)
    c0, r0 = min(w - 1, max(0, round(u0))), min(h - 1, max(0, round(v0)))
    c1, r1 = max(c0 + 1, min(w, round(u1) + 1)), max(r0 + 1, min(h, round(v1) + 1))
    s.frame_px = (c0, r0, c1, r1)
    src, scale = frame.images.get(region.camera), 1.0
    if render is not None:
        want = REGION_OUT_PX / max(c1 - c0, r1 - r0)
        size = int(min(REGION_MAX_RENDER_PX, max(max(w, h), round(max(w, h) * want))))
        if size > max(w, h):
            try:
                src = np.asarray(render(region.camera, size))
                scale = src.shape[1] / w
                s.rendered_px = size
            except Exception as e:  # noqa: BLE001 - the frame is cut instead, and the record says why
                s.reason = f"(render at {size} px failed: {type(e).__name__}; cut from the frame)"
                src, scale = frame.images.get(region.camera), 1.0
    if src is None:
        s.reason = f"no image of camera {region.camera} in this look"
        return s
    H, W = src.shape[:2]
    c0, r0 = int(math.floor(c0 * scale)), int(math.floor(r0 * scale))
    c1, r1 = min(W, int(math.ceil(c1 * scale))), min(H, int(math.ceil(r1 * scale)))
    s.image = np.ascontiguousarray(src[r0:r1, c0:c1])
    return s


# -- one episode's measurements ---------------------------------------------------------------------------
class Grounding:
    """One episode's pointing: the frame of the last look, the measurements, the crops for the next prompt.

    ``see(label, obs, calibrations)`` after each look; ``take(role, answer)`` resolves an answer's
    points and regions (recording ``points`` and ``region`` events); ``values(role, state)`` gives a
    prompt's ``pointing`` and ``measurements`` text; ``take_crops()`` the crops for the next prompt
    (each shown once). ``unavailable``: why nothing can be measured in this transport (every point
    and region is refused with it)."""

    def __init__(self, directions: dict | None = None, convention: Callable | None = None,
                 render: Render | None = None, record: Callable | None = None, unavailable: str = "",
                 max_looks: int | None = None, record_frame: Callable | None = None):
        self.directions = dict(directions or {})
        self.convention = convention or (lambda role, cam, w, h: PixelConvention("pixels", int(w), int(h)))
        self.render = render
        self.record = record or (lambda kind, **data: None)
        self.record_frame = record_frame or (lambda label, images: None)    # (label, {name: image}): the crops
        self.unavailable = unavailable
        self.max_looks = max_looks
        self.frame: Frame | None = None
        self.facts: list[Measurement] = []        # newest first
        self.refused: list[Measurement] = []      # shown once, in the next prompt
        self.crops: list[Shot] = []               # shown once, in the next prompt
        self._regions = 0

    def see(self, label: str, obs, calibrations: dict) -> None:
        if obs is not None and getattr(obs, "images", None):
            self.frame = Frame.of(label, obs, calibrations)

    def conventions(self, role: str) -> dict:
        f = self.frame
        return {} if f is None else {cam: self.convention(role, cam, w, h) for cam, (w, h) in f.sizes.items()}

    def _refuse_all(self, role: str, answer: dict, why: str) -> tuple[list, list]:
        ms = [Measurement(p, False, why, self.frame.label if self.frame else "", role) for p in points_of(answer)]
        ss = [Shot(r, self.frame.label if self.frame else "", role, reason=why) for r in regions_of(answer)]
        return ms, ss

    def take(self, role: str, answer: dict) -> tuple[list[Measurement], list[Shot]]:
        """Resolve ``answer``'s points and cut its regions (nothing when it holds none)."""
        if not any(answer.get(k) for k in GROUNDING_KEYS):
            return [], []
        f = self.frame
        if self.unavailable or f is None:
            ms, ss = self._refuse_all(role, answer, self.unavailable or "no camera images in this episode")
        else:
            ms = [resolve(p, f, self.convention(role, p.camera, *f.sizes.get(p.camera, (1, 1))), role)
                  for p in points_of(answer)]
            ss = []
            for r in regions_of(answer):
                sh = cut(r, f, self.convention(role, r.camera, *f.sizes.get(r.camera, (1, 1))), self.render, role)
                if sh.image is not None:
                    self._regions += 1
                    sh.name = f"{r.camera} region {self._regions}"
                ss.append(sh)
        for m in ms:
            if m.ok:
                self.facts = [m] + [o for o in self.facts
                                    if (o.point.label, o.point.camera) != (m.point.label, m.point.camera)]
            else:
                self.refused.append(m)
        del self.facts[MAX_FACTS:]
        self.crops += ss
        if ms:
            self.record("points", role=role, look=ms[0].look, points=[m.to_json() for m in ms])
        for sh in ss:
            self.record("region", **sh.to_json())
            if sh.image is not None:
                self.record_frame(f"{sh.look}: {sh.name}", {sh.name: sh.image})
        return ms, ss

    def values(self, role: str, state: dict | None = None, looks_left: int | None = None, peek: bool = False) -> dict:
        """The prompt's ``pointing`` (the answer form) and ``measurements`` (the facts) text. Refusals
        and regions are shown once: call it once per prompt (``peek``: a prompt asked ahead of its time,
        which may be dropped, shows them and leaves them for the next)."""
        grip = None
        if state and isinstance(state.get("eef_pos_mm"), (list, tuple)) and len(state["eef_pos_mm"]) == 3:
            grip = [float(v) / 1000.0 for v in state["eef_pos_mm"]]
        lines = [f"- {m.text(grip, self.directions)}" for m in self.facts + self.refused]
        lines += [f"- {s.text()}" for s in self.crops]
        if not peek:
            self.refused = []
        text = ("none yet" if not lines else
                "(from your points: base-frame positions, offsets from the grip point now)\n" + "\n".join(lines))
        if role == "executor" and looks_left is not None and self.max_looks is not None and not self.unavailable:
            text += f"\nLooks left before this batch: {looks_left} of {self.max_looks}."   # (not in the system
        return {"pointing": prompt_text(role, self.conventions(role), self.max_looks if role == "executor" else None,
                                        self.unavailable),          # text: that stays the same bytes, for caching)
                "measurements": text}

    def prompt(self, role: str, state: dict | None = None, looks_left: int | None = None,
               peek: bool = False) -> tuple[dict, dict]:
        """(the prompt's values: ``values``, the crops it shows: ``take_crops``) for one prompt."""
        return self.values(role, state, looks_left, peek), self.take_crops(peek)

    def take_crops(self, peek: bool = False) -> dict:
        """The crops waiting for the next prompt (name -> image), each given once (``peek``: left for the next)."""
        out = {s.name: s.image for s in self.crops if s.image is not None}
        if not peek:
            self.crops = []
        return out
