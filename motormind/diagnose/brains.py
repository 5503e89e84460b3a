"""Brains for the diagnostic: the oracle, a random guesser, the noisy oracle, any openai endpoint.

* ``OracleDiagnoser``: the oracle brain (``OracleBrain``, reused whole) answering the ``diagnose``
  role through its ``_<role>`` dispatch. It reads the PRIVILEGED snapshot the scoring path hands
  it in the request context (never in the prompt) and answers with ``truth.py``: the option
  command that most lowers the subgoal's remaining cost, the stage the geometry is in, whether the
  subgoal's criterion holds. Labelled ``oracle``, privileged.
* ``RandomBrain``: picks one of the offered letters uniformly, seeded. It reads the letters from
  the request context or, over HTTP, from the prompt's option lines. Labelled ``random``.
* ``NoisyDiagnoser``: the episode's noisy brain (``brains.noisy.NoisyBrain``) with its error kinds
  mapped onto the questions, each question its own draw: ``wrong_direction`` picks a wrong action
  option (any), ``premature_done`` says "yes" when not achieved, ``missed_completion`` "no" when
  achieved, ``wrong_magnitude`` misjudges progress by one stage. So each skill's error rate is one
  rate, the inverse of ``brains.noise_profile.profile_from_report``. Labelled ``noisy(oracle)``,
  privileged.
* ``openai``: ``brains.openai_brain`` with a VLM config. ``serve: oracle`` starts serve-brain
  in-process with the ``OracleDiagnoser`` behind it (the privileged snapshot then travels in the
  request's ``motormind.context``; labelled privileged); ``serve: replay`` replays a recorded
  diagnostic run (its ``events.jsonl``).
"""
from __future__ import annotations

import json
import random
import re
import time

from ..brains.base import Brain, BrainReply, BrainRequest
from ..brains.noisy import NoisyBrain
from ..brains.oracle import OracleBrain
from ..errors import ConfigError
from ..grounding.pixels import PixelConvention
from . import grounding as gnd
from .truth import Truth

_OPTION_RE = re.compile(r"^([A-D])\. ", flags=re.M)


class OracleDiagnoser(OracleBrain):
    """The oracle answering diagnostic questions from each question's privileged snapshot."""

    def __init__(self, profile=None):
        if profile is None:
            from ..profile import load_profile
            profile = load_profile("libero_panda")
        super().__init__(None, profile)
        from .geometry import PickPlaceGeometry
        self.geometry = PickPlaceGeometry(None, profile)

    def _diagnose(self, ctx: dict) -> dict:
        priv = ctx.get("privileged")
        if not isinstance(priv, dict):
            raise ValueError("the oracle answers diagnostic questions from privileged state, and the request "
                             "carries none (context.privileged)")
        skill = priv["skill"]
        if skill == "grounding":
            return self._grounding(ctx, priv)
        t = Truth(priv, self.geometry)
        opts = priv["options"]
        if skill == "action":
            scored = []
            for o in opts:
                d = t.delta(o["value"])
                scored.append((float("-inf") if d is None else d, o["letter"]))
            best = max(scored)
            letter = best[1]
            why = f"this command lowers the subgoal's remaining cost most ({best[0] * 1000:.0f} mm)"
        elif skill == "progress":
            st = t.stage()
            letter = next((o["letter"] for o in opts if o["value"].get("stage") == st), opts[0]["letter"])
            why = f"stage {st} from the object and gripper geometry"
        elif skill == "completion":
            ok = bool(t.achieved())
            letter = next((o["letter"] for o in opts if o["value"].get("achieved") is ok), opts[0]["letter"])
            why = f"the {'task' if t.kind == 'task' else t.kind + ' subgoal'} criterion {'holds' if ok else 'does not hold'}"
        else:
            raise ValueError(f"unknown diagnostic skill {skill!r}")
        return {"answer": letter, "reasoning": why + " (privileged simulator state)"}


    def _grounding(self, ctx: dict, priv: dict) -> dict:
        """The truth pixel in the question's convention and the true offset (grounding.py)."""
        pt = ctx.get("pointing") or {}
        truth = priv["grounding"]
        conv = PixelConvention.from_json(pt["convention"]) if pt.get("convention") else \
            PixelConvention("pixels", *truth["size"])
        ans = gnd.oracle_answer(truth, conv, self.profile.directions)
        return {**ans, "reasoning": f"the {ans['point']['label']}'s visible surface from the depth image and its "
                                    f"AABB (privileged simulator state)"}


_RANGE_RE = re.compile(r"x from 0 \(left edge\) to ([\d.]+) \(right edge\), y from 0 \(top edge\) to ([\d.]+)")
_CAMERA_RE = re.compile(r"Give the point in the '([^']+)' image")
_WORDS_RE = re.compile(r"Offsets: mm along ([\w, ]+) from the grip point")


def random_point(req: BrainRequest, rng: random.Random) -> dict:
    """A uniform random point of the question's image and a uniform random offset (within
    +-RANDOM_OFFSET_MM per axis): the grounding skill's chance baseline. Reads the camera, the
    coordinate range and the offset words from the request context or, over HTTP, the prompt."""
    pt = (req.context or {}).get("pointing")
    if pt:
        conv = PixelConvention.from_json(pt["convention"])
        camera, words, xmax, ymax = pt["camera"], pt["offset_words"], conv.x_max, conv.y_max
    else:
        text = req.user or ""
        r, c, w = _RANGE_RE.search(text), _CAMERA_RE.search(text), _WORDS_RE.search(text)
        if not (r and c and w):
            raise ValueError("random pointer: the request names no camera, coordinate range or offset words")
        camera, xmax, ymax = c.group(1), float(r.group(1)), float(r.group(2))
        words = [x.strip() for x in w.group(1).replace(" and ", ", ").split(",") if x.strip()]
    lim = gnd.RANDOM_OFFSET_MM
    return {"point": {"camera": camera, "pixel": [round(rng.uniform(0, xmax), 1), round(rng.uniform(0, ymax), 1)],
                      "label": "a random point"},
            "offset_mm": {wd: round(rng.uniform(-lim, lim)) for wd in words}}


