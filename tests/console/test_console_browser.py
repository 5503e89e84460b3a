"""The operator console in a real headless browser (Debian chromium driven by Playwright).

The console hosts the kinematic fake arm moving in real time (slowed to 40 mm/s so a person, and a
test, can act mid-command) with a scripted brain. Screenshots are kept in test-artifacts/console/."""
import dataclasses
import json
import os
import shutil
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

sync_api = pytest.importorskip("playwright.sync_api")

from motormind.brains.scripted import ScriptedBrain  # noqa: E402
from motormind.console.session import EpisodeHost  # noqa: E402
from motormind.profile import load_profile  # noqa: E402
from motormind.robots.fake import FakeRobot  # noqa: E402
from waiting import wait_for, written_events  # noqa: E402

pytestmark = pytest.mark.browser

ARTIFACTS = Path(os.environ.get("MOTORMIND_ARTIFACTS", Path(__file__).resolve().parents[2] / "test-artifacts")) / "console"
TOKEN = "test-token-123"
PLAN = {"subgoals": [{"id": "carry", "description": "carry the tool 60 mm left, then 60 mm up",
                      "success_criterion": "the tool is 60 mm left and 60 mm higher"}]}
CARRY = {"commands": [{"op": "move", "direction": "left", "distance_mm": 60},
                      {"op": "move", "direction": "up", "distance_mm": 60}, {"op": "done"}]}
LONG = {"commands": [{"op": "move", "direction": "left", "distance_mm": 100},
                     {"op": "move", "direction": "up", "distance_mm": 100}, {"op": "done"}]}


def chromium_path() -> str:
    path = os.environ.get("MOTORMIND_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (scripts/setup.sh installs Debian's chromium)")
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return path


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=chromium_path(), headless=True, args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    # bypass_csp: the page's CSP forbids eval, which Playwright's wait_for_function("...") uses
    ctx = browser.new_context(viewport={"width": 1500, "height": 1000}, bypass_csp=True)
    pg = ctx.new_page()
    yield pg
    ctx.close()


def make_host(tmp_path, executor, approval=False):
    prof = dataclasses.replace(load_profile("fake"), move_mm_s=40.0)
    robot = FakeRobot(prof, realtime=True, image_size=64)
    brain = lambda: ScriptedBrain({"planner": [PLAN], "executor": executor})  # noqa: E731
    host = EpisodeHost(robot, brain, tmp_path / "runs", port=0, token=TOKEN, approval=approval).start()
    return host, robot


def shot(page, name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    p = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(p), full_page=True)
    return p


def frame_bytes(host, camera="front") -> bytes:
    with urllib.request.urlopen(f"{host.session.url}api/frame/{camera}", timeout=5) as r:
        return r.read()


def events(run_root: Path, kind: str) -> list:
    out = []
    for f in sorted(run_root.rglob("events.jsonl")):
        out += written_events(f, kind)
    return out


def test_approval_batch_waits_then_runs_and_frames_follow_the_arm(page, tmp_path):
    host, robot = make_host(tmp_path, [CARRY])
    try:
        page.goto(host.session.server.control_url)
        page.wait_for_selector("#cameras img[data-camera=front]")
        seq0 = int(page.get_attribute("#cameras img", "data-seq"))
        img0 = frame_bytes(host)
        page.check("#approval")
        wait_for(lambda: host.session.desk.approval, what="approval mode on")
        page.fill("#instruction", "carry the tool left and up")
        page.click("#form-instruction button")
        page.wait_for_selector(".pending-item.review", timeout=20000)
        time.sleep(0.5)                                 # it keeps waiting: nothing moves
        assert robot.executed == [] and host.session.desk.pending
        assert "awaiting approval" in page.inner_text("#queue")
        shot(page, "01-approval-waiting")
        page.click(".pending-item.review button.approve")
        page.wait_for_function("document.querySelector('#queue [data-batch=b1]')?.innerText.includes('done')",
                               timeout=20000)
        page.wait_for_function("document.getElementById('episode').innerText.includes('success')", timeout=20000)
        seq1 = int(page.get_attribute("#cameras img", "data-seq"))
        assert seq1 > seq0 + 1                           # a frame at every action boundary
        assert frame_bytes(host) != img0                  # and it shows the arm somewhere else
        assert robot.pos * 1000 == pytest.approx([400, 60, 260], abs=1.5)
        shot(page, "02-approved-and-done")
        dec = events(tmp_path / "runs", "review_decision")
        assert [d["decision"] for d in dec] == ["approved"]
        acts = [e["action"] for e in events(tmp_path / "runs", "operator_action")]
        assert "approve" in acts and all("t" in e for e in events(tmp_path / "runs", "operator_action"))
    finally:
        host.close()


