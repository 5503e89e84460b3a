import os

import pytest

os.environ.setdefault("MUJOCO_GL", "osmesa")


@pytest.fixture
def fake_profile():
    from motormind.profile import load_profile
    return load_profile("fake")


@pytest.fixture
def fake_robot(fake_profile):
    from motormind.robots.fake import FakeRobot
    return FakeRobot(fake_profile)
