"""The roles' decision logic as transport-agnostic components.

Each role's decisions - when a subgoal advances, when to verify, when to escalate, when to replan -
live here once; the order they are taken in, the budgets and the end are the episode machine's
(``motormind/episode/machine.py``). Two transports carry the same messages between them: the
in-process ``EpisodeRunner`` (threads and queues) and the ROS 2 nodes in ``motormind.ros`` (one
component per process). A component never publishes, subscribes, sleeps or observes the robot: it
is handed what it needs (measured state as the roles see it, images, report and verdict JSON) and
returns what should happen next.

    PlannerComponent    answers a task with a plan; replans on a rejected verdict or an escalation
                        (or, with replanning disabled, keeps the plan or gives up)
    ExecutorComponent   proposes the next batch after a plan / report / verdict; decides when a
                        report needs the Verifier; escalates after repeated failures
    VerifierComponent   verifies the claim in a report (or accepts it, the no-verifier ablation)
    MonitorComponent    turns the Controller's action-boundary events into Monitor checks
    Context             the prompt context every role shares (robot profile, instruction, memory, and
                        the measurements of the roles' points: ``grounding.points.Grounding``)

Any role may point (``points``) or ask for a closer view (``regions``); the Executor's answer that does
only that is a look (no control step, no batch: it is asked again at once, at most
``EpisodeConfig.max_looks`` times before each batch). The Executor and the Verifier may ask for a new
plan (``replan``): it ends the plan and reaches the Planner like a rejected verdict, with the reason.

Messages: the components take and give the typed messages of ``motormind/messages.py`` (Report,
Verdict, PlanDecision, Escalation; a batch is still the Executor's dict until the Controller parses
it); the transports encode them (``messages.encode``: JSON with ``schema_version``) where they leave
the process.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Callable

from .commands import BATCH_FIELDS
from .episode.book import unfit_reason
from .episode.config import EpisodeConfig
from .episode.overlap import Ahead
from .grounding.points import Grounding, replan_of
from .results import Status
from .roles.base import RoleResult, quote_id, quote_text
from .messages import CommandResult, Escalation, PlanDecision, Report, Subgoal, Verdict
from .roles.facts import PromptFacts
from .text import clip
from .views import describe as describe_views
from .vocabulary import prompt_block


def _noop(*_a, **_k) -> None:
    return None


def brief_report(rep: Report | None) -> str:
    """A report as the Executor and Verifier read it. What it echoes (the batch id, statuses, reasons:
    a cancel's or an operator's text among them) is quoted as data where it is not a token
    (``roles.base.quote_id``, ``quote_text``): the report's lines are the only lines it makes. A brain
    decides on the report's facts (``report_facts``), not on this prose."""
    if rep is None:
        return "none yet (this is the first batch)"
    lines = [f"batch {quote_id(rep.batch_id)} status={quote_id(rep.status.value)}"
             + (f" reason: {quote_text(rep.reason)}" if rep.reason else "")]
    js = lambda v: json.dumps(v, default=str)  # noqa: E731
    for r in rep.results:
        achieved = {k: v for k, v in (r.achieved or {}).items() if k != "rotation_vector_deg"}
        lines.append(f"  [{js(r.index)}] {js(r.command)} -> {quote_id(r.status.value)}"
                     + (f" commanded={js(r.commanded)}" if r.commanded else "")
                     + (f" achieved={js(achieved)}" if r.achieved else "")
                     + (f" ({quote_text(r.reason)})" if r.reason else ""))
    return "\n".join(lines)


def report_context(rep: Report | None) -> dict:
    """The prompt values of the report a role reads: its prose (``last_report``, what the prompt shows)
    and its facts (``report_facts``, what a brain that decides in code reads: the oracle)."""
    return {"last_report": brief_report(rep), "report_facts": rep.facts if rep is not None else {}}


