"""The console attached in-process: one robot, its one Controller, the web server, and the episodes
that run under the operator's eye.

    ConsoleSession   what ``motormind run --console`` attaches to its episode (``open_console``)
    EpisodeHost      what ``motormind console --robot`` adds: an episode for each instruction submitted,
                     each opened as every episode is (motormind/session/open.py ``open_episode``), its
                     task the typed instruction (``OperatorTask``)
"""
from __future__ import annotations

import datetime as _dt
import inspect
import threading
from pathlib import Path
from typing import Callable

from ..record import Recorder
from ..runner import EpisodeConfig, EpisodeRunner
from .brain import OperatorBrain
from .inprocess import InProcessRuntime
from .server import ConsoleServer


def manual_queue_of(brain):
    """The queue folder of a brain answered through the manual VLM endpoint (``brain.manual``, the
    in-process serve-brain's ``ManualBrain``; through any wrappers' ``inner``), else None."""
    seen = 0
    while brain is not None and seen < 8:
        m = getattr(brain, "manual", None)
        if m is not None and getattr(m, "queue", None) is not None:
            return m.queue
        brain, seen = getattr(brain, "inner", None), seen + 1
    return None


def open_console(spec, images: bool = True, sock=None):
    """An opener for ``open_episode`` (session/open.py): the console that ``spec``
    (session/setup.py ``ConsoleSpec``) describes, on the episode's robot, watching its record;
    ``sock``: its listening socket, bound by the command line before the robot was built."""
    def opener(robot, rec, progress):
        from ..argtypes import split_host_port
        from ..errors import ConfigError
        from ..webserver import listen_for

        def bad(msg):
            return ConfigError(f"--console: {msg}")
        host, port = split_host_port(spec.address, bad)
        console = ConsoleSession(robot, host, port, spec.token, spec.approval, frames=images, frame_hz=spec.frame_hz,
                                 sock=sock or listen_for("--console", host, port))
        console.runtime.watch(rec)
        progress(console.banner())
        return console
    return opener


class OperatorTask:
    """An instruction the operator submitted, as an episode's task (motormind/session/tasks.py): no
    success check of its own (the stack's word and the operator end it); the brain is the host's."""

    suite, task, init_state, seed = "console", 0, 0, 0

    def __init__(self, text: str, n: int, robot_label: str, make_brain, on_brain):
        self.text, self.n, self.robot_label = text, n, robot_label
        self.make_brain, self.on_brain = make_brain, on_brain

    label = property(lambda self: f"episode{self.n}")
    describe = property(lambda self: f"episode {self.n}: {self.text!r}")

    def reuse(self, robot) -> None:
        pass

    def instruction(self, robot=None) -> str:
        return self.text

    def header(self, robot) -> dict:
        return {"instruction": self.text, "robot": self.robot_label, "source": "operator console"}

    def judge(self, robot):
        return None, None

    def brain(self, robot, record):
        takes_record = bool(inspect.signature(self.make_brain).parameters)
        brain = self.make_brain(record) if takes_record else self.make_brain()
        self.on_brain(brain)
        return brain


class _Lent:
    """The host's console lent to one episode: it runs it (the host may stop it), and stays up after."""

    def __init__(self, host: "EpisodeHost", rec: Recorder):
        self.host = host
        host.session.runtime.watch(rec)

    def runner(self, *a, **kw) -> EpisodeRunner:
        self.host.runner = self.host.session.runner(*a, **kw)
        return self.host.runner

    def detach(self, reason: str) -> None:
        pass

    def close(self) -> None:
        self.host.session.detach("the episode is over")
        self.host.runner = self.host.brain = None


