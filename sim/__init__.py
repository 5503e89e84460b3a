"""Simulation backends (installed as ``motormind.sim``).

``motormind.sim.libero_pro``: the LIBERO-PRO (MuJoCo) robot backend, its privileged Scene and the
suite registry helpers. Importing this package does not import libero or mujoco.
"""
