"""The role nodes: Planner, Executor, Verifier, Monitor, Memory. Each is a thin wrapper that feeds
one component of ``motormind.components`` (the same ones the in-process runner uses) from its
topics and publishes what the component decides. No decision is made here.

Each node runs its component on one worker thread (``Worker``): callbacks only queue, so heartbeats,
cancels and privileged answers are never held up by a brain call.
"""
from __future__ import annotations

import time

from .. import SCHEMA_VERSION
from ..components import (Context, EpisodeBook, Escalation, ExecutorComponent, MemoryView, MonitorComponent,
                          PlanDecision, PlannerComponent, VerifierComponent, operator_rejection, review_batch,
                          unfit_reason, verdict_from_json)
from ..console.brain import OperatorBrain
from ..console.desk import TAKEOVER_ROLES
from ..controller import CancelToken
from ..roles.executor import Executor
from ..roles.memory import Memory
from ..roles.monitor import Monitor
from ..roles.planner import Planner
from ..roles.verifier import Verifier
from . import graph
from .base import MotorMindNode, ObservationCache, RemoteCall, make_brain
from .operator_proxy import OperatorProxy


class RoleNode(MotorMindNode):
    """A node hosting one role over the brain: the task, the plan, memory and observations."""

    def __init__(self):
        super().__init__()
        self.exit_code = None
        self.rpc = RemoteCall(self) if self.p("brain") == "oracle" or self.needs_rpc() else None
        self.brain = make_brain(self, self.rpc)
        self.closing = False
        self._recorder_seen = False
        self.operator: OperatorProxy | None = None
        if self.role in TAKEOVER_ROLES:      # the console may take this role over (and approve batches)
            self.operator = OperatorProxy(self, on_pause=self.on_pause)
            self.brain = OperatorBrain(self.brain, self.operator, abort=lambda: self.closing)
        self.cache = ObservationCache(self, self.cfg.images)
        self.memory_view = MemoryView(self.cfg.memory)
        self.instruction = ""
        self.prompt_ctx: Context | None = None
        self.listen("memory", self.memory_view.update)
        self.listen("task", lambda m: self.worker.put(self._task, m))

    def needs_rpc(self) -> bool:
        return False

    recorded_first: tuple = ()

    def await_recorder(self) -> None:
        """With record:=FILE (``wait_for_recorder_s`` > 0), once, before this node's first output:
        wait until the recorder subscribes to ``recorded_first``, as this node's participant sees it
        (that is when its writers match the recorder's readers): a volatile message (the first batch,
        the first VLM call's event) sent before then would never reach the file. After
        ``wait_for_recorder_s`` it goes on and says so."""
        wait = float(self.p("wait_for_recorder_s"))
        if wait <= 0 or self._recorder_seen:
            return
        self._recorder_seen = True
        t_end, missing = time.monotonic() + wait, list(self.recorded_first)
        while True:
            missing = [t for t in missing if not any(
                i.node_name == "recorder" for i in self.get_subscriptions_info_by_topic(self.full(t)))]
            if not missing:
                return
            if time.monotonic() > t_end:
                self.say(f"the recorder does not listen on {', '.join(missing)} after {wait:g} s: going on; "
                         f"the recording may miss the start")
                return
            time.sleep(0.05)

    def _task(self, msg: dict) -> None:
        instr = str(msg.get("instruction", ""))
        if not instr or instr == self.instruction:
            return
        self.instruction = instr
        self.prompt_ctx = Context(self.profile, instr, self.memory_view.text)
        self.log(f"task: {instr!r}  brain: {getattr(self.brain, 'name', '?')}"
                 f"{' (PRIVILEGED simulator state)' if getattr(self.brain, 'privileged', False) else ''}")
        self.on_task(msg)

    def on_task(self, msg: dict) -> None:
        pass

    def on_pause(self, paused: bool) -> None:
        """The operator's ``pause`` topic changed (callback thread: quick)."""

    def say(self, text: str) -> None:
        self.log(f"[{time.monotonic() - self.t0:6.1f}s] {text}")

    def close(self) -> None:
        self.closing = True
        if self.rpc is not None:
            self.rpc.close()                 # a brain call waiting on the privileged channel ends now
        try:
            self.close_role()
        finally:
            try:
                self.brain.close()
            finally:
                super().close()

    def close_role(self) -> None:
        """What a role node adds to its close (after brain calls under way were abandoned)."""


