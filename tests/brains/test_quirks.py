"""Real servers' quirks, emulated by serve-brain, through the real openai client.

Each quirk ends in either a correct batch (the brain read the answer where the server put it) or a
named fail-safe with nothing moved; the record names it (``vlm_quirk`` from the brain,
``serve_quirk`` from the server)."""
import json

import numpy as np
import pytest

from fake_episode import check_invariants, kinds, run_fake

from motormind.brains.base import BrainRequest
from motormind.grounding.image_sizing import fit, render_size, smart_resize
from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config, strip_thinking
from motormind.brains.scripted import ScriptedBrain
from motormind.errors import BrainUnfit, ConfigError
from motormind.schemas import EXECUTOR
from motormind.serve.faults import FaultPlan
from motormind.serve.quirks import MUSING, QUIRKS, QuirkPlan
from motormind.serve.server import BrainServer

BATCH = {"schema_version": 1, "rationale": "r", "commands": [
    {"op": "move", "direction": "forward", "distance_mm": 20.0}, {"op": "done"}]}


def exec_req(images=None):
    return BrainRequest("executor", "executor", "You are the Executor of a robot.", "Next batch?", EXECUTOR,
                        images or {}, {})


def one_call(quirk, *sets, images=None, **plan):
    """One executor call through the brain against a server with ``quirk`` at rate 1."""
    events = []
    srv = BrainServer(ScriptedBrain({"executor": [BATCH]}), quirks={quirk: 1.0, **plan}).start()
    cfg = load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "backoff_s=0.01", *sets])
    brain = OpenAIBrain(cfg, on_event=lambda kind, **d: events.append((kind, d)))
    try:
        return brain.respond(exec_req(images)), brain, events, srv
    finally:
        brain.close()
        srv.close()


# -- the plan ----------------------------------------------------------------------------------
def test_quirk_plan_validates_and_scopes_each_quirk():
    with pytest.raises(ConfigError, match="quirks.thinking: unknown quirk"):
        QuirkPlan.from_dict({"thinking": 0.3})
    with pytest.raises(ConfigError, match="within 0..1"):
        QuirkPlan.from_dict({"think_block": 2})
    p = QuirkPlan(rates={q: 1.0 for q in QUIRKS})
    plain, with_img = {"images": 0, "response_format": "text"}, {"images": 2, "response_format": "json_schema"}
    assert not p.applies("images_refused", "planner", plain) and p.applies("images_refused", "planner", with_img)
    assert not p.applies("whitespace_flood", "executor", plain)          # a grammar artefact only
    assert p.applies("whitespace_flood", "executor", {"images": 0, "response_format": "json_object"})
    assert not p.applies("schema_ignored", "executor", {"images": 0, "response_format": "json_object"})
    assert p.applies("think_block", "probe", plain)                       # quirks hit the camera probe
    assert not FaultPlan(rates={"http_500": 1.0}).applies("http_500", "probe")   # faults never do
    a, b = QuirkPlan(rates={"think_block": 0.3}, seed=4), QuirkPlan(rates={"think_block": 0.3}, seed=4)
    da, db = [a.choose("executor", plain)[0] for _ in range(300)], [b.choose("executor", plain)[0] for _ in range(300)]
    assert da == db and 0.2 < da.count("think_block") / 300 < 0.4      # reproducible, about the rate


def test_strip_thinking_handles_each_shape():
    assert strip_thinking('<think>a {"x": 1}</think>\n{"y": 2}') == ('{"y": 2}', len('<think>a {"x": 1}</think>\n'))
    assert strip_thinking('musing {"x": 1}\n</think>\n\n{"y": 2}')[0] == '{"y": 2}'
    assert strip_thinking('<think>ran out of tokens {"x": 1') == ("", len('<think>ran out of tokens {"x": 1'))
    assert strip_thinking('{"y": 2}') == ('{"y": 2}', 0)


