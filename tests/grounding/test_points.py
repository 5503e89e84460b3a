"""Pointing, looks and regions (issue 34 items 4-5), on the fake robot's synthetic calibrated camera:
a point resolves from depth to a base-frame position and an offset from the grip point in direction
words; each model family's pixel convention round-trips; a point outside the image, on nothing or on a
camera without depth is refused with the reason; a look costs no control step and no batch and the
next prompt carries the measurement; a region shows a crop in the next prompt; a malformed point is a
repair round; over a transport without depth every point is refused with that reason."""
from __future__ import annotations

import numpy as np
import pytest

from motormind.brains.openai_brain import VLMConfig
from motormind.brains.scripted import ScriptedBrain
from motormind.components import Context, ExecutorComponent
from motormind.messages import PlanDecision
from motormind.episode.config import EpisodeConfig
from motormind.grounding.pixels import PixelConvention
from motormind.grounding.points import (FIELDS, Frame, Grounding, Point, convention_of, offset_words, resolve)
from motormind.profile import load_profile
from motormind.record import Recorder
from motormind.robots.fake import FakeRobot
from motormind.roles.executor import Executor
from motormind.messages import Subgoal
from motormind.runner import EpisodeRunner
from motormind.schemas import ROLE_SCHEMAS, validate

SIZE = 96
TABLE_POINT = np.array([0.5, 0.1, 0.0])         # on the fake's table (z = 0), in view of its camera
PLAN = {"schema_version": 1, "subgoals": [{"id": "s1", "description": "move 20 mm forward",
                                           "success_criterion": "moved"}]}
B1 = {"commands": [{"op": "move", "direction": "forward", "distance_mm": 20}, {"op": "done"}]}


def _frame(robot: FakeRobot, label: str = "b1 s1") -> Frame:
    return Frame.of(label, robot.observe(images=True, depth=True), robot.cameras())


def _pixel(robot: FakeRobot, p=TABLE_POINT) -> tuple[float, float]:
    u, v, _ = robot.cameras()["front"].project_point(p)
    return u, v


def test_a_point_at_a_known_pixel_resolves_to_its_base_frame_position_and_offset():
    robot = FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2))
    u, v = _pixel(robot)
    conv = PixelConvention("pixels", SIZE, SIZE)
    m = resolve(Point("front", u, v, "cup"), _frame(robot), conv, "executor")
    assert m.ok, m.reason
    assert np.allclose(m.pos_m, TABLE_POINT, atol=1e-6)
    assert m.depth_m == pytest.approx(1.0)
    text = m.text(directions=robot.profile.directions)
    assert "x 500 y 100 z 0 mm" in text
    assert "from the grip point 100 forward, 100 left, 200 down" in text
    assert text.startswith('"cup" (front ')
    # the offset is from the grip point now, when the prompt is rendered after a move
    assert "0 forward, 100 left, 200 down" in m.text((0.5, 0.0, 0.2), robot.profile.directions)


def test_offsets_read_in_the_profiles_words():
    words = load_profile("libero_panda").directions
    assert offset_words([147.2, 266.0, -216.4], words) == "147 forward, 266 left, 216 down"
    assert offset_words([-5, -6, 7], words) == "5 back, 6 right, 7 up"
    assert offset_words([1, 2, 3], {"north": [0.7071, 0.7071, 0]}) == "[1, 2, 3] mm (base frame)"


@pytest.mark.parametrize("rules,size", [("qwen2.5-vl", None), ("qwen2.5-vl", 200), ("qwen3-vl", None),
                                        ("generic", None), ("generic", 300), ("openai", None), ("gemma3", None)])