def test_estop_click_stops_mid_command_latches_and_needs_reset(page, tmp_path):
    host, robot = make_host(tmp_path, [LONG])
    try:
        page.goto(host.session.server.control_url)
        page.fill("#instruction", "carry the tool far left")
        page.click("#form-instruction button")
        wait_for(lambda: robot.pos[1] > 0.02, what="the first move to be under way")   # 20 of 100 mm
        page.click("#btn-estop")
        page.wait_for_function("document.getElementById('estop-state').innerText.includes('LATCHED')")
        page.wait_for_function("document.querySelector('#queue [data-batch=b1]')?.innerText.includes('emergency stop')",
                               timeout=10000)
        y = robot.pos[1]
        time.sleep(0.5)
        assert robot.pos[1] == y and 0.02 < y < 0.09     # stopped mid-command, and stays stopped
        rep = events(tmp_path / "runs", "report")[0]
        assert rep["status"] == "cancelled" and rep["estop"]
        first, second = rep["results"][0], rep["results"][1]
        assert first["status"] == "cancelled" and "emergency stop mid-command" in first["reason"]
        assert 20 < first["achieved"]["translation_mm"][1] < 90
        assert second["status"] == "cancelled"
        shot(page, "03-estop-latched")
        page.fill("#jog-mm", "10")                           # latched: the jog pad is disabled, saying why
        assert page.is_disabled("#jog-up") and "latched" in page.get_attribute("#jog-up", "title")
        assert "latched" in page.inner_text("#jog-note")
        page.evaluate("() => jog({op: 'move', direction: 'up', distance_mm: 10})")   # sent anyway: refused
        page.wait_for_function("document.getElementById('jog-result').innerText.includes('emergency stop latched')")
        assert robot.pos[1] == y
        assert page.is_disabled("#btn-resume") and "reset it first" in page.get_attribute("#btn-resume", "title")
        page.click("#btn-reset")
        page.wait_for_function("!document.getElementById('estop-state').innerText.includes('LATCHED')")
        assert not host.session.controller.estopped
        page.keyboard.press("Escape")                        # the keyboard shortcut
        page.wait_for_function("document.getElementById('estop-state').innerText.includes('LATCHED')")
        assert host.session.controller.estopped
    finally:
        host.close()


