"""The operator console as a ROS 2 node on the MotorMind topic contract (docs/console.md, "ROS 2").

It serves the same page, view and actions as the in-process console (motormind/console/): the view
is folded from the graph's topics turned into the record events ``ConsoleView.on_event`` knows,
and every robot action is a message on the contract:

    instruction -> task                     pause/resume -> pause (latched Bool)
    cancel      -> cancel (the batch under way)   estop -> estop (latched Bool true) + pause
    reset       -> the Controller's reset service (its answer is the action's answer)
    jog         -> a one-command batch on commands (source operator): the Controller validates it like
                   any batch; a rejection comes back on report and is the action's error
    approval, takeover -> console/mode; the Executor and Verifier ask on console/request and the
                   console's OperatorDesk answers on console/response (motormind/ros/operator_proxy.py)

Every operator action is recorded on ``events`` (the recorder keeps it in the MCAP). Only
this module and the other ``motormind/ros`` modules import rclpy.

    run_console_node(host, port, token, manual_queue=DIR)     # motormind console --ros [--manual-queue DIR]
    python -m motormind.ros console --ros-args ...   # motormind launch ... console:=true
"""
from __future__ import annotations

import math
import os
import secrets
import threading
import time

from std_msgs.msg import Bool
from std_srvs.srv import Trigger

from .. import SCHEMA_VERSION
from ..console.runtime import ActionError, Runtime
from ..console.server import ConsoleServer
from ..errors import ConfigError
from ..geometry import quat_to_mat
from . import graph
from .base import MotorMindNode, image_from_msg, spin

# record events the console derives from their own topics (the copies on ``events`` are dropped)
_FROM_TOPICS = {"plan", "memory", "pause", "resume", "episode_start", "episode_end", "instruction"}
# what the view's episode_start clears (held after a new task until its episode's start arrives)
_EPISODE_KINDS = {"plan", "replan", "batch", "review", "review_decision", "command_start", "command_end", "report",
                  "verdict"}
_MAX_KEPT = 256
# the page, when the episode's VLM is the manual endpoint and no queue folder was named
UNREACHABLE = ("its queue folder is not reachable from this console: name it (motormind console --ros --manual-queue "
               "DIR, or console_manual_queue:=DIR), the folder the role nodes' VLM config names as queue")


def _bounded(d: dict, n: int = _MAX_KEPT) -> None:
    while len(d) > n:
        d.pop(next(iter(d)))


def _strip(msg: dict, *drop: str) -> dict:
    return {k: v for k, v in msg.items() if k not in ("schema_version", *drop)}


class _ProfileOnly:
    """What ``Controller`` needs to validate without a robot: the profile (validate moves nothing)."""

    def __init__(self, profile):
        self.profile = profile