def test_each_model_familys_pixel_convention_round_trips(rules, size):
    """A pixel of the frame, written in the family's convention (what its model would answer), maps back
    to the same pixel and resolves to the same table point."""
    robot = FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2))
    brain = ScriptedBrain({})
    brain.cfg = VLMConfig(image_rules=rules, image_size=size)
    conv = convention_of(brain, "executor", SIZE, SIZE)
    if rules == "qwen3-vl":
        assert conv.kind == "norm1000"
    u, v = _pixel(robot)
    x, y = conv.from_image(u, v, SIZE, SIZE)
    assert conv.to_image(x, y, SIZE, SIZE) == pytest.approx((u, v), abs=1e-9)
    m = resolve(Point("front", x, y, "cup"), _frame(robot), conv)
    assert m.ok, m.reason
    assert np.allclose(m.pos_m, TABLE_POINT, atol=1e-6)
    # a role's own image_size is its convention's (the openai brain sizes that role's images by it)
    brain.cfg = VLMConfig(image_rules="qwen2.5-vl", roles={"executor": {"image_size": 280}})
    assert convention_of(brain, "executor", SIZE, SIZE).width == 280
    assert convention_of(brain, "planner", SIZE, SIZE).width != 280


def test_points_outside_the_image_on_nothing_or_without_depth_are_refused_with_the_reason():
    robot = FakeRobot(image_size=SIZE)
    conv = PixelConvention("pixels", SIZE, SIZE)
    f = _frame(robot)
    out = resolve(Point("front", SIZE + 3, 10, "far"), f, conv)
    assert not out.ok and out.reason.startswith("outside the image") and f"x 0..{SIZE - 1}" in out.reason
    norm = resolve(Point("front", 1200, 10, "far"), f, PixelConvention("norm1000", 1000, 1000))
    assert not norm.ok and "x 0..1000" in norm.reason
    f.depth["front"] = np.full((SIZE, SIZE), np.nan, dtype=np.float32)      # background: no reading
    nothing = resolve(Point("front", 40, 40, "sky"), f, conv)
    assert not nothing.ok and nothing.reason.startswith("on nothing")
    unknown = resolve(Point("wrist", 40, 40, "x"), f, conv)
    assert not unknown.ok and "no camera \"wrist\"" in unknown.reason and "front" in unknown.reason
    blind = FakeRobot(image_size=SIZE, depth=False)
    no_depth = resolve(Point("front", 40, 40, "cup"), _frame(blind), conv)
    assert not no_depth.ok
    assert no_depth.reason == "camera front has no depth: the fake's camera was built without depth (depth=False)"
    assert "refused: camera front has no depth" in no_depth.text()


def _episode(executor_answers, cfg=None, robot=None, brain_cfg=None):
    robot = robot or FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2))
    brain = ScriptedBrain({"planner": [PLAN], "executor": list(executor_answers),
                           "verifier": [{"achieved": True, "evidence": "ok"}]})
    if brain_cfg is not None:
        brain.cfg = brain_cfg
    rec = Recorder(None)
    rec.events = []
    rec.listeners.append(rec.events.append)
    cfg = cfg or EpisodeConfig(max_batches=3, monitor=False, memory=False)
    runner = EpisodeRunner(robot, brain, "test task", rec, cfg, success_fn=lambda: robot.pos[0] > 0.418)
    result = runner.run()
    return robot, brain, rec, runner, result


def _kinds(rec, kind):
    return [e for e in rec.events if e["kind"] == kind]


def test_a_look_costs_no_control_step_and_no_batch_and_the_next_prompt_carries_the_measurement():
    u, v = _pixel(FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2)))
    look = {"points": [{"camera": "front", "pixel": [u, v], "label": "cup"}]}
    plain = _episode([B1])
    robot, brain, rec, runner, result = _episode([look, B1])
    assert result.outcome == plain[4].outcome == "success"
    assert robot.steps == plain[0].steps                      # the look moved nothing
    assert runner.book.batches == plain[3].book.batches == 1  # and proposed no batch
    ex = [r for r in brain.requests if r.role == "executor"]
    assert len(ex) == 2
    assert "Your measurements and regions:\nnone yet" in ex[0].user
    assert '"cup" (front ' in ex[1].user and "x 500 y 100 z 0 mm; from the grip point 100 forward, 100 left, " \
                                            "200 down" in ex[1].user
    assert "Looks left before this batch: 2 of 3" in ex[1].user and "3 of 3" in ex[0].user
    assert ex[0].system == ex[1].system           # the count is in the user text: the system text caches
    [ev] = _kinds(rec, "look")
    assert ev["batch_id"] == "b1" and ev["points"] == ev["resolved"] == 1
    [pts] = _kinds(rec, "points")
    assert pts["role"] == "executor" and pts["points"][0]["pos_mm"] == [500.0, 100.0, 0.0]
    assert [e["batch"]["batch_id"] for e in _kinds(rec, "batch")] == ["b1"]