class Context:
    """What every role's prompt is rendered from: the robot profile, the instruction, memory."""

    def __init__(self, profile, instruction: str, memory_text: Callable[[], str] | None = None,
                 camera_names=None, grounding: Grounding | None = None):
        self.profile = profile
        self.instruction = instruction
        self.memory_text = memory_text or (lambda: "(memory disabled)")
        self.camera_names = camera_names    # the robot's cameras (None: every camera the profile describes)
        # the numbers every prompt states (roles/facts.py): the runner gives the backend's calibrations,
        # scene facts, the frames' marks and the budget; by default the profile's facts alone
        self.facts = PromptFacts(profile, camera_names)
        # the roles' points and regions (the runner's resolves them; without one every point is refused)
        self.grounding = grounding or Grounding(profile.directions, unavailable="no depth images reach this role")

    def see(self, label: str, obs, marker, calibrations: dict) -> tuple[dict, dict]:
        """One look, as every transport takes it: the frames marked once for all roles (``marker``:
        grounding.marks.Marker), kept for resolving points, and their grip pixels for the prompts.
        Returns (the frames as the roles see them, the marks' info per camera)."""
        marked, infos = marker(obs) if obs.images else (dict(obs.images), {})
        if obs.images:
            self.grounding.see(label, obs, calibrations)
        self.facts.saw(obs, marked, infos)
        return marked, infos

    def grounded(self, role: str, values: dict, state: dict, images: dict, **kw) -> tuple[dict, dict]:
        """``values`` with the role's ``pointing`` and ``measurements`` text, and ``images`` with the
        regions asked for since the last prompt (each shown once)."""
        g, crops = self.grounding.prompt(role, state, **kw)
        return {**values, **g}, {**(images or {}), **crops}

    def base(self, state: dict, plan: list[Subgoal]) -> dict:
        p = self.profile
        directions, axes = ", ".join(sorted(p.directions)), ", ".join(sorted(p.rotation_axes))
        return {
            "instruction": self.instruction, "robot_description": p.description,
            "directions": directions, "axes": axes, "rotation_frame": p.rotation_frame,
            "vocabulary": prompt_block(directions, axes, p.rotation_frame),
            "limits": json.dumps(p.describe_limits()),
            "state": json.dumps(state), "memory": self.memory_text(),
            "plan": json.dumps([asdict(s) for s in plan]),
            "cameras": describe_views(p.cameras, p.directions, self.camera_names),
            **self.facts.values(),          # setup, look, budget
            # the role's answer fields and measurements: ``grounded`` fills them for its role
            "pointing": "(none offered)", "measurements": "none yet",
        }


# -- planning ---------------------------------------------------------------------------------------
Observe = Callable[[str], tuple]      # label -> (state dict, images): a fresh look, taken only when needed


