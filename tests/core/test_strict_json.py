"""The strict JSON decoder every untrusted text meets: each refusal names the JSON path and the limit,
and no text makes it raise anything but CommandError."""
import json

import pytest

from motormind.errors import CommandError
from motormind.strict_json import MAX_CHARS, MAX_DEPTH, check_depth, decode_json, depth_of, finite_number, show


def refused(text: str, what: str = "batch") -> CommandError:
    with pytest.raises(CommandError) as e:
        decode_json(text, what)
    return e.value


def test_plain_json_decodes_as_the_standard_decoder_does():
    text = '{"a": [1, 2.5, -3e2, true, null, "x\\u00e9"], "b": {"c": {}}}'
    assert decode_json(text, "batch") == json.loads(text)
    assert decode_json(text.encode(), "batch") == json.loads(text)


@pytest.mark.parametrize("digits", [400, 4400, 20000])
def test_integers_beyond_the_double_range_name_the_path(digits):
    e = refused('{"commands": [{"distance_mm": 1' + "0" * digits + "}]}")
    assert e.field == "commands[0].distance_mm"
    assert f"an integer of {digits + 1} digits is outside the finite double range" in str(e)


def test_non_finite_numbers_name_the_path():
    assert str(refused('{"v": [0, 1e999]}')).startswith("v[1]: non-finite number 1e999")
    assert str(refused('{"x": -Infinity}')) == "x: non-finite number -Infinity is not valid JSON"
    assert refused("NaN").field == "batch"
    assert decode_json("1e308", "batch") == 1e308            # the largest finite magnitudes are numbers


def test_duplicate_keys_are_refused_not_last_wins():
    e = refused('{"commands": [{"op": "move", "distance_mm": 500, "distance_mm": 10}]}')
    assert str(e) == "commands[0]: duplicate key 'distance_mm' (given 2 times; a key may appear once in an object)"
    assert refused('{"a": 1, "a": 1}').field == "batch"


def test_deep_nesting_is_refused_before_the_decoder_recurses():
    e = refused('{"commands": ' + "[" * 3000 + "]" * 3000 + "}")
    assert str(e) == f"batch: nested deeper than {MAX_DEPTH} levels at line 1 column 45 (the limit of {MAX_DEPTH})"
    ok = "[" * MAX_DEPTH + "]" * MAX_DEPTH
    assert depth_of(decode_json(ok, "batch")) == MAX_DEPTH
    assert decode_json(json.dumps(["[{" * 40]), "batch") == ["[{" * 40]     # brackets inside strings
    refused("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_one_value_per_text():
    e = refused('{"commands": []} {"commands": [{"op": "done"}]}', "answer")
    assert str(e) == "answer: more text after the first JSON value, at line 1 column 18: exactly one JSON value is expected"


def test_size_and_unicode_limits():
    assert f"exceed the limit of {MAX_CHARS}" in str(refused(" " * (MAX_CHARS + 1)))
    e = refused('{"note": "\\ud800"}')
    assert e.field == "note" and "not valid Unicode" in str(e)
    assert refused('{"\\udfff": 1}').field == "batch"
    assert decode_json('"\\ud83d\\ude00"', "batch") == "\U0001F600"    # a surrogate pair is one character


def test_malformed_json_says_where():
    assert str(refused('{"commands": [')) .startswith("batch: malformed JSON at line 1 column 15")
    assert refused("", "answer").field == "answer"


def test_finite_number_rule():
    assert finite_number(3) == 3.0 and finite_number(-2.5) == -2.5
    for v in (True, False, None, "1", [1], float("nan"), float("inf"), 10 ** 400):
        assert finite_number(v) is None


def test_show_is_bounded_for_any_value():
    assert show(10 ** 5000) == "<an integer of about 5001 digits>"
    deep: list = []
    cur = deep
    for _ in range(5000):
        cur.append([])
        cur = cur[0]
    assert len(show(deep)) < 100 and len(show("x" * 10_000)) < 100
    with pytest.raises(CommandError, match=r"batch: nested deeper than 32 levels"):
        check_depth(deep, "batch")
    assert depth_of(deep) == MAX_DEPTH + 1                    # counting stops past the limit
