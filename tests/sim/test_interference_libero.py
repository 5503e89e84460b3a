"""Interference on LIBERO-PRO (issue 16): an outside hand moves the target mid-carry; the oracle's
Monitor cancels the stale batch at the next action boundary, the Executor recomputes from the
moved scene and the episode succeeds; nothing of the event reaches a prompt. With the Monitor off
the stale batch runs to its end. One simulator for both episodes (libero_object task 0: the
alphabet soup into the basket; the basket is moved while the soup is carried)."""
import json

import numpy as np
import pytest

pytestmark = pytest.mark.sim

SPEC = dict(suite="libero_object", task=0, init_state=0, images=False, media=False)


def _setup(**kw):
    from motormind.session.setup import InterferenceSpec, libero_setup
    return libero_setup(**SPEC, interference=InterferenceSpec("target@carry"), **kw)


@pytest.fixture(scope="module")
def robot():
    from motormind.profile import load_profile
    from motormind.registry import build_robot
    r = build_robot(_setup().robot, load_profile("libero_panda"))
    yield r
    r.close()


def _episode(robot, out, **cfg):
    from motormind.episode.config import EpisodeConfig
    from motormind.session.open import open_episode
    s = open_episode(_setup(out=str(out), episode=EpisodeConfig(**cfg)), progress=lambda _: None, robot=robot)
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    return s, events


def _batch_report(events, bid):
    return next(e for e in events if e["kind"] == "report" and e["batch_id"] == bid)


def test_the_moved_target_is_seen_by_the_monitor_the_batch_cancelled_and_the_episode_succeeds(robot, tmp_path):
    s, events = _episode(robot, tmp_path / "full")
    itf = s["interference"]
    ev, m = itf["event"], itf["measures"]
    assert ev is not None and ev["privileged"] and ev["object"] == "basket_1" and ev["role"] == "target", itf
    # it moved in the simulation, on the table, and stayed there (nothing else touches the basket)
    assert 0.06 - 1e-3 <= ev["shift_m"] <= 0.15 + 1e-3
    assert abs(ev["moved_to_m"][2] - ev["moved_from_m"][2]) < 0.01
    now = robot.scene().object_pose("basket_1")[0]
    assert np.linalg.norm(now[:2] - np.array(ev["moved_to_m"][:2])) < 0.015
    assert np.linalg.norm(now[:2] - np.array(ev["moved_from_m"][:2])) > 0.05
    # the Monitor (privileged, labelled) cancelled the stale batch from its first snapshot after the event
    cancels = [e for e in events if e["kind"] == "monitor_cancel" and e["batch_id"] == ev["batch_id"]]
    assert cancels and "privileged" in cancels[0]["reason"] and "basket_1" in cancels[0]["reason"]
    # seen at the first boundary after the move (0: the Monitor's check of the boundary before ran
    # after the hand), honoured at the next one, or the one after when the Monitor's answer comes
    # back after that boundary has begun (its thread never blocks the Controller: load decides;
    # a clean-clone CI run under load gave 1 -> 3)
    assert m["cancel_boundary"] in (0, 1), m
    assert m["cancel_boundary"] + 1 <= m["honoured_boundary"] <= m["cancel_boundary"] + 2, m
    rep = _batch_report(events, ev["batch_id"])
    assert rep["status"] == "cancelled" and any(c["status"] == "cancelled" for c in rep["results"])
    assert m["stale_commands"] == m["honoured_boundary"] < len(rep["results"]) - ev["command_index"]
    # replanned from the new scene (the next batch) and succeeded
    assert m["next_batch"] is not None and m["next_batch"]["steps"] >= m["cancel"]["steps"] >= 0
    assert s["success"] and m["success"]["steps"] >= m["next_batch"]["steps"] and m["recovery_vlm_calls"] > 0
    # never in a prompt: the event's own words and figures (metres, as recorded)
    prompts = [e.get("system", "") + e.get("user", "") for e in events if e["kind"] == "vlm_call"]
    assert len(prompts) >= 5
    leaks = ["interference", "outside hand", "moved_to", "moved_from", "shift_m",
             json.dumps(ev["moved_to_m"]), json.dumps(ev["moved_from_m"])]
    for p in prompts:
        assert not [w for w in leaks if w in p.lower()], p[:400]
    kinds = [e["kind"] for e in events]
    assert kinds.count("interference") == 1 and kinds.index("interference") < kinds.index("monitor_cancel")


def test_without_the_monitor_the_stale_batch_runs_to_its_end(robot, tmp_path):
    s, events = _episode(robot, tmp_path / "no_monitor", monitor=False)
    ev, m = s["interference"]["event"], s["interference"]["measures"]
    assert ev is not None and ev["object"] == "basket_1"
    assert not [e for e in events if e["kind"] == "monitor_cancel"]
    rep = _batch_report(events, ev["batch_id"])
    assert rep["status"] != "cancelled", rep["reason"]
    # every command after the disturbance ran on the stale plan, up to the batch's end or until the
    # Controller itself stopped it (a blocked command: here the carried can meets the moved basket)
    ran = [c for c in rep["results"] if c["index"] >= ev["command_index"] and not c["reason"].startswith("not run")]
    unrun = [c for c in rep["results"] if c["reason"].startswith("not run")]
    assert all("blocked" in c["reason"] or "rejected" in c["reason"] or "faulted" in c["reason"] for c in unrun)
    assert m["cancel"] is None and m["honoured_boundary"] is None and m["cancel_boundary"] is None
    assert m["stale_commands"] == len(ran) > 2
