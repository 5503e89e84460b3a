"""Pixel conventions: how a model family names a position in an image it was shown.

A VLM answers "where" in its own coordinates, which depend on how its processor saw the image
(``grounding/image_sizing.py``, a VLM config's ``image_rules``):

    qwen3-vl     0..1000 normalised: x from the image's left edge (0) to its right edge (1000),
                 y from the top edge (0) to the bottom edge (1000), whatever the image's size
    qwen2.5-vl   absolute pixels of the image the model works on (Qwen's smart_resize of the image
                 sent: each side a multiple of 28), pixel centres at integers, (0, 0) top-left
    any other    pixels of the image as the model is sent it (``image_data_url``'s size: the rule's
                 fit, or the frame as it is for ``generic`` without an ``image_size``)

``PixelConvention`` converts between a model's (x, y) and a pixel (u, v) of an image of any size
(the frame a question stores, a camera's calibration size), with the pixel-centre convention of
``grounding/camera.py``: u' = (u + 0.5) w' / w - 0.5. ``describe()`` is the sentence a prompt
states it with. Pure core: no simulator imports.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .image_sizing import fit

KINDS = ("pixels", "norm1000")


@dataclass(frozen=True)
class PixelConvention:
    kind: str             # pixels: a W x H pixel grid; norm1000: 0..1000 across each side
    width: int            # the grid's width (pixels) or 1000 (norm1000)
    height: int
    family: str = "generic"   # the image_rules it came from (a record)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"pixel convention: kind must be one of {', '.join(KINDS)}, got {self.kind!r}")
        if self.width < 1 or self.height < 1:
            raise ValueError(f"pixel convention: width and height must be >= 1, got {self.width} x {self.height}")

    @property
    def x_max(self) -> float:
        return 1000.0 if self.kind == "norm1000" else float(self.width - 1)

    @property
    def y_max(self) -> float:
        return 1000.0 if self.kind == "norm1000" else float(self.height - 1)

    def to_image(self, x: float, y: float, width_px: int, height_px: int) -> tuple[float, float]:
        """The model's (x, y) as a pixel (u, v) of a ``width_px`` x ``height_px`` image."""
        if self.kind == "norm1000":
            return x / 1000.0 * width_px - 0.5, y / 1000.0 * height_px - 0.5
        return (x + 0.5) * width_px / self.width - 0.5, (y + 0.5) * height_px / self.height - 0.5

    def from_image(self, u: float, v: float, width_px: int, height_px: int) -> tuple[float, float]:
        """Pixel (u, v) of a ``width_px`` x ``height_px`` image in the model's convention."""
        if self.kind == "norm1000":
            return (u + 0.5) / width_px * 1000.0, (v + 0.5) / height_px * 1000.0
        return (u + 0.5) * self.width / width_px - 0.5, (v + 0.5) * self.height / height_px - 0.5

    def in_range(self, x: float, y: float) -> bool:
        """(x, y) lies on the image (within its outer edge) in this convention."""
        if not (math.isfinite(x) and math.isfinite(y)):
            return False
        if self.kind == "norm1000":
            return 0.0 <= x <= 1000.0 and 0.0 <= y <= 1000.0
        return -0.5 <= x < self.width - 0.5 and -0.5 <= y < self.height - 0.5

    def describe(self) -> str:
        if self.kind == "norm1000":
            return ("coordinates normalised to 0-1000 on each side: x from 0 (left edge) to 1000 (right edge), "
                    "y from 0 (top edge) to 1000 (bottom edge)")
        return (f"pixels of the {self.width} x {self.height} image as you see it: x from 0 (left edge) to "
                f"{self.width - 1} (right edge), y from 0 (top edge) to {self.height - 1} (bottom edge)")

    def to_json(self) -> dict:
        return {"kind": self.kind, "width": self.width, "height": self.height, "family": self.family}

    @classmethod
    def from_json(cls, d: dict) -> "PixelConvention":
        return cls(str(d["kind"]), int(d["width"]), int(d["height"]), str(d.get("family", "generic")))


def convention_for(image_rules: str, width_px: int, height_px: int, image_size: int | None = None,
                   detail: str = "auto") -> PixelConvention:
    """The convention a model of family ``image_rules`` answers in, for a ``width_px`` x ``height_px``
    frame sent with ``image_size`` (a VLM config's; None: the rule's default, or the frame's own size
    for ``generic``), as ``brains.openai_brain.image_data_url`` sizes it."""
    if image_rules == "qwen3-vl":
        return PixelConvention("norm1000", 1000, 1000, image_rules)
    if image_rules == "generic" and not image_size:
        return PixelConvention("pixels", int(width_px), int(height_px), image_rules)
    s = fit(image_rules, int(width_px), int(height_px), image_size, detail)
    return PixelConvention("pixels", int(s.width), int(s.height), image_rules)
