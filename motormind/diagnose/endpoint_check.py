"""``motormind vlm check --vlm CONFIG``: ask an endpoint a handful of cheap questions before an episode.

    motormind vlm check --vlm configs/vlm/vllm-qwen2.5-vl.yaml
    motormind vlm check --vlm ollama --vlm-set model=gemma3:12b --json check.json

About fifteen calls, each through the openai brain exactly as an episode makes them (so every quirk
the brain handles is named, ``brains/openai_brain.py``):

    models        GET /models lists the configured model
    answers       a text-only question is answered; its latency
    images        the colour probe (``brains/probe.py``): images refused, dropped or misread?
    image_sizes   tokens per image at two sizes: the server's resize rule, against ``image_rules``
    roles         each role's real prompt (``motormind/prompts/``) on a canned scene, with images:
                  is the first answer schema-valid JSON? what did the brain have to do to read it?
    thinking      the Executor once more without ``response_format``: does the model think only then?
    coordinates   a dot at a known place, its position asked in 0..1000 normalised units: which
                  convention does the answer follow?
    latency       every call's latency against ``timeout_s``

It prints a verdict (ready / ready with the listed changes / unfit) and the config changes to make,
as YAML. Exit status: 0 ready, 1 usable with the changes, 2 unfit (or the check could not run).
Nothing here moves a robot; the scene is synthetic.
"""
from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..answers import extract_json
from ..argtypes import one_line
from ..text import clip
from ..errors import BrainUnfit, ConfigError, MotorMindError
from ..messages import CommandResult, EventKind, Report, Subgoal

CAMERAS = ("agentview", "robot0_eye_in_hand")


@dataclass
class Finding:
    check: str
    status: str                                  # ok | warn | fail
    detail: str
    change: dict = field(default_factory=dict)   # config changes that fix it (dotted keys)
    server: str = ""                             # what to change on the server instead, when that is the fix


# what the brain did about a quirk, and what to change so it need not
ADVICE = {
    "answer_in_reasoning": ("warn", "the server's reasoning parser puts the answer in reasoning_content and leaves "
                            "content empty; the brain reads it there", {},
                            "vLLM: serve without --reasoning-parser, or let the model think "
                            "(chat_template_kwargs: {enable_thinking: true})"),
    "think_block": ("warn", "the model writes <think> blocks before the JSON; the brain drops them",
                    {"strip_thinking": True},
                    "Qwen3 on vLLM: extra_body: {chat_template_kwargs: {enable_thinking: false}} saves the tokens"),
    "whitespace_flood": ("warn", "under a JSON grammar the model emitted whitespace until max_tokens; the brain "
                         "asked again without the grammar", {"structured_output": "none"},
                         "vLLM: --structured-outputs-config '{\"disable_any_whitespace\": true}' (older releases: "
                         "--guided-decoding-backend xgrammar:disable-any-whitespace) bounds it"),
    "truncated": ("warn", "answers stopped at max_tokens mid-JSON; the brain asked again with twice the tokens",
                  None, ""),
    "schema_ignored": ("warn", "response_format json_schema was accepted and ignored; the brain extracts the JSON "
                       "from the text (the prompts carry the schema, the roles check it)",
                       {"structured_output": "none"}, ""),
    "thinking_off_under_json": ("warn", "the model thinks without response_format and not with it (the grammar "
                                "forces JSON from the first token)", {},
                                "to let it reason first: structured_output: none (the roles still check the "
                                "schema); keep json_schema for a guaranteed shape"),
}


