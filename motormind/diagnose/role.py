"""The diagnostic's roles: one question -> one answer, through the roles' own machinery.

``Diagnoser`` is a ``Role`` (roles/base.py) named ``diagnose``: the prompt is rendered from
prompts/diagnose.md, the answer parsed strictly against ``schemas.DIAGNOSE``, a bad answer gets one
repair request quoting the error, a second bad answer fails safe (counted wrong, "unanswered"), and
every call is recorded (``vlm_call``) exactly as the stack's roles record theirs.
``GroundingDiagnoser`` is the same role for the grounding skill (prompts/diagnose_grounding.md, the
``GROUNDING`` answer: a point and an offset).

Every question's images reach the brain as the roles' do: marked from the cameras' calibration the
question stores (``grounding.marks.Marker``, the brain's ``marks`` options), with the profile's words
for each camera (``views.describe``) and the numbers a role gets: each camera's field of view and
position in base-frame mm, the grip point's pixel in the model family's pixel convention
(``grounding/pixels.py``), the scale bar's length.
"""
from __future__ import annotations

import json

import numpy as np

from ..errors import ResponseError
from ..grounding.marks import MarkOptions, Marker
from ..grounding.pixels import PixelConvention
from ..grounding.points import POINT
from ..roles.base import Role, RoleResult
from . import grounding as gnd


def grounding_schema(words: list[str]) -> dict:
    """A grounding answer: a point as any role gives one (``grounding.points.POINT``: camera, pixel
    [x, y] in the question's convention, label) and the offset of that point from the grip point
    along the profile's +x, +y, +z words, mm."""
    return {"type": "object", "additionalProperties": False, "required": ["point", "offset_mm"],
            "properties": {
                "schema_version": {"type": "integer"}, "source": {"type": "string", "maxLength": 64},
                "point": POINT,
                "offset_mm": {"type": "object", "additionalProperties": False, "required": list(words),
                              "properties": {w: {"type": "number"} for w in words}},
                "reasoning": {"type": "string", "maxLength": 2000}}}


class _SetCameras:
    """What ``Marker`` asks of a robot, for one stored question: its calibrations and the profile."""

    def __init__(self, profile, cameras: dict, closing_axis_eef):
        self.profile = profile
        self._cameras = cameras
        self.closing_axis_eef = tuple(closing_axis_eef)

    def cameras(self) -> dict:
        return self._cameras


def question_observation(q: dict, images: dict):
    """The Observation a question's measured state stands for (what marks are drawn from)."""
    from ..robot import Observation
    st = q["state"]
    return Observation(t=float(st.get("t_s", 0.0)), eef_pos_m=np.asarray(st["eef_pos_mm"], dtype=float) / 1000.0,
                       eef_quat_xyzw=np.asarray(st["eef_quat_xyzw"], dtype=float),
                       gripper_width_mm=float(st["gripper_width_mm"]), gripper_fraction=float(st["gripper_fraction"]),
                       joints_rad=np.zeros(0), images=dict(images))


def question_cameras(q: dict) -> dict:
    """The calibrations a question stores (set format 2), as CameraCalibration."""
    from ..grounding.camera import CameraCalibration
    return {n: CameraCalibration.from_json(d, where=f"question {q.get('id')}: cameras.{n}")
            for n, d in (q.get("cameras") or {}).items()}


def look(q: dict, images: dict, profile, marks: MarkOptions, convention: PixelConvention | None,
         closing_axis_eef=(0.0, 1.0, 0.0)) -> tuple[dict, str]:
    """(the images as the brain gets them: marked, the camera text of the prompt): the roles' own
    facts (``roles.facts.PromptFacts``: the gripper, the cameras in words and numbers, what the marks
    are, the grip point's pixel in each image) and the grip point in the answer's pixel convention."""
    from ..roles.facts import PromptFacts
    cams = question_cameras(q)
    facts = PromptFacts(profile, list(images), cams, q.get("scene"), None, marks)
    if not cams:                      # a set of format 1 stores no calibrations: nothing to mark or measure
        return dict(images), facts.setup()
    obs = question_observation(q, images)
    marked, infos = Marker(_SetCameras(profile, cams, closing_axis_eef), marks)(obs)
    facts.saw(obs, marked, infos)
    lines = [facts.setup(), facts.look()]
    if convention is not None:
        from ..grounding.camera import eef_pose
        eef = eef_pose(obs)
        at = []
        for name, img in images.items():
            cal = cams.get(name)
            if cal is None:
                continue
            h, w = np.asarray(img).shape[:2]
            g = cal.resized(w, h).project_point(eef[0], eef)
            if g is not None and cal.resized(w, h).in_image(g[0], g[1]):
                x, y = convention.from_image(g[0], g[1], w, h)
                at.append(f"in {name} the grip point is at ({x:.0f}, {y:.0f})")
        lines.append(f"Image positions you give are in {convention.describe()}"
                     + (f"; in these, {'; '.join(at)}." if at else "."))
    return marked, "\n".join(lines)


