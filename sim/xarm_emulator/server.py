"""A wire-level xArm6 controller emulator for the unmodified ``xarm-python-sdk`` (1.18.4).

It serves the command port (default 502) and one report port (30002 'rich', or 30001/30003), both
bound to ``host`` (default 127.0.0.1), and models: the enable/mode/state machine, a motion queue
integrated by a background thread at the commanded speed (reduced mode caps the TCP speed),
xArm6 kinematics (numeric IK on the DH parameters: C21 unreachable, C23 joint limit), the stored
TCP offset (register 35; poses, moves and the fence are the TCP's), the safety fence (C35), the
gripper behind the RS485 tunnel, feedback frames, and fault injection driven from Python
(``inject_error``, ``inject_collision``, ``inject_stall``, ``drop_connection``, ``delay_replies``,
``tamper_safety``, gripper faults and objects).

Ports. The SDK connects to ``XCONF.SocketConf.TCP_CONTROL_PORT`` (502) and to 30002 on the same
address. 502 needs root or CAP_NET_BIND_SERVICE; without them, serve any high port and make the
client connect there (``XArm6Robot(..., command_port=N)`` patches the SDK's port constant for the
duration of its connect). The report port cannot be moved (the SDK maps 30000-30003 to frame
layouts), so two emulators on one machine need two loopback addresses (127.0.0.1, 127.0.0.2, ...:
Linux routes all of 127/8 to ``lo``). Tests use a random 127.x.y.z and an ephemeral command port.

Every socket the emulator owns has an explicit timeout, so the SDK's process-wide
``socket.setdefaulttimeout(1)`` cannot kill idle connections when both run in one process.
"""
from __future__ import annotations

import collections
import logging
import math
import socket
import struct
import threading
import time
from dataclasses import dataclass

import numpy as np

from . import kinematics as kin
from . import protocol as P
from .gripper import GripperModel

log = logging.getLogger("motormind.sim.xarm_emulator")

DEFAULT_VERSION = "6,6,XI1304,AC1302,v2.5.0"
DEFAULT_POSE = (300.0, 0.0, 300.0, 180.0, 0.0, 0.0)      # mm, degrees: tool pointing down
ESTOP_CODES = {1, 2, 3}
SERVO_CODES = set(range(10, 18))


@dataclass
class _Task:
    kind: str                       # line | joint | check
    reg: int
    tid: int
    prot: int
    client: "_Client | None"
    fb_mask: int
    speed: float = 0.0              # mm/s (line; rotation uses speed * 0.18 deg/s) or rad/s (joint)
    pose: tuple | None = None       # absolute [x, y, z, r, p, yw] (mm, rad); inf = keep
    delta: tuple | None = None      # relative [dx, dy, dz, dr, dp, dyw]
    tool: bool = False              # delta in the tool frame
    joints: tuple | None = None     # absolute joints (rad)
    djoints: tuple | None = None    # relative joints
    task_id: int = 0
    # filled when started
    p0: np.ndarray | None = None
    r0: np.ndarray | None = None
    p1: np.ndarray | None = None
    r1: np.ndarray | None = None
    q0: np.ndarray | None = None
    q1: np.ndarray | None = None
    duration: float = 0.0
    s: float = 0.0
    travelled_mm: float = 0.0


@dataclass
class _Trigger:
    action: str                     # error | stall | drop
    at_mm: float
    code: int = 0


class _Client:
    def __init__(self, sock: socket.socket, addr, kind: str):
        self.sock = sock
        self.addr = addr
        self.kind = kind            # command | report
        self.send_lock = threading.Lock()
        self.alive = True

    def send(self, data: bytes) -> bool:
        try:
            with self.send_lock:
                self.sock.sendall(data)
            return True
        except OSError:
            self.alive = False
            return False

    def close(self) -> None:
        self.alive = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


@dataclass
class RequestRecord:
    t: float                        # time.monotonic()
    reg: int
    client: tuple