class PlannerNode(RoleNode):
    """task -> plan; a rejected verdict or an escalation -> a new plan decision (PlannerComponent)."""

    role = "planner"
    extra_params = {"instruction": "", "wait_for_recorder_s": 0.0}
    outputs = ("plan", "task")
    recorded_first = graph.RECORDED           # the episode starts here: every recorded topic

    def __init__(self):
        super().__init__()
        self.component: PlannerComponent | None = None
        self.listen("verdict", lambda m: self.worker.put(self._verdict, m))
        self.listen("escalation", lambda m: self.worker.put(self._escalation, m))
        if self.p("instruction"):
            self.worker.put(self._task, {"instruction": self.p("instruction"), "source": "parameter"})
            self.send("task", {"instruction": self.p("instruction"), "source": "planner parameter"})

    def on_task(self, msg: dict) -> None:
        self.await_recorder()
        self.component = PlannerComponent(Planner(self.brain, self.record), self.cfg, self.prompt_ctx, self.record,
                                           self.say)
        state, images = self.cache.look("start")
        if images:                                # the brain checks it sees the cameras (Brain.preflight)
            self.brain.preflight(images)
        if self.brain.unfit:
            self._publish(self.component.give_up(unfit_reason(self.brain.unfit)))
            return
        self._publish(self.component.start(state, images))

    def _publish(self, d: PlanDecision | None, verdict: dict | None = None) -> None:
        if d is None:
            return
        d.verdict = verdict
        self.send("plan", d.to_json())
        self.say(f"plan #{d.plan_id} ({d.kind}): " + "; ".join(f"{s.id}: {s.description}" for s in d.plan)[:300]
                 + (f"  - {d.reason[:120]}" if d.reason else ""))

    def _verdict(self, msg: dict) -> None:
        if self.component is not None:
            self._publish(self.component.on_verdict(verdict_from_json(msg), self.cache.look), msg)

    def _escalation(self, msg: dict) -> None:
        if self.component is not None:
            self._publish(self.component.on_escalation(Escalation.from_json(msg), self.cache.look))