# -- each quirk, one call -----------------------------------------------------------------------
@pytest.mark.parametrize("variant", [0, 1])
def test_answer_in_reasoning_is_read_there_and_recorded(variant):
    # variant 1: the second injection (the "reasoning" field after a paragraph of thinking)
    events = []
    srv = BrainServer(ScriptedBrain({"executor": [BATCH]}), quirks={"answer_in_reasoning": 1.0}).start()
    brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null"]),
                        on_event=lambda kind, **d: events.append((kind, d)))
    try:
        for _ in range(variant + 1):
            reply = brain.respond(exec_req())
    finally:
        brain.close()
        srv.close()
    assert json.loads(reply.text) == BATCH
    assert reply.meta["answer_from"] == ("reasoning_content", "reasoning")[variant]
    assert [q["quirk"] for q in reply.meta["quirks"]] == ["answer_in_reasoning"]
    assert ("vlm_quirk", {"role": "executor", "prompt": "executor", **reply.meta["quirks"][0]}) in events


@pytest.mark.parametrize("variant", [0, 1])
def test_think_blocks_are_stripped_so_the_thinkings_json_is_never_taken(variant):
    events = []
    srv = BrainServer(ScriptedBrain({"executor": [BATCH]}), quirks={"think_block": 1.0},
                      text_style="fenced").start()
    brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null",
                                                         "structured_output=none"]),
                        on_event=lambda kind, **d: events.append((kind, d)))
    try:
        for _ in range(variant + 1):
            reply = brain.respond(exec_req())
    finally:
        brain.close()
        srv.close()
    from motormind.answers import extract_json
    assert extract_json(reply.text) == BATCH and '"op": "wait"' not in reply.text
    assert reply.meta["thinking_chars"] >= len(MUSING) and reply.meta["quirks"][0]["quirk"] == "think_block"


def test_a_truncated_answer_is_asked_again_with_more_tokens():
    reply, brain, events, srv = one_call("truncated", "max_tokens=300", limit=1)
    assert json.loads(reply.text) == BATCH                   # the second answer, complete
    q = reply.meta["quirks"][0]
    assert q["quirk"] == "truncated" and q["action"] == "asked again at once with max_tokens 600"
    assert len(srv.log) == 2 and reply.meta["first_answer"] and reply.meta["finish_reason"] == "stop"
    assert [d["error"] for kind, d in events if kind == "vlm_retry"] == ["quirk_truncated"]   # counted as a retry
    assert reply.meta["attempts"] == 2 and brain.totals["retries"] == 1


def test_a_truncated_answer_is_never_completed_by_guessing():
    reply, brain, events, srv = one_call("truncated", "max_tokens=300", "max_tokens_cap=300")
    assert reply.meta["finish_reason"] == "length" and "not asked again" in reply.meta["quirks"][0]["action"]
    from motormind.errors import ResponseError
    from motormind.answers import extract_json
    with pytest.raises(ResponseError):                       # the role sees a broken answer and repairs
        extract_json(reply.text)


def test_a_whitespace_flood_is_asked_again_without_the_grammar_then_the_grammar_goes():
    events = []
    srv = BrainServer(ScriptedBrain({"executor": [BATCH]}), quirks={"whitespace_flood": 1.0}).start()
    brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null"]),
                        on_event=lambda kind, **d: events.append((kind, d)))
    try:
        r1 = brain.respond(exec_req())
        r2 = brain.respond(exec_req())
        r3 = brain.respond(exec_req())
    finally:
        brain.close()
        srv.close()
    from motormind.answers import extract_json
    assert extract_json(r1.text) == BATCH and extract_json(r2.text) == BATCH and extract_json(r3.text) == BATCH
    assert r1.meta["quirks"][0]["action"] == "asked again at once without response_format"
    assert "structured output off for the rest of the run (2 floods)" in r2.meta["quirks"][0]["action"]
    assert r3.meta["structured_output"] == "none" and "quirks" not in r3.meta   # no grammar, no flood
    rfs = [e.get("quirk") for e in srv.log]
    assert rfs == ["whitespace_flood", None, "whitespace_flood", None, None]


