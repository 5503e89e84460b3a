"""The oracle brain (PRIVILEGED): brain.py answers the roles; world.py models the scene; pickplace.py,
articulated.py and motion.py turn goals into commands."""
from .brain import APPROACH_M, RELEASE_M, OracleBrain

__all__ = ["APPROACH_M", "RELEASE_M", "OracleBrain"]
