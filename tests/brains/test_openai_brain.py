"""The openai brain: configs, the request it sends, retries, accounting, structured output, repair."""
import base64
import json

import numpy as np
import pytest

from motormind.brains.base import BrainRequest
from motormind.brains.openai_brain import (OpenAIBrain, VLMError, apply_overrides, image_data_url,
                                           load_vlm_config)
from motormind.brains.scripted import ScriptedBrain
from motormind.errors import ConfigError
from motormind.paths import config_dir
from motormind.record import Recorder
from motormind.roles.verifier import Verifier
from motormind.schemas import VERIFIER
from motormind.serve.server import BrainServer, decode_data_url

VERDICT = {"schema_version": 1, "achieved": True, "evidence": "the bowl is on the plate"}


def req(role="verifier", images=None, history=None, context=None):
    return BrainRequest(role, role, f"You are the {role.title()} of a robot.", "Is it done?", VERIFIER,
                        images or {}, context or {"subgoal_id": "s1"}, history or [])


def brain_for(server, *sets, on_event=None, sleep=None):
    cfg = load_vlm_config("local-oracle", [f"base_url={server.url}", "serve=null", *sets])
    kw = {"on_event": on_event}
    if sleep:
        kw["sleep"] = sleep
    return OpenAIBrain(cfg, **kw)


@pytest.fixture
def server():
    srv = BrainServer(ScriptedBrain({"verifier": [VERDICT]}), model="test-model", keep_bodies=20).start()
    yield srv
    srv.close()


