"""The rehearsal cell as a MuJoCo model (MJCF text): the xArm6, its gripper, a table, blocks, marks.

The arm is written from UFACTORY's published standard DH parameters (sim/xarm_emulator/kinematics.py,
the same table the kinematic emulator uses), one body per joint with simple geometry: a capsule
along each link's DH offsets. Body ``link<i>`` turns about its own z axis (joint i); its child sits
at ``[a_i, 0, d_i]`` turned by ``Rx(alpha_i) Rz(offset_{i+1})``, so the flange body is exactly DH
frame 6 and MuJoCo's forward kinematics equals ``kinematics.fk``. Joint ranges are the controller's
joint table. Every arm body is gravity-compensated (the real controller compensates its own links);
the joints are stiff position servos the emulator's motion loop commands.

The gripper (an xArm Gripper's proportions, not its meshes) hangs from the flange: a palm box, two
fingers on slide joints along the flange's **y** axis (as on the real gripper), coupled to move
symmetrically (its linkage), driven by one force-limited position servo: closing on an object,
the fingers stop on it and squeeze with ``gripper.force_n``. Lengths in the flange frame (m):

    palm     flange .. 0.115 along z, +-0.0625 along y (finger axis), +-0.030 along x
    fingers  0.115 .. 0.182 along z (the tips), 0.010 thick (y), +-0.010 wide (x), gap 0 .. 0.085
    TCP      0.172: 10 mm above the fingertips, between them (the xarm6 profile's safety.tcp_offset_mm)

That is inside the oracle's gripper model (motormind/brains/oracle/tuning.py, measured on the Panda:
hand +-0.105 along the finger axis, fingers 0.025 thick, tips 10 mm below the grip site), so its
clearance checks are conservative here; see docs/xarm-cell.md for the TCP offset's yaw.

Collision groups: the arm and gripper (contype 2, conaffinity 1) touch the world (table, blocks:
contype 1, conaffinity 3) but not themselves; the target marks are drawn on the table, not felt. Units: metres, kilograms, radians.
"""
from __future__ import annotations

import math

import numpy as np

from motormind.geometry import mat_to_quat

from ..xarm_emulator import kinematics as kin
from .config import CellConfig

PALM_LEN_M = 0.115
PALM_HALF_FINGER_AXIS_M = 0.0625
PALM_HALF_ACROSS_M = 0.030
FINGER_LEN_M = 0.067
FINGER_THICK_M = 0.010
FINGER_HALF_WIDTH_M = 0.010
MAX_GAP_M = 0.085
TCP_Z_M = PALM_LEN_M + FINGER_LEN_M - 0.010      # 0.172: what UFACTORY's gripper TCP offset says
FINGER_KP = 2000.0                               # N per m of the finger servo (the force limit rules)

LINK_RADII_M = (0.060, 0.050, 0.050, 0.045, 0.040, 0.038)
JOINT_KP = (3000.0, 3000.0, 3000.0, 800.0, 800.0, 400.0)     # N m / rad
JOINT_KV = (120.0, 120.0, 100.0, 30.0, 30.0, 15.0)           # N m s / rad
ARMATURE = (0.3, 0.3, 0.2, 0.05, 0.05, 0.03)                 # reflected rotor inertia, kg m^2


def _f(v) -> str:
    return " ".join(f"{float(x):.9g}" for x in np.ravel(v))


def _quat_wxyz(rot: np.ndarray) -> str:
    q = mat_to_quat(rot)
    return _f([q[3], q[0], q[1], q[2]])


def _rx(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]], float)


def _rz(a: float) -> np.ndarray:
    c, s = math.cos(a), math.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]], float)


def _camera_xml(spec, indent: str) -> str:
    """A MuJoCo camera (looks along its -z, y up) from an OpenCV-convention calibration."""
    x, y = spec.rot[:, 0], -spec.rot[:, 1]
    return (f'{indent}<camera name="{spec.name}" pos="{_f(spec.position_m)}" xyaxes="{_f(x)} {_f(y)}" '
            f'fovy="{spec.fovy_deg:g}"/>\n')


