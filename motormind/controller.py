"""The deterministic Controller: validate a whole batch, then execute it command by command.

* Validation happens before any motion: the parser's checks (op, fields, finite numbers, per-command
  limits, batch length) plus the workspace box and the tilt bound along the chain of predicted
  targets from the measured pose. One invalid command rejects the whole batch (later commands
  assume earlier ones), and every command's result says why. Nothing is ever clipped, and no
  input of any shape raises: it is rejected.
* Execution is closed-loop: each command's target is computed from the pose measured when it
  starts; the backend servos to it; the pose measured afterwards is what the report calls achieved.
  That actual target meets the box and the tilt bound again before it is sent (a backend may end
  a move within tolerance but past its target): a refused one is ``rejected`` and ends the batch.
* A move or rotation followed by another may pass within a blend of its target (the profile's
  blend_mm / blend_deg, at most blend_fraction of the command itself, never before a gripper action,
  a wait, a ``done`` or the batch's end); the report says it passed through and how far. A guarded
  move (``until: contact``) ends ``done`` at contact and the batch goes on; without contact it is
  ``blocked``.
* Between two commands (the action boundary) a cancel is honoured: the running command finishes,
  nothing after it runs. The emergency stop is honoured at once, mid-command, and latches until
  ``reset_estop()``.
* The same batch over the same observations gives the same motions and the same report (only the
  durations differ): no wall-clock value feeds a decision.
"""
from __future__ import annotations

import math
import threading
import time
from typing import Callable

import numpy as np

from .commands import Done, Gripper, Move, Rotate, Wait, check_batch
from .errors import CommandError, ConfigError, RobotFault
from .geometry import angle_between, axis_angle_to_mat, quat_to_mat, rot_error
from .grasp import GraspTracker
from .messages import Batch, CommandResult, Report
from .profile import apart
from .results import BATCH_PRECEDENCE, Status
from .robot import Motion, MotionResult, Observation, Robot
from .strict_json import check_depth, decode_json, show, writable


def _motion_word(cmd) -> str:
    """What a grasp report calls the motion ``cmd`` made (grasp.py): by its kind, so an op added as
    a kind of move, rotation or wait is said as one."""
    return "rotation" if isinstance(cmd, Rotate) else "wait" if isinstance(cmd, Wait) else "move"


