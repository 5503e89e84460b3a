"""serve-brain: the OpenAI-compatible surface, role recovery, replay, the standalone oracle's scene
snapshots, concurrency, the CLI, and ONE LIBERO-PRO episode to success through the real openai
client against the in-process oracle server."""
import json
import socket
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
from motormind.brains.scripted import ScriptedBrain
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeConfig, EpisodeRunner
from motormind.schemas import ROLE_SCHEMAS
from motormind.serve.reach import ReachBrain
from motormind.serve.server import BrainServer, ReplayBrain, SnapshotOracle

VERDICT = {"schema_version": 1, "achieved": False, "evidence": "not yet"}


def post(url, body, key=None):
    rq = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json",
                                         **({"Authorization": f"Bearer {key}"} if key else {})})
    try:
        with urllib.request.urlopen(rq, timeout=10) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def chat(role="Verifier", **kw):
    return {"model": "m", "messages": [{"role": "system", "content": f"You are the {role} of a robot."},
                                       {"role": "user", "content": "well?"}], **kw}


def test_openai_surface_and_response_format():
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), model="mm-test") as srv:
        with urllib.request.urlopen(srv.url + "/models") as r:
            models = json.loads(r.read())
        assert models["object"] == "list" and models["data"][0]["id"] == "mm-test"
        schema = {"type": "json_schema", "json_schema": {"name": "v", "schema": ROLE_SCHEMAS["verifier"]}}
        code, out, _ = post(srv.url, chat(response_format=schema))
        assert code == 200 and out["object"] == "chat.completion" and out["model"] == "mm-test"
        assert json.loads(out["choices"][0]["message"]["content"]) == VERDICT      # bare JSON
        assert out["choices"][0]["finish_reason"] == "stop" and out["usage"]["total_tokens"] > 0
        assert srv.log[-1]["role"] == "verifier" and srv.log[-1]["schema_ok"] is True
        code, out, _ = post(srv.url, chat(response_format={"type": "json_object"}))
        assert json.loads(out["choices"][0]["message"]["content"]) == VERDICT
        code, out, _ = post(srv.url, chat())                        # no response_format: a chatty answer
        text = out["choices"][0]["message"]["content"]
        assert text.startswith("Here is my answer.") and "```json" in text
        assert post(srv.url, chat(stream=True))[0] == 400
        assert post(srv.url, {"messages": "nope"})[0] == 400
        code, out, _ = post(srv.url + "/../nowhere", chat())
        assert code == 404
        # the role comes from the system prompt when the request has no motormind field
        code, out, _ = post(srv.url, chat(role="Planner"))
        assert code == 500 and "no answer for role 'planner'" in out["error"]["message"]


def test_answers_from_the_reach_oracle_over_the_real_client_and_concurrent_roles(tmp_path):
    """Monitor and Memory answers are slow here (0.3 s, under the timeout): the Executor's and
    Verifier's requests are served meanwhile, on their own connections."""
    rb = ReachBrain()
    rec = Recorder(tmp_path)
    with BrainServer(rb, faults={"slow": 1.0, "slow_s": 0.3, "roles": ["monitor", "memory"]}, on_event=rec) as srv:
        cfg = load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "send_context=true",
                                               "privileged=true"])
        brain = OpenAIBrain(cfg, on_event=rec)
        robot = FakeRobot(realtime=True)     # motion takes its time: the Monitor sees it under way
        res = EpisodeRunner(robot, brain, "reach", rec, EpisodeConfig(max_batches=10),
                            success_fn=lambda: rb.success(robot)).run()
        brain.close()
        log = list(srv.log)
    rec.close()
    assert res.success and res.privileged and res.brain == "openai:motormind-oracle"
    assert {e["role"] for e in log} >= {"planner", "executor", "verifier", "monitor"}
    side = [e for e in log if e["role"] in ("monitor", "memory")]
    main = [e for e in log if e["role"] in ("planner", "executor", "verifier")]
    overlap = [(m, s) for m in main for s in side if m["t_start"] < s["t_end"] and s["t_start"] < m["t_end"]]
    assert overlap, "no Executor/Verifier request was served while a Monitor/Memory request was in flight"
    assert all(e["status"] == 200 for e in log)


def test_replay_of_a_recorded_episode(tmp_path):
    rb = ReachBrain()
    first = tmp_path / "first"
    rec = Recorder(first)
    with BrainServer(rb) as srv:
        brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "send_context=true"]))
        robot = FakeRobot()
        r1 = EpisodeRunner(robot, brain, "reach", rec, EpisodeConfig(monitor=False, memory=False),
                           success_fn=lambda: rb.success(robot)).run()
        brain.close()
    rec.close()
    replay = ReplayBrain(first)
    assert replay.privileged                                # the recorded answers were privileged
    rec2 = Recorder(tmp_path / "second")
    with BrainServer(replay) as srv:
        brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null"]))
        robot2 = FakeRobot()
        r2 = EpisodeRunner(robot2, brain, "reach", rec2, EpisodeConfig(monitor=False, memory=False),
                           success_fn=lambda: rb.success(robot2)).run()
        brain.close()
    rec2.close()
    assert r1.success and r2.success and r2.batches == r1.batches and r2.vlm_calls == r1.vlm_calls
    assert replay.matched == r1.vlm_calls and replay.fallback == 0      # every prompt matched by hash
    assert list(robot2.pos) == list(robot.pos)