def _gripper_xml(cfg: CellConfig, cams: list, indent: str) -> str:
    i = indent
    finger = (f'<geom name="{{n}}_pad" type="box" size="{FINGER_HALF_WIDTH_M:g} {FINGER_THICK_M / 2:g} '
              f'{FINGER_LEN_M / 2:g}" pos="0 {{y:g}} {PALM_LEN_M + FINGER_LEN_M / 2:g}" class="finger"/>')
    out = [f'{i}<body name="gripper" pos="0 0 0" gravcomp="1">',
           f'{i}  <geom name="palm" type="box" size="{PALM_HALF_ACROSS_M:g} {PALM_HALF_FINGER_AXIS_M:g} '
           f'{PALM_LEN_M / 2:g}" pos="0 0 {PALM_LEN_M / 2:g}" class="arm" rgba="0.85 0.85 0.88 1" mass="0.6"/>',
           f'{i}  <site name="tcp" pos="0 0 {TCP_Z_M:g}" size="0.004" rgba="1 0 0 0" group="5"/>',
           f'{i}  <body name="finger1" pos="0 0 0" gravcomp="1">',
           f'{i}    <joint name="finger1" type="slide" axis="0 1 0" range="0 {MAX_GAP_M / 2:g}" class="finger"/>',
           f'{i}    ' + finger.format(n="finger1", y=FINGER_THICK_M / 2),
           f'{i}  </body>',
           f'{i}  <body name="finger2" pos="0 0 0" gravcomp="1">',
           f'{i}    <joint name="finger2" type="slide" axis="0 -1 0" range="0 {MAX_GAP_M / 2:g}" class="finger"/>',
           f'{i}    ' + finger.format(n="finger2", y=-FINGER_THICK_M / 2),
           f'{i}  </body>']
    out += [_camera_xml(c, i + "  ").rstrip("\n") for c in cams]
    out.append(f'{i}</body>')
    return "\n".join(out) + "\n"


def arm_xml(cfg: CellConfig) -> str:
    """The arm's body chain, base to gripper (inside <worldbody>)."""
    wrist_cams = [c for c in cfg.cameras.values() if c.mount == "flange"]
    parts, close = [], []
    pos, rot = np.zeros(3), np.eye(3)
    for k, ((d, a, alpha, off), (lo, hi)) in enumerate(zip(kin.DH, kin.JOINT_LIMITS)):
        ind = "  " * (k + 2)
        rot = rot @ _rz(off)
        parts.append(f'{ind}<body name="link{k + 1}" pos="{_f(pos)}" quat="{_quat_wxyz(rot)}" gravcomp="1">')
        parts.append(f'{ind}  <joint name="joint{k + 1}" type="hinge" axis="0 0 1" range="{lo:.6g} {hi:.6g}" '
                     f'armature="{ARMATURE[k]:g}" damping="0.5"/>')
        end = np.array([a, 0.0, d]) / 1000.0
        start = np.array([0.0, 0.0, 0.06]) if k == 0 else np.zeros(3)   # link 1 clear of the table
        if np.linalg.norm(end - start) > 1e-6:
            parts.append(f'{ind}  <geom name="link{k + 1}_geom" type="capsule" fromto="{_f(start)} {_f(end)}" '
                         f'size="{LINK_RADII_M[k]:g}" class="arm"/>')
        else:
            parts.append(f'{ind}  <geom name="link{k + 1}_geom" type="sphere" size="{LINK_RADII_M[k]:g}" class="arm"/>')
        pos, rot = end, _rx(alpha)
        close.append(f"{ind}</body>")
    ind = "  " * 8
    # the flange: DH frame 6 itself (a6 = 0, alpha6 = 0)
    parts.append(f'{ind}<body name="flange" pos="{_f(pos)}" quat="{_quat_wxyz(rot)}" gravcomp="1">')
    parts.append(f'{ind}  <geom name="flange_geom" type="cylinder" size="0.04 0.005" pos="0 0 -0.005" class="arm"/>')
    parts.append(_gripper_xml(cfg, wrist_cams, ind + "  ").rstrip("\n"))
    parts.append(f"{ind}</body>")
    return "\n".join(parts + close[::-1]) + "\n"


