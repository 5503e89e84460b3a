"""The xArm Gripper as a Modbus-RTU slave (id 8) behind the tool-flange RS485 tunnel (register 124).

Positions are "pulses" (0 closed .. 850 fully open, about 10 pulses per mm of finger gap).
Speed is in r/min as the SDK sends it; the emulator maps it to ``speed_rpm * PULSES_PER_S_PER_RPM``
pulses per second (5000 r/min strokes fully in about 0.85 s). The real mapping is gripper-firmware
specific (xarm-protocol.md section 4.5, item 10).
"""
from __future__ import annotations

PULSES_PER_S_PER_RPM = 0.2
MIN_PULSE, MAX_PULSE = 0, 850

REG_STATUS = 0x0000
REG_ERROR = 0x000F
REG_ENABLE = 0x0100
REG_MODE = 0x0101
REG_RESET_ERR = 0x0109
REG_SPEED = 0x0303
REG_TARGET = 0x0700      # s32, two registers, high word first
REG_POS = 0x0702         # s32, two registers
REG_VERSION = 0x0801     # major, minor, patch
REG_ZERO = 0x0817


def _s32_words(v: int) -> list[int]:
    v &= 0xFFFFFFFF
    return [(v >> 16) & 0xFFFF, v & 0xFFFF]


def _words_s32(hi: int, lo: int) -> int:
    v = ((hi & 0xFFFF) << 16) | (lo & 0xFFFF)
    return v - (1 << 32) if v & 0x80000000 else v


class GripperModel:
    """Register map and a first-order motion model. Not thread-safe: the emulator holds its lock."""

    def __init__(self, position: float = MAX_PULSE, version=(3, 4, 3)):
        self.pos = float(position)
        self.target = float(position)
        self.speed_rpm = 1500
        self.enabled = False
        self.mode = 0
        self.error = 0
        self.version = tuple(version)
        self.object_pulses: float | None = None   # an object between the fingers, as a gap
        self.status = 0                            # 0 stopped, 1 moving, 2 gripping

    # -- Modbus register access -----------------------------------------------------------------
    def read(self, addr: int, count: int) -> list[int]:
        out = []
        for a in range(addr, addr + count):
            out.append(self._read1(a))
        return out

    def _read1(self, a: int) -> int:
        if a == REG_STATUS:
            return self.status
        if a == REG_ERROR:
            return self.error
        if a == REG_ENABLE:
            return int(self.enabled)
        if a == REG_MODE:
            return self.mode
        if a == REG_SPEED:
            return int(self.speed_rpm)
        if a in (REG_TARGET, REG_TARGET + 1):
            return _s32_words(int(round(self.target)))[a - REG_TARGET]
        if a in (REG_POS, REG_POS + 1):
            return _s32_words(int(round(self.pos)))[a - REG_POS]
        if REG_VERSION <= a < REG_VERSION + 3:
            return self.version[a - REG_VERSION]
        return 0

    def write(self, addr: int, values: list[int]) -> None:
        if addr == REG_TARGET and len(values) >= 2:
            if self.enabled and self.error == 0:
                t = _words_s32(values[0], values[1])
                self.target = float(min(MAX_PULSE, max(MIN_PULSE, t)))
                if abs(self.target - self.pos) > 0.5:
                    self.status = 1     # synchronously: the SDK's first status poll must see "moving"
            return
        for i, v in enumerate(values):
            a = addr + i
            if a == REG_ENABLE:
                self.enabled = bool(v)
            elif a == REG_MODE:
                self.mode = int(v)
            elif a == REG_SPEED:
                self.speed_rpm = int(v)
            elif a == REG_RESET_ERR and v:
                self.error = 0
            elif a == REG_ZERO and v:
                self.pos = self.target = 0.0

    # -- motion ---------------------------------------------------------------------------------
    def step(self, dt: float) -> None:
        if not self.enabled or self.error:
            if self.status == 1:
                self.status = 0
            return
        goal = self.target
        blocked_at = None
        if self.object_pulses is not None and goal < self.object_pulses <= self.pos + 1e-9:
            blocked_at = self.object_pulses        # closing onto the object: stops at its width
        if blocked_at is not None:
            goal = blocked_at
        d = goal - self.pos
        if abs(d) < 1e-6:
            self.status = 2 if (blocked_at is not None and self.target < blocked_at - 1) else 0
            return
        v = max(1.0, self.speed_rpm * PULSES_PER_S_PER_RPM)
        stepv = v * dt
        if abs(d) <= stepv:
            self.pos = goal
            self.status = 2 if (blocked_at is not None and self.target < blocked_at - 1) else 0
        else:
            self.pos += stepv if d > 0 else -stepv
            self.status = 1
