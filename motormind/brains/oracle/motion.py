"""Commands from geometry: routes that keep the gripper (and what it carries) clear of the scene,
and their rendering as the command vocabulary (mm and degrees on the wire).

A route is a list of grip-site waypoints (base frame, m). Each leg is checked at samples every
``SAMPLE_M`` for the clearance of a "bundle": the gripper's boxes plus the boxes of a held object,
all relative to the grip site. A leg that is not clear is replaced by up, across, down at the
lowest height that clears everything under the bundle's path.
"""
from __future__ import annotations

import math

import numpy as np

from .tuning import (CLEAR_M, DIRECTION_DOT, MIN_MOVE_M, ROTATE_MIN_DEG, SAMPLE_M, SHORT_LEG_M, START_SKIP_M,
                     STRAIGHT_M)
from .world import Boxes, World


def clear_along(world: World, p0, p1, bundle: Boxes, exclude, margin: float = 0.0, skip: float = 0.0) -> float:
    """Smallest clearance of ``bundle`` (boxes relative to the grip site) along p0 -> p1, leaving
    out the first ``skip`` metres (where the bundle already is, it may touch: a start in contact
    must not forbid every way out)."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    length = float(np.linalg.norm(p1 - p0))
    n = max(1, int(math.ceil(length / SAMPLE_M)))
    worst = math.inf
    for t in np.linspace(0.0, 1.0, n + 1):
        if t * length < skip and t < 1.0:
            continue
        p = p0 + t * (p1 - p0)
        worst = min(worst, world.clearance(bundle.shifted(p), exclude))
        if worst < margin:
            break
    return worst


def safe_height(world: World, p0, p1, bundle: Boxes, exclude, clear: float = CLEAR_M) -> float:
    """Lowest grip height at which the bundle crosses from above p0 to above p1 with ``clear``."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    n = max(1, int(math.ceil(np.linalg.norm((p1 - p0)[:2]) / SAMPLE_M)))
    box = bundle.aabb()
    lo_rel, hi_rel = box[:, 0].min(axis=0), box[:, 1].max(axis=0)
    need = -math.inf
    for t in np.linspace(0.0, 1.0, n + 1):
        xy = p0[:2] + t * (p1 - p0)[:2]
        top = world.top_under(xy + lo_rel[:2], xy + hi_rel[:2], exclude)
        need = max(need, top + clear - lo_rel[2])
    return need


def route(world: World, p0, p1, bundle: Boxes, exclude, z_cap: float | None = None,
          clear: float = CLEAR_M) -> list[np.ndarray]:
    """Waypoints from p0 to p1 (p0 excluded): straight when clear, else up / across / down, with
    the rising and the falling legs folded into the crossing when that stays clear."""
    p0, p1 = np.asarray(p0, float), np.asarray(p1, float)
    if np.linalg.norm(p1 - p0) < STRAIGHT_M:
        return [p1] if np.linalg.norm(p1 - p0) >= MIN_MOVE_M else []
    if clear_along(world, p0, p1, bundle, exclude, clear, skip=START_SKIP_M) >= clear:
        return [p1]
    z = max(p0[2], p1[2], safe_height(world, p0, p1, bundle, exclude, clear))
    if z_cap is not None:
        z = min(z, z_cap)
    a, b = np.array([p0[0], p0[1], z]), np.array([p1[0], p1[1], z])
    pts = [a, b, p1]
    if clear_along(world, p0, b, bundle, exclude, clear, skip=START_SKIP_M) >= clear:   # rise while crossing
        pts = [b, p1]
    elif clear_along(world, a, p1, bundle, exclude, clear) >= clear:                  # fall while crossing
        pts = [a, p1]
    out, last = [], p0
    for q in pts:
        if np.linalg.norm(q - last) >= MIN_MOVE_M:
            out.append(q)
            last = q
    return out


def moves(delta_m, profile) -> list[dict]:
    """One straight displacement as move commands (split where over the per-command limit); a
    direction word of the profile when the displacement is along one, else an explicit vector."""
    d = np.asarray(delta_m, float) * 1000.0
    n = float(np.linalg.norm(d))
    lim = profile.limits
    if n < max(MIN_MOVE_M * 1000.0, lim.min_move_mm):
        return []
    k = math.ceil(n / lim.max_move_mm - 1e-9)
    seg = round(n / k, 1)
    u = d / n
    word = next((w for w, v in profile.directions.items() if float(np.dot(u, v)) > DIRECTION_DOT), None)
    if word:
        return [{"op": "move", "direction": word, "distance_mm": seg} for _ in range(k)]
    vec = [round(float(x), 5) for x in u]
    return [{"op": "move", "vector": vec, "distance_mm": seg} for _ in range(k)]


def path_commands(p0, waypoints, profile) -> list[dict]:
    out, last = [], np.asarray(p0, float)
    wps = [np.asarray(q, float) for q in waypoints]
    for k, q in enumerate(wps):
        if k < len(wps) - 1 and float(np.linalg.norm(q - last)) < SHORT_LEG_M:
            continue
        out += moves(q - last, profile)
        last = q
    return out


def rotations(axis: str, angle_rad: float, profile, min_deg: float = ROTATE_MIN_DEG) -> list[dict]:
    deg = math.degrees(angle_rad)
    if abs(deg) < max(min_deg, profile.limits.min_rotate_deg):
        return []
    k = math.ceil(abs(deg) / profile.limits.max_rotate_deg - 1e-9)
    return [{"op": "rotate", "axis": axis, "angle_deg": round(deg / k, 2)} for _ in range(k)]
