"""Executor: current subgoal, images, state, last report, memory -> a short batch of commands.

The Executor only checks the answer's shape (a batch, a look, or a replan request standing alone:
``grounding.points.check_answer``); the Controller validates the commands themselves (limits,
workspace) before any motion and reports every rejection back to the Executor."""
from __future__ import annotations

from ..grounding.points import check_answer
from .base import Role, RoleResult


class Executor(Role):
    name = prompt_name = "executor"

    def propose(self, ctx: dict, images: dict) -> RoleResult:
        values = {**ctx, "image_names": ", ".join(images) or "none"}
        return self.ask(values, images, ctx, check=lambda v: check_answer("executor", v))
