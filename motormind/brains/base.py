"""The brain interface: one call answers one role's prompt with text (JSON, as a VLM would)."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np


@dataclass
class BrainRequest:
    role: str                        # planner | executor | verifier | monitor | memory
    prompt_name: str                 # the prompt file used, e.g. "executor"
    system: str                      # rendered system prompt
    user: str                        # rendered user prompt
    schema: dict                     # the JSON schema the answer must match
    images: dict = field(default_factory=dict)    # name -> HxWx3 uint8, upright
    context: dict = field(default_factory=dict)   # the structured inputs the prompt was rendered from
    history: list = field(default_factory=list)   # earlier turns of this call (repair requests)


@dataclass
class BrainReply:
    text: str
    brain: str                       # label recorded with every output, e.g. "oracle", "openai:gpt-4o"
    latency_s: float = 0.0
    input_tokens: int = 0
    output_tokens: int = 0
    privileged: bool = False         # True when the answer used privileged simulator state
    meta: dict = field(default_factory=dict)


class Brain(ABC):
    name = "brain"
    privileged = False
    unfit = ""                       # why the brain cannot be used (set once found; the episode ends)

    @abstractmethod
    def respond(self, req: BrainRequest) -> BrainReply:
        """Answer one request. May raise on transport failure (the role records and fails safe)."""

    def preflight(self, images: dict) -> dict | None:
        """Before the first plan: check the brain can see ``images`` (the first look's camera
        images, name -> array). A brain that finds itself unfit sets ``unfit``. Returns what it
        found (None: nothing to check)."""
        return None

    def use_gates(self, gates) -> None:
        """Send through the worker's per-endpoint gates (``brains/gate.py``: a cap on requests in
        flight, shared slow-downs). A brain that calls no endpoint has nothing to gate."""

    def watch_budget(self, fn) -> None:
        """``fn() -> dict``: what the episode has left (control steps, wall time, batches), which the
        episode gives its brain; a brain that sends it along (the openai brain's ``send_budget``)
        keeps it. Not privileged: a teleoperator knows it."""

    def close(self) -> None:
        pass


class BrainWrapper(Brain):
    """A brain around another (``inner``): what the inner brain found of itself shows through."""

    inner: Brain

    @property
    def unfit(self) -> str:          # type: ignore[override]
        return getattr(self.inner, "unfit", "")

    def preflight(self, images: dict) -> dict | None:
        return self.inner.preflight(images)

    def use_gates(self, gates) -> None:
        self.inner.use_gates(gates)

    def watch_budget(self, fn) -> None:
        self.inner.watch_budget(fn)


def image_stats(images: dict) -> dict:
    """Shape summary of images, for records (never the pixels)."""
    return {k: list(np.asarray(v).shape) for k, v in images.items()}