class PlannerComponent:
    """Answers a task with a plan; replans on a rejected verdict or an escalation.

    ``emit(kind, **data)`` records an event (and feeds Memory); ``progress(text)`` is for humans."""

    def __init__(self, planner, cfg: EpisodeConfig, context: Context, emit=None, progress=None):
        self.planner = planner          # roles.planner.Planner (unused when cfg.planner is False)
        self.cfg = cfg
        self.ctx = context
        self.emit = emit or _noop
        self.progress = progress or _noop
        self.plan: list[Subgoal] = []
        self.replans = 0
        self.plan_id = 0
        self.seq = 0

    def _ask(self, state: dict, images: dict, reason: str):
        """(plan or None, brain, privileged, why the planner failed: '' when it did not)."""
        if not self.cfg.planner:
            # ablation: no planner -- the whole instruction is the one subgoal
            return [Subgoal("s1", self.ctx.instruction, "the instruction is fulfilled")], "", False, ""
        values, images = self.ctx.grounded("planner", self.ctx.base(state, self.plan), state, images)
        plan, res = self.planner.plan(values, images, reason)
        if res.value is not None:
            self.ctx.grounding.take("planner", res.value)
        if plan is not None:
            self.emit("plan", subgoals=[asdict(s) for s in plan], replan_reason=reason, brain=res.brain,
                      privileged=res.privileged, plan_id=self.plan_id + 1, replans=self.replans)
        return plan, res.brain, res.privileged, res.error

    @staticmethod
    def _failed(what: str, error: str) -> str:
        """The outcome's reason names the planner's last error (a dead endpoint says which, and why)."""
        return f"{what}: {error[:300]}" if error else what

    def _decision(self, kind: str, reason: str, brain: str = "", privileged: bool = False) -> PlanDecision:
        self.seq += 1
        return PlanDecision(kind, list(self.plan), reason, self.replans, self.plan_id, brain, privileged, self.seq)

    def _decide(self, plan, brain: str, privileged: bool, reason: str, fail_reason: str) -> PlanDecision:
        if plan is None:
            why = getattr(getattr(self.planner, "brain", None), "unfit", "")
            return self._decision("gave_up", unfit_reason(why) if why else fail_reason)
        self.plan_id += 1
        self.plan = list(plan)
        return self._decision("plan", reason, brain, privileged)

    def give_up(self, reason: str) -> PlanDecision:
        """No plan at all (the brain is unfit before the first one)."""
        return self._decision("gave_up", reason)

    def start(self, state: dict, images: dict) -> PlanDecision:
        plan, brain, priv, error = self._ask(state, images, "")
        return self._decide(plan, brain, priv, "", self._failed("the planner failed safe (no valid plan)", error))

    def rejection_reason(self, verdict: Verdict) -> str | None:
        """The replan reason a verdict gives (None: achieved, or about a subgoal of another plan)."""
        if verdict.achieved or verdict.subgoal_id not in {s.id for s in self.plan}:
            return None
        if verdict.replan:
            return f"the verifier asks for a new plan (on {verdict.subgoal_id}): {verdict.evidence}"
        return f"the verifier rejected the claim on {verdict.subgoal_id}: {verdict.evidence}"

    def on_verdict(self, verdict: Verdict, observe: Observe) -> PlanDecision | None:
        reason = self.rejection_reason(verdict)
        return None if reason is None else self.replan(reason, False, observe)

    def on_escalation(self, esc: Escalation, observe: Observe) -> PlanDecision | None:
        if esc.plan_id and esc.plan_id != self.plan_id:
            return None                 # about a plan already replaced
        return self.replan(esc.reason, esc.exhausted, observe)

    def replan(self, reason: str, exhausted: bool, observe: Observe) -> PlanDecision:
        cfg = self.cfg
        if not cfg.replan:
            if exhausted:
                return self._decision("gave_up", reason + " (replanning disabled)")
            return self._decision("keep", reason)
        if self.replans >= cfg.max_replans:
            return self._decision("gave_up", f"replan limit {cfg.max_replans} reached; last: {reason}")
        self.replans += 1
        self.emit("replan", reason=reason)
        self.progress(f"replan #{self.replans}: {clip(reason, 120)}")
        state, images = observe(f"replan {self.replans}")
        plan, brain, priv, error = self._ask(state, images, reason)
        return self._decide(plan, brain, priv, reason, self._failed("the planner failed safe on a replan", error))


# -- execution --------------------------------------------------------------------------------------
@dataclass
class Proposal:
    batch: dict | None                # the batch to execute (None: the Executor's answer was unusable)
    escalate: Escalation | None = None
    brain: str = ""
    privileged: bool = False
    error: str = ""
    context: dict = field(default_factory=dict)
    answer: dict | None = None        # an answer asked ahead: its points are taken when it is used (adopt)


@dataclass
class AfterReport:
    verify: bool = False              # the batch claims its subgoal: ask the Verifier
    escalate: Escalation | None = None


