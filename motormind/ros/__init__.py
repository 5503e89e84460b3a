"""MotorMind over ROS 2: thin rclpy node wrappers over the core components (docs/ros2.md).

Only the node modules (``base``, ``controller_node``, ``role_nodes``, ``recorder_node``) import
rclpy; ``graph`` (topics, QoS, nodes, parameters), ``launcher`` and ``cli`` do not, so
``motormind launch`` is listed, and says what is missing, where the ROS 2 extra is not installed.
"""
