"""The console attached in-process: to ``motormind run --console``, or hosting its own episodes on a
robot (``motormind console --robot fake|xarm6``).

It owns the one Controller of the robot, so the e-stop latch outlives an episode and a jog goes
through exactly the validation the VLM's batches meet. Frames come from the roles' looks and from
the measured robot at every action boundary (taken on the Controller's thread, between motions).
"""
from __future__ import annotations

import threading
import time

from ..controller import Controller
from .runtime import ActionError, Runtime

_RECORDED = ("estop", "estop_reset", "pause", "resume", "held")


def jpeg(img, quality: int = 80) -> bytes:
    import cv2
    ok, buf = cv2.imencode(".jpg", cv2.cvtColor(img, cv2.COLOR_RGB2BGR), [cv2.IMWRITE_JPEG_QUALITY, quality])
    return buf.tobytes() if ok else b""


class InProcessRuntime(Runtime):
    transport = "in-process"

    def __init__(self, robot, view=None, desk=None, record=None, frames: bool = True, frame_hz: float = 0.0):
        super().__init__(view, desk)
        self.robot = robot
        self.profile = robot.profile
        self.controller = Controller(robot, self.profile, on_event=self._on_controller_event)
        self.runner = None
        self.frames = frames
        self._session_record = record          # events while no episode runs (a session record)
        self._jog_lock = threading.Lock()
        self._jog_thread: threading.Thread | None = None
        self._closed = threading.Event()
        self.capture_error = ""
        self._capture_thread: threading.Thread | None = None
        if frame_hz > 0:       # frames mid-command too (backends serialise observe with their motion)
            self._capture_thread = threading.Thread(target=self._capture_loop, args=(1.0 / frame_hz,),
                                                    name="motormind-console-frames", daemon=True)
            self._capture_thread.start()
        p = self.profile
        self.view.directions = p.directions
        self.view.set_extra(transport=self.transport, robot={
            "profile": p.name, "description": p.description, "directions": sorted(p.directions),
            "axes": sorted(p.rotation_axes), "limits": p.describe_limits(), "cameras": list(robot.camera_names)})
        self.refresh()

    # -- episodes -------------------------------------------------------------------------------
    def attach(self, runner) -> None:
        """Attach to an EpisodeRunner built with ``operator=self.desk, controller=self.controller``."""
        self.runner = runner
        self.desk.open()
        self.watch(runner.rec)
        runner.controller_listeners.append(self._on_runner_controller_event)
        runner.observers.append(self._on_look)

    def watch(self, rec) -> None:
        """Show this record's events (before the runner exists: the episode's start)."""
        if self.view.on_event not in rec.listeners:
            rec.listeners.append(self.view.on_event)

    def detach(self, reason: str = "the episode is over") -> None:
        self.desk.close(reason)
        self.runner = None
        self.controller.on_event = self._on_controller_event

    def record(self, kind: str, **data) -> None:
        r = self.runner
        if r is not None:
            r.rec(kind, **data)                 # the episode record (the view listens to it)
            return
        ev = {"t": self.view.now(), "kind": kind, **data}
        if self._session_record is not None:
            ev = self._session_record.event(kind, **data)
        self.view.on_event(ev)

    # -- frames and events ----------------------------------------------------------------------
    def _on_look(self, label: str, obs) -> None:
        for cam, img in (obs.images or {}).items():
            self.view.set_frame(cam, jpeg(img))
        self.view.set_state(obs.state_dict())

    def capture(self) -> None:
        obs = self.robot.observe(images=self.frames)
        self._on_look("", obs)

    def _capture_loop(self, period: float) -> None:
        wait = period
        while not self._closed.wait(wait):
            t0 = time.monotonic()
            try:
                self.capture()
                self.capture_error = ""
            except Exception as e:  # noqa: BLE001 - a failed look is shown once, the console goes on
                msg = f"{type(e).__name__}: {e}"
                if msg != self.capture_error:
                    self.capture_error = msg
                    self.view.set_extra(capture_error=msg)
            # a render holds the simulator: never spend more than a quarter of the time on frames
            wait = max(period, 3.0 * (time.monotonic() - t0))

    def close(self, timeout_s: float = 30.0) -> None:
        """Stop taking frames and wait for the console's own threads: a render or a jog still under
        way when the robot is closed (or the interpreter ends) would run on a closed simulator, or
        be torn down inside native code (a daemon thread inside OpenCV or MuJoCo at exit aborts the
        process: "terminate called without an active exception")."""
        self._closed.set()
        self.manual.close()
        for t in (self._capture_thread, self._jog_thread):
            if t is not None and t is not threading.current_thread():
                t.join(timeout_s)

    def _on_runner_controller_event(self, kind: str, data: dict) -> None:
        if kind in _RECORDED:
            self.record(kind, **data)
        if kind == "command_end":
            self.capture()
        self.refresh()

    def _on_controller_event(self, kind: str, data: dict) -> None:   # no episode attached
        if kind in ("command_start", "command_end") or kind in _RECORDED:
            self.record(kind, **data)
        if kind == "command_end":
            self.capture()
        self.refresh()

    # -- what the operator may do now ----------------------------------------------------------------
    def status(self) -> dict:
        c = self.controller
        busy = c.busy or self._jog_lock.locked()
        jog = self.LATCHED if c.estopped else (
            f"the robot is executing a batch ({c.holding}, held by the pause): cancel it, or resume"
            if c.holding else "the robot is executing a batch; wait for it to end" if busy else "")
        if not self.desk.paused:
            pause, note = "running", ""
        elif c.holding:
            pause, note = "pausing", f"{c.holding} is held; the episode parks when it ends (cancel it, or resume)"
        elif busy:
            pause, note = "pausing", "the command under way finishes first"
        elif self.runner is None or self.desk.parked:
            pause, note = "paused", ""
        else:
            pause, note = "pausing", "the episode holds before its next batch (it finishes what it is doing)"
        return {"pause": pause, "pause_note": note, "jog": jog, "approve": self.LATCHED if c.estopped else ""}

    def refuse_approval(self, batch: dict) -> str:
        if self.controller.estopped:
            return self.LATCHED
        valid, reasons, _ = self.controller.validate(batch, self.robot.observe(), "operator")
        return "" if valid is not None else self.first_reason(reasons)

    # -- robot actions --------------------------------------------------------------------------
    def do_instruction(self, args, who):
        text = self.instruction_text(args)
        self.desk.add_instruction(text)
        if self.runner is None:
            return {"detail": f"queued: {text!r} (it starts the next episode)"}
        return {"detail": f"the Planner replans for {text!r} before the next batch"}

    def do_pause(self, args, who):
        self.controller.pause(f"paused by {who.get('name') or 'operator'}")
        self.desk.set_paused(True)
        st = self.status()
        return {"detail": "paused: the arm is idle (you may jog)" if st["pause"] == "paused" else
                f"pausing: {st['pause_note']}", "pause": st["pause"]}

    def do_resume(self, args, who):
        if self.controller.estopped:
            raise ActionError("resume: the emergency stop is latched; reset it first", 409)
        self.controller.resume()
        self.desk.set_paused(False)
        return {"detail": "resumed"}

    def do_cancel(self, args, who):
        reason = str(args.get("reason") or f"cancelled by {who.get('name') or 'operator'}")
        n = self.desk.reject_waiting(reason, who.get("name", ""))
        r = self.runner
        cancelled = bool(r and r.cancel(reason, "operator"))
        if not cancelled and not n:
            return {"detail": "nothing queued to cancel"}
        return {"detail": ("the batch under way stops at the next action boundary" if cancelled else "")
                + (f"{'; ' if cancelled else ''}{n} waiting batch(es) rejected" if n else "")}

    def do_estop(self, args, who):
        reason = f"operator e-stop ({who.get('name') or 'console'})"
        self.desk.set_paused(True)               # the episode holds until an explicit reset and resume
        self.controller.pause(reason)
        self.controller.emergency_stop(reason)
        return {"detail": "EMERGENCY STOP: motion stopped, latched until reset"}

    def do_reset(self, args, who):
        if not self.controller.estopped:
            return {"detail": "the emergency stop was not latched"}
        clear = getattr(self.robot, "clear_fault", None)
        if callable(clear):
            try:
                clear()
            except Exception as e:  # noqa: BLE001 - the arm refuses: say why, stay latched
                raise ActionError(f"reset: the robot did not clear its fault: {e}", 409) from None
        self.controller.reset_estop()
        return {"detail": "emergency stop reset; still paused: resume to go on"}

    def do_jog(self, args, who):
        """A jog runs whenever the arm is idle (no batch executing) and the operator holds control;
        an episode's next batch waits for it (one batch at a time on the Controller)."""
        cmd = self.jog_command(args)
        if not self._jog_lock.acquire(blocking=False):
            raise ActionError("jog: the previous jog is still moving; wait for it to end", 409)
        if self.controller.busy:
            self._jog_lock.release()
            self.refresh()
            raise ActionError("jog: the robot is executing a batch; wait for it to end", 409)
        try:
            batch = {"batch_id": self.next_jog_id(), "subgoal_id": "operator", "commands": [cmd]}
            valid, reasons, _ = self.controller.validate(batch, self.robot.observe(), "operator")
            self.record("batch", batch=batch, source=f"operator jog ({who.get('name') or 'operator'})",
                        brain="operator", privileged=False)
            if valid is None or self.controller.estopped:
                rep = self.controller.run(batch, source="operator")      # rejected: moves nothing
                self.record("report", **rep.to_json())
                raise ActionError(f"jog rejected: {rep.reason}", 422)
        except BaseException:
            self._jog_lock.release()
            self.refresh()
            raise

        def go():
            try:
                rep = self.controller.run(batch, source="operator", hold=False)   # a pause holds the episode, not a jog
                self.record("report", **rep.to_json())
            finally:
                self._jog_lock.release()
                self.refresh()
        self._jog_thread = threading.Thread(target=go, name="motormind-console-jog", daemon=True)
        self._jog_thread.start()
        return {"detail": f"{batch['batch_id']}: {cmd['op']} started", "batch_id": batch["batch_id"]}

    def wait_jog(self, timeout: float = 30.0) -> None:
        t = self._jog_thread
        if t is not None:
            t.join(timeout)
