"""Shared checks of the grounding tests: where a drawn grip ring is in an image."""
from __future__ import annotations

import numpy as np

from motormind.grounding.marks import COLOURS, MarkOptions

RING_ONLY = MarkOptions(arrows=(), closing_line=False, labels=False)


def ring_centre(raw: np.ndarray, marked: np.ndarray, near, radius: float) -> tuple[float, float]:
    """The centroid of the grip ring's pixels (changed by the marks, in the ring's colour) within
    ``radius`` px of ``near`` (u, v); the ring is symmetric, so its centroid is its centre."""
    changed = np.any(raw != marked, axis=2)
    r, g, b = (marked[:, :, i].astype(int) for i in range(3))
    gr, gg, gb = COLOURS["grip"]
    colour = (np.abs(r - gr) < 90) & (np.abs(g - gg) < 90) & (np.abs(b - gb) < 90)
    vs, us = np.nonzero(changed & colour)
    keep = (us - near[0]) ** 2 + (vs - near[1]) ** 2 <= radius ** 2
    assert keep.sum() >= 8, f"no grip ring near {near}: {keep.sum()} ring pixels"
    return float(us[keep].mean()), float(vs[keep].mean())
