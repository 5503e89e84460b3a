"""Camera checks of a VLM endpoint: does the model see the images a role sends it?

A server can refuse images (HTTP 400 / 500), or take them and drop them without a word; a robot
driven by a model that answers blind moves on guesses. The openai brain asks before the first
plan (``OpenAIBrain.preflight``) and ``motormind vlm check`` asks the same, three cheap calls:

1. the colour probe: as many images as the roles will send, of the same size, each filled with
   one flat colour (red, green, blue, ...); the model names them in order. A real VLM names flat
   primaries without fail; a blind one says "none" or guesses.
2. the same text without the images, and 3. once more with a paragraph of padding: the usage of
   the three gives the server's tokens per image (1 - 2) and per character of text (3 - 2), so
   that each later call's ``prompt_tokens`` shows whether its images were counted at all
   (``OpenAIBrain`` checks every call against this calibration).

The colours, the dot image of the coordinate check, and naming a colour from pixels (what
serve-brain's emulated model "sees") are defined here once.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..answers import extract_json
from ..errors import BrainUnfit, MotorMindError, ResponseError
from ..schemas import COLOURS, POINT, PROBE, validate
from .base import BrainRequest

PALETTE = {"red": (220, 40, 40), "green": (40, 190, 60), "blue": (40, 70, 220), "yellow": (235, 215, 40),
           "magenta": (210, 50, 200), "cyan": (40, 200, 210), "white": (245, 245, 245), "black": (15, 15, 15)}
assert tuple(PALETTE) == COLOURS
PROBE_ORDER = ("red", "green", "blue", "yellow", "magenta", "cyan")
BACKGROUND = (128, 128, 128)
MIN_IMAGE_TOKENS = 8          # below this a server's usage does not count images measurably

PADDING = (
    "Some background on the system that asks: a robot arm stands at a table with a few objects on it. "
    "Two or more cameras watch the scene, one fixed in front of the robot and one on the gripper. Every "
    "few seconds a planner, an executor and a verifier look at the latest images and the measured state "
    "of the arm, and decide what the arm does next, in short moves of a few centimetres. Nothing moves "
    "until a deterministic controller has checked every command against the limits of the arm. The "
    "images are sent upright, in the order the cameras are named, each one after a short label with the "
    "camera's name. ") * 4


def colour_images(names: list[str], shape) -> tuple[dict, list[str]]:
    """One flat-colour image per camera name, of ``shape`` (H, W[, 3]), in PROBE_ORDER."""
    h, w = int(shape[0]), int(shape[1])
    imgs, expected = {}, []
    for i, name in enumerate(names):
        colour = PROBE_ORDER[i % len(PROBE_ORDER)]
        imgs[name] = np.full((h, w, 3), PALETTE[colour], dtype=np.uint8)
        expected.append(colour)
    return imgs, expected


def name_colour(img) -> str:
    """The palette colour nearest the image's mean ("none" for no image)."""
    if img is None:
        return "none"
    mean = np.asarray(img, dtype=float).reshape(-1, np.asarray(img).shape[-1])[:, :3].mean(axis=0)
    return min(PALETTE, key=lambda c: float(np.sum((mean - np.asarray(PALETTE[c], dtype=float)) ** 2)))


def dot_image(width: int, height: int, x: float, y: float, colour: str = "red") -> np.ndarray:
    """A grey image with a disc of ``colour`` centred at pixel (x, y)."""
    img = np.full((height, width, 3), BACKGROUND, dtype=np.uint8)
    r = max(2.0, 0.03 * min(width, height))
    yy, xx = np.mgrid[0:height, 0:width]
    img[(xx + 0.5 - x) ** 2 + (yy + 0.5 - y) ** 2 <= r * r] = PALETTE[colour]
    return img


def find_dot(img, colour: str = "red") -> tuple[float, float] | None:
    """The centre (x, y) in pixels of the ``colour`` pixels of an image (None: none there)."""
    a = np.asarray(img, dtype=float)[:, :, :3]
    d = np.sqrt(np.sum((a - np.asarray(PALETTE[colour], dtype=float)) ** 2, axis=-1))
    ys, xs = np.nonzero(d < 60)
    if len(xs) == 0:
        return None
    return float(xs.mean() + 0.5), float(ys.mean() + 0.5)


@dataclass
class ProbeResult:
    verdict: str                    # ok | unfit | inconclusive
    quirk: str = ""                 # unfit: images_refused | images_ignored | images_misread
    message: str = ""
    expected: list = field(default_factory=list)
    answered: list | None = None
    image_tokens: float | None = None         # prompt tokens per image the server counted
    text_tokens_per_char: float | None = None
    overhead_tokens: float | None = None
    calls: int = 0
    latency_s: float = 0.0
    quirks: list = field(default_factory=list)  # what the brain handled on the way (think blocks, ...)

    @property
    def calibration(self) -> dict | None:
        if self.image_tokens is None or self.text_tokens_per_char is None:
            return None
        return {"image_tokens": self.image_tokens, "text_tokens_per_char": self.text_tokens_per_char,
                "overhead_tokens": self.overhead_tokens or 0.0}

    def to_json(self) -> dict:
        return {**asdict(self), "calibration": self.calibration}


