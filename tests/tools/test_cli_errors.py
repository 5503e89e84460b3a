"""Every bad invocation of issue 15 ("Command-line errors") prints ONE line on stderr that names the
argument and the limit, exits non-zero, and builds nothing first: no simulator (mujoco, robosuite
and the LIBERO-PRO backend are never imported), no robot, no server left listening.

Each runs as a subprocess of ``motormind.cli``; at exit the process reports which of those
modules it imported (an atexit hook), so "before the simulator is built" is asserted, not assumed."""
import json
import socket
import subprocess
import sys

import pytest

from motormind.paths import config_dir

BUILT = ("mujoco", "robosuite", "motormind.sim.libero_pro.backend", "motormind.robots.fake",
         "motormind.robots.xarm6")
PROBE = ("import atexit, sys\n"
         "atexit.register(lambda: sys.stdout.write('\\nBUILT ' + repr(sorted(m for m in %r if m in sys.modules)) + '\\n'))\n"
         "from motormind.cli import main\n"
         "sys.exit(main(sys.argv[1:]))\n") % (BUILT,)


def motormind(*argv, timeout=120):
    p = subprocess.run([sys.executable, "-c", PROBE, *map(str, argv)], capture_output=True, text=True,
                       timeout=timeout)
    built = next((line[6:] for line in p.stdout.splitlines() if line.startswith("BUILT ")), None)
    return p.returncode, [line for line in p.stderr.splitlines() if line.strip()], built


@pytest.fixture(scope="module")
def busy_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(1)
    yield s.getsockname()[1]
    s.close()


@pytest.fixture(scope="module")
def dead_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                     # nothing listens there now
    return port


@pytest.fixture(scope="module")
def bad_profiles(tmp_path_factory):
    d = tmp_path_factory.mktemp("profiles")
    text = (config_dir() / "robots" / "fake.yaml").read_text()
    (d / "strings.yaml").write_text(text.replace("x: [100.0, 700.0]", 'x: ["100", "700"]'))
    head, _, rest = text.partition("directions:\n")
    rest = rest.split("rotation:", 1)[1]
    (d / "directions.yaml").write_text(head + "directions:\n  - forward\n  - back\nrotation:" + rest)
    (d / "syntax.yaml").write_text(text.replace("limits:\n", "limits: [\n", 1))
    return d


