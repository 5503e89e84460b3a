"""The one JSON object in a VLM's answer (``extract_json``): one definition of how it is found, used
by the roles (``roles/base.py``), the openai brain, its probes and the endpoint check; and
``last_json_object``, the answer a reasoning model left in its reasoning.
"""
from __future__ import annotations

import json
import re
from typing import Any

from .errors import CommandError, ResponseError
from .strict_json import decode_json

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", flags=re.S)


def _embedded(s: str) -> str:
    """From the first '{' to the last '}' of ``s`` ("" when there is no such span)."""
    i, j = s.find("{"), s.rfind("}")
    return s[i:j + 1] if i >= 0 and j > i else ""


def extract_json(text: str) -> Any:
    """The one JSON object in an answer: the whole text, one fenced block, or one {...} block in
    prose. An answer that holds two (two fenced blocks, a block and an object beside it, two objects
    one after the other) is refused: which one was meant is not ours to guess."""
    if not isinstance(text, str):
        raise ResponseError(f"answer: must be text, got {type(text).__name__}")
    s = text.strip()
    fences = _FENCE.findall(s)
    if len(fences) > 1:
        raise ResponseError(f"answer: {len(fences)} fenced code blocks; exactly one JSON object is expected")
    if fences:
        beside = _embedded(_FENCE.sub(" ", s))
        if beside:
            try:
                other = decode_json(beside, "answer")
            except CommandError:
                other = None          # braces in prose, not a second answer
            if isinstance(other, dict):
                raise ResponseError("answer: a JSON object outside the fenced block as well as inside it; "
                                    "exactly one JSON object is expected")
        s = fences[0].strip()
    if not s.startswith("{"):
        s = _embedded(s) or s
    try:
        return decode_json(s, "answer")
    except CommandError as e:
        raise ResponseError(str(e)) from None


def last_json_object(text: str) -> str:
    """The last complete top-level ``{...}`` in ``text`` that parses ("" when none): the answer a
    reasoning model left at the end of its reasoning (brains/openai_brain.py reads it there)."""
    end = text.rfind("}")
    while end >= 0:
        depth = 0
        for i in range(end, -1, -1):
            c = text[i]
            if c == "}":
                depth += 1
            elif c == "{":
                depth -= 1
                if depth == 0:
                    cand = text[i:end + 1]
                    try:
                        json.loads(cand)
                        return cand
                    except ValueError:
                        break
        end = text.rfind("}", 0, end)
    return ""
