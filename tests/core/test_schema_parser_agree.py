"""The schema a model is shown and the parser that judges its answer agree (issue 33 item 1).

Both come from one table (``commands.OpSpec``: ``vocabulary.command_schema`` renders it, and
``commands.parse_command`` reads it). An answer that follows the Executor's response schema is
accepted by the Controller's ``validate()``, or rejected only for a reason the Executor's prompt
states: a limit of the profile, a word of the profile, the workspace box, the tilt bound, ``done``
last. Answers are generated from the schema itself, by ``from_schema`` below: a strategy for the
JSON-Schema subset the schemas use (schemas.py), so every generated answer is one a model following
the schema could write (hypothesis-jsonschema 0.23 does not run on the hypothesis this project pins)."""
from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from motormind.commands import BATCH_FIELDS
from motormind.components import Context
from motormind.errors import ResponseError
from motormind.grounding.points import check_answer, prompt_text
from motormind.controller import Controller
from motormind.profile import load_profile
from motormind.robots.fake import FakeRobot
from motormind.schemas import ROLE_SCHEMAS, validate

EXECUTOR = ROLE_SCHEMAS["executor"]


def from_schema(schema: dict, depth: int = 0) -> st.SearchStrategy:
    """Values ``schema`` allows (its subset: type, properties, required, additionalProperties, enum,
    items, minItems, maxItems, minimum, maximum, minLength, maxLength, pattern, anyOf: a command's forms,
    or an answer's titled forms). Numbers are drawn both
    from the whole double range and near the values a command uses, so limits are met and broken."""
    if "anyOf" in schema and "type" in schema:      # an answer's titled forms: what they require, of its fields
        base = {k: v for k, v in schema.items() if k != "anyOf"}
        return st.one_of([from_schema({**base, "required": f["required"]}, depth) for f in schema["anyOf"]])
    if "anyOf" in schema:
        return st.one_of([from_schema(f, depth) for f in schema["anyOf"]])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    t = schema.get("type")
    if t == "string":
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        return st.one_of(st.sampled_from(["", "down", "up", "forward", "left", "yaw", "roll", "contact", "x"]),
                         st.text(max_size=min(schema.get("maxLength", 40), 40)),
                         st.text(min_size=schema["maxLength"], max_size=schema["maxLength"])
                         if "maxLength" in schema else st.nothing()).filter(lambda t: len(t) >= schema.get("minLength", 0))
    if t in ("number", "integer"):
        lo, hi = schema.get("minimum"), schema.get("maximum")
        if t == "integer":
            return st.integers(min_value=lo, max_value=hi)
        wide = st.floats(min_value=lo, max_value=hi, allow_nan=False, allow_infinity=False)
        near = st.floats(min_value=max(-300.0, lo if lo is not None else -300.0),
                         max_value=min(300.0, hi if hi is not None else 300.0))
        ints = st.integers(min_value=int(lo) if lo is not None else -300, max_value=int(hi) if hi is not None else 300)
        return st.one_of(wide, near, ints)
    if t == "boolean":
        return st.booleans()
    if t == "array":
        return st.lists(from_schema(schema.get("items", {}), depth + 1), min_size=schema.get("minItems", 0),
                        max_size=schema.get("maxItems", 10))
    if t == "object":
        props = schema.get("properties", {})
        req = list(schema.get("required", []))
        opt = [k for k in props if k not in req]
        required = st.fixed_dictionaries({k: from_schema(props[k], depth + 1) for k in req})
        optional = st.fixed_dictionaries({}, optional={k: from_schema(props[k], depth + 1) for k in opt})
        return st.builds(lambda a, b: {**a, **b}, required, optional)
    raise AssertionError(f"the schemas use no {schema!r}: teach from_schema")

# Each reason the Controller may give for an answer the schema allows, and the words of the Executor's
# rendered prompt (its vocabulary and limits) that state the rule.
STATED = [
    (r"distance_mm: \S+ mm exceeds the per-command limit", '"max_move_mm"'),
    (r"distance_mm: \S+ mm is below the minimum move", '"min_move_mm"'),
    (r"distance_mm: must be > 0", "(d > 0)"),
    (r"angle_deg: \|\S+\| deg exceeds the per-command limit", '"max_rotate_deg"'),
    (r"angle_deg: \|\S+\| deg is below the minimum rotation", '"min_rotate_deg"'),
    (r"seconds: must be > 0", "(s > 0)"),
    (r"seconds: \S+ s exceeds the limit", '"max_wait_s"'),
    (r"direction: unknown direction", "<one of "),
    (r"axis: unknown axis", "<one of "),
    (r"vector: must not be the zero vector", "not [0, 0, 0]"),
    (r"until: this robot senses no contact", '"guarded_moves": false'),
    (r"commands: \d+ commands exceed the batch limit", '"max_batch"'),
    (r"op: 'done' must be the last command", "last command only"),
    (r"target outside the workspace box", '"workspace_mm"'),
    (r"target orientation outside the bound", '"max_tilt_deg"'),
]


