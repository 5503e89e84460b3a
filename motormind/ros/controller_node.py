"""The Controller node: the only node that owns the robot.

A thin wrapper over ``motormind.controller.Controller``: batches from ``commands`` run one at a time
on a worker thread; ``cancel`` sets the batch's CancelToken (honoured at the next action boundary);
``estop`` (latched Bool) stops at once, mid-command; the ``stop`` / ``reset`` services stop and
clear. It publishes the measured state (JointState, PoseStamped), camera images after every batch,
action-boundary ``progress`` events and the ``report``.

Safety around the transport:
* Watchdog: the nodes that feed it (``watchdog_nodes``) send heartbeats; one silent for longer than
  ``watchdog_timeout_s`` stops the robot (latched like an e-stop) and a ``report`` says so.
* A Controller that restarts after an unclean exit (a restart marker left behind) comes up
  stopped, and stays stopped until ``reset``. Batches are never latched, so nothing is replayed.
* In simulation it also answers the privileged channel (the oracle brain and the success check):
  evaluator-only, next to the simulator, so no privileged state goes on the wire except the
  oracle's answers.
"""
from __future__ import annotations

import os
import queue
import threading
import time
from pathlib import Path

import numpy as np
from std_srvs.srv import Trigger

from .. import SCHEMA_VERSION
from ..controller import CancelToken, Controller
from ..commands import check_id
from ..errors import CommandError, ConfigError
from ..mcap_record import image_msg, measured_state_msgs
from ..messages import Report, encode
from ..registry import build_robot
from ..results import FaultKind, Status
from .base import MotorMindNode, msg_type, spin


WATCHDOG_PERIOD_S = 0.1    # how often the watchdog looks
WATCHDOG_LATE_S = 0.5      # a look later than this after the last one: this node was not listening


def _restart_marker(state_dir: str) -> Path:
    root = Path(state_dir) if state_dir else Path(os.environ.get("ROS_HOME", Path.home() / ".ros")) / "motormind"
    dom = os.environ.get("ROS_DOMAIN_ID", "0")
    return root / f"controller-domain{dom}.running"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


