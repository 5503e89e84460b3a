"""The words results are made of, as enums: a command's or a batch's status, an episode's outcome,
and the kind of a robot fault.

Each is a ``str`` enum: ``Status.DONE == "done"``, it formats as its value (``f"{s}"`` is ``done``)
and JSON encodes it as that value, so the wire form of reports and results is unchanged. Code
compares and branches on the members; a message read from a transport is turned back into them
with ``Status(text)`` (an unknown word is a ValueError, never a silent default).

Rules that depend on a fault are keyed on ``FaultKind``, never on the text of a reason:
``ENDS_AS`` says which outcome a fault gives an episode.
"""
from __future__ import annotations

from enum import Enum


class Word(str, Enum):
    """A str enum that reads as its value everywhere (str(), format(), JSON)."""

    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)

    @classmethod
    def parse(cls, value, field: str = ""):
        """``value`` as a member; ValueError naming ``field`` and the known words otherwise."""
        try:
            return cls(value)
        except ValueError:
            known = ", ".join(m.value for m in cls)
            raise ValueError(f"{field or cls.__name__}: unknown {cls.__name__} {value!r} (known: {known})") from None


class Status(Word):
    """What became of a command, or of a batch (its worst command's status)."""
    DONE = "done"              # within tolerance of its target (a gripper that reached or stalled on an object)
    REJECTED = "rejected"      # failed validation (or a bound at execution): nothing was sent
    CANCELLED = "cancelled"    # a cancel at an action boundary, or the e-stop
    BLOCKED = "blocked"        # fell short: contact, a stall, a timeout
    FAULT = "fault"            # the backend raised a RobotFault


# a batch's status: the first of these that any of its commands has, else DONE
BATCH_PRECEDENCE = (Status.FAULT, Status.REJECTED, Status.BLOCKED, Status.CANCELLED)


class Outcome(Word):
    """How an episode ended."""
    SUCCESS = "success"
    STEP_BUDGET = "step_budget"
    WALL_BUDGET = "wall_budget"
    BATCH_BUDGET = "batch_budget"
    GAVE_UP = "gave_up"
    FAULT = "fault"
    STOPPED = "stopped"
    CLAIMED_DONE = "claimed_done"              # the stack accepted every subgoal; the success check disagrees


class FaultKind(Word):
    """``RobotFault.kind``: what went wrong in a backend (robots/xarm_errors.py maps the xArm's codes)."""
    FAULT = "fault"                            # unclassified
    SOFTWARE = "software"                      # an exception that is not a RobotFault (a bug, a dead simulator)
    BUDGET_EXHAUSTED = "budget_exhausted"      # the simulation's step budget is used up
    CLOSED = "closed"                          # the backend was closed
    BAD_MOTION = "bad_motion"                  # a motion the backend cannot execute (non-finite, unknown kind)
    CAMERA = "camera"                          # a camera does not deliver
    # the xArm6 (robots/xarm_errors.py)
    ESTOP = "estop"
    SERVO = "servo"
    GRIPPER_COMMUNICATION = "gripper_communication"
    GRIPPER = "gripper"
    KINEMATICS = "kinematics"
    SELF_COLLISION = "self_collision"
    JOINT_LIMIT = "joint_limit"
    SPEED = "speed"
    PLANNING = "planning"
    COLLISION = "collision"
    SAFETY_FENCE = "safety_fence"
    CONNECTION = "connection"
    TIMEOUT = "timeout"
    STALL = "stall"
    NOT_READY = "not_ready"
    SAFETY_MISMATCH = "safety_mismatch"
    CONFIG = "config"
    CONTROLLER = "controller"


# the outcome a fault gives the episode it ends (every other kind: Outcome.FAULT)
ENDS_AS = {FaultKind.BUDGET_EXHAUSTED: Outcome.STEP_BUDGET}


def outcome_of_fault(kind: FaultKind | None) -> Outcome:
    return ENDS_AS.get(kind, Outcome.FAULT) if kind is not None else Outcome.FAULT


def fault_kind(value) -> FaultKind | None:
    """A fault kind from the wire (None, or a known word); an unknown word is FaultKind.FAULT."""
    if value is None or value == "":
        return None
    try:
        return FaultKind(value)
    except ValueError:
        return FaultKind.FAULT
