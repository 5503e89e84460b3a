"""The numbers the roles' prompts state (issue 34 item 3, issue 33 item 5): each camera's field of
view and where it stands, the grip point's pixel in each image, the table's height, the gripper's
range and fingers, and the budget used and left - each from its one source (the backend's
calibration and scene facts, the marks' info, the profile, the runner), on the kinematic fake."""
from __future__ import annotations

import re

import pytest

from motormind.brains.scripted import ScriptedBrain
from motormind.episode.config import EpisodeConfig
from motormind.errors import ConfigError
from motormind.grounding.camera import eef_pose
from motormind.profile import load_profile, profile_from_dict
from motormind.record import Recorder
from motormind.roles.facts import BudgetCounter, PromptFacts, budget_text
from motormind.robots.fake import FakeRobot
from motormind.runner import EpisodeRunner

PLAN = {"subgoals": [{"id": "s1", "description": "move 20 mm forward", "success_criterion": "moved"}]}
B1 = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 20}, {"op": "done"}]}
BUDGET = re.compile(r"Budget: (\d+) of (\d+) control steps used, (\d+) left; batches (\d+) of at most (\d+)\.")


def _episode(cfg: EpisodeConfig, image_size: int = 64):
    robot = FakeRobot(image_size=image_size)
    seen = []                                   # the grip point's expected pixel at each look
    brain = ScriptedBrain({"planner": [PLAN], "executor": [B1], "verifier": [{"achieved": True, "evidence": "ok"}]})
    runner = EpisodeRunner(robot, brain, "move forward", Recorder(None), cfg, steps_fn=lambda: robot.steps,
                           success_fn=lambda: False)
    runner.observers.append(lambda label, obs: seen.append(obs))
    runner.run()
    return robot, brain, seen


def _req(brain, role):
    (r,) = [r for r in brain.requests if r.role == role]
    return r


@pytest.fixture(scope="module")
def stepped():
    return _episode(EpisodeConfig(max_steps=300, max_batches=8, monitor=False, memory=False))


def test_the_budget_in_steps_is_in_the_planner_executor_and_verifier_prompts(stepped):
    robot, brain, _ = stepped
    got = {}
    for role in ("planner", "executor", "verifier"):
        m = BUDGET.search(_req(brain, role).user)
        assert m, (role, _req(brain, role).user[-400:])
        used, total, left, batches, max_batches = map(int, m.groups())
        assert total == 300 and used + left == 300 and max_batches == 8
        got[role] = (used, batches)
    assert got["planner"] == (0, 0) and got["executor"] == (0, 1)       # the batch asked for counts
    assert got["verifier"] == (robot.steps, 1) and robot.steps > 0      # after b1: the steps it used


def test_the_budget_in_seconds_when_there_is_no_step_budget():
    """A real arm has no step budget: the wall clock's seconds used and left instead."""
    _, brain, _ = _episode(EpisodeConfig(wall_budget_s=600, max_batches=8, monitor=False, memory=False))
    for role in ("planner", "executor", "verifier"):
        user = _req(brain, role).user
        assert re.search(r"Budget: \d+ of 600 s used, \d+ s left \(wall clock\); batches \d of at most 8\.", user), role
        assert "steps" not in re.search(r"Budget: .*", user).group(0)     # the budget is in seconds, not steps


def test_the_camera_grip_pixel_table_and_gripper_numbers_match_their_sources(stepped):
    robot, brain, looks = stepped
    cal = robot.cameras()["front"]
    fh, fv = cal.fov_deg
    x, y, z = (cal.position_m[i] * 1000 for i in range(3))
    prof = robot.profile
    for role, obs in (("planner", looks[0]), ("verifier", looks[-1])):
        user = _req(brain, role).user
        depth = "it measures depth" if cal.depth else "it has no depth"
        assert f"Field of view {fh:.0f} x {fv:.0f} deg ({cal.width_px} x {cal.height_px} px); {depth}" in user
        assert f"; it stands at x {x:.0f}, y {y:.0f}, z {z:.0f} mm" in user
        u, v, d = cal.project_point(obs.eef_pos_m, eef_pose(obs))
        assert f"front ({cal.width_px} x {cal.height_px} px): the grip point at pixel ({round(u)}, {round(v)}), " \
               f"{d * 1000:.0f} mm from the camera" in user
        assert f"Table surface (what the objects stand on): z = {robot.scene_facts()['table_z_mm']:.0f} mm" in user
        assert f"the finger gap opens from {prof.gripper_min_width_mm:g} to {prof.gripper_max_width_mm:g} mm; " \
               f"the fingers are {prof.finger_length_mm:g} mm long; their tips reach {prof.tip_past_grip_mm:g} mm" in user
    assert looks[0].eef_pos_m[0] != looks[-1].eef_pos_m[0]             # the arm moved: the pixel is the look's own
    assert "(32, 32)" in _req(brain, "planner").user and "(32, 32)" not in _req(brain, "verifier").user


