"""The xArm6 rehearsal cell: the wire-level controller emulator over a MuJoCo scene.

    motormind emulate xarm6 --scene placement --port 5020        # a terminal: the cell
    motormind trials xarm6 --scene placement -n 40 --interference both

config.py    scene configs (configs/cells/NAME.yaml): table, blocks, marks, cameras + calibration
model.py     the MJCF: the xArm6 from its DH parameters, the gripper, the scene
physics.py   the MuJoCo simulation the emulator steps
emulator.py  CellEmulator: the controller emulator whose arm, gripper and reports are physical
cameras.py   the scene's cameras rendered and served as MJPEG streams (network cameras)
scene.py     the PRIVILEGED scene (goal, predicates, the oracle's world, the outside hand)

Importing this package imports no simulator: mujoco comes in with emulator.py's CellEmulator.
The placement trials that run on it are an evaluation driver: motormind/evaluate/trials.py.
docs/xarm-cell.md describes it all.
"""
