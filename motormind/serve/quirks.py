"""Quirks: how real OpenAI-compatible servers misbehave, emulated by serve-brain at configurable rates.

Faults (``faults.py``) are a server failing; a quirk is a server working as it was built, just not
as the OpenAI spec reads. Each one is what users of vLLM, Ollama, llama.cpp's server and hosted
APIs report again and again:

    images_refused          the server will not take image parts: Ollama's /v1 answers HTTP 400
                            "invalid image input"; llama.cpp's server without a multimodal projector
                            answers HTTP 500 "image input is not supported - hint: ... mmproj"
                            (the variants alternate). Only requests that carry images.
    images_ignored          the image parts are dropped without a word: the model answers blind
                            and the usage counts no image tokens. Only requests that carry images.
    schema_ignored          ``response_format`` json_schema is accepted and ignored: the answer is
                            chatty text with a fenced JSON block, or JSON in a shape of the model's
                            own ({"response": {...}}). Only json_schema requests.
    whitespace_flood        a JSON grammar lets the model emit whitespace until max_tokens: the
                            answer is a JSON opening, then newlines and spaces, finish_reason
                            "length" (vLLM / xgrammar without a whitespace bound). Only requests
                            with response_format json_schema or json_object.
    truncated               the answer stops at max_tokens mid-JSON, finish_reason "length"
                            (a verbose model: the server counts max_tokens completion tokens).
    answer_in_reasoning     a reasoning parser puts the whole answer in ``reasoning_content`` and
                            leaves ``content`` empty (vLLM's qwen3 parser with thinking switched
                            off); the other variant names the field ``reasoning`` (newer vLLM)
                            after a paragraph of thinking.
    think_block             a thinking model writes ``<think>...</think>`` before the JSON; the
                            other variant has no opening tag (the chat template opened it).
                            The thinking quotes JSON of its own, so a naive extraction picks it up.
    thinking_off_under_json a thinking model that thinks without response_format and does not
                            with it (the grammar forces JSON from the first token): invisible in one
                            call, shown by ``motormind vlm check``, which asks both ways.

Rates, ``seed``, ``roles`` and ``limit`` work as for faults (``FaultPlan``); quirks, unlike
faults, also apply to the camera probes (``probe``, ``point``), since they are properties of the
server. A request draws its fault first; a quirk is drawn only for a request no fault hit. Every
quirk is announced in the ``x-motormind-quirk`` response header and, in-process, as a
``serve_quirk`` event.

    quirks: {think_block: 0.3, answer_in_reasoning: 0.3, seed: 1}      # in a VLM config (serve: ...)
    motormind serve-brain --quirk images_ignored=1 --quirk think_block=0.3
"""
from __future__ import annotations

import json

from ..schemas import CHECK_SCHEMAS, ROLE_SCHEMAS
from .faults import FaultPlan

QUIRKS = ("images_refused", "images_ignored", "schema_ignored", "whitespace_flood", "truncated",
          "answer_in_reasoning", "think_block", "thinking_off_under_json")
IMAGE_QUIRKS = {"images_refused", "images_ignored"}          # requests with image parts only
GRAMMAR_QUIRKS = {"whitespace_flood"}                         # json_schema / json_object requests only
SCHEMA_QUIRKS = {"schema_ignored"}                            # json_schema requests only

OLLAMA_REFUSAL = (400, {"error": {"message": "invalid image input", "type": "invalid_request_error",
                                  "param": None, "code": None}})
LLAMACPP_REFUSAL = (500, {"error": {"code": 500, "message": "image input is not supported - hint: if this is "
                                    "unexpected, you may need to provide the mmproj", "type": "server_error"}})

# the thinking a reasoning model writes first; it quotes JSON, as real thinking does
MUSING = ('Okay, let me look at the state first. The gripper is open and the target is ahead of it. '
          'I could answer {"op": "wait", "seconds": 1} but that does not move toward the goal. '
          'The schema wants one JSON object, so I will write it now.')


