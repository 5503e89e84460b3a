"""What every role shares: one JSON object per answer, parsed strictly, and every answer (usable or
not) in the record with the reason it was refused."""
import json

import pytest

from motormind.brains.scripted import ScriptedBrain
from motormind.errors import ResponseError
from motormind.answers import extract_json, last_json_object
from motormind.roles.executor import Executor

OK = {"commands": [{"op": "move", "direction": "up", "distance_mm": 10}]}
OTHER = {"commands": [{"op": "move", "direction": "down", "distance_mm": 100}]}


def test_one_object_in_any_of_the_usual_wrappings():
    assert extract_json(json.dumps(OK)) == OK
    assert extract_json("Here it is.\n```json\n" + json.dumps(OK) + "\n```\nGood luck {sic}.") == OK
    assert extract_json("I would do this: " + json.dumps(OK) + " and then look.") == OK


def test_a_reasoning_trace_gives_its_last_complete_object():
    trace = "draft: " + json.dumps(OTHER) + " hmm, no {not json}. Final: " + json.dumps(OK) + " done {"
    assert json.loads(last_json_object(trace)) == OK and last_json_object("no object here") == ""


@pytest.mark.parametrize("text, why", [
    (json.dumps(OK) + "\n" + json.dumps(OTHER), "more text after the first JSON value"),
    ("first " + json.dumps(OK) + " or maybe " + json.dumps(OTHER), "more text after the first JSON value"),
    ("```json\n" + json.dumps(OK) + "\n```\n```json\n" + json.dumps(OTHER) + "\n```", "2 fenced code blocks"),
    ("```json\n" + json.dumps(OK) + "\n```\nor rather " + json.dumps(OTHER), "outside the fenced block as well"),
])
def test_an_answer_holding_two_objects_is_refused(text, why):
    with pytest.raises(ResponseError, match=why):
        extract_json(text)


@pytest.mark.parametrize("text, error", [
    ('{"commands": [{"op": "move", "direction": "up", "distance_mm": 1' + "0" * 5000 + "}]}",
     "commands[0].distance_mm: an integer of 5001 digits"),
    ('{"commands": [{"op": "move", "direction": ["up"], "distance_mm": 10}]}',
     "$.commands[0].direction: must be string, got list"),
    ('{"commands": ' + "[" * 3000 + "]" * 3000 + "}", "answer: nested deeper than 32 levels"),
    ('{"commands": [{"op": "move", "direction": "up", "distance_mm": 500, "distance_mm": 10}]}',
     "commands[0]: duplicate key 'distance_mm'"),
    ('{"schema_version": true, "commands": [{"op": "done"}]}', "$.schema_version: must be an integer, got True"),
    ('{"commands": [{"op": "done", "note": "' + "x" * 10_000 + '"}]}',
     "$.commands[0].note: 10000 characters exceed the limit of 500"),
    ('{"commands": [{"op": "wait", "seconds": 1e999}]}', "commands[0].seconds: non-finite number 1e999"),
])
def test_a_hostile_answer_fails_safe_and_is_recorded_whole(text, error):
    events = []
    brain = ScriptedBrain({"executor": [text]})
    res = Executor(brain, lambda kind, **d: events.append({"kind": kind, **d})).propose({}, {})
    assert res.value is None and error in res.error, res.error
    calls = [e for e in events if e["kind"] == "vlm_call"]
    assert len(calls) == 2 and all(c["response"] == text and not c["ok"] for c in calls)   # asked, then repaired
    assert error in calls[0]["error"] and [e["kind"] for e in events][-1] == "role_failed"
