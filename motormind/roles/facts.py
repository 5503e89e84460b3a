"""The numbers a role's prompt states about the robot, its cameras and the episode (issue 34 item 3,
issue 33 item 5), each from its one source, rounded for prompts (mm, degrees, whole pixels):

    setup    fixed for the episode, so it opens the user prompt (the same bytes in every call):
             the gripper's opening range, finger length and tips (the robot profile), the top speed
             (the profile), the table's surface height (``Robot.scene_facts()``), what the marks on
             the images are (the VLM config's ``marks``), and each camera's words (the profile's
             ``cameras``) and numbers (``Robot.cameras()``: field of view, where it stands)
    look     of the frames this prompt carries: each camera's grip-point pixel and mm per pixel at
             its depth (the marks' info, ``grounding.marks``; computed the same way when marks are
             off), and where a gripper camera is now
    budget   what the episode has used and has left: control steps in simulation, wall-clock seconds
             on an arm without a step budget, and batches (``EpisodeRunner.budget_left``; a ROS 2
             role node counts what its topics tell it: ``BudgetCounter``)

Nothing here is privileged: a teleoperator knows the gripper, the table, the cameras and the clock;
no object's pose is read. ``PromptFacts.values()`` gives the three texts as prompt placeholders
(``setup``, ``look``, ``budget``), which ``components.Context.base`` adds to every role's values.
"""
from __future__ import annotations

import time
from typing import Callable

import numpy as np

from ..views import describe as describe_views

PIXELS = "pixel (u, v): u to the right, v down, from the image's top-left corner"


def _mm(v: float) -> str:
    return f"{float(v):.0f}"


def gripper_text(profile) -> str:
    s = (f"- Gripper: the finger gap opens from {profile.gripper_min_width_mm:g} to "
         f"{profile.gripper_max_width_mm:g} mm")
    if profile.finger_length_mm is not None:
        s += f"; the fingers are {profile.finger_length_mm:g} mm long"
    if profile.tip_past_grip_mm is not None:
        s += (f"; their tips reach {profile.tip_past_grip_mm:g} mm past the grip point (the measured eef "
              f"position, between the fingers)")
    return s + "."


def speed_text(profile) -> str:
    per_step = profile.move_mm_s * profile.period_s
    return (f"- Speed: moves at most {profile.move_mm_s:g} mm/s ({per_step:.1f} mm per control step of "
            f"{profile.period_s * 1000:g} ms), rotations at most {profile.rotate_deg_s:g} deg/s "
            f"({profile.rotate_deg_s * profile.period_s:.1f} deg per control step); "
            f"a wait of 1 s spends {1.0 / profile.period_s:.0f} control steps.")


def table_text(scene: dict | None) -> str:
    z = (scene or {}).get("table_z_mm")
    if z is None:
        return "- Table surface: not known to the stack (judge it from the images)."
    if (scene or {}).get("surface") == "floor":
        return f"- The objects stand on the floor: its surface is at z = {_mm(z)} mm (base frame)."
    return f"- Table surface (what the objects stand on): z = {_mm(z)} mm (base frame)."


def marks_text(marks, gripper_camera: bool = True) -> str:
    """What the marks on the images are (``grounding.marks.MarkOptions``), "" with marks off."""
    if marks is None or not marks.enabled:
        return ""
    parts = []
    if marks.grip_point:
        parts.append("a magenta ring at the grip point" + (" (labelled grip)" if marks.labels else ""))
    if marks.arrows:
        parts.append(f"short arrows from it for {', '.join(marks.arrows)} (red ~x, green ~y, blue ~z)")
    parts.append("a scale bar at the grip point's depth (bottom left"
                 + (", labelled with its length" if marks.labels else "") + ")")
    if marks.closing_line and gripper_camera:
        parts.append("in a gripper camera, the fingers' closing line in yellow, ticks where the fingertips are")
    return "- Marks drawn on the images: " + "; ".join(parts) + "."