def cases(tmp, busy, dead, profiles):
    a_file = tmp / "a_file"
    a_file.write_text("not a directory\n")
    dead_vlm = ["--vlm", "openai", "--vlm-set", f"base_url=http://127.0.0.1:{dead}/v1", "--vlm-set", "api_key=sk-test"]
    return [
        # (argv, what the one line must say)
        (["eval", "--backend", "fake", "--out", a_file], f"argument --out: {a_file} exists and is not a directory"),
        (["console", "--robot", "fake", "--port", busy], f"--port: cannot serve on 127.0.0.1:{busy}: Address already in use"),
        (["console", "--robot", "fake", "--port", 70000], "argument --port: 70000 is outside 0..65535"),
        (["emulate", "xarm6", "--port", 70000], "argument --port: 70000 is outside 0..65535"),
        (["serve-brain", "--port", busy], f"--port: cannot serve on 127.0.0.1:{busy}: Address already in use"),
        (["serve-brain", "--profile", profiles / "strings.yaml"], "workspace_mm.x.lo: must be a finite number, got '100'"),
        (["serve-brain", "--profile", profiles / "directions.yaml"], "directions: must be a non-empty mapping"),
        (["serve-brain", "--profile", profiles / "syntax.yaml"], "not valid YAML at line 6 column 14: expected ',' or ']'"),
        (["console", "--ros", "--profile", profiles / "strings.yaml"], "--profile: "),
        (["run", "--brain", "bogus"], "argument --brain: invalid choice: 'bogus' (choose from"),
        (["run", "--out", a_file], f"argument --out: {a_file} exists and is not a directory"),
        (["run", "--brain", "openai", *dead_vlm],
         f"--vlm: the endpoint http://127.0.0.1:{dead}/v1 is not reachable: cannot connect to 127.0.0.1:{dead}: "
         "Connection refused"),
        (["run", "--console", f"127.0.0.1:{busy}"], f"--console: cannot serve on 127.0.0.1:{busy}: Address already in use"),
        (["run", "--console", "127.0.0.1:70000"], "argument --console: port 70000 is outside 0..65535"),
        (["run", "--wall-budget", -1], "argument --wall-budget: -1 s: must be more than 0 s"),
        (["run", "--wall-budget", "nan"], "argument --wall-budget: 'nan' is not a finite number"),
        (["eval", "--inits", 999], "--inits: [999] out of range for 'libero_spatial' task 0 (0..49)"),
        (["eval", "--backend", "fake", "--noise", "all=2"], "--noise: all: every rate must be within 0..1, got 2"),
        (["eval", "--backend", "fake", "--noise", "all=lots"], "--noise: all needs a number within 0..1"),
        (["eval", "--backend", "fake", "--noise", "wrong_directon=0.2"],
         "unknown key(s) ['wrong_directon'] (did you mean 'wrong_direction'?)"),
        (["eval", "--backend", "fake", "--noise", "seed_calibrated,wrong_region=1.5"],
         "--noise: wrong_region: must be <= 1, got 1.5"),
        (["eval", "--backend", "fake", "--tasks", "3-1"], "--tasks: empty range '3-1' in '3-1'"),
        # every backend checks the grid the same way: a suite, a task, an init state it does not have is refused
        # before any episode runs (the fake once ran 50 episodes of --suites nope, 500 of a 10-task suite)
        (["eval", "--backend", "fake", "--suites", "nope", "--out", tmp / "nope"],
         "--suites: no suite 'nope' on the fake backend (it has: fake)"),
        (["eval", "--backend", "fake", "--tasks", "0-99", "--out", tmp / "t99"],
         "--tasks: [10, 11, ..., 99] (90 values) out of range for 'fake' (0..9)"),
        (["eval", "--backend", "fake", "--inits", "49-50", "--out", tmp / "i50"],
         "--inits: [50] out of range for 'fake' task 0 (0..49)"),
        (["eval", "--tasks", "0-99", "--out", tmp / "l99"],
         "--tasks: [10, 11, ..., 99] (90 values) out of range for 'libero_spatial' (0..9)"),
        (["eval", "--suites", "nope", "--out", tmp / "lnope"],
         "--suites: refusing suite 'nope': suite 'nope' is not registered (registered: "),
        # a row names the brain that ran: the fake runs no oracle, and no noisy brain
        (["eval", "--backend", "fake", "--brain", "oracle", "--out", tmp / "bo"],
         "--brain: 'oracle' does not run on the fake backend (it runs: scripted, openai)"),
        (["eval", "--brain", "scripted", "--out", tmp / "bs"],
         "--brain: 'scripted' does not run on the libero backend (it runs: oracle, noisy, openai)"),
        (["eval", "--backend", "fake", "--noise", "all=0.1", "--out", tmp / "n"],
         "--noise: needs --backend libero (the fake backend's brains have no noisy variant), got all=0.1"),
        (["eval", "--backend", "fake", "--wall-budget", 0], "argument --wall-budget: 0 s: must be more than 0 s"),
        (["eval", "--backend", "fake", "--concurrency", 0], "argument --concurrency: "),
        (["eval", "--backend", "fake", "--concurrency", 300], "--concurrency: at most 256 episodes at once per worker, got 300"),
        (["eval", "--concurrency", 200, "--workers", 2], "MB an episode in flight and 2000 MB a worker"),
        (["eval", "--backend", "fake", "--max-in-flight", 4],
         "--max-in-flight: only --brain openai calls an endpoint (this run: --brain scripted)"),
        (["eval", "--backend", "fake", "--max-in-flight", 0], "argument --max-in-flight: "),
        (["eval", "--backend", "fake", "--brain", "openai", *dead_vlm],
         f"--vlm: the endpoint http://127.0.0.1:{dead}/v1 is not reachable: cannot connect"),
        (["serve-brain", "--latency", "soon"], "--latency 'soon': expected SECONDS, MEAN~SPREAD or ROLE=MEAN[~SPREAD]"),
        (["serve-brain", "--latency", "-1"], "--latency.mean_s: must be a finite number of seconds >= 0, got -1.0"),
        (["serve-brain", "--latency", "boss=1"], "--latency: unknown role 'boss'"),
        (["run", "--interference", "hand@reach"], "argument --interference: 'hand@reach' is not WHAT@WHEN with WHAT "
         "one of fetched, target, bystander and WHEN one of reach, carry, between"),
        (["run", "--interference-mm", "0-300"], "argument --interference-mm: 0-300: needs 0 < LO <= HI <= 250 mm"),
        (["eval", "--backend", "fake", "--interference", "off", "fetched@lunch"], "argument --interference: "
         "'fetched@lunch' is not WHAT@WHEN"),
        (["eval", "--backend", "fake", "--interference-mm", "80-40"],
         "argument --interference-mm: 80-40: needs 0 < LO <= HI <= 250 mm"),
        (["eval", "--backend", "fake", "--interference", "off", "fetched@reach"],
         "--interference: needs --backend libero (the fake backend has no scene to disturb), got off fetched@reach"),
        (["console", "--robot", "fake", "--brain", "openai", *dead_vlm],
         f"--vlm: the endpoint http://127.0.0.1:{dead}/v1 is not reachable: cannot connect"),
    ]


def test_every_bad_invocation_is_one_line_a_non_zero_exit_and_builds_nothing(tmp_path, busy_port, dead_port,
                                                                            bad_profiles):
    failures = []
    for argv, says in cases(tmp_path, busy_port, dead_port, bad_profiles):
        rc, err, built = motormind(*argv)
        line = err[0] if err else ""
        if rc == 0 or len(err) != 1 or says not in line or built != "[]" or "Traceback" in line:
            failures.append(f"motormind {' '.join(map(str, argv))}: rc {rc}, built {built}, stderr {err[:6]}")
    assert not failures, "\n".join(failures)


