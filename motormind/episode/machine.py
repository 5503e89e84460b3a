"""The episode as one state machine: plan decisions, reports and verdicts in, actions out.

Both transports drive this one loop. The in-process runner (``motormind/runner.py``) answers each
action at once (it runs the batch, asks the Verifier, asks the Planner) and feeds the answer back;
the ROS 2 Executor node (``motormind/ros/role_nodes.py``) publishes what an action asks for and
feeds in what arrives on its topics, in whatever order it arrives: a verdict before the report it
is about, a new plan before the rejected verdict that caused it. Each input is held until the
episode is at the point where it applies, so the decisions are taken in the same order either way.

    phase          waits for              an input that moves it on
    await_plan     a plan decision        plan(decision)      (None: the Planner had nothing to change)
    await_report   the batch's report     report(report)
    await_verdict  the claim's verdict    verdict(verdict, batch_id)
    held           the operator's resume  resume()
    ended          -

Every input returns the actions to take, in order:

    Execute(batch, source)   run this batch (the Controller: in-process, or on ``commands``)
    Deliver(report)          a report made here (the operator rejected the batch): record or publish
                             it as the Controller's would be, then feed it back with ``report()``
    Verify(subgoal, report)  the report claims its subgoal: a verdict is wanted (``look``: the look
                             already taken for a call asked beside it, the Verifier's too)
    Escalate(escalation)     a replan is wanted (the Planner answers with ``plan()``)
    AwaitPlan(verdict)       a rejected verdict: the Planner answers it with ``plan()``
                             (both with ``look``: the look taken for the Executor call asked beside
                             the Planner, overlap.retry_with_replan: the Planner's too)
    Hold()                   the operator paused before the next batch: ``resume()`` goes on
    End(result)              the episode is over (``EpisodeResult``)

The loop head (before each batch) checks the budgets, the evaluator's success check and the stop
and unfit reasons (``EpisodeBook.check``), then asks the Executor for a batch (``propose``, a
brain call, made here on the driver's thread) and hands it to the operator's review when there is
an operator. The budget and give-up rules are the book's (``motormind/episode/book.py``), keyed on
typed fault kinds.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Callable

from ..messages import Report, Verdict
from ..results import Word
from ..text import clip
from .book import EpisodeBook, EpisodeResult
from .config import EpisodeConfig
from .overlap import OFF, Ahead, Overlap, expected_note, mismatch, moved, pending_note, predict, same_plan


class Phase(Word):
    IDLE = "idle"
    AWAIT_PLAN = "await_plan"
    AWAIT_REPORT = "await_report"
    AWAIT_VERDICT = "await_verdict"
    HELD = "held"
    ENDED = "ended"


# -- actions -------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Execute:
    batch: dict                 # the batch message (batch_id, subgoal_id, commands, ...)
    source: str = "executor"    # who it is from: executor, "executor (operator approved)", "operator (edited)"
    brain: str = ""
    privileged: bool = False


@dataclass(frozen=True)
class Deliver:
    report: Report


@dataclass(frozen=True)
class Verify:
    subgoal: object             # messages.Subgoal
    report: Report
    look: tuple | None = None   # (state, images) taken after the report for the call asked beside the
                                # Verifier (overlap.verify_ahead): the Verifier's look, not taken twice


@dataclass(frozen=True)
class Escalate:
    escalation: object          # components.Escalation
    look: tuple | None = None   # (state, images) of the call asked beside the Planner (retry_with_replan)


@dataclass(frozen=True)
class AwaitPlan:
    verdict: Verdict
    look: tuple | None = None   # as Escalate's


@dataclass(frozen=True)
class Hold:
    pass


@dataclass(frozen=True)
class End:
    result: EpisodeResult


def _noop(*_a, **_k) -> None:
    return None


@dataclass
class Hooks:
    """What the machine asks of its driver at the loop head (each optional but ``evaluate``)."""
    evaluate: Callable[[], tuple]                          # -> (success: bool, steps used: int)
    look: Callable[[str], tuple]                           # label -> (state, images), a fresh look
    has_success_check: bool = False                        # the evaluator's privileged check (simulation)
    unfit: Callable[[], str] = lambda: ""                  # why the brain cannot be used ("" when it can)
    stop_reason: Callable[[], str] = lambda: ""            # the operator asked the episode to end
    hold: Callable[[], bool] = lambda: False               # True: hold before the next batch (resume() goes on)
    review: Callable | None = None                         # batch -> (batch or None, source, note): the operator
    reviewing: Callable[[], bool] | None = None            # a review is required now (None: whenever ``review``
                                                           # is set); calls ahead are made only while it is not
    interject: Callable | None = None                      # () -> PlanDecision or None: a new instruction
    rejection: Callable | None = None                      # (batch, note) -> the Report of a rejected batch
    vlm: Callable[[], tuple] = lambda: (0, 0.0)            # -> (VLM calls, VLM seconds) so far
    say: Callable[[str], None] = _noop                     # progress, for humans
    brain: str = "?"
    privileged: bool = False
    # overlapping the VLM with motion (episode/overlap.py): off unless the brain's config turns it on and the
    # driver can run a call beside the loop (``spawn(fn, tag)`` -> a Future whose calls it tags ``tag``)
    overlap: Overlap = OFF
    spawn: Callable | None = None
    basis: Callable[[], dict | None] = lambda: None        # a scene-reading brain's object positions, mm
    record: Callable = _noop                               # record(kind, **data): an event for the record


@dataclass
class Prepared:
    """An Executor call made ahead of its time (``overlap.py``), used at the loop head only when valid."""
    kind: str                   # speculate (while ``for_batch`` runs) | verify_ahead (beside its verdict)
                                # | retry_with_replan (beside the Planner's answer to ``for_batch``)
    for_batch: str              # the batch whose report (or verdict) decides
    batch_id: str               # the id the batch it proposes takes: the next one
    subgoal_id: str
    plan_id: int
    future: object              # -> components.Proposal
    tag: str
    expected: dict | None = None     # speculate: the state the batch should end in
    basis: dict | None = None        # speculate, retry_with_replan: the scene as a scene-reading brain read it
    look: tuple | None = None        # verify_ahead, retry_with_replan: (state, images) it was asked from
    plan: tuple | None = None        # retry_with_replan: the subgoals it was shown (None: the plan kept)
    frame: object = None             # the grounding frame current when it was asked (its points' pixels)
    valid: bool = False


@dataclass
class EpisodeMachine:
    cfg: EpisodeConfig
    executor: object                  # components.ExecutorComponent: the plan, the subgoal, when to verify
    hooks: Hooks
    clock: Callable[[], float] = time.monotonic
    book: EpisodeBook = field(init=False)
    phase: Phase = field(init=False, default=Phase.IDLE)

    def __post_init__(self) -> None:
        self.book = EpisodeBook(self.cfg, self.clock)
        self.pending = ""                 # the batch under way
        self.verify_batch = ""            # the batch whose claim the Verifier checks
        self.applied_seq = 0
        self.decisions: dict = {}         # plan decisions not applied yet, by seq
        self.verdicts: dict = {}          # verdicts not applied yet, by batch id
        self.seen_verdicts: set = set()
        self.report_steps = 0             # control steps the reports say were used
        self.motion_s = 0.0               # seconds the reports say the robot moved
        self.result: EpisodeResult | None = None
        self.prep: Prepared | None = None   # an Executor call made ahead (episode/overlap.py)
        self.overlap_log: list = []         # each one: kind, batch, outcome (used / dropped) and why

    @property
    def t0(self) -> float:
        return self.book.t0

    @property
    def over(self) -> bool:
        return self.phase is Phase.ENDED

    # -- inputs ---------------------------------------------------------------------------------------
    def start(self) -> list:
        """The episode begins: a brain found unfit ends it now; otherwise it waits for the first plan
        (a decision that came first was held)."""
        if self.phase is not Phase.IDLE:
            return []
        if self.book.on_unfit(self.hooks.unfit()):
            return self._end()
        self.phase = Phase.AWAIT_PLAN
        return self._settle([])

    def plan(self, decision) -> list:
        """A plan decision (``messages.PlanDecision``). None: the Planner answered the last escalation or
        rejection with nothing to change; the episode goes on with its plan."""
        if self.over:
            return []
        if decision is None:
            if self.phase is not Phase.AWAIT_PLAN:
                return []
            self._check_retry(None)
            return self._head([])
        d = decision
        if d.seq > self.applied_seq or not d.seq:
            self.decisions[d.seq or self.applied_seq + 1] = d
        return self._settle([])

    def report(self, rep: Report) -> list:
        """The report of the batch under way (any other report is not this episode's business)."""
        if self.phase is not Phase.AWAIT_REPORT or rep.batch_id != self.pending:
            return []
        out: list = []
        self.pending = ""
        p = self.prep
        if p is not None and p.kind == "speculate" and p.for_batch == rep.batch_id:
            why = mismatch(rep, p.expected, self.executor.ctx.profile) or moved(p.basis, self.hooks.basis())
            if why:
                self._drop(f"the report is not the expected one: {why}")
            else:
                p.valid = True
        self.report_steps += int(rep.steps or 0)
        self.motion_s += float(rep.duration_s or 0.0)
        sg = self.executor.subgoal
        self.hooks.say(f"{sg.id if sg else '?'} batch {rep.batch_id}: {rep.status}"
                       + (f" - {clip(rep.reason, 120)}" if rep.reason else ""))
        if self.book.on_report(rep):
            return self._end(out)
        if self.hooks.evaluate()[0]:
            return self._head(out)               # the loop head records the success
        after = self.executor.on_report(rep)
        if after.verify:
            self.phase, self.verify_batch = Phase.AWAIT_VERDICT, rep.batch_id
            self._drop("the batch claims its subgoal")        # (a speculation is never made for one)
            out.append(Verify(sg, rep, self._ask_beside_verdict(sg, rep)))
        elif after.escalate is not None:
            self._escalate(after.escalate, out)
        else:
            return self._head(out)
        return self._settle(out)

    def verdict(self, verdict: Verdict, batch_id: str) -> list:
        """A verdict (``messages.Verdict``) on the claim of batch ``batch_id``."""
        if self.over:
            return []
        if batch_id and batch_id not in self.seen_verdicts:
            self.verdicts[batch_id] = verdict
        return self._settle([])

    def resume(self) -> list:
        """The operator resumed: the loop head goes on."""
        if self.phase is not Phase.HELD:
            return []
        self.hooks.say("resumed by the operator")
        return self._head([])

    def stop(self) -> list:
        """End the episode now (the transport is going away); its outcome is what the book says."""
        return [] if self.over else self._end()

    # -- held inputs ------------------------------------------------------------------------------------
    def _settle(self, out: list) -> list:
        """Apply what was held, as far as the episode's phase allows."""
        while not self.over:
            if self.phase is Phase.AWAIT_VERDICT:
                v = self.verdicts.pop(self.verify_batch, None)
                if v is None:                     # the verdict may travel inside the decision it caused
                    v = next((Verdict.from_json(d.verdict) for d in self.decisions.values()
                              if (d.verdict or {}).get("batch_id") == self.verify_batch), None)
                if v is None:
                    return out
                self._apply_verdict(v, out)
                continue
            if self.phase in (Phase.AWAIT_PLAN, Phase.HELD) and self.decisions:   # (held: applied, then held again)
                for seq in sorted(self.decisions):
                    d = self.decisions.pop(seq)
                    self.applied_seq = max(self.applied_seq, seq)
                    if self.book.on_unfit(self.hooks.unfit()):     # the plan failed: the endpoint cannot see
                        return self._end(out)
                    self._check_retry(d)
                    self.executor.on_plan(d)
                    if self.book.on_plan(d):
                        return self._end(out)
                self._head(out)
                continue
            return out
        return out

    def _apply_verdict(self, v: Verdict, out: list) -> None:
        self.seen_verdicts.add(self.verify_batch)
        self.hooks.say(f"{v.subgoal_id} verdict: {'achieved' if v.achieved else 'REJECTED'} - {clip(v.evidence, 100)}")
        self.book.on_verdict(v)
        esc = self.executor.on_verdict(v)
        p = self.prep
        if p is not None and p.kind == "verify_ahead":
            if not v.achieved:
                self._drop("the verdict rejected the claim")
            elif esc is not None:
                self._drop("the plan is done")
            else:
                p.valid = True
        if esc is not None:
            if self.book.plan_verified(self.hooks.has_success_check, lambda: self.hooks.evaluate()[0]):
                self._head(out)                  # ended (no privileged check), or the loop head records the success
            else:
                self._escalate(esc, out)
        elif v.achieved:
            self._head(out)
        else:
            self.phase = Phase.AWAIT_PLAN        # the Planner answers the rejection
            out.append(AwaitPlan(v, self._ask_beside_replan(
                v.subgoal_id, f"the Verifier rejected the claim on {v.subgoal_id}: {clip(v.evidence, 300)}")))

    def _escalate(self, esc, out: list) -> None:
        self.phase = Phase.AWAIT_PLAN
        # (the Executor's own replan request is not asked again beside the Planner)
        out.append(Escalate(esc, None if esc.requested else self._ask_beside_replan(
            esc.subgoal_id, f"no verdict: {clip(esc.reason, 300)}")))

    # -- the loop head ------------------------------------------------------------------------------------
    def _head(self, out: list) -> list:
        """Before each batch: hold, the budgets and checks, the operator's new instruction, then the
        Executor's next batch (one brain call; an unusable answer tries again from the head)."""
        h, book = self.hooks, self.book
        while True:
            if h.hold():
                self._drop("held by the operator")
                if self.phase is not Phase.HELD:
                    self.phase = Phase.HELD
                    out.append(Hold())
                return out
            success, steps = h.evaluate()
            if book.check(steps, success, h.stop_reason(), h.unfit()):
                return self._end(out)
            if h.interject is not None:
                d = h.interject()
                if d is not None:
                    if book.on_unfit(h.unfit()):
                        return self._end(out)
                    self.executor.on_plan(d)
                    if book.on_plan(d):
                        return self._end(out)
            sg = self.executor.subgoal
            taken = self._take_prepared()
            bid = book.next_batch_id()
            if taken is not None:                # asked ahead, and still what this head would ask
                prop, state, images = taken
                if prop.batch is None:           # it asked for a look first: answered here, then asked on
                    prop = self.executor.propose(state, images, bid, begin=prop)
            else:
                state, images = h.look(f"{bid} {sg.id}")
                prop = self.executor.propose(state, images, bid)
            if prop.batch is not None:
                batch, source, note = prop.batch, "executor", ""
                if h.review is not None:
                    batch, source, note = h.review(prop.batch)
                self.phase, self.pending = Phase.AWAIT_REPORT, bid
                if batch is None:                # rejected by the operator: nothing moves
                    out.append(Deliver(h.rejection(prop.batch, note)))
                else:
                    out.append(Execute(batch, source, prop.brain, prop.privileged))
                    self._speculate(batch, sg, state, images)
                return out
            if prop.escalate is not None:
                self._escalate(prop.escalate, out)
                return out

    # -- overlap (episode/overlap.py) ------------------------------------------------------------------
    def _prepare(self, kind: str, for_batch: str, sg, ahead, state: dict, images: dict, **kw) -> None:
        bid = f"b{self.book.batches + 1}"         # the id the next batch takes (book.next_batch_id)
        tag = f"{kind}:{bid}"
        ex = self.executor
        fut = self.hooks.spawn(lambda: ex.propose(state, images, bid, ahead=ahead), tag)
        self.prep = Prepared(kind, for_batch, bid, sg.id, ex.plan_id, fut, tag, frame=ex.ctx.grounding.frame, **kw)
        self.hooks.record("overlap_ask", overlap=kind, batch_id=bid, for_batch=for_batch, subgoal_id=sg.id, tag=tag)

    def _speculate(self, batch: dict, sg, state: dict, images: dict) -> None:
        """While ``batch`` runs: the next batch, asked from the report and state it should end in."""
        h = self.hooks
        if not h.overlap.speculate or h.spawn is None or self._review_required():
            return
        pred = predict(batch, state, self.executor.ctx.profile)
        if pred is None:                          # claims its subgoal (the verdict comes next), or unparsable
            return
        report, end = pred
        bid = batch.get("batch_id", "")
        self._prepare("speculate", bid, sg, Ahead(sg, report, note=expected_note(bid)), end, images,
                      expected=end, basis=h.basis())

    def _ask_beside_verdict(self, sg, rep: Report) -> tuple | None:
        """A batch claims ``sg``: the next subgoal's first batch is asked beside the Verifier. Returns the
        look it was asked from (the Verifier's too), or None when nothing was asked."""
        h, ex = self.hooks, self.executor
        if not h.overlap.verify_ahead or h.spawn is None or self._review_required() or ex.idx + 1 >= len(ex.plan):
            return None
        nxt = ex.plan[ex.idx + 1]
        pending = Verdict(sg.id, True, "the Verifier is checking this claim now; this batch runs only if it "
                                       "accepts it", "")
        look = h.look(f"b{self.book.batches + 1} {nxt.id} (beside the verdict on {sg.id})")
        self._prepare("verify_ahead", rep.batch_id, nxt, Ahead(nxt, rep, pending, looks=True), *look, look=look)
        return look

    def _ask_beside_replan(self, about: str, why: str) -> tuple | None:
        """The Planner is asked to replan (a rejected claim on ``about``, an escalation): the Executor is
        asked for the current subgoal again beside it, as the loop head would ask it after a plan that
        keeps the remaining subgoals (with replanning off: after ``keep``), its verdict saying ``why`` and
        what is pending (``overlap.pending_note``). Returns the look it was asked
        from (the Planner's too: nothing moves before the decision), or None when nothing was asked."""
        h, ex, cfg = self.hooks, self.executor, self.cfg
        sg = ex.subgoal
        if not h.overlap.retry_with_replan or h.spawn is None or self._review_required() or sg is None \
                or (about and about != sg.id) or (cfg.replan and self.book.replans >= cfg.max_replans):
            return None
        self._drop("the Planner is asked for a new plan")
        plan = tuple(ex.plan[ex.idx:]) if cfg.replan else None
        state, images = h.look(f"b{self.book.batches + 1} {sg.id} (beside the replan)")
        self._prepare("retry_with_replan", ex.last_report.batch_id if ex.last_report else "", sg,
                      Ahead(sg, ex.last_report, Verdict(sg.id, False, pending_note(why), ""), plan, looks=True),
                      state, images, look=(state, images), plan=plan,
                      basis=h.basis())
        return state, images

    def _check_retry(self, d) -> None:
        """The Planner decided (``d``, None: nothing to change): a call asked beside it (retry_with_replan) is
        valid when the decision is the plan it was asked under (its subgoals, or the plan kept), and takes
        the new plan's ids."""
        p = self.prep
        if p is None or p.kind != "retry_with_replan":
            return
        if d is not None and d.kind == "gave_up":
            return                                 # the episode ends: dropped there
        kept = d is None or d.kind == "keep"
        why = ("" if (p.plan is None) == kept else
               "the Planner " + ("kept the plan" if kept else "made a new plan") + ", the call was asked for "
               + ("a new one" if kept else "the plan kept"))
        if not why and not kept:
            why = same_plan(p.plan, d.plan)
        why = why or moved(p.basis, self.hooks.basis())
        if why:
            self._drop(why)
            return
        if not kept:
            p.subgoal_id, p.plan_id = d.plan[0].id, d.plan_id
        p.valid = True

    def _review_required(self) -> bool:
        """An operator reviews each batch now (approval mode, or the Executor taken over): nothing is asked
        ahead, and a call asked before the review was switched on is dropped at the loop head (the review
        sees every batch that runs, prepared or not)."""
        h = self.hooks
        if h.review is None:
            return False
        return True if h.reviewing is None else bool(h.reviewing())

    def _drop(self, why: str) -> None:
        p, self.prep = self.prep, None
        if p is None:
            return
        self.overlap_log.append({"kind": p.kind, "batch_id": p.batch_id, "tag": p.tag, "outcome": "dropped",
                                 "reason": why})
        self.hooks.record("overlap_dropped", overlap=p.kind, batch_id=p.batch_id, for_batch=p.for_batch, tag=p.tag,
                          reason=why)
        self.hooks.say(f"{p.kind} batch {p.batch_id} dropped: {clip(why, 120)}")

    def ahead_outcome(self, kind: str, tag: str, dropped: str = "") -> None:
        """A call the driver asked ahead itself (``plan_with_probe``: the first plan beside the camera
        probe) was used, or dropped (``dropped``: why); counted and costed with the machine's own."""
        self.overlap_log.append({"kind": kind, "batch_id": "", "tag": tag, "outcome": "dropped" if dropped else "used",
                                 "reason": dropped})
        if dropped:
            self.hooks.record("overlap_dropped", overlap=kind, batch_id="", for_batch="", tag=tag, reason=dropped)
            self.hooks.say(f"{kind} dropped: {clip(dropped, 120)}")
        else:
            self.hooks.record("overlap_used", overlap=kind, batch_id="", for_batch="", tag=tag)

    def _take_prepared(self):
        """The prepared proposal, when it is still what the loop head would ask for: (proposal, state,
        images), else None (dropped, with the reason recorded)."""
        p = self.prep
        if p is None:
            return None
        ex = self.executor
        sg = ex.subgoal
        why = ("" if p.valid else "not confirmed") or \
            ("an operator review is required now" if self._review_required() else "") or \
            ("" if sg is not None and sg.id == p.subgoal_id and ex.plan_id == p.plan_id else "the plan moved on") or \
            ("" if p.batch_id == f"b{self.book.batches + 1}" else "another batch came first")
        if why:
            self._drop(why)
            return None
        try:
            prop = p.future.result()
        except Exception as e:  # noqa: BLE001 - a call that broke is a call not used
            prop = None
            self._drop(f"the call failed: {type(e).__name__}: {e}")
            return None
        look = prop.batch is None and prop.answer is not None      # a look, answered only in the frames it saw
        if look and (p.look is None or ex.ctx.grounding.frame is not p.frame):
            self._drop("a look, in frames no longer the current ones")
            return None
        if prop.batch is None and not look:
            self._drop(prop.error or "no batch")
            return None
        self.prep = None
        if not look:                              # (a look: the loop head goes on from it, propose's ``begin``)
            if prop.batch.get("subgoal_id") != sg.id:   # asked under the plan the new one repeats (retry_with_replan)
                prop = replace(prop, batch={**prop.batch, "subgoal_id": sg.id})
            ex.adopt(prop)                        # its points, measured in the frames it was shown
        state, images = p.look if p.look is not None else self.hooks.look(f"{p.batch_id} {sg.id}")
        self.overlap_log.append({"kind": p.kind, "batch_id": p.batch_id, "tag": p.tag, "outcome": "used",
                                 "reason": ""})
        self.hooks.record("overlap_used", overlap=p.kind, batch_id=p.batch_id, for_batch=p.for_batch, tag=p.tag)
        self.hooks.say(f"{p.kind} batch {p.batch_id} used")
        return prop, state, images

    def overlap_counts(self) -> dict:
        """Per kind: asked, used, dropped (the calls' costs are the driver's: tagged calls)."""
        out: dict = {}
        for e in self.overlap_log:
            k = out.setdefault(e["kind"], {"asked": 0, "used": 0, "dropped": 0})
            k["asked"] += 1
            k[e["outcome"]] += 1
        return out

    def _end(self, out: list | None = None) -> list:
        out = [] if out is None else out
        if self.over:
            return out
        self._drop("the episode ended")
        self.phase = Phase.ENDED
        try:
            _, steps = self.hooks.evaluate()
        except Exception:  # noqa: BLE001 - the evaluator is gone (a stopping graph): the reports' count
            steps = self.report_steps
        calls, vlm_s = self.hooks.vlm()
        self.result = self.book.result(steps, self.hooks.brain, self.hooks.privileged, self.executor.plan,
                                       calls, vlm_s, self.motion_s)
        if self.overlap_log or self.hooks.overlap.any:
            self.result.overlap = self.overlap_counts()
        out.append(End(self.result))
        return out
