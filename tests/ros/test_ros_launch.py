"""The launch files and `motormind launch` describe the same nodes and parameters (one source of
truth: motormind/ros/graph.py), and the CLI works where rclpy is absent."""
import json
import os
import signal
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest
import rostest_util
import yaml
from waiting import wait_for

from motormind.ros import graph, package
from motormind.ros.launcher import Launcher, parse_node_argv

ROOT = Path(__file__).resolve().parents[2]


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
        (params,) = kw["parameters"]
        assert set(params) == {"config"}         # one parameter: the configuration file
        out[kw["name"]] = {"executable": kw["executable"], "namespace": kw["namespace"], "package": kw["package"],
                           "config": yaml.safe_load(Path(params["config"]).read_text()), "respawn": kw["respawn"],
                           "ends": "on_exit" in kw}
    return declared, out


def _from_motormind_launch(setup, given):
    ln = Launcher(setup, given)
    out = {}
    with ln.prepared():                      # the configuration file, as run() writes it
        for proc in ln.procs:
            a = parse_node_argv(proc.argv)
            out[a["name"]] = {"executable": graph.EXECUTABLES[a["role"]], "namespace": a["namespace"],
                              "package": package.PACKAGE, "config": yaml.safe_load(Path(a["config"]).read_text()),
                              "respawn": proc.spec.respawn, "ends": proc.spec.exit_ends_launch}
        tmp = ln.tmp
        assert tmp.is_dir()
    assert not tmp.exists()                  # removed on leaving
    return out


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
        eff = from_cli["console"]["config"]["console"]
        assert (eff["host"], eff["port"], eff["token"]) == ("127.0.0.1", 9000, "t0k")
    configs = [n["config"] for n in from_cli.values()]
    assert all(c == configs[0] for c in configs)          # every node reads the same configuration
    for name, n in from_cli.items():
        assert n["namespace"] == "/motormind" and n["executable"] == f"motormind-{name}"
        assert n["respawn"] == (name == "controller")
        assert n["config"]["profile"] == ("libero_panda" if setup == "sim" else "xarm6")
    cfg = from_cli["controller"]["config"]
    if setup == "sim":
        assert cfg["robot"]["type"] == "libero" and cfg["robot"]["task"] == int(given.get("task", 0))
        assert from_cli["executor"]["ends"] == (given.get("exit_on_end", "true") == "true")
    else:
        assert cfg["robot"]["type"] == "xarm6" and cfg["robot"]["ip"] == "192.168.1.222"
        assert cfg["robot"]["cameras"] == ["front=0", "wrist=/dev/video2"] and not cfg["controller"]["privileged_service"]
        assert cfg["planner"]["instruction"] == "put the cup down"


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
    assert d["config"]["robot"]["task"] == 2
    bad = subprocess.run([sys.executable, "-m", "motormind.cli", "launch", "sim", "tsk:=2", "--dry-run"],
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode != 0 and "unknown argument(s) for sim: tsk" in bad.stderr


def _cli(*args, tmpdir, timeout=120):
    """`motormind launch ...` in a fresh process whose temporary files go to ``tmpdir``."""
    return subprocess.run([sys.executable, "-m", "motormind.cli", "launch", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "TMPDIR": str(tmpdir), "PYTHONPATH": str(ROOT)})


def test_dry_run_writes_nothing(tmp_path):
    tmpdir = tmp_path / "tmp"
    tmpdir.mkdir()
    p = _cli("sim", "task:=1", "--dry-run", tmpdir=tmpdir)
    assert p.returncode == 0, p.stderr[-2000:]
    d = json.loads(p.stdout)
    assert d["launch_dir"].startswith("<launch dir>")
    assert d["nodes"][0]["argv"][-1] == "config:=<launch dir>/motormind.yaml"
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("args, error", [
    (["fake"], "launch: brain_script: brain:=scripted needs its script, a JSON file {role: [answers]} "
               "(brain_script:=FILE)"),
    (["fake", "brain_script:=/nonexistent/script.json"], "launch: brain_script: no such file: /nonexistent/script.json"),
    (["fake", "brain:=oracle"], "launch: brain: 'oracle' is not one of scripted | openai for fake (it reads the "
                                "simulator's privileged state: simulation only)"),
    (["xarm6"], "launch: robot_ip: required for the xArm6 (robot_ip:=192.168.1.222)"),
])
def test_a_launch_that_would_start_part_of_the_graph_is_refused_in_one_line(args, error, tmp_path):
    """Without a brain that can answer, every role node would exit and leave a Controller whose
    watchdog never arms: nothing starts, one line says why, and no temporary files are left."""
    for dry in ([], ["--dry-run"]):
        p = _cli(*args, *dry, tmpdir=tmp_path)
        assert p.returncode != 0 and p.stderr.strip() == error, p.stderr
        assert "started" not in p.stdout and "Traceback" not in p.stderr
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


def _bad_values(files: Path, busy: int) -> list:
    bad_script = files / "bad.json"
    bad_script.write_text('{"planner": [')
    bad_overlap = files / "bad_overlap.yaml"          # issue 37: an overlap kind that does not exist
    bad_overlap.write_text("model: m\nbase_url: http://127.0.0.1:1/v1\napi_key: x\napi_key_env: null\n"
                           "overlap: {speculate: true, plan_first: true}\n")
    return [
        (["sim", "console:=true", f"console_port:={busy}"],
         f"launch: console_port: cannot serve on 127.0.0.1:{busy}: Address already in use"),
        (["sim", "console:=true", "console_port:=70000"], "launch: console_port: 70000 is outside 0..65535"),
        (["sim", "suite:=nope"], "launch: suite: refusing suite 'nope': suite 'nope' is not registered (registered: "),
        (["sim", "task:=10"], "launch: task: [10] out of range for 'libero_spatial' (0..9)"),
        (["sim", "suite:=libero_goal", "init_state:=50"],
         "launch: init_state: [50] out of range for 'libero_goal' task 0 (0..49)"),
        (["sim", "seed:=-1"], "launch: seed: must be within 0..4294967295, got -1"),
        (["sim", f"record:={files}"], f"launch: record: {files} is a directory, not a file"),
        (["xarm6", "robot_ip:=arm.local"], "launch: robot_ip: xArm address 'arm.local' is not an IPv4 literal"),
        (["xarm6", "robot_ip:=192.168.1.222", "command_port:=0"], "launch: command_port: must be within 1..65535, got 0"),
        (["xarm6", "robot_ip:=192.168.1.222", "camera:=front"], "launch: camera: 'front' is not NAME=SOURCE"),
        (["fake", "brain:=openai", "vlm:=nope"], "launch: vlm: no VLM config 'nope'"),
        (["fake", "brain:=openai", f"vlm:={bad_overlap}"],
         f"launch: vlm: {bad_overlap}: overlap: unknown key(s) ['plan_first']"),
        (["fake", "brain:=openai", "vlm:=local-oracle"],
         "launch: vlm: serve: oracle reads the simulator's privileged state: simulation only"),
        (["fake", f"brain_script:={bad_script}"], f"launch: brain_script: {bad_script}: malformed JSON"),
    ]


def test_every_launch_argument_is_checked_before_any_node_starts(tmp_path, busy_port):
    """Issue 31 item 7: a busy console_port was reported after 7 nodes had started (the Controller
    with its robot), suite:=nope 3.5 s in. Each bad value is one line naming the argument, and no
    node process is started: with or without --dry-run, nothing says "started", no temporary
    configuration is left."""
    files, tmpdir = tmp_path / "files", tmp_path / "tmp"
    files.mkdir()
    tmpdir.mkdir()
    failures = []
    for args, error in _bad_values(files, busy_port):
        for dry in ([], ["--dry-run"]):
            p = _cli(*args, *dry, tmpdir=tmpdir)
            err = p.stderr.strip()
            if p.returncode != 2 or not err.startswith(error) or "\n" in err or "started" in p.stdout:
                failures.append(f"launch {' '.join(args + dry)}: rc {p.returncode}, stderr {err[-300:]!r}, "
                                f"stdout {p.stdout[-300:]!r}")
    assert not failures, "\n".join(failures)
    assert list(tmpdir.iterdir()) == []


def test_the_launch_files_refuse_a_bad_argument_before_any_node(monkeypatch):
    """ros2 launch evaluates the same checks (graph.nodes) before it returns a node to start."""
    with pytest.raises(ValueError, match=r"^task: \[12\] out of range for 'libero_spatial' \(0\.\.9\)$"):
        _from_launch_file("sim", {"task": "12"}, monkeypatch)


def test_a_node_that_refuses_to_start_ends_the_launch(tmp_path, monkeypatch):
    """A node that exits with code 2 (a configuration error it found itself) stops the others."""
    script = tmp_path / "script.json"
    script.write_text("{}")
    log = rostest_util.Log()
    ln = Launcher("fake", {"brain_script": str(script)}, out=log, grace_s=5)
    code = "import sys; print('error: profile: bad', flush=True); sys.exit(2)"
    sleeper = "import time; time.sleep(600)"
    ln.procs = ln.procs[:2]                  # the controller, and a planner that refuses
    monkeypatch.setattr(ln, "_argv", lambda spec, tmp: [sys.executable, "-c", code if spec.name == "planner" else sleeper])
    assert ln.run() == 2
    text = log.text()
    assert "[planner] error: profile: bad" in text
    assert "planner refused to start (its error is above): stopping every node rather than run without it" in text
    assert "all nodes stopped" in text and not ln.pids()


def test_a_node_that_ignores_sigint_and_sigterm_is_killed_after_the_grace(tmp_path):
    script = tmp_path / "script.json"
    script.write_text("{}")
    log = rostest_util.Log()
    ln = Launcher("fake", {"brain_script": str(script)}, out=log, grace_s=0.5)
    stubborn = ("import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); print('up', flush=True); time.sleep(600)")
    ln.procs = ln.procs[:1]
    ln.procs[0].argv = [sys.executable, "-c", stubborn]
    ln._start(ln.procs[0])
    popen = ln.procs[0].popen
    wait_for(lambda: "[controller] up" in log.text(), timeout=60, what="the stubborn process")
    ln.shutdown()
    assert popen.returncode == -signal.SIGKILL
    text = log.text()
    assert "controller did not stop in time: SIGTERM" in text and "controller did not stop in time: SIGKILL" in text
    assert "controller stopped (killed by SIGKILL)" in text and not ln.pids()


@pytest.mark.parametrize("role", graph.ROLES)
def test_node_executables_print_help_and_start_nothing(role):
    pytest.importorskip("rclpy")
    p = subprocess.run([sys.executable, "-m", "motormind.ros", role, "--help"], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "ROS_DOMAIN_ID": "231"})
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.startswith(f"usage: python -m motormind.ros {role} [-h] [--ros-args")
    params = dict(line.split(None, 1) for line in p.stdout.split("packaged default):\n", 1)[1].splitlines())
    assert params["profile"] == "'libero_panda'" and params["nodes.heartbeat_period_s"] == "0.25"
    extra = {"controller": "robot.type", "recorder": "recorder.flush_s", "executor": "executor.exit_on_end",
             "planner": "planner.instruction", "console": "console.port"}.get(role)
    if extra:
        assert extra in params
    assert "ready" not in p.stdout and "recording" not in p.stdout and p.stderr == ""
    bad = subprocess.run([sys.executable, "-m", "motormind.ros", role, "--bogus"], capture_output=True, text=True,
                         timeout=120)
    assert bad.returncode == 2 and bad.stderr.strip().startswith(f"python -m motormind.ros {role}: unknown "
                                                                   f"argument '--bogus'")
