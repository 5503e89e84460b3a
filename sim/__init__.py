"""Simulation backends (installed as ``motormind.sim``).

``motormind.sim.libero_pro``: the LIBERO-PRO (MuJoCo) robot backend, its privileged Scene and the
suite registry helpers. ``motormind.sim.scene_channel``: the evaluator-only HTTP channel that serves a
simulated scene (PRIVILEGED) to an oracle or evaluator in another process. Importing this package does not import libero or mujoco.
"""
