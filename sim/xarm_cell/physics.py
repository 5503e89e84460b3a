"""The cell's MuJoCo simulation: the arm's joint servos, the gripper, the blocks and marks.

``CellPhysics`` owns one ``MjModel``/``MjData``. It is not thread-safe: the emulator calls it under
its own lock, between control ticks (sim/xarm_cell/emulator.py). Units: metres, radians, seconds;
the world frame is the arm's base frame.

What it answers: the measured joints and finger gap (what the controller reports), the poses,
boxes and contacts of everything (what the privileged scene reads), and ``move_object`` (the
outside hand: a block or mark put somewhere else between two steps, at rest).
"""
from __future__ import annotations

import math
import time

import mujoco
import numpy as np

from .config import CellConfig
from .model import MAX_GAP_M, cell_xml

FINGERS = ("finger1", "finger2")


def _yaw_quat_wxyz(yaw: float) -> np.ndarray:
    return np.array([math.cos(yaw / 2), 0.0, 0.0, math.sin(yaw / 2)])


class CellPhysics:
    def __init__(self, cfg: CellConfig):
        self.cfg = cfg
        self.model = mujoco.MjModel.from_xml_string(cell_xml(cfg))
        self.data = mujoco.MjData(self.model)
        m = self.model
        self.timestep = float(m.opt.timestep)
        self._arm_qadr = np.array([m.jnt_qposadr[m.joint(f"joint{k}").id] for k in range(1, 7)])
        self._arm_vadr = np.array([m.jnt_dofadr[m.joint(f"joint{k}").id] for k in range(1, 7)])
        self._arm_act = np.array([m.actuator(f"joint{k}").id for k in range(1, 7)])
        self._kp_kv = np.array([[m.actuator_gainprm[a, 0], -m.actuator_biasprm[a, 2]] for a in self._arm_act])
        self._finger_qadr = [m.jnt_qposadr[m.joint(f).id] for f in FINGERS]
        self._finger_act = m.actuator("fingers").id
        self._finger_geoms = {m.geom(f"{f}_pad").id: f for f in FINGERS}
        self._free = {n: (m.jnt_qposadr[m.joint(n).id], m.jnt_dofadr[m.joint(n).id]) for n in cfg.blocks}
        self._mocap = {n: m.body_mocapid[m.body(n).id] for n in cfg.marks}
        self.body_of_geom = {}
        for n in list(cfg.blocks) + list(cfg.marks):
            self.body_of_geom[m.geom(n).id] = n
        self.table_geom = m.geom("table").id
        self.floor_geom = m.geom("floor").id
        self.sim_time_s = 0.0          # simulated time since construction
        self.step_cpu_s = 0.0          # wall time spent inside mj_step (the real-time capacity)

    # -- reset and commands -------------------------------------------------------------------
    def reset(self, q_arm, objects: dict, gap_m: float = MAX_GAP_M) -> None:
        """Arm at ``q_arm`` (rad), gripper at ``gap_m``, each named object at (x, y, yaw) on the table,
        everything at rest; objects not named keep their place."""
        d, m = self.data, self.model
        d.qvel[:] = 0.0
        d.qacc[:] = 0.0
        d.act[:] = 0.0 if m.na else d.act
        d.qpos[self._arm_qadr] = np.asarray(q_arm, float)[:6]
        for a in self._finger_qadr:
            d.qpos[a] = gap_m / 2
        for name, (x, y, yaw) in objects.items():
            self._place(name, x, y, yaw)
        self.command(q_arm, np.zeros(6), gap_m)
        mujoco.mj_forward(m, d)

    def _place(self, name: str, x: float, y: float, yaw: float) -> None:
        d, cfg = self.data, self.cfg
        if name in self._free:
            qa, va = self._free[name]
            z = cfg.table_top_z_m + cfg.blocks[name].size_m[2] / 2 + 0.0005
            d.qpos[qa:qa + 3] = (x, y, z)
            d.qpos[qa + 3:qa + 7] = _yaw_quat_wxyz(yaw)
            d.qvel[va:va + 6] = 0.0
        elif name in self._mocap:
            k = self._mocap[name]
            d.mocap_pos[k] = (x, y, cfg.table_top_z_m + cfg.marks[name].size_m[2] / 2)
            d.mocap_quat[k] = _yaw_quat_wxyz(yaw)
        else:
            known = ", ".join(list(self._free) + list(self._mocap))
            raise KeyError(f"unknown object {name!r} (known: {known})")

    def move_object(self, name: str, x: float, y: float, yaw: float | None = None) -> None:
        """The outside hand: ``name`` lifted and set down at (x, y) (its yaw kept unless given), at rest."""
        if yaw is None:
            _, rot = self.pose(name)
            yaw = math.atan2(rot[1, 0], rot[0, 0])
        self._place(name, x, y, yaw)
        mujoco.mj_forward(self.model, self.data)

    def command(self, q_des, qd_des, gap_m: float) -> None:
        """Joint servo targets (rad, rad/s: a velocity feed-forward) and the finger gap target (m)."""
        d = self.data
        q_des = np.asarray(q_des, float)[:6]
        ff = np.asarray(qd_des, float)[:6] * self._kp_kv[:, 1] / self._kp_kv[:, 0]
        d.ctrl[self._arm_act] = q_des + ff
        d.ctrl[self._finger_act] = min(MAX_GAP_M, max(0.0, float(gap_m))) / 2

    def step(self, dt: float) -> int:
        """Advance about ``dt`` seconds (whole physics steps, at least one). Returns the steps taken."""
        n = max(1, int(round(dt / self.timestep)))
        t0 = time.perf_counter()
        for _ in range(n):
            mujoco.mj_step(self.model, self.data)
        self.step_cpu_s += time.perf_counter() - t0
        self.sim_time_s += n * self.timestep
        return n

    # -- what the controller measures ---------------------------------------------------------
    def joints(self) -> np.ndarray:
        return self.data.qpos[self._arm_qadr].copy()

    def joint_velocities(self) -> np.ndarray:
        return self.data.qvel[self._arm_vadr].copy()

    def servo_torques(self) -> np.ndarray:
        """What the six joint servos exert now (N m)."""
        return self.data.actuator_force[self._arm_act].copy()

    def gap_m(self) -> float:
        return float(sum(self.data.qpos[a] for a in self._finger_qadr))

    def tcp(self) -> tuple[np.ndarray, np.ndarray]:
        """The TCP site's position (m) and rotation, base frame (for checks against the controller)."""
        sid = self.model.site("tcp").id
        return self.data.site_xpos[sid].copy(), self.data.site_xmat[sid].reshape(3, 3).copy()

    # -- what the privileged scene reads -------------------------------------------------------
    def pose(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        b = self.model.body(name).id
        return self.data.xpos[b].copy(), self.data.xmat[b].reshape(3, 3).copy()

    def obb(self, geom: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """A box geom's centre, half sizes and rotation (columns = its axes)."""
        return (self.data.geom_xpos[geom].copy(), self.model.geom_size[geom].copy(),
                self.data.geom_xmat[geom].reshape(3, 3).copy())

    def contacts(self) -> list[tuple[int, int]]:
        d = self.data
        return [(int(d.contact[i].geom1), int(d.contact[i].geom2)) for i in range(d.ncon)]

    def touching(self, a: str, b: str) -> bool:
        ga, gb = self.model.geom(a).id, self.model.geom(b).id
        return any({g1, g2} == {ga, gb} for g1, g2 in self.contacts())

    def finger_contacts(self) -> dict:
        """{object: sorted fingers touching it} for blocks and marks."""
        out: dict = {}
        for g1, g2 in self.contacts():
            for f, o in ((g1, g2), (g2, g1)):
                if f in self._finger_geoms and o in self.body_of_geom:
                    out.setdefault(self.body_of_geom[o], set()).add(self._finger_geoms[f])
        return {k: sorted(v) for k, v in out.items()}

    def speed_of(self, name: str) -> float:
        """Linear speed (m/s) of a block (0 for a mark)."""
        if name not in self._free:
            return 0.0
        _, va = self._free[name]
        return float(np.linalg.norm(self.data.qvel[va:va + 3]))

    def state(self) -> dict:
        """A copy of what rendering needs (joint positions and mocap poses)."""
        d = self.data
        return {"qpos": d.qpos.copy(), "mocap_pos": d.mocap_pos.copy(), "mocap_quat": d.mocap_quat.copy()}
