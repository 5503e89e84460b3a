"""The messages between the layers, typed, and their one codec.

The core hands these objects to each other; they become JSON only where they leave it: a ROS 2
topic (``motormind/ros/``), the record (``motormind/record.py``, ``motormind/mcap_record.py``) and the
Controller's event stream. One wire form per message (its ``to_json``, read back by ``from_json``;
``encode`` / ``decode`` by topic), with the ``schema_version`` every JSON payload carries (the
topics of docs/ros2.md).

    Batch          a batch of parsed commands, checked against a profile (``commands.parse_batch``, the
                   Controller's validation; the ``commands`` topic carries the Executor's dict as proposed)
    CommandResult  one command's result, inside a Report
    Report         the ``report`` message: what became of a batch, with its facts as fields (``contact``:
                   stopped against something; ``stalled``: stopped short without contact; ``held_mm``:
                   where the fingers hold an object at its end), not only in the reasons' prose
    Subgoal        one step of a plan
    PlanDecision   the ``plan`` message: the Planner's answer to a task, a rejection or an escalation
    Escalation     the ``escalation`` message: the Executor asks for a new plan
    Verdict        the ``verdict`` message: the Verifier's word on a claim
    EventKind      the kinds of the events a record holds (``events.jsonl``): a ``str`` enum, so the JSON
                   is the word (``EventKind.VLM_CALL == "vlm_call"``)

A decoded payload whose ``schema_version`` is not this one is refused naming the field (an absent one
is read as this one: a batch a model proposed does not carry it).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from . import SCHEMA_VERSION
from .results import FaultKind, Status, Word, fault_kind


class EventKind(Word):
    """What an event of the record is (``Recorder.__call__``'s ``kind``)."""
    EPISODE_START = "episode_start"
    EPISODE_END = "episode_end"
    TASK = "task"
    INSTRUCTION = "instruction"
    PLAN = "plan"
    REPLAN = "replan"
    REPLAN_REQUEST = "replan_request"
    ESCALATION = "escalation"
    BATCH = "batch"
    COMMANDS = "commands"
    COMMAND_START = "command_start"
    COMMAND_END = "command_end"
    REPORT = "report"
    VERDICT = "verdict"
    VLM_CALL = "vlm_call"            # one brain call (``roles/base.py``): what VLM totals count (vlm_calls.py)
    VLM_RETRY = "vlm_retry"          # the openai brain's own retries (429, 5xx, timeouts)
    VLM_QUIRK = "vlm_quirk"          # what the openai brain handled of a server's ways
    SERVE_QUIRK = "serve_quirk"      # what serve-brain emulated (serve/quirks.py)
    SERVE_FAULT = "serve_fault"
    REPAIR_REQUEST = "repair_request"
    ROLE_FAILED = "role_failed"
    MONITOR_CANCEL = "monitor_cancel"
    CANCEL = "cancel"
    INTERFERENCE = "interference"
    MEMORY = "memory"


def _check_version(d: Any, what: str) -> dict:
    if not isinstance(d, dict):
        raise ValueError(f"{what}: must be an object, got {type(d).__name__}")
    v = d.get("schema_version", SCHEMA_VERSION)
    if v != SCHEMA_VERSION:
        raise ValueError(f"{what}.schema_version: {v!r} is not {SCHEMA_VERSION} (the version this code reads)")
    return d


# -- commands --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Batch:
    """A batch of parsed commands (``commands.Move`` ...): what ``commands.parse_batch`` (its decoder:
    it needs the profile the commands are checked against) and the Controller's validation make. ``raw`` is the wire form it was parsed from; ``profile`` the robot
    profile it was checked against (the Controller does not check it again)."""
    batch_id: str
    subgoal_id: str
    commands: tuple
    source: str = ""         # who proposed it: "executor", "operator", ...
    raw: dict = field(default_factory=dict, compare=False, hash=False)
    profile: Any = field(default=None, compare=False, hash=False, repr=False)   # profile.RobotProfile

    @property
    def claims_done(self) -> bool:
        return any(getattr(c, "op", "") == "done" for c in self.commands)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "batch_id": self.batch_id, "subgoal_id": self.subgoal_id,
                "commands": [c.to_json() for c in self.commands]}


