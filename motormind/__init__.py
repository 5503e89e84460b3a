"""MotorMind: zero-shot manipulation with one general VLM around a deterministic Controller.

The core package is pure Python + NumPy: nothing here imports rclpy, xarm, libero or mujoco at
module level. Robot backends live in ``motormind.robots`` and ``motormind.sim``.
"""

__version__ = "0.1.0"
SCHEMA_VERSION = 1