class CancelToken:
    """Set by the Monitor (or an operator) to cancel what is queued; checked at action boundaries."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason = ""
        self.source = ""

    def cancel(self, reason: str, source: str = "") -> None:
        if not self._event.is_set():
            self.reason, self.source = reason, source
            self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()


def _mm(v) -> list:
    return [round(float(x) * 1000.0, 2) for x in v]


class Controller:
    """Owns the robot. ``run(batch)`` validates then executes; ``emergency_stop()`` from any thread."""

    def __init__(self, robot: Robot, profile=None, clock: Callable[[], float] = time.monotonic,
                 on_event: Callable[[str, dict], None] | None = None):
        self.robot = robot
        self.profile = profile or robot.profile
        mine = getattr(robot, "profile", self.profile)
        if mine is not self.profile and (mine.name, mine.source) != (self.profile.name, self.profile.source):
            # it would validate with one arm's limits while the robot moves by another's
            raise ConfigError(f"the Controller validates with profile {self.profile.name} but the robot moves with "
                              f"profile {mine.name}: build the robot with the profile the Controller uses")
        self.clock = clock
        self.on_event = on_event or (lambda kind, data: None)
        self._estop = threading.Event()
        self.estop_reason = ""
        self._estops = 0                       # e-stops so far: one pressed and reset during a command
        self._last_estop_reason = ""           # still names what stopped it
        self._lock = threading.Lock()          # one batch at a time
        self.current: dict | None = None       # {"batch": Batch, "index": k} while running
        self._go = threading.Event()           # cleared by pause(): hold at the next action boundary
        self._go.set()
        self.pause_reason = ""
        self.holding = ""                      # "batch b3 before command 2" while a pause holds it
        self.grasp = GraspTracker()            # held or not: the one definition (motormind/grasp.py)

    # -- emergency stop -------------------------------------------------------------------------
    def emergency_stop(self, reason: str = "emergency stop") -> None:
        """Stop now, mid-command; latched until reset_estop(). It acts on the motion under way and
        refuses every batch while latched; once reset, nothing of it is left to cancel a later one
        (the backend's stop() forgets a stop while idle: the Robot contract, robot.py)."""
        reason = str(reason or "").strip() or "emergency stop"      # a cancel's reason is never empty
        self.estop_reason = reason
        self._estops += 1
        self._last_estop_reason = reason
        self._estop.set()
        try:
            self.robot.stop()
        finally:
            self.on_event("estop", {"reason": reason})

    def reset_estop(self) -> None:
        self._estop.clear()
        self.estop_reason = ""
        self.on_event("estop_reset", {})

    @property
    def estopped(self) -> bool:
        return self._estop.is_set()

    # -- pause (an operator's hold) -------------------------------------------------------------
    def pause(self, reason: str = "paused by operator") -> None:
        """Hold at the next action boundary: the running command finishes, the next waits for
        ``resume()``. A cancel or the e-stop still ends a held batch at once."""
        self.pause_reason = reason
        self._go.clear()
        self.on_event("pause", {"reason": reason})

    def resume(self) -> None:
        self.pause_reason = ""
        self._go.set()
        self.on_event("resume", {})

    @property
    def paused(self) -> bool:
        return not self._go.is_set()

    @property
    def busy(self) -> bool:
        """A batch is being validated or executed (held at a boundary included)."""
        return self._lock.locked()

    def _hold(self, bid: str, i: int, cancel: CancelToken) -> None:
        if self._go.is_set():
            return
        self.holding = f"batch {bid} before command {i}"
        self.on_event("held", {"batch_id": bid, "index": i, "reason": self.pause_reason})
        try:
            while not self._go.wait(0.05):
                if self._estop.is_set() or cancel.cancelled:
                    return
        finally:
            self.holding = ""

    # -- validation -----------------------------------------------------------------------------
    def validate(self, data, obs: Observation | None = None, source: str = ""):
        """Check a batch without moving. Returns (batch or None, reasons, header).

        ``reasons`` has one entry per submitted command ("" when that command is fine) or, when the
        batch itself is unusable (not an object, no command list), a single batch-level reason."""
        prof = self.profile
        try:
            if isinstance(data, Batch) and data.profile is prof:     # parsed against this profile: not again
                obj = {"commands": [c.to_json() for c in data.commands]}
                header, parsed, issues = {"batch_id": data.batch_id, "subgoal_id": data.subgoal_id}, \
                    list(data.commands), []
            else:
                if isinstance(data, Batch):       # parsed against another profile: its limits are checked here
                    data = data.raw or data.to_json()
                if isinstance(data, (str, bytes)):
                    obj = decode_json(data, "batch")
                else:                             # a transport's dict: bounded before a report echoes it
                    obj = data
                    check_depth(obj, "batch")
                header, parsed, issues = check_batch(obj, prof)
        except CommandError as e:
            return None, [str(e)], {"batch_id": "", "subgoal_id": "", "commands": []}
        except Exception as e:  # noqa: BLE001 - fail closed: what no check can digest moves nothing
            return None, [f"batch: not checkable ({type(e).__name__}: {show(e)})"], \
                {"batch_id": "", "subgoal_id": "", "commands": []}
        header["commands"] = obj.get("commands") if isinstance(obj.get("commands"), list) else []
        reasons = [""] * len(parsed)
        batch_reasons = []
        for iss in issues:
            if iss.index is None:
                batch_reasons.append(str(iss))
            elif not reasons[iss.index]:
                reasons[iss.index] = str(iss)
        if obs is not None and parsed and not any(reasons):
            pos = np.asarray(obs.eef_pos_m, dtype=float).copy()   # the chain of predicted targets
            rot = quat_to_mat(obs.eef_quat_xyzw)
            for i, c in enumerate(parsed):
                if isinstance(c, Move):
                    pos = pos + c.displacement_mm / 1000.0
                    bad = prof.in_workspace(pos * 1000.0)
                    if bad:
                        reasons[i] = f"commands[{i}]: {self._box_reason(bad)}"
                elif isinstance(c, Rotate):
                    nxt = self._rotated(c, rot)
                    bad_rot = prof.orientation_issue(nxt, rot)
                    if bad_rot:
                        reasons[i] = f"commands[{i}]: {self._tilt_reason(bad_rot)}"
                    rot = nxt
        if not parsed:
            return None, batch_reasons or ["commands: empty"], header
        if batch_reasons or any(reasons):
            first = next((i for i, r in enumerate(reasons) if r), None)
            why = "; ".join(batch_reasons) if batch_reasons else f"command {first} is invalid"
            reasons = [r or f"not run: {why}" for r in reasons]
            return None, reasons, header
        return Batch(header["batch_id"], header["subgoal_id"], tuple(parsed), source, raw=obj, profile=prof), \
            reasons, header

    # -- the bounds, predicted and at execution ---------------------------------------------------
    @staticmethod
    def _rotated(cmd: Rotate, rot: np.ndarray) -> np.ndarray:
        return axis_angle_to_mat(cmd.axis_vector, math.radians(cmd.angle_deg)) @ rot

    def _box_reason(self, bad: list) -> str:
        return f"target outside the workspace box: {'; '.join(bad)} mm (workspace_mm of profile {self.profile.name})"

    def _tilt_reason(self, why: str) -> str:
        return f"target orientation outside the bound: {why} (orientation of profile {self.profile.name})"

    def _refuse_at_execution(self, motion: Motion, rot_now: np.ndarray) -> str:
        """Why ``motion``, computed from the measured pose, must not be sent ("" when it may): the
        predicted chain assumed every earlier command ended exactly on target, the robot may not
        have (an overshoot within tolerance), and the box holds for what is actually commanded."""
        if motion.kind == "move":
            bad = self.profile.in_workspace(np.asarray(motion.target_pos_m, dtype=float) * 1000.0)
            if bad:
                return self._box_reason(bad)
        if motion.kind == "rotate":
            why = self.profile.orientation_issue(motion.target_rot, rot_now)
            if why:
                return self._tilt_reason(why)
        return ""

    # -- execution ------------------------------------------------------------------------------
    def run(self, data, cancel: CancelToken | None = None, source: str = "", hold: bool = True) -> Report:
        """Validate and execute one batch (JSON text, dict, or Batch). Thread-safe: one at a time.
        ``hold=False``: a pause does not hold this batch (an operator's jog while paused)."""
        with self._lock:
            return self._run(data, cancel or CancelToken(), source, hold)

    def _run(self, data, cancel: CancelToken, source: str, hold: bool = True) -> Report:
        t0 = self.clock()
        obs0 = self.robot.observe()
        batch, reasons, header = self.validate(data, obs0, source)
        bid, sgid = header.get("batch_id", ""), header.get("subgoal_id", "")
        if batch is None or self._estop.is_set():
            raw = header.get("commands") or []
            if batch is not None:   # valid, but the e-stop is latched
                reasons = [f"emergency stop latched ({self.estop_reason}); reset required"] * len(raw)
            why = next((r for r in reasons if not r.startswith("not run")), reasons[0] if reasons else "invalid")
            why = why.removeprefix("not run: ")
            if not raw:
                results = [CommandResult(-1, {}, "rejected", why)]
            else:
                results = [CommandResult(i, writable(c if isinstance(c, dict) else {"value": c}), "rejected",
                                         reasons[i] if i < len(reasons) else why)
                           for i, c in enumerate(raw)]
            rep = Report(bid, sgid, "rejected", tuple(results), reason=why, estop=self._estop.is_set(),
                         start_state=obs0.state_dict(), end_state=obs0.state_dict(),
                         duration_s=self.clock() - t0, source=source, held_mm=self._held_mm())
            self.on_event("report", rep.to_json())
            return rep

        results: list[CommandResult] = []
        stop_reason = ""
        stop_status = ""
        grasp_news = self.grasp.start_batch(obs0.gripper_width_mm)   # said on the first command that runs
        rot_goal = quat_to_mat(obs0.eef_quat_xyzw)   # orientation is held along the batch
        obs = obs0
        steps_total = 0
        chain = None          # the target of a move passed through (blended): the next move aims from it
        wait_at = None        # the target of a move that ended on its way before a wait: the wait holds it
        cmds = batch.commands
        for i, cmd in enumerate(cmds):
            cj = cmd.to_json()
            if chain is not None and (cancel.cancelled or self.paused or not isinstance(cmd, (Move, Rotate))):
                gap0 = obs.gripper_width_mm
                obs = self._settle(results[-1], chain, obs, rot_goal)   # the boundary is a stop here
                steps_total += results[-1].settle_steps
                self._say_grasp(results[-1], self.grasp.during("move", gap0, obs.gripper_width_mm))
                chain = None
            if not stop_reason and hold:
                self._hold(bid, i, cancel)
            if not stop_reason and self._estop.is_set():
                stop_reason, stop_status = f"emergency stop ({self.estop_reason})", "cancelled"
            if not stop_reason and cancel.cancelled:
                stop_reason = f"cancelled at action boundary before command {i}: {cancel.reason}"
                stop_status = "cancelled"
            if stop_reason:
                results.append(CommandResult(i, cj, "cancelled", stop_reason))
                continue
            self.current = {"batch": batch, "index": i}
            self.on_event("command_start", {"batch_id": bid, "index": i, "command": cj})
            nxt = cmds[i + 1] if i + 1 < len(cmds) else None
            # a move or rotation followed by another passes through: the next one corrects what is left
            # (never a guarded move: it ends where it meets something; never before a gripper action, a
            # wait, a done or the batch's end: those start from where the motion stopped)
            flows = isinstance(cmd, (Move, Rotate)) and isinstance(nxt, (Move, Rotate)) \
                and not (isinstance(cmd, Move) and cmd.guarded)
            gap0 = obs.gripper_width_mm
            blend_m, blend_rad = self._blend(cmd) if flows else (0.0, 0.0)
            # before a wait a move need not end at rest either: the wait holds its target and it settles
            # there during the wait's own steps (a guarded move's target is past its contact: not held)
            to_wait = isinstance(cmd, Move) and not cmd.guarded and isinstance(nxt, Wait)
            res, obs, rot_goal = self._execute_one(i, cmd, obs, rot_goal, blend_m,
                                                   chain if chain is not None else wait_at, blend_rad,
                                                   follows=isinstance(nxt, (Move, Rotate)),
                                                   at_rest=not (nxt is None or isinstance(nxt, Done) or to_wait))
            chain = res.passed_target if res.status == "done" else None
            wait_at = None    # the wait next holds this move's target (never a stop: _settle is not called)
            if (to_wait and res.status == "done" and chain is None and res.motion
                    and (res.achieved or {}).get("error_mm", math.inf) <= self.profile.tolerances.position_mm):
                wait_at = np.asarray(res.motion["target_pos_m"], dtype=float)
            if isinstance(cmd, (Move, Rotate, Wait)) and res.status != "rejected":
                self._say_grasp(res, self.grasp.during(_motion_word(cmd),
                                                       gap0, obs.gripper_width_mm))
            if grasp_news and res.status != "rejected":
                self._say_grasp(res, grasp_news)
                grasp_news = ""
            steps_total += res.steps
            results.append(res)
            self.on_event("command_end", {"batch_id": bid, **res.to_json()})
            if res.status == "fault":
                stop_reason, stop_status = f"command {i} faulted: {res.reason}", "fault"
            elif res.status == "rejected":   # a bound the measured pose would break
                stop_reason, stop_status = f"command {i} rejected: {res.reason}", "rejected"
            elif res.status == "blocked":
                stop_reason, stop_status = f"command {i} blocked: {res.reason}", "blocked"
            elif res.status == "cancelled":   # e-stop mid-command
                stop_reason, stop_status = res.reason, "cancelled"
            if stop_reason:
                stop_reason = "not run: " + stop_reason
        if chain is not None and results:              # (a blended move is never the last one run)
            gap0 = obs.gripper_width_mm
            obs = self._settle(results[-1], chain, obs, rot_goal)
            steps_total += results[-1].settle_steps
            self._say_grasp(results[-1], self.grasp.during("move", gap0, obs.gripper_width_mm))
        self.current = None
        statuses = [r.status for r in results]
        status = next((s for s in BATCH_PRECEDENCE if s in statuses), Status.DONE)
        contact = status is Status.BLOCKED and any(r.contact for r in results)
        rep = Report(bid, sgid, status, tuple(results), claims_done=batch.claims_done and status == "done",
                     reason=stop_reason.removeprefix("not run: ") if stop_reason else "",
                     estop=self._estop.is_set(), start_state=obs0.state_dict(), end_state=obs.state_dict(),
                     duration_s=self.clock() - t0, steps=steps_total, source=source, contact=contact,
                     stalled=status is Status.BLOCKED and not contact, held_mm=self._held_mm())
        self.on_event("report", rep.to_json())
        return rep

    def _blend(self, cmd) -> tuple[float, float]:
        """How far (m, rad) short of its target ``cmd`` may pass on to the next motion: the profile's
        blend_mm / blend_deg, but the command's own quantity (a move's distance, a rotation's angle)
        at most blend_fraction of it, so a blend never eats a command (a 3 mm correction passes
        within 0.75 mm, not 12: issue 33). The quantity it holds keeps the profile's blend."""
        tol = self.profile.tolerances
        blend_m, blend_rad = tol.blend_mm / 1000.0, math.radians(tol.blend_deg)
        if isinstance(cmd, Move):
            return min(blend_m, tol.blend_fraction * cmd.distance_mm / 1000.0), blend_rad
        return blend_m, min(blend_rad, math.radians(tol.blend_fraction * abs(cmd.angle_deg)))

    def _settle(self, res: "CommandResult", target: np.ndarray, obs: Observation, rot_goal) -> Observation:
        """Stop at the target of a move that was passed through, because what follows it is not run
        (a cancel, a pause) or not a move: the command finishes where it was aimed."""
        if self._estop.is_set():
            return obs
        try:
            mres = self.robot.execute(Motion("move", target, rot_goal,
                                             max_steps=self.profile.tolerances.max_steps_per_command), self._estop)
        except RobotFault:
            return self._safe_observe(obs)
        end = self.robot.observe()
        res.steps += mres.steps
        res.settle_steps = mres.steps
        err = float(np.linalg.norm(np.asarray(end.eef_pos_m) - target)) * 1000
        res.achieved["error_mm"] = round(err, 2)
        moved = np.asarray(end.eef_pos_m) - np.asarray(obs.eef_pos_m)
        res.achieved["translation_mm"] = [round(a + b, 2) for a, b in zip(res.achieved["translation_mm"], _mm(moved))]
        res.reason = f"settled at its target ({err:.1f} mm) after passing through"
        return end

    def _passed_through(self, i, cj, err: str, limit: str, commanded, achieved, t0, mres, motion) -> "CommandResult":
        """A move or rotation blended into the next command: done within ``limit`` of its target,
        which the next command aims from (``passed_target``)."""
        res = CommandResult(i, cj, "done", f"passed through {err} from its target on to the next command ({limit})",
                            commanded, achieved, self.clock() - t0, mres.steps, motion.to_json())
        res.passed_target = motion.target_pos_m
        return res

    def _execute_one(self, i: int, cmd, obs: Observation, rot_goal: np.ndarray, blend_m: float = 0.0,
                     chain: np.ndarray | None = None, blend_rad: float = 0.0, follows: bool = False,
                     at_rest: bool = True):
        prof = self.profile
        tol = prof.tolerances
        t0 = self.clock()
        cj = cmd.to_json()
        p0 = np.asarray(obs.eef_pos_m, dtype=float)
        start = p0 if chain is None else chain         # a move after a passed-through move aims from its target
        r0 = quat_to_mat(obs.eef_quat_xyzw)
        commanded: dict = {}
        if isinstance(cmd, Done):
            return (CommandResult(i, cj, "done", "claim recorded; the Verifier decides",
                                  duration_s=self.clock() - t0), obs, rot_goal)
        if isinstance(cmd, Move):
            disp = cmd.displacement_mm / 1000.0
            # before a done, a wait or the batch's end nothing starts from the target at rest (robot.Motion.at_rest)
            motion = Motion("move", start + disp, rot_goal, max_steps=tol.max_steps_per_command, blend_m=blend_m,
                            blend_rad=blend_rad, at_rest=at_rest)
            commanded = {"translation_mm": _mm(disp)}
        elif isinstance(cmd, Rotate):
            rot_goal = axis_angle_to_mat(cmd.axis_vector, math.radians(cmd.angle_deg)) @ rot_goal
            motion = Motion("rotate", start.copy(), rot_goal, max_steps=tol.max_steps_per_command, blend_m=blend_m,
                            blend_rad=blend_rad)
            commanded = {"rotation_deg": round(cmd.angle_deg, 3), "axis": cmd.axis}
        elif isinstance(cmd, Gripper):
            # an arm motion next: fingers on their way to an opening may finish during it (robot.Motion.follows)
            motion = Motion("gripper", p0.copy(), rot_goal, gripper=cmd.width, max_steps=tol.max_steps_per_command,
                            follows=follows)
            commanded = {"gripper_fraction": cmd.width,
                         "gripper_width_mm": round(cmd.width * prof.gripper_max_width_mm, 1)}
        elif isinstance(cmd, Wait):
            # it holds where the arm is, or the target of the move before it that ended on its way there
            motion = Motion("wait", start.copy(), rot_goal, seconds=cmd.seconds,
                            max_steps=max(1, int(round(cmd.seconds / prof.period_s))))
            commanded = {"seconds": cmd.seconds}
        else:  # pragma: no cover - the parser admits nothing else
            raise AssertionError(cmd)
        refused = self._refuse_at_execution(motion, r0)
        if refused:
            return (CommandResult(i, cj, "rejected", f"commands[{i}] at execution: {refused}; nothing was sent",
                                  commanded, self._achieved(obs, obs, r0), self.clock() - t0, 0, motion.to_json()),
                    obs, rot_goal)
        estops0 = self._estops
        try:
            mres = self.robot.execute(motion, self._estop)
        except RobotFault as e:
            try:
                self.robot.stop()
            except Exception:  # noqa: BLE001 - the fault is what we report
                pass
            end = self._safe_observe(obs)
            return (CommandResult(i, cj, "fault", f"{e.kind}: {e}" + (f" (code {e.code})" if e.code is not None else ""),
                                  commanded, self._achieved(obs, end, r0), self.clock() - t0, 0, motion.to_json(),
                                  fault_kind=e.kind), end, rot_goal)
        end = self.robot.observe()
        achieved = self._achieved(obs, end, r0)
        status, reason = "done", mres.note
        contact = False        # blocked against something: the reason says "stopped by contact"
        if mres.stopped:
            status, reason = "cancelled", self._stopped_reason(mres, estops0)
        elif motion.kind == "move":
            err_mm = float(np.linalg.norm(np.asarray(end.eef_pos_m) - motion.target_pos_m)) * 1000
            achieved["error_mm"] = round(err_mm, 2)
            if blend_m and mres.converged and err_mm <= blend_m * 1000 + 1e-6:
                return self._passed_through(i, cj, f"{err_mm:.1f} mm",
                                            f"blend {blend_m * 1000:.2g} mm: blend_mm {tol.blend_mm:g}, at most "
                                            f"{tol.blend_fraction:g} of its {cmd.distance_mm:g} mm", commanded,
                                            achieved, t0, mres, motion), end, rot_goal
            along = float(np.dot(np.asarray(end.eef_pos_m) - p0, np.asarray(cmd.vector))) * 1000
            if cmd.guarded:
                status, reason = self._guarded(cmd, mres, err_mm, along)
            elif err_mm > tol.position_mm:
                achieved_txt = f"achieved {along:.1f} of {cmd.distance_mm:g} mm along the commanded direction"
                if mres.contact or err_mm > tol.continue_mm:
                    status, contact = "blocked", mres.contact
                    reason = (f"{'stopped by contact: ' if mres.contact else ''}{achieved_txt}; "
                              f"error {apart(err_mm, tol.position_mm, '.1f')} mm > tolerance {tol.position_mm:g} mm"
                              + (f" ({mres.note})" if mres.note else ""))
                else:   # settled a little short, nothing in the way: the batch goes on
                    reason = (f"settled {err_mm:.1f} mm from the target without contact ({achieved_txt}); "
                              f"within continue_mm {tol.continue_mm:g} mm, so the batch goes on")
        elif motion.kind == "rotate":
            err_deg = math.degrees(angle_between(rot_goal, quat_to_mat(end.eef_quat_xyzw)))
            achieved["error_deg"] = round(err_deg, 2)
            if blend_rad and mres.converged and err_deg <= math.degrees(blend_rad) + 1e-6:
                return self._passed_through(i, cj, f"{err_deg:.1f} deg",
                                            f"blend {math.degrees(blend_rad):.2g} deg: blend_deg {tol.blend_deg:g}, "
                                            f"at most {tol.blend_fraction:g} of its {abs(cmd.angle_deg):g} deg",
                                            commanded, achieved, t0, mres, motion), end, rot_goal
            if err_deg > tol.rotation_deg:
                status, contact = "blocked", mres.contact
                reason = (f"{'stopped by contact: ' if mres.contact else ''}rotation error "
                          f"{apart(err_deg, tol.rotation_deg, '.1f')} deg "
                          f"> tolerance {tol.rotation_deg:g} deg" + (f" ({mres.note})" if mres.note else ""))
        elif motion.kind == "gripper":
            # held or not is the tracker's word, the same for every backend; the backend's note adds detail
            said = self.grasp.gripper(obs.gripper_width_mm, end.gripper_width_mm,
                                      cmd.width * prof.gripper_max_width_mm, stalled=mres.contact,
                                      full=bool(cmd.action))
            if not mres.converged:
                status = "blocked"
                reason = f"{mres.note or 'gripper did not reach its target'}; {said}"
            else:
                reason = said + (f" ({mres.note})" if mres.note and not mres.contact else "")
        return (CommandResult(i, cj, status, reason, commanded, achieved, self.clock() - t0, mres.steps,
                              motion.to_json(), contact=contact), end, rot_goal)

    def _guarded(self, cmd: Move, mres: MotionResult, err_mm: float, along: float) -> tuple[str, str]:
        """(status, reason) of a guarded move (``until: contact``). Contact is what it was sent to find:
        done, and the batch goes on (a close queued after a descent runs). No contact is blocked, also
        when it travelled its whole distance: nothing was met where the operator expected something,
        and what was queued for the contact (a close, a release) would act on air: the report says so
        and the next batch decides."""
        tol = self.profile.tolerances
        got = f"after {along:.1f} of {cmd.distance_mm:g} mm along the commanded direction"
        note = f" ({mres.note})" if mres.note else ""
        if mres.contact:
            return "done", f"guarded move: stopped at contact {got}{note}; the batch goes on"
        if err_mm <= tol.position_mm:
            return "blocked", (f"guarded move: no contact over the whole {cmd.distance_mm:g} mm (nothing met, "
                               f"ended {err_mm:.1f} mm from its target); the rest of the batch is not run")
        return "blocked", (f"guarded move: stopped without contact {got}, error {apart(err_mm, tol.position_mm, '.1f')} "
                           f"mm > tolerance "
                           f"{tol.position_mm:g} mm{note}")

    def _held_mm(self) -> float | None:
        """The gap an object is held at now (the grasp tracker's; None: nothing held), for the report."""
        return None if self.grasp.held_mm is None else round(float(self.grasp.held_mm), 2)

    @staticmethod
    def _say_grasp(res: "CommandResult", said: str) -> None:
        """Add what the grasp tracker says about a command to its reason."""
        if said:
            res.reason = f"{res.reason}; {said}" if res.reason else said

    def _stopped_reason(self, mres: MotionResult, estops0: int) -> str:
        """What stopped a command the backend reports ``stopped``: never empty."""
        if self._estop.is_set():
            return f"emergency stop mid-command ({self.estop_reason})"
        if self._estops != estops0:            # pressed during this command, reset before it returned
            return f"emergency stop mid-command ({self._last_estop_reason}; reset since)"
        return ("stopped mid-command by the robot backend, not by the emergency stop"
                + (f" ({mres.note})" if mres.note else "") + f" (backend {type(self.robot).__name__})")

    def _safe_observe(self, fallback: Observation) -> Observation:
        try:
            return self.robot.observe()
        except Exception:  # noqa: BLE001 - a faulted robot may not answer
            return fallback

    def _achieved(self, a: Observation, b: Observation, r0: np.ndarray) -> dict:
        d = np.asarray(b.eef_pos_m) - np.asarray(a.eef_pos_m)
        rv = rot_error(quat_to_mat(b.eef_quat_xyzw), r0)
        return {"translation_mm": _mm(d), "rotation_deg": round(math.degrees(float(np.linalg.norm(rv))), 2),
                "rotation_vector_deg": [round(math.degrees(float(x)), 2) for x in rv],
                "gripper_width_mm": round(float(b.gripper_width_mm), 1)}