class RosRuntime(Runtime):
    """The console's actions over the topic contract. The desk actions (claim, approval, approve,
    reject, takeover, answer) are the shared ``Runtime``'s; the robot actions publish."""

    transport = "ros2"

    def __init__(self, node: "ConsoleNode"):
        super().__init__()
        self.node = node
        cs = node.settings.console
        self.reply_s = float(cs.reply_wait_s)
        self.stale_s = float(cs.stale_batch_s)
        self.hold_s = float(cs.hold_s)
        self._cv = threading.Condition()
        self.open: dict[str, float] = {}       # batches sent and not reported: id -> last sign of life
        self.reports: dict[str, dict] = {}     # recent reports by batch id (a jog's answer)
        self.started: dict[str, bool] = {}     # batches whose first command started
        self.episode_running = False
        self.estopped = False                  # the Controller's latch, as its notices and idle events say
        self.estop_held = False                # the estop topic's last value
        self.my_estop = False                  # this console latched it
        self.paused = False                    # the pause topic's last value
        self.executor_parked = False           # the Executor said it holds before its next batch
        self._pause_shown = False
        self.requests: dict[str, dict] = {}    # console/request id -> {"withdrawn", "answer"}
        self._mode_sent = None
        self._hold_until = 0.0                 # a new task: its episode's events wait for its start
        self._held: list = []
        self._fold_lock = threading.Lock()
        self.desk.listeners.append(self._publish_mode)

    # -- records --------------------------------------------------------------------------------
    def fold(self, kind: str, **data) -> None:
        ev = {"t": self.view.now(), "kind": kind, **data}
        with self._fold_lock:
            if kind in _EPISODE_KINDS and self._hold_until:
                self._held.append(ev)
                return
        self.view.on_event(ev)

    def release(self, force: bool = False) -> None:
        """Fold what a new task's episode held (at its start, or after hold_s without one)."""
        with self._fold_lock:
            if not self._hold_until or not (force or time.monotonic() > self._hold_until):
                return
            held, self._held, self._hold_until = self._held, [], 0.0
            for ev in held:
                self.view.on_event(ev)

    def tick(self) -> None:
        """Timer: fold what a new task held, and push the status when what it says has changed
        (topic callbacks stay quick; the page lags the graph by at most a tick)."""
        self.release()
        if self.status() != self.view.extra.get("status"):
            self.refresh()

    def record(self, kind: str, **data) -> None:
        self.fold(kind, **data)
        self.node.record(kind, **data)          # on /motormind/events: the recorder keeps it

    # -- the desk, shared with the Executor and Verifier nodes ----------------------------------------
    def _publish_mode(self) -> None:
        mode = {"approval": self.desk.approval, "takeover": sorted(self.desk.takeover)}
        if mode != self._mode_sent:
            self._mode_sent = mode
            self.node.send("console/mode", mode)

    def on_request(self, msg: dict) -> None:
        rid, kind = str(msg.get("id") or ""), msg.get("kind")
        if not rid:
            return
        with self._cv:
            r = self.requests.get(rid)
            if kind == "withdraw":
                if r is not None:
                    r["withdrawn"] = True
                return
            if r is not None:                  # asked again (a console came back): the same answer
                if r["answer"] is not None:
                    self.node.send("console/response", r["answer"])
                return
            self.requests[rid] = {"withdrawn": False, "answer": None}
            _bounded(self.requests)
        threading.Thread(target=self._serve, args=(rid, kind, msg), name=f"console-{rid}", daemon=True).start()

    def _serve(self, rid: str, kind, msg: dict) -> None:
        def abort() -> bool:
            return self.node.closing or bool(self.requests.get(rid, {}).get("withdrawn"))
        if kind == "review":
            r = self.desk.review(msg.get("batch") if isinstance(msg.get("batch"), dict) else {}, abort)
            out = {"id": rid, "decision": r.decision, "batch": r.batch, "note": r.note, "by": r.by}
        elif kind == "answer":
            text = self.desk.ask(str(msg.get("role", "")), msg.get("context") or {}, str(msg.get("error") or ""), abort)
            out = {"id": rid, "text": text}
        else:
            out = {"id": rid, "error": f"kind: unknown {kind!r} (review | answer | withdraw)"}
        with self._cv:
            if rid in self.requests:
                self.requests[rid]["answer"] = out
        if not self.node.closing:
            self.node.send("console/response", out)

    # -- topics -> the view (callbacks: quick) -----------------------------------------------------
    def on_task(self, msg: dict) -> None:
        if msg.get("instruction"):
            self.fold("instruction", text=str(msg["instruction"]), source=msg.get("source", ""))
            # The Executor starts an episode on a new task, and the view's episode_start clears the plan
            # and the queue. Its start may arrive after the episode's first plan or batch (other
            # publishers, other topics): those wait for it, up to hold_s.
            with self._fold_lock:
                self._hold_until = time.monotonic() + self.hold_s

    def on_plan(self, msg: dict) -> None:
        if msg.get("decision") == "plan":
            self.fold("plan", plan_id=msg.get("plan_id"), subgoals=msg.get("subgoals") or [],
                      replan_reason=msg.get("reason", ""), brain=msg.get("brain", ""),
                      privileged=bool(msg.get("privileged")))
        elif msg.get("decision") == "gave_up":
            self.fold("replan", reason=f"the planner gave up: {msg.get('reason', '')}")

    # Messages on different topics (and from different nodes) can arrive in any order: a batch's
    # report may overtake the batch itself or its last progress events. A report is final.
    def on_commands(self, batch: dict) -> None:
        bid = str(batch.get("batch_id", ""))
        with self._cv:
            rep = self.reports.get(bid)
            if rep is None:
                self.open[bid] = time.monotonic()
                _bounded(self.open)
        src = batch.get("source") or "executor"
        if src == "operator" and batch.get("rationale"):
            src = str(batch["rationale"])
        self.fold("batch", batch={k: batch.get(k) for k in ("batch_id", "subgoal_id", "commands")}, source=src)
        if rep is not None:
            self.fold("report", **_strip(rep))

    def on_progress(self, msg: dict) -> None:
        ev = msg.get("event")
        if isinstance(msg.get("state"), dict) and msg["state"]:
            self.node.merge_state(msg["state"])
        if ev in ("command_start", "command_end"):
            bid = str(msg.get("batch_id", ""))
            with self._cv:
                if bid in self.open:
                    self.open[bid] = time.monotonic()
                self.started[bid] = True
                _bounded(self.started)
                self._cv.notify_all()
                reported = bid in self.reports
            if not reported:
                self.fold(ev, **_strip(msg, "event", "state"))
        elif ev == "idle":
            stopped = str(msg.get("stopped") or "")
            if stopped and not self.estopped:   # a console that joins late learns the latch here (a reset
                self.estopped = True             # always comes with a "ready" notice on report)
                self.fold("controller_status", state="stopped", estop=True, reason=stopped)

    def on_report(self, msg: dict) -> None:
        bid = str(msg.get("batch_id", ""))
        if isinstance(msg.get("end_state"), dict) and msg["end_state"]:
            self.node.merge_state(msg["end_state"])
        if not bid:                             # a Controller notice: stopped / ready
            self.estopped = bool(msg.get("estop"))
            if "restarted" in str(msg.get("reason", "")):
                with self._cv:
                    self.open.clear()           # a restarted Controller runs nothing it had
            self.fold("controller_status", state=msg.get("status", ""), estop=self.estopped,
                      reason=msg.get("reason", ""), source=msg.get("source", ""))
            return
        with self._cv:
            self.open.pop(bid, None)
            self.reports[bid] = msg
            _bounded(self.reports)
            self._cv.notify_all()
        self.fold("report", **_strip(msg))

    def on_verdict(self, msg: dict) -> None:
        self.fold("verdict", **_strip(msg))

    def on_memory(self, msg: dict) -> None:
        self.fold("memory", summary=msg.get("summary", ""), facts=msg.get("facts") or [])

    def on_episode(self, msg: dict) -> None:
        if msg.get("event") == "start":
            self.episode_running = True
            self.fold("episode_start", instruction=msg.get("instruction", ""), brain=msg.get("brain", ""),
                      privileged=bool(msg.get("privileged")))
            self.release(force=True)
        elif msg.get("event") == "end":
            self.episode_running = False
            res = msg.get("result") or {}
            # vlm_calls: the episode's count as its record (this end message, the recorder's MCAP) gives it;
            # vlm_counted: which calls it counts (per node, those numbered up to it: role_nodes.py)
            self.fold("episode_end", vlm_counted=msg.get("vlm_counted"),
                      **{k: res.get(k) for k in ("success", "outcome", "reason", "steps", "wall_s", "vlm_calls")})

    def on_event(self, ev: dict) -> None:
        kind = ev.get("kind")
        if not kind or ev.get("origin") == self.node.origin or kind in _FROM_TOPICS:
            return
        if kind == "parked":                   # the Executor holds at its loop head (role_nodes.py)
            self.executor_parked = self.paused
            self.refresh()
        self.fold(kind, **_strip(ev, "t", "kind"))

    def on_estop(self, msg) -> None:
        self.estop_held = bool(msg.data)

    def on_pause(self, msg) -> None:
        on = bool(msg.data)
        self.paused = on
        if not on:
            self.executor_parked = False
        if on != self.desk.paused:
            self.desk.set_paused(on)
        if on != self._pause_shown:
            self._pause_shown = on
            if on:
                self.fold("pause", reason="pause topic")
            else:
                self.fold("resume")

    # -- what the operator may do now (the same rules as in-process: motormind/console/inprocess.py) --
    def status(self) -> dict:
        latched = self.estopped or self.estop_held
        running = self._under_way()
        jog = self.LATCHED if latched else (
            f"the robot is executing batch {running[0]}; wait for it to end (or cancel it)" if running else "")
        if not self.paused:
            pause, note = "running", ""
        elif running:
            pause, note = "pausing", f"batch {running[0]} holds at its next action boundary (cancel it, or resume)"
        elif not self.episode_running or self.desk.parked or self.executor_parked:
            pause, note = "paused", ""
        else:
            pause, note = "pausing", "the Executor holds before its next batch (it finishes what it is doing)"
        return {"pause": pause, "pause_note": note, "jog": jog, "approve": self.LATCHED if latched else ""}

    def refuse_approval(self, batch: dict) -> str:
        """The Controller's validation, run here on the same profile and the measured pose (the
        Controller node checks it again before any motion)."""
        if self.estopped or self.estop_held:
            return self.LATCHED
        from ..controller import Controller
        valid, reasons, _ = Controller(_ProfileOnly(self.node.profile)).validate(batch, self.node.measured_obs(),
                                                                                  "operator")
        return "" if valid is not None else self.first_reason(reasons)

    # -- checks ---------------------------------------------------------------------------------
    def _controller(self, action: str) -> None:
        if not self.node.reset_client.service_is_ready():
            raise ActionError(f"{action}: no Controller on the graph (nothing offers {graph.NAMESPACE}/reset on "
                              f"ROS_DOMAIN_ID {os.environ.get('ROS_DOMAIN_ID', '0')})", 503)

    def _under_way(self) -> list[str]:
        now = time.monotonic()
        with self._cv:
            for bid in [b for b, t in self.open.items() if now - t > self.stale_s]:
                self.open.pop(bid)              # no sign of life for stale_batch_s: not blocking jogs
            return sorted(self.open)

    # -- robot actions --------------------------------------------------------------------------
    def do_instruction(self, args, who):
        text = self.instruction_text(args)
        self.node.send("task", {"instruction": text, "source": f"console ({who.get('name') or 'operator'})"})
        planners = self.node.publisher("task").get_subscription_count() - 1     # minus this console
        return {"detail": f"published on {graph.NAMESPACE}/task: {text!r}"
                + ("" if planners > 0 else " (no Planner is listening yet; the task is latched for one that starts)")}

    def _pause(self, on: bool) -> None:
        self.paused = on
        if not on:
            self.executor_parked = False
        self.node.pub_bool("pause", on)
        self.desk.set_paused(on)               # (pushes the status)

    def do_pause(self, args, who):
        self._pause(True)
        st = self.status()
        return {"detail": "paused: the arm is idle (you may jog)" if st["pause"] == "paused" else
                f"pausing: {st['pause_note']}", "pause": st["pause"]}

    def do_resume(self, args, who):
        if self.estopped or self.estop_held:
            raise ActionError("resume: the emergency stop is latched; reset it first", 409)
        self._pause(False)
        return {"detail": "resumed"}

    def do_cancel(self, args, who):
        reason = str(args.get("reason") or f"cancelled by {who.get('name') or 'operator'}")
        n = self.desk.reject_waiting(reason, who.get("name", ""))
        running = self._under_way()
        for bid in running:
            self.node.send("cancel", {"batch_id": bid, "reason": reason, "source": "operator"})
        if not running and not n:
            return {"detail": "nothing queued to cancel"}
        parts = ([f"{', '.join(running)}: stops at the next action boundary"] if running else []) + (
            [f"{n} waiting batch(es) rejected"] if n else [])
        return {"detail": "; ".join(parts), "batch_ids": running}

    def do_estop(self, args, who):
        self.my_estop = True
        self.node.pub_bool("estop", True)
        self.estop_held = True
        self._pause(True)                      # the episode holds until an explicit reset and resume
        detail = "EMERGENCY STOP: published on the latched estop topic; motion stops at once, latched until reset"
        if not self.node.reset_client.service_is_ready():
            detail += " (no Controller on the graph now: one that starts sees the latched e-stop)"
        return {"detail": detail}

    def do_reset(self, args, who):
        self._controller("reset")
        if self.estop_held:
            others = self.node.count_publishers(self.node.full("estop")) - 1
            if not self.my_estop and others > 0:
                raise ActionError(f"reset: the estop topic holds true from another node ({others} other publisher(s) "
                                  f"on {graph.NAMESPACE}/estop); release it there first", 409)
            self.node.pub_bool("estop", False)  # release the latch this console (or a node now gone) set
        deadline = time.monotonic() + max(self.reply_s, 1.0)
        while True:
            ok, why = self.node.call_reset(max(0.5, deadline - time.monotonic()))
            if ok or "estop topic" not in why or time.monotonic() > deadline:
                break
            time.sleep(0.1)                     # our release is on its way to the Controller
        if not ok:
            raise ActionError(f"reset: the Controller refused: {why}", 409)
        self.my_estop = self.estop_held = False
        return {"detail": f"reset: the Controller says {why!r}"
                + ("; still paused: resume to go on" if self.paused else "")}

    def do_jog(self, args, who):
        cmd = self.jog_command(args)
        self._controller("jog")
        running = self._under_way()
        if running:
            raise ActionError(f"jog: the robot is executing batch {running[0]}; wait for it to end (or cancel it)", 409)
        bid = f"{self.next_jog_id()}-{self.node.origin[-4:]}"
        batch = {"schema_version": SCHEMA_VERSION, "batch_id": bid, "subgoal_id": "operator", "commands": [cmd],
                 "source": "operator", "rationale": f"operator jog ({who.get('name') or 'operator'})"}
        with self._cv:
            self.open[bid] = time.monotonic()
        self.node.send("commands", batch)
        with self._cv:
            self._cv.wait_for(lambda: bid in self.reports or bid in self.started, self.reply_s)
            rep, started = self.reports.get(bid), bid in self.started
        if rep is not None and rep.get("status") == "rejected":
            raise ActionError(f"jog rejected by the Controller: {rep.get('reason', '')}", 422)
        if rep is not None:
            return {"detail": f"{bid}: {cmd['op']} {rep.get('status')}" + (f" - {rep['reason']}" if rep.get("reason") else ""),
                    "batch_id": bid}
        if started:
            return {"detail": f"{bid}: {cmd['op']} accepted by the Controller and started", "batch_id": bid}
        return {"detail": f"{bid}: sent; no answer from the Controller within {self.reply_s:g} s (watch the queue)",
                "batch_id": bid}


