"""The command vocabulary is defined once (``commands.VOCABULARY``) and every reader follows it
(motormind/vocabulary.py): the Executor's response schema, its prompt, docs/commands.md and the
console's queue. Each rendering is checked against the definition, so a new op that one of them
misses fails here."""
from __future__ import annotations

import shutil

import pytest

from motormind.commands import OPS, VOCABULARY, parse_batch
from motormind.profile import load_profile
from motormind.schemas import ROLE_SCHEMAS, validate
from motormind.vocabulary import DOCS_FILE, command_schema, describe, prompt_block, render_docs


def test_docs_commands_md_is_rendered_from_the_definition(tmp_path):
    copy = tmp_path / "commands.md"
    shutil.copy(DOCS_FILE, copy)
    assert render_docs(copy) is False, "docs/commands.md is stale: run python -m motormind.vocabulary"
    text = DOCS_FILE.read_text()
    for spec in VOCABULARY:
        assert f"| {spec.op} | {spec.fields_doc} | {spec.meaning} |" in text


def test_the_response_schema_has_each_ops_forms_with_exactly_the_parsers_fields():
    """One form per op and choice; each allows exactly the fields the parser allows for that op
    (OpSpec.names) and requires what it requires (a move: distance_mm and one of direction/vector)."""
    cmd = command_schema()
    forms = cmd["anyOf"]
    ops = [f["properties"]["op"]["enum"][0] for f in forms]
    assert sorted(set(ops), key=ops.index) == list(OPS) == ["move", "rotate", "gripper", "wait", "done"]
    for spec in VOCABULARY:
        mine = [f for f in forms if f["properties"]["op"]["enum"] == [spec.op]]
        assert len(mine) == max(1, len(spec.one_of))
        assert set().union(*(f["properties"] for f in mine)) == spec.names, spec.op
        assert all(f["additionalProperties"] is False for f in mine)
    move = [f for f in forms if f["properties"]["op"]["enum"] == ["move"]]
    assert sorted(tuple(sorted(f["required"])) for f in move) == [("direction", "distance_mm", "op"),
                                                                   ("distance_mm", "op", "vector")]
    assert all({"note", "until"} <= set(f["properties"]) for f in move)
    items = ROLE_SCHEMAS["executor"]["properties"]["commands"]["items"]
    assert items == cmd                                   # the Executor's schema holds this very schema


@pytest.mark.parametrize("spec", VOCABULARY, ids=lambda s: s.op)
def test_every_ops_example_is_valid_on_the_wire_and_to_the_controller(spec):
    prof = load_profile("fake")
    batch = {"schema_version": 1, "batch_id": "b1", "subgoal_id": "s1", "commands": list(spec.example)}
    validate({"schema_version": 1, "commands": list(spec.example)}, ROLE_SCHEMAS["executor"])
    parsed = parse_batch(batch, prof)
    assert len(parsed.commands) == len(spec.example)


@pytest.mark.parametrize("profile", ["fake", "xarm6", "libero_panda"])
def test_the_executor_prompt_tells_every_op_with_the_profiles_words(profile):
    """The block the roles' context fills ``${vocabulary}`` with (components.Context.base), and the
    Executor's rendered prompt holding it."""
    from motormind.components import Context
    from motormind.roles.base import render
    prof = load_profile(profile)
    values = Context(prof, "put the bowl on the plate").base({"eef_pos_mm": [400, 0, 200]}, [])
    block = values["vocabulary"]
    assert block == prompt_block(values["directions"], values["axes"], prof.rotation_frame)
    lines = block.splitlines()
    assert len(lines) == sum(len(s.prompt) for s in VOCABULARY) + 1       # + the note every command may carry
    assert '"note"' in lines[-1] and '"until": "contact"' in block
    told = [ln.split('"op": "', 1)[1].split('"', 1)[0] for ln in lines[:-1]]
    assert sorted(set(told)) == sorted(OPS)                 # every op, and nothing else
    assert f"<one of {values['directions']}>" in block and "{directions}" not in block
    system, _ = render("executor", {**values, "subgoal": "s1", "report": "", "batch_id": "b1",
                                    "schema": "{}", "history": ""})
    assert block in system


def test_the_console_reads_each_command_in_words():
    dirs = load_profile("fake").directions
    assert describe({"op": "move", "direction": "forward", "distance_mm": 12.2}) == "move 12.2 mm forward"
    assert describe({"op": "move", "vector": [0.5, 0, -1], "distance_mm": 149.2}, dirs) == "move 149.2 mm down-forward"
    assert describe({"op": "move", "vector": [0, 1, -1], "distance_mm": 30}, dirs) == "move 30 mm down-left"
    assert describe({"op": "move", "direction": "down", "distance_mm": 60, "until": "contact"}) == \
        "move 60 mm down until contact"
    assert describe({"op": "rotate", "axis": "yaw", "angle_deg": -15}) == "rotate yaw -15 deg"
    assert describe({"op": "gripper", "action": "close"}) == "gripper close"
    assert describe({"op": "gripper", "width": 0.3}) == "gripper to 0.3 of its stroke"
    assert describe({"op": "wait", "seconds": 0.5}) == "wait 0.5 s"
    assert describe({"op": "done"}) == "done (claims the subgoal)"
    assert describe({"op": "fly", "to": "moon"}) == '{"op": "fly", "to": "moon"}'   # not the vocabulary: its JSON
