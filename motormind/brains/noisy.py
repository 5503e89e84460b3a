"""A noisy brain: the oracle with VLM-like errors injected, some of them persistent.

It measures what the Verifier, the Monitor and replanning recover. The error kinds, their rates
and scopes are a ``NoiseProfile`` (brains/noise_profile.py, which also derives one from a
diagnostic report):

    wrong_direction     per call: one move of a batch points the opposite way; persistent: one
                        horizontal axis sense (forward/back or left/right) is swapped for every move
    wrong_magnitude     per call: one move's distance scaled by a factor in [0.3, 0.7] or [1.4, 2.0];
                        persistent: every move scaled by one such factor (a magnitude bias)
    object_confusion    the plan's subgoals name another object of the scene (the same one while it lasts)
    wrong_region        the plan puts the object on/in another target (the same one while it lasts)
    premature_done      the Executor claims done on a batch that does not finish its subgoal
    missed_completion   the Executor leaves out the done claim of a batch that does finish it
    false_alarm         the Monitor cancels a batch it found nominal
    missed_alarm        the Monitor lets a batch it would cancel go on

A persistent error (scope plan or episode) is drawn at the start of its scope (each plan; the
episode's first answer) and repeats at every answer it affects. New evidence may clear it: each
new plan (a replan), each Verifier rejection and each Monitor cancel the brain itself answers, and
each Controller rejection the Executor's prompt reports (its reason names the field and the limit),
clears each active persistent error with the chance ``clear_chance``. A plan-scoped error cleared
by a new plan is not drawn again for that plan. Grounding errors reach the oracle through its plan
hook (``OracleBrain.on_plan``), so they apply to the no-planner ablation's whole-task script too.

Everything stays labelled: ``noisy(oracle)``, privileged. Deterministic for a seed, up to the
Monitor's timing: it runs on its own thread and draws its alarms from its own generator, but when
its cancel clears an error depends on when it comes.
"""
from __future__ import annotations

import json
import random
import threading

import numpy as np

from .base import BrainReply, BrainRequest, BrainWrapper
from .noise_profile import KINDS, NoiseProfile, legacy

FLIP = {"forward": "back", "back": "forward", "left": "right", "right": "left", "up": "down", "down": "up"}
AXES = (("forward", "back"), ("left", "right"))     # the senses a persistent wrong_direction swaps
PLAN_KINDS = ("object_confusion", "wrong_region")


