"""Exceptions shared across the stack."""


class MotorMindError(Exception):
    """Base class for MotorMind errors."""


class ConfigError(MotorMindError):
    """A configuration file or value is invalid. The message names the field."""


class CommandError(MotorMindError):
    """A command or batch failed validation. ``field`` names the offending field."""

    def __init__(self, message: str, field: str = ""):
        super().__init__(message)
        self.field = field


class RobotFault(MotorMindError):
    """The robot backend reported a fault (controller error, lost connection, ...).

    ``kind`` is a ``results.FaultKind`` (given as the member or its word; an unknown word is a
    ValueError: a backend's fault table is checked when it is imported, not when the arm faults).
    ``code`` is backend specific (for the xArm: its controller error code)."""

    def __init__(self, message: str, code: object = None, kind="fault"):
        from .results import FaultKind
        super().__init__(message)
        self.code = code
        self.kind = FaultKind.parse(kind, "RobotFault.kind")


class ResponseError(MotorMindError):
    """A brain's answer is malformed or violates the role's response schema."""


class BrainUnfit(MotorMindError):
    """The brain's endpoint cannot do the job safely (it refuses or ignores the camera images): the
    brain asks it nothing more and the episode ends, rather than driving a robot blind.
    ``quirk`` names what was found (``images_refused``, ``images_ignored``, ...)."""

    def __init__(self, message: str, quirk: str = ""):
        super().__init__(message)
        self.quirk = quirk


def yaml_error(source, e: Exception) -> ConfigError:
    """A YAML parser's error as a one-line ConfigError: the file, the line and column, the problem
    (PyYAML's own message takes four lines and quotes the file twice)."""
    mark = getattr(e, "problem_mark", None)
    where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
    what = getattr(e, "problem", None) or str(e)
    return ConfigError(" ".join(f"{source}: not valid YAML{where}: {what}".split()))