def test_the_prompt_states_the_pixel_convention_of_the_model_family():
    robot, brain, rec, runner, result = _episode([B1], brain_cfg=VLMConfig(image_rules="qwen3-vl"))
    ex = [r for r in brain.requests if r.role == "executor"][0]
    assert "front: coordinates normalised to 0-1000" in ex.system
    robot, brain, rec, runner, result = _episode([B1])
    ex = [r for r in brain.requests if r.role == "executor"][0]
    assert f"front: pixels of the {SIZE} x {SIZE} image as you see it" in ex.system
    assert '{"replan": {"reason": "why"}}' in ex.system


def test_looks_past_the_limit_are_refused_as_an_unusable_answer_and_recorded():
    look = {"points": [{"camera": "front", "pixel": [10, 10], "label": "cup"}]}
    cfg = EpisodeConfig(max_batches=4, monitor=False, memory=False, max_looks=1)
    robot, brain, rec, runner, result = _episode([look, look, B1], cfg)
    assert result.outcome == "success"
    [refused] = _kinds(rec, "look_refused")
    assert refused["max_looks"] == 1 and "look limit: 1 look(s) before batch b1" in refused["reason"]
    assert len(_kinds(rec, "look")) == 1
    assert runner.book.batches == 2                 # the refused look was an unusable answer (b1); b2 ran
    assert [e["batch"]["batch_id"] for e in _kinds(rec, "batch")] == ["b2"]


def test_a_region_request_shows_a_crop_in_the_next_prompt():
    robot = FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2))
    u, v = _pixel(robot, robot.pos)                  # the tool's dot
    box = [u - 8, v - 6, u + 8, v + 6]
    look = {"regions": [{"camera": "front", "box": box, "label": "the tool"}]}
    robot, brain, rec, runner, result = _episode([look, B1], robot=robot)
    ex = [r for r in brain.requests if r.role == "executor"]
    assert "front region 1" not in ex[0].images and "front region 1" in ex[1].images
    crop = ex[1].images["front region 1"]
    assert crop.shape[:2] == (13, 17)                # the box's pixels, cut from the frame (the fake renders no larger)
    assert np.any((crop[:, :, 0] == 255) & (crop[:, :, 1] == 200))     # the dot is in it
    assert 'region "the tool" of front, box [' in ex[1].user and "shown as image 'front region 1'" in ex[1].user
    assert runner.grounding.take_crops() == {}      # shown once
    assert rec.frames[-1][0] == "b1 s1: front region 1"             # the crop is in the record's frames
    [ev] = _kinds(rec, "region")
    assert ev["ok"] and ev["size"] == [17, 13] and ev["name"] == "front region 1"


def test_a_prompt_asked_ahead_shows_the_crops_and_leaves_them_for_the_next():
    """An Executor call asked ahead of its time (episode/overlap.py) may be dropped: it shows the regions asked
    for and the refused points (``peek``), and the next prompt shows them again; a prompt in its turn uses them up."""
    robot = FakeRobot(image_size=SIZE, start_pos_m=(0.4, 0.0, 0.2))
    u, v = _pixel(robot, robot.pos)
    look = {"regions": [{"camera": "front", "box": [u - 8, v - 6, u + 8, v + 6], "label": "the tool"}],
            "points": [{"camera": "front", "pixel": [-5, 10], "label": "off the image"}]}
    robot, brain, rec, runner, result = _episode([look, B1], robot=robot)
    g = runner.grounding
    g.see("again", robot.observe(images=True, depth=True), {})
    g.take("executor", look)                          # asked again: a crop and a refusal wait for the next prompt
    ahead, crops = g.prompt("executor", None, peek=True)
    assert "front region" in " ".join(crops) and "off the image" in ahead["measurements"]
    now, crops2 = g.prompt("executor", None)
    assert crops2.keys() == crops.keys() and "off the image" in now["measurements"]
    assert g.take_crops() == {} and "off the image" not in g.prompt("executor", None)[0]["measurements"]


