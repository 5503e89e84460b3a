"""Every command's --help (issue 36): each option shows its default, no RST marks or doubled %
leak from the docstrings, and --version answers."""
import argparse
import subprocess
import sys

from motormind.argtypes import _FLAG_ACTIONS
from motormind.cli import build_parser


def parsers(p, name="motormind"):
    yield name, p
    for a in p._actions:
        if isinstance(a, argparse._SubParsersAction):
            for sub_name, sp in a.choices.items():
                yield from parsers(sp, f"{name} {sub_name}")


def test_every_option_of_every_command_shows_its_default_and_no_markup():
    missing, markup = [], []
    for name, p in parsers(build_parser()):
        text = p.format_help()
        for bad in ("``", "%%", ":func:", ":class:"):
            if bad in text:
                markup.append(f"{name}: {bad}")
        f = p._get_formatter()
        for a in p._actions:
            if not a.option_strings or isinstance(a, _FLAG_ACTIONS):
                continue
            if "default" not in " ".join(f._format_action(a).split()).lower():
                missing.append(f"{name} {'/'.join(a.option_strings)}")
    assert not markup, markup
    assert not missing, "options whose --help gives no default:\n" + "\n".join(missing)


def test_run_help_names_the_defaults_and_version_answers():
    text = next(p for n, p in parsers(build_parser()) if n == "motormind run").format_help()
    assert "(default: libero_spatial)" in " ".join(text.split())
    v = subprocess.run([sys.executable, "-m", "motormind.cli", "--version"], capture_output=True, text=True,
                       timeout=60)
    assert v.returncode == 0 and v.stdout.startswith("motormind ")


def _cli(*args, env=None):
    import os
    e = {k: v for k, v in os.environ.items() if k != "OPENAI_API_KEY"}
    return subprocess.run([sys.executable, "-m", "motormind.cli", *args], capture_output=True, text=True,
                          timeout=60, env={**e, **(env or {})})


def test_serve_brain_and_the_console_do_not_share_a_default_port():
    p = build_parser()
    ports = {n: next(a.default for a in sp._actions if "--port" in a.option_strings)
             for n, sp in parsers(p) if n in ("motormind serve-brain", "motormind console")}
    assert ports["motormind console"] == 8765 and ports["motormind serve-brain"] != 8765
    from motormind.brains.openai_brain import load_vlm_config
    assert f":{ports['motormind serve-brain']}/" in load_vlm_config("remote-oracle").base_url


def test_run_openai_without_its_key_says_the_key_is_missing():
    r = _cli("run", "--brain", "openai")
    assert r.returncode == 2 and "$OPENAI_API_KEY is not set" in r.stderr and "API key is missing" in r.stderr
    assert "not reachable" not in r.stderr


def test_vlm_check_on_a_closed_port_says_nothing_is_listening_at_once(tmp_path):
    import socket
    import time
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                    # a port nothing listens on
    t0 = time.monotonic()
    r = _cli("vlm", "check", "--vlm", "local-oracle", "--vlm-set", "serve=null",
             "--vlm-set", f"base_url=http://127.0.0.1:{port}/v1")
    took = time.monotonic() - t0
    assert r.returncode == 2 and f"nothing is listening at http://127.0.0.1:{port}/v1" in r.stderr, r.stderr
    assert "UNFIT" not in r.stdout
    print(f"vlm check on a closed port: {took:.1f} s")


def test_the_shipped_oracle_configs_are_handled_by_vlm_check():
    r = _cli("vlm", "check", "--vlm", "local-oracle")
    assert r.returncode == 0 and "nothing to check" in r.stdout and "serve: oracle" in r.stdout
    from motormind.serve.server import BrainServer
    from motormind.serve.reach import ReachBrain
    srv = BrainServer(ReachBrain()).start()
    try:
        r = _cli("vlm", "check", "--vlm", "remote-oracle", env={"MOTORMIND_BRAIN_URL": srv.url})
    finally:
        srv.close()
    assert r.returncode == 0 and "the endpoint is listening at" in r.stdout and "send_scene" in r.stdout, r.stderr


def test_the_console_options_have_one_name_in_run_and_in_console():
    p = build_parser()
    subs = dict(parsers(p))

    def shown(name):
        f = subs[name]
        return {o for a in f._actions if a.help != argparse.SUPPRESS for o in a.option_strings}
    for opt in ("--console-token", "--console-frame-hz", "--approval"):
        assert opt in shown("motormind run") and opt in shown("motormind console"), opt
    assert "--token" not in shown("motormind console") and "--frame-hz" not in shown("motormind console")
    old = p.parse_args(["console", "--robot", "fake", "--token", "t0", "--frame-hz", "1.5"])   # scripts' spelling
    new = p.parse_args(["console", "--robot", "fake", "--console-token", "t0", "--console-frame-hz", "1.5"])
    assert (old.console_token, old.console_frame_hz) == (new.console_token, new.console_frame_hz) == ("t0", 1.5)


def test_every_positional_argument_is_explained():
    bare = []
    for name, p in parsers(build_parser()):
        for a in p._actions:
            if not a.option_strings and not isinstance(a, argparse._SubParsersAction) and not a.help:
                bare.append(f"{name} {a.dest}")
    assert not bare, "positional arguments with no help: " + ", ".join(bare)
