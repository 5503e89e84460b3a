"""The grounding skill: point at a named object in one camera's image, and say how far it is from the
grip point in base-frame millimetres. Truth from PRIVILEGED state and the render's depth; scored
continuously (docs/diagnostic.md, "The grounding skill").

Truth, for an object O in camera C at one moment (built once, when the set is built; stored under the
question's ``privileged.grounding``, never in a prompt):

* **visible mask**: the pixels of C's frame whose surface point (the depth image unprojected through
  C's calibration) lies inside O's collision AABB grown by ``MASK_MARGIN_M``, at least
  ``FLOOR_CLEAR_M`` above its bottom (not the table under it), and inside no other object's AABB
  (so a bowl's mask holds no plate pixels under its rim). Stored run-length encoded, in the set's
  frame pixels.
* **truth pixel**: the mask pixel nearest O's projected AABB centre (the centre itself when it is on
  the visible surface);
* **reference point**: the truth pixel unprojected from depth, a point on O's visible surface; the
  **offset** is that point minus the grip point, mm, base frame.

Scoring an answer (a point as any role gives one, ``grounding.points.POINT``: camera, pixel [x, y] in the
model's convention, label; and the offset along the profile's +x/+y/+z words): the pixel is mapped into the set frame's pixels (``grounding/pixels.py``); ``px_error`` is its
distance to the truth pixel; ``on_object`` when it lies within ``POINT_TOLERANCE_PX`` of a mask pixel;
``mm_error`` is the distance between the answered and the true offset; ``within_mm`` when that is at
most ``OFFSET_TOLERANCE_MM``. A grounding answer is *correct* when both hold. Its chance level is the
fraction of the frame a uniform random pixel lands on the object with (the offset's chance is far
smaller: a guess within 30 mm of a point anywhere in a 600 mm box is well under 1 %).
"""
from __future__ import annotations

import math
import re

import numpy as np

MASK_MARGIN_M = 0.005          # an object's AABB grown by this to hold its own surface points
FLOOR_CLEAR_M = 0.004          # surface points this close to an object's AABB bottom are the table
MIN_MASK_FRACTION = 0.002      # an object covering less of the frame than this is not asked about
MIN_MASK_PX = 12               # ... nor one of fewer pixels than this
GRIP_CLEAR_M = 0.03            # nor an object the grip point is within this of (the fingers would be in its mask)
POINT_TOLERANCE_PX = 1.0       # "on the object": within this of a visible mask pixel, px of the set's frame
OFFSET_TOLERANCE_MM = 30.0     # "within": the answered offset within this of the true one, mm
RANDOM_OFFSET_MM = 300.0       # the random pointer's offsets: uniform within +-this per axis


def display_name(name: str) -> str:
    """``akita_black_bowl_1`` -> ``akita black bowl`` (the words a question names an object with)."""
    return re.sub(r"_\d+$", "", str(name)).replace("_", " ").strip()


def offset_words(directions: dict) -> list[str]:
    """The profile's direction words nearest +x, +y, +z (libero_panda: forward, left, up)."""
    out = []
    for axis in np.eye(3):
        out.append(max(sorted(directions), key=lambda w: float(np.dot(np.asarray(directions[w], dtype=float), axis))))
    return out


# -- truth -------------------------------------------------------------------------------------------
def surface_points(calib, depth: np.ndarray, eef) -> np.ndarray:
    """H x W x 3 base-frame points of a depth image (NaN where it has no reading)."""
    h, w = depth.shape[:2]
    cal = calib.resized(w, h)
    u, v = np.meshgrid(np.arange(w, dtype=float), np.arange(h, dtype=float))
    z = np.asarray(depth, dtype=float)
    cam = np.stack([(u - cal.cx_px) / cal.fx_px * z, (v - cal.cy_px) / cal.fy_px * z, z], axis=-1)
    p, r = cal.pose_base(eef)
    return cam @ r.T + p


def visible_mask(points: np.ndarray, aabb, others=()) -> np.ndarray:
    """H x W bool: the surface points on the object with collision AABB ``aabb`` (lo, hi), and in
    none of ``others`` (AABBs of the other objects)."""
    lo, hi = (np.asarray(x, dtype=float) for x in aabb)
    with np.errstate(invalid="ignore"):
        m = np.all(points >= lo - MASK_MARGIN_M, axis=-1) & np.all(points <= hi + MASK_MARGIN_M, axis=-1)
        m &= points[..., 2] >= lo[2] + FLOOR_CLEAR_M
        for olo, ohi in others:
            olo, ohi = np.asarray(olo, dtype=float), np.asarray(ohi, dtype=float)
            m &= ~(np.all(points > olo, axis=-1) & np.all(points < ohi, axis=-1))
    return m & np.all(np.isfinite(points), axis=-1)


def rle_encode(mask: np.ndarray) -> list[list[int]]:
    """[[start, length], ...] of the True runs of a mask, row-major."""
    flat = np.concatenate([[False], np.asarray(mask, dtype=bool).ravel(), [False]])
    d = np.flatnonzero(np.diff(flat.astype(np.int8)))
    return [[int(a), int(b - a)] for a, b in zip(d[::2], d[1::2])]


