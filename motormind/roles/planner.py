"""Planner: instruction, images, measured state, memory -> ordered subgoals with success criteria."""
from __future__ import annotations

import json

from ..errors import ResponseError
from ..messages import Subgoal
from .base import Role, RoleResult, quote_text


class Planner(Role):
    name = prompt_name = "planner"

    def plan(self, ctx: dict, images: dict, replan_reason: str = "") -> tuple[list[Subgoal] | None, RoleResult]:
        prev = ctx.get("plan", [])       # Context.base gives it as JSON text already (was written twice)
        replan = (f"This is a REPLAN. The previous plan failed: {quote_text(replan_reason)}\n"
                  f"Previous plan: {prev if isinstance(prev, str) else json.dumps(prev)}\n") if replan_reason else ""
        values = {**ctx, "replan": replan, "image_names": ", ".join(images) or "none"}

        def unique_ids(v):
            ids = [s["id"] for s in v["subgoals"]]
            if len(set(ids)) != len(ids):
                raise ResponseError("$.subgoals: subgoal ids must be unique")
        res = self.ask(values, images, {**ctx, "replan_reason": replan_reason}, check=unique_ids)
        if res.value is None:
            return None, res
        return [Subgoal(s["id"], s["description"], s["success_criterion"]) for s in res.value["subgoals"]], res
