"""The role nodes: Planner, Executor, Verifier, Monitor, Memory. Each is a thin wrapper that feeds
one component of ``motormind.components`` (the same ones the in-process runner uses) from its
topics and publishes what the component decides. No decision is made here.

Each node runs its component on one worker thread (``Worker``): callbacks only queue, so heartbeats,
cancels and privileged answers are never held up by a brain call.
"""
from __future__ import annotations

import threading
import time
from dataclasses import fields, replace

from .. import SCHEMA_VERSION
from ..components import (Context, ExecutorComponent, MemoryView, MonitorComponent, PlannerComponent,
                          VerifierComponent, operator_rejection, review_batch)
from ..console.brain import OperatorBrain
from ..console.desk import TAKEOVER_ROLES
from ..controller import CancelToken
from ..episode.book import unfit_reason
from ..episode.machine import Deliver, End, EpisodeMachine, Escalate, Execute, Hold, Hooks
from ..episode.overlap import PROBE_PLAN_TAG, AheadPool, Overlap, ahead_tag, overlap_of, scene_basis
from ..grounding.marks import Marker, options_of
from ..grounding.points import Grounding, convention_of
from ..messages import Escalation, EventKind, PlanDecision, Report, Verdict, encode
from ..vlm_calls import count_vlm, dropped_cost, new_vlm_totals
from ..roles.executor import Executor
from ..roles.facts import BudgetCounter, PromptFacts
from ..roles.memory import Memory
from ..roles.monitor import Monitor
from ..roles.planner import Planner
from ..roles.verifier import Verifier
from . import graph
from .base import MotorMindNode, ObservationCache, RemoteCall, make_brain, observation_of, serves_oracle
from .operator_proxy import OperatorProxy


# at the episode's end, how long the Executor waits to hear the VLM calls the messages it acted on
# stand on (``vlm_calls_before``: a call is on ``events``, the verdict it made on ``verdict``)
CALLS_WAIT_S = 2.0
# once the Controller's state is heard, how long a new task waits for its calibrations and scene facts
# (latched, sent before its first state: they are there at once from a Controller that is up)
SETUP_WAIT_S = 5.0