def _box_body(lo, hi, kind="object"):
    """A body of Scene.world() made of one axis-aligned box (its origin at its bottom centre)."""
    lo, hi = [float(v) for v in lo], [float(v) for v in hi]
    pos = [(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, lo[2]]
    half = [(h - l) / 2 for l, h in zip(lo, hi)]
    centre = [(l + h) / 2 for l, h in zip(lo, hi)]
    eye = [1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]
    return {"kind": kind, "pos": pos, "rot": eye, "boxes": [[lo, hi]], "obbs": [centre + half + eye], "lo": lo,
            "hi": hi, "local_lo": [lo[i] - pos[i] for i in range(3)], "local_hi": [hi[i] - pos[i] for i in range(3)]}


def test_standalone_oracle_answers_from_the_scene_snapshot():
    world = {"bodies": {"bowl_1": _box_body([0.5, 0.0, 0.0], [0.56, 0.06, 0.05]),
                        "plate_1": _box_body([0.4, 0.2, 0.0], [0.5, 0.3, 0.02])},
             "static": [[[-0.5, -0.6, -0.05], [1.0, 0.6, 0.0]]],
             "static_obbs": [[0.25, 0.0, -0.025, 0.75, 0.6, 0.025, 1.0, 0, 0, 0, 1.0, 0, 0, 0, 1.0]],
             "ground_z": None, "articulations": [], "predicates": {}, "regions": {}, "finger_contacts": {}}
    snap = {"goal_state": [["on", "bowl_1", "plate_1"]], "goal_status": [[["on", "bowl_1", "plate_1"], False]],
            "objects": {"bowl_1": {"kind": "object", "aabb_lo_m": [0.5, 0.0, 0.0], "aabb_hi_m": [0.56, 0.06, 0.05]},
                        "plate_1": {"kind": "object", "aabb_lo_m": [0.4, 0.2, 0.0], "aabb_hi_m": [0.5, 0.3, 0.02]}},
            "regions": {}, "world": world}
    state = json.dumps({"eef_pos_mm": [450.0, 0.0, 300.0], "gripper_width_mm": 78.0, "gripper_fraction": 1.0,
                        "eef_yaw_deg": 90.0, "eef_quat_xyzw": [-0.7071, -0.7071, 0.0, 0.0]})
    oracle = SnapshotOracle("libero_panda")
    with BrainServer(oracle) as srv:
        brain = OpenAIBrain(load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null", "send_context=true"]))
        from motormind.roles.planner import Planner
        rec = Recorder(None)
        plan, res = Planner(brain, rec).plan({"state": state}, {})
        assert plan is None and "send_scene" in res.error               # no snapshot: a clear refusal
        brain.cfg.send_scene = True

        class Scene:
            def snapshot(self):
                return snap
        brain.scene_fn = Scene
        plan, res = Planner(brain, rec).plan({"state": state}, {})
        brain.close()
    assert [s.id for s in plan] == ["p1s0gr", "p1s1ca", "p1s2pl"] and "bowl_1" in plan[0].description
    assert res.privileged


@pytest.mark.timeout(60)
def test_serve_brain_cli_starts_and_answers(tmp_path):
    log = tmp_path / "requests.jsonl"
    p = subprocess.Popen([sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "reach", "--port", "0",
                          "--fault", "http_429=1.0", "--quiet", "--log", str(log)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        with urllib.request.urlopen(url + "/models") as r:
            assert json.loads(r.read())["data"][0]["id"] == "motormind-reach"
        code, out, headers = post(url, chat())
        assert code == 429 and headers.get("x-motormind-fault") == "http_429"
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    assert "injecting faults" in err
    (entry,) = [json.loads(line) for line in log.read_text().splitlines()]
    assert entry["role"] == "verifier" and entry["fault"] == "http_429" and entry["status"] == 429


def _raw(srv, data: bytes) -> bytes:
    """``data`` on a fresh connection; what the server answered before it closed (or 5 s passed)."""
    c = socket.create_connection((srv.host, srv.port), timeout=5)
    c.sendall(data)
    out = b""
    try:
        while not out.endswith(b"}") or b"\r\n\r\n" not in out:
            b = c.recv(65536)
            if not b:
                break
            out += b
    finally:
        c.close()
    return out


@pytest.mark.parametrize("body, error", [
    (b"[" * 3000 + b"]" * 3000, "body: nested deeper than 32 levels"),
    (b'{"model": "m", "messages": [], "messages": [{"role": "user", "content": "hi"}]}',
     "body: duplicate key 'messages'"),
    (b'{"model": "m", "max_tokens": 1e999}', "max_tokens: non-finite number 1e999"),
    (b'[1, 2]', "body: must be a JSON object, got list"),
])
def test_a_hostile_request_body_is_a_400_naming_the_path(body, error):
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]})) as srv:
        rq = urllib.request.Request(srv.url + "/chat/completions", data=body,
                                    headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(rq, timeout=10)
        out = json.loads(e.value.read())
        assert e.value.code == 400 and error in out["error"]["message"], out
        assert out["error"]["type"] == "invalid_request_error" and len(srv.log) == 0   # never reached the brain
        assert post(srv.url, chat())[0] == 200                                        # and it goes on


def test_framing_host_and_origin_at_the_serve_brain_boundary():
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]})) as srv:
        host = f"Host: 127.0.0.1:{srv.port}\r\n".encode()
        for length in (b"-1", b"abc"):
            resp = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\n" + host + b"Content-Length: " + length
                        + b"\r\n\r\n{}")
            assert resp.startswith(b"HTTP/1.1 400 "), resp
        body = json.dumps(chat()).encode()
        chunked = b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in (body[:10], body[10:])) + b"0\r\n\r\n"
        resp = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\n" + host + b"Transfer-Encoding: chunked\r\n"
                    b"Connection: close\r\n\r\n" + chunked)
        assert resp.startswith(b"HTTP/1.1 200 ") and b'"object": "chat.completion"' in resp
        resp = _raw(srv, b"GET /v1/models HTTP/1.1\r\nHost: rebound.example.com\r\n\r\n")
        assert resp.startswith(b"HTTP/1.1 400 ") and b"host: 'rebound.example.com' is not a name" in resp
        resp = _raw(srv, b"POST /v1/chat/completions HTTP/1.1\r\n" + host + b"Origin: http://evil.example.com\r\n"
                    b"Content-Length: %d\r\n\r\n" % len(body) + body)
        assert resp.startswith(b"HTTP/1.1 403 ") and b"origin: 'http://evil.example.com'" in resp
        assert [e["status"] for e in srv.log] == [200]            # only the chunked request reached the brain


