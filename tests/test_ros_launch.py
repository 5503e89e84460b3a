"""The launch files and `motormind launch` describe the same nodes and parameters (one source of
truth: motormind/ros/graph.py), and the CLI works where rclpy is absent."""
import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

from motormind.ros import graph
from motormind.ros.launcher import Launcher, parse_node_argv

ROOT = Path(__file__).resolve().parents[1]


class _Action:
    def __init__(self, *args, **kw):
        self.args, self.kw = args, kw


class _LaunchConfiguration:
    def __init__(self, name):
        self.name = name

    def perform(self, context):
        return context.launch_configurations[self.name]


def _stub_launch_modules(monkeypatch):
    """Minimal stand-ins for the ROS 2 `launch` / `launch_ros` packages (not on PyPI)."""
    launch = types.ModuleType("launch")
    launch.LaunchDescription = lambda entities: list(entities)
    actions = types.ModuleType("launch.actions")
    actions.DeclareLaunchArgument = type("DeclareLaunchArgument", (_Action,), {})
    actions.OpaqueFunction = type("OpaqueFunction", (_Action,), {})
    actions.Shutdown = type("Shutdown", (_Action,), {})
    subs = types.ModuleType("launch.substitutions")
    subs.LaunchConfiguration = _LaunchConfiguration
    launch_ros = types.ModuleType("launch_ros")
    ros_actions = types.ModuleType("launch_ros.actions")
    ros_actions.Node = type("Node", (_Action,), {})
    for name, mod in {"launch": launch, "launch.actions": actions, "launch.substitutions": subs,
                      "launch_ros": launch_ros, "launch_ros.actions": ros_actions}.items():
        monkeypatch.setitem(sys.modules, name, mod)


def _from_launch_file(setup, given, monkeypatch):
    """Evaluate launch/SETUP.launch.py as ros2 launch would, with launch arguments ``given``."""
    _stub_launch_modules(monkeypatch)
    src = ROOT / "launch" / f"{setup}.launch.py"
    ns: dict = {"__file__": str(src), "__name__": f"launch_{setup}"}
    exec(compile(src.read_text(), str(src), "exec"), ns)
    entities = ns["generate_launch_description"]()
    declared = {e.args[0]: e.kw["default_value"] for e in entities if type(e).__name__ == "DeclareLaunchArgument"}
    ctx = types.SimpleNamespace(launch_configurations={**declared, **given})
    opaque = [e for e in entities if type(e).__name__ == "OpaqueFunction"]
    assert len(opaque) == 1
    out = {}
    for node in opaque[0].kw["function"](ctx):
        kw = node.kw
        cfg, overrides = kw["parameters"]
        out[kw["name"]] = {"executable": kw["executable"], "namespace": kw["namespace"], "package": kw["package"],
                           "params_file": str(cfg), "params": overrides, "respawn": kw["respawn"],
                           "ends": "on_exit" in kw}
    return declared, out


def _from_motormind_launch(setup, given):
    ln = Launcher(setup, given)
    out = {}
    for proc in ln.procs:
        a = parse_node_argv(proc.argv)
        out[a["name"]] = {"executable": graph.EXECUTABLES[a["role"]], "namespace": a["namespace"],
                          "package": graph.PACKAGE, "params_file": a["params_files"][0], "params": a["params"],
                          "respawn": proc.spec.respawn, "ends": proc.spec.exit_ends_launch}
    return out


def _effective(params_file, name, overrides):
    """What a node ends up with: the file's /** and /motormind/NAME sections, then the overrides."""
    doc = yaml.safe_load(Path(params_file).read_text())
    return {**doc["/**"]["ros__parameters"], **(doc.get(f"/motormind/{name}") or {}).get("ros__parameters", {}),
            **overrides}


@pytest.mark.parametrize("setup,given", [
    ("sim", {}),
    ("sim", {"suite": "libero_object", "task": "3", "init_state": "2", "record": "/tmp/x.mcap", "exit_on_end": "false"}),
    ("xarm6", {"robot_ip": "192.168.1.222", "camera": "front=0,wrist=/dev/video2", "instruction": "put the cup down"}),
    ("sim", {"console": "true", "console_port": "9000", "console_token": "t0k"}),
])
def test_launch_files_and_motormind_launch_start_the_same_nodes_with_the_same_parameters(setup, given, monkeypatch):
    declared, from_file = _from_launch_file(setup, given, monkeypatch)
    assert declared == {a.name: a.default for a in graph.ARGS[setup]}
    from_cli = _from_motormind_launch(setup, given)
    assert from_file == from_cli
    names = set(from_cli)
    assert {"controller", "planner", "executor", "verifier", "monitor", "memory"} <= names
    assert ("recorder" in names) == bool(given.get("record"))
    assert ("console" in names) == (given.get("console") == "true")    # optional, off by default
    if "console" in names:
        eff = _effective(from_cli["console"]["params_file"], "console", from_cli["console"]["params"])
        assert (eff["console_host"], eff["console_port"], eff["console_token"]) == ("127.0.0.1", 9000, "t0k")
    for name, n in from_cli.items():
        assert n["namespace"] == "/motormind" and n["executable"] == f"motormind-{name}"
        assert n["respawn"] == (name == "controller")
        eff = _effective(n["params_file"], name, n["params"])
        assert eff["profile"] == ("libero_panda" if setup == "sim" else "xarm6")
    ctrl = _effective(from_cli["controller"]["params_file"], "controller", from_cli["controller"]["params"])
    if setup == "sim":
        assert ctrl["backend"] == "libero" and ctrl["task"] == int(given.get("task", 0))
        assert from_cli["executor"]["ends"] == (given.get("exit_on_end", "true") == "true")
    else:
        assert ctrl["backend"] == "xarm6" and ctrl["robot_ip"] == "192.168.1.222" and not ctrl["privileged_service"]
        assert from_cli["planner"]["params"]["instruction"] == "put the cup down"


def test_cli_lists_and_dry_runs_launch_without_rclpy():
    code = ("import sys, json; sys.modules['rclpy'] = None\n"
            "from motormind.cli import main\n"
            "sys.exit(main(['launch', 'sim', 'task:=2', '--dry-run']))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(p.stdout)
    assert [n["name"] for n in d["nodes"]][:6] == ["controller", "planner", "executor", "verifier", "monitor",
                                                    "memory"]
    assert d["nodes"][0]["params"]["task"] == 2
    bad = subprocess.run([sys.executable, "-m", "motormind.cli", "launch", "sim", "tsk:=2", "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "unknown argument(s) for sim: tsk" in bad.stderr
