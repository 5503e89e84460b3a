"""Robot profiles load strictly: anything that would loosen a check (a non-finite box, an inverted
range, a fractional batch size, an unknown key) is refused, naming the file and the field."""
import copy
import math

import numpy as np
import pytest
import yaml

from motormind.errors import ConfigError
from motormind.geometry import axis_angle_to_mat, tilt_deg
from motormind.paths import config_dir
from motormind.profile import load_profile

SHIPPED = sorted(p.stem for p in (config_dir() / "robots").glob("*.yaml"))


def test_every_shipped_profile_loads():
    assert {"fake", "libero_panda", "xarm6"} <= set(SHIPPED)
    for name in SHIPPED:
        p = load_profile(name)
        assert 0 < p.max_tilt_deg <= 180 and p.limits.min_move_mm <= p.limits.max_move_mm
        assert all(math.isfinite(v) for box in p.workspace_mm.values() for v in box)


def _doc(name="fake") -> dict:
    return yaml.safe_load((config_dir() / "robots" / f"{name}.yaml").read_text())


def _set(doc: dict, dotted: str, value) -> dict:
    doc = copy.deepcopy(doc)
    *parents, last = dotted.split(".")
    cur = doc
    for k in parents:
        cur = cur[k]
    if value is _DELETE:
        del cur[last]
    else:
        cur[last] = value
    return doc


_DELETE = object()


@pytest.mark.parametrize("dotted, value, field, text", [
    ("workspace_mm.x", [-math.inf, math.inf], "workspace_mm.x.lo", "must be a finite number, got -inf"),
    ("workspace_mm.z", [0.0, math.nan], "workspace_mm.z.hi", "must be a finite number"),
    ("workspace_mm.y", [400.0, -400.0], "workspace_mm.y", "lo 400 must be < hi -400"),
    ("workspace_mm.y", [10.0, 10.0], "workspace_mm.y", "lo 10 must be < hi 10"),
    ("workspace_mm.x", ["100", "700"], "workspace_mm.x.lo", "must be a finite number, got '100'"),
    ("workspace_mm.x", [100.0], "workspace_mm.x", "must be [lo, hi] in mm"),
    ("limits.min_move_mm", 200.0, "limits.min_move_mm", "min_move_mm 200 must be <= max_move_mm 100"),
    ("limits.min_rotate_deg", 45.0, "limits.min_rotate_deg", "min_rotate_deg 45 must be <= max_rotate_deg 30"),
    ("limits.max_batch", 0.5, "limits.max_batch", "must be a whole number >= 1, got 0.5"),
    ("limits.max_batch", 2.5, "limits.max_batch", "must be a whole number >= 1"),
    ("limits.max_batch", True, "limits.max_batch", "must be a finite number"),
    ("limits.max_move_mm", math.inf, "limits.max_move_mm", "must be a finite number"),
    ("limits.max_wait_s", -1, "limits.max_wait_s", "must be > 0"),
    ("limits.max_mvoe_mm", 5, "limits", "unknown key(s) ['max_mvoe_mm']"),
    ("gripper.min_width_mm", 90.0, "gripper.min_width_mm", "min_width_mm 90 must be < max_width_mm 80"),
    ("gripper.min_width_mm", -5.0, "gripper.min_width_mm", "must be >= 0"),
    ("tolerances.max_steps_per_command", 0, "tolerances.max_steps_per_command", "must be > 0"),
    ("tolerances.no_progress_steps", 8, "tolerances.no_progress_mm", "missing (the no-progress stall rule needs both"),
    ("tolerances.no_progress_mm", -1.0, "tolerances.no_progress_mm", "must be > 0"),
    ("tolerances.no_progress_steps", 2.5, "tolerances.no_progress_steps", "must be a whole number >= 1"),
    ("orientation.max_tilt_deg", 270.0, "orientation.max_tilt_deg", "within 0..180"),
    ("orientation.max_tilt_deg", math.inf, "orientation.max_tilt_deg", "must be a finite number"),
    ("orientation", _DELETE, "orientation", "missing section"),
    ("orientation.max_tilt", 60.0, "orientation", "unknown key(s) ['max_tilt']"),
    ("directions", ["up", "down"], "directions", "must be a non-empty mapping"),
    ("directions.up", [0, 0, 0], "directions.up", "must be a non-zero 3-vector"),
    ("directions.up", [0, 0, math.inf], "directions.up", "must be a non-zero 3-vector"),
    ("rotation.axes", {}, "rotation.axes", "must be a non-empty mapping"),
    ("limits", "fast", "limits", "must be a mapping, got str"),
    ("workspace", {"x": [0, 1]}, "profile", "unknown section(s) ['workspace']"),
])
def test_a_profile_that_would_fail_open_does_not_load(tmp_path, dotted, value, field, text):
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(_set(_doc(), dotted, value)))
    with pytest.raises(ConfigError) as e:
        load_profile(p)
    assert str(e.value).startswith(f"{p}: {field}: ") and text in str(e.value)


def test_a_profile_that_is_not_yaml_names_the_file(tmp_path):
    p = tmp_path / "broken.yaml"
    p.write_text("limits: {max_move_mm: [1,\n")
    with pytest.raises(ConfigError, match=f"{p}: not valid YAML"):
        load_profile(p)


def test_whole_number_floats_are_counts(tmp_path):
    p = tmp_path / "ok.yaml"
    p.write_text(yaml.safe_dump(_set(_doc(), "limits.max_batch", 4.0)))
    assert load_profile(p).limits.max_batch == 4


