"""Verifier: subgoal, criterion, images, measured state, report -> verdict (achieved or not, evidence),
or a request for a new plan (``{"replan": {"reason"}}``: a rejection whose evidence is the reason)."""
from __future__ import annotations

from ..grounding.points import check_answer, replan_of
from ..messages import Verdict
from .base import Role


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