def budget_text(b: dict | None) -> str:
    """``EpisodeRunner.budget_left()``'s dict as a prompt line: steps when the episode has a step
    budget (simulation), else wall-clock seconds (a real arm)."""
    if not b:
        return "Budget: not known."
    batches = ""
    if b.get("batch_budget"):
        batches = f"; batches {int(b.get('batches_used') or 0)} of at most {int(b['batch_budget'])}"
    if b.get("step_budget"):
        used, total = int(b.get("steps_used") or 0), int(b["step_budget"])
        left = b.get("steps_left")
        left = max(0, total - used) if left is None else int(left)
        return f"Budget: {used} of {total} control steps used, {left} left{batches}."
    if b.get("wall_budget_s"):
        used, total = float(b.get("wall_s_used") or 0.0), float(b["wall_budget_s"])
        left = b.get("wall_s_left")
        left = max(0.0, total - used) if left is None else float(left)
        return f"Budget: {used:.0f} of {total:.0f} s used, {left:.0f} s left (wall clock){batches}."
    return "Budget: not known."


def grip_info(cal, eef, width_px: int, height_px: int) -> dict:
    """The grip point in one image, as the marks' info says it (``grounding.marks.mark_image``): the
    same projection, for frames sent without marks."""
    c = cal.resized(width_px, height_px)
    g = c.project_point(np.asarray(eef[0], dtype=float), eef)
    info = {"camera": cal.name, "size": [width_px, height_px],
            "grip_px": None if g is None else [round(g[0], 1), round(g[1], 1)],
            "grip_in_view": bool(g is not None and c.in_image(g[0], g[1]))}
    if g is not None:
        info["grip_depth_m"] = round(g[2], 4)
        info["mm_per_px"] = round(c.mm_per_px(g[2]), 3)
    return info


def look_line(name: str, info: dict | None, cal=None, eef=None, convention=None) -> str:
    """One image's grip point, in ``convention`` (``grounding.pixels.PixelConvention``: the model
    family's, the one its points are read in) or, without one, in pixels of the frame as sent."""
    if not info or "grip_px" not in info:
        return f"- {name}: no calibration: the grip point's pixel is not known."
    w, h = info.get("size") or (cal.width_px, cal.height_px)
    px = info["grip_px"]
    per_unit = 1.0                                   # frame pixels per unit of the convention
    if convention is None or (convention.kind == "pixels" and (convention.width, convention.height) == (w, h)):
        grid, unit, to_conv = f"{w} x {h} px", "px", (lambda u, v: (u, v))
    elif convention.kind == "norm1000":
        grid, unit, per_unit = "0-1000 coordinates", "1/1000 of the image width", w / 1000.0
        to_conv = (lambda u, v: convention.from_image(u, v, w, h))
    else:
        grid, unit, per_unit = f"{convention.width} x {convention.height} px as you see it", "px", w / convention.width
        to_conv = (lambda u, v: convention.from_image(u, v, w, h))
    if px is None:
        s = f"- {name} ({grid}): the grip point is behind the camera"
    else:
        x, y = to_conv(float(px[0]), float(px[1]))
        u, v = int(round(x)), int(round(y))
        where = "" if info.get("grip_in_view") else ", outside the image"
        at = "" if unit != "px" else "pixel "
        s = f"- {name} ({grid}): the grip point at {at}({u}, {v}){where}"
        if info.get("mm_per_px"):
            s += (f", {float(info['grip_depth_m']) * 1000:.0f} mm from the camera: "
                  f"{float(info['mm_per_px']) * per_unit:.2g} mm per {unit} at that depth")
    if cal is not None and cal.mount == "gripper" and eef is not None:
        p, _ = cal.pose_base(eef)
        p = np.asarray(p, dtype=float) * 1000.0
        s += f"; the camera is now at x {_mm(p[0])}, y {_mm(p[1])}, z {_mm(p[2])} mm"
    return s + "."


