"""One camera's calibration: pinhole intrinsics and a pose, and the maps between pixels and the base frame.

Conventions (docs/grounding.md):

* Camera axes are OpenCV's: +x to the image's right, +y to the image's bottom, +z forward along the
  optical axis. ``rot``'s columns are those axes expressed in the mount frame.
* Pixels: ``(u, v)``, u to the right, v down, the centre of the top-left pixel at (0, 0) (OpenCV's
  drawing convention). A centred principal point of a W x H image is ((W - 1) / 2, (H - 1) / 2).
* ``mount``: ``fixed`` (the pose is in the robot's base frame) or ``gripper`` (the pose is in the
  end-effector frame: the frame of ``Observation.eef_pos_m`` / ``eef_quat_xyzw``, the grip point's;
  a wrist camera's pose in the base frame is then evaluated at the eef pose of each observation).
* Depth images hold the distance along the optical axis (camera z), in metres, float32, the same
  size and orientation as the upright colour image; NaN where there is no reading.
* Sizes follow the image: ``resized(w, h)`` is the same camera for an image scaled to w x h (what a
  VLM is sent), so a pixel a model names maps back exactly.

Units are in the names (``_m``, ``_px``, ``_deg``); base frame metres throughout.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..errors import ConfigError
from ..geometry import mat_to_quat, quat_to_mat, rpy_to_mat

MOUNTS = ("fixed", "gripper")
FRAMES = {"base": "fixed", "fixed": "fixed", "eef": "gripper", "gripper": "gripper", "flange": "gripper"}
CONVENTION = "opencv (x right, y down, z forward); pixel centres at integer (u, v), (0, 0) top-left"
OPENGL_TO_OPENCV = np.diag([1.0, -1.0, -1.0])   # a MuJoCo / OpenGL camera looks along -z with +y up


def _rot_tuple(r) -> tuple:
    a = np.asarray(r, dtype=float).reshape(3, 3)
    return tuple(tuple(float(x) for x in row) for row in a)


@dataclass(frozen=True)
class CameraCalibration:
    name: str
    width_px: int
    height_px: int
    fx_px: float
    fy_px: float
    cx_px: float
    cy_px: float
    mount: str = "fixed"             # fixed: pose in the base frame; gripper: pose in the eef frame
    position_m: tuple = (0.0, 0.0, 0.0)
    rot_rows: tuple = ((1.0, 0.0, 0.0), (0.0, 1.0, 0.0), (0.0, 0.0, 1.0))   # 3x3, OpenCV axes as columns
    depth: bool = False              # the backend gives a depth image for this camera
    no_depth_reason: str = "no depth source configured"   # why not (when depth is False)
    source: str = field(default="", compare=False)        # where the calibration came from (file, URL, sim)

    def __post_init__(self) -> None:
        w = f"camera {self.name!r}"
        if self.mount not in MOUNTS:
            raise ConfigError(f"{w}: mount: must be one of {', '.join(MOUNTS)}, got {self.mount!r}")
        for k in ("width_px", "height_px"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ConfigError(f"{w}: {k}: must be a whole number of pixels >= 1, got {v!r}")
        for k in ("fx_px", "fy_px"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v) and v > 0):
                raise ConfigError(f"{w}: {k}: must be a finite focal length > 0 px, got {v!r}")
        for k in ("cx_px", "cy_px"):
            v = getattr(self, k)
            if not (isinstance(v, (int, float, np.floating)) and math.isfinite(v)):
                raise ConfigError(f"{w}: {k}: must be a finite number of px, got {v!r}")
        r = np.asarray(self.rot_rows, dtype=float)
        if r.shape != (3, 3) or not np.all(np.isfinite(r)) or np.abs(r.T @ r - np.eye(3)).max() > 1e-4 \
                or np.linalg.det(r) < 0:
            raise ConfigError(f"{w}: rotation: must be a proper 3x3 rotation matrix, got {self.rot_rows!r}")
        p = np.asarray(self.position_m, dtype=float)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise ConfigError(f"{w}: position_m: must be 3 finite numbers [x, y, z] m, got {self.position_m!r}")

    # -- construction -----------------------------------------------------------------------------
    @classmethod
    def from_fovy(cls, name: str, width_px: int, height_px: int, fovy_deg: float, mount: str = "fixed",
                  position_m=(0.0, 0.0, 0.0), rot=np.eye(3), **kw) -> "CameraCalibration":
        """A camera with square pixels and a centred principal point, from its vertical field of view
        (MuJoCo's ``fovy``)."""
        if not (isinstance(fovy_deg, (int, float)) and 0 < fovy_deg < 180):
            raise ConfigError(f"camera {name!r}: fovy_deg: must be within (0, 180), got {fovy_deg!r}")
        f = (height_px / 2.0) / math.tan(math.radians(fovy_deg) / 2.0)
        return cls(name, int(width_px), int(height_px), f, f, (width_px - 1) / 2.0, (height_px - 1) / 2.0,
                   mount, tuple(float(v) for v in position_m), _rot_tuple(rot), **kw)

    @classmethod
    def from_opengl(cls, name: str, width_px: int, height_px: int, fovy_deg: float, mount: str,
                    position_m, rot_opengl, **kw) -> "CameraCalibration":
        """From a MuJoCo / OpenGL camera frame (looks along its -z, +y up), e.g. ``cam_xmat``."""
        return cls.from_fovy(name, width_px, height_px, fovy_deg, mount, position_m,
                             np.asarray(rot_opengl, dtype=float).reshape(3, 3) @ OPENGL_TO_OPENCV, **kw)

    def with_depth(self, depth: bool, reason: str = "") -> "CameraCalibration":
        return replace(self, depth=bool(depth), no_depth_reason="" if depth else (reason or self.no_depth_reason))

    # -- size -------------------------------------------------------------------------------------
    @property
    def size(self) -> tuple[int, int]:
        """(width, height) px."""
        return self.width_px, self.height_px

    def resized(self, width_px: int, height_px: int) -> "CameraCalibration":
        """The same camera for its image scaled to ``width_px`` x ``height_px`` (pixel centres map as
        u' = (u + 0.5) sx - 0.5)."""
        if (width_px, height_px) == self.size:
            return self
        sx, sy = width_px / self.width_px, height_px / self.height_px
        return replace(self, width_px=int(width_px), height_px=int(height_px), fx_px=self.fx_px * sx,
                       fy_px=self.fy_px * sy, cx_px=(self.cx_px + 0.5) * sx - 0.5, cy_px=(self.cy_px + 0.5) * sy - 0.5)

    def pixel_to(self, u: float, v: float, width_px: int, height_px: int) -> tuple[float, float]:
        """Pixel (u, v) of this camera's image in the same image scaled to ``width_px`` x ``height_px``."""
        sx, sy = width_px / self.width_px, height_px / self.height_px
        return (u + 0.5) * sx - 0.5, (v + 0.5) * sy - 0.5

    @property
    def fov_deg(self) -> tuple[float, float]:
        """(horizontal, vertical) field of view, degrees."""
        return (math.degrees(2 * math.atan(self.width_px / 2.0 / self.fx_px)),
                math.degrees(2 * math.atan(self.height_px / 2.0 / self.fy_px)))

    @property
    def K(self) -> np.ndarray:
        return np.array([[self.fx_px, 0.0, self.cx_px], [0.0, self.fy_px, self.cy_px], [0.0, 0.0, 1.0]])

    # -- pose -------------------------------------------------------------------------------------
    @property
    def rot(self) -> np.ndarray:
        """3x3: the camera's OpenCV axes (columns) in its mount frame."""
        return np.asarray(self.rot_rows, dtype=float)

    def pose_base(self, eef=None) -> tuple[np.ndarray, np.ndarray]:
        """(position m, 3x3 OpenCV axes) of the camera in the base frame. ``eef`` is the
        end-effector pose ``(pos_m, rot 3x3)`` (``eef_pose(obs)``), required for a gripper camera."""
        p, r = np.asarray(self.position_m, dtype=float), self.rot
        if self.mount == "fixed":
            return p, r
        if eef is None:
            raise ValueError(f"camera {self.name!r} is on the gripper: its pose needs the eef pose")
        ep, er = np.asarray(eef[0], dtype=float), np.asarray(eef[1], dtype=float).reshape(3, 3)
        return ep + er @ p, er @ r

    # -- pixels <-> base frame ----------------------------------------------------------------------
    def to_camera(self, points_base_m, eef=None) -> np.ndarray:
        """Points (N x 3 or 3) in the camera frame (OpenCV axes), metres."""
        p, r = self.pose_base(eef)
        pts = np.atleast_2d(np.asarray(points_base_m, dtype=float))
        return (pts - p) @ r

    def project(self, points_base_m, eef=None) -> tuple[np.ndarray, np.ndarray]:
        """(uv N x 2 px, z N m): each point's pixel and its depth along the optical axis. A point
        at or behind the camera (z <= 0) has uv NaN."""
        c = self.to_camera(points_base_m, eef)
        z = c[:, 2]
        with np.errstate(divide="ignore", invalid="ignore"):
            u = self.fx_px * c[:, 0] / z + self.cx_px
            v = self.fy_px * c[:, 1] / z + self.cy_px
        uv = np.stack([u, v], axis=1)
        uv[z <= 1e-9] = np.nan
        return uv, z

    def project_point(self, point_base_m, eef=None) -> tuple[float, float, float] | None:
        """(u, v, z m) of one point; None when it is behind the camera."""
        uv, z = self.project(point_base_m, eef)
        if not np.all(np.isfinite(uv[0])):
            return None
        return float(uv[0, 0]), float(uv[0, 1]), float(z[0])

    def in_image(self, u: float, v: float) -> bool:
        """The pixel lies on the image (within its outer edge)."""
        return -0.5 <= u < self.width_px - 0.5 and -0.5 <= v < self.height_px - 0.5

    def ray_camera(self, u: float, v: float) -> np.ndarray:
        """The direction through pixel (u, v) in the camera frame, scaled to z = 1."""
        return np.array([(u - self.cx_px) / self.fx_px, (v - self.cy_px) / self.fy_px, 1.0])

    def unproject(self, u: float, v: float, depth_m: float, eef=None) -> np.ndarray:
        """The base-frame point seen at pixel (u, v) at ``depth_m`` along the optical axis."""
        if not (math.isfinite(depth_m) and depth_m > 0):
            raise ValueError(f"camera {self.name!r}: depth must be a finite distance > 0 m, got {depth_m!r}")
        p, r = self.pose_base(eef)
        return p + r @ (self.ray_camera(u, v) * float(depth_m))

    def mm_per_px(self, depth_m: float) -> float:
        """How many mm one pixel spans across the image at ``depth_m`` (on a plane facing the camera)."""
        return 1000.0 * float(depth_m) / math.sqrt(self.fx_px * self.fy_px)

    # -- records and files --------------------------------------------------------------------------
    def to_json(self, eef=None) -> dict:
        """The calibration as a file holds it (the ``from_json`` format); with ``eef`` a gripper
        camera also gets its pose in the base frame now (``base_position_m``, ``base_quat_xyzw``)."""
        d = {"camera": self.name, "width": self.width_px, "height": self.height_px,
             "fx": round(self.fx_px, 6), "fy": round(self.fy_px, 6), "cx": round(self.cx_px, 6),
             "cy": round(self.cy_px, 6), "frame": "base" if self.mount == "fixed" else "eef",
             "position_m": [round(float(v), 6) for v in self.position_m],
             "quat_xyzw": [round(float(v), 8) for v in mat_to_quat(self.rot)],
             "fov_deg": [round(v, 2) for v in self.fov_deg], "convention": CONVENTION, "depth": self.depth}
        if not self.depth:
            d["no_depth_reason"] = self.no_depth_reason
        if eef is not None and self.mount == "gripper":
            p, r = self.pose_base(eef)
            d["base_position_m"] = [round(float(v), 6) for v in p]
            d["base_quat_xyzw"] = [round(float(v), 8) for v in mat_to_quat(r)]
        return d

    @classmethod
    def from_json(cls, d: dict, name: str | None = None, tcp_offset=None, where: str = "calibration",
                  source: str = "") -> "CameraCalibration":
        """One camera from a calibration file's entry. Keys: ``width``, ``height``; ``fx``, ``fy``,
        ``cx``, ``cy`` (px) or ``fovy_deg``; ``frame``: base | eef | flange; ``position_m``;
        ``quat_xyzw`` (OpenCV axes in that frame); optional ``depth`` and ``no_depth_reason``.
        ``frame: flange`` (a wrist camera calibrated to the flange) needs ``tcp_offset`` (x, y, z mm,
        roll, pitch, yaw deg: the eef in the flange frame, the xArm's convention)."""
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be a mapping, got {type(d).__name__}")
        known = {"camera", "width", "height", "fx", "fy", "cx", "cy", "fovy_deg", "frame", "position_m",
                 "quat_xyzw", "convention", "depth", "no_depth_reason", "fov_deg", "base_position_m",
                 "base_quat_xyzw"}
        extra = sorted(set(d) - known)
        if extra:
            raise ConfigError(f"{where}: unknown key(s) {extra} (known: {', '.join(sorted(known))})")
        name = str(name or d.get("camera") or "")
        if not name:
            raise ConfigError(f"{where}.camera: missing (the camera's name)")

        def num(k, lo=None):
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or \
                    (lo is not None and v <= lo):
                raise ConfigError(f"{where}.{k}: must be a finite number{f' > {lo:g}' if lo is not None else ''}, "
                                  f"got {v!r}")
            return float(v)

        def vec(k, n):
            v = d.get(k)
            if not isinstance(v, (list, tuple)) or len(v) != n or \
                    any(isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) for x in v):
                raise ConfigError(f"{where}.{k}: must be {n} finite numbers, got {v!r}")
            return np.asarray(v, dtype=float)

        for k in ("width", "height"):
            v = d.get(k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"{where}.{k}: must be a whole number of pixels >= 1, got {v!r}")
        frame = d.get("frame", "base")
        if frame not in FRAMES:
            raise ConfigError(f"{where}.frame: must be base, eef or flange, got {frame!r}")
        pos = vec("position_m", 3)
        q = vec("quat_xyzw", 4)
        if np.linalg.norm(q) < 1e-6:
            raise ConfigError(f"{where}.quat_xyzw: must not be all zeros")
        rot = quat_to_mat(q / np.linalg.norm(q))
        if frame == "flange":
            if tcp_offset is None:
                raise ConfigError(f"{where}.frame: flange needs the robot's TCP offset (the profile's "
                                  "safety.tcp_offset_mm and tcp_offset_rpy_deg)")
            pos, rot = flange_to_eef(pos, rot, tcp_offset)
        mount = FRAMES[frame]
        if "fx" in d or "fovy_deg" not in d:
            fx, fy, cx, cy = num("fx", 0), num("fy", 0), num("cx"), num("cy")
            cal = cls(name, d["width"], d["height"], fx, fy, cx, cy, mount, tuple(pos), _rot_tuple(rot), source=source)
        else:
            fovy = num("fovy_deg", 0)
            cal = cls.from_fovy(name, d["width"], d["height"], fovy, mount, pos, rot, source=source)
        dep = d.get("depth", False)
        if not isinstance(dep, bool):
            raise ConfigError(f"{where}.depth: must be true or false, got {dep!r}")
        return cal.with_depth(dep, str(d.get("no_depth_reason") or "the calibration says the camera has no depth"))