def offered_letters(req: BrainRequest) -> list[str]:
    opts = (req.context or {}).get("options")
    if opts:
        return [o["letter"] for o in opts]
    found = _OPTION_RE.findall(req.user or "")
    return found or ["A", "B", "C", "D"]


class RandomBrain(Brain):
    """Uniform over the offered letters, seeded: the chance baseline."""
    name = "random"
    privileged = False

    def __init__(self, seed: int = 0):
        self.seed = int(seed)
        self.rng = random.Random(self.seed)

    def respond(self, req: BrainRequest) -> BrainReply:
        t0 = time.perf_counter()
        if (req.context or {}).get("skill") == "grounding" or req.prompt_name == "diagnose_grounding" \
                or _CAMERA_RE.search(req.user or ""):
            text = json.dumps({"schema_version": 1, "source": "random", **random_point(req, self.rng),
                               "reasoning": f"a uniform random point (seed {self.seed})"})
            return BrainReply(text, self.name, time.perf_counter() - t0)
        letter = self.rng.choice(offered_letters(req))
        text = json.dumps({"schema_version": 1, "source": "random", "answer": letter,
                           "reasoning": f"a uniform random guess (seed {self.seed})"})
        return BrainReply(text, self.name, time.perf_counter() - t0)


class NoisyDiagnoser(NoisyBrain):
    """``NoisyBrain`` over the oracle, its error kinds mapped onto diagnostic answers."""

    def respond(self, req: BrainRequest) -> BrainReply:
        if req.role != "diagnose":
            return super().respond(req)
        reply = self.inner.respond(req)
        if req.context["privileged"]["skill"] == "grounding":
            return reply                 # no episode error kind maps onto a point: passed on as the oracle's
        obj = json.loads(reply.text)
        priv = req.context["privileged"]
        opts = priv["options"]
        right = obj["answer"]
        val = {o["letter"]: o["value"] for o in opts}
        wrong = [o for o in opts if o["letter"] != right]
        pick, kind = None, None
        skill = priv["skill"]
        if skill == "action":
            if wrong and self._hit("wrong_direction"):
                pick, kind = self.rng.choice(wrong), "wrong_direction"
        elif skill == "completion":
            yes = bool(val[right].get("achieved"))
            if yes and self._hit("missed_completion"):
                pick, kind = wrong[0], "missed_completion"
            elif not yes and self._hit("premature_done"):
                pick, kind = wrong[0], "premature_done"
        elif skill == "progress":
            st = val[right].get("stage", 0)
            near = [o for o in wrong if abs(o["value"].get("stage", 99) - st) == 1]
            if wrong and self._hit("wrong_magnitude"):
                pick, kind = self.rng.choice(near or wrong), "wrong_magnitude"
        meta = dict(reply.meta)
        if pick is not None:
            obj["answer"] = pick["letter"]
            obj["reasoning"] = f"(noise: {kind}) " + str(obj.get("reasoning", ""))
            self.injected[kind] += 1
            meta["injected"] = [kind]
        return BrainReply(json.dumps(obj), self.name, reply.latency_s, reply.input_tokens, reply.output_tokens,
                          True, meta)


DEFAULT_NOISE = {"wrong_direction": 0.2, "wrong_magnitude": 0.2, "premature_done": 0.2, "missed_completion": 0.2}


def make_brain(name: str, seed: int = 0, noise=None, vlm: str | None = None, vlm_set=(),
               record=None, profile=None) -> Brain:
    """oracle | random | noisy | openai (with a VLM config)."""
    if profile is None:
        from ..profile import load_profile
        profile = load_profile("libero_panda")
    if name == "oracle":
        return OracleDiagnoser(profile)
    if name == "random":
        return RandomBrain(seed)
    if name == "noisy":
        return NoisyDiagnoser(OracleDiagnoser(profile), DEFAULT_NOISE if noise is None else noise, seed=seed)
    if name == "openai":
        return _openai(vlm or "openai", vlm_set, record, profile)
    raise ConfigError(f"--brain: unknown brain {name!r} (oracle, random, noisy, openai)")


def _openai(vlm, vlm_set, record, profile):
    from ..brains.openai_brain import load_vlm_config
    from ..registry import BrainConfig
    from ..serve.build import openai_brain
    cfg = load_vlm_config(vlm, vlm_set)
    if cfg.send_scene:
        raise ConfigError(f"{cfg.source or vlm}: send_scene ships a live simulator scene, and the diagnostic has "
                          f"none; use serve: oracle (the diagnostic's oracle in-process) or a replay")
    # serve: oracle -> serve-brain in-process with the diagnostic's oracle behind it (the registry's openai
    # brain starts the server; the privileged snapshot travels in motormind.context)
    backend = OracleDiagnoser(profile) if cfg.serve == "oracle" else None
    return openai_brain(BrainConfig("openai", vlm=vlm, vlm_set=tuple(vlm_set)), None, profile, record, backend=backend)