@dataclass
class CommandResult:
    """One command's result. The Controller fills it in while the command runs (a blend settles it,
    the grasp tracker adds its sentence); the Report that holds it is what leaves the Controller."""
    index: int
    command: dict
    status: str
    reason: str = ""
    commanded: dict = field(default_factory=dict)   # translation_mm [x,y,z], rotation_deg, gripper
    achieved: dict = field(default_factory=dict)
    duration_s: float = 0.0
    steps: int = 0
    motion: dict | None = None
    passed_target: Any = None                 # a move passed through (blended): the target it was aimed at
    settle_steps: int = 0                     # ... and the steps it took to stop there afterwards
    fault_kind: FaultKind | None = None       # status fault: the backend's RobotFault.kind
    contact: bool = False                     # blocked: the motion ended against something (its reason says
                                              # "stopped by contact")

    def __post_init__(self) -> None:
        self.status = Status(self.status)

    def to_json(self) -> dict:
        return {"index": self.index, "command": self.command, "status": self.status.value, "reason": self.reason,
                "commanded": self.commanded, "achieved": self.achieved,
                "duration_s": round(self.duration_s, 4), "steps": self.steps,
                **({"fault_kind": self.fault_kind.value} if self.fault_kind else {})}

    @classmethod
    def from_json(cls, d: dict) -> "CommandResult":
        return cls(int(d.get("index", -1)), d.get("command") or {}, Status.parse(d.get("status"), "results[].status"),
                   d.get("reason", ""), d.get("commanded") or {}, d.get("achieved") or {},
                   float(d.get("duration_s", 0.0) or 0.0), int(d.get("steps", 0) or 0),
                   fault_kind=fault_kind(d.get("fault_kind")))


@dataclass(frozen=True)
class Report:
    """What became of a batch. Its facts are fields: ``contact`` (the command that stopped it was
    blocked against something), ``stalled`` (it was blocked short of its target without contact: no
    progress, a timeout), ``held_mm`` (the finger gap an object is held at when it ended; None: nothing
    held, or not known: a report the Controller did not make, an operator's rejection). A reader decides
    on these, never on the reasons' prose."""
    batch_id: str
    subgoal_id: str
    status: Status
    results: tuple = ()
    claims_done: bool = False
    reason: str = ""
    estop: bool = False
    start_state: dict = field(default_factory=dict)
    end_state: dict = field(default_factory=dict)
    duration_s: float = 0.0
    steps: int = 0
    source: str = ""
    contact: bool = False
    stalled: bool = False
    held_mm: float | None = None
    fault_kind: FaultKind | None = None       # the fault that ended it (None: no fault); by default its results'

    def __post_init__(self) -> None:
        object.__setattr__(self, "status", Status(self.status))
        object.__setattr__(self, "results", tuple(self.results))
        if self.fault_kind is None:
            object.__setattr__(self, "fault_kind",
                               next((r.fault_kind for r in self.results if r.fault_kind is not None), None))

    @property
    def facts(self) -> dict:
        """The facts a brain decides on (``BrainRequest.context["report_facts"]``), JSON-ready."""
        return {"batch_id": self.batch_id, "status": self.status.value, "contact": self.contact,
                "stalled": self.stalled, "held_mm": self.held_mm}

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "batch_id": self.batch_id, "subgoal_id": self.subgoal_id,
                "status": self.status.value, "reason": self.reason, "claims_done": self.claims_done,
                "fault_kind": self.fault_kind.value if self.fault_kind else None,
                "estop": self.estop, "source": self.source,
                "results": [r.to_json() for r in self.results], "start_state": self.start_state,
                "end_state": self.end_state, "duration_s": round(self.duration_s, 4), "steps": self.steps,
                "contact": self.contact, "stalled": self.stalled, "held_mm": self.held_mm}

    @classmethod
    def from_json(cls, d: dict) -> "Report":
        d = _check_version(d, "report")
        held = d.get("held_mm")
        return cls(str(d.get("batch_id", "")), str(d.get("subgoal_id", "")), Status.parse(d.get("status"), "status"),
                   tuple(CommandResult.from_json(r) for r in d.get("results") or []), bool(d.get("claims_done")),
                   d.get("reason", "") or "", bool(d.get("estop", False)), d.get("start_state") or {},
                   d.get("end_state") or {}, float(d.get("duration_s", 0.0) or 0.0), int(d.get("steps", 0) or 0),
                   d.get("source", "") or "", bool(d.get("contact", False)), bool(d.get("stalled", False)),
                   None if held is None else float(held), fault_kind(d.get("fault_kind")))

    def summary(self) -> str:
        counts: dict = {}
        for r in self.results:
            counts[r.status] = counts.get(r.status, 0) + 1
        parts = ", ".join(f"{n} {s}" for s, n in counts.items())
        return f"batch {self.batch_id}: {self.status} ({parts}){' - ' + self.reason if self.reason else ''}"


# -- plans and verdicts ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Subgoal:
    id: str
    description: str
    success_criterion: str

    @classmethod
    def from_json(cls, d: dict) -> "Subgoal":
        return cls(d["id"], d["description"], d["success_criterion"])


def subgoals_from_json(items) -> list[Subgoal]:
    return [Subgoal.from_json(s) for s in items or []]


