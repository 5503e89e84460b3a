"""How each VLM family sizes an image, and what one image costs it in prompt tokens.

A model does not see the pixels a client sends: its processor resizes them first, by rules of its
own. Sending an image in the size the model will use anyway costs nothing in detail and avoids a
second resampling on the server; knowing the token cost lets the openai brain tell whether a server
counted the images at all (``OpenAIBrain`` compares usage against it). Sizes are pixels, width x
height; ``image_size`` is the longest side the user asks for (None: the family's default).

    generic      longest side = image_size (default 448); tokens unknown
    qwen2.5-vl   Qwen2.5-VL's smart_resize: each side a multiple of 28 (14 px patches merged 2x2),
                 the pixel count within [3136, 12845056]; one token per 28x28 block
    qwen3-vl     the same rule on 32 px blocks (16 px patches merged 2x2), pixels within
                 [65536, 16777216]; one token per 32x32 block
    gemma3       Gemma 3's SigLIP encoder: every image becomes 896 x 896, 256 tokens
    openai       OpenAI vision: detail "low" is one 512 x 512 view for 85 tokens; "high"/"auto" fits
                 2048 x 2048, then the shortest side to 768, 85 + 170 per 512 px tile

The Qwen rules follow the processors' published defaults (``preprocessor_config.json`` of
Qwen2.5-VL-7B-Instruct and Qwen3-VL); a server started with other ``min_pixels`` /
``max_pixels`` resizes differently, which ``motormind vlm check`` measures (tokens per image at
two sizes).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

RULES = ("generic", "qwen2.5-vl", "qwen3-vl", "gemma3", "openai")
DEFAULT_SIZE = {"generic": 448, "qwen2.5-vl": 448, "qwen3-vl": 448, "gemma3": 896, "openai": 512}

_QWEN = {"qwen2.5-vl": (28, 56 * 56, 12845056), "qwen3-vl": (32, 65536, 16777216)}


@dataclass(frozen=True)
class Sizing:
    width: int
    height: int
    tokens: int | None          # prompt tokens the family spends on one such image (None: unknown)


def _round(x: float, f: int) -> int:
    return max(f, int(round(x / f)) * f)


def smart_resize(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen-VL's resize: both sides multiples of ``factor``, the area within [min, max] pixels,
    the aspect ratio as close as that allows. -> (height, width)."""
    h, w = _round(height, factor), _round(width, factor)
    if h * w > max_pixels:
        beta = math.sqrt(height * width / max_pixels)
        h = max(factor, math.floor(height / beta / factor) * factor)
        w = max(factor, math.floor(width / beta / factor) * factor)
    elif h * w < min_pixels:
        beta = math.sqrt(min_pixels / (height * width))
        h = math.ceil(height * beta / factor) * factor
        w = math.ceil(width * beta / factor) * factor
    return h, w


def _scale_longest(w: int, h: int, size: int) -> tuple[int, int]:
    s = size / max(w, h)
    return max(1, round(w * s)), max(1, round(h * s))


def fit(rule: str, width: int, height: int, image_size: int | None = None, detail: str = "auto") -> Sizing:
    """The size the family's model works on for a ``width`` x ``height`` image sent after scaling
    its longest side to ``image_size``, and its token cost."""
    if rule not in RULES:
        raise ValueError(f"image rule {rule!r}: must be one of {', '.join(RULES)}")
    size = int(image_size or DEFAULT_SIZE[rule])
    if rule == "generic":
        w, h = _scale_longest(width, height, size)
        return Sizing(w, h, None)
    if rule in _QWEN:
        factor, lo, hi = _QWEN[rule]
        w, h = _scale_longest(width, height, size)
        rh, rw = smart_resize(h, w, factor, lo, hi)
        return Sizing(rw, rh, (rh // factor) * (rw // factor))
    if rule == "gemma3":
        return Sizing(896, 896, 256)
    # openai
    if detail == "low":
        w, h = _scale_longest(width, height, min(size, 512))
        return Sizing(w, h, 85)
    w, h = _scale_longest(width, height, min(size, 2048))
    if min(w, h) > 768:
        s = 768 / min(w, h)
        w, h = round(w * s), round(h * s)
    tiles = math.ceil(w / 512) * math.ceil(h / 512)
    return Sizing(w, h, 85 + 170 * tiles)


def render_size(rule: str, image_size: int | None = None) -> int:
    """The longest side to render a square camera image at, so that the family's model gets it
    without upscaling: the side it will work on."""
    s = fit(rule, 1024, 1024, image_size)
    return max(s.width, s.height)