class ConsoleNode(MotorMindNode):
    role = "console"
    sections = ("console",)

    def __init__(self, overrides: dict | None = None):
        super().__init__(overrides)
        self.exit_code = None
        self.closing = False
        self.origin = f"console-{os.getpid()}-{secrets.token_hex(3)}"
        self._state_lock = threading.Lock()
        self._measured: dict = {}
        self._frame_t: dict = {}
        self._cams: set = set()
        for name in ("task", "commands", "cancel", "console/mode", "console/response", "events"):
            self.publisher(name)                # made once, before any HTTP thread publishes
        self._bool_pubs = {n: self.publisher(n) for n in ("estop", "pause")}
        self.reset_client = self.create_client(Trigger, self.full("reset"))
        self.runtime = rt = RosRuntime(self)
        self.view = rt.view
        p = self.profile
        self.view.directions = p.directions
        self.view.set_extra(transport=rt.transport, robot={
            "profile": p.name, "description": p.description, "directions": sorted(p.directions),
            "axes": sorted(p.rotation_axes), "limits": p.describe_limits(), "cameras": []},
            ros={"namespace": graph.NAMESPACE, "domain_id": os.environ.get("ROS_DOMAIN_ID", "0"),
                 "node": self.get_fully_qualified_name()}, desk=rt.desk.snapshot())
        cs = self.settings.console
        host, port = str(cs.host), int(cs.port)
        try:                                    # first: a console that cannot serve leaves the graph alone
            self.server = ConsoleServer(rt, host, port, str(cs.token) or None).start()
        except OSError as e:
            raise ConfigError(f"console.port: cannot serve on {host}:{port}: {e}") from None
        self.send("console/mode", {"approval": False, "takeover": []})   # a new console: nothing held over
        for name, fn in (("task", rt.on_task), ("plan", rt.on_plan), ("commands", rt.on_commands),
                         ("progress", rt.on_progress), ("report", rt.on_report), ("verdict", rt.on_verdict),
                         ("memory", rt.on_memory), ("episode", rt.on_episode), ("events", rt.on_event),
                         ("estop", rt.on_estop), ("pause", rt.on_pause), ("console/request", rt.on_request),
                         ("eef_pose", self._on_pose), ("state", self._on_joints)):
            self.listen(name, fn)
        rt.manual.watch(str(cs.manual_queue) or None, "" if cs.manual_queue else UNREACHABLE)
        self.create_timer(0.5, self._discover)
        self.create_timer(0.2, rt.tick)
        print(f"console: {self.server.url}  token: {self.server.token}", flush=True)

    # -- records: marked with this console's origin (its own events are not folded twice) ------------
    def record(self, kind: str, **data) -> None:
        super().record(kind, origin=self.origin, **data)

    def pub_bool(self, name: str, value: bool) -> None:
        self._bool_pubs[name].publish(Bool(data=bool(value)))

    def call_reset(self, timeout: float) -> tuple[bool, str]:
        fut = self.reset_client.call_async(Trigger.Request())
        t_end = time.monotonic() + timeout
        while not fut.done():                   # the spinning thread completes it
            if time.monotonic() > t_end:
                fut.cancel()
                return False, f"no answer from {graph.NAMESPACE}/reset within {timeout:.1f} s"
            time.sleep(0.01)
        r = fut.result()
        return bool(r.success), str(r.message)

    # -- measured state and cameras ------------------------------------------------------------------
    def measured_obs(self):
        """The measured pose from the state topics as an Observation (None before any arrived)."""
        with self._state_lock:
            m = dict(self._measured)
        if not (isinstance(m.get("eef_pos_mm"), list) and isinstance(m.get("eef_quat_xyzw"), list)):
            return None
        import numpy as np

        from ..robot import Observation
        w = float(m.get("gripper_width_mm") or 0.0)
        return Observation(t=0.0, eef_pos_m=np.asarray(m["eef_pos_mm"], dtype=float) / 1000.0,
                           eef_quat_xyzw=np.asarray(m["eef_quat_xyzw"], dtype=float), gripper_width_mm=w,
                           gripper_fraction=min(1.0, w / max(self.profile.gripper_max_width_mm, 1e-9)))

    def merge_state(self, st: dict, push: bool = True) -> None:
        with self._state_lock:
            self._measured.update(st)
            snap = dict(self._measured)
        if push:
            self.view.set_state(snap)

    def _on_pose(self, m) -> None:
        p, o = m.pose.position, m.pose.orientation
        q = [o.x, o.y, o.z, o.w]
        r = quat_to_mat(q)
        self.merge_state({"eef_pos_mm": [round(v * 1000.0, 1) for v in (p.x, p.y, p.z)],
                          "eef_quat_xyzw": [round(float(v), 4) for v in q],
                          "eef_yaw_deg": round(math.degrees(math.atan2(r[1, 0], r[0, 0])), 1)})

    def _on_joints(self, m) -> None:
        st = {"joints_deg": [round(math.degrees(v), 1) for n, v in zip(m.name, m.position) if n != "gripper"]}
        for n, v in zip(m.name, m.position):
            if n == "gripper":
                st["gripper_width_mm"] = round(v * 1000.0, 1)
        self.merge_state(st, push=False)        # the pose (same rate) pushes

    def _discover(self) -> None:
        pre = f"{graph.NAMESPACE}/camera/"
        for name, _types in self.get_topic_names_and_types():
            if name.startswith(pre) and name.endswith("/image") and name not in self._cams:
                self._cams.add(name)
                cam = name[len(pre):-len("/image")]
                self.listen(f"camera/{cam}/image", lambda m, cam=cam: self._on_image(cam, m))
                self.view.set_extra(robot={**self.view.extra.get("robot", {}),
                                           "cameras": sorted(c[len(pre):-len("/image")] for c in self._cams)})

    def _on_image(self, cam: str, m) -> None:
        stamp = (m.header.stamp.sec, m.header.stamp.nanosec)
        last = self._frame_t.get(cam)
        now = time.monotonic()
        hz = float(self.settings.console.frame_hz)
        if last is not None and (last[0] == stamp or (hz > 0 and now - last[1] < 1.0 / hz)):
            return                              # a repeat of the frame shown, or faster than frame_hz
        self._frame_t[cam] = (stamp, now)
        try:
            from ..console.inprocess import jpeg
            self.view.set_frame(cam, jpeg(image_from_msg(m)))
        except Exception as e:  # noqa: BLE001 - a bad frame is skipped, the console goes on
            self.log(f"camera {cam}: frame dropped ({e})")

    def close(self) -> None:
        self.closing = True
        self.runtime.desk.close("the console is stopping")
        self.runtime.manual.close()
        server = getattr(self, "server", None)
        if server is not None:
            server.close()
        super().close()


def run_console_node(host: str = "127.0.0.1", port: int = 8765, token: str | None = None, profile: str | None = None,
                     argv=None, manual_queue: str | None = None) -> int:
    """Serve the console as a node of the MotorMind graph until SIGINT/SIGTERM. Prints
    ``console: http://HOST:PORT/  token: TOKEN`` at start. ``host``, ``port``, ``token``,
    ``profile`` and ``manual_queue`` (the manual VLM endpoint's queue folder) override the
    configuration file's (``config:=`` in ``argv``, else the packaged one). Exit code 2: it could
    not start (a port in use, a bad configuration)."""
    overrides = {"console": {"host": host, "port": int(port), "token": token or ""}}
    if manual_queue:
        overrides["console"]["manual_queue"] = str(manual_queue)
    if profile:
        overrides["profile"] = profile
    return spin(lambda: ConsoleNode(overrides), argv)


def main(argv=None) -> int:
    """The node executable (motormind-console; ``motormind launch ... console:=true``): its settings
    come from the configuration file's ``console`` section."""
    return spin(ConsoleNode, argv)
