"""``motormind steps``: where an episode's control steps go, by category, from its record."""
import json

import pytest

from motormind.cli import main
from motormind.evaluate import steps as S


def _res(op, n, status="done", **kw):
    cmd = {"op": op, **kw.pop("command", {})}
    return {"command": cmd, "status": status, "steps": n, "commanded": kw.get("commanded", {}),
            "achieved": kw.get("achieved", {})}


def _record(d, reports, total, suite="libero_spatial", success=True):
    d.mkdir(parents=True)
    ev = [{"kind": "episode_start", "suite": suite, "task": 0, "init_state": 1, "profile": "libero_panda",
           "step_budget": 220}]
    ev += [{"kind": "report", "batch_id": f"b{i + 1}", "status": "done", "results": r} for i, r in enumerate(reports)]
    ev.append({"kind": "episode_end", "success": success, "outcome": "success" if success else "failure",
               "steps": total})
    (d / "events.jsonl").write_text("\n".join(json.dumps(e) for e in ev) + "\n")
    return d


B1 = [_res("gripper", 12, command={"width": 0.5}),
      _res("move", 20, commanded={"translation_mm": [0.0, 0.0, -150.0]}),          # 12 travel at 12.5 mm/step
      _res("rotate", 9, commanded={"rotation_deg": 15.0}),                          # 5 travel at 3 deg/step
      _res("move", 8, status="blocked", commanded={"translation_mm": [0, 0, -60.0]},
           achieved={"translation_mm": [0.0, 0.0, -30.0]}),                         # 3 travel (30 mm), 5 stopped
      _res("done", 0)]
B2 = [_res("wait", 10, command={"seconds": 0.5}), _res("gripper", 8, command={"action": "close"})]


def test_an_episodes_steps_by_category(tmp_path):
    ep = S.episode_steps(_record(tmp_path / "ep", [B1, B2], total=70))
    assert ep["by"] == {"travel": 12 + 5 + 3, "settle": 8 + 4, "stopped": 5, "gripper": 20, "wait": 10,
                        "other": 70 - 67}
    assert [b["steps"] for b in ep["batches"]] == [49, 18]
    assert ep["batches"][0]["by"]["gripper"] == 12 and ep["batches"][1]["by"]["wait"] == 10
    assert sum(ep["by"].values()) == ep["steps"] == 70


def test_the_command_line_reads_an_eval_out_and_prints_per_batch(tmp_path, capsys):
    _record(tmp_path / "out" / "episodes" / "a", [B1], total=49)
    _record(tmp_path / "out" / "episodes" / "b", [B2], total=18, success=False)
    assert main(["steps", str(tmp_path / "out"), "--batches"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("2 episodes, 1 successes, median 33.5 steps an episode; 67 steps in all:")
    assert "| all | 67 | 20 | 12 | 5 | 20 | 10 | 0 |" in out
    assert "b1 (done) | 49 |" in out
    assert main(["steps", str(tmp_path / "out"), "--json"]) == 0
    js = json.loads(capsys.readouterr().out)
    assert js["summary"]["by"]["gripper"] == 20 and js["summary"]["successes"] == 1


def test_a_path_that_holds_no_record_is_refused_naming_it(tmp_path, capsys):
    assert main(["steps", str(tmp_path)]) == 2
    assert str(tmp_path) in capsys.readouterr().err


def test_report_md_has_the_section(tmp_path):
    from motormind.evaluate.report import markdown
    d = _record(tmp_path / "ep", [B1, B2], total=70)
    md = markdown([{"key": "k", "suite": "libero_spatial", "task": 0, "init_state": 1, "seed": 0,
                    "ablation": "full", "noise": {}, "brain": "oracle", "success": True, "outcome": "success",
                    "steps": 70, "step_budget": 220, "vlm_s": 1.0, "motion_s": 4.0, "overhead_s": 1.0,
                    "episode_s": 6.0, "vlm_calls": 10, "vlm_tokens": {}, "vlm_cost_usd": None,
                    "verifier_rejections": 0, "controller_rejections": 0, "instruction": "do it",
                    "run_dir": str(d)}])
    assert "## Where the steps go" in md and "| all | 70 | 20 | 12 | 5 | 20 | 10 | 3 |" in md


@pytest.mark.parametrize("status", ["cancelled", "blocked"])
def test_a_move_that_did_not_end_done_counts_its_extra_steps_as_stopped(status):
    r = _res("move", 10, status=status, commanded={"translation_mm": [0, 0, 100.0]},
             achieved={"translation_mm": [0, 0, 25.0]})
    assert S.command_steps(r, 12.5, 3.0) == {**dict.fromkeys(S.CATEGORIES, 0), "travel": 2, "stopped": 8}
