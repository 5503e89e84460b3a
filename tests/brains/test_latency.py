"""serve-brain's latency model (awaited, so many calls wait at once; counted at /stats) and the
client's per-endpoint gate (a cap on requests in flight, a 429 that slows every sharer)."""
import json
import statistics
import threading
import time
import urllib.request

import pytest

from motormind.brains.gate import EndpointGate, Gates
from motormind.brains.openai_brain import OpenAIBrain, load_vlm_config
from motormind.brains.scripted import ScriptedBrain
from motormind.errors import ConfigError
from motormind.schemas import ROLE_SCHEMAS
from motormind.serve.latency import Delay, LatencyPlan
from motormind.serve.server import BrainServer
from motormind.brains.base import BrainRequest

VERDICT = {"schema_version": 1, "achieved": False, "evidence": "not yet"}


def chat(role="Verifier"):
    return {"model": "m", "messages": [{"role": "system", "content": f"You are the {role} of a robot."},
                                       {"role": "user", "content": "well?"}]}


def post(url, body):
    rq = urllib.request.Request(url + "/chat/completions", data=json.dumps(body).encode(),
                                headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(rq, timeout=30) as r:
        return r.status, dict(r.headers)


def stats(srv):
    with urllib.request.urlopen(f"http://127.0.0.1:{srv.port}/stats", timeout=5) as r:
        return json.loads(r.read())


def test_latency_plans_from_the_command_line_and_yaml():
    p = LatencyPlan.from_cli(["5", "monitor=1~0.5"], seed=3)
    assert p.default == Delay(5.0) and p.roles["monitor"] == Delay(1.0, 0.5) and p.active
    assert [p.delay("planner") for _ in range(3)] == [5.0, 5.0, 5.0]       # fixed: always the mean
    q = LatencyPlan.from_dict({"mean_s": 2, "spread_s": 1, "roles": {"executor": 4}, "seed": 1})
    draws = [q.delay("verifier") for _ in range(4000)]
    assert statistics.mean(draws) == pytest.approx(2.0, rel=0.05)          # log-normal with that mean ...
    assert statistics.stdev(draws) == pytest.approx(1.0, rel=0.15)         # ... and spread
    assert min(draws) > 0 and q.delay("executor") == 4.0
    again = LatencyPlan.from_dict({"mean_s": 2, "spread_s": 1, "seed": 1})
    assert [again.delay("verifier") for _ in range(5)] == draws[:5]         # a plan reproduces
    assert not LatencyPlan.from_cli([]).active
    for bad, says in ((["soon"], "expected SECONDS"), (["-1"], "mean_s: must be a finite"),
                      (["boss=1"], "unknown role 'boss'")):
        with pytest.raises(ConfigError, match=says):
            LatencyPlan.from_cli(bad)
    with pytest.raises(ConfigError, match="latency.roles.monitor.spread_s"):
        LatencyPlan.from_dict({"roles": {"monitor": {"mean_s": 1, "spread_s": "wide"}}})


def test_the_delay_is_awaited_so_many_calls_are_in_flight_at_once():
    """60 calls held 0.5 s each: more than the server's thread pool (40), all in flight together,
    which a delay slept on a worker thread could not give."""
    n = 60
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), latency={"mean_s": 0.5}) as srv:
        results = []

        def one():
            t0 = time.monotonic()
            code, headers = post(srv.url, chat())
            results.append((code, headers.get("x-motormind-latency-s"), time.monotonic() - t0))
        threads = [threading.Thread(target=one) for _ in range(n)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        st = stats(srv)
        log = list(srv.log)
    assert [c for c, _, _ in results] == [200] * n
    assert all(h == "0.500" for _, h, _ in results) and all(dt >= 0.5 for _, _, dt in results)
    assert st["requests"] == n and st["in_flight"] == 0 and st["peak_in_flight"] == n
    assert st["latency"]["default"] == "0.5 s" and all(e["latency_s"] == 0.5 for e in log)


def test_gate_caps_requests_in_flight_and_a_pause_holds_everyone():
    gate = EndpointGate(limit=2)
    now, peak, lock = [0], [0], threading.Lock()

    def work():
        with gate.slot():
            with lock:
                now[0] += 1
                peak[0] = max(peak[0], now[0])
            time.sleep(0.05)
            with lock:
                now[0] -= 1
    ts = [threading.Thread(target=work) for _ in range(8)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert peak[0] == 2 and gate.peak_in_flight == 2
    gate.slow_down(0.3)
    t0 = time.monotonic()
    with gate.slot():
        waited = time.monotonic() - t0
    assert waited >= 0.25 and gate.pauses == 1
    gates = Gates(3)
    assert gates.get("http://h/v1") is gates.get("http://h/v1/") and gates.get("http://h/v1").limit == 3


def _brain(url, gates):
    cfg = load_vlm_config("local-oracle", [f"base_url={url}", "serve=null", "backoff_s=0", "probe=false"])
    b = OpenAIBrain(cfg)
    b.use_gates(gates)
    return b


def _req():
    return BrainRequest("verifier", "verifier", "You are the Verifier.", "well?", ROLE_SCHEMAS["verifier"])


def test_a_429_slows_every_brain_sharing_the_endpoint():
    """Brain A gets a 429 with Retry-After 1 s: the gate pauses, so brain B, which gets no 429 of
    its own, waits for the rest of the pause too; both answers arrive."""
    faults = {"http_429": 1.0, "limit": 1, "retry_after_s": 1.0}
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]}), faults=faults) as srv:
        gates = Gates(4)
        gate = gates.get(srv.url)
        a, b = _brain(srv.url, gates), _brain(srv.url, gates)
        out = {}
        ta = threading.Thread(target=lambda: out.setdefault("a", a.respond(_req())))
        ta.start()
        end = time.monotonic() + 10
        while gate.pauses == 0 and time.monotonic() < end:
            time.sleep(0.005)
        assert gate.pauses == 1                     # A's 429 paused the endpoint
        left = gate.paused_until - time.monotonic()
        t0 = time.monotonic()
        rb = b.respond(_req())
        waited = time.monotonic() - t0
        ta.join()
        a.close()
        b.close()
    ra = out["a"]
    assert ra.meta["retries"][0]["status"] == 429 and "retries" not in rb.meta
    assert json.loads(ra.text) == VERDICT and json.loads(rb.text) == VERDICT
    assert left > 0.5 and waited >= left - 0.05     # B sent nothing until A's pause was over


