"""Every configuration in configs/ loads strictly, and the same rules refuse what would fail open:
an unknown key (naming the nearest valid one), a wrong type, an inverted range, each error naming
the file and the field. Robot profiles, the xArm6 safety block, VLM configs, episode settings,
robot backends, and the ROS 2 stack file (motormind/strict_config.py)."""
from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from motormind.brains.openai_brain import load_vlm_config
from motormind.episode.config import EpisodeConfig
from motormind.errors import ConfigError
from motormind.paths import config_dir
from motormind.profile import load_profile
from motormind.registry import ROBOTS, BrainConfig, check_pairing, robot_config
from motormind.ros.settings import load_stack, stack_from_dict
from motormind.strict_config import from_mapping

CONFIGS = config_dir()


@pytest.mark.parametrize("path", sorted((CONFIGS / "robots").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_robot_profile_loads_strictly_and_names_the_backends_it_describes(path):
    p = load_profile(path)
    assert p.name == path.stem and p.backends and set(p.backends) <= set(ROBOTS)
    if "xarm6" in p.backends:
        assert p.safety is not None and p.safety.reduced_tcp_speed_mm_s and p.safety.collision_sensitivity == 3


@pytest.mark.parametrize("path", sorted((CONFIGS / "vlm").glob("*.yaml")), ids=lambda p: p.stem)
def test_every_vlm_config_loads_strictly(path):
    cfg = load_vlm_config(path)
    assert cfg.source == str(path) and cfg.model


def test_the_ros_configuration_loads_strictly_and_its_robot_fits_its_profile():
    cfg = load_stack()
    assert cfg.source.endswith("motormind.yaml") and cfg.robot.type == "libero" and cfg.profile == "libero_panda"
    cfg.check_robot()
    assert cfg.episode == EpisodeConfig()           # the file's episode settings are the defaults, not a copy


def _profile_file(tmp_path, edit) -> Path:
    doc = yaml.safe_load((CONFIGS / "robots" / "xarm6.yaml").read_text())
    edit(doc)
    p = tmp_path / "bad.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


def test_a_misspelt_safety_key_is_refused_at_load_naming_the_nearest_valid_key(tmp_path):
    """The issue's case: `collision_sensitivty` was accepted and the arm then neither set nor read
    back its collision sensitivity. Now the profile does not load, before any connect."""
    def edit(d):
        d["safety"]["collision_sensitivty"] = d["safety"].pop("collision_sensitivity")
    p = _profile_file(tmp_path, edit)
    with pytest.raises(ConfigError) as e:
        load_profile(p)
    msg = str(e.value)
    assert msg.startswith(f"{p}: safety: ") and "'collision_sensitivty'" in msg
    assert "did you mean 'collision_sensitivity'?" in msg


@pytest.mark.parametrize("key, value, says", [
    ("collision_sensitivity", 6, "safety.collision_sensitivity: must be <= 5, got 6"),
    ("collision_sensitivity", "3", "safety.collision_sensitivity: must be a whole number, got '3'"),
    ("reduced_tcp_speed_mm_s", -1.0, "safety.reduced_tcp_speed_mm_s: must be > 0, got -1.0"),
    ("tcp_load_com_mm", [0, 0], "tcp_load_com_mm: must be [x, y, z] mm"),
    ("reduced_mode", "yes", "safety.reduced_mode: must be true or false, got 'yes'"),
])
def test_the_safety_block_is_checked_at_load(tmp_path, key, value, says):
    p = _profile_file(tmp_path, lambda d: d["safety"].__setitem__(key, value))
    with pytest.raises(ConfigError) as e:
        load_profile(p)
    assert says in str(e.value) and str(e.value).startswith(str(p))


def test_reduced_mode_without_its_speed_cap_is_refused(tmp_path):
    p = _profile_file(tmp_path, lambda d: d["safety"].pop("reduced_tcp_speed_mm_s"))
    with pytest.raises(ConfigError, match="reduced_tcp_speed_mm_s: missing"):
        load_profile(p)


def test_a_profile_is_read_only():
    p = load_profile("fake")
    with pytest.raises(TypeError):
        p.workspace_mm["z"] = (-1000.0, 1000.0)             # noqa: the box cannot be widened at runtime
    with pytest.raises(ValueError):
        p.directions["up"][2] = -1.0                        # nor a direction turned around


@pytest.mark.parametrize("d, says", [
    ({"max_batchs": 3}, "unknown key(s) ['max_batchs'] (did you mean 'max_batches'?)"),
    ({"wall_budget_s": 0}, "wall_budget_s: must be > 0, got 0"),
    ({"max_batches": 2.5}, "max_batches: must be a whole number, got 2.5"),
    ({"images": "no"}, "images: must be true or false, got 'no'"),
    ({"max_steps": 0}, "max_steps: must be >= 1, got 0"),
])
def test_episode_settings_are_strict(d, says):
    with pytest.raises(ConfigError) as e:
        from_mapping(EpisodeConfig, d, "run.yaml", "episode")
    assert str(e.value).startswith("run.yaml: episode") and says in str(e.value)


def test_episode_settings_built_in_code_are_checked_too():
    with pytest.raises(ConfigError, match="max_batches: must be >= 1, got 0"):
        EpisodeConfig(max_batches=0)


@pytest.mark.parametrize("edit, says", [
    (lambda d: d.update(modle="x"), "unknown key(s) ['modle'] (did you mean 'model'?)"),
    (lambda d: d.update(temperature="hot"), "temperature: must be a finite number, got 'hot'"),
    (lambda d: d.update(retries=-1), "retries: must be an integer >= 0, got -1"),
    (lambda d: d.update(source="elsewhere"), "source: set by the loader"),
])
def test_vlm_configs_are_strict_and_name_the_file(tmp_path, edit, says):
    d = yaml.safe_load((CONFIGS / "vlm" / "openai.yaml").read_text())
    edit(d)
    p = tmp_path / "v.yaml"
    p.write_text(yaml.safe_dump(d))
    with pytest.raises(ConfigError) as e:
        load_vlm_config(p)
    assert str(e.value).startswith(str(p)) and says in str(e.value)


@pytest.mark.parametrize("d, says", [
    ({"type": "xarm7"}, "robot.type: unknown type 'xarm7' (did you mean 'xarm6'?)"),
    ({"type": "fake", "realtim": True}, "unknown key(s) ['realtim'] (did you mean 'realtime'?)"),
    ({"type": "xarm6"}, "ip: required for the xArm6"),
    ({"type": "xarm6", "ip": "arm.local"}, "is not an IPv4 literal"),
    ({"type": "xarm6", "ip": "10.0.0.2", "cameras": ["0"]}, "camera: '0' is not NAME=SOURCE"),
    ({"type": "libero", "task": -1}, "robot.task: must be >= 0, got -1"),
])
def test_robot_backend_configurations_are_strict(d, says):
    with pytest.raises(ConfigError) as e:
        robot_config(d, "stack.yaml")
    assert str(e.value).startswith("stack.yaml: ") and says in str(e.value)


@pytest.mark.parametrize("backend, profile, ok", [
    ("fake", "fake", True), ("fake", "xarm6", True), ("fake", "libero_panda", True),   # the fake runs with any
    ("libero", "libero_panda", True), ("libero", "fake", False), ("libero", "xarm6", False),
    ("xarm6", "xarm6", True), ("xarm6", "fake", False), ("xarm6", "libero_panda", False),
])
def test_a_backend_and_a_profile_that_disagree_are_refused_saying_why(backend, profile, ok):
    cfg = robot_config({"type": backend, **({"ip": "10.0.0.2"} if backend == "xarm6" else {})})
    prof = load_profile(profile)
    if ok:
        check_pairing(cfg, prof)
        return
    with pytest.raises(ConfigError) as e:
        check_pairing(cfg, prof)
    msg = str(e.value)
    assert f"backend {backend} and profile {profile} disagree" in msg and "validate with one arm's limits" in msg
    assert {"libero": "libero_panda", "xarm6": "xarm6"}[backend] in msg.rsplit("Use ", 1)[1]


def test_the_stack_file_is_strict_and_names_the_nearest_section_and_key():
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['controler'\] \(did you mean 'controller'\?\)"):
        stack_from_dict({"controler": {}}, "m.yaml")
    with pytest.raises(ConfigError, match=r"m.yaml: controller: unknown key\(s\) \['watchdog_node'\] "
                                          r"\(did you mean 'watchdog_nodes'\?\)"):
        stack_from_dict({"controller": {"watchdog_node": ["executor"]}}, "m.yaml")
    with pytest.raises(ConfigError, match=r"m.yaml: console.port: must be <= 65535, got 70000"):
        stack_from_dict({"console": {"port": 70000}}, "m.yaml")
    with pytest.raises(ConfigError, match=r"m.yaml: brain.type: unknown type 'orcale' \(did you mean 'oracle'\?\)"):
        stack_from_dict({"brain": {"type": "orcale"}}, "m.yaml")
    assert stack_from_dict({"robot": {"type": "fake"}}).robot.type == "fake"
    assert BrainConfig("openai").vlm == "openai"
