"""Verifier: subgoal, criterion, images, measured state, report -> verdict (achieved or not, evidence)."""
from __future__ import annotations

from dataclasses import dataclass

from .base import Role


@dataclass
class Verdict:
    subgoal_id: str
    achieved: bool
    evidence: str
    brain: str = ""
    failed_safe: bool = False       # the Verifier could not answer: treated as not achieved

    def to_json(self) -> dict:
        return {"schema_version": 1, "subgoal_id": self.subgoal_id, "achieved": self.achieved,
                "evidence": self.evidence, "brain": self.brain, "failed_safe": self.failed_safe}


class Verifier(Role):
    name = prompt_name = "verifier"

    def verify(self, ctx: dict, images: dict) -> Verdict:
        values = {**ctx, "image_names": ", ".join(images) or "none"}
        res = self.ask(values, images, ctx)
        if res.value is None:
            return Verdict(ctx.get("subgoal_id", ""), False, f"verifier failed safe: {res.error}", res.brain, True)
        return Verdict(ctx.get("subgoal_id", ""), bool(res.value["achieved"]), res.value["evidence"], res.brain)