def test_what_never_changes_comes_first_and_is_the_same_in_every_prompt(stepped):
    """The setup block opens each role's user prompt, byte for byte the same; the look and the budget
    come after the task (a stable prefix, issue 37)."""
    _, brain, _ = stepped
    users = [_req(brain, role).user for role in ("planner", "executor", "verifier")]
    head = users[0].split("\n\nTask instruction:")[0]
    assert head.startswith("The robot and its scene") and "Field of view" in head and "Gripper:" in head
    for u in users:
        assert u.startswith(head + "\n\nTask instruction:")
        assert u.index("Task instruction:") < u.index("the grip point at pixel") < u.index("Budget:")
        assert "Budget" not in head and "the grip point at pixel" not in head


def test_the_monitor_is_told_the_gripper_and_the_table():
    robot = FakeRobot(image_size=16)
    facts = PromptFacts.of_robot(robot)
    assert "Gripper: the finger gap opens from 0 to 80 mm" in facts.robot() and "z = 0 mm" in facts.robot()
    assert "Field of view" not in facts.robot()                          # it is shown no images


def test_marks_off_still_states_the_grip_pixel():
    robot = FakeRobot(image_size=32)
    obs = robot.observe(images=True)
    facts = PromptFacts.of_robot(robot)
    facts.saw(obs, obs.images, {})                                       # no marks' info: the same projection
    assert "front (32 x 32 px): the grip point at pixel (16, 16)" in facts.look()


def test_budget_text_and_the_ros_nodes_counter():
    assert budget_text(None) == "Budget: not known."
    cfg = EpisodeConfig(max_steps=100, max_batches=5)
    t = [10.0]
    c = BudgetCounter(cfg, clock=lambda: t[0])
    c.on_report({"batch_id": "b1", "steps": 30})
    c.on_report({"batch_id": "b1", "steps": 30})                        # the same report twice counts once
    c.on_report({"batch_id": "b2", "steps": 12})
    t[0] = 25.0
    assert budget_text(c()) == "Budget: 42 of 100 control steps used, 58 left; batches 2 of at most 5."
    secs = BudgetCounter(EpisodeConfig(wall_budget_s=60, max_batches=5), clock=lambda: t[0])
    t[0] = 45.0
    assert budget_text(secs()) == "Budget: 20 of 60 s used, 40 s left (wall clock); batches 0 of at most 5."


def test_a_profile_with_a_bad_finger_length_names_the_field(tmp_path):
    import yaml
    d = yaml.safe_load(open(load_profile("fake").source))
    d["gripper"]["finger_length_mm"] = -3
    with pytest.raises(ConfigError, match="gripper.finger_length_mm"):
        profile_from_dict(d, "mine.yaml")
    d["gripper"]["finger_length_mm"] = 50
    d["gripper"]["tip_past_grip_mm"] = -1
    with pytest.raises(ConfigError, match="gripper.tip_past_grip_mm"):
        profile_from_dict(d, "mine.yaml")


def test_the_grip_point_is_stated_in_the_convention_the_points_are_read_in():
    """A Qwen3-VL model points in 0-1000 and a Qwen2.5-VL one in pixels of its resized image: the grip
    point's position is stated in the same convention, so a model can point relative to it."""
    from motormind.grounding.pixels import PixelConvention
    from motormind.roles.facts import look_line
    info = {"size": [512, 512], "grip_px": [255.5, 127.5], "grip_in_view": True, "grip_depth_m": 0.5,
            "mm_per_px": 1.0}
    assert "the grip point at pixel (256, 128), 500 mm from the camera: 1 mm per px" in look_line("a", info)
    norm = look_line("a", info, convention=PixelConvention("norm1000", 1000, 1000, "qwen3-vl"))
    assert "(0-1000 coordinates): the grip point at (500, 250)" in norm
    assert "0.51 mm per 1/1000 of the image width" in norm        # 512 px over 1000 units: 0.512 px a unit
    half = look_line("a", info, convention=PixelConvention("pixels", 256, 256, "qwen2.5-vl"))
    assert "(256 x 256 px as you see it): the grip point at pixel (128, 64)" in half and "2 mm per px" in half


def test_the_prompt_says_what_a_wait_costs_in_control_steps():
    """A real-VLM answerer found out only from its budget that waits cost 20 steps a second."""
    from motormind.profile import load_profile
    from motormind.roles.facts import speed_text
    panda = load_profile("libero_panda")
    assert f"a wait of 1 s spends {1 / panda.period_s:.0f} control steps" in speed_text(panda)
    assert f"({panda.rotate_deg_s * panda.period_s:.1f} deg per control step)" in speed_text(panda)