def test_a_hostile_backend_answer_is_logged_against_the_schema_not_raised():
    deep = "[" * 3000 + "]" * 3000
    with BrainServer(ScriptedBrain({"verifier": [deep]})) as srv:
        schema = {"type": "json_schema", "json_schema": {"name": "v", "schema": ROLE_SCHEMAS["verifier"]}}
        code, out, _ = post(srv.url, chat(response_format=schema))
        assert code == 200 and out["choices"][0]["message"]["content"] == deep
        assert srv.log[-1]["schema_ok"] is False and "nested deeper than 32" in srv.log[-1]["schema_error"]


def test_a_port_in_use_fails_at_construction():
    with BrainServer(ScriptedBrain({})) as srv:
        with pytest.raises(OSError):
            BrainServer(ScriptedBrain({}), port=srv.port)


@pytest.mark.sim
def test_libero_episode_to_success_through_the_openai_client(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "motormind.cli", "run", "--suite", "libero_spatial", "--task", "0",
                        "--brain", "openai", "--vlm", "configs/vlm/local-oracle.yaml", "--no-media",
                        "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "SUCCESS" in p.stdout and "privileged" in p.stdout
    s = json.loads((out / "summary.json").read_text())
    assert s["success"] and s["brain"] == "openai:motormind-oracle" and s["privileged"] is True
    assert s["vlm_config"]["serve"] == "oracle" and s["vlm_config"]["base_url"].startswith("http://127.0.0.1:")
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    calls = [e for e in events if e["kind"] == "vlm_call"]
    assert {e["role"] for e in calls} >= {"planner", "executor", "verifier", "memory"}
    for c in calls:                      # every answer came through the client over HTTP, from the oracle
        m = c["meta"]
        assert c["ok"] and c["brain"] == "openai:motormind-oracle" and c["privileged"]
        assert m["request_id"].startswith("chatcmpl-mm") and m["server"]["source"] == "oracle"
        assert m["structured_output"] == "json_schema" and c["prompt_hash"] and c["input_tokens"] > 0
        assert m["server"]["images_received"] == m["images_sent"] == len(c["images"])
    assert any(c["meta"]["images_sent"] == 2 for c in calls if c["role"] == "executor")
    assert s["vlm"]["calls"] == len(calls) and s["vlm"]["input_tokens"] == sum(c["input_tokens"] for c in calls)
    assert s["vlm"]["retries"] == 0 and s["vlm"]["repairs"] == 0 and s["vlm"]["cost_usd"] == 0.0