class ExecutorComponent:
    """Tracks the plan and the current subgoal; proposes batches; decides what a report means."""

    def __init__(self, executor, cfg: EpisodeConfig, context: Context, progress=None):
        self.executor = executor        # roles.executor.Executor
        self.cfg = cfg
        self.ctx = context
        self.progress = progress or _noop
        self.plan: list[Subgoal] = []
        self.plan_id = 0
        self.idx = 0
        self.fails = 0
        self.last_report: Report | None = None
        self.last_verdict: Verdict | None = None

    @property
    def subgoal(self) -> Subgoal | None:
        return self.plan[self.idx] if self.idx < len(self.plan) else None

    @property
    def exhausted(self) -> bool:
        return self.idx >= len(self.plan)

    def on_plan(self, decision: PlanDecision) -> None:
        """Apply the Planner's decision (``gave_up`` is the EpisodeBook's business)."""
        if decision.kind == "plan":
            self.plan, self.plan_id = list(decision.plan), decision.plan_id
            self.idx, self.fails, self.last_verdict = 0, 0, None
        elif decision.kind == "keep":
            self.fails = 0

    def _escalation(self, reason: str, exhausted: bool = False, requested: bool = False) -> Escalation:
        sg = self.subgoal
        return Escalation(reason, exhausted, self.plan_id, sg.id if sg else "", requested)

    def _unusable(self, res, error: str, ctx: dict) -> Proposal:
        self.fails += 1
        self.progress(f"{self.subgoal.id} executor answer unusable: {clip(error, 80)}")
        esc = None
        if self.fails >= self.cfg.max_failures_per_subgoal:
            esc = self._escalation(f"the executor failed to give a usable batch {self.fails} times ({error})")
        return Proposal(None, esc, res.brain, res.privileged, error, ctx)

    def propose(self, state: dict, images: dict, batch_id: str, *, ahead: "Ahead | None" = None,
                begin: Proposal | None = None) -> Proposal:
        """The Executor's next batch. Its looks (points or regions and no commands) are answered here at
        once, with no control step and no batch, up to ``cfg.max_looks`` before each batch; a look past
        that is an unusable answer (recorded ``look_refused``). Its replan request is an escalation.

        ``ahead``: asked before its time (``episode/overlap.py``: while the batch before runs, or beside
        the Verifier, or beside the Planner), from the report, verdict and plan it names; such an
        answer changes nothing here (no failure counted, no points taken, no look answered, no
        escalation) until ``adopt`` uses it: one that is not a batch is simply not used. A look is answered
        only where ``ahead.looks`` says its frames stay the current ones (beside the Verifier or the Planner:
        nothing moves); it comes back as a proposal without a batch, and the loop head goes on from it
        (``begin``: its answer taken as this call's first, its points measured in the same frames)."""
        sg, g = (ahead.subgoal if ahead else self.subgoal), self.ctx.grounding
        last_report = ahead.report if ahead else self.last_report
        plan = list(ahead.plan) if ahead and ahead.plan is not None else self.plan
        last_verdict = self.last_verdict
        if ahead:                 # shown a plan of its own without a verdict: as after a new plan, none yet
            last_verdict = ahead.verdict if ahead.verdict is not None else \
                (None if ahead.plan is not None else self.last_verdict)
        limit, looks = self.cfg.max_looks, 0
        while True:
            if begin is not None:              # a look answered ahead: its answer is this call's first
                ctx, res = begin.context, RoleResult(begin.answer, begin.brain, begin.privileged, 0)
                begin = None
            else:
                rc = report_context(last_report)
                if ahead and ahead.note:       # a report asked ahead from says what it is
                    rc["last_report"] = f"{ahead.note}\n{rc['last_report']}"
                ctx = {**self.ctx.base(state, plan), "subgoal_id": sg.id, "subgoal": sg.description,
                       "criterion": sg.success_criterion, **rc,
                       "last_verdict": json.dumps(last_verdict.to_json()) if last_verdict else "none",
                       "batch_id": batch_id}
                # asked ahead: nothing shown once is used up, and no look offered where its frames may be
                # stale by the time it is answered (a speculation's)
                left = 0 if ahead and not ahead.looks else max(0, limit - looks)
                ctx, shown = self.ctx.grounded("executor", ctx, state, images, looks_left=left,
                                               peek=ahead is not None)
                res = self.executor.propose(ctx, shown)
            if ahead is not None:
                answer = res.value
                if answer is None or "commands" not in answer or replan_of(answer) is not None:
                    replan = answer is not None and replan_of(answer) is not None
                    why = res.error or ("a replan request" if replan else "a look")
                    look = answer is not None and not replan and ahead.looks
                    return Proposal(None, None, res.brain, res.privileged, f"not a batch: {why}", ctx,
                                    answer if look else None)
                batch = {k: v for k, v in answer.items() if k in BATCH_FIELDS}
                return Proposal({**batch, "batch_id": batch_id, "subgoal_id": sg.id}, None, res.brain,
                                res.privileged, "", ctx, answer)
            if res.value is None:
                return self._unusable(res, res.error, ctx)
            answer = res.value
            why = replan_of(answer)
            if why is not None:
                g.record("replan_request", role="executor", reason=why, subgoal_id=sg.id, plan_id=self.plan_id,
                         batch_id=batch_id)
                self.progress(f"{sg.id} the executor asks for a new plan: {clip(why, 100)}")
                return Proposal(None, self._escalation(f"the executor asks for a new plan (on {sg.id}): {why}",
                                                       requested=True), res.brain, res.privileged, "", ctx)
            if "commands" not in answer and looks >= limit:
                err = (f"look limit: {limit} look(s) before batch {batch_id} already; answer with commands "
                       "(or a replan request)")
                g.record("look_refused", batch_id=batch_id, subgoal_id=sg.id, looks=looks, max_looks=limit, reason=err)
                return self._unusable(res, err, ctx)
            measured, regions = g.take("executor", answer)
            if "commands" in answer:
                batch = {k: v for k, v in answer.items() if k in BATCH_FIELDS}
                return Proposal({**batch, "batch_id": batch_id, "subgoal_id": sg.id}, None, res.brain,
                                res.privileged, "", ctx)
            looks += 1
            g.record("look", batch_id=batch_id, subgoal_id=sg.id, look=looks, max_looks=limit,
                     points=len(measured), resolved=sum(1 for m in measured if m.ok), regions=len(regions))
            self.progress(f"{sg.id} look {looks}/{limit} before {batch_id}: {len(measured)} point(s), "
                          f"{len(regions)} region(s)")

    def adopt(self, prop: Proposal) -> None:
        """A batch asked ahead is used: its points and regions are taken now, as at once they would have been."""
        if prop.answer is not None:
            self.ctx.grounding.take("executor", prop.answer)

    @staticmethod
    def wants_verdict(report: Report) -> bool:
        """A report that claims its subgoal (done, with a ``done`` command) needs the Verifier."""
        return report.status is Status.DONE and report.claims_done

    def on_report(self, report: Report) -> AfterReport:
        self.last_report = report
        if self.wants_verdict(report):
            return AfterReport(verify=True)
        if report.status is not Status.DONE:
            self.fails += 1
            if self.fails >= self.cfg.max_failures_per_subgoal:
                return AfterReport(escalate=self._escalation(
                    f"{self.fails} batches on {self.subgoal.id} failed; last: {report.reason}"))
        return AfterReport()

    def on_verdict(self, verdict: Verdict) -> Escalation | None:
        """Advance on an achieved subgoal; a rejection waits for the Planner's decision."""
        self.last_verdict = verdict
        if verdict.achieved:
            self.idx, self.fails = self.idx + 1, 0
            if self.exhausted:
                return Escalation("every subgoal was verified but the task is not complete", True, self.plan_id,
                                  verdict.subgoal_id)
        return None


