"""Fault injection in serve-brain, through the real openai client, on the kinematic fake arm.

For every fault: the record names it, no answer that failed validation ever moves the robot (the
role's schema check first, the Controller's batch validation next), retries and the repair request
show in the record, and the episode recovers or ends with a clear reason."""
import json
import math

import pytest

from fake_episode import check_invariants, kinds, run_fake

from motormind.errors import CommandError, ConfigError, ResponseError
from motormind.answers import extract_json
from motormind.schemas import ROLE_SCHEMAS, validate
from motormind.serve.faults import FAULTS, INJECTION, FaultPlan

BATCH = {"schema_version": 1, "rationale": "r", "commands": [
    {"op": "move", "direction": "forward", "distance_mm": 20.0}, {"op": "gripper", "action": "close"}, {"op": "done"}]}
ANSWERS = {"executor": BATCH, "planner": {"subgoals": [{"id": "s1", "description": "d", "success_criterion": "c"}]},
           "verifier": {"achieved": True, "evidence": "e"}, "monitor": {"cancel": False, "reason": "nominal"},
           "memory": {"summary": "s", "facts": []}}


# -- the plan itself ------------------------------------------------------------------------------
def test_plan_parsing_and_validation():
    p = FaultPlan.from_dict({"malformed_json": 0.2, "http_429": 0.1, "seed": 3, "slow_s": 2, "roles": "executor"})
    assert p.rates == {"malformed_json": 0.2, "http_429": 0.1} and p.seed == 3 and p.roles == ["executor"]
    assert FaultPlan.from_cli(["unknown_op=0.5", "slow"]).rates == {"unknown_op": 0.5, "slow": 1.0}
    with pytest.raises(ConfigError, match="faults.teleport: unknown fault"):
        FaultPlan.from_dict({"teleport": 0.2})
    with pytest.raises(ConfigError, match="within 0..1"):
        FaultPlan.from_dict({"http_500": 1.5})
    with pytest.raises(ConfigError, match="unknown role"):
        FaultPlan.from_dict({"http_500": 0.5, "roles": ["pilot"]})


def test_choice_is_reproducible_per_role_and_respects_rates_scope_and_limit():
    def draws(plan, role, n=400):
        return [plan.choose(role)[0] for _ in range(n)]
    a = draws(FaultPlan(rates={"malformed_json": 0.2, "unknown_op": 0.2}, seed=7), "executor")
    b = draws(FaultPlan(rates={"malformed_json": 0.2, "unknown_op": 0.2}, seed=7), "executor")
    assert a == b
    frac = a.count("malformed_json") / len(a)
    assert 0.12 < frac < 0.28                       # about the configured rate
    # executor-only faults never hit other roles; a role filter restricts everything
    assert set(draws(FaultPlan(rates={"unknown_op": 1.0}), "planner", 20)) == {None}
    assert set(draws(FaultPlan(rates={"http_500": 1.0}, roles=["monitor"]), "executor", 20)) == {None}
    lim = draws(FaultPlan(rates={"http_500": 1.0}, limit=2), "planner", 10)
    assert lim[:2] == ["http_500", "http_500"] and set(lim[2:]) == {None}


def _schema_or_parse_error(role, text):
    try:
        validate(extract_json(text), ROLE_SCHEMAS[role])
    except (ResponseError, CommandError) as e:
        return str(e)
    return ""


@pytest.mark.parametrize("role", list(ANSWERS))
def test_text_corruptions_do_what_they_say(role, fake_profile):
    from motormind.commands import check_batch
    text = json.dumps(ANSWERS[role])
    p = FaultPlan(rates={}, seed=0)
    for k in range(4):                               # both variants of malformed_json
        bad, what = p.corrupt("malformed_json", role, text, k)
        assert _schema_or_parse_error(role, bad), what
    bad, what = p.corrupt("missing_field", role, text)
    assert "missing (required)" in _schema_or_parse_error(role, bad)
    bad, what = p.corrupt("injection", role, text)
    assert "IGNORE THE LIMITS" in bad
    if role == "executor":
        assert not _schema_or_parse_error(role, bad)           # valid JSON: the Controller must refuse it
        _, _, issues = check_batch(json.loads(bad), fake_profile)
        assert any("exceeds the per-command limit" in str(i) for i in issues)
    else:
        assert not _schema_or_parse_error(role, bad)           # just text: nothing acts on it
    if role != "executor":
        return
    kinds = set()
    for k in range(30):
        bad, what = p.corrupt("bad_magnitude", role, text, k)
        err = _schema_or_parse_error(role, bad)
        if err:                                       # NaN / 1e999: refused by the parse or the schema
            assert "non-finite" in err or "finite number" in err
            kinds.add("non-finite")
        else:                                         # far over the limit: refused by the Controller
            _, _, issues = check_batch(json.loads(bad), fake_profile)
            assert any("exceeds" in str(i) for i in issues)
            kinds.add("out-of-range")
    assert kinds == {"non-finite", "out-of-range"}
    bad, _ = p.corrupt("unknown_op", role, text)
    assert "one of [" in _schema_or_parse_error(role, bad)   # the op is named among the allowed ones
    bad, _ = p.corrupt("premature_done", role, text)
    assert json.loads(bad)["commands"] == [{"op": "done", "note": "subgoal achieved"}]