class ControllerNode(MotorMindNode):
    role = "controller"
    sections = ("robot", "controller")

    def __init__(self):
        super().__init__()
        self.exit_code = None
        cs = self.ctl = self.settings.controller
        self.settings.check_robot(self.profile)      # a backend and a profile that disagree: it refuses to start
        self._marker = _restart_marker(cs.state_dir)
        restarted = self._check_marker()
        try:
            # the robot moves with the profile the Controller validates with (motormind/registry.py)
            self.robot = build_robot(self.setup.robot, self.profile)
        except BaseException:
            self._marker.unlink(missing_ok=True)   # never started: not a restart
            raise
        self.controller = Controller(self.robot, self.profile, on_event=self._on_event)
        self._queue: queue.Queue = queue.Queue()
        self._tokens: dict[str, CancelToken] = {}
        self._early_cancels: dict[str, tuple] = {}
        self._running = ""                       # the batch the worker runs now
        self._tok_lock = threading.Lock()
        self._estop_held = False
        self._heard: dict[str, float] = {}
        self._tripped: set = set()
        self._wd_nodes = [str(n) for n in cs.watchdog_nodes if str(n)]
        self._wd_timeout = float(cs.watchdog_timeout_s)
        self._oracle = None
        self._answered: dict = {}
        self.listen("commands", self._on_commands)
        self.listen("cancel", self._on_cancel)
        self.listen("estop", self._on_estop)
        self.listen("pause", self._on_pause)
        self.listen("heartbeat", self._on_heartbeat)
        self.create_service(Trigger, self.full("reset"), self._srv_reset)
        self.create_service(Trigger, self.full("stop"), self._srv_stop)
        self._last_images: list = []
        if float(cs.image_repeat_s) > 0:
            self.create_timer(float(cs.image_repeat_s), self._repeat_images)
        self._wd_tick = time.monotonic()
        self.create_timer(WATCHDOG_PERIOD_S, self._watchdog)
        if cs.privileged_service and hasattr(self.robot, "scene"):
            self._priv_q: queue.Queue = queue.Queue()
            self.listen("privileged/request", self._on_priv_request)
            threading.Thread(target=self._priv_loop, name="motormind-privileged", daemon=True).start()
        self._closing = threading.Event()
        self._batch_thread = threading.Thread(target=self._batch_loop, name="motormind-batches", daemon=True)
        self._batch_thread.start()
        threading.Thread(target=self._sensor_loop, name="motormind-sensors", daemon=True).start()
        if restarted:
            self.controller.emergency_stop(restarted)
            threading.Thread(target=self._notice_when_heard, args=("stopped", restarted, "controller"),
                             daemon=True).start()
        self._publish_setup()                    # calibrations and scene facts before the first state
        self._publish_images()
        self._idle()
        if cs.publish_task and hasattr(self.robot, "language_instruction"):
            r = self.settings.robot
            self.send("task", {"instruction": self.robot.language_instruction, "source": "benchmark",
                               "suite": r.suite, "task": int(r.task), "init_state": int(r.init_state)})
        self.log(f"controller ready: backend {self.settings.robot.type}, profile {self.profile.name}, "
                 f"watchdog {self._wd_nodes} after {self._wd_timeout:g} s"
                 + (" - STOPPED (restart); call reset" if restarted else ""))

    # -- restart marker -------------------------------------------------------------------------
    def _check_marker(self) -> str:
        m = self._marker
        why = ""
        if m.exists():
            try:
                pid = int(m.read_text().split()[0])
            except (ValueError, IndexError, OSError):
                pid = -1
            if pid > 0 and pid != os.getpid() and _pid_alive(pid):
                raise ConfigError(f"another Controller (pid {pid}) runs on this domain; only one may own the robot")
            why = (f"restarted after an unclean exit (previous pid {pid}): stopped until reset")
        m.parent.mkdir(parents=True, exist_ok=True)
        m.write_text(f"{os.getpid()}\n")
        return why

    # -- callbacks (executor thread: quick) -------------------------------------------------------
    def _on_commands(self, batch: dict) -> None:
        bid = str(batch.get("batch_id", ""))
        tok = CancelToken()
        with self._tok_lock:
            early = self._early_cancels.pop(bid, None)
            self._tokens[bid] = tok
        if early:
            tok.cancel(*early)
        self._queue.put((batch, tok))

    def _on_cancel(self, msg: dict) -> None:
        """A batch id cancels that batch: at its next action boundary if it runs, before its first
        command if it is queued, on arrival if the cancel overtook it. ``""`` or ``"*"`` cancels
        every batch the Controller holds when the cancel arrives, the running one and the queued
        ones alike (a stop of "what you are doing" must not let the next queued batch start
        moving); a batch that arrives later is not affected (docs/ros2.md, "cancel")."""
        bid = msg.get("batch_id", "") or ""
        if bid not in ("", "*"):
            try:
                bid = check_id(bid, "cancel.batch_id")      # an id of the safe alphabet, as every batch's is
            except CommandError as e:
                self.log(f"dropped a cancel: {str(e)[:300]}")
                return
        reason = str(msg.get("reason", "") or "cancel requested")
        source = str(msg.get("source", "") or "operator")
        every = bid in ("", "*")
        with self._tok_lock:
            targets = dict(self._tokens) if every else ({bid: self._tokens[bid]} if bid in self._tokens else {})
            if not targets and not every:
                self._early_cancels[bid] = (reason, source)     # a cancel may overtake its batch
                while len(self._early_cancels) > 64:
                    self._early_cancels.pop(next(iter(self._early_cancels)))
        for t in targets.values():
            t.cancel(reason, source)
        if targets:
            self.log(f"cancel {bid or '(all)'} from {source}: {', '.join(targets)}: {reason}")

    def _queued(self) -> list[str]:
        """The ids of the batches that arrived and have not started (in arrival order)."""
        with self._tok_lock:
            return [b for b in self._tokens if b != self._running]

    def _on_estop(self, msg) -> None:
        self._estop_held = bool(msg.data)
        if msg.data and not self.controller.estopped:
            self.controller.emergency_stop("estop topic")
            self.log("EMERGENCY STOP (estop topic)")
            self.worker.put(self._notice, "stopped", "emergency stop (estop topic)", "estop")

    def _on_pause(self, msg) -> None:
        """The operator's pause (latched Bool): hold at the next action boundary until false."""
        if msg.data and not self.controller.paused:
            self.controller.pause("pause topic")
        elif not msg.data and self.controller.paused:
            self.controller.resume()

    def _on_heartbeat(self, msg: dict) -> None:
        self._heard[str(msg.get("node", ""))] = time.monotonic()

    def _watchdog(self) -> None:
        """Runs on the executor thread with the heartbeat callbacks. A tick that comes late means
        this thread was not listening (the process starved, a long callback): the heartbeats that
        came meanwhile wait behind this tick, so it does not judge; the next one, after them, does.
        Silence is counted only while the Controller listened."""
        now = time.monotonic()
        late, self._wd_tick = now - self._wd_tick > WATCHDOG_LATE_S, now
        if late:
            return
        for n in self._wd_nodes:
            t = self._heard.get(n)
            if t is None or n in self._tripped:
                continue                      # armed once heard; tripped until reset
            if now - t > self._wd_timeout:
                self._tripped.add(n)
                why = f"watchdog: {n} silent for {now - t:.1f} s (timeout {self._wd_timeout:g} s)"
                self.controller.emergency_stop(why)
                self.log(f"STOP - {why}")
                self.worker.put(self._notice, "stopped", why, "watchdog")

    def _srv_stop(self, _req, resp):
        self.controller.emergency_stop("stop service")
        self.worker.put(self._notice, "stopped", "stop service", "operator")
        resp.success, resp.message = True, "stopped (latched until reset)"
        return resp

    def _srv_reset(self, _req, resp):
        if self._estop_held:
            resp.success, resp.message = False, "the estop topic still holds true; release it first"
            return resp
        self.controller.reset_estop()
        for n in self._tripped:
            self._heard.pop(n, None)          # re-armed when heard again
        self._tripped.clear()
        self.worker.put(self._notice, "ready", "reset", "operator")
        self.worker.put(self._publish_setup)
        self.worker.put(self._idle)
        resp.success, resp.message = True, "ready"
        return resp

    # -- publishing -------------------------------------------------------------------------------
    def _notice(self, status: str, reason: str, source: str) -> None:
        """A Controller notice on the report topic (no batch): stopped / ready."""
        try:
            st = self.robot.observe().state_dict()
        except Exception:  # noqa: BLE001 - a faulted robot may not answer
            st = {}
        self.send("report", {"schema_version": SCHEMA_VERSION, "batch_id": "", "subgoal_id": "", "status": status,
                             "reason": reason, "claims_done": False, "estop": self.controller.estopped,
                             "source": source, "results": [], "start_state": st, "end_state": st,
                             "duration_s": 0.0, "steps": 0})

    def _notice_when_heard(self, status: str, reason: str, source: str, window_s: float = 20.0) -> None:
        """A notice at start-up, on the report topic (not latched): sent again to every subscriber
        that appears during the first ``window_s`` (the same notice twice is harmless)."""
        pub, t_end, seen = self.publisher("report"), time.monotonic() + window_s, 0
        while time.monotonic() < t_end and self.controller.estopped:
            n = pub.get_subscription_count()
            if n > seen:
                seen = n
                time.sleep(0.3)               # matched both ways
                self._notice(status, reason, source)
            time.sleep(0.1)

    def _on_event(self, kind: str, data: dict) -> None:
        if kind == "command_start":               # with the batches waiting behind this one
            self.send("progress", {"event": kind, **data, "queued": self._queued()})
        elif kind == "command_end":
            self.send("progress", {"event": kind, **data, "state": self.robot.observe().state_dict()})
        elif kind in ("pause", "resume", "held"):     # the operator's hold, for the console and the record
            self.record(kind, **data)

    def cameras(self) -> list[str]:
        """The cameras whose images this Controller publishes (none when images are off)."""
        return list(self.robot.camera_names) if self.cfg.images else []

    def _idle(self) -> None:
        try:
            self.send("progress", {"event": "idle", "state": self.robot.observe().state_dict(),
                                   "stopped": self.controller.estop_reason if self.controller.estopped else "",
                                   "cameras": self.cameras()})
        except Exception as e:  # noqa: BLE001
            self.log(f"observe failed: {e}")

    def _sensor_loop(self) -> None:
        """State at state_rate_hz and images at image_rate_hz, on a thread of their own: reading the
        robot may wait for the batch thread (the simulator's lock), and the executor thread, which
        takes e-stops, cancels and heartbeats, must never wait for it."""
        periods = {}
        if float(self.ctl.state_rate_hz) > 0:
            periods[self._publish_state] = 1.0 / float(self.ctl.state_rate_hz)
        if float(self.ctl.image_rate_hz) > 0:
            periods[self._publish_images] = 1.0 / float(self.ctl.image_rate_hz)
        due = {fn: time.monotonic() for fn in periods}
        while periods and not self._closing.is_set():
            fn = min(due, key=due.get)
            if self._closing.wait(max(0.0, due[fn] - time.monotonic())):
                return
            try:
                fn()
            except Exception as e:  # noqa: BLE001 - a failed read is logged; the next one may work
                self.log(f"{fn.__name__} failed: {e}")
            due[fn] = max(due[fn] + periods[fn], time.monotonic())

    def _publish_state(self) -> None:
        try:
            obs = self.robot.observe()
        except Exception:  # noqa: BLE001
            return
        t_ns = self.get_clock().now().nanoseconds
        js, ps = measured_state_msgs(obs, t_ns)     # as measured: rounding (state_dict) is for prompts only
        m = msg_type("sensor_msgs/msg/JointState")()
        m.header.stamp.sec, m.header.stamp.nanosec = js["header"]["stamp"]["sec"], js["header"]["stamp"]["nanosec"]
        m.header.frame_id = "base"
        m.name, m.position = js["name"], js["position"]
        self.publisher("state").publish(m)
        pm = msg_type("geometry_msgs/msg/PoseStamped")()
        pm.header = m.header
        pos, ori = ps["pose"]["position"], ps["pose"]["orientation"]
        pm.pose.position.x, pm.pose.position.y, pm.pose.position.z = pos["x"], pos["y"], pos["z"]
        pm.pose.orientation.x, pm.pose.orientation.y = ori["x"], ori["y"]
        pm.pose.orientation.z, pm.pose.orientation.w = ori["z"], ori["w"]
        self.publisher("eef_pose").publish(pm)

    def _publish_setup(self) -> None:
        """What a role node needs to mark frames and measure points (docs/grounding.md, "Over ROS 2"),
        latched: each camera's calibration on ``cameras`` (``CameraCalibration.to_json``: the
        calibration file's format, pose and mount included) and as a standard ``camera_info``, and
        the backend's ``scene_facts``. A backend without calibrations says so with an empty map."""
        try:
            cams = self.robot.cameras() if hasattr(self.robot, "cameras") else {}
        except Exception as e:  # noqa: BLE001 - no calibration: no marks, no measuring; said, not fatal
            self.log(f"cameras() failed: {e}: no calibrations published")
            cams = {}
        try:
            scene = self.robot.scene_facts() if hasattr(self.robot, "scene_facts") else {}
        except Exception as e:  # noqa: BLE001
            self.log(f"scene_facts() failed: {e}")
            scene = {}
        axis = [float(v) for v in getattr(self.robot, "closing_axis_eef", (0.0, 1.0, 0.0))]
        self.send("cameras", {"cameras": {n: c.to_json() for n, c in cams.items()}, "closing_axis_eef": axis})
        self.send("scene_facts", dict(scene or {}))
        t = self.get_clock().now().to_msg()
        for name, cal in cams.items():
            m = msg_type("sensor_msgs/msg/CameraInfo")()
            m.header.stamp, m.header.frame_id = t, name
            m.width, m.height = int(cal.width_px), int(cal.height_px)
            m.distortion_model, m.d = "plumb_bob", [0.0] * 5          # rectified images: no distortion
            m.k = [cal.fx_px, 0.0, cal.cx_px, 0.0, cal.fy_px, cal.cy_px, 0.0, 0.0, 1.0]
            m.r = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0]
            m.p = [cal.fx_px, 0.0, cal.cx_px, 0.0, 0.0, cal.fy_px, cal.cy_px, 0.0, 0.0, 0.0, 1.0, 0.0]
            self.publisher(f"camera/{name}/camera_info").publish(m)

    def _publish_images(self) -> None:
        """Each camera's frame on ``camera/NAME/image`` (rgb8) and, where the backend gives one, its
        depth image of the same look on ``camera/NAME/depth`` (32FC1, metres), with the same stamp."""
        if not self.cameras():
            return
        try:
            obs = self.robot.observe(images=True, depth=True)
        except Exception as e:  # noqa: BLE001
            self.log(f"render failed: {e}")
            return
        t_ns = self.get_clock().now().nanoseconds
        out = []
        for name, img in obs.images.items():
            d = image_msg(img, t_ns, name)
            m = msg_type("sensor_msgs/msg/Image")()
            m.header.stamp.sec, m.header.stamp.nanosec = d["header"]["stamp"]["sec"], d["header"]["stamp"]["nanosec"]
            m.header.frame_id = name
            m.height, m.width, m.encoding, m.is_bigendian, m.step = d["height"], d["width"], "rgb8", 0, d["step"]
            m.data = d["data"]
            dep = (obs.depth or {}).get(name)
            dm = None
            if dep is not None:
                a = np.ascontiguousarray(np.asarray(dep, dtype="<f4"))
                dm = msg_type("sensor_msgs/msg/Image")()
                dm.header = m.header
                dm.height, dm.width, dm.encoding, dm.is_bigendian = a.shape[0], a.shape[1], "32FC1", 0
                dm.step, dm.data = a.shape[1] * 4, a.tobytes()
                self.publisher(f"camera/{name}/depth").publish(dm)   # before the frame: a look waits for the pair
            self.publisher(f"camera/{name}/image").publish(m)
            out.append((name, m, dm))
        self._last_images = out

    def _repeat_images(self) -> None:
        """Best effort cannot be latched: the last frames again (same stamps) for late subscribers."""
        if self.controller.current is None:
            for name, m, dm in list(self._last_images):
                if dm is not None:
                    self.publisher(f"camera/{name}/depth").publish(dm)
                self.publisher(f"camera/{name}/image").publish(m)

    # -- batches (worker thread) ------------------------------------------------------------------
    def _batch_loop(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            batch, tok = item
            bid = str(batch.get("batch_id", ""))
            with self._tok_lock:
                self._running = bid
            try:
                jog = batch.get("source") == "operator"     # the console's jog: runs while paused
                rep = self.controller.run(batch, tok, source="operator" if jog else "executor", hold=not jog)
            except Exception as e:  # noqa: BLE001 - a robot error is reported, never swallowed
                self.log(f"batch {bid} failed: {e}")
                rep = Report(bid, str(batch.get("subgoal_id", "")), Status.FAULT, reason=f"{type(e).__name__}: {e}",
                             estop=self.controller.estopped, source="controller", fault_kind=FaultKind.SOFTWARE)
            finally:
                with self._tok_lock:
                    self._tokens.pop(bid, None)
                    self._running = ""
            d = encode(rep)
            try:
                self._publish_images()       # images after the batch go out before its report
                self._idle()
                self.send("report", d)
            except Exception:  # noqa: BLE001 - publishing fails once the node is being destroyed
                if not self._closing.is_set():
                    raise
                self.log(f"{bid} {d['status']} (not published: the node is stopping)")
                return
            self.log(f"{bid} {d['status']}" + (f" - {d['reason']}" if d.get("reason") else ""))

    # -- the privileged channel (simulation, evaluator only) ------------------------------------------
    def _on_priv_request(self, msg: dict) -> None:
        self._priv_q.put(msg)

    def _priv_loop(self) -> None:
        from ..brains.base import BrainRequest
        from ..registry import BrainConfig, build_brain
        while True:
            msg = self._priv_q.get()
            rid = msg.get("id")
            if rid in self._answered:                 # a resent request: the same answer again
                self.send("privileged/response", self._answered[rid])
                continue
            try:
                if msg.get("op") == "respond":
                    if self._oracle is None:
                        self._oracle = build_brain(BrainConfig("oracle"), self.robot, self.profile)
                    req = BrainRequest(msg["role"], msg.get("prompt_name", msg["role"]), "", "", {}, {},
                                       msg.get("context") or {})
                    rep = self._oracle.respond(req)
                    out = {"id": rid, "ok": True, "text": rep.text, "brain": rep.brain, "privileged": True}
                elif msg.get("op") == "evaluate":
                    r = self.robot
                    out = {"id": rid, "ok": True, "success": bool(r.success()), "steps": int(r.steps_used),
                           "budget": int(r.budget), "privileged": True}
                else:
                    out = {"id": rid, "ok": False, "error": f"unknown op {msg.get('op')!r}"}
            except Exception as e:  # noqa: BLE001
                out = {"id": rid, "ok": False, "error": f"{type(e).__name__}: {e}"}
            self._answered[rid] = out
            while len(self._answered) > 256:
                self._answered.pop(next(iter(self._answered)))
            self.send("privileged/response", out)

    def close(self) -> None:
        self._closing.set()
        self._queue.put(None)
        try:
            self.robot.stop()
        finally:
            try:
                self.robot.close()
            finally:
                if self.clean_exit:                # the next start is a fresh one, not a restart
                    self._marker.unlink(missing_ok=True)
                super().close()


def main(argv=None) -> int:
    return spin(ControllerNode)