def test_the_camera_probe_is_asked_once_per_endpoint_in_a_worker():
    """Two episodes' brains share the worker's gates: the second takes the first's probe (and its
    calibration) instead of asking the endpoint three more calls."""
    import numpy as np
    images = {"agentview": np.zeros((64, 64, 3), np.uint8), "wrist": np.zeros((64, 64, 3), np.uint8)}
    with BrainServer(ScriptedBrain({"verifier": [VERDICT]})) as srv:
        gates = Gates()
        events = []
        cfg = load_vlm_config("local-oracle", [f"base_url={srv.url}", "serve=null"])
        a = OpenAIBrain(cfg, on_event=lambda kind, **d: events.append((kind, d)))
        b = OpenAIBrain(cfg, on_event=lambda kind, **d: events.append((kind, d)))
        a.use_gates(gates)
        b.use_gates(gates)
        first = a.preflight(images)
        asked = srv.stats()["requests"]
        second = b.preflight(images)
        after = srv.stats()["requests"]
        alone = OpenAIBrain(cfg)                       # no gates: it asks for itself
        alone.preflight(images)
        own = srv.stats()["requests"] - after
        for x in (a, b, alone):
            x.close()
    assert first["verdict"] == second["verdict"] == "ok" and asked == own == 3 and after == asked
    assert "shared" not in first and "shared" in second and b.calibration == a.calibration is not None