def rle_decode(runs, width: int, height: int) -> np.ndarray:
    flat = np.zeros(width * height, dtype=bool)
    for a, n in runs:
        flat[a:a + n] = True
    return flat.reshape(height, width)


def object_truth(name: str, calib, depth: np.ndarray, eef, objects: dict) -> dict | None:
    """The grounding truth of object ``name`` in one camera's frame (``depth`` its depth image, the
    frame's size), or None when it is not worth asking about (too little of it visible, the grip
    point at it). ``objects``: name -> {"lo", "hi"} (the privileged snapshot's AABBs, m)."""
    o = objects[name]
    lo, hi = np.asarray(o["lo"], dtype=float), np.asarray(o["hi"], dtype=float)
    grip = np.asarray(eef[0], dtype=float)
    if np.all(grip >= lo - GRIP_CLEAR_M) and np.all(grip <= hi + GRIP_CLEAR_M):
        return None
    h, w = depth.shape[:2]
    cal = calib.resized(w, h)
    pts = surface_points(cal, depth, eef)
    others = [(v["lo"], v["hi"]) for k, v in objects.items() if k != name]
    mask = visible_mask(pts, (lo, hi), others)
    n = int(mask.sum())
    if n < max(MIN_MASK_PX, MIN_MASK_FRACTION * w * h):
        return None
    c = cal.project_point((lo + hi) / 2.0, eef)
    ys, xs = np.nonzero(mask)
    if c is None:
        return None
    k = int(np.argmin((xs - c[0]) ** 2 + (ys - c[1]) ** 2))
    u, v = int(xs[k]), int(ys[k])
    ref = pts[v, u]
    return {"object": name, "camera": calib.name, "size": [w, h], "mask_rle": rle_encode(mask), "mask_px": n,
            "centre_px": [round(float(c[0]), 2), round(float(c[1]), 2)], "pixel": [u, v],
            "point_m": [round(float(x), 5) for x in ref],
            "offset_mm": [round(float(x), 1) for x in (ref - grip) * 1000.0],
            "chance": round(pointing_chance(mask), 5)}


def dilate(mask: np.ndarray) -> np.ndarray:
    """The mask grown by one pixel (4-neighbours): the pixels within POINT_TOLERANCE_PX of it."""
    m = np.asarray(mask, dtype=bool)
    out = m.copy()
    out[1:] |= m[:-1]
    out[:-1] |= m[1:]
    out[:, 1:] |= m[:, :-1]
    out[:, :-1] |= m[:, 1:]
    return out


def pointing_chance(mask: np.ndarray) -> float:
    """The chance a uniform random point of the frame lands on the object (within the tolerance)."""
    return float(dilate(mask).mean())


# -- scoring -----------------------------------------------------------------------------------------
def offset_vector_mm(offset: dict, words: list[str], directions: dict) -> np.ndarray:
    """The base-frame vector (mm) of an answer's offset {word: mm} along the profile's words."""
    return sum(float(offset[w]) * np.asarray(directions[w], dtype=float) for w in words)


def score(truth: dict, answer: dict | None, convention, directions: dict) -> dict:
    """The figures of one grounding answer (None: unanswered) against its truth. Pixels are the
    set frame's (``truth['size']``)."""
    if not answer:
        return {"px_error": None, "mm_error": None, "on_object": False, "within_mm": False, "correct": False}
    w, h = truth["size"]
    pt = answer["point"]
    u, v = convention.to_image(float(pt["pixel"][0]), float(pt["pixel"][1]), w, h)
    tu, tv = truth["pixel"]
    px_err = math.hypot(u - tu, v - tv)
    mask = rle_decode(truth["mask_rle"], w, h)
    ys, xs = np.nonzero(mask)
    on = bool(len(xs)) and float(np.min((xs - u) ** 2 + (ys - v) ** 2)) <= POINT_TOLERANCE_PX ** 2
    words = offset_words(directions)
    got = offset_vector_mm(answer["offset_mm"], words, directions)
    mm_err = float(np.linalg.norm(got - np.asarray(truth["offset_mm"], dtype=float)))
    within = mm_err <= OFFSET_TOLERANCE_MM
    return {"px_error": round(px_err, 2), "mm_error": round(mm_err, 1), "on_object": on, "within_mm": within,
            "correct": bool(on and within), "pixel": [round(u, 2), round(v, 2)]}


def oracle_answer(truth: dict, convention, directions: dict) -> dict:
    """The answer privileged truth gives: the truth pixel in the model's convention (rounded to a
    whole unit, as a model writes it) and the true offset along the profile's words."""
    w, h = truth["size"]
    x, y = convention.from_image(float(truth["pixel"][0]), float(truth["pixel"][1]), w, h)
    words = offset_words(directions)
    off = np.asarray(truth["offset_mm"], dtype=float)
    return {"point": {"camera": truth["camera"], "pixel": [round(x), round(y)], "label": display_name(truth["object"])},
            "offset_mm": {wd: round(float(off @ np.asarray(directions[wd], dtype=float))) for wd in words}}
