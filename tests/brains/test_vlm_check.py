"""``motormind vlm check`` against serve-brain: it reports each quirk it is shown, and a verdict."""
import json

import pytest
import yaml

from motormind.diagnose.endpoint_check import check_endpoint
from motormind.cli import main
from motormind.errors import ConfigError
from motormind.serve.quirks import QUIRKS
from motormind.serve.reach import ReachBrain
from motormind.serve.server import BrainServer


def config(srv, **kw):
    return {"base_url": srv.url, "model": "motormind", "api_key": "local", "api_key_env": None,
            "send_context": True, "timeout_s": 10.0, "retries": 1, "backoff_s": 0.01, **kw}


def check(quirks=None, family="generic", **cfg):
    srv = BrainServer(ReachBrain(), quirks=quirks, family=family).start()
    try:
        return check_endpoint(config(srv, **cfg)), srv
    finally:
        srv.close()


def finding(rep, name):
    return next((f for f in rep["findings"] if f["check"] == name), None)


def test_a_well_behaved_endpoint_is_ready():
    rep, srv = check()
    assert rep["verdict"] == "ready" and rep["changes"] == {} and rep["quirks"] == {}
    for name in ("models", "answers", "images", "image_sizes", "role:planner", "role:executor", "role:verifier",
                 "role:monitor", "role:memory", "thinking", "coordinates", "latency"):
        assert finding(rep, name)["status"] == "ok", finding(rep, name)
    assert "85 prompt tokens an image" in finding(rep, "images")["detail"]
    roles = {e["role"] for e in srv.log}
    assert {"planner", "executor", "verifier", "monitor", "memory", "probe", "point"} <= roles
    assert rep["calls"] == len(srv.log) <= 16


EXPECT = {   # quirk -> (verdict, the finding that names it, config change)
    "images_refused": ("unfit", "images", {}),
    "images_ignored": ("unfit", "images", {}),
    "schema_ignored": ("changes", "quirk:schema_ignored", {"structured_output": "none"}),
    "whitespace_flood": ("changes", "quirk:whitespace_flood", {"structured_output": "none"}),
    "truncated": ("changes", "quirk:truncated", {"max_tokens": 2048}),
    "answer_in_reasoning": ("ready", "quirk:answer_in_reasoning", {}),
    "think_block": ("ready", "quirk:think_block", {}),
    "thinking_off_under_json": ("ready", "thinking", {}),
}


@pytest.mark.parametrize("quirk", QUIRKS)
def test_each_quirk_is_reported(quirk):
    assert set(EXPECT) == set(QUIRKS)
    verdict, name, change = EXPECT[quirk]
    rep, srv = check({quirk: 1.0, "limit": 50})
    f = finding(rep, name)
    assert rep["verdict"] == verdict, rep
    assert f is not None and f["status"] != "ok"
    for k, v in change.items():
        assert rep["changes"][k] == v
    if verdict == "unfit":
        assert quirk in f["detail"] and "blind" in f["detail"] and f["status"] == "fail"
    elif quirk == "thinking_off_under_json":
        assert rep["quirks"] == {"thinking_off_under_json": 1, "think_block": 1}
    else:
        assert rep["quirks"].get(quirk, 0) >= 1
    if quirk == "whitespace_flood":
        assert "disable_any_whitespace" in f["server"]


def test_images_refused_stops_the_check_at_the_first_image():
    rep, srv = check({"images_refused": 1.0})
    assert [e["role"] for e in srv.log] == ["probe", "probe"]        # the text question, then one refusal
    assert finding(rep, "role:planner") is None


@pytest.mark.parametrize("family,rule,coords", [("qwen2.5-vl", "qwen2.5-vl", "pixels"), ("qwen3-vl", "qwen3-vl", "0..1000"),
                                                ("gemma3", "gemma3", "0..1000")])
def test_the_servers_resize_rule_and_coordinate_convention_are_measured(family, rule, coords):
    rep, srv = check(family=family)
    assert rep["changes"].get("image_rules") == rule
    assert coords in finding(rep, "coordinates")["detail"]
    rep2, _ = check(family=family, image_rules=rule)                  # configured right: no change asked
    assert "image_rules" not in rep2["changes"]