class ExecutorNode(RoleNode):
    """Drives the episode: plan -> batch -> report [-> verdict] -> ... (ExecutorComponent + EpisodeBook).

    Messages from different nodes may arrive in any order (a verdict before the report it is about,
    a new plan before the rejected verdict that caused it): each is held until the episode is at
    the point where it applies (``_settle``), so the component sees them in the in-process order."""

    role = "executor"
    extra_params = {"privileged_evaluator": True, "exit_on_end": False, "wait_for_recorder_s": 0.0}
    outputs = ("commands", "episode", "escalation", "report")
    recorded_first = ("commands", "events")   # matched from this node's own participant before the first batch

    def needs_rpc(self) -> bool:
        return bool(self.p("privileged_evaluator"))

    def __init__(self):
        super().__init__()
        self.component: ExecutorComponent | None = None
        self.book: EpisodeBook | None = None
        self.state = "idle"                     # idle | await_plan | await_report | await_verdict | ended
        self.pending = ""                       # the batch under way
        self.verify_batch = ""                  # the batch whose claim the Verifier is checking
        self.applied_seq = 0
        self.decisions: dict[int, dict] = {}    # plan decisions not applied yet, by seq
        self.verdicts: dict[str, dict] = {}     # verdicts not applied yet, by batch id
        self.seen_verdicts: set = set()
        self.report_steps = 0
        self.motion_s = 0.0
        self.parked = False                     # paused by the operator before the next batch
        self.vlm = {"calls": 0, "s": 0.0}
        self.listen("plan", lambda m: self.worker.put(self._plan, m))
        self.listen("report", lambda m: self.worker.put(self._report, m))
        self.listen("verdict", lambda m: self.worker.put(self._verdict, m))
        self.listen("events", self._count)

    def _count(self, ev: dict) -> None:
        if ev.get("kind") == "vlm_call":
            self.vlm["calls"] += 1
            self.vlm["s"] += float(ev.get("latency_s", 0.0) or 0.0)

    def on_task(self, msg: dict) -> None:
        self.component = ExecutorComponent(Executor(self.brain, self.record), self.cfg, self.prompt_ctx, self.say)
        self.book = EpisodeBook(self.cfg)
        self.parked = False
        self.state = "await_plan"
        self.send("episode", {"event": "start", "instruction": self.instruction,
                              "brain": getattr(self.brain, "name", "?"),
                              "privileged": bool(getattr(self.brain, "privileged", False))})
        self._settle()

    # -- the evaluator (simulation: privileged) ----------------------------------------------------
    def _evaluate(self) -> tuple[bool, int]:
        if self.rpc is not None and self.p("privileged_evaluator"):
            r = self.rpc.call("evaluate", float(self.p("rpc_timeout_s")))
            if self.cfg.max_steps is None:
                self.cfg.max_steps = int(r["budget"])
            return bool(r["success"]), int(r["steps"])
        return False, self.report_steps

    # -- messages: held until they apply ------------------------------------------------------------
    def _plan(self, msg: dict) -> None:
        seq = int(msg.get("seq", 0))
        if seq > self.applied_seq:
            self.decisions[seq] = msg
        self._settle()

    def _verdict(self, msg: dict) -> None:
        bid = str(msg.get("batch_id", ""))
        if bid and bid not in self.seen_verdicts:
            self.verdicts[bid] = msg
        self._settle()

    def _settle(self) -> None:
        """Apply what was held, as far as the episode's state allows."""
        while self.component is not None and self.state != "ended":
            if self.state == "await_verdict":
                v = self.verdicts.pop(self.verify_batch, None)
                if v is None:                    # the verdict may travel inside the decision it caused
                    v = next((d["verdict"] for d in self.decisions.values()
                              if (d.get("verdict") or {}).get("batch_id") == self.verify_batch), None)
                if v is None:
                    return
                self._apply_verdict(v)
                continue
            if self.state == "await_plan" and self.decisions:
                seqs = sorted(self.decisions)
                for seq in seqs:
                    d = PlanDecision.from_json(self.decisions.pop(seq))
                    self.applied_seq = seq
                    self.component.on_plan(d)
                    if self.book.on_plan(d):
                        return self._end()
                self._propose()
                continue
            return

    def _report(self, rep: dict) -> None:
        if self.state != "await_report" or rep.get("batch_id") != self.pending:
            return
        self.pending = ""
        self.report_steps += int(rep.get("steps", 0) or 0)
        self.motion_s += float(rep.get("duration_s", 0.0) or 0.0)
        sg = self.component.subgoal
        self.say(f"{sg.id if sg else '?'} batch {rep['batch_id']}: {rep['status']}"
                 + (f" - {rep['reason'][:120]}" if rep.get("reason") else ""))
        if self.book.on_report(rep):
            return self._end()
        success, _ = self._evaluate()
        if success:
            return self._propose()               # the loop head records the success
        after = self.component.on_report(rep)
        if after.verify:
            self.state, self.verify_batch = "await_verdict", rep["batch_id"]
        elif after.escalate is not None:
            self._escalate(after.escalate)
        else:
            self._propose()
        self._settle()

    def _apply_verdict(self, msg: dict) -> None:
        self.seen_verdicts.add(str(msg.get("batch_id", "")))
        v = verdict_from_json(msg)
        self.say(f"{v.subgoal_id} verdict: {'achieved' if v.achieved else 'REJECTED'} - {v.evidence[:100]}")
        self.book.on_verdict(v)
        esc = self.component.on_verdict(v)
        if esc is not None:
            if self.book.plan_verified(bool(self.p("privileged_evaluator")), lambda: self._evaluate()[0]):
                return self._propose()           # ended (no privileged check), or the loop head records the success
            return self._escalate(esc)
        if v.achieved:
            return self._propose()
        self.state = "await_plan"                # the Planner answers the rejection

    def _escalate(self, esc: Escalation) -> None:
        self.state = "await_plan"
        self.send("escalation", esc.to_json())

    # -- the operator (console) -----------------------------------------------------------------
    def on_pause(self, paused: bool) -> None:
        if not paused:
            self.worker.put(self._unpark)

    def _unpark(self) -> None:
        if self.parked and self.state not in ("ended", "idle"):
            self.parked = False
            self.say("resumed by the operator")
            self._propose()

    # -- the loop ---------------------------------------------------------------------------------
    def _propose(self) -> None:
        """The loop head and the next batch (this worker runs one job at a time: nothing interleaves)."""
        book = self.book
        while True:
            if self.operator.paused:            # the operator's pause: hold here until resumed
                if not self.parked:
                    self.parked = True
                    self.say("paused by the operator: holding before the next batch")
                return
            success, steps = self._evaluate()
            if book.check(steps, success, "", getattr(self.brain, "unfit", "")):
                return self._end()
            sg = self.component.subgoal
            bid = book.next_batch_id()
            state, images = self.cache.look(f"{bid} {sg.id}")
            prop = self.component.propose(state, images, bid)
            if prop.batch is not None:
                batch, source, note = review_batch(self.operator, prop.batch, self.record, self.say,
                                                  lambda: self.closing)
                self.state, self.pending = "await_report", bid
                if batch is None:                # rejected by the operator: nothing moves
                    rep = operator_rejection(prop.batch, note, self.cache.state or {})
                    self.send("report", rep)
                    return self._report(rep)
                self.await_recorder()
                self.send("commands", {"schema_version": SCHEMA_VERSION, **batch,
                                       **({"source": source} if source != "executor" else {})})
                return
            if prop.escalate is not None:
                return self._escalate(prop.escalate)

    def _end(self) -> None:
        if self.state == "ended":
            return
        self.state = "ended"
        book = self.book
        try:
            _, steps = self._evaluate()
        except Exception:  # noqa: BLE001
            steps = self.report_steps
        if book.outcome == "fault" and "budget_exhausted" in book.reason:
            book.outcome = "step_budget"
        res = book.result(steps, getattr(self.brain, "name", "?"), bool(getattr(self.brain, "privileged", False)),
                          self.component.plan, self.vlm["calls"], self.vlm["s"], self.motion_s)
        out = res.to_json()
        self.send("episode", {"event": "end", "instruction": self.instruction, "result": out})
        label = " [oracle: privileged simulator state]" if res.privileged else ""
        self.log(f"EPISODE {'SUCCESS' if res.success else 'FAILURE'}: {res.outcome} - {res.reason}{label}")
        self.log(f"  steps {res.steps}, batches {res.batches}, replans {res.replans}, VLM calls {res.vlm_calls}, "
                 f"wall {res.wall_s:.1f} s")
        if self.p("exit_on_end"):
            time.sleep(1.0)                       # let the latched end message reach the recorder
            self.exit_code = 0 if res.success else 1