class NoisyBrain(BrainWrapper):
    privileged = True

    def __init__(self, inner, profile: NoiseProfile | dict, seed: int = 0):
        self.profile = profile if isinstance(profile, NoiseProfile) else legacy(dict(profile))
        self.inner = inner
        self.rates = self.profile.rates()
        self.scopes = {k: getattr(self.profile.scope, k) for k in KINDS}
        self.rng = random.Random(seed)
        self.alarm_rng = random.Random(seed * 7919 + 1)      # the Monitor's own: it runs on another thread
        self.name = f"noisy({inner.name})"
        self.injected: dict = {k: 0 for k in KINDS}
        self.cleared: dict = {k: 0 for k in KINDS}            # persistent errors cleared by new evidence
        self.active: dict = {}                                 # kind -> its parameters, while it persists
        self.plans = 0
        self.started = False
        self.seen_rejection = ""                               # the batch of the last Controller rejection cleared on
        self.lock = threading.Lock()
        self.tickets = 0                                       # calls asked (Monitor's apart), in order
        self.done_turns = 0                                    # of them, those whose errors are drawn
        self.turn = threading.Condition()
        if hasattr(inner, "on_plan"):
            inner.on_plan = self._on_plan

    def counts(self) -> dict:
        """What was injected, per kind; persistent errors cleared; those still active now (an
        episode's end: the errors in force when it failed). Summaries and result rows carry it."""
        with self.lock:
            return {"injected": {k: n for k, n in self.injected.items() if n},
                    "cleared": {k: n for k, n in self.cleared.items() if n}, "active_at_end": sorted(self.active)}

    # -- draws and clearing ------------------------------------------------------------------------
    def _hit(self, kind: str, rng=None) -> bool:
        return self.rates[kind] > 0 and (rng or self.rng).random() < self.rates[kind]

    def _persistent(self, kind: str) -> bool:
        return self.scopes[kind] != "call"

    def _draw(self, kind: str) -> None:
        if kind in self.active or not self._hit(kind):
            return
        if kind == "wrong_direction":
            self.active[kind] = self.rng.choice(AXES)
        elif kind == "wrong_magnitude":
            self.active[kind] = self.rng.choice([self.rng.uniform(0.3, 0.7), self.rng.uniform(1.4, 2.0)])
        else:
            self.active[kind] = {}                 # grounding: the wrong names, chosen when first needed

    def _clear(self, event: str) -> list:
        """A clearing event: each active persistent error goes with the chance ``clear_chance``."""
        gone = [k for k in sorted(self.active) if self.rng.random() < self.profile.clear_chance]
        for k in gone:
            del self.active[k]
            self.cleared[k] += 1
        return gone

    def _start(self) -> None:
        if not self.started:
            self.started = True
            for k in KINDS:
                if self.scopes[k] == "episode":
                    self._draw(k)

    def _new_plan(self) -> list:
        """A plan begins: a replan is a clearing event; plan-scoped errors not active are drawn."""
        self._start()
        self.plans += 1
        gone = self._clear("replan") if self.plans > 1 else []
        for k in KINDS:
            if self.scopes[k] == "plan" and k not in gone:
                self._draw(k)
        return gone

    # -- answers -----------------------------------------------------------------------------------
    def respond(self, req: BrainRequest) -> BrainReply:
        if req.role == "monitor":
            return self._monitor(req)
        with self.lock:
            self._start()
            if req.role == "executor":
                self._rejected_batch((req.context or {}).get("report_facts") or {})
            if not hasattr(self.inner, "on_plan"):     # (with the hook, every plan arrives there)
                if req.role == "planner" or (req.role == "executor" and self.plans == 0):
                    self._new_plan()           # no Planner (ablation): the instruction is the plan
            ordered = req.role in ("executor", "verifier")      # the roles whose answers draw errors
            if ordered:
                ticket, self.tickets = self.tickets, self.tickets + 1
        # the inner call runs unlocked (calls asked at once, episode/overlap.py, wait for the model
        # together); the errors of their answers are drawn in the order they were asked, whatever
        # order they end in
        if not ordered:
            reply = self.inner.respond(req)
            with self.lock:
                return self._tag(reply, reply.text, list(reply.meta.get("injected", [])) if reply.meta else [])
        try:
            reply = self.inner.respond(req)
        except BaseException:
            self._next_turn(ticket)
            raise
        with self.turn:
            self.turn.wait_for(lambda: self.done_turns == ticket)
            try:
                with self.lock:
                    if req.role == "verifier":
                        return self._verdict(reply)
                    obj = json.loads(reply.text)
                    notes = self._executor(obj.get("commands", []))
                    for n in notes:
                        self.injected[n] += 1
                    return self._tag(reply, json.dumps(obj), notes)
            finally:
                self.done_turns += 1
                self.turn.notify_all()

    def _next_turn(self, ticket: int) -> None:
        """A call that raised draws nothing, but the calls asked after it wait for its turn."""
        with self.turn:
            self.turn.wait_for(lambda: self.done_turns == ticket)
            self.done_turns += 1
            self.turn.notify_all()

    def _rejected_batch(self, facts: dict) -> None:
        """The Controller rejected the last batch (``facts``: its report's, ``messages.Report.facts``):
        its reason (the field, the limit) is in this prompt, new evidence like a Verifier's rejection
        (each rejected batch counted once)."""
        bid = str(facts.get("batch_id") or "")
        if facts.get("status") == "rejected" and bid != self.seen_rejection:
            self.seen_rejection = bid
            self._clear("controller rejection")

    def _tag(self, reply: BrainReply, text: str, notes: list) -> BrainReply:
        meta = {**reply.meta, "injected": notes} if notes else reply.meta
        if self.active:
            meta = {**meta, "persisting": sorted(self.active)}
        return BrainReply(text, self.name, reply.latency_s, reply.input_tokens, reply.output_tokens, True, meta)

    def _executor(self, cmds: list) -> list:
        notes = []
        moves = [c for c in cmds if c.get("op") == "move"]
        # direction
        axis = self.active.get("wrong_direction") if self._persistent("wrong_direction") else None
        if moves and axis is not None:
            if any(self._swap(c, axis) for c in moves):
                notes.append("wrong_direction")
        elif moves and not self._persistent("wrong_direction") and self._hit("wrong_direction"):
            self._flip(self.rng.choice(moves))
            notes.append("wrong_direction")
        # magnitude
        bias = self.active.get("wrong_magnitude") if self._persistent("wrong_magnitude") else None
        if moves and bias is not None:
            for c in moves:
                self._scale(c, bias)
            notes.append("wrong_magnitude")
        elif moves and not self._persistent("wrong_magnitude") and self._hit("wrong_magnitude"):
            self._scale(self.rng.choice(moves), self.rng.choice([self.rng.uniform(0.3, 0.7),
                                                                 self.rng.uniform(1.4, 2.0)]))
            notes.append("wrong_magnitude")
        # completion claims
        premature = ("premature_done" in self.active) if self._persistent("premature_done") \
            else self._hit("premature_done")
        has_done = bool(cmds) and cmds[-1].get("op") == "done"
        if has_done and len(cmds) > 1 and self._hit("missed_completion"):
            cmds.pop()
            notes.append("missed_completion")
        elif not has_done and cmds and premature:
            cmds.append({"op": "done"})
            notes.append("premature_done")
        elif has_done and len(cmds) > 2 and premature:
            del cmds[len(cmds) // 2:-1]           # claim done halfway through
            notes.append("premature_done")
        return notes

    @staticmethod
    def _flip(c: dict) -> None:
        if "vector" in c:
            c["vector"] = [-x for x in c["vector"]]
        else:
            c["direction"] = FLIP.get(c["direction"], c["direction"])

    def _swap(self, c: dict, axis: tuple) -> bool:
        """Mirror the move along ``axis`` (a word pair); True when it had a part along it."""
        if "vector" not in c:
            if c.get("direction") in axis:
                c["direction"] = FLIP[c["direction"]]
                return True
            return False
        dirs = getattr(getattr(self.inner, "profile", None), "directions", None) or {}
        u = np.asarray(dirs.get(axis[0], (1.0, 0.0, 0.0) if axis[0] == "forward" else (0.0, 1.0, 0.0)), float)
        u = u / (np.linalg.norm(u) or 1.0)
        v = np.asarray(c["vector"], float)
        along = float(v @ u)
        if abs(along) < 1e-9:
            return False
        c["vector"] = [round(float(x), 6) for x in v - 2 * along * u]
        return True

    def _scale(self, c: dict, f: float) -> None:
        d = c["distance_mm"] * f
        limits = getattr(getattr(self.inner, "profile", None), "limits", None)
        if limits is not None:                       # a magnitude the brain picks stays one the Controller takes
            d = min(max(d, limits.min_move_mm), limits.max_move_mm)
        c["distance_mm"] = round(d, 1)

    def _verdict(self, reply: BrainReply) -> BrainReply:
        try:
            rejected = json.loads(reply.text).get("achieved") is False
        except (ValueError, AttributeError):
            rejected = False
        gone = self._clear("rejection") if rejected else []
        meta = {**reply.meta, "cleared": gone} if gone else reply.meta
        return self._tag(BrainReply(reply.text, reply.brain, reply.latency_s, reply.input_tokens,
                                    reply.output_tokens, reply.privileged, meta), reply.text, [])

    def _monitor(self, req: BrainRequest) -> BrainReply:
        reply = self.inner.respond(req)
        obj = json.loads(reply.text)
        notes = []
        with self.lock:
            if obj.get("cancel") and self._hit("missed_alarm", self.alarm_rng):
                obj = {**obj, "cancel": False, "reason": "nominal"}
                notes.append("missed_alarm")
            elif not obj.get("cancel") and self._hit("false_alarm", self.alarm_rng):
                obj = {**obj, "cancel": True, "reason": "the gripper seems off its target (a false alarm)"}
                notes.append("false_alarm")
            for n in notes:
                self.injected[n] += 1
            gone = self._clear("cancel") if obj.get("cancel") else []
        meta = {**reply.meta, **({"injected": notes} if notes else {}), **({"cleared": gone} if gone else {})}
        return BrainReply(json.dumps(obj), self.name, reply.latency_s, reply.input_tokens, reply.output_tokens,
                          True, meta)

    # -- grounding errors, through the inner brain's plan hook ------------------------------------
    def _on_plan(self, subgoals: list, specs: dict) -> None:
        """Called by the oracle for every plan it makes (its Planner's, or its whole-task script's),
        inside its ``respond`` (which runs unlocked here)."""
        with self.lock:
            self._on_plan_locked(subgoals, specs)

    def _on_plan_locked(self, subgoals: list, specs: dict) -> None:
        self._new_plan()
        scene = getattr(self.inner, "scene", None)
        if scene is None:
            return
        names = list(scene.object_names)
        hit = []
        for kind in PLAN_KINDS:
            wrong = self.active.get(kind) if self._persistent(kind) else ({} if self._hit(kind) else None)
            if wrong is None:
                continue
            for sg in subgoals:
                spec = specs.get(sg["id"])
                if not spec:
                    continue
                k, a, b, pred = spec
                if kind == "object_confusion" and a:
                    if a not in wrong:
                        choices = [n for n in names if n not in (a, b)]
                        wrong[a] = self.rng.choice(choices) if choices else a
                    if wrong[a] != a:
                        specs[sg["id"]] = (k, wrong[a], b, pred)
                        sg["description"] = sg["description"].replace(a, wrong[a])
                        hit.append(kind)
                elif kind == "wrong_region" and a and b and pred is not None and k in ("carry", "place", "push"):
                    if b not in wrong:
                        choices = self._targets(pred[0], a, b, names)
                        wrong[b] = self.rng.choice(choices) if choices else b
                    if wrong[b] != b:
                        specs[sg["id"]] = (k, a, wrong[b], [pred[0], pred[1], wrong[b]])
                        sg["description"] = sg["description"].replace(b, wrong[b])
                        hit.append(kind)
        for kind in sorted(set(hit)):
            self.injected[kind] += 1

    def _targets(self, op: str, a: str, b: str, names: list) -> list:
        """Other targets ``a`` could be put on/in: objects and regions of the scene for which the
        predicate can be evaluated at all (a region the task's Verifier can check)."""
        scene = self.inner.scene
        try:
            w = self.inner.world()
            cands = [n for n in [*names, *sorted(w.regions)] if n not in (a, b) and (n in w.bodies or n in w.regions)]
        except Exception:  # noqa: BLE001 - an inner brain without a world: its object names
            cands = [n for n in names if n not in (a, b)]
        if not hasattr(scene, "predicate"):
            return cands
        out = []
        for n in cands:
            try:
                scene.predicate([op, a, n])
            except Exception:  # noqa: BLE001 - not a target this predicate can hold for
                continue
            out.append(n)
        return out