def cell_xml(cfg: CellConfig) -> str:
    """The whole scene: arm, gripper, table, blocks (free bodies), marks (mocap pads), cameras."""
    tz = cfg.table_top_z_m
    (x0, x1), (y0, y1) = cfg.table_x_m, cfg.table_y_m
    w = max([c.width for c in cfg.cameras.values()] + [320])
    h = max([c.height for c in cfg.cameras.values()] + [240])
    bodies = []
    for b in cfg.blocks.values():
        hx, hy, hz = (s / 2 for s in b.size_m)
        bodies.append(f'    <body name="{b.name}" pos="0 0 {tz + hz + 0.001:g}">\n'
                      f'      <freejoint name="{b.name}"/>\n'
                      f'      <geom name="{b.name}" type="box" size="{hx:g} {hy:g} {hz:g}" rgba="{_f(b.rgba)}" '
                      f'mass="{b.mass_kg:g}" friction="{b.friction:g} 0.01 0.0005" class="world"/>\n'
                      f'    </body>')
    for m in cfg.marks.values():
        # a mark is tape on the table: seen, not felt (contype 0). A block put on it rests on the
        # table. (A colliding 2 mm pad made MuJoCo 2.3.7's box-box test now and then find a 30 mm
        # "penetration" of a block resting on it and throw the block up: seen in trials.)
        hx, hy, hz = (s / 2 for s in m.size_m)
        bodies.append(f'    <body name="{m.name}" mocap="true" pos="0 0 {tz + hz:g}">\n'
                      f'      <geom name="{m.name}" type="box" size="{hx:g} {hy:g} {hz:g}" rgba="{_f(m.rgba)}" '
                      f'contype="0" conaffinity="0"/>\n'
                      f'    </body>')
    fixed_cams = "".join(_camera_xml(c, "    ") for c in cfg.cameras.values() if c.mount == "fixed")
    return f"""<mujoco model="xarm6_cell_{cfg.name}">
  <compiler angle="radian" autolimits="true"/>
  <option timestep="{cfg.timestep_s:g}" integrator="implicitfast" cone="elliptic" impratio="10"/>
  <visual>
    <global offwidth="{w}" offheight="{h}"/>
    <quality shadowsize="1024"/>
    <headlight ambient="0.35 0.35 0.35" diffuse="0.5 0.5 0.5"/>
  </visual>
  <default>
    <default class="arm">
      <geom contype="2" conaffinity="1" rgba="0.92 0.92 0.95 1" friction="1 0.01 0.0005"/>
    </default>
    <default class="finger">
      <geom contype="2" conaffinity="1" rgba="0.2 0.2 0.22 1" friction="1.5 0.02 0.001" condim="4"
            mass="0.05" solref="0.004 1"/>
      <joint damping="4" armature="0.02"/>
    </default>
    <default class="world">
      <geom contype="1" conaffinity="3" condim="4" solref="0.004 1" solimp="0.95 0.99 0.001"/>
    </default>
  </default>
  <worldbody>
    <light pos="0.4 0 1.6" dir="0 0 -1" diffuse="0.6 0.6 0.6" castshadow="false"/>
    <geom name="floor" type="plane" size="3 3 0.1" pos="0 0 {tz - 0.75:g}" rgba="0.55 0.55 0.6 1" class="world"/>
    <geom name="table" type="box" size="{(x1 - x0) / 2:g} {(y1 - y0) / 2:g} 0.02"
          pos="{(x0 + x1) / 2:g} {(y0 + y1) / 2:g} {tz - 0.02:g}" rgba="0.72 0.62 0.5 1" class="world"/>
    <geom name="base" type="cylinder" size="0.075 0.03" pos="0 0 {0.03:g}" rgba="0.9 0.9 0.92 1"
          contype="0" conaffinity="0"/>
{fixed_cams}{arm_xml(cfg)}{chr(10).join(bodies)}
  </worldbody>
  <contact>
    <exclude body1="world" body2="link1"/>
  </contact>
  <equality>
    <joint joint1="finger2" joint2="finger1" polycoef="0 1 0 0 0" solref="0.005 1"/>
  </equality>
  <actuator>
{chr(10).join(f'    <general name="joint{k + 1}" joint="joint{k + 1}" gainprm="{kp:g}" biastype="affine" biasprm="0 {-kp:g} {-kv:g}" '
              f'ctrlrange="{lo:.6g} {hi:.6g}"/>' for k, (kp, kv, (lo, hi)) in
              enumerate(zip(JOINT_KP, JOINT_KV, kin.JOINT_LIMITS)))}
    <general name="fingers" joint="finger1" gainprm="{FINGER_KP:g}" biastype="affine" biasprm="0 {-FINGER_KP:g} -20"
             ctrlrange="0 {MAX_GAP_M / 2:g}" forcerange="{-cfg.gripper_force_n:g} {cfg.gripper_force_n:g}"/>
  </actuator>
</mujoco>
"""
