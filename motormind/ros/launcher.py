"""``motormind launch``: the nodes of a setup as separate processes, without the ros2 CLI.

The node list and the configuration come from ``graph.nodes`` - the same call the launch files
make - so both start the same nodes on the same configuration. Each node runs as
``python -m motormind.ros ROLE --ros-args -r __node:=NAME -r __ns:=/motormind -p config:=FILE``,
exactly the arguments ``ros2 launch`` gives the installed executable; FILE is the launch's one
configuration file (``motormind/ros/settings.py``), written once for every node.

* Logs: every line of a node's output is printed prefixed with ``[name]``.
* Ctrl-C (SIGINT) or SIGTERM: every node gets SIGINT, then SIGTERM after ``grace_s``, then SIGKILL
  after ``KILL_AFTER_S`` more: a node that ignores both is gone within ``grace_s + KILL_AFTER_S``.
* The launcher dying, even by SIGKILL, stops every node: each node process ties itself to the
  launcher (``lifeline``: the kernel's parent-death signal, SIGTERM). Nodes are started and
  restarted only from the thread that runs ``run()``, the thread that signal is tied to.
* A node that dies is reported with its exit code or signal. A node with ``respawn`` (the
  Controller) is started again after its delay - and a restarted Controller comes up stopped.
* A node that exits with code 2 refused to start (a configuration error, printed above it): the
  launch ends with code 2 rather than run a part of the graph (a Controller whose watchdog never
  arms because no Executor ever starts).
* A node with ``exit_ends_launch`` (the Executor with exit_on_end) ends the launch when it exits;
  the launch exits with its code.
* The configuration file lives in a temporary directory made by ``run()`` (or ``prepared()``) and
  removed when it returns; building a ``Launcher`` or describing it (``--dry-run``) writes nothing.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


from . import graph
from .lifeline import ENV as LAUNCHER_PID_ENV

KILL_AFTER_S = 3.0           # SIGTERM -> SIGKILL
LAUNCH_DIR = "<launch dir>"  # the temporary directory in a description before run()


CONFIG_NAME = "motormind.yaml"


def node_argv(spec: graph.NodeSpec, config_file: Path, python: str = sys.executable) -> list[str]:
    return [python, "-u", "-m", "motormind.ros", spec.role, "--ros-args",
            "-r", f"__node:={spec.name}", "-r", f"__ns:={graph.NAMESPACE}", "-p", f"config:={config_file}"]


def parse_node_argv(argv: list[str]) -> dict:
    """The inverse of ``node_argv`` (tests): role, name, namespace, the configuration file."""
    i = argv.index("--ros-args")
    out = {"role": argv[i - 1], "config": None}
    rest = argv[i + 1:]
    for k, a in enumerate(rest):
        if a == "-r":
            key, _, val = rest[k + 1].partition(":=")
            out["name" if key == "__node" else "namespace"] = val
        elif a == "-p":
            key, _, val = rest[k + 1].partition(":=")
            if key == "config":
                out["config"] = val
    return out


class Proc:
    def __init__(self, spec: graph.NodeSpec, argv: list[str]):
        self.spec, self.argv = spec, argv
        self.popen: subprocess.Popen | None = None
        self.starts = 0
        self.reader: threading.Thread | None = None


class Launcher:
    def __init__(self, setup: str, args: dict | None = None, env: dict | None = None, out=None,
                 grace_s: float = 8.0, respawn: bool = True):
        self.setup = setup
        self.specs, self.config = graph.nodes(setup, args)
        self.env = {**os.environ, **(env or {})}
        self.out = out or sys.stdout
        self.grace_s = grace_s
        self.respawn = respawn
        self.tmp: Path | None = None
        self.procs = [Proc(sp, self._argv(sp, Path(LAUNCH_DIR))) for sp in self.specs]
        self._lock = threading.Lock()
        # set by stop() and by the signal handlers, polled by _supervise: a plain flag, as a handler must
        # take no lock (a threading.Event's set() does, and a second signal during it deadlocks)
        self._stopping = False
        self.deaths: list[dict] = []
        self.exit_code: int | None = None

    def _argv(self, spec: graph.NodeSpec, tmp: Path) -> list[str]:
        return node_argv(spec, tmp / CONFIG_NAME)

    @contextlib.contextmanager
    def prepared(self):
        """The launch's configuration file in a temporary directory, removed on leaving."""
        from .settings import write
        self.tmp = Path(tempfile.mkdtemp(prefix="motormind-launch-"))
        try:
            write(self.config, self.tmp / CONFIG_NAME)
            for p in self.procs:
                p.argv = self._argv(p.spec, self.tmp)
            yield self
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
            for p in self.procs:
                p.argv = self._argv(p.spec, Path(LAUNCH_DIR))

    def say(self, text: str, name: str = "launch") -> None:
        with self._lock:
            print(f"[{name}] {text}", file=self.out, flush=True)

    def describe(self) -> dict:
        return {"setup": self.setup, "config_from": self.config.source,
                "launch_dir": str(self.tmp) if self.tmp else
                f"{LAUNCH_DIR}: a temporary directory made at start (the configuration as {CONFIG_NAME})",
                "config": self.config.to_dict(),
                "nodes": [{**p.spec.to_json(), "argv": p.argv} for p in self.procs]}

    # -- processes ------------------------------------------------------------------------------
    def _start(self, p: Proc) -> None:
        p.starts += 1
        p.popen = subprocess.Popen(p.argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                   env={**self.env, LAUNCHER_PID_ENV: str(os.getpid())}, start_new_session=True,
                                   text=True, errors="replace", bufsize=1)
        self.say(f"started {p.spec.name} (pid {p.popen.pid}){' again' if p.starts > 1 else ''}")
        p.reader = threading.Thread(target=self._pump, args=(p, p.popen), daemon=True)
        p.reader.start()

    def _pump(self, p: Proc, popen: subprocess.Popen) -> None:
        for line in popen.stdout:
            self.say(line.rstrip("\n"), p.spec.name)

    @staticmethod
    def _describe_code(rc: int) -> str:
        if rc < 0:
            try:
                return f"killed by {signal.Signals(-rc).name}"
            except ValueError:
                return f"killed by signal {-rc}"
        return f"exit code {rc}"

    def pids(self) -> dict:
        return {p.spec.name: p.popen.pid for p in self.procs if p.popen and p.popen.poll() is None}

    def run(self) -> int:
        """Start every node and supervise them until Ctrl-C / SIGTERM or an ending node exits."""
        old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if threading.current_thread() is threading.main_thread():
            for s in old:
                signal.signal(s, lambda *_: setattr(self, "_stopping", True))
        try:
            with self.prepared():
                try:
                    self.say(f"{self.setup}: {len(self.procs)} nodes, configuration {self.config.source}, "
                             f"ROS_DOMAIN_ID={self.env.get('ROS_DOMAIN_ID', '0')}")
                    for p in self.procs:
                        self._start(p)
                    return self._supervise()
                finally:
                    self.shutdown()
        finally:
            if threading.current_thread() is threading.main_thread():
                for s, h in old.items():
                    signal.signal(s, h)

    def _supervise(self) -> int:
        restart_at: dict = {}
        while not self._stopping:
            for p in self.procs:
                if p.popen is None:
                    if p in restart_at and time.monotonic() >= restart_at[p]:
                        del restart_at[p]
                        self._start(p)
                    continue
                rc = p.popen.poll()
                if rc is None:
                    continue
                if p.reader:
                    p.reader.join(timeout=2)
                p.popen = None
                if p.spec.exit_ends_launch:
                    self.say(f"{p.spec.name} exited ({self._describe_code(rc)}): ending the launch")
                    self.exit_code = rc
                    return rc
                self.deaths.append({"node": p.spec.name, "code": rc, "t": time.time()})
                self.say(f"NODE DIED: {p.spec.name} ({self._describe_code(rc)})")
                if rc == 2:
                    self.say(f"{p.spec.name} refused to start (its error is above): stopping every node "
                             f"rather than run without it")
                    self.exit_code = 2
                    return 2
                if p.spec.respawn and self.respawn:
                    self.say(f"restarting {p.spec.name} in {p.spec.respawn_delay_s:g} s")
                    restart_at[p] = time.monotonic() + p.spec.respawn_delay_s
            time.sleep(0.1)
        self.say("stopping (interrupt)")
        self.exit_code = 0 if not self.deaths else 1
        return self.exit_code

    def stop(self) -> None:
        self._stopping = True

    def shutdown(self) -> None:
        live = [p for p in self.procs if p.popen is not None and p.popen.poll() is None]
        for p in live:
            try:
                p.popen.send_signal(signal.SIGINT)
            except ProcessLookupError:
                pass
        t_end = time.monotonic() + self.grace_s
        for sig in (signal.SIGTERM, signal.SIGKILL):
            for p in live:
                try:
                    p.popen.wait(timeout=max(0.0, t_end - time.monotonic()))
                except subprocess.TimeoutExpired:
                    self.say(f"{p.spec.name} did not stop in time: {sig.name}")
                    try:
                        os.killpg(p.popen.pid, sig)
                    except ProcessLookupError:
                        pass
            t_end = time.monotonic() + KILL_AFTER_S
        for p in live:
            try:
                p.popen.wait(timeout=KILL_AFTER_S)     # reaped, and its end reported
            except subprocess.TimeoutExpired:
                self.say(f"{p.spec.name} (pid {p.popen.pid}) did not end after SIGKILL")
            if p.reader:
                p.reader.join(timeout=2)
            rc = p.popen.returncode
            if rc not in (0, None, -signal.SIGINT):
                self.say(f"{p.spec.name} stopped ({self._describe_code(rc)})")
            p.popen = None
        if live:
            self.say("all nodes stopped")
