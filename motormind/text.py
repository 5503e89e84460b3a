"""Text for a person reading a terminal line."""
from __future__ import annotations


def clip(text, limit: int) -> str:
    """``text`` on one line in at most ``limit`` characters: whitespace runs become one space, and a
    longer text is cut at a word boundary (mid-word only when one word fills more than half the
    room) and ends in an ellipsis."""
    s = " ".join(str(text).split())
    if len(s) <= limit:
        return s
    cut = s[:max(1, limit - 1)]
    space = cut.rfind(" ")
    if space >= limit // 2:
        cut = cut[:space]
    return cut.rstrip(" ,;:-") + "…"
