"""The diagnostic's role: one question -> one lettered answer, through the roles' own machinery.

``Diagnoser`` is a ``Role`` (roles/base.py) named ``diagnose``: the prompt is rendered from
prompts/diagnose.md, the answer parsed strictly against ``schemas.DIAGNOSE``, a bad answer gets one
repair request quoting the error, a second bad answer fails safe (counted wrong, "unanswered"), and
every call is recorded (``vlm_call``) exactly as the stack's roles record theirs.
"""
from __future__ import annotations

import json

from ..errors import ResponseError
from ..roles.base import Role, RoleResult


class Diagnoser(Role):
    name = prompt_name = "diagnose"

    def answer(self, q: dict, images: dict, profile, privileged: bool) -> RoleResult:
        letters = [o["letter"] for o in q["options"]]
        sub = q.get("subgoal")
        values = {
            "robot_description": profile.description,
            "directions": ", ".join(f"{k} ({_axis(v)})" for k, v in sorted(profile.directions.items())),
            "instruction": q["instruction"],
            "plan": json.dumps(q.get("plan") or []),
            "state": json.dumps(q["state"]),
            "image_names": ", ".join(images) or "none",
            "skill": q["skill"],
            "question": q["question"],
            "options": "\n".join(f'{o["letter"]}. {o["text"]}' for o in q["options"]),
            "letters": ", ".join(letters),
        }
        context = {"question_id": q["id"], "skill": q["skill"], "subgoal_id": sub["id"] if sub else None,
                   "question": q["question"],
                   "options": [{"letter": o["letter"], "text": o["text"]} for o in q["options"]]}
        if privileged:
            # PRIVILEGED: for brains that read simulator state (the oracle and its noisy wrapper).
            # The snapshot and the options' structured values; never rendered into the prompt.
            context["privileged"] = {**q["privileged"], "skill": q["skill"],
                                     "options": [{"letter": o["letter"], "value": o["value"]} for o in q["options"]]}

        def offered(v):
            if v["answer"] not in letters:
                raise ResponseError(f"$.answer: {v['answer']!r} is not one of the offered options "
                                    f"{', '.join(letters)}")
        return self.ask(values, images, context, check=offered)


def _axis(v) -> str:
    names = ("x", "y", "z")
    for i, c in enumerate(v):
        if abs(float(c)) > 0.5:
            return ("+" if float(c) > 0 else "-") + names[i]
    return "?"