def _post(host, action, body, token=TOKEN):
    req = urllib.request.Request(f"{host.session.url}api/action/{action}", json.dumps(body).encode(),
                                 {"X-MotorMind-Token": token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read())


def _estop_box(page) -> dict:
    return page.locator("#btn-estop").bounding_box()


def test_pause_while_awaiting_approval_parks_then_a_jog_moves_the_arm(page, tmp_path):
    """Issue 31 item 2: the page says "pausing..." until the server is parked, then "paused"; a
    paused episode waiting for approval is parked, and a jog moves the arm; the approval given while
    paused runs only after resume."""
    host, robot = make_host(tmp_path, [CARRY], approval=True)
    try:
        page.goto(host.session.server.control_url)
        page.fill("#instruction", "carry the tool left and up")
        page.click("#form-instruction button")
        page.wait_for_selector(".pending-item.review", timeout=20000)
        page.click("#btn-pause")
        page.wait_for_function("document.getElementById('estop-state').innerText === 'paused'")
        assert host.session.desk.parked and host.session.runtime.status()["jog"] == ""
        page.fill("#jog-mm", "20")
        page.click("#jog-up")
        page.wait_for_function("document.querySelector('#queue [data-batch=jog1]')?.innerText.includes('done')",
                               timeout=10000)
        assert "started" in page.inner_text("#jog-result")
        assert robot.pos[2] * 1000 == pytest.approx(220, abs=1.5)
        shot(page, "08-paused-awaiting-approval-jogged")
        page.click(".pending-item.review button.approve")      # approved while paused: held until resume
        page.wait_for_function("!document.querySelector('.pending-item.review')")
        time.sleep(0.5)
        assert [m.kind for m in robot.executed] == ["move"]    # the jog only
        page.click("#btn-resume")
        rep = wait_for(lambda: next((r for r in events(tmp_path / "runs", "report") if r["batch_id"] == "b1"), None),
                       timeout=20, what="the approved batch's report")
        assert rep["status"] == "done", rep
        assert robot.pos * 1000 == pytest.approx([400, 60, 280], abs=1.5)
    finally:
        host.close()


def test_an_estop_while_awaiting_approval_then_reset_resume_approve_runs_the_batch(page, tmp_path):
    """Issue 31 item 1, on the page: e-stop while no batch runs, reset, resume, approve: the batch runs
    (nothing of the e-stop is left to cancel it)."""
    host, robot = make_host(tmp_path, [CARRY], approval=True)
    try:
        page.goto(host.session.server.control_url)
        page.fill("#instruction", "carry the tool left and up")
        page.click("#form-instruction button")
        page.wait_for_selector(".pending-item.review", timeout=20000)
        page.click("#btn-estop")
        page.wait_for_function("document.getElementById('estop-state').innerText.includes('LATCHED')")
        page.click("#btn-reset")
        page.wait_for_function("!document.getElementById('estop-state').innerText.includes('LATCHED')")
        page.click("#btn-resume")
        page.wait_for_function("document.getElementById('estop-state').innerText === 'ready'")
        page.click(".pending-item.review button.approve")
        rep = wait_for(lambda: next((r for r in events(tmp_path / "runs", "report") if r["batch_id"] == "b1"), None),
                       timeout=20, what="the approved batch's report")
        assert rep["status"] == "done" and not rep["estop"], rep
    finally:
        host.close()


def test_a_rejected_edit_shows_the_rejection_where_it_was_approved(page, tmp_path):
    """Issue 31 item 3: the result of an approval is the Controller's verdict, in the approval panel."""
    host, robot = make_host(tmp_path, [CARRY], approval=True)
    try:
        page.goto(host.session.server.control_url)
        page.fill("#instruction", "carry the tool left and up")
        page.click("#form-instruction button")
        page.wait_for_selector(".pending-item.review", timeout=20000)
        page.fill(".pending-item.review textarea",
                  '{"commands": [{"op": "move", "direction": "up", "distance_mm": 500}]}')
        page.click(".pending-item.review button.approve-edited")
        sel = ".pending-item.review .approval-result"
        page.wait_for_function(f"document.querySelector('{sel}')?.innerText.includes('rejected')")
        text = page.inner_text(sel)
        assert "rejected by the Controller: commands[0].distance_mm: 500 mm exceeds the per-command limit 100 mm" \
            in text, text
        assert "error" in page.get_attribute(sel, "class") and "approved" not in text
        assert "edited and approved" not in page.inner_text("#action-result")
        shot(page, "09-edit-rejected-in-the-panel")
        assert robot.executed == [] and host.session.desk.pending       # nothing moved; it still waits
        assert "rejected by the Controller" in page.inner_text("#pending-result")   # the panel's heading too
        page.click(".pending-item.review button.approve")        # accepted: the batch leaves the panel
        page.wait_for_function("document.getElementById('pending-result').innerText.includes('accepted')")
        assert "ok" in page.get_attribute("#pending-result", "class")
    finally:
        host.close()


def test_the_estop_button_never_moves_and_approve_is_disabled_while_latched(page, tmp_path):
    """Issue 31 item 4: the stop control keeps its exact place latched and unlatched; approving cannot
    run while latched, so Approve is disabled, with the reason shown."""
    host, robot = make_host(tmp_path, [CARRY], approval=True)
    try:
        page.goto(host.session.server.control_url)
        page.fill("#instruction", "carry the tool left and up")
        page.click("#form-instruction button")
        page.wait_for_selector(".pending-item.review", timeout=20000)
        page.wait_for_function("document.getElementById('estop-state').innerText === 'ready'")
        before = _estop_box(page)
        assert page.is_enabled(".pending-item.review button.approve")
        page.click("#btn-estop")
        page.wait_for_function("document.getElementById('estop-state').innerText.includes('LATCHED')")
        shot(page, "10-latched-approve-disabled")
        assert _estop_box(page) == before
        for b in ("approve", "approve-edited"):
            sel = f".pending-item.review button.{b}"
            assert page.is_disabled(sel) and "emergency stop is latched" in page.get_attribute(sel, "title")
        assert "emergency stop is latched" in page.inner_text(".pending-item.review .why-disabled")
        assert page.is_enabled(".pending-item.review button.reject")     # rejecting moves nothing: it may
        page.click("#btn-reset")
        page.wait_for_function("!document.getElementById('estop-state').innerText.includes('LATCHED')")
        assert _estop_box(page) == before
        assert page.is_enabled(".pending-item.review button.approve")
    finally:
        host.close()


def test_jog_beyond_limits_is_rejected_with_the_reason_on_screen(page, tmp_path):
    host, robot = make_host(tmp_path, [CARRY])
    try:
        page.goto(host.session.server.control_url)
        page.wait_for_selector("#measured td[data-key=eef_pos_mm]")
        page.fill("#jog-mm", "500")
        page.click("#jog-forward")
        page.wait_for_function("document.getElementById('jog-result').innerText.includes('refused')")
        text = page.inner_text("#jog-result")
        assert "distance_mm: 500 mm exceeds the per-command limit 100 mm" in text
        assert robot.executed == []
        page.wait_for_function("document.querySelector('#queue [data-batch=jog1]')?.innerText.includes('rejected')")
        shot(page, "04-jog-rejected")
        page.fill("#jog-mm", "20")
        page.click("#jog-forward")
        page.wait_for_function("document.querySelector('#queue [data-batch=jog2]')?.innerText.includes('done')")
        assert robot.pos[0] * 1000 == pytest.approx(420, abs=1.5)
        page.wait_for_function("document.querySelector('#measured td[data-key=eef_pos_mm]').innerText.startsWith('[420')")
        rows = events(tmp_path / "runs", "operator_action")
        assert [(r["action"], r["ok"]) for r in rows] == [("jog", False), ("jog", True)]
    finally:
        host.close()


def test_control_without_the_token_is_refused(page, tmp_path):
    host, robot = make_host(tmp_path, [CARRY])
    try:
        page.goto(host.session.url)                          # no token: a read-only view
        page.wait_for_selector("#cameras img[data-camera=front]")
        assert page.inner_text("#mode") == "read-only"
        assert page.is_disabled("#btn-pause") and page.is_disabled("#jog-forward")
        page.click("#btn-estop")                             # always visible and clickable; the server decides
        page.wait_for_function("document.getElementById('action-result').innerText.includes('refused')")
        assert "token" in page.inner_text("#action-result")
        assert not host.session.controller.estopped
        shot(page, "05-read-only-refused")
        req = urllib.request.Request(host.session.url + "api/action/jog", json.dumps(
            {"command": {"op": "move", "direction": "up", "distance_mm": 10}}).encode(),
            {"X-MotorMind-Token": "wrong"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req, timeout=5)
        assert e.value.code == 401
        assert robot.executed == []
        refused = [e for e in events(tmp_path / "runs", "operator_action") if not e["ok"]]
        assert [r["action"] for r in refused] == ["estop", "jog"]
    finally:
        host.close()


@pytest.mark.sim
def test_run_console_shows_a_libero_oracle_episode_live(page, tmp_path):
    """`motormind run --console --approval`: the page follows a LIBERO-PRO oracle episode; frames
    change as the arm moves; the record keeps the operator's actions.

    Issue 31 on the simulator (LIBERO's stop() while idle latched into the next execute): an e-stop
    pressed while no batch runs, reset, resume, approve runs that batch (done, not 'emergency stop
    mid-command ()'); a cancel's reason is never empty. The page says what the server acts on:
    latched, approve/resume/jog disabled with the reason; reset while a batch awaits approval,
    "paused" with the jog pad enabled; a pause mid-batch is "pausing..." (held between commands, the
    jog pad disabled saying why) until resume."""
    import re
    import subprocess
    import sys
    import threading
    out = tmp_path / "run"
    env = {**os.environ, "MUJOCO_GL": os.environ.get("MUJOCO_GL", "osmesa")}
    p = subprocess.Popen([sys.executable, "-m", "motormind.cli", "run", "--suite", "libero_spatial", "--task", "0",
                          "--console", "127.0.0.1:0", "--console-token", TOKEN, "--approval", "--no-media",
                          "--out", str(out)],
                         env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(p.stdout), daemon=True)
    reader.start()

    def report(bid):
        f = out / "events.jsonl"
        return next((r for r in (written_events(f, "report") if f.exists() else []) if r["batch_id"] == bid), None)

    def state_is(text):
        page.wait_for_function(f"document.getElementById('estop-state').innerText === {json.dumps(text)}")

    try:
        m = wait_for(lambda: re.search(r"console: (http://127\.0\.0\.1:\d+/)  token: (\S+)", "".join(lines)),
                     timeout=120, what="the console banner")
        url = m.group(1)
        assert m.group(2) == TOKEN
        page.goto(f"{url}#token={TOKEN}")
        page.wait_for_selector("#cameras img[data-camera=agentview]", timeout=60000)
        page.wait_for_function("document.getElementById('episode').innerText.includes('privileged')")
        seqs = [int(page.get_attribute("#cameras img[data-camera=agentview]", "data-seq"))]
        page.wait_for_selector(".pending-item.review", timeout=60000)     # b1 waits: no batch runs
        assert "b1" in page.inner_text(".pending-item.review")
        state_is("ready")

        page.click("#btn-estop")                              # e-stop while idle
        page.wait_for_function("document.getElementById('estop-state').innerText.includes('LATCHED')")
        for sel in (".pending-item.review button.approve", "#btn-resume", "#jog-up"):
            assert page.is_disabled(sel) and "latched" in page.get_attribute(sel, "title"), sel
        shot(page, "06-libero-latched-while-idle")
        page.click("#btn-reset")
        state_is("paused")                                    # parked at the approval: the arm is idle
        assert page.is_enabled("#jog-up") and page.inner_text("#jog-note") == ""
        page.click("#btn-resume")
        state_is("ready")
        page.click(".pending-item.review button.approve")
        rep = wait_for(lambda: report("b1"), timeout=120, what="b1's report")
        assert rep["status"] == "done" and not rep["estop"], f"{rep['status']}: {rep['reason']}"   # nothing of it left
        page.wait_for_function("document.querySelector('#queue [data-batch=b1]')?.innerText.includes('done')")
        page.wait_for_function(f"Number(document.querySelector('#cameras img[data-camera=agentview]').dataset.seq) > {seqs[0] + 2}",
                               timeout=60000)
        shot(page, "07-libero-b1-done-after-estop-reset")

        page.wait_for_selector(".pending-item.review", timeout=120000)    # b2: approve, pause mid-batch
        assert "b2" in page.inner_text(".pending-item.review")
        page.click(".pending-item.review button.approve")
        page.wait_for_function("document.querySelector('#queue [data-batch=b2]')?.innerText.includes('running')",
                               timeout=60000)
        page.click("#btn-pause")
        page.wait_for_function("document.getElementById('action-result').innerText.startsWith('pause: pausing')")
        page.wait_for_function("document.getElementById('estop-state').innerText.startsWith('pausing… batch b2 before "
                               "command') && document.getElementById('estop-state').innerText.includes('is held')",
                               timeout=60000)
        assert page.is_disabled("#jog-up") and "held by the pause" in page.get_attribute("#jog-up", "title")
        assert report("b2") is None                          # held between commands, not ended
        shot(page, "08-libero-pausing-held-mid-batch")
        page.click("#btn-resume")
        state_is("ready")
        rep2 = wait_for(lambda: report("b2"), timeout=120, what="b2's report")
        assert rep2["status"] == "done", f"{rep2['status']}: {rep2['reason']}"
        page.uncheck("#approval")                             # the rest runs without approval
        page.wait_for_function("document.getElementById('episode').innerText.includes('ended')", timeout=180000)
        shot(page, "09-libero-episode-ended")
        assert "success" in page.inner_text("#episode")
        assert "()" not in page.inner_text("#queue")
        p.wait(timeout=60)
    except Exception as e:
        shot(page, "06-libero-episode-FAILED")
        raise AssertionError(f"{e}\n--- motormind run said ---\n{''.join(lines)[-4000:]}") from e
    finally:
        if p.poll() is None:
            p.kill()
        reader.join(timeout=10)
    assert p.returncode == 0, "".join(lines)[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["success"] and summary["privileged"]
    evs = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines()]
    acts = [(e["action"], e["ok"]) for e in evs if e["kind"] == "operator_action"]
    assert acts == [("estop", True), ("reset", True), ("resume", True), ("approve", True), ("approve", True),
                    ("pause", True), ("resume", True), ("approval", True)], acts
    reasons = [r["reason"] for e in evs if e["kind"] == "report" for r in [e, *e["results"]]
               if r["status"] == "cancelled"]
    assert all(r.strip() and not r.endswith("()") for r in reasons), reasons      # a cancel always says why
