"""A noisy brain: the oracle with VLM-like errors injected at configured rates.

It measures what the Verifier and replanning recover. Errors (each rate is per answer of the role
it affects):
    wrong_direction     a move of the Executor's batch points the opposite way
    wrong_magnitude     a move's distance is scaled by a factor in [0.3, 0.7] or [1.4, 2.0]
    object_confusion    the Planner's subgoals name the wrong object (another object in the scene)
    premature_done      the Executor claims done on a batch that does not finish its subgoal
    missed_completion   the Executor leaves out the done claim of a batch that does finish it
Everything stays labelled: ``noisy(oracle)``, privileged. Deterministic for a seed.
"""
from __future__ import annotations

import json
import random

from .base import BrainReply, BrainRequest, BrainWrapper

KINDS = ("wrong_direction", "wrong_magnitude", "object_confusion", "premature_done", "missed_completion")


class NoisyBrain(BrainWrapper):
    privileged = True

    def __init__(self, inner, rates: dict, seed: int = 0):
        bad = set(rates) - set(KINDS)
        if bad:
            raise ValueError(f"noise: unknown error kind(s) {sorted(bad)} (known: {', '.join(KINDS)})")
        for k, v in rates.items():
            if not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"noise.{k}: rate must be within 0..1, got {v!r}")
        self.inner = inner
        self.rates = {k: float(rates.get(k, 0.0)) for k in KINDS}
        self.rng = random.Random(seed)
        self.name = f"noisy({inner.name})"
        self.injected: dict = {k: 0 for k in KINDS}

    def _hit(self, kind: str) -> bool:
        return self.rates[kind] > 0 and self.rng.random() < self.rates[kind]

    def respond(self, req: BrainRequest) -> BrainReply:
        if req.role == "planner" and self._hit("object_confusion"):
            return self._confused_plan(req)
        reply = self.inner.respond(req)
        if req.role != "executor":
            return reply
        obj = json.loads(reply.text)
        cmds = obj.get("commands", [])
        notes = []
        moves = [c for c in cmds if c.get("op") == "move"]
        if moves and self._hit("wrong_direction"):
            c = self.rng.choice(moves)
            if "vector" in c:
                c["vector"] = [-x for x in c["vector"]]
            else:
                flip = {"forward": "back", "back": "forward", "left": "right", "right": "left", "up": "down",
                        "down": "up"}
                c["direction"] = flip.get(c["direction"], c["direction"])
            notes.append("wrong_direction")
        if moves and self._hit("wrong_magnitude"):
            c = self.rng.choice(moves)
            f = self.rng.choice([self.rng.uniform(0.3, 0.7), self.rng.uniform(1.4, 2.0)])
            c["distance_mm"] = round(c["distance_mm"] * f, 1)
            notes.append("wrong_magnitude")
        has_done = bool(cmds) and cmds[-1].get("op") == "done"
        if has_done and len(cmds) > 1 and self._hit("missed_completion"):
            cmds.pop()
            notes.append("missed_completion")
        elif not has_done and self._hit("premature_done"):
            cmds.append({"op": "done"})
            notes.append("premature_done")
        elif has_done and len(cmds) > 2 and self._hit("premature_done"):
            del cmds[len(cmds) // 2:-1]           # claim done halfway through
            notes.append("premature_done")
        for n in notes:
            self.injected[n] += 1
        meta = {**reply.meta, "injected": notes} if notes else reply.meta
        return BrainReply(json.dumps(obj), self.name, reply.latency_s, reply.input_tokens, reply.output_tokens,
                          True, meta)

    def _confused_plan(self, req: BrainRequest) -> BrainReply:
        reply = self.inner.respond(req)
        scene = getattr(self.inner, "scene", None)
        specs = getattr(self.inner, "specs", None)
        obj = json.loads(reply.text)
        if scene is None or specs is None:
            return reply
        others = [n for n in scene.object_names]
        for sg in obj["subgoals"]:
            spec = specs.get(sg["id"])
            if spec and spec[1]:
                choices = [n for n in others if n not in (spec[1], spec[2])]
                if choices:
                    wrong = self.rng.choice(choices)
                    specs[sg["id"]] = (spec[0], wrong, spec[2], spec[3])
                    sg["description"] = sg["description"].replace(spec[1], wrong)
        self.injected["object_confusion"] += 1
        return BrainReply(json.dumps(obj), self.name, reply.latency_s, privileged=True,
                          meta={"injected": ["object_confusion"]})