class VerifierComponent:
    """Verifies the claim in a report against the subgoal's success criterion."""

    def __init__(self, verifier, cfg: EpisodeConfig, context: Context):
        self.verifier = verifier        # roles.verifier.Verifier (unused when cfg.verifier is False)
        self.cfg = cfg
        self.ctx = context

    wants = staticmethod(ExecutorComponent.wants_verdict)     # the one rule: a claim of a done batch

    def verify(self, subgoal: Subgoal, plan: list[Subgoal], report: Report, state: dict, images: dict,
               last_verdict: Verdict | None = None) -> Verdict:
        if not self.cfg.verifier:
            return Verdict(subgoal.id, True, "verifier disabled (ablation): claim accepted", "none")
        ctx = {**self.ctx.base(state, plan), "subgoal_id": subgoal.id, "subgoal": subgoal.description,
               "criterion": subgoal.success_criterion, **report_context(report),
               "last_verdict": json.dumps(last_verdict.to_json()) if last_verdict else "none",
               "batch_id": report.batch_id}
        ctx, images = self.ctx.grounded("verifier", ctx, state, images)
        verdict, answer = self.verifier.verify(ctx, images, with_answer=True)
        if answer is not None:
            self.ctx.grounding.take("verifier", answer)
            if verdict.replan:
                self.ctx.grounding.record("replan_request", role="verifier", reason=verdict.evidence,
                                          subgoal_id=subgoal.id, batch_id=report.batch_id)
        return verdict