def test_tilt_is_measured_from_gripper_down_and_ignores_yaw():
    down = np.diag([1.0, -1.0, -1.0])
    assert tilt_deg(down) == pytest.approx(0.0)
    assert tilt_deg(axis_angle_to_mat([0, 0, 1], math.radians(170)) @ down) == pytest.approx(0.0, abs=1e-6)
    assert tilt_deg(axis_angle_to_mat([1, 0, 0], math.radians(50)) @ down) == pytest.approx(50.0)
    assert tilt_deg(axis_angle_to_mat([0, 1, 0], math.radians(180)) @ down) == pytest.approx(180.0)
    prof = load_profile("fake")
    tilted = axis_angle_to_mat([1, 0, 0], math.radians(70)) @ down
    assert prof.orientation_issue(tilted) == "tilt 70.0 deg from gripper-down > max_tilt_deg 60"
    back = axis_angle_to_mat([1, 0, 0], math.radians(-5)) @ tilted        # toward gripper-down: allowed
    assert prof.orientation_issue(back, tilted) == ""
    assert prof.orientation_issue(axis_angle_to_mat([1, 0, 0], math.radians(5)) @ tilted, tilted) != ""


def test_a_non_finite_position_is_outside_every_box():
    assert load_profile("fake").in_workspace([math.nan, 0.0, 100.0]) == ["x=nan is not a finite position"]


def test_the_xarm6_profile_carries_its_tcp_offset_and_payload():
    """The fence and the workspace box are about the TCP: the profile says where it is (the gripper's
    grip point, 172 mm past the flange) and what the payload weighs; the backend writes both."""
    s = load_profile("xarm6").safety
    assert s.tcp_offset_mm == (0.0, 0.0, 172.0) and s.tcp_offset_rpy_deg == (0.0, 0.0, 90.0)
    assert s.tcp_offset == (0.0, 0.0, 172.0, 0.0, 0.0, 90.0)
    assert s.tcp_load_kg == pytest.approx(0.82) and s.tcp_load_com_mm == (0.0, 0.0, 48.0)


@pytest.mark.parametrize("key, value, text", [
    ("tcp_offset_mm", _DELETE, "safety.tcp_offset_mm: missing (where the tool centre point is"),
    ("tcp_offset_mm", [0, 172], "safety.tcp_offset_mm: must be [x, y, z] mm, got [0.0, 172.0]"),
    ("tcp_offset_mm", [0, 0, 900], "safety.tcp_offset_mm: each of x, y, z must be within +-500 mm"),
    ("tcp_offset_mm", [0, 0, math.inf], "safety.tcp_offset_mm[2]: must be a finite number, got inf"),
    ("tcp_offset_mm", "172", "safety.tcp_offset_mm: must be"),
    ("tcp_offset_rpy_deg", [0, 0, 270], "safety.tcp_offset_rpy_deg: must be [roll, pitch, yaw] deg, each within +-180"),
    ("tcp_ofset_mm", [0, 0, 172], "unknown key(s) ['tcp_ofset_mm'] (did you mean 'tcp_offset_mm'?)"),
])
def test_a_safety_block_without_a_sound_tcp_offset_does_not_load(tmp_path, key, value, text):
    """Without the TCP offset the arm's fence would sit at the flange, the fingertips ~170 mm past it."""
    doc = _set(_doc("xarm6"), "safety.tcp_offset_mm", _DELETE) if key == "tcp_ofset_mm" else _doc("xarm6")
    p = tmp_path / "arm.yaml"
    p.write_text(yaml.safe_dump(_set(doc, f"safety.{key}", value)))
    with pytest.raises(ConfigError) as e:
        load_profile(p)
    assert str(e.value).startswith(f"{p}: ") and text in str(e.value), str(e.value)


@pytest.mark.parametrize("key, value, text", [
    ("radius_mm", _DELETE, "reach.radius_mm: missing (mm from the shoulder)"),
    ("radius_mm", 0, "reach.radius_mm: must be > 0, got 0"),
    ("radius_mm", math.inf, "reach.radius_mm: must be a finite number, got inf"),
    ("flange_above_grip_mm", -5, "reach.flange_above_grip_mm: must be >= 0, got -5"),
    ("shoulder_mm", [0, 333], "reach.shoulder_mm: must be [x, y, z] mm, got [0.0, 333.0]"),
    ("shoulder_mm", [0, 0, "high"], "reach.shoulder_mm[2]: must be a finite number, got 'high'"),
    ("radius", 765, "reach: unknown key(s) ['radius'] (did you mean 'radius_mm'?)"),
])
def test_a_reach_that_is_not_sound_does_not_load(tmp_path, key, value, text):
    """The arm's comfortable reach (the oracle weighs grasps by it): every number named when wrong."""
    p = tmp_path / "arm.yaml"
    p.write_text(yaml.safe_dump(_set(_doc("libero_panda"), f"reach.{key}", value)))
    with pytest.raises(ConfigError) as e:
        load_profile(p)
    assert str(e.value).startswith(f"{p}: ") and text in str(e.value), str(e.value)


def test_the_arm_profiles_state_their_reach_and_the_fake_none():
    panda, xarm = load_profile("libero_panda").reach, load_profile("xarm6").reach
    assert panda.shoulder_mm == (0.0, 0.0, 333.0) and panda.radius_mm == 765.0 and panda.flange_above_grip_mm == 210.0
    assert xarm.shoulder_mm == (0.0, 0.0, 267.0)
    assert xarm.flange_above_grip_mm == load_profile("xarm6").safety.tcp_offset_mm[2]       # the TCP past the flange
    assert load_profile("fake").reach is None