# -- whole episodes on the fake, through the server and the openai client -------------------------
HOSTILE_BACKEND = [
    '{"commands": ' + "[" * 3000 + "]" * 3000 + "}",
    '{"commands": 7, "rationale": ["r"]}',
    '{"commands": [{"op": "move", "distance_mm": 1' + "0" * 5000 + '}]}',
    '{"subgoals": {"id": 1}, "evidence": 5, "reason": [], "summary": {}, "facts": "f"}',
    '{"commands": [], "commands": []}',
    '[1, 2]',
]


@pytest.mark.parametrize("role", list(ANSWERS))
@pytest.mark.parametrize("text", HOSTILE_BACKEND, ids=range(len(HOSTILE_BACKEND)))
def test_a_backend_answer_of_any_shape_is_corrupted_or_left_never_a_crash(role, text, fake_profile):
    from motormind.commands import check_batch
    p = FaultPlan(rates={}, seed=0)
    for fault in ("malformed_json", "missing_field", "injection") + (
            ("bad_magnitude", "unknown_op", "premature_done") if role == "executor" else ()):
        out, what = p.corrupt(fault, role, text)
        assert isinstance(out, str) and what
        if role == "executor" and fault != "premature_done" and not _schema_or_parse_error(role, out):
            assert check_batch(extract_json(out), fake_profile)[2], (fault, out)   # the Controller refuses it


@pytest.mark.parametrize("fault", FAULTS)
def test_each_fault_is_named_contained_and_recovered_from(tmp_path, fault):
    # two injections each; the text faults spare the planner (a planner failing safe twice at the
    # start ends the episode at once: test_a_planner_failing_safe_ends_the_episode covers that)
    roles = None if fault in ("slow", "http_429", "http_500") else ["executor", "verifier", "monitor", "memory"]
    res, robot, ev, srv, tot = run_fake(tmp_path, {fault: 1.0, "limit": 2, "slow_s": 1.0, "seed": 0,
                                                   "roles": roles}, timeout_s=0.4 if fault == "slow" else 5.0)
    check_invariants(res, robot, ev)
    named = kinds(ev, "serve_fault")
    assert named and all(e["fault"] == fault for e in named) and len(named) == 2
    assert res.success, (res.outcome, res.reason)
    calls = kinds(ev, "vlm_call")
    if fault in ("http_429", "http_500", "slow"):
        retries = kinds(ev, "vlm_retry")
        assert len(retries) == 2 and tot["retries"] == 2
        want = {"http_429": "http_429", "http_500": "http_500", "slow": "timeout"}[fault]
        assert all(r["error"] == want for r in retries)
        if fault != "slow":                            # the server names it in the failed response too
            assert all(r["server_fault"] == fault for r in retries)
        with_retries = [c for c in calls if c.get("meta", {}).get("retries")]
        assert sum(len(c["meta"]["retries"]) for c in with_retries) == 2
    elif fault in ("malformed_json", "missing_field", "unknown_op"):
        reps = kinds(ev, "repair_request")
        assert reps and tot["repairs"] == len(reps)
        bad = [c for c in calls if not c["ok"]]
        assert bad and all(c["meta"]["server_fault"] == fault for c in bad)
        # the repair request quotes the parse error, and goes to the brain as chat history
        assert reps[0]["error"] and reps[0]["error"] in json.dumps(ev)
        assert [c for c in calls if c["attempt"] == 1]            # the repair was sent (and answered)
        # both injections hit the executor's first call and its repair: it failed safe, then recovered
        assert kinds(ev, "role_failed")[0]["role"] == "executor"
    elif fault == "bad_magnitude":
        bad_calls = [c for c in calls if c.get("meta", {}).get("server_fault") == fault]
        rejected = [e for e in kinds(ev, "report") if e["status"] == "rejected"]
        repaired = kinds(ev, "repair_request")
        assert len(bad_calls) == 2 and (rejected or repaired)
        for r in rejected:
            assert "exceeds" in r["reason"] and "limit" in r["reason"]
        for r in repaired:
            assert "finite" in r["error"]
    elif fault == "premature_done":
        rej = [v for v in kinds(ev, "verdict") if not v["achieved"]]
        assert len(rej) == 2 and res.verifier_rejections == 2 and res.replans == 2
        assert all("replan" == e["kind"] for e in kinds(ev, "replan"))
    elif fault == "injection":
        hit = {e["role"] for e in named}
        assert hit                                       # the string reached the roles' answers...
        for e in kinds(ev, "report"):                    # ...and no command over the limits ever ran
            for r in e["results"]:
                if r["status"] != "rejected" and r["command"].get("distance_mm"):
                    assert r["command"]["distance_mm"] <= robot.profile.limits.max_move_mm
        if "executor" in hit:
            rej = [e for e in kinds(ev, "report") if e["status"] == "rejected"]
            assert rej and "2000 mm exceeds the per-command limit" in rej[0]["reason"]


