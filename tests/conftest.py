"""Shared fixtures. The tests are arranged by layer, as the code is:

    core/     commands, profile, Controller, the episode machine, records (motormind/*.py, motormind/episode/)
    roles/    the roles and their prompts (motormind/roles/, motormind/prompts/)
    brains/   brains and serve-brain (motormind/brains/, motormind/serve/); the oracle's tests belong here
    robots/   robot backends and their contract (robots/: fake, replay, xArm6 on its emulator)
    sim/      the simulation (sim/: LIBERO-PRO, the xArm6 emulator; `-m sim` for the slow ones)
    ros/      the ROS 2 nodes, the launcher, the launch files (motormind/ros/, launch/)
    console/  the operator console (motormind/console/, in-process and over ROS 2)
    tools/    the command line, the evaluation, the diagnostic, packaging
    test_architecture.py   the layering, the references and the configurations of the whole tree

The helpers beside this file (console_client, fake_episode, rostest_util, waiting) are imported
by name: this directory is put on sys.path here.
"""
import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")
sys.path.insert(0, str(Path(__file__).resolve().parent))      # the shared helpers


@pytest.fixture
def fake_profile():
    from motormind.profile import load_profile
    return load_profile("fake")


@pytest.fixture
def fake_robot(fake_profile):
    from motormind.robots.fake import FakeRobot
    return FakeRobot(fake_profile)
