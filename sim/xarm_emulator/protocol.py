"""Wire formats of the xArm private Modbus-TCP protocol (SDK 1.18.4), as in xarm-protocol.md.

Header and u16 values big-endian; floats and int32 parameters little-endian; report counters
big-endian, report floats little-endian.
"""
from __future__ import annotations

import math
import struct

REQ_HDR = struct.Struct(">HHH")          # transaction id, protocol id, length (counts the register)
RESP_HDR = struct.Struct(">HHHBB")       # + register, status

# registers (XCONF.UxbusReg)
GET_VERSION, GET_ROBOT_SN = 1, 2
MOTION_EN, SET_STATE, GET_STATE, GET_CMDNUM, GET_ERROR, CLEAN_ERR, CLEAN_WAR = 11, 12, 13, 14, 15, 16, 17
SET_MODE = 19
MOVE_LINE, MOVE_LINEB, MOVE_JOINT, MOVE_JOINTB, MOVE_LINE_TOOL = 21, 22, 23, 24, 28
SET_TCP_OFFSET, SET_LOAD_PARAM, SET_COLLIS_SENS, SET_TEACH_SENS = 35, 36, 37, 38
GET_TCP_POSE, GET_JOINT_POS, GET_IK, GET_FK, IS_JOINT_LIMIT, IS_TCP_LIMIT = 41, 42, 43, 44, 45, 46
SET_REDUCED_TRSV, SET_REDUCED_P2PV, GET_REDUCED_MODE, SET_REDUCED_MODE = 47, 48, 49, 50
SET_LIMIT_XYZ, GET_REDUCED_STATE, SET_REDUCED_JRANGE, SET_FENSE_ON, SET_COLLIS_REB = 52, 53, 58, 59, 60
SET_SIMULATION_ROBOT = 79
MOVE_RELATIVE = 83
RS485_RTU, TGPIO_W16B, TGPIO_R16B = 124, 127, 128
FEEDBACK_CHECK, SET_FEEDBACK_TYPE = 253, 254
FEEDBACK_REG = 0xFF

MOTION_REGS = {MOVE_LINE, MOVE_LINEB, MOVE_JOINT, MOVE_JOINTB, MOVE_LINE_TOOL, MOVE_RELATIVE,
               FEEDBACK_CHECK, SET_LOAD_PARAM}

RICH_LEN, NORMAL_LEN, REAL_LEN = 587, 145, 87


def response(tid: int, prot: int, reg: int, status: int, data: bytes = b"") -> bytes:
    return RESP_HDR.pack(tid, prot, len(data) + 2, reg, status) + data


def feedback_frame(tid: int, prot: int, status: int, fb_type: int, reg: int, task_id: int,
                   result: int, t_us: int) -> bytes:
    """Unsolicited 0xFF frame on the command socket (firmware >= 2.0.102)."""
    body = struct.pack(">BBBBHBQ", FEEDBACK_REG, status, fb_type, reg, task_id & 0xFFFF, result,
                       t_us & 0xFFFFFFFFFFFFFFFF)
    return struct.pack(">HHH", tid, prot, len(body)) + body


def _finite(v: float) -> float:
    return v if math.isfinite(v) else 0.0


def build_report(s: dict, kind: str = "rich") -> bytes:
    """One report frame from the emulator snapshot ``s`` (see XArmEmulator._snapshot_locked)."""
    n = {"rich": RICH_LEN, "normal": NORMAL_LEN, "real": REAL_LEN}[kind]
    b = bytearray(n)
    struct.pack_into(">IBH", b, 0, n, (s["state"] & 0x0F) | ((s["mode"] & 0x0F) << 4), min(s["cmdnum"], 0xFFFF))
    struct.pack_into("<7f", b, 7, *s["joints"])
    struct.pack_into("<6f", b, 35, *s["pose"])
    struct.pack_into("<7f", b, 59, *([0.0] * 7))
    if kind == "real":
        return bytes(b)
    bits = 0x3F if s["enabled"] else 0
    struct.pack_into("4B", b, 87, bits, bits, s["error"] & 0xFF, s["warn"] & 0xFF)
    struct.pack_into("<6f", b, 91, *s["tcp_offset"])
    struct.pack_into("<4f", b, 115, *s["tcp_load"])
    struct.pack_into("2B", b, 131, s["collision_sensitivity"], s["teach_sensitivity"])
    struct.pack_into("<3f", b, 133, 0.0, 0.0, -1.0)
    if kind == "normal":
        return bytes(b)
    struct.pack_into("6B", b, 145, 6, 6, 0xAA, 0x55, 0, 0)          # robot type 6 = xArm6, 6 axes
    ver = s["version_text"].encode("ascii")[:29]
    b[151:151 + len(ver)] = ver
    struct.pack_into("<5f", b, 181, 10000.0, 1.0, 50000.0, 0.1, 1000.0)
    struct.pack_into("<5f", b, 201, 20.0, 0.01, 20.0, 0.0001, math.pi)
    struct.pack_into("<2f", b, 221, 2.3, 2.7)
    struct.pack_into("7b", b, 245, *([30] * 7))
    struct.pack_into("<f", b, 252, _finite(s["tcp_speed"]))
    struct.pack_into(">I", b, 284, s["count"] & 0xFFFFFFFF)
    b[314] = 0                                                       # not a "simulation robot"
    b[315] = 1                                                       # self-collision check on
    struct.pack_into(">7H", b, 341, *([4800] * 7))                   # 48 V
    cfg = (1 if s["reduced_mode"] else 0) | (2 if s["fence"] else 0)
    b[494] = cfg
    b[495] = 1 if s["reduced_mode"] else 0
    struct.pack_into(">6h", b, 496, *[max(-32768, min(32767, int(v))) for v in s["boundary"]])
    struct.pack_into("<f", b, 508, s["reduced_tcp_speed"])
    struct.pack_into("<f", b, 512, s["reduced_joint_speed"])
    struct.pack_into("<14f", b, 516, *s["reduced_joint_ranges"])
    b[572] = 1 if s["fence"] else 0
    b[573] = 1 if s["collision_rebound"] else 0
    return bytes(b)