def flange_to_eef(pos_flange_m, rot_flange, tcp_offset) -> tuple[np.ndarray, np.ndarray]:
    """A pose given in the flange frame, in the eef (TCP) frame. ``tcp_offset``: the TCP in the
    flange frame as the xArm stores it: x, y, z (mm), roll, pitch, yaw (deg)."""
    t = [float(v) for v in tcp_offset]
    if len(t) != 6:
        raise ConfigError(f"tcp_offset: must be x, y, z (mm), roll, pitch, yaw (deg), got {list(tcp_offset)!r}")
    r_off = rpy_to_mat(*(math.radians(v) for v in t[3:]))
    p_off = np.asarray(t[:3]) / 1000.0
    return r_off.T @ (np.asarray(pos_flange_m, dtype=float) - p_off), r_off.T @ np.asarray(rot_flange, dtype=float)


def eef_pose(obs) -> tuple[np.ndarray, np.ndarray]:
    """``(pos_m, rot 3x3)`` of an Observation's end effector (the grip point), base frame."""
    return np.asarray(obs.eef_pos_m, dtype=float), quat_to_mat(obs.eef_quat_xyzw)


def load_calibrations(source: str, tcp_offset=None, timeout_s: float = 5.0) -> dict[str, CameraCalibration]:
    """Every camera of a calibration file (JSON or YAML) or URL (``http://``: JSON). Accepted layouts:
    ``{"cameras": {name: entry}}``, ``{"cameras": {name: {"calibration": entry, ...}}}`` (the
    rehearsal cell's camera index) or ``{name: entry}``; ``entry`` as ``CameraCalibration.from_json``."""
    src = str(source)
    if "://" in src:
        import urllib.request
        try:
            with urllib.request.urlopen(src, timeout=timeout_s) as r:      # noqa: S310 - a configured URL
                text = r.read().decode("utf-8")
        except Exception as e:  # noqa: BLE001
            raise ConfigError(f"calibration: cannot read {src!r}: {e}") from None
        try:
            doc = json.loads(text)
        except ValueError as e:
            raise ConfigError(f"calibration: {src!r} is not JSON: {e}") from None
    else:
        from pathlib import Path
        p = Path(src)
        if not p.is_file():
            raise ConfigError(f"calibration: no file {src!r}")
        import yaml
        try:
            doc = yaml.safe_load(p.read_text())
        except yaml.YAMLError as e:
            raise ConfigError(f"calibration: {src!r} is not YAML/JSON: {e}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"calibration: {src!r} must hold a mapping of cameras")
    cams = doc.get("cameras", doc)
    if not isinstance(cams, dict) or not cams:
        raise ConfigError(f"calibration: {src!r}: cameras: must map camera name -> calibration")
    out = {}
    for name, entry in cams.items():
        if isinstance(entry, dict) and isinstance(entry.get("calibration"), dict):
            entry = entry["calibration"]
        out[str(name)] = CameraCalibration.from_json(entry, str(name), tcp_offset, f"calibration {src}: {name}",
                                                     source=src)
    return out


def sample_depth(depth: np.ndarray, u: float, v: float, size: tuple[int, int] | None = None,
                 window_px: int = 1) -> float:
    """Depth (m) at pixel (u, v) of an image of ``size`` (w, h; default the depth image's own):
    the median of the valid readings in a (2 window + 1)^2 patch; NaN when none is valid or the
    pixel is off the image."""
    d = np.asarray(depth, dtype=float)
    h, w = d.shape[:2]
    if size is not None and tuple(size) != (w, h):
        u, v = (u + 0.5) * w / size[0] - 0.5, (v + 0.5) * h / size[1] - 0.5
    iu, iv = int(round(u)), int(round(v))
    if not (0 <= iu < w and 0 <= iv < h):
        return float("nan")
    patch = d[max(0, iv - window_px):iv + window_px + 1, max(0, iu - window_px):iu + window_px + 1]
    ok = patch[np.isfinite(patch) & (patch > 0)]
    return float(np.median(ok)) if ok.size else float("nan")


def linearize_depth(zbuffer: np.ndarray, near_m: float, far_m: float) -> np.ndarray:
    """An OpenGL depth buffer (0 near .. 1 far, standard projection) -> distance along the optical
    axis, metres (MuJoCo: near = ``vis.map.znear * stat.extent``, far = ``vis.map.zfar * stat.extent``).
    Values at the far plane (nothing drawn) become NaN."""
    z = np.asarray(zbuffer, dtype=np.float64)
    out = near_m * far_m / (far_m - z * (far_m - near_m))
    out[z >= 1.0 - 1e-7] = np.nan
    return out.astype(np.float32)


# -- depth images as 16-bit integers (a network stream, a RealSense's z16) ----------------------------
DEPTH_PNG_UNIT_M = 0.001          # the depth PNG's unit: one count is 1 mm; 0 is no reading
DEPTH_PNG_MAX_M = 65.535          # the largest depth a 16-bit mm PNG holds


def depth_to_units(depth_m, unit_m: float = DEPTH_PNG_UNIT_M) -> np.ndarray:
    """Depth (m, NaN or <= 0 where there is no reading) -> uint16 counts of ``unit_m``, rounded;
    0 where there is no reading or the depth does not fit (beyond 65535 counts)."""
    d = np.asarray(depth_m, dtype=np.float64) / float(unit_m)
    ok = np.isfinite(d) & (d >= 0.5) & (d < 65535.5)
    out = np.zeros(d.shape, dtype=np.uint16)
    out[ok] = np.rint(d[ok]).astype(np.uint16)
    return out


def depth_from_units(counts, unit_m: float = DEPTH_PNG_UNIT_M) -> np.ndarray:
    """uint16 counts of ``unit_m`` (a depth PNG in mm, a RealSense z16 frame times its depth scale)
    -> depth in metres, float32, NaN where the count is 0 (no reading)."""
    c = np.asarray(counts)
    if c.ndim != 2 or c.dtype != np.uint16:
        raise ValueError(f"a depth image must be HxW uint16 counts, got {c.dtype} {c.shape}")
    out = c.astype(np.float32) * np.float32(unit_m)
    out[c == 0] = np.nan
    return out


def encode_depth_png(depth_m) -> bytes:
    """A depth image (m) as a 16-bit single-channel PNG of whole millimetres, 0 = no reading
    (lossless at 1 mm; what the rehearsal cell serves at ``/<camera>.depth.png``)."""
    import cv2
    ok, buf = cv2.imencode(".png", depth_to_units(depth_m))
    if not ok:
        raise ValueError("the depth image could not be encoded as PNG")
    return buf.tobytes()


def decode_depth_png(data: bytes) -> np.ndarray:
    """``encode_depth_png``'s inverse: a 16-bit single-channel PNG in mm -> metres, float32, NaN where 0."""
    import cv2
    img = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_UNCHANGED)
    if img is None:
        raise ValueError("not a PNG image")
    if img.ndim != 2 or img.dtype != np.uint16:
        raise ValueError(f"a depth PNG must be 16-bit single-channel (mm), got {img.dtype} with shape {img.shape}")
    return depth_from_units(img)