# -- configs ------------------------------------------------------------------------------------
def test_every_shipped_config_loads(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    names = sorted(p.stem for p in (config_dir() / "vlm").glob("*.yaml"))
    assert {"openai", "vllm-qwen2.5-vl", "ollama", "llamacpp", "local-oracle", "remote-oracle"} <= set(names)
    for n in names:
        cfg = load_vlm_config(n)
        assert cfg.model and cfg.timeout_s > 0 and cfg.structured_output in ("json_schema", "json_object", "none")
    assert load_vlm_config("openai").prices["input_per_mtok"] > 0
    assert load_vlm_config("local-oracle").serve == "oracle"
    assert load_vlm_config("vllm-qwen2.5-vl").base_url == "http://localhost:8000/v1"
    monkeypatch.setenv("VLLM_BASE_URL", "http://gpu:9000/v1")
    assert load_vlm_config("vllm-qwen2.5-vl").base_url == "http://gpu:9000/v1"


def test_config_errors_name_the_field(tmp_path, monkeypatch):
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['modle'\]"):
        load_vlm_config({"modle": "x"})
    with pytest.raises(ConfigError, match="structured_output"):
        load_vlm_config({"structured_output": "xml"})
    with pytest.raises(ConfigError, match="roles.pilot"):
        load_vlm_config({"roles": {"pilot": {"timeout_s": 1}}})
    with pytest.raises(ConfigError, match="no VLM config"):
        load_vlm_config("no-such-backend")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(ConfigError, match=r"\$OPENAI_API_KEY is not set"):
        OpenAIBrain(load_vlm_config("openai"))
    p = tmp_path / "mine.yaml"
    p.write_text("model: m\nbase_url: http://h/v1\napi_key: k\nmax_tokens: 7\n")
    cfg = load_vlm_config(str(p), ["max_tokens=9", "roles.monitor.timeout_s=2.5", "faults.http_429=0.2"])
    assert cfg.max_tokens == 9 and cfg.roles == {"monitor": {"timeout_s": 2.5}} and cfg.faults == {"http_429": 0.2}
    assert apply_overrides({"a": {"b": 1}}, ["a.c=[1, 2]"]) == {"a": {"b": 1, "c": [1, 2]}}
    with pytest.raises(ConfigError, match="KEY=VALUE"):
        apply_overrides({}, ["nonsense"])
    assert load_vlm_config({"api_key": "secret"}).public()["api_key"] == "***"


# -- the request on the wire --------------------------------------------------------------------
def test_messages_images_schema_and_no_private_fields_by_default(server):
    img = np.zeros((128, 128, 3), dtype=np.uint8)
    img[:64] = (255, 0, 0)                                     # top half red: must arrive upright
    brain = brain_for(server, "image_size=64", "image_detail=low", "max_tokens=321")
    reply = brain.respond(req(images={"agentview": img, "wrist": img}))
    body = server.bodies[-1]
    sysm, user = body["messages"]
    assert sysm == {"role": "system", "content": "You are the Verifier of a robot."}
    parts = user["content"]
    assert parts[0] == {"type": "text", "text": "Is it done?"}
    assert [p["text"] for p in parts if p["type"] == "text"][1:] == ["Image 'agentview':", "Image 'wrist':"]
    urls = [p["image_url"] for p in parts if p["type"] == "image_url"]
    assert len(urls) == 2 and all(u["detail"] == "low" and u["url"].startswith("data:image/png;base64,") for u in urls)
    dec = decode_data_url(urls[0]["url"])
    assert dec.shape == (64, 64, 3) and tuple(dec[5, 5]) == (255, 0, 0) and tuple(dec[60, 5]) == (0, 0, 0)
    assert body["response_format"]["type"] == "json_schema"
    assert body["response_format"]["json_schema"]["schema"] == VERIFIER
    assert body["max_tokens"] == 321 and body["model"] == "motormind-oracle" and body["temperature"] == 0.0
    assert "motormind" not in body                            # only sent to MotorMind's own server
    assert json.loads(reply.text) == VERDICT                  # json_schema: the bare object comes back
    assert reply.meta["images_sent"] == 2 and reply.meta["server"]["images_received"] == 2
    assert reply.meta["structured_output"] == "json_schema" and reply.meta["attempts"] == 1


def test_context_and_per_role_overrides(server):
    brain = brain_for(server, "send_context=true", "roles.verifier.max_tokens=50", "max_tokens_param=max_completion_tokens",
                      "structured_output=json_object", "extra_body.top_k=5")
    brain.respond(req(context={"subgoal_id": "s9", "state": {"eef_pos_mm": [np.float32(1.5), 2, 3]}}))
    body = server.bodies[-1]
    assert body["motormind"]["role"] == "verifier" and body["motormind"]["context"]["subgoal_id"] == "s9"
    assert body["motormind"]["context"]["state"]["eef_pos_mm"] == [1.5, 2, 3]
    assert body["max_completion_tokens"] == 50 and "max_tokens" not in body
    assert body["response_format"] == {"type": "json_object"} and body["top_k"] == 5


def test_text_answers_are_extracted_and_thinking_stripped():
    think = "<think>the plate {is} near</think>\n" + json.dumps(VERDICT)
    with BrainServer(ScriptedBrain({"verifier": [VERDICT, think]}), text_style="fenced") as srv:
        brain = brain_for(srv, "structured_output=none")
        r1 = brain.respond(req())
        assert "response_format" not in srv.log[-1] and r1.text.startswith("Here is my answer.\n```json")
        r2 = brain.respond(req())
        assert "<think>" not in r2.text
        rec = Recorder(None)
        seen = []
        rec.listeners.append(seen.append)
        v = Verifier(brain, rec).verify({"subgoal_id": "s1"}, {})   # the role extracts the fenced JSON
        assert v.achieved and [e["ok"] for e in seen if e["kind"] == "vlm_call"] == [True]


def test_tokens_latency_and_cost(server):
    brain = brain_for(server, "prices.input_per_mtok=2.5", "prices.output_per_mtok=10")
    r = brain.respond(req())
    assert r.input_tokens > 0 and r.output_tokens > 0 and r.latency_s > 0
    assert r.meta["cost_usd"] == pytest.approx(r.input_tokens * 2.5e-6 + r.output_tokens * 1e-5)
    assert brain.totals["calls"] == 1 and brain.totals["cost_usd"] == pytest.approx(r.meta["cost_usd"])
    assert r.brain == "openai:motormind-oracle" and r.meta["request_id"].startswith("chatcmpl-mm")


# -- retries ------------------------------------------------------------------------------------
def test_retries_with_backoff_are_visible():
    events, sleeps = [], []
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}),
                     faults={"http_429": 1.0, "limit": 1, "retry_after_s": 0.25}) as srv:
        brain = brain_for(srv, "backoff_s=0.01", on_event=lambda k, **d: events.append((k, d)), sleep=sleeps.append)
        r = brain.respond(req())
    assert json.loads(r.text) == VERDICT and r.meta["attempts"] == 2
    (retry,) = r.meta["retries"]
    assert retry["error"] == "http_429" and retry["status"] == 429 and retry["server_fault"] == "http_429"
    assert retry["backoff_s"] == 0.25 and sleeps == [0.25]          # Retry-After honoured
    assert events[0][0] == "vlm_retry" and events[0][1]["role"] == "verifier"
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), faults={"http_500": 1.0, "limit": 3}) as srv:
        sleeps.clear()
        r = brain_for(srv, "backoff_s=0.1", "backoff_max_s=0.3", sleep=sleeps.append).respond(req())
    assert sleeps == [0.1, 0.2, 0.3] and r.meta["attempts"] == 4       # exponential, capped