class ConsoleSession:
    def __init__(self, robot, host: str = "127.0.0.1", port: int = 8765, token: str | None = None,
                 approval: bool = False, record: Recorder | None = None, frames: bool = True,
                 frame_hz: float = 2.0, allow_hosts: tuple[str, ...] = (), sock=None):
        self.robot = robot
        self.runtime = InProcessRuntime(robot, record=record, frames=frames, frame_hz=frame_hz)
        self.desk, self.view, self.controller = self.runtime.desk, self.runtime.view, self.runtime.controller
        if approval:
            self.desk.set_approval(True)
        self.server = ConsoleServer(self.runtime, host, port, token, allow_hosts=allow_hosts, sock=sock).start()
        if frames:
            self.runtime.capture()            # something to look at before the first command

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def token(self) -> str:
        return self.server.token

    def banner(self) -> str:
        warn = "" if self.server.host.startswith("127.") or self.server.host == "localhost" else \
            "  WARNING: reachable from other machines; the token is the only guard"
        return (f"console: {self.server.url}  token: {self.server.token}{warn}\n"
                f"  open {self.server.control_url} to control (read-only without the token)")

    def runner(self, brain, instruction: str, rec: Recorder, config: EpisodeConfig | None = None,
               **kw) -> EpisodeRunner:
        """An EpisodeRunner under the console: the operator's desk, the console's Controller (its
        e-stop latch outlives the episode), the brain wrapped so a role can be taken over."""
        self.runtime.manual.watch(manual_queue_of(brain))      # a manual VLM: its requests on the page
        ob = OperatorBrain(brain, self.desk)
        runner = EpisodeRunner(self.robot, ob, instruction, rec, config, operator=self.desk,
                               controller=self.controller, **kw)
        ob.abort = lambda: bool(runner._stop_reason)
        self.runtime.attach(runner)
        return runner

    def detach(self, reason: str = "the episode is over") -> None:
        self.runtime.detach(reason)

    def close(self) -> None:
        self.desk.close("the console is closing")
        self.runtime.close()
        self.server.close()


class EpisodeHost:
    """Runs one episode per instruction the operator submits, one at a time, each with its own
    record under ``out_root``. Between episodes the operator may jog; those actions go to the
    session record (``out_root/session``). ``make_brain()`` builds each episode's brain; one that
    takes an argument is given the episode's Recorder (the brain records its calls there, and a
    manual VLM keeps its queue in the episode's folder: ``RUN_DIR/queue/``)."""

    def __init__(self, robot, make_brain: Callable[[], object], out_root: str | Path = "runs/console",
                 host: str = "127.0.0.1", port: int = 8765, token: str | None = None, approval: bool = False,
                 config: Callable[[], EpisodeConfig] | None = None, progress: Callable[[str], None] | None = None,
                 frames: bool = True, frame_hz: float = 2.0, robot_label: str = "",
                 allow_hosts: tuple[str, ...] = (), sock=None):
        self.robot = robot
        self.make_brain = make_brain
        self.out_root = Path(out_root)
        self.session_rec = Recorder(self.out_root / "session")
        self.session = ConsoleSession(robot, host, port, token, approval, self.session_rec, frames, frame_hz,
                                      allow_hosts, sock)
        self.config = config or EpisodeConfig
        self.progress = progress or (lambda s: None)
        self.robot_label = robot_label or robot.profile.name
        self.episodes: list[dict] = []        # summaries, in order
        self.runner: EpisodeRunner | None = None
        self.brain = None
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="motormind-console-host", daemon=True)

    def start(self) -> "EpisodeHost":
        self._thread.start()
        return self

    def _loop(self) -> None:
        desk = self.session.desk
        while not self._closing.is_set():
            text = desk.take_instruction(timeout=0.2)
            if text:
                try:
                    self.episodes.append(self.run_one(text))
                except Exception as e:  # noqa: BLE001 - the console stays up; the failure is shown and logged
                    self.progress(f"episode failed: {type(e).__name__}: {e}")
                    self.session.runtime.record("episode_end", success=False, outcome="error",
                                                reason=f"{type(e).__name__}: {e}")

    def run_one(self, instruction: str) -> dict:
        from ..session.open import open_episode
        from ..session.setup import EpisodeSetup
        stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        n = len(self.episodes) + 1
        task = OperatorTask(instruction, n, self.robot_label, self.make_brain, self._on_brain)
        setup = EpisodeSetup(robot=None, brain=None, episode=self.config(), profile=self.robot.profile.name, task=task,
                             out=str(self.out_root / f"{stamp}_episode{n}"), media=False)
        summary = open_episode(setup, self.progress, robot=self.robot, console=lambda robot, rec, say: _Lent(self, rec))
        self.progress(f"episode ended: {summary['outcome']} - {summary['reason']}")
        return summary

    def _on_brain(self, brain) -> None:
        self.brain = brain
        if getattr(brain, "roles", None):       # an operator-only brain: those roles are the operator's
            self.session.desk.lock_takeover(brain.roles)

    def stop_episode(self, reason: str = "the console is closing") -> None:
        r = self.runner
        if r is not None:
            r.stop(reason)
        manual = getattr(self.brain, "manual", None)
        if manual is not None:         # a request waiting for its answer ends now, not at its timeout
            manual.close()

    def close(self) -> None:
        self._closing.set()
        self.stop_episode()
        self.session.close()
        self._thread.join(timeout=10)
        self.session_rec.close()