class RoleNode(MotorMindNode):
    """A node hosting one role over the brain: the task, the plan, memory and observations."""

    def __init__(self):
        super().__init__()
        self.exit_code = None
        self.rpc = RemoteCall(self) if (self.setup.brain.type == "oracle" or serves_oracle(self.setup.brain)
                                        or self.needs_rpc()) else None
        self.brain = make_brain(self, self.rpc)
        # the overlap (episode/overlap.py): speculate and verify_ahead are the Executor node's, plan_with_probe
        # the Planner node's (its decision carries the outcome to the Executor node's machine)
        self.overlap = overlap_of(self.brain)
        self.closing = False
        self._recorder_seen = False
        self.operator: OperatorProxy | None = None
        if self.role in TAKEOVER_ROLES:      # the console may take this role over (and approve batches)
            self.operator = OperatorProxy(self, on_pause=self.on_pause)
            self.brain = OperatorBrain(self.brain, self.operator, abort=lambda: self.closing)
        self.cache = ObservationCache(self, self.cfg.images, self.settings.nodes.image_wait_s)
        # the Controller's cameras as the runner's Robot (calibrations, scene facts, closing axis), and the
        # same marks the runner draws (grounding/marks.py: the brain's VLM config; a bad word fails the start)
        self.robot = self.cache.robot(self.profile)
        self.marker = Marker(self.robot, options_of(self.brain))
        self.memory_view = MemoryView(self.cfg.memory)
        self.instruction = ""
        self._call_lock = threading.Lock()
        self._call_no: dict = {}             # instruction -> this node's VLM calls naming it so far
        self.prompt_ctx: Context | None = None
        # the budget as this node knows it: the reports' steps, the clock since the task, the config's budgets
        self.budget = BudgetCounter(self.cfg)
        self.listen("report", self.budget.on_report)
        self.listen("memory", self._memory)
        self.listen("task", lambda m: self.worker.put(self._task, m))

    def needs_rpc(self) -> bool:
        return False

    recorded_first: tuple = ()

    def await_recorder(self) -> None:
        """With record:=FILE (its section's ``wait_for_recorder_s`` > 0), once, before its first output:
        wait until the recorder subscribes to ``recorded_first``, as this node's participant sees it
        (that is when its writers match the recorder's readers): a volatile message (the first batch,
        the first VLM call's event) sent before then would never reach the file. After
        ``wait_for_recorder_s`` it goes on and says so."""
        wait = float(getattr(self.settings, self.role).wait_for_recorder_s)
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
        self.memory_view.reset()             # a new episode's memory starts empty, as in-process
        # the Controller's calibrations and scene facts (the cameras and scene_facts topics) before the
        # first prompt: its setup block is fixed for the episode
        if self.cache.wait_state() is not None and not self.cache.wait_setup(SETUP_WAIT_S):
            self.say("no calibrations or scene facts from the Controller: no camera numbers, marks or "
                     "measuring in this episode")
        brain = self.brain
        # points and regions resolved from each look's depth, as in-process (regions cut from the frame seen:
        # no render at hand here); a camera without depth or calibration is refused with that reason
        self.prompt_ctx = Context(self.profile, instr, self.memory_view.text, self.robot.camera_names, Grounding(
            self.profile.directions, lambda role, cam, w, h: convention_of(brain, role, w, h), None, self.record,
            max_looks=self.cfg.max_looks))
        # the numbers every prompt states (roles/facts.py), from the same sources as in-process
        self.budget.start()
        self.prompt_ctx.facts = PromptFacts.of_robot(self.robot, self.budget, self.marker.options,
                                                     lambda cam, w, h: convention_of(brain, "executor", w, h))
        self.log(f"task: {instr!r}  brain: {getattr(self.brain, 'name', '?')}"
                 f"{' (PRIVILEGED simulator state)' if getattr(self.brain, 'privileged', False) else ''}")
        self.on_task(msg)

    def on_task(self, msg: dict) -> None:
        pass

    def _memory(self, msg: dict) -> None:
        """Memory's summary of this node's episode: one naming another instruction is an earlier
        episode's (its Memory's last call may end after the new task)."""
        if msg.get("instruction", self.instruction) == self.instruction:
            self.memory_view.update(msg)

    def record(self, kind: str, **data) -> None:
        """A VLM call names its episode (the instruction: a node takes a new task only with a new one)
        and its number among this node's calls of that episode (``call_no``: 1, 2, ...; numbered and
        sent under one lock, so the topic delivers one node's calls in their order). The Executor's end
        names, per node, how many of its calls the episode counts (``vlm_counted``): the count is exact
        whatever order the topics deliver the calls and the end in (docs/ros2.md)."""
        if kind != EventKind.VLM_CALL:
            super().record(kind, **data)
            return
        instr = data.setdefault("instruction", self.instruction)
        with self._call_lock:
            n = self._call_no[instr] = self._call_no.pop(instr, 0) + 1    # (the last used, at the end)
            while len(self._call_no) > 8:
                self._call_no.pop(next(iter(self._call_no)))
            super().record(kind, call_no=n, **data)

    def calls_before(self) -> dict:
        """What a plan or a verdict this node sends stands on: its VLM calls of the episode so far (the
        Executor, ending the episode on it, waits to hear them: they count)."""
        with self._call_lock:
            n = self._call_no.get(self.instruction, 0)
        return {"vlm_calls_before": {"node": self.get_name(), "instruction": self.instruction, "n": n}}

    def record_for(self, instruction: str):
        """The recorder of a role object of ``instruction``'s episode: its VLM calls name that episode
        even when they end after the next task (a background Monitor's or Memory's)."""
        def record(kind: str, **data) -> None:
            if kind == EventKind.VLM_CALL:
                data.setdefault("instruction", instruction)
            self.record(kind, **data)
        return record

    def tagged(self, kind: str, **data) -> None:
        """The role's record: a call made ahead carries its tag (``ahead``), so it is costed apart."""
        tag = ahead_tag()
        self.record(kind, **({**data, "ahead": tag} if tag and kind == EventKind.VLM_CALL else data))

    def look(self, label: str = "", after: float | None = None) -> tuple[dict, dict]:
        """(state, the frames as the roles see them), as the runner's ``_look``: the frames marked once
        (``Marker``), the look kept for resolving points (``Grounding.see``) and its grip pixels for the
        prompts (``PromptFacts.saw``); a ``marks`` event says what was drawn (the raw frames are on the
        image topics)."""
        state, images, depth = self.cache.observe(label, after)
        ctx = self.prompt_ctx
        if ctx is None or not (state or {}).get("eef_pos_mm"):
            return state, images
        obs = observation_of(state, images, depth)
        marked, infos = ctx.see(label, obs, self.marker, self.robot.cameras() if images else {})
        if images:
            self.record("marks", label=label, cameras=infos, depth=sorted(depth))
        return state, marked

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
    """task -> plan; a rejected verdict or an escalation -> a new plan decision (PlannerComponent).

    Before the first plan the brain's camera probe (``Brain.preflight``). With the VLM config's
    ``overlap.plan_with_probe`` the first plan is asked beside the probe, on a thread of its own, from the
    same look (its ``vlm_call`` tagged ``plan_with_probe:plan``); it is published only when the probe found
    the endpoint fit, otherwise dropped (the decision is the serial loop's: the Planner gives up with the
    probe's reason). The decision carries the outcome (``PlanDecision.ahead``) to the Executor node, whose
    episode machine counts and costs it as in-process."""

    role = "planner"
    sections = ("planner",)
    outputs = ("plan", "task")
    recorded_first = graph.RECORDED           # the episode starts here: every recorded topic

    def __init__(self):
        super().__init__()
        self.component: PlannerComponent | None = None
        self.listen("verdict", lambda m: self.worker.put(self._verdict, m))
        self.listen("escalation", lambda m: self.worker.put(self._escalation, m))
        instruction = self.settings.planner.instruction
        if instruction:
            self.worker.put(self._task, {"instruction": instruction, "source": "parameter"})
            self.send("task", {"instruction": instruction, "source": "planner parameter"})

    def _component(self) -> PlannerComponent:
        return PlannerComponent(Planner(self.brain, self.tagged), self.cfg, self.prompt_ctx, self.record, self.say)

    def on_task(self, msg: dict) -> None:
        self.await_recorder()
        self.component = self._component()
        state, images = self.look("start")
        first = None                              # overlap.plan_with_probe: the first plan, asked beside the probe
        if self.overlap.plan_with_probe:          # (on a thread of its own, its call tagged; as runner.py in-process)
            pool = AheadPool(1)
            first = pool.spawn(lambda: self.component.start(state, images), PROBE_PLAN_TAG)
            pool.close(wait=False)                # (the call runs on; nothing else is asked on it)
            self.record("overlap_ask", overlap="plan_with_probe", batch_id="", for_batch="", subgoal_id="",
                        tag=PROBE_PLAN_TAG)
        if images:                                # the brain checks it sees the cameras (Brain.preflight)
            self.brain.preflight(images)
        if self.brain.unfit:
            ahead = None
            if first is not None:                 # dropped: its call ends first, so the decision stands on it (counted)
                try:
                    first.result()
                except Exception:  # noqa: BLE001 - a call that broke is dropped all the same
                    pass
                self.component = self._component()    # the dropped plan leaves nothing behind (as the serial loop)
                ahead = {"kind": "plan_with_probe", "tag": PROBE_PLAN_TAG,
                         "dropped": f"the probe found the endpoint unfit: {self.brain.unfit}"}
            self._publish(replace(self.component.give_up(unfit_reason(self.brain.unfit)), ahead=ahead))
            return
        if first is None:
            self._publish(self.component.start(state, images))
            return
        self._publish(replace(first.result(), ahead={"kind": "plan_with_probe", "tag": PROBE_PLAN_TAG, "dropped": ""}))

    def _publish(self, d: PlanDecision | None, verdict: dict | None = None) -> None:
        if d is None:
            return
        d = replace(d, verdict=verdict)
        self.send("plan", {**encode(d), **self.calls_before()})
        self.say(f"plan #{d.plan_id} ({d.kind}): " + "; ".join(f"{s.id}: {s.description}" for s in d.plan)[:300]
                 + (f"  - {d.reason[:120]}" if d.reason else ""))

    def _verdict(self, msg: dict) -> None:
        if self.component is not None:
            self._publish(self.component.on_verdict(Verdict.from_json(msg), self.look), msg)

    def _escalation(self, msg: dict) -> None:
        if self.component is not None:
            self._publish(self.component.on_escalation(Escalation.from_json(msg), self.look))


