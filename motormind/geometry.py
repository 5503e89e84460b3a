"""Small rotation helpers (quaternions are xyzw, as written out in field names)."""
from __future__ import annotations

import math

import numpy as np


def quat_to_mat(q_xyzw) -> np.ndarray:
    x, y, z, w = (float(v) for v in q_xyzw)
    n = math.sqrt(x * x + y * y + z * z + w * w) or 1.0
    x, y, z, w = x / n, y / n, z / n, w / n
    return np.array([
        [1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
        [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
        [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)],
    ])


def mat_to_quat(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=float)
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        w, x, y, z = 0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        w, x, y, z = (m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        w, x, y, z = (m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        w, x, y, z = (m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s
    q = np.array([x, y, z, w])
    return q if q[3] >= 0 else -q


def axis_angle_to_mat(axis, angle_rad: float) -> np.ndarray:
    a = np.asarray(axis, dtype=float)
    a = a / (np.linalg.norm(a) or 1.0)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    return np.eye(3) + math.sin(angle_rad) * k + (1 - math.cos(angle_rad)) * (k @ k)


def rot_error(r_goal: np.ndarray, r_now: np.ndarray) -> np.ndarray:
    """World-frame axis-angle vector (rad) that takes ``r_now`` to ``r_goal``."""
    m = r_goal @ r_now.T
    ang = math.acos(max(-1.0, min(1.0, (np.trace(m) - 1) / 2)))
    if ang < 1e-9:
        return np.zeros(3)
    v = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])
    s = math.sin(ang)
    if s < 1e-6:  # ~180 degrees: pick the axis from the symmetric part
        axis = np.sqrt(np.maximum((np.diag(m) + 1) / 2, 0))
        return ang * axis
    return ang * v / (2 * s)


def angle_between(r_a: np.ndarray, r_b: np.ndarray) -> float:
    """Angle (rad) of the rotation between two rotation matrices."""
    return float(np.linalg.norm(rot_error(r_a, r_b)))


def tilt_deg(r: np.ndarray) -> float:
    """Degrees between the tool's approach axis (its z axis, column 2 of ``r``) and straight down
    (base -z): 0 gripper-down, 90 pointing sideways, 180 pointing up. Yaw about the vertical does
    not change it."""
    return math.degrees(math.acos(max(-1.0, min(1.0, -float(r[2, 2])))))


def rpy_to_mat(roll: float, pitch: float, yaw: float) -> np.ndarray:
    """Roll/pitch/yaw (radians, the xArm's convention) to a matrix: R = Rz(yaw) @ Ry(pitch) @ Rx(roll)."""
    cr, sr = math.cos(roll), math.sin(roll)
    cp, sp = math.cos(pitch), math.sin(pitch)
    cy, sy = math.cos(yaw), math.sin(yaw)
    return np.array([
        [cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr],
        [sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr],
        [-sp, cp * sr, cp * cr],
    ])


def mat_to_rpy(r: np.ndarray) -> tuple[float, float, float]:
    """Inverse of rpy_to_mat (radians); at pitch = +-90 degrees the roll is folded into yaw."""
    sp = max(-1.0, min(1.0, -float(r[2, 0])))
    pitch = math.asin(sp)
    if abs(sp) < 1.0 - 1e-9:
        return math.atan2(r[2, 1], r[2, 2]), pitch, math.atan2(r[1, 0], r[0, 0])
    return 0.0, pitch, math.atan2(-r[0, 1], r[1, 1])