def _values(q: dict, profile, images: dict, camera_text: str) -> dict:
    return {
        "robot_description": profile.description,
        "directions": ", ".join(f"{k} ({_axis(v)})" for k, v in sorted(profile.directions.items())),
        "instruction": q["instruction"],
        "plan": json.dumps(q.get("plan") or []),
        "state": json.dumps(q["state"]),
        "image_names": ", ".join(images) or "none",
        "cameras": camera_text,
        "skill": q["skill"],
        "question": q["question"],
    }


class Diagnoser(Role):
    name = prompt_name = "diagnose"

    def answer(self, q: dict, images: dict, profile, privileged: bool, marks: MarkOptions | None = None,
               convention: PixelConvention | None = None, closing_axis_eef=(0.0, 1.0, 0.0)) -> RoleResult:
        if q["skill"] == "grounding":
            return GroundingDiagnoser(self.brain, self.record, self.repair).answer(
                q, images, profile, privileged, marks, convention, closing_axis_eef)
        marks = MarkOptions() if marks is None else marks
        letters = [o["letter"] for o in q["options"]]
        sub = q.get("subgoal")
        shown, camera_text = look(q, images, profile, marks, convention, closing_axis_eef)
        values = {**_values(q, profile, images, camera_text),
                  "options": "\n".join(f'{o["letter"]}. {o["text"]}' for o in q["options"]),
                  "letters": ", ".join(letters)}
        context = {"question_id": q["id"], "skill": q["skill"], "subgoal_id": sub["id"] if sub else None,
                   "question": q["question"],
                   "options": [{"letter": o["letter"], "text": o["text"]} for o in q["options"]]}
        if privileged:
            # PRIVILEGED: for brains that read simulator state (the oracle and its noisy wrapper).
            # The snapshot and the options' structured values; never rendered into the prompt.
            context["privileged"] = {**q["privileged"], "skill": q["skill"],
                                     "options": [{"letter": o["letter"], "value": o["value"]} for o in q["options"]]}

        def offered(v):
            if v["answer"] not in letters:
                raise ResponseError(f"$.answer: {v['answer']!r} is not one of the offered options "
                                    f"{', '.join(letters)}")
        return self.ask(values, shown, context, check=offered)


class GroundingDiagnoser(Diagnoser):
    """The ``diagnose`` role asked a grounding question: answer with a point and an offset."""
    prompt_name = "diagnose_grounding"

    def answer(self, q: dict, images: dict, profile, privileged: bool, marks: MarkOptions | None = None,
               convention: PixelConvention | None = None, closing_axis_eef=(0.0, 1.0, 0.0)) -> RoleResult:
        marks = MarkOptions() if marks is None else marks
        camera = q["meta"]["camera"]
        if camera not in images:
            raise ValueError(f"question {q['id']}: asks about camera {camera!r}, and the question has no such image")
        if convention is None:
            h, w = np.asarray(images[camera]).shape[:2]
            convention = PixelConvention("pixels", w, h)
        words = gnd.offset_words(profile.directions)
        self.schema = grounding_schema(words)
        shown, camera_text = look(q, images, profile, marks, convention, closing_axis_eef)
        example = {"schema_version": 1, "point": {"camera": camera, "pixel": [0, 0], "label": "<what you point at>"},
                   "offset_mm": {w: 0 for w in words}, "reasoning": "one or two sentences"}
        values = {**_values(q, profile, images, camera_text),
                  "what": (f"Give the point in the '{camera}' image, x and y in {convention.describe()}. "
                           f"Offsets: mm along {', '.join(words)} from the grip point to the point you give."),
                  "options": json.dumps(example)}
        context = {"question_id": q["id"], "skill": "grounding", "question": q["question"],
                   "pointing": {"camera": camera, "convention": convention.to_json(), "offset_words": words}}
        if privileged:
            # PRIVILEGED: the grounding truth (object AABBs, the visible mask, the reference point)
            context["privileged"] = {**q["privileged"], "skill": "grounding"}

        def on_image(v):
            p = v["point"]
            if p["camera"] != camera:
                raise ResponseError(f"$.point.camera: {p['camera']!r}: the question asks for a point in {camera!r}")
            if not convention.in_range(float(p["pixel"][0]), float(p["pixel"][1])):
                raise ResponseError(f"$.point.pixel: {p['pixel']} is outside the image: x and y in "
                                    f"{convention.describe()}")
        return self.ask(values, shown, context, check=on_image)


def _axis(v) -> str:
    names = ("x", "y", "z")
    for i, c in enumerate(v):
        if abs(float(c)) > 0.5:
            return ("+" if float(c) > 0 else "-") + names[i]
    return "?"
