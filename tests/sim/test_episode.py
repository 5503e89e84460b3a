"""One full oracle episode on a LIBERO-PRO task, through the CLI, as the README's demo runs it."""
import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.sim


def test_oracle_episode_succeeds_and_writes_its_record(tmp_path):
    out = tmp_path / "run"
    p = subprocess.run([sys.executable, "-m", "motormind.cli", "run", "--suite", "libero_spatial", "--task", "0",
                        "--init-state", "0", "--brain", "oracle", "--out", str(out)],
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr[-3000:]
    assert "SUCCESS" in p.stdout and "privileged" in p.stdout and str(out) in p.stdout
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] and summary["brain"] == "oracle" and summary["privileged"] is True
    assert summary["steps"] <= summary["step_budget"] == 220
    assert summary["simulator"]["mujoco"] == "2.3.7"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    kinds = {e["kind"] for e in events}
    assert {"episode_start", "plan", "batch", "report", "verdict", "vlm_call", "episode_end"} <= kinds
    calls = [e for e in events if e["kind"] == "vlm_call"]
    assert all(e["brain"] == "oracle" and e["privileged"] for e in calls)
    assert all('"source": "oracle"' in e["response"] for e in calls)
    assert {e["role"] for e in calls} >= {"planner", "executor", "verifier", "memory"}
    assert (out / "contact_sheet.png").stat().st_size > 1000
    # progress was shown as it went
    assert "verdict: achieved" in p.stderr
