"""The console's actions, one method each, over a transport (in-process or ROS 2).

Every action an operator takes arrives here as ``act(action, args, who)``; the answer is a dict
(shown in the browser) or an ``ActionError`` naming the field and the limit. Every action, taken
or refused, is recorded as an ``operator_action`` event with its time, in the episode record.

The desk actions (approval, approve, reject, takeover, answer) and the manual VLM endpoint's
(manual_open, manual_answer: a request of the queue the console watches, ``console/manual.py``) are
the same on every transport; the robot actions (instruction, pause, resume, cancel, estop, reset,
jog) are the transport's.
"""
from __future__ import annotations

import json

from ..commands import NOTE_MAX_CHARS, OPS
from ..errors import CommandError
from ..strict_json import MAX_DEPTH, decode_json, depth_of, show
from .desk import TAKEOVER_ROLES, OperatorDesk
from .manual import ManualQueue, QueueError
from .view import ConsoleView

JOG_OPS = ("move", "rotate", "gripper")


class ActionError(Exception):
    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _obj(args: dict, name: str):
    """``args[name]`` decoded when it is JSON text (the same strict decoder a VLM's answer meets)."""
    v = args.get(name)
    if isinstance(v, str):
        try:
            v = decode_json(v, name)
        except CommandError as e:
            raise ActionError(str(e) if str(e).startswith(name) else f"{name}.{e}") from None
    return v


