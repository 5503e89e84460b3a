"""xArm controller error codes and SDK return codes -> typed ``RobotFault`` kinds.

Sources: ``xarm.core.config.x_code`` and ``xarm.x3.code.APIState`` of xarm-python-sdk 1.18.4,
summarised in /work/shared/xarm-protocol.md section 3.5. No SDK import here.

Fault kinds (``RobotFault.kind``) the xArm6 backend raises:

=====================  ===========================================================================
kind                   meaning
=====================  ===========================================================================
estop                  emergency stop (controller button, E-IO, three-state switch, or ours)
servo                  a joint servo error (C10-C17, C38)
gripper_communication  the tool-flange RS485 bus / end effector does not answer (C19, C28)
gripper                the gripper reports its own error (SDK 102)
kinematics             no inverse-kinematics solution, target unreachable (C21, C40)
self_collision         the arm would hit itself (C22)
joint_limit            a joint would exceed its range (C23, SDK -7/-8)
speed                  a speed limit was exceeded (C24, C30, C60)
planning               the controller could not plan the motion (C25, C32)
collision              collision detection tripped: abnormal current (C31)
safety_fence           the TCP would leave the safety boundary (C35)
connection             the TCP link to the controller is gone (SDK -1, lost sockets)
timeout                the controller did not answer in time (SDK 3), or a motion overran
stall                  the controller says "moving" but the measured pose stopped changing
not_ready              the controller refused to move (state 4/5, SDK -2, 9)
safety_mismatch        the arm's safety settings read back differently from the profile
config                 wrong robot, wrong address, bad settings
controller             any other controller error (the message carries its code and title)
=====================  ===========================================================================
"""
from __future__ import annotations

from motormind.errors import RobotFault
from motormind.results import FaultKind

# controller error code -> (kind, meaning)
CONTROLLER_ERRORS: dict[int, tuple[str, str]] = {
    1: ("estop", "emergency stop button on the control box pressed"),
    2: ("estop", "emergency IO of the control box triggered"),
    3: ("estop", "emergency stop of the three-state switch"),
    **{c: ("servo", f"servo motor {c - 10} (joint {c - 10}) error" if c > 10 else "servo motor error")
       for c in range(10, 18)},
    18: ("controller", "force-torque sensor communication error"),
    19: ("gripper_communication", "end-effector (tool RS485) communication error"),
    21: ("kinematics", "kinematic error: the target has no inverse-kinematics solution"),
    22: ("self_collision", "self-collision: the arm would collide with itself"),
    23: ("joint_limit", "joint angle exceeds its limit"),
    24: ("speed", "speed exceeds limit"),
    25: ("planning", "planning error"),
    26: ("controller", "Linux real-time error"),
    27: ("controller", "command reply error"),
    28: ("gripper_communication", "end-module communication error"),
    30: ("speed", "feedback speed exceeds limit"),
    31: ("collision", "collision caused abnormal current (collision detection)"),
    32: ("planning", "three-point circle error"),
    33: ("controller", "controller GPIO error"),
    34: ("controller", "recording timeout"),
    35: ("safety_fence", "safety boundary limit: the TCP would leave the fence"),
    36: ("controller", "too many delay commands"),
    37: ("controller", "abnormal movement in manual mode"),
    38: ("servo", "abnormal joint angle"),
    39: ("controller", "power-board communication error"),
    40: ("kinematics", "no inverse-kinematics solution"),
    41: ("config", "invalid friction parameter file"),
    42: ("config", "invalid calibration file"),
    50: ("controller", "force-torque sensor error"),
    51: ("controller", "force-torque sensor error"),
    52: ("controller", "force-torque sensor error"),
    53: ("controller", "force-torque sensor error"),
    60: ("speed", "linear speed limit in servo_j"),
    110: ("controller", "base-board communication error"),
    111: ("controller", "external RS485 communication error"),
}

CONTROLLER_ERRORS = {c: (FaultKind.parse(k, f"CONTROLLER_ERRORS[{c}]"), m) for c, (k, m) in CONTROLLER_ERRORS.items()}

CONTROLLER_WARNINGS: dict[int, str] = {
    11: "command cache full", 12: "parameter error", 13: "command does not exist",
    14: "no solution", 15: "Modbus command cache full",
}

# SDK return code (APIState / UxbusState) -> (kind, meaning)
SDK_CODES: dict[int, tuple[str, str]] = {
    -1: ("connection", "not connected to the controller"),
    -2: ("not_ready", "the arm is not enabled or not in a ready state"),
    -3: ("config", "SDK exception (bad parameter)"),
    -4: ("config", "command not supported by this firmware"),
    -6: ("safety_fence", "Cartesian limit"),
    -7: ("joint_limit", "joint angle limit (client-side check)"),
    -8: ("joint_limit", "out of range (client-side check)"),
    -9: ("not_ready", "the arm stopped (state 4) while waiting"),
    1: ("controller", "the controller has an error pending"),
    2: ("controller", "the controller has a warning pending"),
    3: ("timeout", "no reply from the controller within the SDK's timeout"),
    4: ("connection", "reply length error"),
    5: ("connection", "reply transaction number error"),
    6: ("connection", "reply protocol identifier error"),
    7: ("connection", "reply register does not match the request"),
    8: ("connection", "socket write failed"),
    9: ("not_ready", "state not ready (4 or 5): the controller refused to move"),
    10: ("controller", "result invalid"),
    12: ("config", "parameter error"),
    20: ("gripper_communication", "RS485 host id error"),
    21: ("gripper_communication", "RS485 baud rate not supported"),
    22: ("gripper_communication", "tool RS485 baud rate is not the gripper's"),
    23: ("gripper_communication", "RS485 reply length error"),
    100: ("timeout", "waiting for completion timed out"),
    102: ("gripper", "the gripper reports a fault"),
    103: ("gripper", "the gripper is not enabled"),
}

SDK_CODES = {c: (FaultKind.parse(k, f"SDK_CODES[{c}]"), m) for c, (k, m) in SDK_CODES.items()}


class XArmFault(RobotFault):
    """A RobotFault from the xArm6 backend. ``code`` is the controller error code when there is one
    (e.g. 35), else None; ``sdk_code`` is the SDK return code that revealed it, if any; ``readback``
    the safety read-back (robots/xarm6.py SafetyReading rows) of a ``safety_mismatch``."""

    def __init__(self, message: str, code=None, kind: str = "controller", sdk_code: int | None = None,
                 where: str = "", readback: list | None = None):
        super().__init__(message, code=code, kind=kind)
        self.sdk_code = sdk_code
        self.where = where
        self.readback = readback


def controller_fault(err: int, where: str = "", sdk_code: int | None = None) -> XArmFault:
    kind, meaning = CONTROLLER_ERRORS.get(int(err), ("controller", "controller error"))
    msg = f"xArm controller error C{err}: {meaning}"
    if where:
        msg += f" (during {where})"
    return XArmFault(msg, code=int(err), kind=kind, sdk_code=sdk_code, where=where)


def sdk_fault(rc: int, where: str = "", err: int = 0, gripper_err: int = 0) -> XArmFault:
    """A fault from a nonzero SDK return code, refined by the controller error ``err`` when set."""
    if err:
        return controller_fault(err, where, sdk_code=rc)
    kind, meaning = SDK_CODES.get(int(rc), ("controller", "SDK error"))
    msg = f"xArm SDK code {rc}: {meaning}"
    if gripper_err:
        msg += f"; gripper error register {gripper_err}"
    if where:
        msg += f" (during {where})"
    return XArmFault(msg, code=None, kind=kind, sdk_code=int(rc), where=where)
