"""The episode record keeps every event: a value JSON cannot hold is written as a bounded
description of itself, and the events after it are written too."""
import json

from motormind.record import Recorder


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