def test_an_ignored_schema_switches_to_text_extraction():
    reply, brain, events, srv = one_call("schema_ignored", limit=1)
    from motormind.answers import extract_json
    assert extract_json(reply.text) == BATCH and reply.meta["quirks"][0]["quirk"] == "schema_ignored"
    assert brain._structured == "none" and "structured output off" in reply.meta["quirks"][0]["action"]


def test_refused_images_make_the_brain_unfit_without_retrying():
    img = {"front": np.zeros((16, 16, 3), dtype=np.uint8)}
    srv = BrainServer(ScriptedBrain({"executor": [BATCH]}), quirks={"images_refused": 1.0}).start()
    try:
        for k in range(2):                                   # Ollama's 400, then llama.cpp's 500
            events = []
            brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null",
                                                                 "backoff_s=0"]),
                                on_event=lambda kind, **d: events.append((kind, d)))
            with pytest.raises(BrainUnfit) as e:
                brain.respond(exec_req(img))
            with pytest.raises(BrainUnfit):                   # asked nothing more
                brain.respond(exec_req())
            brain.close()
            assert e.value.quirk == "images_refused" and len(srv.log) == k + 1     # no retry, nothing after
            assert ("mmproj" in str(e.value)) == bool(k) and brain.unfit.startswith("images_refused")
            assert ("HTTP 500" if k else "HTTP 400") in str(e.value)
            assert [d["quirk"] for kind, d in events if kind == "vlm_quirk"] == ["images_refused"]
    finally:
        srv.close()


# -- whole episodes on the fake arm -------------------------------------------------------------
def moved(robot):
    return len(robot.executed)


@pytest.mark.parametrize("quirk", ["schema_ignored", "whitespace_flood", "truncated", "answer_in_reasoning",
                                   "think_block", "thinking_off_under_json"])
def test_each_answer_quirk_still_gives_correct_batches(tmp_path, quirk):
    res, robot, ev, srv, tot = run_fake(tmp_path, quirks={quirk: 1.0, "limit": 3, "seed": 0})
    check_invariants(res, robot, ev)
    assert res.success, (res.outcome, res.reason)
    served = kinds(ev, "serve_quirk")
    assert served and all(e["quirk"] == quirk for e in served)
    seen = [e for e in kinds(ev, "vlm_quirk")]
    if quirk == "thinking_off_under_json":
        assert seen == []               # under response_format it does not think: nothing to handle
    else:
        assert seen and {e["quirk"] for e in seen} == {quirk}
        assert all(e["action"] for e in seen)
    assert tot["quirks"].get(quirk, 0) == len(seen)
    for b in kinds(ev, "batch"):        # every executed batch came from a complete, schema-valid answer
        assert "wait" not in json.dumps(b["batch"]["commands"])


def test_every_answer_truncated_ends_in_a_named_fail_safe_with_nothing_moved(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, quirks={"truncated": 1.0})
    check_invariants(res, robot, ev)
    assert not res.success and res.outcome == "gave_up" and moved(robot) == 0
    assert kinds(ev, "vlm_probe")[0]["verdict"] == "inconclusive"     # its answer was cut too
    assert {e["quirk"] for e in kinds(ev, "vlm_quirk")} == {"truncated"}
    assert kinds(ev, "role_failed")[0]["role"] == "planner"


def test_an_endpoint_that_refuses_images_stops_the_episode_before_anything_moves(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, quirks={"images_refused": 1.0})
    check_invariants(res, robot, ev)
    assert res.outcome == "gave_up" and "images_refused" in res.reason and moved(robot) == 0
    assert kinds(ev, "vlm_probe")[0]["verdict"] == "unfit" and kinds(ev, "plan") == []
    assert [e["role"] for e in srv.log] == ["probe"]          # one refused probe, nothing asked after