class QuirkPlan(FaultPlan):
    NAMES = QUIRKS
    KIND = "quirk"

    @staticmethod
    def known_roles() -> list[str]:
        return [*ROLE_SCHEMAS, *CHECK_SCHEMAS]

    def applies(self, quirk: str, role: str, request: dict | None = None) -> bool:
        if role not in ROLE_SCHEMAS and role not in CHECK_SCHEMAS:
            return False
        if self.roles is not None and role not in self.roles:
            return False
        request = request or {}
        if quirk in IMAGE_QUIRKS:
            return bool(request.get("images"))
        if quirk in GRAMMAR_QUIRKS:
            return request.get("response_format") in ("json_schema", "json_object")
        if quirk in SCHEMA_QUIRKS:
            return request.get("response_format") == "json_schema"
        return True


def refusal(k: int) -> tuple[int, dict, str]:
    """(HTTP status, error body, what it imitates) of the k-th ``images_refused``."""
    if k % 2 == 0:
        return OLLAMA_REFUSAL[0], OLLAMA_REFUSAL[1], "Ollama /v1: HTTP 400 invalid image input"
    return LLAMACPP_REFUSAL[0], LLAMACPP_REFUSAL[1], "llama.cpp without --mmproj: HTTP 500 image input is not supported"


def shape(quirk: str, k: int, text: str, rf_type: str, max_tokens: int) -> tuple[dict, str, str, int | None]:
    """The assistant message a quirky server sends for the answer ``text`` (as the server would
    otherwise send it: bare JSON under response_format, else chatty text), the finish reason, a
    one-line description, and the completion tokens it bills (None: count the text).

    ``images_refused`` and ``images_ignored`` act before the answer exists (``BrainServer``)."""
    msg = {"role": "assistant", "content": text}
    if quirk == "schema_ignored":
        if k % 2 == 0:
            msg["content"] = f"Sure! Here is the JSON you asked for:\n```json\n{text}\n```\nLet me know if you need more."
            return msg, "stop", "response_format ignored: chatty text around a fenced JSON block", None
        try:
            obj = json.loads(text)
        except ValueError:
            obj = text
        msg["content"] = json.dumps({"response": obj})
        return msg, "stop", "response_format ignored: the answer wrapped in {\"response\": ...}", None
    if quirk == "whitespace_flood":
        cut = next((i + 1 for i, c in enumerate(text) if c == "["), None) or (text.find(":") + 1) or 1
        flood = ("\n" + " " * 7) * min(2000, max(16, max_tokens // 2))
        msg["content"] = text[:cut] + flood
        return msg, "length", f"{len(flood)} whitespace characters after {text[:cut]!r} until max_tokens", max_tokens
    if quirk == "truncated":
        cut = max(1, len(text) * 11 // 20)
        msg["content"] = text[:cut]
        return msg, "length", f"cut at max_tokens after {cut} of {len(text)} characters", max_tokens
    if quirk == "answer_in_reasoning":
        if k % 2 == 0:
            msg["content"] = None
            msg["reasoning_content"] = text
            return msg, "stop", "content empty, the whole answer in reasoning_content", None
        msg["content"] = ""
        msg["reasoning"] = MUSING + "\n\n" + text
        return msg, "stop", "content empty, thinking and the answer in reasoning", None
    if quirk == "think_block":
        if k % 2 == 0:
            msg["content"] = f"<think>\n{MUSING}\n</think>\n\n{text}"
            return msg, "stop", "a <think>...</think> block before the answer", None
        msg["content"] = f"{MUSING}\n</think>\n\n{text}"
        return msg, "stop", "thinking closed by </think> with no opening tag, then the answer", None
    if quirk == "thinking_off_under_json":
        if rf_type in ("json_schema", "json_object"):
            return msg, "stop", "JSON requested: no thinking", None
        msg["content"] = f"<think>\n{MUSING}\n</think>\n\n{text}"
        return msg, "stop", "no JSON requested: thinking before the answer", None
    raise ValueError(f"not an answer quirk: {quirk}")
