"""Verifier: subgoal, criterion, images, measured state, report -> verdict (achieved or not, evidence),
or a request for a new plan (``{"replan": {"reason"}}``: a rejection whose evidence is the reason)."""
from __future__ import annotations

from dataclasses import dataclass

from ..grounding.points import check_answer, replan_of
from .base import Role


@dataclass
class Verdict:
    subgoal_id: str
    achieved: bool
    evidence: str
    brain: str = ""
    failed_safe: bool = False       # the Verifier could not answer: treated as not achieved
    replan: bool = False            # the Verifier asked for a new plan (``evidence`` is its reason)

    def to_json(self) -> dict:
        return {"schema_version": 1, "subgoal_id": self.subgoal_id, "achieved": self.achieved,
                "evidence": self.evidence, "brain": self.brain, "failed_safe": self.failed_safe,
                **({"replan": True} if self.replan else {})}


class Verifier(Role):
    name = prompt_name = "verifier"

    def verify(self, ctx: dict, images: dict, with_answer: bool = False):
        """The verdict (with ``with_answer``: (verdict, the answer or None when it failed safe))."""
        values = {**ctx, "image_names": ", ".join(images) or "none"}
        res = self.ask(values, images, ctx, check=lambda v: check_answer("verifier", v))
        sg = ctx.get("subgoal_id", "")
        if res.value is None:
            v = Verdict(sg, False, f"verifier failed safe: {res.error}", res.brain, True)
        elif replan_of(res.value) is not None:
            v = Verdict(sg, False, replan_of(res.value), res.brain, replan=True)
        else:
            v = Verdict(sg, bool(res.value["achieved"]), res.value["evidence"], res.brain)
        return (v, res.value) if with_answer else v