def _prompt(prof) -> str:
    values = Context(prof, "task").base({}, [])
    return values["vocabulary"] + "\n" + values["limits"]


def _unstated(reasons: list[str], prompt: str) -> list[str]:
    """The reasons that no stated rule explains ("not run: ..." is the consequence of another)."""
    out = []
    for r in reasons:
        if not r or r.startswith("not run"):
            continue
        rule = next((words for pat, words in STATED if re.search(pat, r)), None)
        if rule is None or rule not in prompt:
            out.append(r)
    return out


@pytest.mark.parametrize("name", ["fake", "libero_panda", "xarm6"])
def test_every_answer_the_schema_allows_is_accepted_or_rejected_for_a_stated_reason(name):
    prof = load_profile(name)
    ctl = Controller(FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2)), prof)
    obs = ctl.robot.observe()
    prompt = _prompt(prof)
    pointing = prompt_text("executor", {})

    @settings(max_examples=150, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
    @given(from_schema(EXECUTOR))
    def check(answer):
        validate(answer, EXECUTOR)                 # the stack's own schema check lets it through, too
        if "replan" in answer:                     # a replan request stands alone, as the prompt says
            alone = not set(answer) & {"commands", "points", "regions"}
            try:
                check_answer("executor", answer)
                assert alone, answer
            except ResponseError as e:
                assert not alone and "stands alone" in str(e) and "and nothing else" in pointing
            return
        if "commands" not in answer:
            return                                 # a look: measured by the stack, never reaches the Controller
        batch, reasons, _ = ctl.validate({k: v for k, v in answer.items() if k in BATCH_FIELDS}, obs)
        assert batch is not None or reasons
        assert not _unstated(reasons, prompt), (answer, reasons)

    check()


def test_the_checker_of_stated_reasons_tells_an_unstated_one():
    """The old disagreement: a note on a move (the schema allowed it, the parser refused it)."""
    prompt = _prompt(load_profile("fake"))
    old = "commands[0]: unknown field(s) ['note'] for op 'move' (allowed: ['direction', 'distance_mm', 'op'])"
    assert _unstated([old], prompt) == [old]
    assert _unstated(["commands[0].distance_mm: 101 mm exceeds the per-command limit 100 mm"], prompt) == []


FULL = {
    "schema_version": 1, "batch_id": "b1", "subgoal_id": "s1", "source": "executor",
    "rationale": "descend onto the can, close, lift",
    "commands": [
        {"op": "move", "direction": "down", "distance_mm": 60, "until": "contact", "note": "onto the can's top"},
        {"op": "move", "vector": [0, 0, 1], "distance_mm": 5, "note": "back off a little"},
        {"op": "rotate", "axis": "yaw", "angle_deg": 10, "note": "square to the can"},
        {"op": "gripper", "action": "close", "note": "grasp"},
        {"op": "gripper", "width": 0.2, "note": "ease"},
        {"op": "wait", "seconds": 0.2, "note": "let it settle"},
        {"op": "done", "note": "the can is between the fingers"},
    ],
}


@pytest.mark.parametrize("name", ["fake", "libero_panda"])
def test_an_answer_with_every_optional_field_is_accepted(name):
    prof = load_profile(name)
    validate(FULL, EXECUTOR)
    ctl = Controller(FakeRobot(prof, start_pos_m=(0.4, 0.0, 0.2)), prof)
    batch, reasons, _ = ctl.validate(FULL, ctl.robot.observe())
    assert batch is not None, reasons
    assert [c.note for c in batch.commands] == [c["note"] for c in FULL["commands"]]
    assert batch.commands[0].guarded


def test_a_note_is_kept_and_echoed_in_the_report():
    """A note is never acted on; the report shows it with the command it rode on."""
    ctl = Controller(FakeRobot(load_profile("fake"), start_pos_m=(0.4, 0.0, 0.2)))
    rep = ctl.run({"batch_id": "b1", "commands": [
        {"op": "move", "direction": "up", "distance_mm": 10, "note": "clear the rim"},
        {"op": "wait", "seconds": 0.1, "note": "settle"}]})
    assert rep.status == "done", rep.summary()
    assert [r.command["note"] for r in rep.results] == ["clear the rim", "settle"]
    assert [r["command"]["note"] for r in rep.to_json()["results"]] == ["clear the rim", "settle"]
