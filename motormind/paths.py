"""Where packaged data lives: configs/ and prompts/, in a checkout or an installed package."""
from __future__ import annotations

import os
from pathlib import Path

_HERE = Path(__file__).resolve().parent


def config_dir() -> Path:
    """``configs/``: $MOTORMIND_CONFIG_DIR, the checkout's configs/, or the packaged copy."""
    env = os.environ.get("MOTORMIND_CONFIG_DIR")
    if env:
        return Path(env)
    for cand in (_HERE.parent / "configs", _HERE / "configs"):
        if (cand / "robots").is_dir():
            return cand
    raise FileNotFoundError("MotorMind configs/ not found; set MOTORMIND_CONFIG_DIR")


def prompt_dir() -> Path:
    return _HERE / "prompts"