def _prompt(values: dict) -> tuple[str, str]:
    from ..prompt_text import render      # lazy: one definition of how a prompt file is rendered
    import json
    return render("probe", {"schema": json.dumps(PROBE), **values})


def probe_images(brain, names: list[str], shape, at_once: bool = False) -> ProbeResult:
    """Ask ``brain`` (an OpenAIBrain) the colour probe for ``names`` cameras of ``shape``. ``at_once``
    (the VLM config's ``overlap.plan_with_probe``): the three calls are asked together, not one after
    the other; the answers are read in the same order (the two calibration calls are wasted when the
    first finds the images refused)."""
    import json
    imgs, expected = colour_images(names, shape)
    k = len(names)
    question = (f"{k} image(s) are attached, in this order: {', '.join(names)}. Name the colour that fills "
                f"each one, in order, from: {', '.join(COLOURS)}. Say \"none\" for an image you cannot see.")
    what = "Each attached image is filled with one flat colour."
    system, user = _prompt({"what": what, "question": question})
    res = ProbeResult("inconclusive", expected=expected)
    t0 = time.perf_counter()

    import threading
    lock = threading.Lock()

    def ask(images: dict, padding: str = ""):
        with lock:
            res.calls += 1
        u = user if not padding else f"{padding}\n\n{user}"
        reply = brain.respond(BrainRequest("probe", "probe", system, u, PROBE, images, {}))
        with lock:
            res.quirks += [q["quirk"] for q in (reply.meta or {}).get("quirks", [])]
        return reply, len(system) + len(u)

    later = None
    if at_once:
        from concurrent.futures import ThreadPoolExecutor
        pool = ThreadPoolExecutor(2, thread_name_prefix="probe")
        later = (pool.submit(ask, {}), pool.submit(ask, {}, PADDING))
        pool.shutdown(wait=False)
    try:
        seen, _ = ask(imgs)
    except BrainUnfit as e:
        res.verdict, res.quirk = "unfit", e.quirk or "images_refused"
        res.message = str(e).removeprefix(f"{res.quirk}: ")
        res.latency_s = round(time.perf_counter() - t0, 3)
        return res
    except MotorMindError as e:
        res.message = f"the probe got no answer: {e}"
        res.latency_s = round(time.perf_counter() - t0, 3)
        return res
    try:
        obj = extract_json(seen.text)
        validate(obj, PROBE)
        res.answered = list(obj["colours"])
    except (ResponseError, MotorMindError) as e:
        res.message = f"the probe's answer could not be read ({e}); images unverified"
    try:
        short, chars_short = later[0].result() if later else ask({})
        long_, chars_long = later[1].result() if later else ask({}, PADDING)
        if seen.input_tokens and short.input_tokens and long_.input_tokens:
            res.image_tokens = round((seen.input_tokens - short.input_tokens) / max(1, k), 2)
            r = (long_.input_tokens - short.input_tokens) / max(1, chars_long - chars_short)
            res.text_tokens_per_char = round(r, 5)
            res.overhead_tokens = round(short.input_tokens - r * chars_short, 2)
    except MotorMindError:
        pass                                # no calibration: the colours still decide
    res.latency_s = round(time.perf_counter() - t0, 3)
    if res.answered is None:
        return res
    got = (res.answered + ["none"] * k)[:k]
    unseen = [n for n, g, e in zip(names, got, expected) if g != e]
    told = ", ".join(f"{n}: {g} (is {e})" for n, g, e in zip(names, got, expected))
    counted = res.image_tokens
    if not unseen:
        res.verdict = "ok"
        res.message = f"the model named every image's colour ({told})" + (
            f"; the server counts {counted:g} prompt tokens an image" if counted is not None else "")
        return res
    res.verdict = "unfit"
    if counted is not None and counted >= MIN_IMAGE_TOKENS and len(unseen) == k:
        res.quirk = "images_misread"
        res.message = (f"the server counted {counted:g} tokens an image but the model misnamed flat colours "
                       f"({told}): it cannot be trusted to see")
    else:
        res.quirk = "images_ignored"
        part = "" if len(unseen) == k else f" (only {', '.join(n for n in names if n not in unseen)} reached it)"
        tokens = f"; the server counted {counted:g} tokens an image" if counted is not None else ""
        res.message = f"the model answered without seeing the images{part}: {told}{tokens}"
    return res


def point_request(width: int, height: int, x: float, y: float) -> BrainRequest:
    """The coordinate check: one dot at pixel (x, y), the answer asked in 0..1000 normalised units."""
    import json
    from ..prompt_text import render
    system, user = render("point", {"schema": json.dumps(POINT), "colour": "red"})
    return BrainRequest("point", "point", system, user, POINT, {"dot": dot_image(width, height, x, y)}, {})
