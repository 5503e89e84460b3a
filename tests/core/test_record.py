"""The episode record keeps every event: a value JSON cannot hold is written as a bounded
description of itself, and the events after it are written too."""
import json

from motormind.messages import EventKind
from motormind.record import Recorder
from motormind.vlm_calls import count_vlm, new_vlm_totals, vlm_totals, vlm_totals_of


def test_an_unwritable_value_is_described_not_lost(tmp_path):
    rec = Recorder(tmp_path)
    deep: list = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    rec("operator_action", action="jog", ok=False, args={"command": deep})
    rec("batch", batch={"commands": [{"op": "move", "distance_mm": 10 ** 5000}]}, source="operator")
    rec("report", status="rejected", nan=float("nan"))
    rec.close()
    lines = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines()]
    assert [e["kind"] for e in lines] == ["operator_action", "batch", "report"]
    assert lines[0]["action"] == "jog" and lines[0]["args"]["unwritable"] == "RecursionError"
    assert lines[1]["batch"]["unwritable"] == "ValueError" and "5001 digits" in lines[1]["batch"]["repr"]
    assert lines[2]["nan"] == "nan" and rec.counts == {"operator_action": 1, "batch": 1, "report": 1}


def test_vlm_calls_are_totalled_once_live_from_a_file_and_per_episode_alike(tmp_path):
    rec = Recorder(tmp_path)
    live = vlm_totals(rec)
    rec(EventKind.VLM_CALL, role="planner", ok=True, latency_s=1.25, input_tokens=10, output_tokens=5,
        meta={"cost_usd": 0.5})
    rec(EventKind.VLM_CALL, role="executor", ok=False, latency_s=0.5, error="brain call failed: x", ahead="speculate:b2")
    rec("repair_request", role="executor")
    rec("report", batch_id="b1")
    rec.close()
    assert (live["calls"], live["ok"], live["latency_s"], live["input_tokens"], live["cost_usd"]) == (2, 1, 1.75, 10, 0.5)
    assert live["latency_by_role"] == {"planner": 1.25, "executor": 0.5} and live["repairs"] == 1
    assert live["transport_failures"] == 1 and live["by_tag"]["speculate:b2"]["calls"] == 1
    assert vlm_totals_of(tmp_path / "events.jsonl") == live                   # a finished record: the same
    assert vlm_totals_of(tmp_path / "missing.jsonl") == new_vlm_totals()
    one = new_vlm_totals()
    count_vlm(one, {"kind": "vlm_call", "latency_s": 2.0})                    # as read back from JSON
    assert one["calls"] == 1 and "by_tag" not in one