def test_an_endpoint_that_drops_images_is_caught_by_the_probe(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, quirks={"images_ignored": 1.0})
    check_invariants(res, robot, ev)
    probe = kinds(ev, "vlm_probe")[0]
    assert probe["verdict"] == "unfit" and probe["quirk"] == "images_ignored" and probe["answered"] == ["none"]
    assert res.outcome == "gave_up" and "images_ignored" in res.reason and moved(robot) == 0
    assert kinds(ev, "vlm_quirk")[0]["quirk"] == "images_ignored"


def test_images_dropped_later_are_caught_by_the_calls_own_usage(tmp_path):
    # the probe sees the images (the quirk spares it); the planner's images are dropped
    res, robot, ev, srv, tot = run_fake(tmp_path, quirks={"images_ignored": 1.0, "roles": ["planner"]})
    check_invariants(res, robot, ev)
    probe = kinds(ev, "vlm_probe")[0]
    assert probe["verdict"] == "ok" and probe["calibration"]["image_tokens"] == 85
    assert res.outcome == "gave_up" and "images_ignored" in res.reason and "prompt tokens" in res.reason
    assert moved(robot) == 0 and kinds(ev, "plan") == []
    call = kinds(ev, "vlm_call")[0]
    assert not call["ok"] and "BrainUnfit" in call["error"]


def test_the_probe_measures_each_familys_image_tokens(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, family="qwen2.5-vl", sets=("image_rules=qwen2.5-vl",
                                                                            "image_size=448"))
    assert res.success
    probe = kinds(ev, "vlm_probe")[0]
    assert probe["verdict"] == "ok" and probe["calibration"]["image_tokens"] == 256     # 448 / 28 = 16; 16 x 16
    assert abs(probe["calibration"]["text_tokens_per_char"] - 0.25) < 0.01


# -- image sizing rules ---------------------------------------------------------------------------
def test_family_sizing_rules():
    assert smart_resize(448, 448, 28, 3136, 12845056) == (448, 448)
    assert fit("qwen2.5-vl", 640, 480, 640) == fit("qwen2.5-vl", 640, 480, 640)
    s = fit("qwen2.5-vl", 640, 480, 640)
    assert s.width % 28 == 0 and s.height % 28 == 0 and s.tokens == (s.width // 28) * (s.height // 28)
    s3 = fit("qwen3-vl", 640, 480, 640)
    assert s3.width % 32 == 0 and s3.height % 32 == 0 and s3.tokens == (s3.width // 32) * (s3.height // 32)
    assert fit("gemma3", 128, 128) == fit("gemma3", 1280, 960) and fit("gemma3", 128, 128).tokens == 256
    assert fit("openai", 2000, 1000, detail="low").tokens == 85 and max(fit("openai", 2000, 1000, detail="low").width, 0) == 512
    hi = fit("openai", 2048, 1024, 2048, detail="high")
    assert min(hi.width, hi.height) == 768 and hi.tokens == 85 + 170 * 6
    assert fit("generic", 128, 64, 448) == fit("generic", 128, 64, 448) and fit("generic", 128, 64, 448).width == 448
    assert render_size("gemma3") == 896 and render_size("qwen2.5-vl", 448) == 448 and render_size("openai") == 512
    with pytest.raises(ValueError, match="image rule"):
        fit("llava", 10, 10)
    with pytest.raises(ConfigError, match="image_rules"):
        load_vlm_config({"image_rules": "llava"})


def test_an_openai_runs_render_size_is_its_model_familys():
    """session/setup.py's render size for an openai brain comes from grounding/image_sizing.py (it
    imported the module from where it no longer is: every run with a VLM config failed at start)."""
    from motormind.registry import BrainConfig
    from motormind.session.setup import render_size
    assert render_size(BrainConfig("openai", vlm="vllm-qwen2.5-vl")) == 448
    assert render_size(BrainConfig("openai", vlm="local-oracle")) == 128
    assert render_size(BrainConfig("openai", vlm="local-oracle"), 64) == 64
