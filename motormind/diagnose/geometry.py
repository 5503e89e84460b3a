"""The diagnostic's kinematic model of pick and place (v1): the geometry its labels are defined by.

The question sets are versioned (``set-v1-...``): their ground truth must not move when the oracle
brain learns better grasps. This is the pick-and-place geometry the v1 sets were built with (the
oracle brain's until it was rewritten for articulated fixtures): a top-down grasp at the object's
centre (a rim pinch on the side with the most clearance for objects wider than the fingers), the
support box of a target object or region, and the tallest object under a carried object's path.
Units: metres, base frame. ``scene`` offers object_names, region_names, object_aabb, region.
"""
from __future__ import annotations

import math

import numpy as np

APPROACH_M = 0.05          # pre-grasp height above the grasp point
RELEASE_M = 0.012          # release with the object's bottom this far above the support
FINGER_SPAN_M = 0.070      # widest object the fingers can straddle (78 mm open, some margin)
HOLD_MIN_MM = 2.5          # a closed gripper narrower than this holds nothing


class PickPlaceGeometry:
    def __init__(self, scene, profile):
        self.scene = scene
        self.profile = profile

    def _box(self, name: str):
        if name in self.scene.region_names:
            r = self.scene.region(name)
            return np.asarray(r["lo"], dtype=float), np.asarray(r["hi"], dtype=float)
        lo, hi = self.scene.object_aabb(name)
        return np.asarray(lo, dtype=float), np.asarray(hi, dtype=float)

    def _target_box(self, name: str):
        """The support a placed object goes on or in: an object's AABB or a region's box."""
        return self._box(name)

    def _held(self, a: str, eef: np.ndarray, width_mm: float) -> bool:
        lo, hi = self.scene.object_aabb(a)
        lo, hi = np.asarray(lo) - 0.02, np.asarray(hi) + 0.02
        inside = bool(np.all(eef >= lo) and np.all(eef <= hi))
        return inside and HOLD_MIN_MM < width_mm < self.profile.gripper_max_width_mm - 4.0

    def _grasp(self, a: str):
        """(grasp point, yaw in rad about base z relative to the current tool yaw = 0 or 90 deg)."""
        lo, hi = (np.asarray(v) for v in self.scene.object_aabb(a))
        c = (lo + hi) / 2
        size = hi - lo
        if min(size[0], size[1]) > FINGER_SPAN_M:
            # too wide to straddle (a bowl): pinch the rim on the side with the most clearance
            r = size[1] / 2 - 0.007
            best, best_clear = None, -1.0
            for sign in (-1.0, 1.0):
                p = np.array([c[0], c[1] + sign * r, hi[2] - 0.02])
                clear = self._clearance(p, a)
                if clear > best_clear:
                    best, best_clear = p, clear
            return best, 0.0
        z = max(lo[2] + 0.012, hi[2] - 0.03)
        yaw = 0.0 if size[1] <= FINGER_SPAN_M else math.pi / 2
        return np.array([c[0], c[1], z]), yaw

    def _clearance(self, p: np.ndarray, exclude: str) -> float:
        best = 1.0
        for n in self.scene.object_names:
            if n == exclude:
                continue
            try:
                lo, hi = (np.asarray(v) for v in self.scene.object_aabb(n))
            except Exception:  # noqa: BLE001 - fixtures without geometry
                continue
            d = np.maximum(np.maximum(lo[:2] - p[:2], p[:2] - hi[:2]), 0)
            best = min(best, float(np.linalg.norm(d)))
        return best

    def _tallest_between(self, p0, p1, radius: float, skip) -> float:
        """Highest top (m) of the objects whose footprint comes within ``radius`` of the segment p0-p1."""
        top = -1.0
        d = np.asarray(p1) - np.asarray(p0)
        L2 = float(d @ d) or 1e-9
        for n in self.scene.object_names:
            if n in skip:
                continue
            lo, hi = (np.asarray(v) for v in self.scene.object_aabb(n))
            c = (lo[:2] + hi[:2]) / 2
            t = float(np.clip((c - p0) @ d / L2, 0, 1))
            q = p0 + t * d                            # nearest point of the segment to the centre
            gap = np.maximum(np.maximum(lo[:2] - q, q - hi[:2]), 0)
            if float(np.linalg.norm(gap)) < radius:
                top = max(top, float(hi[2]))
        return top