class PromptFacts:
    """The setup, look and budget texts of one robot's episode (the module's doc)."""

    def __init__(self, profile, camera_names=None, calibrations: dict | None = None, scene: dict | None = None,
                 budget: Callable[[], dict] | None = None, marks=None, convention: Callable | None = None):
        self.profile = profile
        self.camera_names = camera_names            # None: every camera the profile describes
        self.calibrations = dict(calibrations or {})
        self.scene = dict(scene or {})
        self.budget = budget
        self.marks = marks                          # grounding.marks.MarkOptions (None: not said)
        self.convention = convention                # (camera, w, h) -> the PixelConvention points are read in
        self._setup: str | None = None
        self._look = "- no images yet."

    @classmethod
    def of_robot(cls, robot, budget: Callable[[], dict] | None = None, marks=None,
                 convention: Callable | None = None) -> "PromptFacts":
        """From the backend: its calibrations (``Robot.cameras()``) and scene facts, read once."""
        cams = getattr(robot, "cameras", None)
        scene = getattr(robot, "scene_facts", None)
        names = list(getattr(robot, "camera_names", None) or []) or None
        return cls(robot.profile, names, cams() if callable(cams) else {}, scene() if callable(scene) else {},
                   budget, marks, convention)

    HEADER = "The robot and its scene (fixed for this episode; base frame: +x forward, +y left, +z up; mm and degrees):"

    def robot(self) -> str:
        """The gripper, the speed and the table (the Monitor's setup: it is shown no images)."""
        p = self.profile
        return "\n".join([self.HEADER, gripper_text(p), speed_text(p), table_text(self.scene)])

    def setup(self) -> str:
        """Fixed for the episode (computed once): the same bytes in every prompt. ``robot()``, what
        the marks are, and each camera in words and numbers."""
        if self._setup is None:
            p = self.profile
            lines = [self.robot()]
            legend = marks_text(self.marks, any(c.mount == "gripper" for c in self.calibrations.values()))
            if self.calibrations and legend:
                lines.append(legend)
            lines.append("Where each camera looks from (base frame):")
            lines.append(describe_views(p.cameras, p.directions, self.camera_names, self.calibrations))
            self._setup = "\n".join(lines)
        return self._setup

    def saw(self, obs, images: dict, infos: dict | None = None) -> None:
        """The frames the roles are about to be shown (``images``: name -> the frame as sent) and the
        marks' info for them (``grounding.marks``; None or missing: computed from the calibration)."""
        if not images:
            self._look = "- no images."
            return
        from ..grounding.camera import eef_pose
        eef = eef_pose(obs)
        infos = infos or {}
        lines, said = [], set()
        for name, img in images.items():
            cal = self.calibrations.get(name)
            info = infos.get(name)
            h, w = np.asarray(img).shape[:2]
            if (not info or "grip_px" not in info) and cal is not None:
                info = grip_info(cal, eef, int(w), int(h))
            conv = self.convention(name, int(w), int(h)) if self.convention else None
            if conv is not None and not (conv.kind == "pixels" and (conv.width, conv.height) == (int(w), int(h))):
                said.add(conv.describe())
            lines.append(look_line(name, info, cal, eef, conv))
        how = "; ".join(sorted(said)) if said else PIXELS
        self._look = "\n".join([f"Where the grip point is in each image ({how}):", *lines])

    def look(self) -> str:
        return self._look

    def budget_text(self) -> str:
        return budget_text(self.budget() if self.budget else None)

    def values(self) -> dict:
        """The prompt placeholders ``setup``, ``look`` and ``budget``."""
        return {"setup": self.setup(), "look": self.look(), "budget": self.budget_text()}


class BudgetCounter:
    """What a ROS 2 role node knows of the budget: the control steps the Controller's reports say were
    used (each batch once), the wall clock since its task arrived, and the episode config's budgets
    (``max_steps`` is known where the config or the evaluator gives it). The same dict as
    ``EpisodeRunner.budget_left``."""

    def __init__(self, cfg, clock: Callable[[], float] = time.monotonic):
        self.cfg = cfg
        self.clock = clock
        self.t0 = clock()
        self.steps = 0
        self._seen: set = set()

    def start(self) -> None:
        self.t0, self.steps, self._seen = self.clock(), 0, set()

    def on_report(self, rep: dict) -> None:
        bid = rep.get("batch_id")
        if not bid or bid in self._seen:
            return
        self._seen.add(bid)
        self.steps += int(rep.get("steps", 0) or 0)

    def __call__(self) -> dict:
        cfg, used = self.cfg, self.clock() - self.t0
        return {"steps_used": self.steps, "step_budget": cfg.max_steps,
                "steps_left": None if cfg.max_steps is None else max(0, cfg.max_steps - self.steps),
                "wall_s_used": round(used, 1), "wall_budget_s": cfg.wall_budget_s,
                "wall_s_left": round(max(0.0, cfg.wall_budget_s - used), 1),
                "batches_used": len(self._seen), "batch_budget": cfg.max_batches}