def test_a_planner_failing_safe_ends_the_episode_with_a_clear_reason(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, {"missing_field": 1.0, "limit": 2, "roles": ["planner"]})
    check_invariants(res, robot, ev)
    assert res.outcome == "gave_up" and res.reason.startswith("the planner failed safe (no valid plan): ")
    assert "$.subgoals: missing (required)" in res.reason              # the reason says why
    assert robot.executed == [] and len(kinds(ev, "repair_request")) == 1
    failed = kinds(ev, "role_failed")[0]
    assert failed["role"] == "planner" and "$.subgoals: missing (required)" in failed["error"]


def test_executor_injection_is_rejected_by_the_controller(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, {"injection": 1.0, "limit": 1, "roles": ["executor"]})
    check_invariants(res, robot, ev)
    assert res.success and res.controller_rejections == 1
    rej = next(e for e in kinds(ev, "report") if e["status"] == "rejected")
    assert "2000 mm exceeds the per-command limit 100 mm" in rej["reason"]
    assert INJECTION[:40] in json.dumps(kinds(ev, "batch")[0])       # it was data, nothing more


def test_every_call_failing_ends_the_episode_with_a_clear_reason_and_no_motion(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, {"http_500": 1.0})
    check_invariants(res, robot, ev)
    assert not res.success and res.outcome == "gave_up" and "planner failed safe" in res.reason
    assert robot.executed == []
    call = kinds(ev, "vlm_call")[0]
    assert not call["ok"] and "4 attempt(s) failed" in call["error"] and "server fault http_500" in call["error"]
    assert len(kinds(ev, "vlm_retry")) >= 3 and kinds(ev, "role_failed")


def test_an_executor_that_never_answers_usably_moves_nothing(tmp_path):
    res, robot, ev, srv, tot = run_fake(tmp_path, {"malformed_json": 1.0, "roles": ["executor"]},
                                        max_replans=1, max_batches=10)
    check_invariants(res, robot, ev)
    assert not res.success and res.outcome == "gave_up" and "executor failed" in res.reason
    assert robot.executed == [] and kinds(ev, "batch") == []
    assert len(kinds(ev, "repair_request")) == len(kinds(ev, "role_failed")) >= 3


def test_faults_at_a_rate_on_all_roles_at_once(tmp_path):
    """Every fault at 10% together: the invariants hold whatever the episode's fate."""
    plan = {f: 0.1 for f in FAULTS}
    plan.update(seed=11, slow_s=0.6)
    res, robot, ev, srv, tot = run_fake(tmp_path, plan, timeout_s=0.3)
    check_invariants(res, robot, ev)
    assert tot["server_faults"] == len(kinds(ev, "serve_fault")) > 0
    assert {e["fault"] for e in kinds(ev, "serve_fault")} <= set(FAULTS)
    assert all(math.isfinite(p) for p in robot.pos)