class VerifierNode(RoleNode):
    """A report that claims its subgoal -> a verdict (VerifierComponent)."""

    role = "verifier"
    outputs = ("verdict",)

    def __init__(self):
        super().__init__()
        self.component: VerifierComponent | None = None
        self.plan: list = []
        self.plan_id = 0
        self.last_verdict = None
        self.held: list = []
        self.listen("plan", lambda m: self.worker.put(self._plan, m))
        self.listen("report", lambda m: self.worker.put(self._report, m))

    def on_task(self, msg: dict) -> None:
        self.component = VerifierComponent(Verifier(self.brain, self.record), self.cfg, self.prompt_ctx)

    def _plan(self, msg: dict) -> None:
        d = PlanDecision.from_json(msg)
        if d.kind == "plan" and d.plan_id != self.plan_id:
            self.plan, self.plan_id, self.last_verdict = list(d.plan), d.plan_id, None
            held, self.held = self.held, []
            for rep in held:
                self._report(rep)

    def _report(self, rep: dict) -> None:
        if self.component is None or not rep.get("batch_id") or not VerifierComponent.wants(rep):
            return
        sg = next((s for s in self.plan if s.id == rep.get("subgoal_id")), None)
        if sg is None:                              # its plan has not arrived yet: verified when it does
            self.held.append(rep)
            return
        state, images = self.cache.look(f"verify {sg.id}")
        state = rep.get("end_state") or state
        v = self.component.verify(sg, self.plan, rep, state, images, self.last_verdict)
        self.last_verdict = v
        self.send("verdict", {**v.to_json(), "batch_id": rep["batch_id"]})