def test_a_region_is_cut_from_a_larger_render_when_the_robot_can_render_one():
    class Renders(FakeRobot):
        def render(self, camera, size):
            img = np.zeros((size, size, 3), dtype=np.uint8)
            img[:, :, 0] = np.arange(size)[None, :] * 255 // (size - 1)
            return img
    robot = Renders(image_size=SIZE)
    g = Grounding(robot.profile.directions, render=robot.render)
    g.see("b1 s1", robot.observe(images=True, depth=True), robot.cameras())
    ms, [shot] = g.take("executor", {"regions": [{"camera": "front", "box": [10, 10, 33, 33]}]})
    assert shot.rendered_px > SIZE and shot.image.shape[0] > 24 and shot.image.shape[0] == shot.image.shape[1]
    assert "cut from a" in shot.text()
    _, [bad] = g.take("executor", {"regions": [{"camera": "front", "box": [30, 10, 20, 33]}]})
    assert bad.image is None and bad.reason.startswith("an empty box")


def test_a_malformed_point_is_a_repair_round():
    bad = {"points": [{"camera": "front", "pixel": [10], "label": "cup"}]}
    robot, brain, rec, runner, result = _episode([bad, B1])
    [rep] = _kinds(rec, "repair_request")
    assert rep["role"] == "executor" and "$.points[0].pixel: needs at least 2 item(s)" in rep["error"]
    assert result.outcome == "success" and not _kinds(rec, "look")


def test_the_answer_fields_are_one_definition_in_every_schema():
    for role in ("executor", "verifier", "planner"):
        props = ROLE_SCHEMAS[role]["properties"]
        assert props["points"] is FIELDS["points"] and props["regions"] is FIELDS["regions"]
    assert ROLE_SCHEMAS["executor"]["properties"]["replan"] is FIELDS["replan"]
    assert "replan" not in ROLE_SCHEMAS["planner"]["properties"]
    validate({"replan": {"reason": "the handle is out of reach"}}, ROLE_SCHEMAS["verifier"])


def test_over_a_transport_without_depth_every_point_is_refused_with_that_reason():
    """A transport that carries no depth (Grounding's ``unavailable``): a look is answered (no step, no
    batch), its points refused with the reason."""
    why = "this transport carries no depth images or camera calibrations"
    prof = load_profile("fake")
    brain = ScriptedBrain({"executor": [{"points": [{"camera": "front", "pixel": [3, 4], "label": "cup"}]}, B1]})
    ctx = Context(prof, "task", grounding=Grounding(prof.directions, unavailable=why, max_looks=2))
    ex = ExecutorComponent(Executor(brain), EpisodeConfig(max_looks=2), ctx)
    ex.on_plan(PlanDecision("plan", [Subgoal("s1", "d", "c")], plan_id=1))
    state = FakeRobot().observe().state_dict()
    ctx.grounding.see("b1 s1", FakeRobot(image_size=SIZE).observe(images=True), {})
    prop = ex.propose(state, {}, "b1")
    assert prop.batch is not None and prop.batch["commands"] == B1["commands"]
    second = brain.requests[1]
    assert f'"cup" (front 3, 4; at b1 s1): refused: {why}' in second.user
    assert "Pointing and regions are not available here" in second.system


def test_an_episode_keeps_its_measurements_past_a_dozen_points():
    """A real-VLM trial lost the Planner's five points (a burner's centre) after eight more from the
    Executor: the prompt keeps the newest MAX_FACTS, one per label."""
    robot = FakeRobot(image_size=SIZE)
    g = Grounding(robot.profile.directions)
    g.see("b1 s1", robot.observe(images=True, depth=True), robot.cameras())
    g.take("planner", {"points": [{"camera": "front", "pixel": [5, 5], "label": "burner centre"}]})
    for k in range(12):
        g.take("executor", {"points": [{"camera": "front", "pixel": [6 + k, 9], "label": f"edge {k}"}]})
    text = g.values("executor")["measurements"]
    assert '"burner centre"' in text and '"edge 11"' in text
