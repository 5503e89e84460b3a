"""xArm6 kinematics for the emulator: standard DH forward kinematics and a damped-least-squares IK.

Units: millimetres and radians. Orientation is the xArm's roll/pitch/yaw convention,
``R = Rz(yaw) @ Ry(pitch) @ Rx(roll)`` (fixed-axis XYZ), the same as the controller reports.

DH parameters from UFACTORY's "Kinematic and Dynamic Parameters of xArm 6" (standard DH,
``T_i = Rz(theta_i + offset_i) Tz(d_i) Tx(a_i) Rx(alpha_i)``). Forward kinematics at all-zero joints
is [207, 0, 112] mm with roll 180 degrees, the familiar xArm6 zero pose.

This is deliberately small. It does not model the real controller's IK (branch choice, joint-limit
aware solutions, singularity handling) - see docs/xarm6.md, "What the emulator does not model".
"""
from __future__ import annotations

import math

import numpy as np

from motormind.geometry import mat_to_rpy, rpy_to_mat  # noqa: F401 - re-exported for the server

_OFF = math.atan2(284.5, 53.5)  # the link-2 elbow offset, 1.3849 rad

# (d, a, alpha, theta_offset) per joint, mm / rad
DH = (
    (267.0, 0.0, -math.pi / 2, 0.0),
    (0.0, math.hypot(284.5, 53.5), 0.0, -_OFF),
    (0.0, 77.5, -math.pi / 2, _OFF),
    (342.5, 0.0, math.pi / 2, 0.0),
    (0.0, 76.0, -math.pi / 2, 0.0),
    (97.0, 0.0, 0.0, 0.0),
)

# XCONF.Robot.JOINT_LIMITS for XARM6_X4 (rad); they agree with UFACTORY's specification page.
JOINT_LIMITS = (
    (-2 * math.pi, 2 * math.pi),
    (-2.059488, 2.094395),
    (-3.926991, 0.191986),
    (-2 * math.pi, 2 * math.pi),
    (-1.692969, math.pi),
    (-2 * math.pi, 2 * math.pi),
)


def _dh(theta: float, d: float, a: float, alpha: float) -> np.ndarray:
    ct, st = math.cos(theta), math.sin(theta)
    ca, sa = math.cos(alpha), math.sin(alpha)
    return np.array([
        [ct, -st * ca, st * sa, a * ct],
        [st, ct * ca, -ct * sa, a * st],
        [0.0, sa, ca, d],
        [0.0, 0.0, 0.0, 1.0],
    ])


def fk_frames(q) -> list[np.ndarray]:
    """Base-to-frame transforms T_0..T_6 (T_0 = identity)."""
    frames = [np.eye(4)]
    t = np.eye(4)
    for qi, (d, a, alpha, off) in zip(q, DH):
        t = t @ _dh(float(qi) + off, d, a, alpha)
        frames.append(t)
    return frames


def tool_transform(offset) -> np.ndarray | None:
    """The TCP in the flange frame (4x4, mm) from a controller TCP offset [x, y, z (mm), roll, pitch,
    yaw (rad)]; None for the zero offset (the TCP is the flange)."""
    off = [float(v) for v in offset]
    if not any(off):
        return None
    t = np.eye(4)
    t[:3, :3] = rpy_to_mat(*off[3:6])
    t[:3, 3] = off[:3]
    return t


def fk(q, tool: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """TCP position (mm) and rotation matrix for joints ``q`` (6, rad); the flange without ``tool``."""
    t = fk_frames(q)[-1]
    if tool is not None:
        t = t @ tool
    return t[:3, 3].copy(), t[:3, :3].copy()


def fk_pose(q, tool: np.ndarray | None = None) -> list[float]:
    """[x, y, z (mm), roll, pitch, yaw (rad)] for joints ``q``."""
    p, r = fk(q, tool)
    return [float(p[0]), float(p[1]), float(p[2]), *mat_to_rpy(r)]


def _rot_err(r_goal: np.ndarray, r_now: np.ndarray) -> np.ndarray:
    m = r_goal @ r_now.T
    c = max(-1.0, min(1.0, (np.trace(m) - 1) / 2))
    ang = math.acos(c)
    v = np.array([m[2, 1] - m[1, 2], m[0, 2] - m[2, 0], m[1, 0] - m[0, 1]])
    s = math.sin(ang)
    if ang < 1e-9:
        return np.zeros(3)
    if s < 1e-6:
        axis = np.sqrt(np.maximum((np.diag(m) + 1) / 2, 0))
        return ang * axis
    return ang * v / (2 * s)


def jacobian(q) -> np.ndarray:
    """Geometric Jacobian (6x6): rows 0-2 linear (mm/rad), rows 3-5 angular."""
    frames = fk_frames(q)
    pe = frames[-1][:3, 3]
    j = np.zeros((6, 6))
    for i in range(6):
        z = frames[i][:3, 2]
        o = frames[i][:3, 3]
        j[:3, i] = np.cross(z, pe - o)
        j[3:, i] = z
    return j


def ik(pos_mm, rot: np.ndarray, q0, max_iter: int = 200, pos_tol: float = 0.01,
       rot_tol: float = 1e-5, rot_weight: float = 200.0, tool: np.ndarray | None = None) -> tuple[np.ndarray, bool]:
    """Damped-least-squares IK from the seed ``q0``. Returns (joints, converged).

    ``pos_mm``/``rot`` are the TCP's: the flange's without ``tool`` (tool_transform), else the
    flange target is the TCP target times the tool's inverse. ``rot_weight`` (mm per rad) balances
    orientation against position error."""
    q = np.array(q0, dtype=float)[:6].copy()
    target = np.asarray(pos_mm, dtype=float)
    if tool is not None:
        t = np.eye(4)
        t[:3, :3], t[:3, 3] = rot, target
        t = t @ np.linalg.inv(tool)
        target, rot = t[:3, 3].copy(), t[:3, :3].copy()
    w = np.array([1, 1, 1, rot_weight, rot_weight, rot_weight], dtype=float)
    lam = 1.0
    for _ in range(max_iter):
        p, r = fk(q)
        ep = target - p
        er = _rot_err(rot, r)
        if np.linalg.norm(ep) < pos_tol and np.linalg.norm(er) < rot_tol:
            return q, True
        e = np.concatenate([ep, er]) * w
        jw = jacobian(q) * w[:, None]
        # limit the step: at most 50 mm (weighted) per iteration keeps DLS stable far from the goal
        n = np.linalg.norm(e)
        if n > 50.0:
            e = e * (50.0 / n)
        dq = jw.T @ np.linalg.solve(jw @ jw.T + (lam ** 2) * np.eye(6), e)
        q = q + dq
    p, r = fk(q)
    ok = np.linalg.norm(target - p) < pos_tol * 10 and np.linalg.norm(_rot_err(rot, r)) < rot_tol * 10
    return q, bool(ok)


def joint_limit_violations(q, tol: float = 1e-6) -> list[int]:
    """1-based joint numbers outside JOINT_LIMITS."""
    out = []
    for i, (qi, (lo, hi)) in enumerate(zip(q, JOINT_LIMITS)):
        if qi < lo - tol or qi > hi + tol:
            out.append(i + 1)
    return out