class ExecutorNode(RoleNode):
    """Drives the episode machine (``motormind/episode/machine.py``) from its topics: a plan, a
    report or a verdict in; a batch on ``commands``, an ``escalation`` or the ``episode`` end out.
    Messages from different nodes may arrive in any order: the machine holds each until it applies.

    With the VLM config's ``overlap`` (speculate, verify_ahead, retry_with_replan: episode/overlap.py) the
    machine asks the Executor ahead on this node's ``AheadPool`` (one per episode, closed at its end and on
    shutdown): the next batch while one runs, the next subgoal's first batch while the Verifier node checks
    a claim, the subgoal again while the Planner node replans.
    Such a batch goes on ``commands`` only from the loop head, after the report (or the accepting verdict)
    it was asked for confirmed it, and through the operator's review; nothing is asked ahead while an
    operator reviews each batch (approval mode, or the Executor taken over: ``_reviewing``). The Planner
    node's first plan asked beside the camera probe (plan_with_probe) is counted here from its decision
    (``_settle_ahead``)."""

    role = "executor"
    sections = ("executor",)
    outputs = ("commands", "episode", "escalation", "report")
    recorded_first = ("commands", "events")   # matched from this node's own participant before the first batch

    def needs_rpc(self) -> bool:
        return bool(self.settings.executor.privileged_evaluator)

    def __init__(self):
        super().__init__()
        self.machine: EpisodeMachine | None = None
        self._early: list = []                    # (kind, message) that came before the task (latched topics
        self.vlm: dict = {}                       # are delivered in no particular order); instruction -> calls
        self._vlm_cv = threading.Condition()      # (heard on the callback thread, read on the worker's)
        self._owed: dict = {}                     # instruction -> node -> calls the plans and verdicts stand on
        self._counted: dict = {}                  # node -> its calls the last end counted
        self._pool: AheadPool | None = None       # the episode's calls made ahead (overlap)
        self._by_tag: dict = {}                   # their totals by tag, as the last end heard them
        self._settled: set = set()                # (kind, tag) of the calls other nodes asked ahead, counted
        self.listen("plan", lambda m: self.worker.put(self._feed, "plan", m))
        self.listen("report", lambda m: self.worker.put(self._feed, "report", m))
        self.listen("verdict", lambda m: self.worker.put(self._feed, "verdict", m))
        self.listen("events", self._count)

    def _count(self, ev: dict) -> None:
        """The VLM calls naming each instruction (RoleNode.record), heard before or after this node
        took its task: per node, the number of the last one heard (one node's calls come in order) and
        their seconds."""
        if ev.get("kind") != EventKind.VLM_CALL:
            return
        with self._vlm_cv:
            while len(self.vlm) >= 8 and ev.get("instruction") not in self.vlm:
                self.vlm.pop(next(iter(self.vlm)))
            c = self.vlm.setdefault(str(ev.get("instruction", "")), {}).setdefault(
                str(ev.get("node", "")), {"n": 0, "totals": new_vlm_totals()})
            c["n"] = max(c["n"], int(ev.get("call_no") or c["n"] + 1))
            count_vlm(c["totals"], ev)
            self._vlm_cv.notify_all()

    def _owe(self, msg: dict) -> None:
        """A plan or a verdict stands on its node's calls so far (RoleNode.calls_before)."""
        b = msg.get("vlm_calls_before") or {}
        if b.get("node"):
            with self._vlm_cv:
                while len(self._owed) >= 8 and b.get("instruction") not in self._owed:
                    self._owed.pop(next(iter(self._owed)))
                owed = self._owed.setdefault(str(b.get("instruction", "")), {})
                owed[b["node"]] = max(owed.get(b["node"], 0), int(b.get("n") or 0))

    # -- overlap (episode/overlap.py) ------------------------------------------------------------------
    def _reviewing(self) -> bool:
        """An operator reviews each batch now: a console attached and in approval mode, or this role taken
        over (its answers are the operator's). The review itself (``review_batch``) runs on every batch."""
        op = self.operator
        return op is not None and (op.approval or self.role in op.takeover)

    def _close_pool(self, wait: bool = True) -> None:
        """No more calls made ahead; ``wait``: until those under way end (a dropped one is then recorded,
        numbered and counted)."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close(wait=wait)

    def _calls(self) -> tuple[int, float]:
        """The episode's VLM calls when it ends (the machine asks once, for its result): per node, its
        calls naming the episode up to the last one this node has heard, once it has heard those its
        own calls and the plans and verdicts it acted on stand on (``vlm_calls_before``; at most
        CALLS_WAIT_S). The end names them (``vlm_counted``): each call on ``events`` says by its node and
        ``call_no`` whether it counts; a Monitor's or Memory's call that ends later does not."""
        self._close_pool()                        # this node's calls made ahead are all numbered now
        with self._call_lock:
            mine = self._call_no.get(self.instruction, 0)
        with self._vlm_cv:
            owed = {**self._owed.get(self.instruction, {}), self.get_name(): mine}

            def missing() -> dict:
                heard = self.vlm.get(self.instruction, {})
                return {node: n for node, n in owed.items() if heard.get(node, {}).get("n", 0) < n}
            if not self._vlm_cv.wait_for(lambda: not missing(), CALLS_WAIT_S):
                self.say(f"the episode's end: VLM calls not heard after {CALLS_WAIT_S:g} s (node: calls owed): "
                         f"{missing()}; the count is of those heard")
            per = self.vlm.get(self.instruction, {})
            self._counted = {node: c["n"] for node, c in per.items()}
            self._by_tag = {t: v for c in per.values() for t, v in (c["totals"].get("by_tag") or {}).items()}
            return sum(self._counted.values()), sum(c["totals"]["latency_s"] for c in per.values())

    def on_task(self, msg: dict) -> None:
        self._close_pool()                        # (the last episode's: closed at its end already)
        pool = self._pool = AheadPool() if self.overlap.any else None
        self._settled = set()
        component = ExecutorComponent(Executor(self.brain, self.tagged), self.cfg, self.prompt_ctx, self.say)
        self.machine = EpisodeMachine(self.cfg, component, Hooks(
            evaluate=self._evaluate, look=self.look,
            has_success_check=bool(self.settings.executor.privileged_evaluator),
            unfit=lambda: getattr(self.brain, "unfit", "") or "", hold=self._paused,
            review=lambda batch: review_batch(self.operator, batch, self.record, self.say, lambda: self.closing),
            reviewing=self._reviewing,
            rejection=lambda batch, note: operator_rejection(batch, note, self.cache.state or {}),
            vlm=self._calls, say=self.say,
            brain=getattr(self.brain, "name", "?"), privileged=bool(getattr(self.brain, "privileged", False)),
            overlap=self.overlap, spawn=pool.spawn if pool is not None else None,
            basis=lambda: scene_basis(self.brain), record=self.record))
        self.send("episode", {"event": "start", "instruction": self.instruction,
                              "brain": getattr(self.brain, "name", "?"),
                              "privileged": bool(getattr(self.brain, "privileged", False))})
        self._act(self.machine.start())
        early, self._early = self._early, []
        for kind, msg in early:                   # a latched plan that arrived before the task
            self._feed(kind, msg)

    # -- the evaluator (simulation: privileged) ----------------------------------------------------
    def _evaluate(self) -> tuple[bool, int]:
        if self.rpc is not None and self.settings.executor.privileged_evaluator:
            r = self.rpc.call("evaluate", float(self.settings.nodes.rpc_timeout_s))
            return bool(r["success"]), int(r["steps"])
        return False, self.machine.report_steps

    # -- messages in, actions out -------------------------------------------------------------------
    def _feed(self, kind: str, msg: dict) -> None:
        m = self.machine
        if m is None:
            self._early.append((kind, msg))
            return
        if kind in ("plan", "verdict"):
            self._owe(msg)
        if kind == "plan":
            d = PlanDecision.from_json(msg)
            self._settle_ahead(d)
            self._act(m.plan(d))
        elif kind == "report":
            if msg.get("batch_id"):               # (a Controller notice, stopped / ready, is about no batch)
                self._act(m.report(Report.from_json(msg)))
        else:
            self._act(m.verdict(Verdict.from_json(msg), str(msg.get("batch_id", "") or "")))

    def _settle_ahead(self, d: PlanDecision) -> None:
        """A call another node asked ahead that the decision settles (the Planner node's first plan, asked
        beside the camera probe: overlap.plan_with_probe): used or dropped, counted and costed by the
        machine as in-process, once."""
        a = d.ahead
        if not a or self.machine.over:
            return
        if a["kind"] not in {f.name for f in fields(Overlap)}:
            self.say(f"plan #{d.plan_id}: ahead names no overlap kind ({a['kind']!r}): not counted")
            return
        key = (a["kind"], a.get("tag", ""))
        if key in self._settled:
            return
        self._settled.add(key)
        self.machine.ahead_outcome(a["kind"], a.get("tag", ""), a.get("dropped", ""))

    def _act(self, actions: list) -> None:
        while actions:
            a = actions.pop(0)
            if isinstance(a, Execute):
                self.await_recorder()
                self.send("commands", {"schema_version": SCHEMA_VERSION, **a.batch,
                                       **({"source": a.source} if a.source != "executor" else {})})
            elif isinstance(a, Deliver):        # the operator rejected the batch: its report, made here
                self.send("report", encode(a.report))
                actions += self.machine.report(a.report)
            elif isinstance(a, Escalate):
                self.send("escalation", encode(a.escalation))
            elif isinstance(a, Hold):
                self.say("paused by the operator: holding before the next batch")
                self.record("parked", reason="paused by the operator: holding before the next batch")   # the console
            elif isinstance(a, End):
                self._end(a.result)
            # Verify, AwaitPlan: the Verifier and the Planner nodes answer the report and the verdict

    # -- the operator (console) -----------------------------------------------------------------
    def close_role(self) -> None:
        self._close_pool(wait=False)              # shutting down: a call under way is not waited for

    def _paused(self) -> bool:
        return bool(self.operator is not None and self.operator.paused)

    def on_pause(self, paused: bool) -> None:
        if not paused:
            self.worker.put(lambda: self._act(self.machine.resume()) if self.machine is not None else None)

    def _end(self, res) -> None:
        if res.overlap or self._by_tag:           # what the calls made ahead and dropped cost, as in-process
            res.overlap = {**(res.overlap or {}), "dropped_cost": dropped_cost(
                self.machine.overlap_log, self._by_tag, res.vlm_s)}
        out = res.to_json()
        self.send("episode", {"event": "end", "instruction": self.instruction, "result": out,
                              "vlm_counted": dict(self._counted)})
        label = " [oracle: privileged simulator state]" if res.privileged else ""
        self.log(f"EPISODE {'SUCCESS' if res.success else 'FAILURE'}: {res.outcome} - {res.reason}{label}")
        self.log(f"  steps {res.steps}, batches {res.batches}, replans {res.replans}, VLM calls {res.vlm_calls}, "
                 f"wall {res.wall_s:.1f} s")
        if self.settings.executor.exit_on_end:
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

    def _report(self, msg: dict | Report) -> None:
        if self.component is None:
            return
        if isinstance(msg, dict):
            if not msg.get("batch_id"):             # (a Controller notice, stopped / ready, is about no batch)
                return
            msg = Report.from_json(msg)
        rep = msg
        if not VerifierComponent.wants(rep):
            return
        sg = next((s for s in self.plan if s.id == rep.subgoal_id), None)
        if sg is None:                              # its plan has not arrived yet: verified when it does
            self.held.append(rep)
            return
        state, images = self.look(f"verify {sg.id}")
        state = rep.end_state or state
        v = self.component.verify(sg, self.plan, rep, state, images, self.last_verdict)
        self.last_verdict = v
        self.send("verdict", {**encode(v), "batch_id": rep.batch_id, **self.calls_before()})


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
        """Each episode (a new instruction: RoleNode._task) gets a fresh Monitor whose prompts state its
        instruction, as each in-process one does (runner.py); the last episode's closes (a check under
        way still records under that episode's instruction)."""
        old, self.monitor, self.component = self.monitor, None, None
        if self.cfg.monitor:
            self.monitor = Monitor(self.brain, self.record_for(self.instruction))
            self.component = MonitorComponent(self.monitor, self.instruction)
            self.component.setup = self.prompt_ctx.facts.robot()
        if old is not None:
            old.close()

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
        """Each episode (a new instruction: RoleNode._task) gets a fresh Memory with its instruction, as
        each in-process one does (runner.py); the last episode's closes: its thread ends, its pending
        events are dropped (a flush would be a brain call after that episode's end, outside the count
        its result gives), a call under way still records under that episode's instruction."""
        old, self.memory = self.memory, None
        if self.cfg.memory:
            self.memory = Memory(self.brain, self._recorder(self.instruction), self.instruction)
        if old is not None:
            old.close()

    def _recorder(self, instruction: str):
        """The record of the Memory of ``instruction``'s episode: its VLM calls name that episode, its
        summaries go out on ``memory`` naming it while it is the current one."""
        record_it = self.record_for(instruction)

        def record(kind: str, **data) -> None:
            record_it(kind, **data)
            if kind == "memory" and instruction == self.instruction:     # an ended episode's: for no prompt
                self.send("memory", {"summary": data.get("summary", ""), "facts": data.get("facts", []),
                                     "instruction": instruction})
        return record

    def _add(self, kind: str, msg: dict) -> None:
        if self.memory is None:
            return
        if kind == "plan":
            if msg.get("decision") != "plan":
                return
            msg = {"subgoals": msg.get("subgoals", []), "replan_reason": msg.get("reason", ""),
                   "brain": msg.get("brain", ""), "privileged": msg.get("privileged", False)}
        data = {k: v for k, v in msg.items()
                if k not in ("schema_version", "kind", "node", "t", "vlm_calls_before")}
        self.memory.add(kind, data)

    def close_role(self) -> None:
        if self.memory:
            self.memory.close()


NODES = {"planner": PlannerNode, "executor": ExecutorNode, "verifier": VerifierNode, "monitor": MonitorNode,
         "memory": MemoryNode}