def test_a_slow_monitor_timeout_and_a_wrong_model_name_are_named():
    rep, srv = check(model="qwen-vl", roles={"monitor": {"timeout_s": 0.0001}})
    assert rep["changes"]["model"] == "motormind"
    assert rep["changes"]["roles.monitor.timeout_s"] >= 1.0


def test_a_config_that_serves_itself_has_nothing_to_check_and_says_why():
    from motormind.diagnose.endpoint_check import NotChecked
    with pytest.raises(NotChecked, match="nothing to check: serve: oracle starts its own serve-brain"):
        check_endpoint("local-oracle")


def test_the_command_line(tmp_path, capsys):
    srv = BrainServer(ReachBrain(), quirks={"truncated": 1.0, "limit": 50}).start()
    try:
        p = tmp_path / "vlm.yaml"
        p.write_text(yaml.safe_dump(config(srv)))
        code = main(["vlm", "check", "--vlm", str(p), "--json", str(tmp_path / "rep.json")])
    finally:
        srv.close()
    out = capsys.readouterr().out
    assert code == 1 and "verdict: USABLE" in out and "max_tokens: 2048" in out and "WARN quirk:truncated" in out
    assert json.loads((tmp_path / "rep.json").read_text())["changes"] == {"max_tokens": 2048}


def test_the_check_against_a_standalone_serve_brain_process(tmp_path):
    """The user's flow: serve-brain in its own process with a quirk and a family, then the check."""
    import subprocess
    import sys
    p = subprocess.Popen([sys.executable, "-m", "motormind.cli", "serve-brain", "--backend", "reach", "--port", "0",
                          "--quirk", "answer_in_reasoning=1", "--family", "qwen3-vl", "--quiet"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        url = p.stdout.readline().strip()
        cfg = tmp_path / "vlm.yaml"
        cfg.write_text(yaml.safe_dump({"base_url": url, "model": "motormind-reach", "api_key": "local",
                                       "api_key_env": None, "send_context": True, "image_rules": "qwen3-vl",
                                       "timeout_s": 20.0, "retries": 1}))
        r = subprocess.run([sys.executable, "-m", "motormind.cli", "vlm", "check", "--vlm", str(cfg)],
                           capture_output=True, text=True, timeout=120)
    finally:
        p.terminate()
        _, err = p.communicate(timeout=10)
    assert "emulating quirks" in err
    assert r.returncode == 0, r.stdout + r.stderr
    assert "verdict: READY" in r.stdout and "WARN quirk:answer_in_reasoning" in r.stdout
    assert "196 tokens at 448 px" in r.stdout            # Qwen3-VL: 14 x 14 blocks of 32 px


def test_roles_the_endpoint_refuses_make_it_unfit_and_every_count_agrees():
    """remote-oracle with send_scene=false: the standalone oracle answers the planner, executor and
    verifier HTTP 400 (no scene). That is no usable endpoint, and the header and the latency line
    count the same calls (issue 36: USABLE, "6 calls" over a latency line of "9 calls")."""
    import re

    from motormind.diagnose.endpoint_check import render_text
    from motormind.serve.server import SnapshotOracle
    srv = BrainServer(SnapshotOracle()).start()
    try:
        rep = check_endpoint(config(srv, model="motormind", send_scene=False, retries=0))
    finally:
        srv.close()
    assert rep["verdict"] == "unfit", render_text(rep)
    for role in ("planner", "executor", "verifier"):
        f = finding(rep, f"role:{role}")
        assert f["status"] == "fail" and "HTTP 400" in f["detail"], f
    assert finding(rep, "role:memory")["status"] == "ok"
    assert finding(rep, "thinking") is None                    # nothing answered to compare
    text = render_text(rep)
    header = re.search(r"\((\d+) calls?(?:, (\d+) of them failed)?\)", text.splitlines()[0])
    latency = re.search(r"latency: (\d+) calls?(?:, (\d+) of them failed)?", text)
    assert header and latency and header.groups() == latency.groups(), text
    assert int(header.group(1)) == rep["calls"] == len(srv.log) and int(header.group(2)) == rep["failed_calls"] >= 3