class RemoteToken(CancelToken):
    """The Monitor's cancel goes to the Controller as a ``cancel`` message."""

    def __init__(self, node: MotorMindNode, batch_id: str):
        super().__init__()
        self.node, self.batch_id = node, batch_id

    def cancel(self, reason: str, source: str = "") -> None:
        first = not self.cancelled
        super().cancel(reason, source)
        if first:
            self.node.send("cancel", {"batch_id": self.batch_id, "reason": reason, "source": source or "monitor"})


class MonitorNode(RoleNode):
    """Action-boundary events of the batch under way -> cancel requests (MonitorComponent)."""

    role = "monitor"
    outputs = ("cancel",)

    def __init__(self):
        super().__init__()
        self.component: MonitorComponent | None = None
        self.monitor: Monitor | None = None
        self.plan: list = []
        self.listen("plan", self._plan)
        self.listen("commands", self._commands)
        self.listen("progress", self._progress)
        self.listen("report", self._report)

    def on_task(self, msg: dict) -> None:
        if self.cfg.monitor and self.monitor is None:
            self.monitor = Monitor(self.brain, self.record)
            self.component = MonitorComponent(self.monitor, self.instruction)

    def _plan(self, msg: dict) -> None:
        d = PlanDecision.from_json(msg)
        if d.kind == "plan":
            self.plan = list(d.plan)

    def _commands(self, batch: dict) -> None:
        if self.component is not None:
            sg = next((s for s in self.plan if s.id == batch.get("subgoal_id")), None)
            self.component.begin(batch, sg, RemoteToken(self, str(batch.get("batch_id", ""))))

    def _progress(self, ev: dict) -> None:
        if self.component is not None and ev.get("event") == "command_end":
            data = {k: v for k, v in ev.items() if k not in ("event", "state", "schema_version")}
            self.component.command_end(data, ev.get("state") or {})

    def _report(self, rep: dict) -> None:
        if self.component is not None and rep.get("batch_id") and rep.get("batch_id") == self.component.batch_id:
            self.component.end()

    def close_role(self) -> None:
        if self.monitor:
            self.monitor.close()


class MemoryNode(RoleNode):
    """Every event -> short summaries on ``memory`` (the Memory role, asynchronous)."""

    role = "memory"
    outputs = ("memory",)

    def __init__(self):
        super().__init__()
        self.memory: Memory | None = None
        self.listen("plan", lambda m: self._add("plan", m))
        self.listen("report", lambda m: self._add("report", m) if m.get("batch_id") else None)
        self.listen("verdict", lambda m: self._add("verdict", m))
        self.listen("events", lambda m: self._add("replan", m) if m.get("kind") == "replan" else None)

    def on_task(self, msg: dict) -> None:
        if self.cfg.memory and self.memory is None:
            self.memory = Memory(self.brain, self._record, self.instruction)

    def _record(self, kind: str, **data) -> None:
        self.record(kind, **data)
        if kind == "memory":
            self.send("memory", {"summary": data.get("summary", ""), "facts": data.get("facts", [])})

    def _add(self, kind: str, msg: dict) -> None:
        if self.memory is None:
            return
        if kind == "plan":
            if msg.get("decision") != "plan":
                return
            msg = {"subgoals": msg.get("subgoals", []), "replan_reason": msg.get("reason", ""),
                   "brain": msg.get("brain", ""), "privileged": msg.get("privileged", False)}
        data = {k: v for k, v in msg.items() if k not in ("schema_version", "kind", "node", "t")}
        self.memory.add(kind, data)

    def close_role(self) -> None:
        if self.memory:
            self.memory.close()


NODES = {"planner": PlannerNode, "executor": ExecutorNode, "verifier": VerifierNode, "monitor": MonitorNode,
         "memory": MemoryNode}
