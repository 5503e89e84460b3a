"""The evaluation's reports: real HTML tables (by suite, by task, one line per episode with links to
its record), cost where priced, and `motormind compare` with paired differences and intervals."""
import json
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from motormind.evaluate.compare import paired_difference
from motormind.evaluate.publish import write_reports


class Tables(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tables, self.links, self.pre = [], [], 0
        self._cell = None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.tables.append([])
        elif tag == "tr":
            self.tables[-1].append([])
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "a":
            self.links.append(dict(attrs)["href"])
        elif tag == "pre":
            self.pre += 1

    def handle_endtag(self, tag):
        if tag in ("td", "th"):
            self.tables[-1][-1].append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def row(key, suite, task, init, ok, run_dir="", cost=None, brain="oracle"):
    return {"key": key, "suite": suite, "task": task, "init_state": init, "seed": 0, "ablation": "full",
            "noise": {}, "brain": brain, "success": ok, "outcome": "success" if ok else "step_budget",
            "steps": 100, "step_budget": 220, "vlm_s": 1.0, "motion_s": 4.0, "overhead_s": 1.0, "episode_s": 6.0,
            "vlm_calls": 10, "vlm_tokens": {"input_tokens": 900, "output_tokens": 100}, "vlm_cost_usd": cost,
            "verifier_rejections": 0, "controller_rejections": 0, "instruction": f"do task {task}",
            "run_dir": run_dir}


def test_the_html_report_has_tables_per_task_and_links_to_each_record(tmp_path):
    ep = tmp_path / "episodes" / "a:1"
    ep.mkdir(parents=True)
    (ep / "events.jsonl").write_text("{}\n")
    (ep / "video.mp4").write_bytes(b"")
    rows = [row("a", "libero_spatial", 0, 0, True, str(ep), cost=0.012),
            row("b", "libero_spatial", 1, 0, False, cost=0.018),
            row("c", "libero_spatial_swap", 1, 0, True, cost=None)]
    write_reports(rows, tmp_path)
    p = Tables()
    p.feed((tmp_path / "report.html").read_text())
    assert p.pre == 0                                        # no Markdown text dumped in the page
    heads = [t[0] for t in p.tables]
    assert ["group", "success", "rate [95% Wilson]"] == heads[0][:3]
    by_task = next(t for t in p.tables if t[0][0] == "suite / task")
    assert [r[:3] for r in by_task[1:]] == [["libero_spatial / 0", "do task 0", "1/1"],
                                            ["libero_spatial / 1", "do task 1", "0/1"],
                                            ["libero_spatial_swap / 1", "do task 1", "1/1"]]
    episodes = next(t for t in p.tables if t[0][0] == "episode")
    assert len(episodes) == 4 and episodes[1][:3] == ["a", "yes", "success"]
    assert p.links == ["episodes/a%3A1/events.jsonl", "episodes/a%3A1/video.mp4"]
    overall = next(t for t in p.tables if t[1][0] == "all")
    assert overall[1][heads[0].index("cost/ep USD")] == "0.0150"    # the mean of the priced episodes
    assert "VLM cost: 0.0150 USD an episode" in (tmp_path / "report.md").read_text()


def test_paired_difference_interval():
    d, lo, hi = paired_difference([(True, True)] * 5 + [(False, True)] * 3 + [(False, False)] * 2)
    assert d == pytest.approx(0.3) and 0 < lo < d < hi < 1
    d2, lo2, hi2 = paired_difference([(y, x) for x, y in [(True, True)] * 5 + [(False, True)] * 3 +
                                      [(False, False)] * 2])
    assert (d2, lo2, hi2) == pytest.approx((-d, -hi, -lo))     # swapping the two flips the interval
    assert paired_difference([(True, True)] * 10)[0] == 0.0
    assert paired_difference([(True, False)] * 10) == pytest.approx((-1.0, -1.0, -0.6075), abs=1e-4)


def test_compare_two_directories_side_by_side(tmp_path):
    for name, brain, oks in (("gpt", "openai:gpt-4o", [True, True, False, True]),
                             ("qwen", "openai:qwen", [True, False, False, False])):
        d = tmp_path / name
        d.mkdir()
        rs = [row(f"{name}{i}", "libero_spatial", i % 2, i, ok, brain=brain) for i, ok in enumerate(oks)]
        rs.append(row(f"{name}-extra", "libero_goal", 0, 9 if name == "gpt" else 8, True, brain=brain))
        (d / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    p = subprocess.run([sys.executable, "-m", "motormind.cli", "compare", str(tmp_path / "gpt"),
                        str(tmp_path / "qwen"), "--out", str(tmp_path / "cmp")], capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "4 episodes in every directory" in p.stdout and "gpt: 1 unmatched, left out" in p.stdout
    assert "| all | 4 | 3/4 75% [30, 95] | 1/4 25% [5, 70] | -50 pts [" in p.stdout
    t = Tables()
    t.feed((tmp_path / "cmp" / "compare.html").read_text())
    assert [x for x in t.tables if x[0][0] == "group"][-1][1][:4] == ["all", "4", "3/4 75% [30, 95]",
                                                                     "1/4 25% [5, 70]"]
    bad = subprocess.run([sys.executable, "-m", "motormind.cli", "compare", str(tmp_path / "gpt"),
                          str(tmp_path / "nowhere")], capture_output=True, text=True, timeout=60)
    assert bad.returncode == 2 and "holds no results.jsonl" in bad.stderr


def test_the_report_has_the_suite_by_perturbation_grid_and_the_failing_tasks():
    from motormind.evaluate.report import markdown
    rows = [row("a", "libero_goal", 3, 0, False), row("b", "libero_goal", 3, 1, True),
            row("c", "libero_goal", 0, 0, True), row("d", "libero_goal_task", 1, 0, False),
            row("e", "libero_object_lan", 2, 0, True)]
    md = markdown(rows)
    grid = md.split("## Suite by perturbation")[1].split("##")[0]
    assert "| suite | base | _lan | _task |" in grid
    assert "| libero_goal | 2/3, 67% [21, 94] | - | 0/1, 0% [0, 79] |" in grid
    assert "| libero_object | - | 1/1, 100% [21, 100] | - |" in grid
    assert "| all suites | 2/3, 67% [21, 94] | 1/1, 100% [21, 100] | 0/1, 0% [0, 79] |" in grid
    failing = md.split("## Failing tasks")[1]
    assert "| libero_goal | 3: 1/2 |" in failing and "| libero_goal_task | 1: 1/1 |" in failing
    assert "libero_object_lan" not in failing
    assert "## Suite by perturbation" not in markdown([row("a", "libero_goal", 0, 0, True)])


def test_a_measure_with_no_steps_is_a_dash_not_a_crash():
    """The xArm6 cell runs in real time and counts no control steps: its interference costs have no
    step median (the cell's trials report raised a TypeError formatting None)."""
    from motormind.evaluate.report import _mid
    assert _mid({"n": 2, "steps_median": None, "steps_p90": None, "s_median": 1.5, "s_p90": 2.0}, "steps") == "-"
    assert _mid({"n": 2, "s_median": 1.5, "s_p90": 2.0}, "s") == "1.5 / 2"
