"""Robot backends (installed as ``motormind.robots``): the kinematic fake, the xArm6 SDK adapter."""