def test_repeated_tasks_run_each_episode_once_and_the_progress_counts_them(tmp_path):
    out = tmp_path / "ev"
    p = subprocess.run([sys.executable, "-m", "motormind.cli", "eval", "--backend", "fake", "--tasks", "0,0,1",
                        "--inits", "0,0", "--workers", "0", "--out", str(out)], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["task"], r["init_state"]) for r in rows) == [(0, 0), (1, 0)]
    assert json.loads((out / "eval.json").read_text())["episodes"] == 2
    assert "--tasks: repeated values dropped (3 given, 2 distinct)" in p.stderr
    assert "[eval] 2 episodes" in p.stderr and "2/2" in p.stderr
    # the rows and the report name the brain that ran: the fake's scripted brain (rows once said "oracle")
    assert {r["brain"] for r in rows} == {r["brain_label"] for r in rows} == {"scripted"}
    assert "brain(s): scripted." in p.stdout and all(r["suite"] == "fake" for r in rows)


def test_the_help_of_motormind_and_of_every_command_renders():
    """``motormind --help`` once crashed on a help text with a bare ``%`` (argparse formats them)."""
    import argparse
    import contextlib
    import io

    from motormind.cli import build_parser
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    assert "compare" in sub.choices
    for p in [parser, *sub.choices.values()]:
        out = io.StringIO()
        with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as ex:
            p.parse_args(["--help"])
        assert ex.value.code == 0 and "usage:" in out.getvalue(), p.prog


def test_errors_that_misled_name_what_is_wrong(tmp_path):
    """Issue 36: each of these once blamed the wrong thing, or ended in a traceback."""
    a_file = tmp_path / "a_file"
    a_file.write_text("not a directory\n")
    typo = tmp_path / "typo.yaml"
    typo.write_text((config_dir() / "robots" / "fake.yaml").read_text().replace("\nworkspace_mm:", "\nworkspace_mn:"))
    cases = [
        (["console", "--robot", "fake", "--port", 0, "--out", a_file],
         f"argument --out: {a_file} exists and is not a directory", "Traceback"),
        (["console", "--robot", "fake", "--port", 0, "--out", a_file / "sub"],
         f"--out: cannot make the directory {a_file / 'sub'}: Not a directory", "Traceback"),
        (["console", "--robot", "fake", "--port", 0, "--host", "999.1.1.1"], "--host: '999.1.1.1' is not an address",
         "--port"),
        (["serve-brain", "--profile", typo],
         "unknown section(s) ['workspace_mn'] (did you mean 'workspace_mm'?)", "missing section"),
        (["launch", "sim", "task:=abc"], "task: must be a whole number, got 'abc'", "int()"),
        (["launch", "sim", "console:=maybe"], "console: must be true or false, got 'maybe'", "not a boolean"),
        (["diagnose", "run", "--set", a_file], f"--set: {a_file} is a file, not a question set", "build --out"),
    ]
    failures = []
    for argv, says, never in cases:
        rc, err, built = motormind(*argv)
        line = err[0] if err else ""
        if rc == 0 or len(err) != 1 or says not in line or never in line or built != "[]":
            failures.append(f"motormind {' '.join(map(str, argv))}: rc {rc}, built {built}, stderr {err[:6]}")
    assert not failures, "\n".join(failures)


def test_a_refused_magnitude_never_reads_as_its_own_limit():
    from motormind.commands import parse_command
    from motormind.errors import CommandError
    from motormind.profile import load_profile
    prof = load_profile("fake")
    lim = prof.limits
    for cmd, says in [({"op": "move", "direction": "up", "distance_mm": lim.min_move_mm - 1e-7},
                       f"{lim.min_move_mm - 1e-7:.7g} mm is below the minimum move {lim.min_move_mm:g} mm"),
                      ({"op": "move", "direction": "up", "distance_mm": lim.max_move_mm + 1e-6},
                       f"{lim.max_move_mm + 1e-6:.10g} mm exceeds the per-command limit {lim.max_move_mm:g} mm"),
                      ({"op": "gripper", "width": 1.0000001}, "got 1.0000001"),
                      ({"op": "wait", "seconds": lim.max_wait_s + 1e-9}, f"{lim.max_wait_s + 1e-9:.13g} s exceeds")]:
        with pytest.raises(CommandError) as e:
            parse_command(cmd, prof)
        assert says in str(e.value), str(e.value)
    box = prof.in_workspace([prof.workspace_mm["x"][0] - 0.04, 0.5 * sum(prof.workspace_mm["y"]),
                             0.5 * sum(prof.workspace_mm["z"])])
    lo = prof.workspace_mm["x"][0]
    assert box == [f"x={lo - 0.04:.4g} < {lo:.1f}"], box