@dataclass(frozen=True)
class Verdict:
    subgoal_id: str
    achieved: bool
    evidence: str
    brain: str = ""
    failed_safe: bool = False       # the Verifier could not answer: treated as not achieved
    replan: bool = False            # the Verifier asked for a new plan (``evidence`` is its reason)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "subgoal_id": self.subgoal_id, "achieved": self.achieved,
                "evidence": self.evidence, "brain": self.brain, "failed_safe": self.failed_safe,
                **({"replan": True} if self.replan else {})}

    @classmethod
    def from_json(cls, d: dict) -> "Verdict":
        d = _check_version(d, "verdict")
        return cls(d.get("subgoal_id", ""), bool(d.get("achieved")), d.get("evidence", ""), d.get("brain", ""),
                   bool(d.get("failed_safe", False)), bool(d.get("replan", False)))


@dataclass(frozen=True)
class PlanDecision:
    """The Planner's answer to a task or a replan request: the ``plan`` message.

    kind: ``plan`` (a new plan: start at its first subgoal), ``keep`` (replanning is disabled: go on
    with the current plan), ``gave_up`` (no usable plan, or the replan limit: the episode ends)."""
    kind: str
    plan: tuple = ()
    reason: str = ""                  # the replan reason (plan, keep) or why the planner gave up
    replans: int = 0
    plan_id: int = 0
    brain: str = ""
    privileged: bool = False
    seq: int = 0                      # every decision of this Planner, in order
    verdict: dict | None = None       # the rejected verdict that caused it, with its batch_id (so a reader
                                      # that has not seen that verdict yet can take it into account first)
    ahead: dict | None = None         # a call asked ahead that this decision settles (the first plan asked
                                      # beside the camera probe, overlap.plan_with_probe): {kind, tag, dropped:
                                      # why it was dropped, "" when used}; the Executor's machine counts it

    def __post_init__(self) -> None:
        object.__setattr__(self, "plan", tuple(self.plan))

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "decision": self.kind, "plan_id": self.plan_id, "seq": self.seq,
                "subgoals": [asdict(s) for s in self.plan], "reason": self.reason, "replans": self.replans,
                "brain": self.brain, "privileged": self.privileged, "verdict": self.verdict,
                **({"ahead": self.ahead} if self.ahead else {})}

    @classmethod
    def from_json(cls, d: dict) -> "PlanDecision":
        d = _check_version(d, "plan")
        ahead = d.get("ahead") or None
        if ahead is not None and not (isinstance(ahead, dict) and isinstance(ahead.get("kind"), str) and all(
                isinstance(ahead.get(k, ""), str) for k in ("tag", "dropped"))):
            raise ValueError(f"plan.ahead: must be {{kind: str, tag: str, dropped: str}}, got {ahead!r}")
        return cls(d["decision"], tuple(subgoals_from_json(d.get("subgoals"))), d.get("reason", ""),
                   int(d.get("replans", 0)), int(d.get("plan_id", 0)), d.get("brain", ""),
                   bool(d.get("privileged", False)), int(d.get("seq", 0)), d.get("verdict"), ahead)


@dataclass(frozen=True)
class Escalation:
    """The Executor asks for a replan: a subgoal keeps failing, or every subgoal was verified."""
    reason: str
    exhausted: bool = False           # every subgoal of the plan was verified
    plan_id: int = 0
    subgoal_id: str = ""
    requested: bool = False           # the Executor asked for a new plan (its ``replan`` answer)

    def to_json(self) -> dict:
        return {"schema_version": SCHEMA_VERSION, "reason": self.reason, "exhausted": self.exhausted,
                "plan_id": self.plan_id, "subgoal_id": self.subgoal_id, "requested": self.requested}

    @classmethod
    def from_json(cls, d: dict) -> "Escalation":
        d = _check_version(d, "escalation")
        return cls(d.get("reason", ""), bool(d.get("exhausted", False)), int(d.get("plan_id", 0)),
                   d.get("subgoal_id", ""), bool(d.get("requested", False)))


# -- the codec ---------------------------------------------------------------------------------------------
MESSAGES = {"report": Report, "verdict": Verdict, "plan": PlanDecision, "escalation": Escalation}


def encode(msg) -> dict:
    """A message as its JSON dict (with ``schema_version``)."""
    return msg.to_json()


def decode(kind: str, d: dict):
    """The message of topic ``kind`` (report, verdict, plan, escalation) from its JSON dict; ValueError
    naming the field when it is not one (a batch is decoded by ``commands.parse_batch``: it needs the
    profile its commands are checked against)."""
    try:
        cls = MESSAGES[kind]
    except KeyError:
        raise ValueError(f"kind: unknown message {kind!r} (known: {', '.join(MESSAGES)})") from None
    return cls.from_json(d)