def test_timeouts_are_retried_and_exhaustion_names_every_attempt():
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), faults={"slow": 1.0, "slow_s": 2.0, "limit": 1}) as srv:
        r = brain_for(srv, "timeout_s=0.3", "backoff_s=0").respond(req())
    assert r.meta["retries"][0]["error"] == "timeout" and json.loads(r.text) == VERDICT
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), faults={"http_500": 1.0}) as srv:
        brain = brain_for(srv, "retries=2", "backoff_s=0")
        with pytest.raises(VLMError, match=r"3 attempt\(s\) failed .*\[2\] http_500 \(server fault http_500\)"):
            brain.respond(req())
        assert brain.totals["failures"] == 1 and brain.totals["attempts"] == 3
        # the role records the failure and fails safe
        rec = Recorder(None)
        seen = []
        rec.listeners.append(seen.append)
        v = Verifier(brain, rec).verify({"subgoal_id": "s1"}, {})
        assert not v.achieved and v.failed_safe and "brain call failed: VLMError" in v.evidence
        assert [e["kind"] for e in seen] == ["vlm_call", "role_failed"]


def test_auth_errors_are_not_retried():
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), api_key="right") as srv:
        brain = brain_for(srv, "api_key=wrong", "backoff_s=0")
        with pytest.raises(VLMError, match="HTTP 401"):
            brain.respond(req())
        assert len(srv.log) == 0 and brain.totals["attempts"] == 1
        assert json.loads(brain_for(srv, "api_key=right").respond(req()).text) == VERDICT


def test_structured_output_falls_back_when_the_server_refuses_it():
    class NoSchemaServer(BrainServer):
        def handle_chat(self, body):
            if "response_format" in body:
                return 400, {"error": {"message": "response_format json_schema is not supported", "type": "x"}}, {}
            return super().handle_chat(body)
    with NoSchemaServer(ScriptedBrain({"verifier": [VERDICT]})) as srv:
        brain = brain_for(srv)
        r = brain.respond(req())
        assert r.meta["structured_output"] == "none" and "structured output off" in r.meta["notes"][0]
        assert r.text.startswith("Here is my answer.")          # JSON extracted from text from now on
        assert brain.respond(req()).meta["attempts"] == 1


# -- the repair round-trip through the client ---------------------------------------------------
def test_repair_request_travels_as_chat_history():
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), faults={"missing_field": 1.0, "limit": 1},
                     keep_bodies=5) as srv:
        brain = brain_for(srv)
        rec = Recorder(None)
        seen = []
        rec.listeners.append(seen.append)
        v = Verifier(brain, rec).verify({"subgoal_id": "s1"}, {})
        assert v.achieved
        first, second = srv.bodies
    assert len(first["messages"]) == 2 and len(second["messages"]) == 4
    assert second["messages"][2]["role"] == "assistant" and '"evidence"' in second["messages"][2]["content"]
    assert "$.achieved: missing (required)" in second["messages"][3]["content"]
    assert [e["kind"] for e in seen] == ["vlm_call", "repair_request", "vlm_call"]
    assert seen[0]["meta"]["server_fault"] == "missing_field" and not seen[0]["ok"] and seen[2]["ok"]


def test_image_data_url_jpeg_and_resize():
    img = (np.arange(100 * 50 * 3) % 255).astype(np.uint8).reshape(100, 50, 3)
    url = image_data_url(img, 40, "jpeg")
    assert url.startswith("data:image/jpeg;base64,")
    assert decode_data_url(url).shape == (40, 20, 3)
    assert len(base64.b64decode(url.split(",", 1)[1])) > 100
