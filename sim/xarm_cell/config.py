"""Scene configs of the xArm6 rehearsal cell: ``configs/cells/NAME.yaml`` as typed, checked data.

A scene is a table in front of the arm, blocks (free bodies) and target marks (thin pads an outside
hand can move), the arm's pose at reset (and, if the scene says, a stored TCP offset other than the
xarm6 profile's, which the backend writes on connect anyway), the cameras with their
calibration, and how trials lay the scene out (a seeded area, spacing and yaw range).

Units: metres, kilograms, newtons and degrees in the YAML; everything is in the arm's BASE frame
(+x forward from the base, +y left, +z up; the base at the origin). Camera calibration follows the
OpenCV convention a calibration tool writes: the camera frame has +z along the optical axis, +x to
the image's right, +y to the image's bottom; ``position_m`` and ``quat_xyzw`` (or ``look_at_m``) place
it in the base frame (a fixed camera) or in the flange frame (a wrist camera, ``mount: flange``).

Every mistake is a ConfigError naming the file and the field (``placement.yaml: blocks.red.size_m:
must be 3 positive numbers [x, y, z] in m``); unknown keys are refused, naming the known ones.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import yaml

from motormind.errors import ConfigError, yaml_error
from motormind.geometry import quat_to_mat
from motormind.paths import config_dir

MOUNTS = ("fixed", "flange")
DEFAULT_SHIFT_M = (0.09, 0.16)     # interference.shift_m when the scene does not say
DEFAULT_TIMESTEP_S = 0.002


@dataclass(frozen=True)
class Block:
    name: str
    size_m: tuple            # full extents x, y, z (m)
    mass_kg: float
    rgba: tuple
    friction: float
    label: str               # how an instruction names it ("red block")


@dataclass(frozen=True)
class Mark:
    name: str
    size_m: tuple            # full extents (a thin pad: z is its thickness)
    rgba: tuple
    label: str


@dataclass(frozen=True)
class CameraSpec:
    name: str
    mount: str               # fixed (base frame) | flange (moves with the wrist)
    position_m: tuple        # camera origin, base or flange frame
    rot: np.ndarray          # 3x3: OpenCV camera axes (x right, y down, z forward) in that frame
    fovy_deg: float
    width: int
    height: int
    fps: float               # frames per second streamed to each client

    def intrinsics(self) -> dict:
        """Pinhole intrinsics of the rendered image (px): square pixels, centred principal point,
        pixel centres at integers (motormind/grounding/camera.py's convention: cx = (W - 1) / 2)."""
        f = (self.height / 2.0) / math.tan(math.radians(self.fovy_deg) / 2.0)
        return {"fx": f, "fy": f, "cx": (self.width - 1) / 2.0, "cy": (self.height - 1) / 2.0,
                "width": self.width, "height": self.height}

    def calibration(self) -> dict:
        """What a calibration file holds (``motormind.grounding.camera.load_calibrations`` reads it):
        the camera's pose (OpenCV axes, base or flange frame) and intrinsics. The cell serves each
        camera's depth beside its colour stream (``/<name>.depth.png``, sim/xarm_cell/cameras.py)."""
        from motormind.geometry import mat_to_quat
        from motormind.grounding.camera import CONVENTION
        return {"camera": self.name, "frame": "base" if self.mount == "fixed" else "flange",
                "position_m": [float(v) for v in self.position_m],
                "quat_xyzw": [round(float(v), 8) for v in mat_to_quat(self.rot)],
                "convention": CONVENTION, **self.intrinsics(), "depth": True}


@dataclass(frozen=True)
class Layout:
    area_x_m: tuple          # where block and mark centres are drawn (base frame)
    area_y_m: tuple
    min_spacing_m: float     # between any two centres
    yaw_deg: tuple           # block yaw range


@dataclass(frozen=True)
class CellConfig:
    name: str
    description: str
    source: str
    table_top_z_m: float                 # the table surface in the base frame (the arm stands on it)
    table_x_m: tuple                     # the table's extent
    table_y_m: tuple
    initial_pose: tuple                  # TCP x, y, z (mm), roll, pitch, yaw (deg) at reset
    tcp_offset: tuple                    # the controller's stored TCP offset at power-on: x, y, z (mm),
                                         # r, p, y (deg); by default the xarm6 profile's, which the
                                         # backend writes on connect (configs/robots/xarm6.yaml safety)
    gripper_force_n: float               # the fingers' grip force when they close on something
    blocks: dict                         # name -> Block
    marks: dict                          # name -> Mark
    cameras: dict                        # name -> CameraSpec
    layout: Layout
    timestep_s: float                    # the physics step
    interference_shift_m: tuple          # (lo, hi) how far an outside hand moves an object


# -- reading --------------------------------------------------------------------------------------
_TOP = {"name", "description", "table", "arm", "gripper", "blocks", "marks", "cameras", "layout", "physics",
        "interference"}
_REQUIRED = ("name", "table", "arm", "blocks", "marks", "layout")


class _R:
    def __init__(self, source: str):
        self.source = source

    def fail(self, where: str, msg: str):
        raise ConfigError(f"{self.source}: {where}: {msg}")

    def mapping(self, v, where: str, keys: set, required=()) -> dict:
        if not isinstance(v, dict):
            self.fail(where, f"must be a mapping, got {type(v).__name__}")
        extra = sorted(str(k) for k in set(v) - keys)
        if extra:
            self.fail(where, f"unknown key(s) {extra} (known: {', '.join(sorted(keys))})")
        for k in required:
            if k not in v:
                self.fail(f"{where}.{k}", "missing")
        return v

    def num(self, v, where: str, lo: float | None = None, hi: float | None = None, strict_lo=False) -> float:
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
            self.fail(where, f"must be a finite number, got {v!r}")
        if lo is not None and (v < lo or (strict_lo and v == lo)):
            self.fail(where, f"must be {'>' if strict_lo else '>='} {lo:g}, got {v!r}")
        if hi is not None and v > hi:
            self.fail(where, f"must be <= {hi:g}, got {v!r}")
        return float(v)

    def vec(self, v, where: str, n: int, what: str = "numbers", positive=False) -> tuple:
        if not isinstance(v, (list, tuple)) or len(v) != n:
            self.fail(where, f"must be {n} {'positive ' if positive else ''}{what}, got {v!r}")
        return tuple(self.num(x, f"{where}[{i}]", 0.0 if positive else None, strict_lo=positive)
                     for i, x in enumerate(v))

    def range(self, v, where: str) -> tuple:
        lo, hi = self.vec(v, where, 2, "numbers [lo, hi]")
        if lo > hi:
            self.fail(where, f"lo {lo:g} must be <= hi {hi:g}")
        return lo, hi

    def rgba(self, v, where: str) -> tuple:
        c = self.vec(v, where, 4, "numbers r, g, b, a in 0..1")
        if any(not 0.0 <= x <= 1.0 for x in c):
            self.fail(where, f"every component must be within 0..1, got {list(c)}")
        return c


def _look_rot(pos, target, up=(0.0, 0.0, 1.0)) -> np.ndarray:
    """OpenCV camera axes (columns x right, y down, z forward) looking from ``pos`` at ``target``."""
    z = np.asarray(target, float) - np.asarray(pos, float)
    z /= np.linalg.norm(z)
    x = np.cross(z, np.asarray(up, float))
    if np.linalg.norm(x) < 1e-6:                # looking straight along up: any right will do
        x = np.cross(z, np.array([1.0, 0.0, 0.0]))
    x /= np.linalg.norm(x)
    y = np.cross(z, x)
    return np.column_stack([x, y, z])


def _camera(r: _R, name: str, c) -> CameraSpec:
    w = f"cameras.{name}"
    keys = {"mount", "position_m", "quat_xyzw", "look_at_m", "up", "fovy_deg", "width", "height", "fps"}
    r.mapping(c, w, keys, ("mount", "position_m"))
    if c["mount"] not in MOUNTS:
        r.fail(f"{w}.mount", f"must be one of {', '.join(MOUNTS)}, got {c['mount']!r}")
    pos = r.vec(c["position_m"], f"{w}.position_m", 3, "numbers [x, y, z] in m")
    if ("quat_xyzw" in c) == ("look_at_m" in c):
        r.fail(w, "give exactly one of quat_xyzw (the calibrated orientation) or look_at_m (a point it looks at)")
    if "quat_xyzw" in c:
        q = np.array(r.vec(c["quat_xyzw"], f"{w}.quat_xyzw", 4, "numbers x, y, z, w"))
        if np.linalg.norm(q) < 1e-6:
            r.fail(f"{w}.quat_xyzw", "must not be all zeros")
        rot = quat_to_mat(q / np.linalg.norm(q))
    else:
        at = r.vec(c["look_at_m"], f"{w}.look_at_m", 3, "numbers [x, y, z] in m")
        if np.linalg.norm(np.subtract(at, pos)) < 1e-6:
            r.fail(f"{w}.look_at_m", "must differ from position_m")
        up = r.vec(c.get("up", [0, 0, 1]), f"{w}.up", 3, "numbers [x, y, z]")
        rot = _look_rot(pos, at, up)
    size = {}
    for k, dflt in (("width", 320), ("height", 240)):
        v = c.get(k, dflt)
        if isinstance(v, bool) or not isinstance(v, int) or not 16 <= v <= 2048:
            r.fail(f"{w}.{k}", f"must be a whole number of pixels within 16..2048, got {v!r}")
        size[k] = v
    return CameraSpec(name, c["mount"], pos, rot, r.num(c.get("fovy_deg", 58.0), f"{w}.fovy_deg", 1.0, 170.0),
                      size["width"], size["height"], r.num(c.get("fps", 5.0), f"{w}.fps", 0.0, 60.0, strict_lo=True))


def profile_tcp_offset(profile: str = "xarm6") -> tuple:
    """The TCP offset the xArm6 backend writes on connect (the profile's ``safety.tcp_offset_mm`` and
    ``tcp_offset_rpy_deg``): x, y, z (mm), roll, pitch, yaw (deg). One definition, the profile's."""
    from motormind.profile import load_profile
    return load_profile(profile).safety.tcp_offset


def cell_from_dict(d, source: str = "cell") -> CellConfig:
    r = _R(source)
    r.mapping(d, "scene", _TOP, _REQUIRED)
    if not isinstance(d["name"], str) or not d["name"].strip():
        r.fail("name", f"must be a non-empty string, got {d['name']!r}")
    t = r.mapping(d["table"], "table", {"top_z_m", "x_m", "y_m"}, ("top_z_m", "x_m", "y_m"))
    arm = r.mapping(d["arm"], "arm", {"initial_pose", "tcp_offset"}, ("initial_pose",))
    grip = r.mapping(d.get("gripper") or {}, "gripper", {"force_n"})
    blocks = {}
    bd = r.mapping(d["blocks"], "blocks", set(d["blocks"]) if isinstance(d["blocks"], dict) else set())
    if not bd:
        r.fail("blocks", "must name at least one block")
    for n, b in bd.items():
        w = f"blocks.{n}"
        r.mapping(b, w, {"size_m", "mass_kg", "rgba", "friction", "label"}, ("size_m", "rgba"))
        blocks[str(n)] = Block(str(n), r.vec(b["size_m"], f"{w}.size_m", 3, "numbers [x, y, z] in m", True),
                               r.num(b.get("mass_kg", 0.06), f"{w}.mass_kg", 0.0, 5.0, strict_lo=True),
                               r.rgba(b["rgba"], f"{w}.rgba"), r.num(b.get("friction", 1.0), f"{w}.friction", 0.0,
                                                                    strict_lo=True),
                               str(b.get("label", str(n).replace("_", " "))))
    marks = {}
    md = r.mapping(d["marks"], "marks", set(d["marks"]) if isinstance(d["marks"], dict) else set())
    if not md:
        r.fail("marks", "must name at least one target mark")
    for n, m in md.items():
        w = f"marks.{n}"
        r.mapping(m, w, {"size_m", "rgba", "label"}, ("size_m", "rgba"))
        if str(n) in blocks:
            r.fail(w, "a mark and a block cannot share a name")
        marks[str(n)] = Mark(str(n), r.vec(m["size_m"], f"{w}.size_m", 3, "numbers [x, y, z] in m", True),
                             r.rgba(m["rgba"], f"{w}.rgba"), str(m.get("label", str(n).replace("_", " "))))
    cams = {}
    cd = d.get("cameras") or {}
    if not isinstance(cd, dict):
        r.fail("cameras", f"must be a mapping name -> camera, got {type(cd).__name__}")
    for n, c in cd.items():
        if not isinstance(n, str) or not n.replace("_", "").isalnum():
            r.fail(f"cameras.{n}", "a camera name is letters, digits and '_' (it becomes a URL path)")
        cams[n] = _camera(r, n, c)
    lay = r.mapping(d["layout"], "layout", {"area_x_m", "area_y_m", "min_spacing_m", "yaw_deg"},
                    ("area_x_m", "area_y_m", "min_spacing_m"))
    layout = Layout(r.range(lay["area_x_m"], "layout.area_x_m"), r.range(lay["area_y_m"], "layout.area_y_m"),
                    r.num(lay["min_spacing_m"], "layout.min_spacing_m", 0.0, strict_lo=True),
                    r.range(lay.get("yaw_deg", [0, 0]), "layout.yaw_deg"))
    phys = r.mapping(d.get("physics") or {}, "physics", {"timestep_s"})
    itf = r.mapping(d.get("interference") or {}, "interference", {"shift_m"})
    tx, ty = r.range(t["x_m"], "table.x_m"), r.range(t["y_m"], "table.y_m")
    for ax, (lo, hi), (tlo, thi) in (("x", layout.area_x_m, tx), ("y", layout.area_y_m, ty)):
        if lo < tlo or hi > thi:
            r.fail(f"layout.area_{ax}_m", f"[{lo:g}, {hi:g}] must lie on the table ({ax} {tlo:g}..{thi:g})")
    shift = r.range(itf.get("shift_m", list(DEFAULT_SHIFT_M)), "interference.shift_m")
    if shift[0] <= 0:
        r.fail("interference.shift_m", f"the shortest shift must be > 0, got {shift[0]:g}")
    return CellConfig(
        name=d["name"], description=str(d.get("description", "")), source=source,
        table_top_z_m=r.num(t["top_z_m"], "table.top_z_m"), table_x_m=tx, table_y_m=ty,
        initial_pose=r.vec(arm["initial_pose"], "arm.initial_pose", 6, "numbers x, y, z (mm), roll, pitch, yaw (deg)"),
        tcp_offset=r.vec(arm["tcp_offset"], "arm.tcp_offset", 6, "numbers x, y, z (mm), roll, pitch, yaw (deg)")
        if "tcp_offset" in arm else profile_tcp_offset(),
        gripper_force_n=r.num(grip.get("force_n", 25.0), "gripper.force_n", 0.0, 200.0, strict_lo=True),
        blocks=blocks, marks=marks, cameras=cams, layout=layout,
        timestep_s=r.num(phys.get("timestep_s", DEFAULT_TIMESTEP_S), "physics.timestep_s", 0.0002, 0.01),
        interference_shift_m=shift)


def known_cells() -> list[str]:
    return sorted(p.stem for p in (config_dir() / "cells").glob("*.yaml"))


def load_cell(name_or_path: str | Path) -> CellConfig:
    """A scene by name (``configs/cells/NAME.yaml``) or by path."""
    p = Path(name_or_path)
    if not p.suffix:
        p = config_dir() / "cells" / f"{name_or_path}.yaml"
    if not p.is_file():
        raise ConfigError(f"--scene: {name_or_path!r} is not a scene (known: {', '.join(known_cells()) or 'none'}; "
                          "or give a path to a YAML file)")
    try:
        doc = yaml.safe_load(p.read_text())
    except yaml.YAMLError as e:
        raise yaml_error(p, e) from None
    return cell_from_dict(doc, source=p.name)