class XArmEmulator:
    """One emulated xArm6 controller. Use as a context manager, or ``start()`` / ``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 502, *, report_port: int = 30002,
                 report_type: str = "rich", report_hz: float = 5.0, tick_hz: float = 100.0,
                 version: str = DEFAULT_VERSION, initial_pose=DEFAULT_POSE, initial_joints=None,
                 enabled: bool = False, gripper_pulses: float = 850.0, reply_timeout_s: float = 5.0,
                 tcp_offset=(0.0, 0.0, 0.0, 0.0, 0.0, 0.0)):
        if report_type not in ("rich", "normal", "real"):
            raise ValueError(f"report_type must be rich, normal or real, got {report_type!r}")
        if len(version.encode("ascii")) >= 40:
            raise ValueError("version string must be shorter than 40 bytes (NUL-terminated)")
        self.host = host
        self._req_port = int(port)
        self._req_report_port = int(report_port)
        self.report_type = report_type
        self.report_period = 1.0 / float(report_hz)
        self.tick = 1.0 / float(tick_hz)
        self.version = version
        self.reply_timeout_s = reply_timeout_s
        self._lock = threading.RLock()
        self._stop_evt = threading.Event()
        self._threads: list[threading.Thread] = []
        self._listeners: list[socket.socket] = []
        self._clients: list[_Client] = []
        self.port: int | None = None
        self.report_port: int | None = None
        # --- arm state ---
        # the stored TCP offset (mm, rad, as on the wire; ``tcp_offset`` is given in mm and degrees):
        # poses, moves, IK and the fence are the TCP's, as on the real controller. Register 35 sets
        # it (SDK set_tcp_offset); the report stream carries it (byte 91: the SDK's tcp_offset; SDK
        # 1.18.4 has no register that reads it). Zero (the default, a fresh controller): the flange
        ox, oy, oz, orr, op, oyw = (float(v) for v in tcp_offset)
        self.tcp_offset = [ox, oy, oz, math.radians(orr), math.radians(op), math.radians(oyw)]
        self._tool = kin.tool_transform(self.tcp_offset)
        if initial_joints is not None:
            q = np.array(initial_joints, dtype=float)[:6]
        else:
            x, y, z, r, p, yw = initial_pose
            q, ok = kin.ik(np.array([x, y, z], float),
                           kin.rpy_to_mat(math.radians(r), math.radians(p), math.radians(yw)),
                           [0.0, -0.5, -0.5, 0.0, 1.0, 0.0], tool=self._tool)
            if not ok:
                raise ValueError(f"initial_pose {initial_pose} is not reachable")
        self._q = q
        self._pos, self._rot = kin.fk(q, self._tool)
        self.enabled = bool(enabled)
        self.mode = 0
        self.state = 4
        self.error = 0
        self.warn = 0
        self._queue: collections.deque[_Task] = collections.deque()
        self._cur: _Task | None = None
        self._task_counter = 0
        self._fb_mask = 0
        self._tcp_speed = 0.0
        self._count = 0
        self.tcp_load = [0.0, 0.0, 0.0, 0.0]
        self.collision_sensitivity = 0
        self.teach_sensitivity = 1
        self.reduced_mode = False
        self.reduced_tcp_speed = 1000.0
        self.reduced_joint_speed = math.pi
        self.reduced_joint_ranges = [v for lo_hi in kin.JOINT_LIMITS for v in lo_hi] + [0.0, 0.0]
        self.boundary = [750, -750, 750, -750, 1000, -400]   # x max, x min, y max, y min, z max, z min
        self.fence = False
        self.collision_rebound = False
        self.simulation_robot = False
        self.gripper = GripperModel(position=gripper_pulses)
        self.gripper_comm_fault = False
        # --- fault injection ---
        self._triggers: list[_Trigger] = []
        self._stalled = False
        self._reply_delay_s = 0.0
        self._tamper: dict = {}
        self.dropped_at: float | None = None
        self.connections_after_drop = 0
        self.requests: list[RequestRecord] = []
        self.connections: list[tuple] = []
        self.error_history: list[int] = []

    # ----------------------------------------------------------------------------- lifecycle
    def start(self) -> "XArmEmulator":
        cmd = self._listen(self._req_port)
        rep = self._listen(self._req_report_port)
        self.port = cmd.getsockname()[1]
        self.report_port = rep.getsockname()[1]
        self._spawn(self._accept_loop, cmd, "command")
        self._spawn(self._accept_loop, rep, "report")
        self._spawn(self._motion_loop)
        log.info("xArm6 emulator on %s: command %d, report %d (%s)", self.host, self.port,
                 self.report_port, self.report_type)
        return self

    def stop(self) -> None:
        self._stop_evt.set()
        for s in self._listeners:
            try:
                s.close()
            except OSError:
                pass
        with self._lock:
            clients = list(self._clients)
        for c in clients:
            c.close()
        for t in self._threads:
            if t is not threading.current_thread():
                t.join(timeout=2.0)

    close = stop

    def __enter__(self) -> "XArmEmulator":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _listen(self, port: int) -> socket.socket:
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((self.host, port))
        except OSError as e:
            s.close()
            hint = ""
            if port < 1024:
                hint = (" (ports below 1024 need root or CAP_NET_BIND_SERVICE: serve a high port and "
                        "connect with XArm6Robot(command_port=...), see docs/xarm6.md)")
            raise OSError(e.errno, f"xArm emulator cannot bind {self.host}:{port}: {e.strerror}{hint}") from e
        s.listen(8)
        s.settimeout(0.2)
        self._listeners.append(s)
        return s

    def _spawn(self, fn, *args) -> threading.Thread:
        t = threading.Thread(target=fn, args=args, daemon=True, name=f"xarm-emu-{fn.__name__}")
        t.start()
        self._threads.append(t)
        return t

    # ----------------------------------------------------------------------------- networking
    def _accept_loop(self, lsock: socket.socket, kind: str) -> None:
        while not self._stop_evt.is_set():
            try:
                conn, addr = lsock.accept()
            except socket.timeout:
                continue
            except OSError:
                break
            conn.settimeout(0.25)          # explicit: never inherit the SDK's global 1 s default
            conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self.connections.append((kind, addr, time.monotonic()))
                if self.dropped_at is not None:
                    self.connections_after_drop += 1
                    refuse = True
                else:
                    refuse = False
            client = _Client(conn, addr, kind)
            if refuse:
                client.close()
                continue
            with self._lock:
                self._clients.append(client)
            fn = self._serve_command if kind == "command" else self._serve_report
            threading.Thread(target=fn, args=(client,), daemon=True, name=f"xarm-emu-{kind}").start()

    def _recv_exact(self, client: _Client, n: int) -> bytes | None:
        buf = b""
        while len(buf) < n:
            if self._stop_evt.is_set() or not client.alive:
                return None
            try:
                chunk = client.sock.recv(n - len(buf))
            except socket.timeout:
                continue
            except OSError:
                return None
            if not chunk:
                return None
            buf += chunk
        return buf

    def _serve_command(self, client: _Client) -> None:
        try:
            while not self._stop_evt.is_set() and client.alive:
                hdr = self._recv_exact(client, 6)
                if hdr is None:
                    break
                tid, prot, length = P.REQ_HDR.unpack(hdr)
                body = self._recv_exact(client, length) if length else b""
                if body is None:
                    break
                if prot not in (2, 3) or not body:       # 1 = heartbeat, 0 = standard Modbus
                    continue
                reg, params = body[0], body[1:]
                with self._lock:
                    self.requests.append(RequestRecord(time.monotonic(), reg, client.addr))
                    try:
                        data = self._handle(reg, params, tid, prot, client)
                    except Exception:                   # a bad request must not kill the server
                        log.exception("emulator: register %d failed", reg)
                        data = b""
                    status = self._status_locked()
                    delay = self._reply_delay_s
                if data is None:                        # no reply at all
                    continue
                if delay > 0:
                    if self._stop_evt.wait(delay):
                        break
                if not client.send(P.response(tid, prot, reg, status, data)):
                    break
        finally:
            self._forget(client)

    def _serve_report(self, client: _Client) -> None:
        try:
            while not self._stop_evt.is_set() and client.alive:
                with self._lock:
                    frame = P.build_report(self._snapshot_locked(), self.report_type)
                if not client.send(frame):
                    break
                if self._stop_evt.wait(self.report_period):
                    break
        finally:
            self._forget(client)

    def _forget(self, client: _Client) -> None:
        client.close()
        with self._lock:
            if client in self._clients:
                self._clients.remove(client)

    # ----------------------------------------------------------------------------- state helpers
    def _status_locked(self) -> int:
        st = 0
        if self.error:
            st |= 0x40
        if self.warn:
            st |= 0x20
        if self.state in (4, 5):
            st |= 0x10
        return st

    def _cmdnum_locked(self) -> int:
        return len(self._queue) + (1 if self._cur is not None else 0)

    def _joints_locked(self) -> np.ndarray:
        """The joint angles the controller reports (rad)."""
        return self._q

    def _pose_locked(self) -> list[float]:
        r, p, yw = kin.mat_to_rpy(self._rot)
        return [float(self._pos[0]), float(self._pos[1]), float(self._pos[2]), r, p, yw]

    def _snapshot_locked(self) -> dict:
        self._count += 1
        tam = self._tamper
        return {
            "state": self.state, "mode": self.mode, "cmdnum": self._cmdnum_locked(),
            "joints": [float(v) for v in self._joints_locked()] + [0.0], "pose": self._pose_locked(),
            "enabled": self.enabled, "error": self.error, "warn": self.warn,
            "tcp_offset": self._tampered_offset_locked(tam) if "tcp_offset" in tam else list(self.tcp_offset),
            "tcp_load": list(tam.get("tcp_load", self.tcp_load)),
            "collision_sensitivity": int(tam.get("collision_sensitivity", self.collision_sensitivity)),
            "teach_sensitivity": self.teach_sensitivity, "version_text": self.version.split(",")[-1],
            "tcp_speed": self._tcp_speed, "count": self._count,
            "reduced_mode": bool(tam.get("reduced_mode", self.reduced_mode)),
            "fence": bool(tam.get("fence", self.fence)),
            "boundary": list(tam.get("boundary", self.boundary)),
            "reduced_tcp_speed": float(tam.get("reduced_tcp_speed", self.reduced_tcp_speed)),
            "reduced_joint_speed": self.reduced_joint_speed,
            "reduced_joint_ranges": list(self.reduced_joint_ranges),
            "collision_rebound": self.collision_rebound,
        }

    @staticmethod
    def _tampered_offset_locked(tam: dict) -> list[float]:
        x, y, z, r, p, yw = (float(v) for v in tam["tcp_offset"])         # given in mm and degrees
        return [x, y, z, math.radians(r), math.radians(p), math.radians(yw)]

    def _fault_locked(self, code: int) -> None:
        """Controller error: stop at once, drop the queue, state 4."""
        self.error = int(code)
        self.error_history.append(int(code))
        if code in ESTOP_CODES or code in SERVO_CODES:
            self.enabled = False
        cur = self._cur
        self._abort_motion_locked(result=1)
        if cur is not None:
            log.info("emulator: C%d during %s", code, cur.kind)
        self.state = 4
        if code in (19, 28):
            self.gripper_comm_fault = True

    def _abort_motion_locked(self, result: int = 2) -> None:
        tasks = ([self._cur] if self._cur is not None else []) + list(self._queue)
        self._cur = None
        self._queue.clear()
        self._stalled = False
        self._tcp_speed = 0.0
        for t in tasks:
            self._send_feedback_locked(t, result)

    def _send_feedback_locked(self, task: _Task, result: int) -> None:
        if task.client is None or not (task.fb_mask & 2) or not task.client.alive:
            return
        frame = P.feedback_frame(task.tid, task.prot, self._status_locked(), 2, task.reg,
                                 task.task_id, result, int(time.monotonic() * 1e6))
        task.client.send(frame)

    def _queue_task_locked(self, task: _Task) -> bool:
        if self.state in (4, 5) or self.error or not self.enabled:
            return False
        self._task_counter += 1
        task.task_id = self._task_counter
        task.fb_mask = self._fb_mask
        self._queue.append(task)
        if self.state in (0, 2):
            self.state = 1              # synchronously: the SDK's first poll must see "moving"
        return True

    # ----------------------------------------------------------------------------- registers
    def _handle(self, reg: int, p: bytes, tid: int, prot: int, client: _Client) -> bytes | None:
        if reg == P.GET_VERSION:
            return self.version.encode("ascii").ljust(40, b"\0")
        if reg == P.GET_ROBOT_SN:
            parts = self.version.split(",")
            return (parts[2] + "\0" + parts[3] + "\0").encode("ascii").ljust(40, b"\0")[:40]
        if reg == P.MOTION_EN:
            servo, on = (p[0], p[1]) if len(p) >= 2 else (8, 1)
            if on:
                if self.error not in ESTOP_CODES:
                    self.enabled = True
            else:
                self.enabled = False
                self._abort_motion_locked()
                self.state = 4
            return b""
        if reg == P.SET_STATE:
            self._set_state_locked(p[0] if p else 0)
            return b""
        if reg == P.GET_STATE:
            return bytes([self.state])
        if reg == P.GET_CMDNUM:
            return struct.pack(">H", self._cmdnum_locked())
        if reg == P.GET_ERROR:
            return bytes([self.error & 0xFF, self.warn & 0xFF])
        if reg == P.CLEAN_ERR:
            if self.error:
                self.error = 0
                self.gripper_comm_fault = False
                self.state = 4
            return b""
        if reg == P.CLEAN_WAR:
            self.warn = 0
            return b""
        if reg == P.SET_MODE:
            self.mode = p[0] if p else 0
            self._abort_motion_locked()
            self.state = 5
            return b""
        if reg in (P.MOVE_LINE, P.MOVE_LINEB):
            v = struct.unpack_from("<10f", p)
            coord = p[40] if len(p) > 40 else 0
            only_check = p[42] if len(p) > 42 else 0
            if only_check:
                return bytes([0, 0, self._check_pose_locked(v[:6])])
            if coord == 1:
                task = _Task("line", reg, tid, prot, client, 0, speed=v[6], delta=v[:6], tool=True)
            else:
                task = _Task("line", reg, tid, prot, client, 0, speed=v[6], pose=v[:6])
            self._queue_task_locked(task)
            return bytes(3)
        if reg == P.MOVE_LINE_TOOL:
            v = struct.unpack_from("<9f", p)
            self._queue_task_locked(_Task("line", reg, tid, prot, client, 0, speed=v[6], delta=v[:6], tool=True))
            return b""
        if reg == P.MOVE_RELATIVE:
            v = struct.unpack_from("<11f", p)
            is_joint = p[44] if len(p) > 44 else 0
            if is_joint:
                self._queue_task_locked(_Task("joint", reg, tid, prot, client, 0, speed=v[7], djoints=v[:6]))
            else:
                self._queue_task_locked(_Task("line", reg, tid, prot, client, 0, speed=v[7], delta=v[:6]))
            return b""
        if reg in (P.MOVE_JOINT, P.MOVE_JOINTB):
            v = struct.unpack_from("<10f", p)
            self._queue_task_locked(_Task("joint", reg, tid, prot, client, 0, speed=v[7], joints=v[:6]))
            return b""
        if reg == P.FEEDBACK_CHECK:
            self._queue_task_locked(_Task("check", reg, tid, prot, client, 0))
            return b""
        if reg == P.SET_FEEDBACK_TYPE:
            self._fb_mask = p[0] if p else 0
            return b""
        if reg == P.GET_TCP_POSE:
            return struct.pack("<6f", *self._pose_locked())
        if reg == P.GET_JOINT_POS:
            q = [float(v) for v in self._joints_locked()] + [0.0]
            if p:   # get_joint_states: positions, velocities, efforts
                n = p[0]
                return struct.pack("<%df" % (7 * n), *(q + [0.0] * 7 * (n - 1)))
            return struct.pack("<7f", *q)
        if reg == P.GET_IK:
            x, y, z, r, pi_, yw = struct.unpack_from("<6f", p)
            q, ok = kin.ik(np.array([x, y, z]), kin.rpy_to_mat(r, pi_, yw), self._q, tool=self._tool)
            return struct.pack("<7f", *[float(v) for v in q], 0.0)
        if reg == P.GET_FK:
            q = struct.unpack_from("<7f", p)
            return struct.pack("<6f", *kin.fk_pose(q[:6], self._tool))
        if reg == P.IS_JOINT_LIMIT:
            q = struct.unpack_from("<7f", p)
            return bytes([1 if kin.joint_limit_violations(q[:6]) else 0])
        if reg == P.IS_TCP_LIMIT:
            return bytes([1 if self._check_pose_locked(struct.unpack_from("<6f", p)) else 0])
        if reg == P.SET_TCP_OFFSET:                # the joints stay: the reported TCP pose moves
            self.tcp_offset = list(struct.unpack_from("<6f", p))
            self._tool = kin.tool_transform(self.tcp_offset)
            self._pos, self._rot = kin.fk(self._q, self._tool)
            return b""
        if reg == P.SET_LOAD_PARAM:
            self.tcp_load = list(struct.unpack_from("<4f", p))
            return b""
        if reg == P.SET_COLLIS_SENS:
            self.collision_sensitivity = max(0, min(5, p[0]))
            return b""
        if reg == P.SET_TEACH_SENS:
            self.teach_sensitivity = max(0, min(5, p[0]))
            return b""
        if reg == P.SET_REDUCED_TRSV:
            self.reduced_tcp_speed = struct.unpack_from("<f", p)[0]
            return b""
        if reg == P.SET_REDUCED_P2PV:
            self.reduced_joint_speed = struct.unpack_from("<f", p)[0]
            return b""
        if reg == P.GET_REDUCED_MODE:
            return bytes([1 if self._tamper.get("reduced_mode", self.reduced_mode) else 0])
        if reg == P.SET_REDUCED_MODE:
            self.reduced_mode = bool(p[0])
            return b""
        if reg == P.SET_LIMIT_XYZ:
            self.boundary = list(struct.unpack_from("<6i", p))
            return b""
        if reg == P.GET_REDUCED_STATE:
            s = self._snapshot_locked()
            return (bytes([1 if s["reduced_mode"] else 0])
                    + struct.pack(">6h", *[max(-32768, min(32767, int(v))) for v in s["boundary"]])
                    + struct.pack("<2f", s["reduced_tcp_speed"], s["reduced_joint_speed"])
                    + struct.pack("<14f", *s["reduced_joint_ranges"])
                    + bytes([1 if s["fence"] else 0, 1 if s["collision_rebound"] else 0]))
        if reg == P.SET_REDUCED_JRANGE:
            self.reduced_joint_ranges = list(struct.unpack_from("<14f", p))
            return b""
        if reg == P.SET_FENSE_ON:
            self.fence = bool(p[0])
            return b""
        if reg == P.SET_COLLIS_REB:
            self.collision_rebound = bool(p[0])
            return b""
        if reg == P.SET_SIMULATION_ROBOT:
            return b""              # acknowledged, never reported: gripper I/O stays on the wire
        if reg == P.RS485_RTU:
            return self._rs485_locked(p)
        if reg == P.TGPIO_R16B:
            addr = struct.unpack_from(">H", p, 1)[0] if len(p) >= 3 else 0
            return struct.pack(">i", 11 if addr == 0x0A0B else 0)   # baud index 11 = 2 Mbaud
        if reg == P.TGPIO_W16B:
            return b""
        return b""                  # everything else: an empty acknowledgement

    def _set_state_locked(self, s: int) -> None:
        if s == 0:
            if self.enabled and not self.error:
                self._stalled = False
                self.state = 1 if (self._queue or self._cur) else 2
        elif s == 3:
            if self.state in (0, 1):
                self.state = 3
        elif s in (4, 6):
            self._abort_motion_locked()
            self.state = 4

    def _rs485_locked(self, p: bytes) -> bytes:
        if len(p) < 7:
            return b""
        host, slave, fc = p[0], p[1], p[2]
        if self.gripper_comm_fault or slave != 8:
            return b""              # no answer from the tool bus: the status byte carries C19
        addr, cnt = struct.unpack_from(">HH", p, 3)
        if fc == 0x03:
            regs = self.gripper.read(addr, cnt)
            return bytes([host, slave, 3, 2 * cnt]) + struct.pack(">%dH" % cnt, *regs)
        if fc == 0x10:
            vals = list(struct.unpack_from(">%dH" % cnt, p, 8))
            self.gripper.write(addr, vals)
            return bytes([host]) + p[1:7]
        return b""

    def _check_pose_locked(self, pose) -> int:
        """0 if ``pose`` (mm, rad) is reachable, inside joint limits and inside the fence."""
        return 0 if self._target_problem_locked(np.array(pose[:3]), kin.rpy_to_mat(*pose[3:6]))[0] == 0 else 1

    def _target_problem_locked(self, pos: np.ndarray, rot: np.ndarray, seed=None):
        if self._outside_fence_locked(pos):
            return 35, None
        q, ok = kin.ik(pos, rot, self._q if seed is None else seed, tool=self._tool)
        if not ok:
            return 21, None
        if kin.joint_limit_violations(q):
            return 23, q
        return 0, q

    def _outside_fence_locked(self, pos) -> bool:
        if not self.fence:
            return False
        xmax, xmin, ymax, ymin, zmax, zmin = self.boundary
        x, y, z = (float(v) for v in pos[:3])
        return not (xmin - 1e-6 <= x <= xmax + 1e-6 and ymin - 1e-6 <= y <= ymax + 1e-6
                    and zmin - 1e-6 <= z <= zmax + 1e-6)

    # ----------------------------------------------------------------------------- motion
    def _motion_loop(self) -> None:
        last = time.monotonic()
        while not self._stop_evt.wait(self.tick):
            now = time.monotonic()
            dt = min(now - last, 0.1)
            last = now
            n = max(1, math.ceil(dt / (2.0 * self.tick) - 1e-9))   # a late wake-up (a loaded machine) is
            with self._lock:                                       # stepped in slices, so a fault due 5 mm
                try:                                               # into a move still fires 5 mm into it
                    for _ in range(n):
                        self._step_locked(dt / n)
                except Exception:
                    log.exception("emulator motion step failed")

    def _step_locked(self, dt: float) -> None:
        self.gripper.step(dt)
        if self.state != 1:
            self._tcp_speed = 0.0
            return
        if self._cur is None:
            if not self._queue:
                self.state = 2
                self._tcp_speed = 0.0
                return
            task = self._queue.popleft()
            self._cur = task
            if not self._start_task_locked(task):
                return
        task = self._cur
        if task.kind == "check":
            self._finish_task_locked(task)
            return
        self._fire_triggers_locked(task)
        if self._cur is not task or self.state != 1:
            return
        if self._stalled:
            self._tcp_speed = 0.0
            return
        s_new = 1.0 if task.duration <= 1e-9 else min(1.0, task.s + dt / task.duration)
        prev = self._pos.copy()
        if task.kind == "line":
            pos = task.p0 + (task.p1 - task.p0) * s_new
            rot = self._slerp(task.r0, task.r1, s_new)
            if self._outside_fence_locked(pos):
                self._fault_locked(35)
                return
            q, ok = kin.ik(pos, rot, self._q, max_iter=30, tool=self._tool)
            if not ok:
                self._fault_locked(21)
                return
            if kin.joint_limit_violations(q):
                self._fault_locked(23)
                return
            self._q, self._pos, self._rot = q, pos, rot
        else:
            q = task.q0 + (task.q1 - task.q0) * s_new
            pos, rot = kin.fk(q, self._tool)
            if self._outside_fence_locked(pos):
                self._fault_locked(35)
                return
            self._q, self._pos, self._rot = q, pos, rot
        step_mm = float(np.linalg.norm(self._pos - prev))
        task.travelled_mm += step_mm
        self._tcp_speed = step_mm / dt if dt > 0 else 0.0
        task.s = s_new
        if s_new >= 1.0:
            self._finish_task_locked(task)

    def _finish_task_locked(self, task: _Task) -> None:
        self._send_feedback_locked(task, 0)
        self._cur = None
        if not self._queue:
            self.state = 2
            self._tcp_speed = 0.0

    @staticmethod
    def _slerp(r0: np.ndarray, r1: np.ndarray, s: float) -> np.ndarray:
        rel = r0.T @ r1
        w = kin._rot_err(rel, np.eye(3))      # axis-angle of rel, in r0's frame
        ang = float(np.linalg.norm(w))
        if ang < 1e-12:
            return r1.copy() if s >= 1.0 else r0.copy()
        axis = w / ang
        th = ang * s
        k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
        rs = np.eye(3) + math.sin(th) * k + (1 - math.cos(th)) * (k @ k)
        return r0 @ rs

    def _start_task_locked(self, task: _Task) -> bool:
        task.p0, task.r0, task.q0 = self._pos.copy(), self._rot.copy(), self._q.copy()
        if task.kind == "check":
            return True
        if task.kind == "joint":
            q1 = np.array(task.joints if task.joints is not None else task.q0 + np.array(task.djoints), float)
            if kin.joint_limit_violations(q1):
                self._fault_locked(23)
                return False
            task.q1 = q1
            speed = max(1e-6, min(abs(task.speed) or 0.35, math.pi))
            if self.reduced_mode:
                speed = min(speed, self.reduced_joint_speed)
            task.duration = float(np.max(np.abs(q1 - task.q0))) / speed
            p1, _ = kin.fk(q1, self._tool)
            if self._outside_fence_locked(p1):
                self._fault_locked(35)
                return False
            return True
        cur = self._pose_locked()
        if task.pose is not None:
            tgt = [c if not math.isfinite(v) else v for v, c in zip(task.pose, cur)]
            p1 = np.array(tgt[:3], float)
            r1 = kin.rpy_to_mat(*tgt[3:6])
        elif task.tool:
            d = task.delta
            p1 = task.p0 + task.r0 @ np.array(d[:3], float)
            r1 = task.r0 @ kin.rpy_to_mat(*d[3:6])
        else:
            d = task.delta
            tgt = [c + v for c, v in zip(cur, d)]
            p1 = np.array(tgt[:3], float)
            r1 = kin.rpy_to_mat(*tgt[3:6])
        code, _q = self._target_problem_locked(p1, r1)
        if code:
            self._fault_locked(code)
            return False
        task.p1, task.r1 = p1, r1
        lin = float(np.linalg.norm(p1 - task.p0))
        ang = float(np.linalg.norm(kin._rot_err(r1, task.r0)))
        v = max(0.1, min(float(task.speed) if task.speed > 0 else 100.0, 1000.0))
        v_lin = min(v, self.reduced_tcp_speed) if self.reduced_mode else v
        v_ang = math.radians(v * 0.18)          # speed 0..1000 maps to 0..180 deg/s for rotation
        task.duration = max(lin / v_lin, ang / v_ang)
        return True

    def _fire_triggers_locked(self, task: _Task) -> None:
        for trig in list(self._triggers):
            if task.travelled_mm + 1e-9 >= trig.at_mm:
                self._triggers.remove(trig)
                self._apply_locked(trig.action, trig.code)
                if self._cur is not task:
                    return

    def _apply_locked(self, action: str, code: int = 0) -> None:
        if action == "error":
            self._fault_locked(code)
        elif action == "stall":
            self._stalled = True
        elif action == "drop":
            self._drop_locked()

    def _drop_locked(self) -> None:
        self.dropped_at = time.monotonic()
        # a cut cable: the controller keeps its state, the sockets just go away
        for c in list(self._clients):
            c.close()

    # ----------------------------------------------------------------------------- test API
    def _schedule(self, action: str, code: int, at_mm: float | None) -> None:
        with self._lock:
            if at_mm is None:
                self._apply_locked(action, code)
            else:
                self._triggers.append(_Trigger(action, float(at_mm), int(code)))

    def inject_error(self, code: int, at_mm: float | None = None) -> None:
        """Raise controller error ``code`` now, or once a motion has travelled ``at_mm`` mm."""
        self._schedule("error", code, at_mm)

    def inject_collision(self, at_mm: float | None = None) -> None:
        """A collision stop (C31) now or ``at_mm`` mm into a motion."""
        self._schedule("error", 31, at_mm)

    def inject_stall(self, at_mm: float | None = None) -> None:
        """The arm stops making progress but the controller still says 'moving' (state 1)."""
        self._schedule("stall", 0, at_mm)

    def drop_connection(self, at_mm: float | None = None) -> None:
        """Close every client socket (command and report), now or ``at_mm`` mm into a motion.
        Later connection attempts are refused and counted in ``connections_after_drop``."""
        self._schedule("drop", 0, at_mm)

    def delay_replies(self, seconds: float) -> None:
        """Delay every reply (the SDK gives up after 2 s with code 3)."""
        with self._lock:
            self._reply_delay_s = float(seconds)

    def tamper_safety(self, **values) -> None:
        """Make the controller *report* other safety values than it was given (read-back test).
        Keys: boundary, reduced_tcp_speed, reduced_mode, fence, collision_sensitivity, tcp_load,
        tcp_offset (x, y, z mm, roll, pitch, yaw deg: the report stream's TCP offset; the arm keeps
        moving with the offset it was given)."""
        with self._lock:
            self._tamper.update(values)

    def set_gripper_object(self, width_mm: float | None, pulses_per_mm: float = 10.0) -> None:
        """Put an object of ``width_mm`` between the fingers (closing stalls there); None removes it."""
        with self._lock:
            self.gripper.object_pulses = None if width_mm is None else float(width_mm) * pulses_per_mm

    def inject_gripper_error(self, code: int = 9) -> None:
        """The gripper's own error register becomes ``code`` (SDK: END_EFFECTOR_HAS_FAULT, 102)."""
        with self._lock:
            self.gripper.error = int(code)

    def inject_gripper_comm_fault(self) -> None:
        """The tool RS485 bus stops answering: C19 on the controller, the arm stops."""
        with self._lock:
            self._fault_locked(19)

    def clear_faults(self) -> None:
        """Remove pending triggers, stalls, reply delays, tampering and gripper faults."""
        with self._lock:
            self._triggers.clear()
            self._stalled = False
            self._reply_delay_s = 0.0
            self._tamper.clear()
            self.gripper.error = 0
            self.gripper_comm_fault = False

    def snapshot(self) -> dict:
        """The controller's true state (not the tampered view): for assertions in tests."""
        with self._lock:
            pose = self._pose_locked()
            return {
                "state": self.state, "mode": self.mode, "error": self.error, "warn": self.warn,
                "enabled": self.enabled, "cmdnum": self._cmdnum_locked(), "moving": self._cur is not None,
                "stalled": self._stalled,
                "pose_mm_deg": pose[:3] + [math.degrees(v) for v in pose[3:6]],
                "joints_rad": [float(v) for v in self._joints_locked()],
                "gripper_pulses": self.gripper.pos, "gripper_target": self.gripper.target,
                "gripper_enabled": self.gripper.enabled, "gripper_status": self.gripper.status,
                "tcp_load": list(self.tcp_load), "collision_sensitivity": self.collision_sensitivity,
                "tcp_offset_mm_deg": self.tcp_offset[:3] + [math.degrees(v) for v in self.tcp_offset[3:6]],
                "reduced_mode": self.reduced_mode, "reduced_tcp_speed": self.reduced_tcp_speed,
                "boundary": list(self.boundary), "fence": self.fence,
                "error_history": list(self.error_history),
            }

    def requests_since(self, t: float) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if r.t > t]

    def motion_requests(self) -> list[RequestRecord]:
        with self._lock:
            return [r for r in self.requests if r.reg in (P.MOVE_LINE, P.MOVE_LINEB, P.MOVE_RELATIVE,
                                                          P.MOVE_JOINT, P.MOVE_JOINTB, P.MOVE_LINE_TOOL)]

    def wait_idle(self, timeout: float = 10.0) -> bool:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            with self._lock:
                if self._cur is None and not self._queue:
                    return True
            time.sleep(0.01)
        return False


def free_loopback_host(report_port: int = 30002, tries: int = 50) -> str:
    """A random 127.x.y.z whose ``report_port`` is free right now. Give every emulator its own
    loopback address and parallel emulators (tests, other people's) never fight over 30002."""
    import random
    for _ in range(tries):
        host = f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, report_port))
            return host
        except OSError:
            continue
        finally:
            s.close()
    raise OSError(f"no loopback address with port {report_port} free")


def serve(host: str = "127.0.0.1", port: int = 502, *, block: bool = True, **kwargs) -> XArmEmulator:
    """Start an emulator on ``host:port`` (report on 30002). With ``block`` run until Ctrl-C."""
    emu = XArmEmulator(host, port, **kwargs).start()
    if block:
        hold(emu)
    return emu


def hold(emu) -> None:
    """Keep ``emu`` serving until Ctrl-C, then stop it."""
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        emu.stop()