class Runtime:
    transport = "?"
    ACTIONS = ("claim", "release", "instruction", "pause", "resume", "cancel", "estop", "reset", "jog",
               "approval", "approve", "reject", "takeover", "answer", "manual_open", "manual_answer")
    FREE = ("claim", "release", "estop")      # need the token but not control (the e-stop always works)

    def __init__(self, view: ConsoleView | None = None, desk: OperatorDesk | None = None):
        self.view = view or ConsoleView()
        self.desk = desk or OperatorDesk()
        self.desk.listeners.append(self._desk_changed)
        self.manual = ManualQueue(lambda snap: self.view.set_extra(manual=snap))
        self.view.set_extra(manual=self.manual.snapshot())
        self._jog_n = 0

    def _desk_changed(self) -> None:
        self.refresh()

    def refresh(self) -> None:
        """Push what the operator may do now (``status``) with the desk, as the server will act on it."""
        self.view.set_extra(desk=self.desk.snapshot(), status=self.status())

    # -- what the page shows is what the server will do ----------------------------------------------
    LATCHED = "the emergency stop is latched: reset it first"

    def status(self) -> dict:
        """``pause``: running | pausing (asked, the episode or a batch not held yet) | paused (held:
        parked, or no episode); ``pause_note``: what it waits for; ``jog`` and ``approve``: why that
        action cannot run now ("" when it can). Computed by the transport from the state it acts on."""
        return {"pause": "paused" if self.desk.paused else "running", "pause_note": "", "jog": "", "approve": ""}

    def refuse_approval(self, batch: dict) -> str:
        """The Controller's verdict on ``batch`` before it is handed over ("" accepted), by transport."""
        return ""

    @staticmethod
    def first_reason(reasons: list) -> str:
        """The reason a refused batch gives (the first that is not a "not run" echo)."""
        why = next((r for r in reasons if r and not r.startswith("not run")), reasons[0] if reasons else "invalid")
        return why.removeprefix("not run: ")

    # -- to be given by the transport ------------------------------------------------------------
    def record(self, kind: str, **data) -> None:
        raise NotImplementedError

    # -- dispatch -------------------------------------------------------------------------------
    def act(self, action: str, args: dict, who: dict) -> dict:
        """``who``: {"client": id, "name": shown name}. Raises ActionError."""
        if action not in self.ACTIONS:
            raise ActionError(f"action: unknown {action!r} (one of {', '.join(self.ACTIONS)})", 404)
        if not isinstance(args, dict):
            raise ActionError("body: a JSON object is expected")
        by = who.get("name") or "operator"
        if depth_of(args) > MAX_DEPTH:       # refused before anything holds it (and recorded as text)
            msg = f"body: nested deeper than {MAX_DEPTH} levels (the limit of {MAX_DEPTH})"
            self.record("operator_action", action=action, by=by, ok=False, detail=msg, args=show(args))
            raise ActionError(msg)
        if action not in self.FREE:
            if self.desk.holder is None:
                self.desk.claim(who["client"], by)
            elif not self.desk.in_control(who["client"]):
                msg = f"{self.desk.holder['name']} is in control: take control first (one operator at a time)"
                self.record("operator_action", action=action, by=by, ok=False, detail=msg, args=args)
                raise ActionError(msg, 409)
        try:
            out = getattr(self, f"do_{action}")(args, who) or {}
        except ActionError as e:
            self.record("operator_action", action=action, by=by, ok=False, detail=str(e), args=args)
            raise
        self.record("operator_action", action=action, by=by, ok=True, detail=out.get("detail", ""), args=args)
        return {"ok": True, **out}

    # -- control --------------------------------------------------------------------------------
    def do_claim(self, args, who):
        ok, msg = self.desk.claim(who["client"], who.get("name") or "operator", bool(args.get("force")))
        if not ok:
            raise ActionError(msg, 409)
        return {"detail": msg}

    def do_release(self, args, who):
        return {"detail": "released control" if self.desk.release(who["client"]) else "was not in control"}

    # -- desk actions ---------------------------------------------------------------------------
    def do_approval(self, args, who):
        on = args.get("on")
        if not isinstance(on, bool):
            raise ActionError("on: true or false expected")
        self.desk.set_approval(on)
        return {"detail": f"approval mode {'on: each batch waits for you' if on else 'off'}"}

    def _decide(self, args, who, decision: str, batch=None) -> str:
        pid, note = str(args.get("id")), args.get("note", "")
        if not isinstance(note, str):
            raise ActionError(f"note: must be text, got {show(note)}")
        if len(note) > NOTE_MAX_CHARS:
            raise ActionError(f"note: {len(note)} characters exceed the limit of {NOTE_MAX_CHARS}")
        try:
            self.desk.decide(pid, decision, batch, note, who.get("name", ""))
        except KeyError as e:
            raise ActionError(str(e.args[0]), 404) from None
        return pid

    def do_approve(self, args, who):
        """An approval hands the batch over only when the Controller's validation accepts it (against
        the measured pose); a refusal is the action's answer, and the batch keeps waiting (edit it
        again, or reject it)."""
        batch = _obj(args, "batch")
        if batch is not None and not isinstance(batch, dict):
            raise ActionError("batch: an edited batch must be a JSON object {\"commands\": [...]}")
        try:
            run = self.desk.batch_to_run(str(args.get("id")), batch)
        except KeyError as e:
            raise ActionError(str(e.args[0]), 404) from None
        why = self.refuse_approval(run)
        if why:
            raise ActionError(f"rejected by the Controller: {why} (the batch still waits: edit it or reject it)",
                              422)
        pid = self._decide(args, who, "approve", batch)
        held = " (it runs when you resume)" if self.desk.paused else ""
        return {"detail": f"{pid}: {'edited and approved' if batch is not None else 'approved'}: the Controller "
                          f"accepted it{held}"}

    def do_reject(self, args, who):
        return {"detail": f"{self._decide(args, who, 'reject')}: rejected"}

    def do_takeover(self, args, who):
        role, on = args.get("role"), args.get("on")
        if role not in TAKEOVER_ROLES:
            raise ActionError(f"role: {role!r} cannot be taken over (one of {', '.join(TAKEOVER_ROLES)})")
        if not isinstance(on, bool):
            raise ActionError("on: true or false expected")
        try:
            self.desk.set_takeover(role, on)
        except ValueError as e:
            raise ActionError(str(e), 409) from None
        return {"detail": f"{role} {'taken over: you answer it' if on else 'given back to the brain'}"}

    def do_answer(self, args, who):
        pid, ans = args.get("id"), args.get("answer")
        if isinstance(ans, (dict, list)):
            try:
                ans = json.dumps(ans)
            except (ValueError, TypeError, RecursionError) as e:
                raise ActionError(f"answer: cannot be written as JSON ({type(e).__name__})") from None
        if not isinstance(ans, str) or not ans.strip():
            raise ActionError("answer: the role's JSON answer is required")
        try:
            role = self.desk.answer(str(pid), ans, who.get("name", ""))
        except KeyError as e:
            raise ActionError(str(e.args[0]), 404) from None
        return {"detail": f"answered the {role} (it is validated like any brain's answer)"}

    # -- the manual VLM endpoint: any role's request, answered from the page ------------------------
    def do_manual_open(self, args, who):
        try:
            req = self.manual.open(args.get("id"))
        except QueueError as e:
            raise ActionError(str(e), e.status) from None
        return {"detail": f"opened {req['id']} ({req['role']}, {req['state']})", "request": req}

    def do_manual_answer(self, args, who):
        try:
            done = self.manual.answer(args.get("id"), args.get("answer"))
        except QueueError as e:
            raise ActionError(str(e), e.status) from None
        return {"detail": f"answered {done['id']} as the {done['role']} (it goes the way any model's answer "
                          f"goes: parsed, checked against the schema, repaired once if it fails)", **done}

    # -- shared checks --------------------------------------------------------------------------
    @staticmethod
    def jog_command(args) -> dict:
        cmd = _obj(args, "command")
        if not isinstance(cmd, dict):
            raise ActionError('command: a jog is one command object, e.g. {"op": "move", "direction": "up", '
                              '"distance_mm": 10}')
        if not isinstance(cmd.get("op"), str) or cmd.get("op") not in JOG_OPS:
            raise ActionError(f"command.op: a jog is one of {', '.join(JOG_OPS)} (got {show(cmd.get('op'))}; "
                              f"vocabulary: {', '.join(OPS)})")
        return cmd

    def next_jog_id(self) -> str:
        self._jog_n += 1
        return f"jog{self._jog_n}"

    @staticmethod
    def instruction_text(args) -> str:
        text = args.get("text")
        if not isinstance(text, str) or not text.strip():
            raise ActionError("text: the instruction is empty")
        if len(text) > 500:
            raise ActionError(f"text: {len(text)} characters exceed the limit of 500")
        return text.strip()