class Checker:
    def __init__(self, cfg, profile, cameras=CAMERAS, client=None, progress=None):
        from ..brains.openai_brain import OpenAIBrain
        self.cfg = cfg
        self.profile = profile
        self.cameras = list(cameras)
        self.events: list[tuple[str, dict]] = []
        self.brain = OpenAIBrain(cfg, client=client, on_event=lambda kind, **d: self.events.append((kind, d)),
                                 profile_name=profile.name)
        self.findings: list[Finding] = []
        self.latencies: list[float] = []        # one per request the brain was asked (its retries inside)
        self.failed_calls = 0                   # of those, the ones that got no answer
        respond = self.brain.respond

        def timed(req, *args, **kw):            # every check's calls, the probes' included, counted once here
            t0 = time.perf_counter()
            try:
                return respond(req, *args, **kw)
            except BaseException:
                self.failed_calls += 1
                raise
            finally:
                self.latencies.append(time.perf_counter() - t0)
        self.brain.respond = timed
        self.quirks: dict = {}
        self.progress = progress or (lambda s: None)
        from ..grounding.image_sizing import render_size
        self.size = render_size(cfg.image_rules, cfg.image_size)

    def add(self, check: str, status: str, detail: str, change: dict | None = None, server: str = "") -> None:
        self.findings.append(Finding(check, status, detail, dict(change or {}), server))
        self.progress(f"{status.upper():4s} {check}: {detail}")

    def _reply(self, req):
        return self.brain.respond(req)

    # -- the checks ---------------------------------------------------------------------------------
    def run(self) -> dict:
        try:
            self.check_models()
            if not self.check_answers():
                return self.report()
            sees = self.cfg.send_images and self.check_images()
            if sees:
                self.check_image_sizes()
            if not self.brain.unfit:
                self.check_roles()
                self.check_thinking()
                if sees:
                    self.check_coordinates()
            self.check_latency()
            self.check_quirks()
            return self.report()
        finally:
            self.brain.close()

    def check_models(self) -> None:
        try:
            ids = [m.id for m in self.brain.client.models.list()]
        except Exception as e:  # noqa: BLE001 - a server without /models still answers chats
            self.add("models", "warn", f"GET /models failed ({type(e).__name__}: {str(e)[:120]}); "
                                       "the model name is not verified")
            return
        if self.cfg.model in ids:
            self.add("models", "ok", f"the server lists {self.cfg.model!r}")
        elif len(ids) == 1:
            self.add("models", "warn", f"the server serves {ids[0]!r}, not {self.cfg.model!r} (vLLM answers 404 to "
                                       "another name)", {"model": ids[0]})
        else:
            self.add("models", "warn", f"{self.cfg.model!r} is not among the served models {ids[:8]}")

    def check_answers(self) -> bool:
        from ..brains.base import BrainRequest
        from ..schemas import PROBE
        req = BrainRequest("probe", "probe", "You are the Probe of a robot system's endpoint check.",
                           'No image is attached. Answer with {"schema_version": 1, "colours": []}.', PROBE, {}, {})
        try:
            r = self._reply(req)
        except MotorMindError as e:
            self.add("answers", "fail", f"the endpoint does not answer: {e}")
            return False
        self.add("answers", "ok", f"answered in {r.latency_s:.2f} s ({r.input_tokens} prompt tokens, "
                                  f"finish_reason {r.meta.get('finish_reason')})")
        return True

    def check_images(self) -> bool:
        from ..brains.probe import probe_images
        res = probe_images(self.brain, self.cameras, (self.size, self.size))
        self.probe = res
        if res.verdict == "ok":
            self.add("images", "ok", f"{len(self.cameras)} image(s) of {self.size} px: {res.message}")
            return True
        if res.verdict == "inconclusive":
            self.add("images", "warn", f"the colour probe was inconclusive: {res.message}")
            return False
        fix = {"images_refused": "use a vision model, or give llama.cpp's server the model's --mmproj; Ollama: "
                                 "`ollama show MODEL` must list 'vision'",
               "images_ignored": "the images never reach the model: check the server's multimodal support "
                                 "(vLLM --limit-mm-per-prompt image=N, a vision model, llama.cpp --mmproj)",
               "images_misread": "try a larger image_size or another model"}.get(res.quirk, "")
        self.add("images", "fail", f"{res.quirk}: {res.message}. Driving a robot with this endpoint would be "
                                   f"driving it blind. {fix}")
        return False

    def check_image_sizes(self) -> None:
        """Tokens per image at the configured size and at half of it: how the server resizes."""
        from ..grounding.image_sizing import fit
        from ..brains.probe import probe_images
        full = self.probe.image_tokens
        half_size = max(16, self.size // 2)
        cfg = self.brain.cfg
        saved = cfg.image_rules, cfg.image_size, dict(cfg.roles)
        cfg.image_rules, cfg.image_size = "generic", None        # sent as they are: the server's rule alone
        cfg.roles = {k: {kk: vv for kk, vv in v.items() if kk != "image_size"} for k, v in cfg.roles.items()}
        try:
            half = probe_images(self.brain, self.cameras[:1], (half_size, half_size)).image_tokens
        finally:
            cfg.image_rules, cfg.image_size, cfg.roles = saved
        if full is None or half is None or full < 1:
            self.add("image_sizes", "warn", "the server's usage does not count image tokens; its resize rule is "
                                            "unknown (image_rules unverified)")
            return
        ratio = full / max(half, 1e-9)
        if abs(ratio - 1) < 0.15:
            how = f"every image costs {full:g} tokens whatever its size: the server resizes to a fixed size"
            guess = "gemma3" if abs(full - 256) <= 8 else ""      # (85: OpenAI's low detail; generic is right)
        else:
            block = math.sqrt(self.size * self.size / full)
            how = f"{full:g} tokens at {self.size} px, {half:g} at {half_size} px: one token per ~{block:.0f} px square"
            guess = "qwen2.5-vl" if abs(block - 28) < 2 else ("qwen3-vl" if abs(block - 32) < 2 else "")
        expected = fit(self.cfg.image_rules, self.size, self.size, self.cfg.image_size).tokens
        if guess and guess != self.cfg.image_rules and not (expected and abs(expected - full) <= 0.1 * full):
            self.add("image_sizes", "warn", f"{how}; that is the {guess} rule, the config says "
                                            f"{self.cfg.image_rules}", {"image_rules": guess})
        else:
            self.add("image_sizes", "ok", how + (f" (image_rules {self.cfg.image_rules})"))

    def check_roles(self) -> None:
        from ..roles.base import Role
        rec = []

        def record(kind, **d):
            rec.append((kind, d))
        for role, values, images in self._role_requests():
            ask = type(f"Check{role.title()}", (Role,), {"name": role, "prompt_name": role})(
                self.brain, record, repair=False)
            n0 = len(rec)
            res = ask.ask(values, images, values)
            call = next((d for k, d in rec[n0:] if k == EventKind.VLM_CALL), {})
            meta = call.get("meta") or {}
            names = [q["quirk"] for q in meta.get("quirks", [])]
            how = f"{call.get('latency_s', 0):.2f} s, answer from {meta.get('answer_from', 'content')}" + (
                f", handled: {', '.join(names)}" if names else "")
            if res.value is not None:
                self.add(f"role:{role}", "ok", f"schema-valid JSON ({how})")
            elif self.brain.unfit:
                self.add(f"role:{role}", "fail", self.brain.unfit)
                return
            elif "response" not in call:        # no answer at all: the endpoint refused or failed the request
                self.add(f"role:{role}", "fail", f"the endpoint gave no answer to the {role}'s request: "
                                                 f"{clip(res.error, 300)}; in an episode this role would fail safe "
                                                 "at every call")
            else:
                self.add(f"role:{role}", "warn", f"the first answer is not usable: {clip(res.error, 160)} ({how}); "
                                                 "in an episode the role asks once more, quoting the error")

    def check_thinking(self) -> None:
        """The Executor's prompt with and without response_format: thinking only without it?"""
        if self.brain._structured == "none":
            return
        from ..roles.base import Role
        rec = []
        role, values, images = next(r for r in self._role_requests() if r[0] == "executor")
        ask = type("CheckExecutor", (Role,), {"name": role, "prompt_name": role})(
            self.brain, lambda kind, **d: rec.append((kind, d)), repair=False)
        saved = self.brain._structured
        for mode in (saved, "none"):
            self.brain._structured = mode
            ask.ask(values, images, values)
        self.brain._structured = saved
        metas = [d.get("meta") or {} for k, d in rec if k == EventKind.VLM_CALL and "response" in d]    # answered
        if len(metas) < 2:
            return
        think = [bool(m.get("thinking_chars") or m.get("reasoning_chars")) for m in metas]
        if think == [False, True]:
            self.quirks["thinking_off_under_json"] = self.quirks.get("thinking_off_under_json", 0) + 1
            self.add("thinking", "warn", "the model thinks without response_format and not with it")
        elif any(think):
            self.add("thinking", "ok", "the model thinks with and without response_format")
        else:
            self.add("thinking", "ok", "no thinking either way")

    def check_coordinates(self) -> None:
        from ..grounding.image_sizing import fit
        from ..brains.probe import point_request
        from ..schemas import POINT, validate
        w = h = self.size
        x, y = 0.7 * w, 0.3 * h
        try:
            reply = self._reply(point_request(w, h, x, y))
            obj = extract_json(reply.text)
            validate(obj, POINT)
        except BrainUnfit as e:
            self.add("coordinates", "fail", str(e))
            return
        except MotorMindError as e:
            self.add("coordinates", "warn", f"no usable answer to the dot question ({str(e)[:120]})")
            return
        ax, ay = float(obj["x"]), float(obj["y"])
        q = fit("qwen2.5-vl", w, h, self.cfg.image_size or w)
        cands = {"0..1000 normalised (as asked)": (700.0, 300.0),
                 f"pixels of the {w}x{h} image sent": (x, y),
                 f"pixels of a Qwen2.5-VL resize ({q.width}x{q.height})": (x * q.width / w, y * q.height / h),
                 "0..1 normalised": (0.7, 0.3)}
        best = min(cands, key=lambda c: math.hypot(ax - cands[c][0], ay - cands[c][1]) / max(1.0, math.hypot(*cands[c])))
        err = math.hypot(ax - cands[best][0], ay - cands[best][1]) / max(1.0, math.hypot(*cands[best]))
        if err > 0.15:
            self.add("coordinates", "warn", f"the dot at 70%, 30% came back as ({ax:g}, {ay:g}): no known convention "
                                            "(a model that cannot point, or another convention)")
        elif best.startswith("0..1000"):
            self.add("coordinates", "ok", f"({ax:g}, {ay:g}): the model follows the 0..1000 convention the prompt asks")
        else:
            self.add("coordinates", "warn", f"asked for 0..1000, the model answered ({ax:g}, {ay:g}): {best}. A prompt "
                                            "that asks this model for image positions must ask in that convention "
                                            "(MotorMind's roles never ask for image positions)")

    def check_latency(self) -> None:
        lat = list(self.latencies)               # every call the header counts
        if not lat:
            return
        med, worst = statistics.median(lat), max(lat)
        t = self.cfg.timeout_s
        detail = f"{calls_text(len(lat), self.failed_calls)}, median {med:.2f} s, slowest {worst:.2f} s (timeout_s {t:g})"
        if worst > 0.5 * t:
            self.add("latency", "warn", detail + ": a slow call would time out", {"timeout_s": float(math.ceil(3 * worst))})
        else:
            self.add("latency", "ok", detail)
        mon = (self.cfg.roles.get("monitor") or {}).get("timeout_s")
        if mon is not None and med > mon:
            self.add("latency", "warn", f"the Monitor's timeout {mon:g} s is under the median call ({med:.2f} s): "
                                        "its checks would all time out", {"roles.monitor.timeout_s": float(math.ceil(2 * med))})

    def check_quirks(self) -> None:
        for kind, d in self.events:
            if kind == "vlm_quirk":
                self.quirks[d["quirk"]] = self.quirks.get(d["quirk"], 0) + 1
            if kind == "vlm_retry" and "refused response_format" in str(d.get("note", "")):
                self.add("structured_output", "warn", "the server refused response_format; the brain switched it off",
                         {"structured_output": "none"})
        for name, n in sorted(self.quirks.items()):
            if name not in ADVICE:
                continue
            status, what, change, server = ADVICE[name]
            if name == "truncated":
                change = {"max_tokens": 2 * int(self.cfg.max_tokens)}
            self.add(f"quirk:{name}", status, f"{what} ({n} time(s))", change, server)

    # -- the canned scene ---------------------------------------------------------------------------
    def _role_requests(self):
        """(role, prompt values, images) for each role: a synthetic scene on this robot profile."""
        from ..components import Context, brief_report
        prof = self.profile
        lo = {ax: prof.workspace_mm[ax][0] for ax in "xyz"}
        hi = {ax: prof.workspace_mm[ax][1] for ax in "xyz"}
        pos = [round((lo[a] + hi[a]) / 2, 1) for a in "xyz"]
        state = {"t_s": 1.0, "eef_pos_mm": pos, "eef_quat_xyzw": [1.0, 0.0, 0.0, 0.0], "eef_yaw_deg": 0.0,
                 "gripper_width_mm": prof.gripper_max_width_mm, "gripper_fraction": 1.0, "joints_deg": [0.0] * 7}
        instruction = "pick up the red block and lift it"
        plan = [Subgoal("s1", "grasp the red block", "the red block is between the closed fingers"),
                Subgoal("s2", "lift the red block", "the red block is 10 cm above the table")]
        base = Context(prof, instruction).base(state, plan)
        images = {name: _scene_image(self.size, i) for i, name in enumerate(self.cameras)} if self.cfg.send_images else {}
        names = ", ".join(images) or "none"
        sg = {"subgoal_id": "s1", "subgoal": plan[0].description, "criterion": plan[0].success_criterion}
        rep = Report("b1", "s1", "done", (
            CommandResult(0, {"op": "move", "direction": "down", "distance_mm": 40.0}, "done",
                          commanded={"distance_mm": 40.0}, achieved={"distance_mm": 39.6}),
            CommandResult(1, {"op": "gripper", "action": "close"}, "done")), claims_done=True)
        yield "planner", {**base, "replan": "", "image_names": names}, images
        yield "executor", {**base, **sg, "last_report": brief_report(None), "last_verdict": "none",
                           "batch_id": "b1", "image_names": names}, images
        yield "verifier", {**base, **sg, "last_report": brief_report(rep), "last_verdict": "none",
                           "batch_id": "b1", "image_names": names}, images
        yield "monitor", {"instruction": instruction, **sg, "batch_id": "b1", "state": json.dumps(state),
                          "batch": json.dumps({"batch_id": "b1", "commands": rep.results[0].command}),
                          "progress": "[]", "image_names": "none"}, {}
        yield "memory", {"instruction": instruction, "memory": "nothing yet",
                         "events": json.dumps([{"kind": "plan", "subgoals": ["s1", "s2"]}])}, {}

    # -- the verdict --------------------------------------------------------------------------------
    def report(self) -> dict:
        fails = [f for f in self.findings if f.status == "fail"]
        changes: dict = {}
        for f in self.findings:
            f.change = {k: v for k, v in f.change.items() if _current(self.cfg, k) != v}   # what is set already
            changes.update(f.change)
        verdict = "unfit" if fails else ("changes" if changes else "ready")
        return {"endpoint": self.cfg.base_url, "model": self.cfg.model, "config": self.cfg.source,
                "verdict": verdict, "changes": changes, "quirks": dict(self.quirks),
                "server_changes": [f.server for f in self.findings if f.server],
                "findings": [asdict(f) for f in self.findings], "calls": len(self.latencies),
                "failed_calls": self.failed_calls,
                "image_size": self.size}


def calls_text(calls: int, failed: int = 0) -> str:
    """The check's call count, as the header and the latency line both say it."""
    return f"{calls} call{'s' if calls != 1 else ''}" + (f", {failed} of them failed" if failed else "")


def _current(cfg, key: str):
    """The config's value at a dotted key (None when unset)."""
    head, _, rest = key.partition(".")
    v = getattr(cfg, head, None)
    for p in rest.split(".") if rest else []:
        v = v.get(p) if isinstance(v, dict) else None
    return v


def _scene_image(size: int, k: int) -> np.ndarray:
    """A synthetic camera view: a table, a red block, the gripper's grey bar (k varies the view)."""
    img = np.full((size, size, 3), (150, 170, 190), dtype=np.uint8)
    img[size // 2:, :] = (120, 90, 60)
    b = size // 8
    cx, cy = size // 2 + (k * size // 6), size * 5 // 8
    img[cy - b // 2:cy + b // 2, cx - b // 2:cx + b // 2] = (200, 30, 30)
    img[size // 6:size // 6 + b // 3, size // 3:2 * size // 3] = (60, 60, 60)
    return img


def render_text(rep: dict) -> str:
    lines = [f"motormind vlm check: {rep['model']} at {rep['endpoint']} "
             f"({calls_text(rep['calls'], rep.get('failed_calls', 0))})"]
    for f in rep["findings"]:
        lines.append(f"  {f['status'].upper():4s} {f['check']}: {f['detail']}")
        if f["server"]:
            lines.append(f"       on the server: {f['server']}")
    lines.append({"ready": "verdict: READY",
                  "changes": "verdict: USABLE, with the config changes below",
                  "unfit": "verdict: UNFIT: do not run an episode with this endpoint"}[rep["verdict"]])
    if rep["changes"]:
        import yaml
        lines.append("config changes (YAML, in the VLM config or as --vlm-set KEY=VALUE):")
        nested: dict = {}
        for k, v in rep["changes"].items():
            cur = nested
            parts = k.split(".")
            for p in parts[:-1]:
                cur = cur.setdefault(p, {})
            cur[parts[-1]] = v
        lines += ["  " + ln for ln in yaml.safe_dump(nested, sort_keys=True).splitlines()]
    return "\n".join(lines)


class NotChecked(Exception):
    """A config vlm check has nothing to ask, with the reason (the exit is 0: nothing is wrong)."""


def check_endpoint(vlm, overrides=(), profile="libero_panda", cameras=CAMERAS, progress=None) -> dict:
    from ..profile import load_profile
    from ..brains.endpoint import unreachable
    from ..brains.openai_brain import load_vlm_config
    cfg = load_vlm_config(vlm, overrides)
    if cfg.serve:
        raise NotChecked(f"{cfg.source}: nothing to check: serve: {cfg.serve} starts its own serve-brain inside "
                         f"each run, answered from the simulator's PRIVILEGED state (`motormind run --vlm "
                         f"{cfg.name or vlm}` exercises it)")
    # one connect, no retries: a closed port is said at once (the brain's retries are for a live server)
    why = unreachable(cfg.base_url, timeout_s=1.5)
    if why:
        if "refused" in why.lower() or why.startswith("cannot connect"):
            raise ConfigError(f"nothing is listening at {cfg.base_url} ({why}): start the server, or fix base_url")
        raise ConfigError(f"{cfg.base_url} is not reachable: {why}")
    if cfg.send_scene:
        raise NotChecked(f"{cfg.source}: the endpoint is listening at {cfg.base_url}; its answers come from the "
                         "simulator's PRIVILEGED scene sent with each call (send_scene), which vlm check has none "
                         f"of: `motormind run --vlm {cfg.name or vlm}` exercises it")
    return Checker(cfg, load_profile(profile), cameras, progress=progress).run()


# -- the command line ---------------------------------------------------------------------------
def register(subparsers) -> None:
    p = subparsers.add_parser("vlm", help="VLM endpoint tools")
    sub = p.add_subparsers(dest="vlm_cmd", required=True)
    c = sub.add_parser("check", help="ask the configured endpoint a handful of cheap questions (answers? sees "
                                     "images? schema-valid JSON per role? latency? quirks?) and print a verdict "
                                     "and the config changes to make")
    c.add_argument("--vlm", required=True, metavar="CONFIG", help="a VLM config (YAML path or a name in configs/vlm/)")
    c.add_argument("--vlm-set", action="append", default=[], metavar="KEY=VALUE", help="override one field")
    c.add_argument("--profile", default="libero_panda", help="the robot profile the role prompts describe")
    c.add_argument("--cameras", default=",".join(CAMERAS), help="camera names the images are sent as")
    c.add_argument("--json", default=None, metavar="FILE", help="also write the report as JSON")
    c.add_argument("--quiet", action="store_true", help="only the verdict and the changes")
    c.set_defaults(fn=_check)


def _check(args) -> int:
    cams = [c.strip() for c in args.cameras.split(",") if c.strip()]
    try:
        rep = check_endpoint(args.vlm, args.vlm_set, args.profile, cams)
    except NotChecked as e:
        print(f"motormind vlm check: {one_line(e)}")
        return 0
    except ConfigError as e:
        print(f"motormind vlm check: error: {one_line(e)}", file=sys.stderr)
        return 2
    text = render_text(rep)
    if args.quiet:                      # from the verdict on
        lines = text.splitlines()
        text = "\n".join(lines[next(i for i, ln in enumerate(lines) if ln.startswith("verdict:")):])
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rep, f, indent=2)
    return {"ready": 0, "changes": 1, "unfit": 2}[rep["verdict"]]