class MonitorComponent:
    """Hands the Monitor a snapshot at every action boundary of the batch under way."""

    def __init__(self, monitor, instruction: str):
        self.monitor = monitor          # roles.monitor.Monitor
        self.instruction = instruction
        self.setup = ""                 # the robot's facts (roles/facts.py PromptFacts.robot)
        self._ctx: dict = {}
        self._done: list = []

    def begin(self, batch: dict, subgoal: Subgoal | None, token) -> None:
        self._ctx = {"instruction": self.instruction, "subgoal_id": batch.get("subgoal_id", ""),
                     "subgoal": subgoal.description if subgoal else "", "batch_id": batch.get("batch_id", ""),
                     "batch": json.dumps(batch), **({"setup": self.setup} if self.setup else {})}
        self._done = []
        self.monitor.watch(token)

    @property
    def batch_id(self) -> str:
        """The batch being watched ("" when none)."""
        return self._ctx.get("batch_id", "")

    def command_end(self, data: dict, state: dict) -> None:
        """``data``: the Controller's command_end event; ``state``: measured state at that boundary."""
        if not self._ctx or data.get("batch_id") != self._ctx.get("batch_id"):
            return
        ctx = {**self._ctx, "state": state, "progress": json.dumps(self._done + [data]), "last_command": data}
        self._done.append({"index": data["index"], "status": data["status"], "command": data["command"]})
        self.monitor.offer(ctx)

    def end(self) -> None:
        self.monitor.unwatch()
        self._ctx = {}


class MemoryView:
    """Memory's text as the roles read it, from ``memory`` messages (Memory runs elsewhere)."""

    def __init__(self, enabled: bool = True):
        self.enabled = enabled
        self.reset()

    def reset(self) -> None:
        """Nothing yet: a new episode's memory (the Memory role starts each episode empty)."""
        self.summary = "nothing yet"
        self.facts: list[str] = []

    def update(self, msg: dict) -> None:
        self.summary = msg.get("summary", self.summary)
        self.facts = list(msg.get("facts", []))[-10:]

    def text(self) -> str:
        if not self.enabled:
            return "(memory disabled)"
        return self.summary + "".join(f"\n- {f}" for f in self.facts)


# -- the operator's review (console approval mode), shared by both transports -----------------------
def review_batch(operator, batch: dict, record: Callable, say: Callable, abort: Callable[[], bool]) -> tuple:
    """Hand a proposed batch to the operator's desk (approval mode: it waits for approve, edit or
    reject). -> (batch to run or None, its source label, the operator's note)."""
    if operator.approval:
        record("review", batch=batch, id=batch.get("batch_id", ""))
    r = operator.review(batch, abort=abort)
    if r.decision == "auto":
        return batch, "executor", ""
    record("review_decision", batch_id=batch.get("batch_id", ""), decision=r.decision, note=r.note, by=r.by,
           **({"edited_batch": r.batch} if r.decision == "edited" else {}))
    say(f"batch {batch.get('batch_id')} {r.decision} by the operator" + (f": {r.note}" if r.note else ""))
    return r.batch, {"approved": "executor (operator approved)", "edited": "operator (edited)"}.get(
        r.decision, "executor"), r.note


def operator_rejection(batch: dict, note: str, state: dict) -> Report:
    """The report of a batch the operator rejected: every command rejected, nothing moved."""
    why = note if note.startswith(("rejected", "not run")) else "rejected by the operator" + (f": {note}" if note else "")
    results = tuple(CommandResult(i, c, "rejected", why) for i, c in enumerate(batch.get("commands") or []))
    return Report(batch.get("batch_id", ""), batch.get("subgoal_id", ""), "rejected", results, reason=why,
                  start_state=state, end_state=state, source="operator")
